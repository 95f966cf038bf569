//! The Gmail API calls mailbroker makes, typed: paths, parameters, quota costs and resource
//! shapes from Google's discovery document (`gmail.v1.json`).

use std::collections::{HashMap, HashSet};

use mailbroker_core::Result;
use serde::Deserialize;
use serde_json::json;

use crate::client::Client;

/// Quota units per call (Google's published table).
mod cost {
    pub const LABELS: u32 = 1;
    pub const LIST: u32 = 5;
    pub const GET: u32 = 5;
    pub const HISTORY: u32 = 2;
    pub const BATCH: u32 = 50;
    pub const CREATE_LABEL: u32 = 5;
    pub const PROFILE: u32 = 1;
}

/// batchModify and batchDelete take at most this many ids.
pub const MAX_BATCH: usize = 1000;
/// The largest page messages.list and history.list give.
const PAGE: u32 = 500;
/// Headers `format=metadata` asks for: what the index keeps.
pub const HEADERS: [&str; 6] = ["Subject", "From", "To", "Cc", "Date", "Message-ID"];

#[derive(Debug, Clone, Deserialize)]
pub struct Label {
    pub id: String,
    pub name: String,
    #[serde(rename = "type", default)]
    pub kind: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    pub email_address: String,
    pub messages_total: Option<u64>,
    pub history_id: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Header {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Payload {
    #[serde(default)]
    pub headers: Vec<Header>,
}

/// A message resource (`minimal` or `metadata` format).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Message {
    pub id: String,
    pub label_ids: Vec<String>,
    pub history_id: String,
    pub internal_date: String,
    pub size_estimate: u64,
    pub snippet: String,
    pub payload: Option<Payload>,
    /// `format=raw`: the RFC 5322 source, base64url.
    pub raw: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct MessageId {
    pub id: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelChange {
    pub message: MessageId,
    #[serde(default)]
    pub label_ids: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct MessageEvent {
    pub message: MessageId,
}

/// One history record: a change that may touch many messages in many ways.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct History {
    pub id: String,
    pub messages_added: Vec<MessageEvent>,
    pub messages_deleted: Vec<MessageEvent>,
    pub labels_added: Vec<LabelChange>,
    pub labels_removed: Vec<LabelChange>,
}

impl History {
    pub fn id(&self) -> u64 {
        self.id.parse().unwrap_or(0)
    }
}

/// Every history record after a history id, and the mailbox's history id now.
pub struct HistorySince {
    pub records: Vec<History>,
    pub history_id: u64,
}

pub async fn labels(client: &Client) -> Result<Vec<Label>> {
    #[derive(Deserialize)]
    struct List {
        #[serde(default)]
        labels: Vec<Label>,
    }
    let list: List = client.get("labels", &[], cost::LABELS).await?;
    Ok(list.labels)
}

pub async fn create_label(client: &Client, name: &str) -> Result<Label> {
    let body = json!({
        "name": name,
        "labelListVisibility": "labelShow",
        "messageListVisibility": "show",
    });
    client.post_read("labels", &body, cost::CREATE_LABEL).await
}

pub async fn profile(client: &Client) -> Result<Profile> {
    client.get("profile", &[], cost::PROFILE).await
}

/// Every message id of the mailbox, spam and trash included, newest first.
pub async fn all_ids(client: &Client, mut progress: impl FnMut(usize)) -> Result<Vec<String>> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Page {
        #[serde(default)]
        messages: Vec<MessageId>,
        next_page_token: Option<String>,
    }
    let mut ids = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut query = vec![
            ("maxResults", PAGE.to_string()),
            ("includeSpamTrash", "true".to_string()),
        ];
        if let Some(t) = token.take() {
            query.push(("pageToken", t));
        }
        let page: Page = client.get("messages", &query, cost::LIST).await?;
        ids.extend(page.messages.into_iter().map(|m| m.id));
        progress(ids.len());
        match page.next_page_token {
            Some(t) => token = Some(t),
            None => return Ok(ids),
        }
    }
}

/// One message's labels, history id and the headers the index keeps.
pub async fn metadata(client: &Client, id: &str) -> Result<Message> {
    let mut query = vec![("format", "metadata".to_string())];
    query.extend(HEADERS.iter().map(|h| ("metadataHeaders", h.to_string())));
    client
        .get(&format!("messages/{id}"), &query, cost::GET)
        .await
}

/// One message's source (RFC 5322), base64url in `raw`.
pub async fn raw(client: &Client, id: &str) -> Result<Message> {
    let query = [("format", "raw".to_string())];
    client
        .get(&format!("messages/{id}"), &query, cost::GET)
        .await
}

/// Every history record after `start`, all pages. A `not_found` error means `start` is too old
/// (Gmail forgets history after about a week): sync in full.
pub async fn history_since(client: &Client, start: u64) -> Result<HistorySince> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Page {
        #[serde(default)]
        history: Vec<History>,
        next_page_token: Option<String>,
        history_id: String,
    }
    let mut records = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut query = vec![
            ("startHistoryId", start.to_string()),
            ("maxResults", PAGE.to_string()),
        ];
        for kind in [
            "messageAdded",
            "messageDeleted",
            "labelAdded",
            "labelRemoved",
        ] {
            query.push(("historyTypes", kind.to_string()));
        }
        if let Some(t) = token.take() {
            query.push(("pageToken", t));
        }
        let page: Page = client.get("history", &query, cost::HISTORY).await?;
        records.extend(page.history);
        match page.next_page_token {
            Some(t) => token = Some(t),
            None => {
                return Ok(HistorySince {
                    records,
                    history_id: page.history_id.parse().unwrap_or(start),
                });
            }
        }
    }
}

/// Adds and removes labels on up to `MAX_BATCH` messages.
pub async fn batch_modify(
    client: &Client,
    ids: &[String],
    add: &[String],
    remove: &[String],
) -> Result<()> {
    let body = json!({ "ids": ids, "addLabelIds": add, "removeLabelIds": remove });
    client
        .post("messages/batchModify", &body, cost::BATCH)
        .await
        .map(drop)
}

/// Deletes up to `MAX_BATCH` messages for good (needs the full scope).
pub async fn batch_delete(client: &Client, ids: &[String]) -> Result<()> {
    let body = json!({ "ids": ids });
    client
        .post("messages/batchDelete", &body, cost::BATCH)
        .await
        .map(drop)
}

/// The last history record that touched each message.
pub fn last_change(records: &[History]) -> HashMap<String, u64> {
    let mut last = HashMap::new();
    for h in records {
        let ids = h
            .messages_added
            .iter()
            .chain(&h.messages_deleted)
            .map(|e| &e.message.id)
            .chain(h.labels_added.iter().map(|c| &c.message.id))
            .chain(h.labels_removed.iter().map(|c| &c.message.id));
        for id in ids {
            last.insert(id.clone(), h.id());
        }
    }
    last
}

/// The ids a set of history records says were deleted, and those otherwise touched.
pub fn touched(records: &[History]) -> (HashSet<String>, HashSet<String>) {
    let mut deleted = HashSet::new();
    let mut changed = HashSet::new();
    for h in records {
        deleted.extend(h.messages_deleted.iter().map(|e| e.message.id.clone()));
        changed.extend(h.messages_added.iter().map(|e| e.message.id.clone()));
        changed.extend(h.labels_added.iter().map(|e| e.message.id.clone()));
        changed.extend(h.labels_removed.iter().map(|e| e.message.id.clone()));
    }
    changed.retain(|id| !deleted.contains(id));
    (deleted, changed)
}
