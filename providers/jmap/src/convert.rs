//! JMAP objects in our terms: a mailbox's unique display path and role, an email's index
//! row, keywords as flags and tags.

use std::collections::{BTreeMap, HashMap};

use crate::wire::{Email, EmailAddress, GetResponse, LIST_ID, LIST_UNSUBSCRIBE, MailboxObject};
use mailbroker_core::{
    MailboxInfo, MessageFlags, MessageMeta, RemoteId, Role, RoleSource, Version, path,
};

/// The email properties a sync reads.
pub const EMAIL_PROPERTIES: [&str; 17] = [
    "id",
    "mailboxIds",
    "keywords",
    "size",
    "receivedAt",
    "sentAt",
    "messageId",
    "from",
    "to",
    "cc",
    "subject",
    "preview",
    "hasAttachment",
    "threadId",
    LIST_ID,
    LIST_UNSUBSCRIBE,
    crate::wire::AUTH_RESULTS,
];

/// Keywords that are our read and flagged state, not tags.
const SEEN: &str = "$seen";
const FLAGGED: &str = "$flagged";
/// System keywords (RFC 8621 §4.1.1) that are neither state we show nor tags.
const SYSTEM: [&str; 4] = ["$draft", "$answered", "$forwarded", "$phishing"];

/// One JMAP mailbox: its id, unique display path and role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mailbox {
    pub id: String,
    pub path: String,
    pub role: Option<Role>,
}

impl Mailbox {
    pub fn info(&self) -> MailboxInfo {
        MailboxInfo {
            name: self.path.clone(),
            role: self.role,
            role_source: self.role.map(|_| RoleSource::Server),
            delimiter: Some("/".into()),
            selectable: true,
            remote: Some(self.id.clone()),
        }
    }
}

/// The mailboxes of a `Mailbox/get` list, each with the path of its parents' names (names
/// holding the separator escaped, so two mailboxes never share a path).
pub fn mailboxes(list: &[MailboxObject]) -> Vec<Mailbox> {
    let by_id: HashMap<&str, &MailboxObject> = list.iter().map(|m| (m.id.as_str(), m)).collect();
    let mut out: Vec<Mailbox> = list
        .iter()
        .map(|m| Mailbox {
            id: m.id.clone(),
            path: path_of(m, &by_id, 0),
            role: m.role.as_deref().and_then(role_of),
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn path_of(m: &MailboxObject, by_id: &HashMap<&str, &MailboxObject>, depth: usize) -> String {
    // A cycle or a very deep tree (a broken server) stops at the mailbox itself.
    let parent = m
        .parent_id
        .as_deref()
        .and_then(|p| by_id.get(p))
        .filter(|_| depth < 64)
        .map(|p| path_of(p, by_id, depth + 1));
    path::child_path(parent.as_deref(), &m.name)
}

/// Our role for a JMAP mailbox role (RFC 8621 §2, the IANA registry).
pub fn role_of(role: &str) -> Option<Role> {
    match role {
        "inbox" => Some(Role::Inbox),
        "archive" => Some(Role::Archive),
        "drafts" => Some(Role::Drafts),
        "sent" => Some(Role::Sent),
        "junk" => Some(Role::Junk),
        "trash" => Some(Role::Trash),
        _ => None,
    }
}

/// Flags from an email's `keywords` (true values only, as RFC 8621 stores them).
pub fn flags_of(keywords: &BTreeMap<String, bool>) -> MessageFlags {
    let mut raw: Vec<String> = keywords
        .iter()
        .filter(|(_, on)| **on)
        .map(|(kw, _)| kw.clone())
        .collect();
    raw.sort();
    let has = |k: &str| raw.iter().any(|x| x.eq_ignore_ascii_case(k));
    let tags = raw
        .iter()
        .filter(|k| {
            !k.eq_ignore_ascii_case(SEEN)
                && !k.eq_ignore_ascii_case(FLAGGED)
                && !SYSTEM.iter().any(|s| k.eq_ignore_ascii_case(s))
        })
        .cloned()
        .collect();
    MessageFlags {
        read: has(SEEN),
        flagged: has(FLAGGED),
        tags,
        raw,
    }
}

/// What the server holds of an email, as an `Email/get` of `keywords` and `mailboxIds`
/// reads it: its flags and the ids of its mailboxes.
pub struct Held {
    pub flags: MessageFlags,
    pub mailboxes: std::collections::HashSet<String>,
}

/// The emails of an `Email/get` answer, by id.
pub fn held(got: &GetResponse<Email>) -> BTreeMap<String, Held> {
    got.list
        .iter()
        .map(|email| {
            let held = Held {
                flags: flags_of(&email.keywords),
                mailboxes: email.mailboxes().cloned().collect(),
            };
            (email.id.clone(), held)
        })
        .collect()
}

/// The one mailbox an email is indexed in: the index keeps a message in one place, and an
/// email in several mailboxes (a label-style server) is shown where it matters most.
pub fn place_of<'a>(
    email: &Email,
    mailboxes: &'a BTreeMap<String, Mailbox>,
) -> Option<&'a Mailbox> {
    place_among(email.mailboxes().filter_map(|id| mailboxes.get(id)))
}

/// The place among an email's mailboxes: trash, then junk, then the inbox, then another
/// mailbox with a role, then the first by path.
pub fn place_among<'a>(of_email: impl Iterator<Item = &'a Mailbox>) -> Option<&'a Mailbox> {
    let rank = |m: &&Mailbox| match m.role {
        Some(Role::Trash) => 0,
        Some(Role::Junk) => 1,
        Some(Role::Inbox) => 2,
        Some(_) => 3,
        None => 4,
    };
    of_email.min_by(|a, b| rank(a).cmp(&rank(b)).then(a.path.cmp(&b.path)))
}

/// The index row of an email (its `EMAIL_PROPERTIES`), versioned by the account's email
/// state it was read at.
pub fn meta_of(email: &Email, state: &str) -> MessageMeta {
    // The Date header (`sentAt`), else when the server received it.
    let date = [&email.sent_at, &email.received_at]
        .into_iter()
        .filter_map(|d| mail_parser::DateTime::parse_rfc3339(d.as_deref()?))
        .find(|d| d.is_valid())
        .map(|d| d.to_timestamp())
        .filter(|t| mailbroker_core::plausible_date(*t));
    let unsubscribe: Vec<&str> = email.list_unsubscribe.iter().map(String::as_str).collect();
    MessageMeta {
        id: RemoteId::new(&email.id),
        version: Version::new(state),
        flags: flags_of(&email.keywords),
        message_id: email
            .message_id
            .first()
            .map(|m| format!("<{}>", m.trim_matches(['<', '>']))),
        from: addresses(&email.from),
        to: addresses(&email.to),
        cc: addresses(&email.cc),
        subject: email.subject.clone().unwrap_or_default(),
        date,
        size: email.size,
        has_attachments: email.has_attachment,
        snippet: email.preview.clone(),
        body_prefix: email.preview.clone(),
        text_pending: false,
        thread: email
            .thread_id
            .clone()
            .map(mailbroker_core::Conversation::Server),
        list: mailbroker_core::list_of(email.list_id.as_deref(), &unsubscribe),
        auth_results: email.auth_results.clone(),
    }
}

fn addresses(list: &[EmailAddress]) -> String {
    let one = |a: &EmailAddress| {
        let email = a.email.as_deref()?;
        Some(match a.name.as_deref().filter(|n| !n.is_empty()) {
            Some(name) => format!("{name} <{email}>"),
            None => email.to_string(),
        })
    };
    list.iter().filter_map(one).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_mailboxes_get_unique_paths_and_roles() {
        let list: Vec<MailboxObject> = serde_json::from_value(json!([
            { "id": "a", "name": "Inbox", "role": "inbox", "parentId": null },
            { "id": "b", "name": "Work", "role": null, "parentId": null },
            { "id": "c", "name": "a/b", "role": null, "parentId": "b" },
        ]))
        .unwrap();
        let boxes = mailboxes(&list);
        let paths: Vec<&str> = boxes.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(paths, ["Inbox", "Work", "Work/a\\/b"]);
        assert_eq!(boxes[0].role, Some(Role::Inbox));
        assert_eq!(boxes[2].info().remote.as_deref(), Some("c"));
    }

    #[test]
    fn keywords_are_read_flagged_and_tags() {
        let keywords = json!({ "$seen": true, "work/clients": true, "$draft": true });
        let flags = flags_of(&serde_json::from_value(keywords).unwrap());
        assert!(flags.read && !flags.flagged);
        assert_eq!(flags.tags, ["work/clients"]);
        assert_eq!(flags.raw, ["$draft", "$seen", "work/clients"]);
    }
}
