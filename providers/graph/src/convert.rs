//! Graph's mail in our terms. A folder is a mailbox named by its path (`Inbox/Receipts`, a
//! separator inside a name escaped: `mailbroker_core::path`);
//! well-known folders have roles; a message's categories are its tags (and its raw values);
//! `flag.flagStatus == "flagged"` is flagged. A message's `RemoteId` is its immutable id, its
//! `Version` its changeKey, and a folder's `MailboxCursor` the delta link its last sync
//! ended with.

use mailbroker_core::{
    MailboxCursor, MailboxInfo, MessageFlags, MessageMeta, RemoteId, Role, RoleSource, Version,
};
use serde_json::Value;

/// The roles of Graph's well-known folders.
pub fn role_of(well_known: &str) -> Option<Role> {
    match well_known.to_ascii_lowercase().as_str() {
        "inbox" => Some(Role::Inbox),
        "archive" => Some(Role::Archive),
        "junkemail" => Some(Role::Junk),
        "deleteditems" => Some(Role::Trash),
        "sentitems" => Some(Role::Sent),
        "drafts" => Some(Role::Drafts),
        _ => None,
    }
}

/// The well-known names whose folders have a role, for looking their ids up.
pub const WELL_KNOWN: [&str; 6] = [
    "inbox",
    "archive",
    "junkemail",
    "deleteditems",
    "sentitems",
    "drafts",
];

/// A folder as listed: its id, its path, its role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    pub id: String,
    pub path: String,
    pub role: Option<Role>,
}

impl Folder {
    pub fn info(&self) -> MailboxInfo {
        MailboxInfo {
            name: self.path.clone(),
            role: self.role,
            role_source: self.role.map(|_| RoleSource::Server),
            delimiter: Some(mailbroker_core::path::SEPARATOR.to_string()),
            selectable: true,
            remote: Some(self.id.clone()),
        }
    }
}

pub fn remote(id: &str) -> RemoteId {
    RemoteId::new(id)
}

pub fn cursor(delta_link: &str) -> MailboxCursor {
    MailboxCursor::new(delta_link)
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

fn addresses(list: &Value) -> String {
    list.as_array()
        .map(|all| {
            all.iter()
                .map(address)
                .filter(|a| !a.is_empty())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

fn address(recipient: &Value) -> String {
    let e = &recipient["emailAddress"];
    match (text(e, "name"), text(e, "address")) {
        ("", addr) => addr.to_string(),
        (name, addr) => format!("{name} <{addr}>"),
    }
}

pub fn flags_of(m: &Value) -> MessageFlags {
    let categories: Vec<String> = m["categories"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    MessageFlags {
        read: m["isRead"].as_bool().unwrap_or(false),
        flagged: m["flag"]["flagStatus"].as_str() == Some("flagged"),
        tags: categories.clone(),
        raw: categories,
    }
}

/// The index row of a message from a delta page (its `$select`ed properties).
pub fn meta_of(m: &Value) -> Option<MessageMeta> {
    let id = m["id"].as_str()?;
    let date = m["receivedDateTime"]
        .as_str()
        .and_then(mail_date)
        .filter(|t| mailbroker_core::plausible_date(*t));
    Some(MessageMeta {
        id: remote(id),
        version: Version::new(text(m, "changeKey")),
        flags: flags_of(m),
        message_id: m["internetMessageId"].as_str().map(str::to_string),
        from: address(&m["from"]),
        to: addresses(&m["toRecipients"]),
        cc: addresses(&m["ccRecipients"]),
        subject: text(m, "subject").to_string(),
        date,
        size: 0,
        has_attachments: m["hasAttachments"].as_bool().unwrap_or(false),
        snippet: text(m, "bodyPreview").to_string(),
        body_prefix: text(m, "bodyPreview").to_string(),
        text_pending: false,
        auth_results: Vec::new(),
        thread: m["conversationId"]
            .as_str()
            .map(|c| mailbroker_core::Conversation::Server(c.to_string())),
        list: list_of(m),
    })
}

/// The property set Exchange keeps a message's Internet headers in (`PS_INTERNET_HEADERS`,
/// MS-OXPROPS).
const PS_INTERNET_HEADERS: &str = "00020386-0000-0000-C000-000000000046";
/// The headers a list is read from, as Graph v1.0 exposes them: single-value extended
/// properties named `String {PS_INTERNET_HEADERS} Name <header>`.
const LIST_HEADERS: [&str; 2] = ["List-Id", "List-Unsubscribe"];

fn header_property(name: &str) -> String {
    format!("String {{{PS_INTERNET_HEADERS}}} Name {name}")
}

/// The `$expand` value that asks a delta (or a GET) for the list headers: Graph v1.0
/// documents `$expand` on message delta and `singleValueExtendedProperties($filter=id eq …)`
/// on messages. Percent-encoded, as the filter holds spaces and quotes.
pub fn list_headers_expand() -> String {
    let ids: Vec<String> = LIST_HEADERS
        .iter()
        .map(|h| format!("id eq '{}'", header_property(h)))
        .collect();
    let expand = format!(
        "singleValueExtendedProperties($filter={})",
        ids.join(" or ")
    );
    percent_encoding::utf8_percent_encode(&expand, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The value of Internet header `name` among the message's expanded extended properties
/// (Graph writes the set's GUID in its own case; the name is compared as written).
fn header_value<'a>(m: &'a Value, name: &str) -> Option<&'a str> {
    let wanted = header_property(name).to_ascii_lowercase();
    m["singleValueExtendedProperties"]
        .as_array()?
        .iter()
        .find(|p| {
            p["id"]
                .as_str()
                .is_some_and(|id| id.to_ascii_lowercase() == wanted)
        })?["value"]
        .as_str()
}

/// The list a message came from: its `List-Id`, else the host its `List-Unsubscribe` links
/// lead to, as for every provider. Where Exchange kept neither header as a property, none.
fn list_of(m: &Value) -> Option<String> {
    let unsubscribe: Vec<&str> = header_value(m, "List-Unsubscribe").into_iter().collect();
    mailbroker_core::list_of(header_value(m, "List-Id"), &unsubscribe)
}

/// Seconds since the epoch of an RFC 3339 time as Graph writes it (`2026-11-02T10:00:00Z`).
fn mail_date(iso: &str) -> Option<i64> {
    mail_parser::DateTime::parse_rfc3339(iso)
        .filter(|d| d.is_valid())
        .map(|d| d.to_timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_reads_as_an_index_row() {
        let m = json!({
            "id": "AAMkAD=", "changeKey": "CQAAAB", "subject": "Invoice",
            "from": {"emailAddress": {"name": "Acme", "address": "billing@acme.example"}},
            "toRecipients": [{"emailAddress": {"name": "", "address": "me@x.example"}}],
            "receivedDateTime": "2026-11-02T10:00:00Z", "isRead": false,
            "flag": {"flagStatus": "flagged"}, "categories": ["Red", "Work"],
            "internetMessageId": "<1@acme>", "hasAttachments": true, "bodyPreview": "Due"
        });
        let meta = meta_of(&m).unwrap_or_default();
        assert_eq!(meta.id.as_str(), "AAMkAD=");
        assert_eq!(meta.version.as_str(), "CQAAAB");
        assert_eq!(meta.from, "Acme <billing@acme.example>");
        assert_eq!(meta.to, "me@x.example");
        assert!(meta.flags.flagged && !meta.flags.read);
        assert_eq!(meta.flags.tags, vec!["Red", "Work"]);
        assert_eq!(meta.date, Some(1_793_613_600));
        assert!(meta_of(&json!({"subject": "no id"})).is_none());
        assert_eq!(meta.list, None);
    }

    #[test]
    fn a_list_is_read_from_the_expanded_header_properties() {
        let property = |name: &str, value: &str| {
            json!({"id": format!("String {{00020386-0000-0000-c000-000000000046}} Name {name}"),
                   "value": value})
        };
        let m = json!({"id": "A", "singleValueExtendedProperties": [
            property("List-Unsubscribe", "<https://news.example/out>"),
            property("List-Id", "Weekly <weekly.news.example>"),
        ]});
        assert_eq!(
            meta_of(&m).unwrap().list.as_deref(),
            Some("weekly.news.example")
        );
        let links = json!({"id": "B", "singleValueExtendedProperties": [
            property("List-Unsubscribe", "<mailto:x@esp.example>, <https://Shop.Example/u>"),
        ]});
        assert!(meta_of(&links).unwrap().list.is_some());
        let expand = list_headers_expand();
        assert!(!expand.contains(' ') && !expand.contains('\''), "{expand}");
    }

    #[test]
    fn well_known_folders_have_roles() {
        assert_eq!(role_of("deleteditems"), Some(Role::Trash));
        assert_eq!(role_of("JunkEmail"), Some(Role::Junk));
        assert_eq!(role_of("conversationhistory"), None);
    }
}
