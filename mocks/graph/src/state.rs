//! The mailbox the mock holds: nested folders, messages, master categories, and a change
//! sequence that delta queries read from.
//!
//! Every change to a message (a PATCH, a move in or out, a deletion) takes the next number
//! of one sequence. A delta link names a folder and the sequence number its answer was
//! current with; the next delta from it lists the folder's messages changed after that
//! number, and, as `@removed`, the ones that left the folder after it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// Folders every mailbox has, by their well-known names (Graph's `wellKnownName`).
pub const WELL_KNOWN: [(&str, &str); 6] = [
    ("inbox", "Inbox"),
    ("archive", "Archive"),
    ("junkemail", "Junk Email"),
    ("deleteditems", "Deleted Items"),
    ("sentitems", "Sent Items"),
    ("drafts", "Drafts"),
];

#[derive(Debug, Clone)]
pub struct Folder {
    pub id: String,
    pub name: String,
    pub parent: Option<String>,
    pub well_known: Option<&'static str>,
}

#[derive(Debug, Clone)]
pub struct Message {
    pub id: String,
    pub folder: String,
    pub subject: String,
    pub from: String,
    pub received: String,
    pub is_read: bool,
    /// `notFlagged`, `flagged` or `complete`.
    pub flag: String,
    pub categories: Vec<String>,
    pub internet_message_id: String,
    /// The conversation it belongs to, when not one of its own.
    pub conversation: Option<String>,
    /// Internet headers Exchange keeps as named properties of the `PS_INTERNET_HEADERS`
    /// property set (`List-Id`, `List-Unsubscribe`): name and value. Graph v1.0 returns them
    /// only as single-value extended properties a request expands by id.
    pub internet_headers: Vec<(String, String)>,
    /// The sequence number of its last change; its changeKey is derived from it.
    pub changed: u64,
    /// What a draft has that the mock keeps of no other message.
    pub draft: Option<DraftPart>,
    /// Its file attachments, in the order of its MIME parts.
    pub attachments: Vec<FileAttachment>,
}

/// A file attachment (`microsoft.graph.fileAttachment`).
#[derive(Debug, Clone, Default)]
pub struct FileAttachment {
    pub id: String,
    pub name: String,
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// A draft's recipients, text body and the message it answers.
#[derive(Debug, Clone, Default)]
pub struct DraftPart {
    pub to: Vec<String>,
    pub cc: Vec<String>,
    pub body: String,
    pub in_reply_to: Option<String>,
}

fn recipients(list: &[String]) -> Value {
    list.iter()
        .map(|a| json!({ "emailAddress": { "name": "", "address": a } }))
        .collect()
}

impl Message {
    pub fn change_key(&self) -> String {
        format!("CQAAABYAAAD{:08}", self.changed)
    }

    /// Its MIME source, as `GET /me/messages/{id}/$value` returns it.
    pub fn mime(&self) -> String {
        let extra: String = self
            .internet_headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}\r\n"))
            .collect();
        let head = format!(
            "From: {from}\r\nTo: me@mock.example\r\nSubject: {subject}\r\n{extra}\
             Message-ID: {mid}\r\nMIME-Version: 1.0\r\n",
            from = self.from,
            subject = self.subject,
            mid = self.internet_message_id,
        );
        let text = format!(
            "Content-Type: text/plain; charset=utf-8\r\n\r\nBody of {}.\r\n",
            self.subject
        );
        if self.attachments.is_empty() {
            return format!("{head}{text}");
        }
        let mut out = format!("{head}Content-Type: multipart/mixed; boundary=mockpart\r\n\r\n");
        out.push_str(&format!("--mockpart\r\n{text}"));
        for a in &self.attachments {
            use base64::Engine;
            let data = base64::engine::general_purpose::STANDARD.encode(&a.bytes);
            out.push_str(&format!(
                "--mockpart\r\nContent-Type: {}\r\nContent-Disposition: attachment; \
                 filename=\"{}\"\r\nContent-Transfer-Encoding: base64\r\n\r\n{data}\r\n",
                a.content_type, a.name
            ));
        }
        out.push_str("--mockpart--\r\n");
        out
    }

    /// Its single-value extended properties whose ids are among `ids` (compared as Exchange
    /// compares them: the property set's GUID in any case, the name exactly), as Graph
    /// returns them (the GUID in lower case).
    pub fn extended_properties(&self, ids: &[String]) -> Vec<Value> {
        self.internet_headers
            .iter()
            .filter_map(|(name, value)| {
                let id = format!("String {{{PS_INTERNET_HEADERS}}} Name {name}");
                ids.iter()
                    .any(|asked| same_property_id(asked, &id))
                    .then(|| json!({ "id": id, "value": value }))
            })
            .collect()
    }

    /// The message as Graph v1.0 returns it, every property the mock keeps.
    pub fn json(&self) -> Value {
        json!({
            "@odata.type": "#microsoft.graph.message",
            "@odata.etag": format!("W/\"{}\"", self.change_key()),
            "id": self.id,
            "changeKey": self.change_key(),
            "parentFolderId": self.folder,
            "subject": self.subject,
            "from": { "emailAddress": { "name": "", "address": self.from } },
            "toRecipients": [ { "emailAddress": { "name": "", "address": "me@mock.example" } } ],
            "ccRecipients": [],
            "receivedDateTime": self.received,
            "isRead": self.is_read,
            "flag": { "flagStatus": self.flag },
            "categories": self.categories,
            "internetMessageId": self.internet_message_id,
            "conversationId": self.conversation.clone().unwrap_or_else(|| format!("conv-{}", self.id)),
            "hasAttachments": !self.attachments.is_empty(),
            "bodyPreview": format!("Preview of {}", self.subject),
            "isDraft": self.draft.is_some(),
        })
        .as_object()
        .cloned()
        .map(|mut v| {
            if let Some(d) = &self.draft {
                v.insert("toRecipients".into(), recipients(&d.to));
                v.insert("ccRecipients".into(), recipients(&d.cc));
                v.insert("body".into(), json!({ "contentType": "text", "content": d.body }));
            }
            Value::Object(v)
        })
        .unwrap_or_default()
    }
}

/// The property set Exchange keeps Internet headers in (MS-OXPROPS), as Graph returns it.
pub const PS_INTERNET_HEADERS: &str = "00020386-0000-0000-c000-000000000046";

/// Whether two extended property ids name one property: `String {GUID} Name N`, the GUID
/// in any case, the name exactly (Graph documents the name filter as case-sensitive).
fn same_property_id(a: &str, b: &str) -> bool {
    let split = |id: &str| {
        let (set, name) = id.split_once("} Name ")?;
        Some((set.to_ascii_lowercase(), name.to_string()))
    };
    split(a).is_some() && split(a) == split(b)
}

/// A message that left a folder: listed as `@removed` by deltas from before `at`.
#[derive(Debug, Clone)]
pub struct Departure {
    pub folder: String,
    pub id: String,
    pub at: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Category {
    pub id: String,
    pub name: String,
    pub color: String,
}

/// One request the mock answered, for tests that count calls.
#[derive(Debug, Clone)]
pub struct Logged {
    pub method: String,
    pub path: String,
    pub status: u16,
    /// For a `$batch`: how many requests it carried.
    pub inner: Option<usize>,
    /// How many message writes it carried that the server applied (a PATCH, move or
    /// permanentDelete; inside a `$batch`, each one; one refused, by If-Match say, is none).
    pub writes: usize,
    /// For the token endpoint: the OAuth answer (`tokens`, `authorization_pending`,
    /// `slow_down`, `invalid_grant`, …).
    pub oauth: Option<String>,
}

/// Faults a test switches on (`/_mock/faults`).
#[derive(Debug, Default)]
pub struct Faults {
    /// Share of requests (alone or inside a `$batch`) answered 429 with `Retry-After`,
    /// every `1/share`-th one, unapplied.
    pub rate_limit: f64,
    pub counted: u64,
    /// The next this many message writes (alone, or a `$batch` holding any) are applied,
    /// then their connection is dropped unanswered.
    pub drop_after_write: u64,
    /// After this many more message writes, the person revokes the app's access: every
    /// token dies, even in the middle of a `$batch`.
    pub revoke_after_writes: Option<u64>,
}

impl Faults {
    /// A message write was applied: counts it towards a revocation.
    pub fn wrote(&mut self, identity: &mut crate::oauth::Identity) {
        if let Some(left) = self.revoke_after_writes.as_mut() {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.revoke_after_writes = None;
                identity.tokens.clear();
                identity.refresh.clear();
            }
        }
    }

    /// Whether this request is one to refuse with 429.
    pub fn limited(&mut self) -> bool {
        if self.rate_limit <= 0.0 {
            return false;
        }
        self.counted += 1;
        let every = (1.0 / self.rate_limit).round().max(1.0) as u64;
        self.counted.is_multiple_of(every)
    }
}

pub struct State {
    pub email: String,
    pub identity: crate::oauth::Identity,
    pub faults: Faults,
    pub folders: Vec<Folder>,
    pub messages: BTreeMap<String, Message>,
    pub departures: Vec<Departure>,
    pub categories: Vec<Category>,
    /// The Inbox's message rules, by id, as Exchange keeps them.
    pub rules: BTreeMap<String, Value>,
    /// Graph refuses this mailbox's rules (403), as it does for some personal accounts.
    pub rules_refused: bool,
    /// The change sequence: the number of the latest change.
    pub seq: u64,
    /// Delta links current with a sequence number below this get 410 Gone.
    pub oldest_delta: u64,
    next_id: u64,
    pub log: Vec<Logged>,
    /// Graph v1.0's published types, which every request is checked against.
    pub schema: std::sync::Arc<crate::schema::Schema>,
    /// What requests carried that the schema lacks.
    pub wire: mailbroker_mock_server::contract::WireLog,
}

impl State {
    pub fn new(
        email: &str,
        schema: std::sync::Arc<crate::schema::Schema>,
        wire: mailbroker_mock_server::contract::WireLog,
    ) -> State {
        let mut state = State {
            email: email.to_string(),
            identity: crate::oauth::Identity::new(),
            faults: Faults::default(),
            folders: Vec::new(),
            messages: BTreeMap::new(),
            departures: Vec::new(),
            categories: Vec::new(),
            rules: BTreeMap::new(),
            rules_refused: false,
            seq: 0,
            oldest_delta: 0,
            next_id: 0,
            log: Vec::new(),
            schema,
            wire,
        };
        for (well_known, name) in WELL_KNOWN {
            let id = state.new_id("folder");
            state.folders.push(Folder {
                id,
                name: name.to_string(),
                parent: None,
                well_known: Some(well_known),
            });
        }
        state
    }

    /// An id shaped like Graph's (opaque, URL-safe base64 characters).
    pub fn new_id(&mut self, kind: &str) -> String {
        self.next_id += 1;
        format!("AAMk{kind}-{:010}", self.next_id)
    }

    /// A folder by id or well-known name.
    pub fn folder(&self, key: &str) -> Option<&Folder> {
        self.folders
            .iter()
            .find(|f| f.id == key || f.well_known.is_some_and(|w| w.eq_ignore_ascii_case(key)))
    }

    /// Adds a folder under `parent` (a top-level one for `None`); returns its id.
    pub fn add_folder(&mut self, name: &str, parent: Option<&str>) -> Option<String> {
        let parent = match parent {
            Some(p) => Some(self.folder(p)?.id.clone()),
            None => None,
        };
        let id = self.new_id("folder");
        self.folders.push(Folder {
            id: id.clone(),
            name: name.to_string(),
            parent,
            well_known: None,
        });
        Some(id)
    }

    pub fn folder_json(&self, f: &Folder) -> Value {
        let here = |m: &&Message| m.folder == f.id;
        json!({
            "id": f.id,
            "displayName": f.name,
            "parentFolderId": f.parent.clone().unwrap_or_else(|| "msgfolderroot".into()),
            "childFolderCount": self.folders.iter().filter(|c| c.parent.as_ref() == Some(&f.id)).count(),
            "totalItemCount": self.messages.values().filter(here).count(),
            "unreadItemCount": self.messages.values().filter(here).filter(|m| !m.is_read).count(),
        })
    }

    fn bump(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Adds `count` messages to `folder` from `from`; returns their ids.
    pub fn seed(&mut self, count: usize, folder: &str, from: &str, unread: bool) -> Vec<String> {
        let Some(folder) = self.folder(folder).map(|f| f.id.clone()) else {
            return Vec::new();
        };
        (0..count)
            .map(|i| {
                let id = self.new_id("msg");
                let changed = self.bump();
                let n = self.next_id;
                self.messages.insert(
                    id.clone(),
                    Message {
                        id: id.clone(),
                        folder: folder.clone(),
                        subject: format!("Message {i}"),
                        from: from.to_string(),
                        received: format!("2026-11-{:02}T10:00:00Z", 1 + n % 28),
                        is_read: !unread,
                        flag: "notFlagged".into(),
                        categories: Vec::new(),
                        internet_message_id: format!("<m{n}@mock.example>"),
                        internet_headers: Vec::new(),
                        conversation: None,
                        changed,
                        draft: None,
                        attachments: Vec::new(),
                    },
                );
                id
            })
            .collect()
    }

    /// The change sequence number of something made now.
    pub fn touch_next(&mut self) -> u64 {
        self.bump()
    }

    /// Adds `file` to message `id`'s attachments (after those it has) under a new id; that
    /// id, or `None` when there is no such message.
    pub fn attach(&mut self, id: &str, mut file: FileAttachment) -> Option<String> {
        file.id = self.new_id("att");
        let attachment = file.id.clone();
        self.messages.get_mut(id)?.attachments.push(file);
        self.touch(id);
        Some(attachment)
    }

    /// Marks `id` changed now (a new changeKey; listed by deltas from before now).
    pub fn touch(&mut self, id: &str) {
        let changed = self.bump();
        if let Some(m) = self.messages.get_mut(id) {
            m.changed = changed;
        }
    }

    /// Moves `id` to `folder`, keeping its id when `immutable` (else it gets a new one, as
    /// Graph's default ids do); returns its id afterwards.
    pub fn move_message(&mut self, id: &str, folder: &str, immutable: bool) -> Option<String> {
        let folder = self.folder(folder)?.id.clone();
        let mut m = self.messages.remove(id)?;
        let at = self.bump();
        self.departures.push(Departure {
            folder: m.folder.clone(),
            id: m.id.clone(),
            at,
        });
        if !immutable {
            m.id = self.new_id("msg");
        }
        m.folder = folder;
        m.changed = at;
        let new_id = m.id.clone();
        self.messages.insert(new_id.clone(), m);
        Some(new_id)
    }

    pub fn delete_message(&mut self, id: &str) -> bool {
        let Some(m) = self.messages.remove(id) else {
            return false;
        };
        let at = self.bump();
        self.departures.push(Departure {
            folder: m.folder,
            id: m.id,
            at,
        });
        true
    }

    /// A folder's messages changed after `since` and up to `until`, and those that left it
    /// in that span (ids). What changed after `until` waits for the next delta.
    pub fn delta(&self, folder: &str, since: u64, until: u64) -> (Vec<&Message>, Vec<String>) {
        let span = |at: u64| at > since && at <= until;
        let changed = self
            .messages
            .values()
            .filter(|m| m.folder == folder && span(m.changed))
            .collect();
        let removed = self
            .departures
            .iter()
            .filter(|d| d.folder == folder && span(d.at))
            .filter(|d| {
                // Moved out and back in since: it is listed as changed, not removed.
                self.messages.get(&d.id).is_none_or(|m| m.folder != folder)
            })
            .map(|d| d.id.clone())
            .collect();
        (changed, removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        let schema = crate::schema::v1().expect("Graph v1.0's published types");
        State::new("me@mock.example", schema, Default::default())
    }

    /// The mock answers only with what Graph v1.0 has: every property of a message and a
    /// folder it returns is one of the published types' (a beta-only property the mock sent
    /// would teach the adapter to read what the real service never gives).
    #[test]
    fn what_the_mock_returns_is_in_the_published_types() {
        let mut s = state();
        let ids = s.seed(1, "inbox", "a@example.test", true);
        let message = s.messages[&ids[0]].json();
        s.schema.check_body("Message", &message).unwrap();
        let folder = s.folders[0].clone();
        s.schema
            .check_body("MailFolder", &s.folder_json(&folder))
            .unwrap();
    }

    #[test]
    fn a_delta_lists_what_changed_and_what_left_after_its_point() {
        let mut s = state();
        let ids = s.seed(3, "inbox", "a@example.test", true);
        let inbox = s.folder("inbox").map(|f| f.id.clone()).unwrap_or_default();
        let point = s.seq;
        s.touch(&ids[0]);
        s.move_message(&ids[1], "archive", true);
        s.delete_message(&ids[2]);
        let (changed, removed) = s.delta(&inbox, point, s.seq);
        assert_eq!(
            changed.iter().map(|m| m.id.clone()).collect::<Vec<_>>(),
            vec![ids[0].clone()]
        );
        assert_eq!(removed, vec![ids[1].clone(), ids[2].clone()]);
        let archive = s
            .folder("archive")
            .map(|f| f.id.clone())
            .unwrap_or_default();
        let (arrived, _) = s.delta(&archive, point, s.seq);
        assert_eq!(arrived.len(), 1);
        assert_eq!(arrived[0].id, ids[1], "an immutable id survives the move");
        let moved = s.move_message(&ids[0], "archive", false);
        assert!(
            moved.is_some_and(|id| id != ids[0]),
            "a default id does not"
        );
    }
}
