//! Gmail's labels in our terms. A message has many labels but one place: the index keeps
//! each Gmail message as one row in the mailbox its labels put it in (`place_of`), user labels
//! are tags, UNREAD and STARRED are read and flagged, and every label id is kept raw.

use std::collections::{BTreeMap, BTreeSet};

use mailbroker_core::Version;
use mailbroker_core::{MailboxCursor, MailboxInfo, MessageFlags, MessageMeta, RemoteId, Role};
use serde::{Deserialize, Serialize};

use crate::api;

/// Where a message without a place label lives (Gmail's "archived").
pub const ALL_MAIL: &str = "All Mail";

/// Places in precedence order: the first whose label a message has is where it is.
/// (mailbox name, the label that puts a message there, role)
const PLACES: [(&str, Option<&str>, Role); 6] = [
    ("TRASH", Some("TRASH"), Role::Trash),
    ("SPAM", Some("SPAM"), Role::Junk),
    ("INBOX", Some("INBOX"), Role::Inbox),
    ("DRAFT", Some("DRAFT"), Role::Drafts),
    ("SENT", Some("SENT"), Role::Sent),
    (ALL_MAIL, None, Role::Archive),
];

/// The mailboxes of every Gmail account.
pub fn mailboxes() -> Vec<MailboxInfo> {
    PLACES
        .iter()
        .map(|(name, _, role)| MailboxInfo {
            name: (*name).to_string(),
            role: Some(*role),
            role_source: Some(mailbroker_core::RoleSource::Server),
            delimiter: None,
            selectable: true,
            remote: None,
        })
        .collect()
}

pub fn place_of<'a>(labels: impl Iterator<Item = &'a String> + Clone) -> &'static str {
    PLACES
        .iter()
        .find(|(_, label, _)| label.is_some_and(|l| labels.clone().any(|x| x == l)))
        .map_or(ALL_MAIL, |(name, _, _)| name)
}

/// The label that puts a message in this mailbox (`Some(None)` for All Mail); `None` for a
/// name that is not one of the places.
pub fn place_label(mailbox: &str) -> Option<Option<&'static str>> {
    PLACES
        .iter()
        .find(|(name, _, _)| *name == mailbox)
        .map(|(_, label, _)| *label)
}

/// A message's id is Gmail's own: account-wide and stable for the message's life.
pub fn remote(id: &str) -> RemoteId {
    RemoteId::new(id)
}

/// A message's version, and each mailbox's cursor, is a history id (decimal).
pub fn version(history_id: u64) -> Version {
    Version::new(history_id.to_string())
}

pub fn history_of(version: &Version) -> u64 {
    version.as_str().parse().unwrap_or(0)
}

pub fn mailbox_cursor(history_id: u64) -> MailboxCursor {
    MailboxCursor::new(history_id.to_string())
}

pub fn cursor_history(cursor: &MailboxCursor) -> u64 {
    cursor.as_str().parse().unwrap_or(0)
}

/// User labels by id and by name, persisted between runs as the account's sync cursor
/// together with the history id the index is current with.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Cursor {
    pub history_id: u64,
    /// User label id → name.
    pub labels: BTreeMap<String, String>,
    /// System label ids (INBOX, UNREAD, CATEGORY_…), so a label id in neither map is one
    /// created since the map was read.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub system: BTreeSet<String>,
    /// The history id a first sync began at while it has not finished: the next sync
    /// resumes it rather than starting over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfinished: Option<u64>,
}

impl Cursor {
    pub fn parse(text: Option<&str>) -> Cursor {
        text.and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default()
    }

    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn set_labels(&mut self, labels: &[api::Label]) {
        let (user, system): (Vec<_>, Vec<_>) = labels.iter().partition(|l| l.kind == "user");
        self.labels = user
            .into_iter()
            .map(|l| (l.id.clone(), l.name.clone()))
            .collect();
        self.system = system.into_iter().map(|l| l.id.clone()).collect();
    }

    /// Whether the label map names this label id (as a tag or as a system label).
    pub fn knows(&self, label_id: &str) -> bool {
        self.labels.contains_key(label_id) || self.system.contains(label_id)
    }

    /// The user label with this name (Gmail label names are unique regardless of case).
    pub fn label_id(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(id, _)| id.as_str())
    }

    pub fn flags_of(&self, label_ids: &[String]) -> MessageFlags {
        let mut raw = label_ids.to_vec();
        raw.sort();
        MessageFlags {
            read: !raw.iter().any(|l| l == "UNREAD"),
            flagged: raw.iter().any(|l| l == "STARRED"),
            tags: raw
                .iter()
                .filter_map(|l| self.labels.get(l).cloned())
                .collect(),
            raw,
        }
    }

    /// The index row of a message fetched with `format=metadata`.
    pub fn meta_of(&self, m: &api::Message) -> Option<MessageMeta> {
        let header = |name: &str| m.header(name);
        let date = header("Date")
            .and_then(|d| mail_parser::DateTime::parse_rfc822(&d))
            .filter(|d| d.is_valid())
            .map(|d| d.to_timestamp())
            .filter(|t| mailbroker_core::plausible_date(*t))
            .or(m.internal_date.map(|ms| ms / 1000));
        Some(MessageMeta {
            id: remote(&m.id),
            version: version(m.history_id),
            flags: self.flags_of(&m.label_ids),
            message_id: header("Message-ID"),
            from: header("From").unwrap_or_default(),
            to: header("To").unwrap_or_default(),
            cc: header("Cc").unwrap_or_default(),
            subject: header("Subject").unwrap_or_default(),
            date,
            size: m.size_estimate,
            has_attachments: false,
            snippet: m.snippet.clone(),
            body_prefix: String::new(),
            // Gmail's metadata carries the snippet: there is no second pass.
            text_pending: false,
            auth_results: (m.headers.iter())
                .filter(|(n, _)| n.eq_ignore_ascii_case("Authentication-Results"))
                .map(|(_, v)| v.clone())
                .collect(),
            thread: m
                .thread_id
                .clone()
                .map(mailbroker_core::Conversation::Server),
            list: {
                let unsubscribe = header("List-Unsubscribe");
                let links: Vec<&str> = unsubscribe.iter().map(String::as_str).collect();
                mailbroker_core::list_of(header("List-Id").as_deref(), &links)
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn place_follows_precedence() {
        let labels = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(place_of(labels(&["INBOX", "UNREAD"]).iter()), "INBOX");
        assert_eq!(place_of(labels(&["INBOX", "TRASH"]).iter()), "TRASH");
        assert_eq!(place_of(labels(&["Label_3"]).iter()), ALL_MAIL);
        assert_eq!(place_label(ALL_MAIL), Some(None));
        assert_eq!(place_label("SPAM"), Some(Some("SPAM")));
        assert!(place_label("Receipts").is_none());
    }

    #[test]
    fn versions_and_cursors_are_history_ids() {
        assert_eq!(history_of(&version(12345)), 12345);
        assert_eq!(cursor_history(&mailbox_cursor(77)), 77);
        assert_eq!(cursor_history(&MailboxCursor::default()), 0);
    }

    #[test]
    fn flags_from_labels() {
        let mut c = Cursor::default();
        c.labels.insert("Label_1".into(), "Invoices".into());
        let f = c.flags_of(&["STARRED".into(), "Label_1".into(), "INBOX".into()]);
        assert!(f.read && f.flagged);
        assert_eq!(f.tags, vec!["Invoices".to_string()]);
        assert_eq!(c.label_id("invoices"), Some("Label_1"));
    }
}
