//! The Gmail API calls mailbroker makes, typed: paths, parameters, quota costs and resource
//! shapes from Google's discovery document (`gmail.v1.json`).

use std::collections::{HashMap, HashSet};

use google_gmail1::api as gmail;
use mailbroker_core::Result;

use crate::client::{Client, Kind};
use crate::oauth::{SCOPE_FULL, SCOPE_MODIFY, SCOPE_SETTINGS};

/// The user id that means "the account the token belongs to".
const ME: &str = "me";

/// One generated call through `Client::call`: `$build` makes the call builder from `$users`
/// (`hub.users()`); the delegate and the one scope every call asks for (`gmail.modify`; the
/// token carries what was granted) are added here. The call may be made more than
/// once (retries), so what it takes by value is cloned per attempt (`[a, b]`).
macro_rules! gmail_call {
    ($client:expr, $kind:expr, $cost:expr, $verb:literal, [$($owned:ident),*], |$users:ident| $build:expr) => {
        $client.call($kind, $cost, $verb, |hub, dlg| {
            $(let $owned = $owned.clone();)*
            Box::pin(async move {
                let $users = hub.users();
                $build.delegate(dlg).add_scope(SCOPE_MODIFY).doit().await
            })
        })
    };
}

/// Quota units per call (Google's published table).
mod cost {
    pub const LABELS: u32 = 1;
    pub const LIST: u32 = 5;
    pub const GET: u32 = 5;
    pub const HISTORY: u32 = 2;
    pub const BATCH: u32 = 50;
    pub const CREATE_LABEL: u32 = 5;
    pub const PROFILE: u32 = 1;
    pub const FILTER_READ: u32 = 1;
    pub const FILTER_WRITE: u32 = 5;
    pub const DRAFT: u32 = 10;
}

/// batchModify and batchDelete take at most this many ids.
pub const MAX_BATCH: usize = 1000;
/// The largest page messages.list and history.list give.
const PAGE: u32 = 500;
/// Headers `format=metadata` asks for: what the index keeps.
pub const HEADERS: [&str; 9] = [
    "Authentication-Results",
    "Subject",
    "From",
    "To",
    "Cc",
    "Date",
    "Message-ID",
    "List-Id",
    "List-Unsubscribe",
];

#[derive(Debug, Clone)]
pub struct Label {
    pub id: String,
    pub name: String,
    /// `system` or `user`.
    pub kind: String,
}

#[derive(Debug, Clone)]
pub struct Profile {
    pub email_address: String,
    pub messages_total: Option<u64>,
    pub history_id: u64,
}

/// A message resource (`minimal`, `metadata` or `raw` format), its options resolved.
#[derive(Debug, Clone, Default)]
pub struct Message {
    pub id: String,
    pub thread_id: Option<String>,
    pub label_ids: Vec<String>,
    pub history_id: u64,
    /// Milliseconds since the epoch.
    pub internal_date: Option<i64>,
    pub size_estimate: u64,
    pub snippet: String,
    /// `format=metadata`: the headers asked for.
    pub headers: Vec<(String, String)>,
    /// `format=raw`: the RFC 5322 source.
    pub raw: Option<Vec<u8>>,
}

impl Message {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }
}

#[derive(Debug, Clone, Default)]
pub struct LabelChange {
    pub id: String,
    pub label_ids: Vec<String>,
}

/// One history record: a change that may touch many messages in many ways.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub id: u64,
    pub messages_added: Vec<String>,
    pub messages_deleted: Vec<String>,
    pub labels_added: Vec<LabelChange>,
    pub labels_removed: Vec<LabelChange>,
}

/// Every history record after a history id, and the mailbox's history id now.
pub struct HistorySince {
    pub records: Vec<History>,
    pub history_id: u64,
}

fn message_of(m: gmail::Message) -> Message {
    let headers = m
        .payload
        .and_then(|p| p.headers)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|h| Some((h.name?, h.value?)))
        .collect();
    Message {
        id: m.id.unwrap_or_default(),
        thread_id: m.thread_id,
        label_ids: m.label_ids.unwrap_or_default(),
        history_id: m.history_id.unwrap_or(0),
        internal_date: m.internal_date,
        size_estimate: m.size_estimate.map_or(0, |s| s.max(0) as u64),
        snippet: m.snippet.unwrap_or_default(),
        headers,
        raw: m.raw,
    }
}

fn ids_of<T>(list: Option<Vec<T>>, message: impl Fn(T) -> Option<gmail::Message>) -> Vec<String> {
    list.unwrap_or_default()
        .into_iter()
        .filter_map(|e| message(e)?.id)
        .collect()
}

fn changes_of<T>(
    list: Option<Vec<T>>,
    parts: impl Fn(T) -> (Option<gmail::Message>, Option<Vec<String>>),
) -> Vec<LabelChange> {
    list.unwrap_or_default()
        .into_iter()
        .filter_map(|e| {
            let (message, labels) = parts(e);
            Some(LabelChange {
                id: message?.id?,
                label_ids: labels.unwrap_or_default(),
            })
        })
        .collect()
}

fn history_of(h: gmail::History) -> History {
    History {
        id: h.id.unwrap_or(0),
        messages_added: ids_of(h.messages_added, |e| e.message),
        messages_deleted: ids_of(h.messages_deleted, |e| e.message),
        labels_added: changes_of(h.labels_added, |e| (e.message, e.label_ids)),
        labels_removed: changes_of(h.labels_removed, |e| (e.message, e.label_ids)),
    }
}

pub async fn labels(client: &Client) -> Result<Vec<Label>> {
    let (_, list) = gmail_call!(
        client,
        Kind::Read,
        cost::LABELS,
        "labels.list",
        [],
        |users| { users.labels_list(ME) }
    )
    .await?;
    Ok(list
        .labels
        .unwrap_or_default()
        .into_iter()
        .filter_map(|l| {
            Some(Label {
                id: l.id?,
                name: l.name?,
                kind: l.type_.unwrap_or_default(),
            })
        })
        .collect())
}

pub async fn create_label(client: &Client, name: &str) -> Result<Label> {
    let request = gmail::Label {
        name: Some(name.to_string()),
        label_list_visibility: Some("labelShow".into()),
        message_list_visibility: Some("show".into()),
        ..Default::default()
    };
    // A write, but harmless to repeat: Gmail refuses a second label of the same name.
    let (_, label) = gmail_call!(
        client,
        Kind::Read,
        cost::CREATE_LABEL,
        "labels.create",
        [request],
        |users| users.labels_create(request, ME)
    )
    .await?;
    Ok(Label {
        id: label.id.unwrap_or_default(),
        name: label.name.unwrap_or_else(|| name.to_string()),
        kind: "user".into(),
    })
}

pub async fn profile(client: &Client) -> Result<Profile> {
    let (_, p) = gmail_call!(
        client,
        Kind::Read,
        cost::PROFILE,
        "getProfile",
        [],
        |users| { users.get_profile(ME) }
    )
    .await?;
    Ok(Profile {
        email_address: p.email_address.unwrap_or_default(),
        messages_total: p.messages_total.map(|n| n.max(0) as u64),
        history_id: p.history_id.unwrap_or(0),
    })
}

/// Every message id of the mailbox, spam and trash included, newest first.
pub async fn all_ids(client: &Client, mut progress: impl FnMut(usize)) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let (_, page) = gmail_call!(
            client,
            Kind::Read,
            cost::LIST,
            "messages.list",
            [token],
            |users| {
                let call = users
                    .messages_list(ME)
                    .max_results(PAGE)
                    .include_spam_trash(true);
                match &token {
                    Some(t) => call.page_token(t),
                    None => call,
                }
            }
        )
        .await?;
        ids.extend(
            page.messages
                .unwrap_or_default()
                .into_iter()
                .filter_map(|m| m.id),
        );
        progress(ids.len());
        match page.next_page_token {
            Some(t) => token = Some(t),
            None => return Ok(ids),
        }
    }
}

/// One message resource in `format`.
async fn resource(client: &Client, id: &str, format: &'static str) -> Result<gmail::Message> {
    let id = id.to_string();
    let (_, message) = gmail_call!(
        client,
        Kind::Read,
        cost::GET,
        "messages.get",
        [id],
        |users| {
            let mut call = users.messages_get(ME, &id).format(format);
            if format == "metadata" {
                for h in HEADERS {
                    call = call.add_metadata_headers(h);
                }
            }
            call
        }
    )
    .await?;
    Ok(message)
}

async fn get(client: &Client, id: &str, format: &'static str) -> Result<Message> {
    resource(client, id, format).await.map(message_of)
}

/// One message's labels, history id and the headers the index keeps.
pub async fn metadata(client: &Client, id: &str) -> Result<Message> {
    get(client, id, "metadata").await
}

/// One message's source (RFC 5322) in `raw`.
pub async fn raw(client: &Client, id: &str) -> Result<Message> {
    get(client, id, "raw").await
}

/// One message's tree of parts (`format=full`), each with its data or its attachment's id.
pub async fn parts(client: &Client, id: &str) -> Result<Option<gmail::MessagePart>> {
    Ok(resource(client, id, "full").await?.payload)
}

/// One attachment of a message, decoded.
pub async fn attachment(client: &Client, message: &str, id: &str) -> Result<Vec<u8>> {
    let (message, id) = (message.to_string(), id.to_string());
    let (_, body) = gmail_call!(
        client,
        Kind::Read,
        cost::GET,
        "messages.attachments.get",
        [message, id],
        |users| users.messages_attachments_get(ME, &message, &id)
    )
    .await?;
    Ok(body.data.unwrap_or_default())
}

/// Every history record after `start`, all pages. A `not_found` error means `start` is too old
/// (Gmail forgets history after about a week): sync in full.
pub async fn history_since(client: &Client, start: u64) -> Result<HistorySince> {
    let mut records = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let (_, page) = gmail_call!(
            client,
            Kind::Read,
            cost::HISTORY,
            "history.list",
            [token],
            |users| {
                let mut call = users
                    .history_list(ME)
                    .start_history_id(start)
                    .max_results(PAGE);
                for kind in [
                    "messageAdded",
                    "messageDeleted",
                    "labelAdded",
                    "labelRemoved",
                ] {
                    call = call.add_history_types(kind);
                }
                match &token {
                    Some(t) => call.page_token(t),
                    None => call,
                }
            }
        )
        .await?;
        records.extend(page.history.unwrap_or_default().into_iter().map(history_of));
        match page.next_page_token {
            Some(t) => token = Some(t),
            None => {
                return Ok(HistorySince {
                    records,
                    history_id: page.history_id.unwrap_or(start),
                });
            }
        }
    }
}

/// The history records after `start` and the history id they end at; when Gmail no longer
/// keeps history that old, no records (`None`) and the mailbox's history id now.
pub async fn history_or_now(client: &Client, start: u64) -> Result<(Option<Vec<History>>, u64)> {
    match history_since(client, start).await {
        Ok(h) => Ok((Some(h.records), h.history_id)),
        Err(e) if e.is_not_found() => Ok((None, profile(client).await?.history_id)),
        Err(e) => Err(e),
    }
}

/// Adds and removes labels on up to `MAX_BATCH` messages.
pub async fn batch_modify(
    client: &Client,
    ids: &[String],
    add: &[String],
    remove: &[String],
) -> Result<()> {
    let request = gmail::BatchModifyMessagesRequest {
        ids: Some(ids.to_vec()),
        add_label_ids: Some(add.to_vec()),
        remove_label_ids: Some(remove.to_vec()),
    };
    gmail_call!(
        client,
        Kind::Write,
        cost::BATCH,
        "messages.batchModify",
        [request],
        |users| { users.messages_batch_modify(request, ME) }
    )
    .await
    .map(drop)
}

/// The user's filters (`users.settings.filters.list`; none is an answer without the list).
pub async fn filters(client: &Client) -> Result<Vec<gmail::Filter>> {
    let (_, list) = gmail_call!(
        client,
        Kind::Read,
        cost::FILTER_READ,
        "settings.filters.list",
        [],
        |users| { users.settings_filters_list(ME) }
    )
    .await?;
    Ok(list.filter.unwrap_or_default())
}

pub async fn filter(client: &Client, id: &str) -> Result<gmail::Filter> {
    let id = id.to_string();
    let (_, filter) = gmail_call!(
        client,
        Kind::Read,
        cost::FILTER_READ,
        "settings.filters.get",
        [id],
        |users| { users.settings_filters_get(ME, &id) }
    )
    .await?;
    Ok(filter)
}

/// Makes a filter (needs `gmail.settings.basic`); Gmail's, with its id.
pub async fn create_filter(client: &Client, filter: &gmail::Filter) -> Result<gmail::Filter> {
    let request = filter.clone();
    let (_, made) = gmail_call!(
        client,
        Kind::Write,
        cost::FILTER_WRITE,
        "settings.filters.create",
        [request],
        |users| {
            users
                .settings_filters_create(request, ME)
                .add_scope(SCOPE_SETTINGS)
        }
    )
    .await?;
    Ok(made)
}

/// Deletes a filter for good (needs `gmail.settings.basic`).
pub async fn delete_filter(client: &Client, id: &str) -> Result<()> {
    let id = id.to_string();
    gmail_call!(
        client,
        Kind::Write,
        cost::FILTER_WRITE,
        "settings.filters.delete",
        [id],
        |users| {
            users
                .settings_filters_delete(ME, &id)
                .add_scope(SCOPE_SETTINGS)
        }
    )
    .await
    .map(drop)
}

/// Deletes up to `MAX_BATCH` messages for good (needs the full scope).
pub async fn batch_delete(client: &Client, ids: &[String]) -> Result<()> {
    let request = gmail::BatchDeleteMessagesRequest {
        ids: Some(ids.to_vec()),
    };
    gmail_call!(
        client,
        Kind::Write,
        cost::BATCH,
        "messages.batchDelete",
        [request],
        |users| {
            users
                .messages_batch_delete(request, ME)
                .add_scope(SCOPE_FULL)
        }
    )
    .await
    .map(drop)
}

impl History {
    /// Every message this record touches, each with whether it was deleted.
    fn messages(&self) -> impl Iterator<Item = (&String, bool)> {
        let deleted = self.messages_deleted.iter().map(|id| (id, true));
        let labels = self.labels_added.iter().chain(&self.labels_removed);
        self.messages_added
            .iter()
            .map(|id| (id, false))
            .chain(labels.map(|c| (&c.id, false)))
            .chain(deleted)
    }
}

/// The last history record that touched each message.
pub fn last_change(records: &[History]) -> HashMap<String, u64> {
    let mut last = HashMap::new();
    for h in records {
        for (id, _) in h.messages() {
            last.insert(id.clone(), h.id);
        }
    }
    last
}

/// The ids a set of history records says were deleted, and those otherwise touched.
pub fn touched(records: &[History]) -> (HashSet<String>, HashSet<String>) {
    let mut deleted = HashSet::new();
    let mut changed = HashSet::new();
    for (id, gone) in records.iter().flat_map(History::messages) {
        match gone {
            true => deleted.insert(id.clone()),
            false => changed.insert(id.clone()),
        };
    }
    changed.retain(|id| !deleted.contains(id));
    (deleted, changed)
}

/// Makes a draft of `source` (RFC 5322), in `thread` when it answers one: the message goes as
/// a media upload (`message/rfc822`), as the generated call sends it. Never sends it.
pub async fn create_draft(
    client: &Client,
    source: &[u8],
    thread: Option<String>,
) -> Result<gmail::Draft> {
    let request = gmail::Draft {
        message: Some(gmail::Message {
            thread_id: thread,
            ..Default::default()
        }),
        ..Default::default()
    };
    let source = source.to_vec();
    let (_, draft) = client
        .call(Kind::Write, cost::DRAFT, "drafts.create", |hub, dlg| {
            let (request, source) = (request.clone(), source.clone());
            Box::pin(async move {
                let mime: mime::Mime = "message/rfc822".parse().unwrap_or(mime::TEXT_PLAIN);
                (hub.users().drafts_create(request, ME))
                    .delegate(dlg)
                    .add_scope(SCOPE_MODIFY)
                    .upload(std::io::Cursor::new(source), mime)
                    .await
            })
        })
        .await?;
    Ok(draft)
}

/// A draft, with its message's id (which an edit replaces).
pub async fn draft(client: &Client, id: &str) -> Result<gmail::Draft> {
    let id = id.to_string();
    let (_, draft) = gmail_call!(client, Kind::Read, cost::GET, "drafts.get", [id], |users| {
        users.drafts_get(ME, &id).format("minimal")
    })
    .await?;
    Ok(draft)
}

/// Deletes a draft for good (Gmail does not keep it in the trash).
pub async fn delete_draft(client: &Client, id: &str) -> Result<()> {
    let id = id.to_string();
    gmail_call!(
        client,
        Kind::Write,
        cost::DRAFT,
        "drafts.delete",
        [id],
        |users| { users.drafts_delete(ME, &id) }
    )
    .await
    .map(drop)
}
