//! The mock's mailbox: labels, messages, a history log, tokens and faults, behind one mutex.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Gmail's system labels (ids equal names).
pub const SYSTEM_LABELS: [&str; 12] = [
    "INBOX",
    "SPAM",
    "TRASH",
    "UNREAD",
    "STARRED",
    "IMPORTANT",
    "SENT",
    "DRAFT",
    "CATEGORY_PERSONAL",
    "CATEGORY_SOCIAL",
    "CATEGORY_PROMOTIONS",
    "CATEGORY_UPDATES",
];
pub const SCOPE_MODIFY: &str = "https://www.googleapis.com/auth/gmail.modify";
/// What `users.settings.filters` create and delete need.
pub const SCOPE_SETTINGS: &str = "https://www.googleapis.com/auth/gmail.settings.basic";
pub const SCOPE_FULL: &str = "https://mail.google.com/";

#[derive(Debug, Clone)]
pub struct Label {
    pub id: String,
    pub name: String,
    pub system: bool,
}

impl Label {
    pub fn json(&self) -> Value {
        let mut v = json!({
            "id": self.id, "name": self.name,
            "type": if self.system { "system" } else { "user" },
        });
        if !self.system {
            v["messageListVisibility"] = "show".into();
            v["labelListVisibility"] = "labelShow".into();
        }
        v
    }
}

#[derive(Debug, Clone)]
pub struct Message {
    pub id: String,
    pub thread_id: String,
    pub labels: BTreeSet<String>,
    pub history_id: u64,
    pub internal_date: i64,
    pub headers: Vec<(String, String)>,
    pub snippet: String,
    pub body: String,
}

impl Message {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Its RFC 5322 source.
    pub fn source(&self) -> Vec<u8> {
        let mut source = String::new();
        for (n, val) in &self.headers {
            source.push_str(&format!("{n}: {val}\r\n"));
        }
        source.push_str("\r\n");
        source.push_str(&self.body);
        source.into_bytes()
    }

    fn size(&self) -> usize {
        self.headers
            .iter()
            .map(|(n, v)| n.len() + v.len() + 4)
            .sum::<usize>()
            + self.body.len()
    }

    /// The resource as `messages.get` returns it in `format`.
    pub fn json(&self, format: &str, wanted: &[String]) -> Value {
        let mut v = json!({
            "id": self.id, "threadId": self.thread_id,
            "labelIds": self.labels.iter().collect::<Vec<_>>(),
            "historyId": self.history_id.to_string(),
            "internalDate": self.internal_date.to_string(),
            "sizeEstimate": self.size(),
            "snippet": self.snippet,
        });
        let headers = |filter: bool| -> Vec<Value> {
            self.headers
                .iter()
                .filter(|(n, _)| !filter || wanted.iter().any(|w| w.eq_ignore_ascii_case(n)))
                .map(|(n, val)| json!({ "name": n, "value": val }))
                .collect()
        };
        match format {
            "minimal" => {
                if let Some(map) = v.as_object_mut() {
                    map.remove("snippet");
                }
            }
            "metadata" => {
                v["payload"] =
                    json!({ "mimeType": "text/plain", "headers": headers(!wanted.is_empty()) });
            }
            "raw" => {
                v["raw"] = base64::Engine::encode(
                    &base64::engine::general_purpose::URL_SAFE,
                    self.source(),
                )
                .into();
            }
            _ => v["payload"] = crate::parts::payload(&self.source(), &self.id),
        }
        v
    }
}

#[derive(Debug, Clone)]
pub enum Event {
    Added,
    Deleted,
    LabelsAdded(Vec<String>),
    LabelsRemoved(Vec<String>),
}

/// One change to the mailbox. Like Gmail's `History` resource ("each history change may affect
/// multiple messages in multiple ways"), one API call makes one record: a batchModify of 1,000
/// ids is one record holding 1,000 label changes.
#[derive(Debug, Clone)]
pub struct HistoryRecord {
    pub id: u64,
    pub changes: Vec<(String, Event)>,
}

#[derive(Debug, Clone)]
pub struct Token {
    pub scopes: Vec<String>,
    pub expires: Instant,
    pub refresh: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Grant {
    pub challenge: String,
    pub redirect_uri: String,
    pub scope: String,
}

/// Faults the next requests meet, set per test.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Share of API calls answered 429 with Retry-After (0.0–1.0).
    pub rate_limit: f64,
    pub retry_after_secs: u64,
    /// The next N API calls answer 500.
    pub errors: u32,
    /// The next N write calls are applied, then the connection is dropped unanswered.
    pub drop_after_write: u32,
    /// Counter behind `rate_limit`, so the pattern is deterministic.
    pub counter: u64,
    /// How long each API call takes to answer, as over a real network: enough for a
    /// client's concurrent calls to overlap (`Logged::in_flight`).
    pub latency: std::time::Duration,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Logged {
    pub method: String,
    pub path: String,
    pub status: u16,
    /// For batch calls: how many ids the body held.
    pub ids: Option<usize>,
    /// API calls in flight when this one arrived, itself included: how many a client keeps
    /// going at once.
    pub in_flight: usize,
}

#[derive(Default)]
pub struct State {
    pub email: String,
    pub labels: BTreeMap<String, Label>,
    pub messages: BTreeMap<String, Message>,
    pub history: Vec<HistoryRecord>,
    pub history_id: u64,
    /// history.list from before this id answers 404 (history expired).
    pub oldest_history: u64,
    pub next_id: u64,
    pub tokens: HashMap<String, Token>,
    pub refresh_tokens: HashMap<String, Vec<String>>,
    pub codes: HashMap<String, Grant>,
    pub faults: Faults,
    pub log: Vec<Logged>,
    /// API calls being answered now.
    pub in_flight: usize,
    pub token_ttl: Duration,
    /// Access tokens issued for a refresh token so far.
    pub refreshes: u64,
    /// The OAuth clients Google knows: id → secret (a Desktop app client has one, and the
    /// token endpoint requires it).
    pub clients: HashMap<String, String>,
    /// `users.settings.filters`, by id, as Gmail keeps them.
    pub filters: BTreeMap<String, Value>,
    pub next_filter: u64,
    /// `users.drafts`: each draft's id and the id of the message it is now.
    pub drafts: BTreeMap<String, String>,
    pub next_draft: u64,
}

/// The client the tests and the demo sign in with, a Desktop app client as Google's console
/// makes one, and its secret.
pub const TEST_CLIENT: (&str, &str) = ("mailbroker-test", "GOCSPX-mock-desktop-secret");

pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    let _ = getrandom::fill(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

impl State {
    pub fn new(email: &str) -> State {
        let mut s = State {
            email: email.into(),
            history_id: 1000,
            oldest_history: 1000,
            token_ttl: Duration::from_secs(3600),
            clients: HashMap::from([(TEST_CLIENT.0.to_string(), TEST_CLIENT.1.to_string())]),
            ..State::default()
        };
        for name in SYSTEM_LABELS {
            s.labels.insert(
                name.into(),
                Label {
                    id: name.into(),
                    name: name.into(),
                    system: true,
                },
            );
        }
        s
    }

    fn record(&mut self, changes: Vec<(String, Event)>) -> u64 {
        self.history_id += 1;
        self.history.push(HistoryRecord {
            id: self.history_id,
            changes,
        });
        self.history_id
    }

    /// A new access token with `scopes`, live for the token TTL. `minted_by` is the refresh
    /// token behind it, so revoking that ends this one too.
    pub fn mint_token(&mut self, scopes: Vec<String>, minted_by: Option<String>) -> String {
        let token = format!("ya29.mock-{}", random_hex(16));
        let expires = Instant::now() + self.token_ttl;
        self.tokens.insert(
            token.clone(),
            Token {
                scopes,
                expires,
                refresh: minted_by,
            },
        );
        token
    }

    /// Every access token expires now; refresh tokens stay good.
    pub fn expire_tokens(&mut self) {
        let now = Instant::now();
        self.tokens.values_mut().for_each(|t| t.expires = now);
    }

    pub fn create_label(&mut self, name: &str) -> Label {
        if let Some(l) = self.labels.values().find(|l| l.name == name) {
            return l.clone();
        }
        self.next_id += 1;
        let label = Label {
            id: format!("Label_{}", self.next_id),
            name: name.into(),
            system: false,
        };
        self.labels.insert(label.id.clone(), label.clone());
        label
    }

    pub fn add_message(
        &mut self,
        headers: Vec<(String, String)>,
        body: &str,
        labels: &[&str],
    ) -> String {
        self.next_id += 1;
        let id = format!("{:016x}", 0x18c0_0000_0000_0000u64 + self.next_id);
        let date = 1_790_000_000_000 + self.next_id as i64 * 60_000;
        let mut msg = Message {
            id: id.clone(),
            thread_id: id.clone(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            history_id: 0,
            internal_date: date,
            headers,
            snippet: body.chars().take(100).collect(),
            body: body.into(),
        };
        msg.history_id = self.record(vec![(id.clone(), Event::Added)]);
        self.messages.insert(id.clone(), msg);
        id
    }

    /// Adds `count` messages with these labels (ids, or names: a new name becomes a user
    /// label), numbered on from the messages already there; returns their ids.
    pub fn seed(&mut self, count: usize, labels: &[String], from: &str) -> Vec<String> {
        let labels: Vec<String> = labels
            .iter()
            .map(|l| match self.labels.contains_key(l) {
                true => l.clone(),
                false => self.create_label(l).id,
            })
            .collect();
        let refs: Vec<&str> = labels.iter().map(String::as_str).collect();
        let start = self.messages.len();
        (start..start + count)
            .map(|i| {
                let headers = vec![
                    ("From".to_string(), from.to_string()),
                    ("To".to_string(), self.email.clone()),
                    ("Subject".to_string(), format!("Message {i}")),
                    (
                        "Date".to_string(),
                        "Mon, 2 Nov 2026 10:00:00 +0000".to_string(),
                    ),
                    ("Message-ID".to_string(), format!("<m{i}@mock.example>")),
                ];
                self.add_message(headers, &format!("Body of message {i}."), &refs)
            })
            .collect()
    }

    /// Applies one label change to one message; see `modify_many`.
    pub fn modify(&mut self, id: &str, add: &[String], remove: &[String]) -> bool {
        self.modify_many(&[id.to_string()], add, remove) == 1
    }

    /// Applies a label change to these messages as one history record that lists only the
    /// labels that really changed (none at all: no record). Returns how many ids exist.
    pub fn modify_many(&mut self, ids: &[String], add: &[String], remove: &[String]) -> usize {
        let mut found = 0;
        let mut changes = Vec::new();
        for id in ids {
            let Some(msg) = self.messages.get_mut(id) else {
                continue;
            };
            found += 1;
            let added: Vec<String> = add
                .iter()
                .filter(|l| !msg.labels.contains(*l))
                .cloned()
                .collect();
            let removed: Vec<String> = remove
                .iter()
                .filter(|l| msg.labels.contains(*l))
                .cloned()
                .collect();
            msg.labels.extend(added.iter().cloned());
            for l in &removed {
                msg.labels.remove(l);
            }
            if !added.is_empty() {
                changes.push((id.clone(), Event::LabelsAdded(added)));
            }
            if !removed.is_empty() {
                changes.push((id.clone(), Event::LabelsRemoved(removed)));
            }
        }
        if changes.is_empty() {
            return found;
        }
        let touched: BTreeSet<String> = changes.iter().map(|(id, _)| id.clone()).collect();
        let record = self.record(changes);
        for id in touched {
            if let Some(msg) = self.messages.get_mut(&id) {
                msg.history_id = record;
            }
        }
        found
    }

    /// Deletes these messages for good as one history record; returns how many existed.
    pub fn delete_many(&mut self, ids: &[String]) -> usize {
        let gone: Vec<(String, Event)> = ids
            .iter()
            .filter(|id| self.messages.remove(*id).is_some())
            .map(|id| (id.clone(), Event::Deleted))
            .collect();
        let n = gone.len();
        if n > 0 {
            self.record(gone);
        }
        n
    }
}
