//! From IMAP wire values to mailbroker's vocabulary, keeping the raw values beside the meaning.

use async_imap::imap_proto::{BodyStructure, NameAttribute};
use async_imap::types::{Fetch, Flag, Name};
use mail_parser::{Address, MessageParser};
use mailbroker_core::{MailboxInfo, MessageFlags, MessageMeta, Role, Uid};

/// How many characters of body text the index keeps per message.
const SNIPPET_CHARS: usize = 240;
/// How many characters of body text are indexed for full-text search.
const INDEXED_CHARS: usize = 2000;

pub(crate) fn flags_of<'a>(flags: impl Iterator<Item = Flag<'a>>) -> MessageFlags {
    let mut out = MessageFlags::default();
    for flag in flags {
        let raw = match flag {
            Flag::Seen => {
                out.read = true;
                "\\Seen".to_string()
            }
            Flag::Flagged => {
                out.flagged = true;
                "\\Flagged".to_string()
            }
            Flag::Answered => "\\Answered".to_string(),
            Flag::Draft => "\\Draft".to_string(),
            Flag::Deleted => "\\Deleted".to_string(),
            // \Recent belongs to one session and cannot be stored; it is not message state.
            Flag::Recent | Flag::MayCreate => continue,
            Flag::Custom(name) => {
                if !name.starts_with('\\') {
                    out.tags.push(name.to_string());
                }
                name.to_string()
            }
        };
        out.raw.push(raw);
    }
    out.tags.sort();
    out.raw.sort();
    out
}

pub(crate) fn special_use_role(attrs: &[NameAttribute<'_>]) -> Option<Role> {
    attrs.iter().find_map(|a| match a {
        NameAttribute::Archive => Some(Role::Archive),
        NameAttribute::Drafts => Some(Role::Drafts),
        NameAttribute::Junk => Some(Role::Junk),
        NameAttribute::Sent => Some(Role::Sent),
        NameAttribute::Trash => Some(Role::Trash),
        NameAttribute::All => Some(Role::All),
        NameAttribute::Extension(ext) => match ext.to_ascii_lowercase().as_str() {
            // Some servers (Cyrus) send the attributes in lower case.
            "\\archive" => Some(Role::Archive),
            "\\drafts" => Some(Role::Drafts),
            "\\junk" => Some(Role::Junk),
            "\\sent" => Some(Role::Sent),
            "\\trash" => Some(Role::Trash),
            "\\all" => Some(Role::All),
            _ => None,
        },
        _ => None,
    })
}

/// The role a mailbox's name suggests when the server does not say (no SPECIAL-USE).
pub(crate) fn role_from_name(name: &str, delimiter: Option<&str>) -> Option<Role> {
    if name.eq_ignore_ascii_case("INBOX") {
        return Some(Role::Inbox);
    }
    let leaf = match delimiter {
        Some(d) if !d.is_empty() => name.rsplit(d).next().unwrap_or(name),
        _ => name,
    };
    let leaf = leaf.to_ascii_lowercase();
    let role = match leaf.as_str() {
        "trash" | "deleted items" | "deleted messages" | "bin" => Role::Trash,
        "junk" | "spam" | "junk e-mail" | "junk email" | "bulk mail" => Role::Junk,
        "sent" | "sent items" | "sent mail" | "sent messages" => Role::Sent,
        "drafts" => Role::Drafts,
        "archive" | "archives" => Role::Archive,
        "all mail" => Role::All,
        _ => return None,
    };
    Some(role)
}

/// Turns LIST answers into mailboxes with roles: SPECIAL-USE first, then well-known names for
/// roles no mailbox claimed by attribute.
pub(crate) fn mailboxes_of(names: &[Name]) -> Vec<MailboxInfo> {
    let mut out: Vec<MailboxInfo> = names
        .iter()
        .map(|n| MailboxInfo {
            name: n.name().to_string(),
            role: if n.name().eq_ignore_ascii_case("INBOX") {
                Some(Role::Inbox)
            } else {
                special_use_role(n.attributes())
            },
            delimiter: n.delimiter().map(str::to_string),
            selectable: !n.attributes().iter().any(|a| match a {
                NameAttribute::NoSelect => true,
                NameAttribute::Extension(e) => e.eq_ignore_ascii_case("\\NonExistent"),
                _ => false,
            }),
        })
        .collect();
    for i in 0..out.len() {
        if out[i].role.is_some() {
            continue;
        }
        if let Some(role) = role_from_name(&out[i].name, out[i].delimiter.as_deref())
            && !out.iter().any(|m| m.role == Some(role))
        {
            out[i].role = Some(role);
        }
    }
    out
}

fn has_attachment(body: &BodyStructure<'_>) -> bool {
    match body {
        BodyStructure::Multipart { bodies, .. } => bodies.iter().any(has_attachment),
        BodyStructure::Basic { common, .. }
        | BodyStructure::Text { common, .. }
        | BodyStructure::Message { common, .. } => {
            let disposed = common
                .disposition
                .as_ref()
                .is_some_and(|d| d.ty.eq_ignore_ascii_case("attachment"));
            disposed
                || matches!(
                    body,
                    BodyStructure::Basic { .. } | BodyStructure::Message { .. }
                )
        }
    }
}

fn addresses(addr: Option<&Address<'_>>) -> String {
    let Some(addr) = addr else {
        return String::new();
    };
    addr.iter()
        .map(|a| match (a.name(), a.address()) {
            (Some(name), Some(email)) => format!("{name} <{email}>"),
            (None, Some(email)) => email.to_string(),
            (Some(name), None) => name.to_string(),
            (None, None) => String::new(),
        })
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

fn snippet(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(max.min(text.len()));
    let mut count = 0;
    for word in text.split_whitespace() {
        if count > 0 {
            out.push(' ');
            count += 1;
        }
        for c in word.chars() {
            if count >= max {
                return out;
            }
            out.push(c);
            count += 1;
        }
    }
    out
}

/// Builds the index row for one fetched message. The fetch carries `BODY[HEADER]` and a prefix
/// of `BODY[TEXT]`; gluing them back together lets mail-parser decode the first text part
/// (transfer encoding, charset) even though the body is cut short.
pub(crate) fn meta_of(fetch: &Fetch) -> Option<MessageMeta> {
    let uid = Uid::from(fetch.uid?);
    let header = fetch.header().unwrap_or_default();
    let text = fetch.text().unwrap_or_default();
    let mut raw = Vec::with_capacity(header.len() + text.len());
    raw.extend_from_slice(header);
    raw.extend_from_slice(text);
    let parsed = MessageParser::default().parse(&raw[..]);
    let mut meta = MessageMeta {
        uid,
        modseq: fetch.modseq.unwrap_or(0),
        flags: flags_of(fetch.flags()),
        size: u64::from(fetch.size.unwrap_or(0)),
        has_attachments: fetch.bodystructure().is_some_and(has_attachment),
        date: fetch.internal_date().map(|d| d.timestamp()),
        ..MessageMeta::default()
    };
    if let Some(msg) = parsed {
        meta.message_id = msg.message_id().map(str::to_string);
        meta.from = addresses(msg.from());
        meta.to = addresses(msg.to());
        meta.cc = addresses(msg.cc());
        meta.subject = msg.subject().unwrap_or_default().to_string();
        if let Some(date) = msg.date() {
            meta.date = Some(date.to_timestamp());
        }
        if let Some(text) = msg.body_text(0) {
            meta.snippet = snippet(&text, SNIPPET_CHARS);
            meta.body_prefix = snippet(&text, INDEXED_CHARS);
        }
    }
    Some(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_names_give_roles_only_when_unclaimed() {
        assert_eq!(role_from_name("INBOX", Some("/")), Some(Role::Inbox));
        assert_eq!(
            role_from_name("Deleted Items", Some("/")),
            Some(Role::Trash)
        );
        assert_eq!(role_from_name("Work/SPAM", Some("/")), Some(Role::Junk));
        assert_eq!(role_from_name("Invoices", Some("/")), None);
    }

    #[test]
    fn snippet_collapses_whitespace_and_caps_length() {
        assert_eq!(snippet("  hello \r\n\r\n  world\t!", 10), "hello worl");
        let long = "x".repeat(1000);
        assert_eq!(snippet(&long, 240).chars().count(), 240);
    }

    #[test]
    fn flags_split_into_meaning_and_raw() {
        let f = flags_of(
            vec![
                Flag::Seen,
                Flag::Recent,
                Flag::Custom("$Triage".into()),
                Flag::Custom("\\Unknown".into()),
            ]
            .into_iter(),
        );
        assert!(f.read && !f.flagged);
        assert_eq!(f.tags, vec!["$Triage"]);
        assert_eq!(f.raw, vec!["$Triage", "\\Seen", "\\Unknown"]);
    }
}
