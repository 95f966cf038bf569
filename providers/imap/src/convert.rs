//! From IMAP wire values to mailbroker's vocabulary, keeping the raw values beside the meaning.

use async_imap::imap_proto::{BodyStructure, NameAttribute};
use async_imap::types::{Fetch, Flag, Name};
use mail_parser::{Address, MessageParser};
use mailbroker_core::{MailboxInfo, MessageFlags, MessageMeta, MessageText, Role, RoleSource};

use crate::ids::{self, UidValidity};

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

/// The role a top-level mailbox's name suggests, for servers that mark no roles.
pub(crate) fn role_from_name(name: &str) -> Option<Role> {
    let role = match name.to_ascii_lowercase().as_str() {
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

/// Turns LIST answers into mailboxes with roles. Where the server has SPECIAL-USE
/// (`special_use`), roles come from its attributes alone, and INBOX is the inbox: a folder
/// called "Trash" somewhere in the tree is not the trash unless the server says so. Only
/// without it does a well-known top-level name give a role that no earlier mailbox took.
pub(crate) fn mailboxes_of(names: &[Name], special_use: bool) -> Vec<MailboxInfo> {
    let mut out: Vec<MailboxInfo> = names
        .iter()
        .map(|n| {
            let name = name_from_wire(n.name());
            let role = if name.eq_ignore_ascii_case("INBOX") {
                Some(Role::Inbox)
            } else if special_use {
                special_use_role(n.attributes())
            } else {
                None
            };
            MailboxInfo {
                name,
                role,
                role_source: role.map(|_| RoleSource::Server),
                delimiter: n.delimiter().map(str::to_string),
                selectable: !n.attributes().iter().any(|a| match a {
                    NameAttribute::NoSelect => true,
                    NameAttribute::Extension(e) => e.eq_ignore_ascii_case("\\NonExistent"),
                    _ => false,
                }),
                remote: None,
            }
        })
        .collect();
    if special_use {
        return out;
    }
    for i in 0..out.len() {
        let nested = out[i]
            .delimiter
            .as_deref()
            .is_some_and(|d| !d.is_empty() && out[i].name.contains(d));
        if out[i].role.is_some() || nested {
            continue;
        }
        if let Some(role) = role_from_name(&out[i].name)
            && !out.iter().any(|m| m.role == Some(role))
        {
            out[i].role = Some(role);
            out[i].role_source = Some(RoleSource::Name);
        }
    }
    out
}

/// A mailbox name as the server wrote it, as a person reads it. imap-proto hands a quoted
/// string back with its escapes (`\"`, `\\`) still in, so they are removed here; then modified
/// UTF-7 (RFC 3501 §5.1.3) is decoded. A name that is not valid modified UTF-7 is kept as
/// sent rather than guessed at.
pub(crate) fn name_from_wire(raw: &str) -> String {
    let mut name = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => name.extend(chars.next()),
            (c, false) => name.push(c),
        }
    }
    decode_modified_utf7(&name).unwrap_or(name)
}

/// `name` as it goes on the wire, before quoting: modified UTF-7. Printable ASCII stands for
/// itself except `&` (`&-`); every other run is UTF-16BE in base64 with `,` for `/`, no
/// padding, between `&` and `-`.
pub(crate) fn name_to_wire(name: &str) -> String {
    use base64::Engine;
    let mut out = String::with_capacity(name.len());
    let mut run: Vec<u16> = Vec::new();
    let flush = |run: &mut Vec<u16>, out: &mut String| {
        if run.is_empty() {
            return;
        }
        let bytes: Vec<u8> = run.drain(..).flat_map(u16::to_be_bytes).collect();
        let encoded = base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes);
        out.push('&');
        out.push_str(&encoded.replace('/', ","));
        out.push('-');
    };
    for c in name.chars() {
        if (' '..='~').contains(&c) {
            flush(&mut run, &mut out);
            match c {
                '&' => out.push_str("&-"),
                c => out.push(c),
            }
        } else {
            run.extend(c.encode_utf16(&mut [0; 2]).iter());
        }
    }
    flush(&mut run, &mut out);
    out
}

/// `name` as an IMAP quoted string, for the commands the adapter writes itself.
pub(crate) fn quoted_name(name: &str) -> String {
    let wire = name_to_wire(name);
    format!("\"{}\"", wire.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Decodes modified UTF-7, or None if `name` is not valid modified UTF-7.
fn decode_modified_utf7(name: &str) -> Option<String> {
    use base64::Engine;
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(start) = rest.find('&') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let end = after.find('-')?;
        let encoded = &after[..end];
        if encoded.is_empty() {
            out.push('&');
        } else {
            let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(encoded.replace(',', "/"))
                .ok()?;
            if bytes.len() % 2 != 0 {
                return None;
            }
            let units: Vec<u16> = bytes
                .chunks_exact(2)
                .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
                .collect();
            let decoded = String::from_utf16(&units).ok()?;
            // Printable ASCII must stand for itself (RFC 3501 §5.1.3), and no mailbox name
            // holds control characters: either means this was not modified UTF-7.
            if decoded.chars().any(|c| c.is_ascii() || c.is_control()) {
                return None;
            }
            out.push_str(&decoded);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// The Message-ID in a fetched header section, as the sync indexes it (mail-parser's
/// reading, without angle brackets).
pub(crate) fn message_id_of(header: &[u8]) -> Option<String> {
    MessageParser::default()
        .parse(header)?
        .message_id()
        .map(str::to_string)
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

/// The message's first text body as words: a plain part as it is, an HTML part through
/// html2text (mail-parser's own conversion runs table cells and list items together:
/// "PriceTotal").
fn first_text(msg: &mail_parser::Message<'_>) -> Option<String> {
    let part = msg.text_bodies().next()?;
    if part.is_text_html() {
        let html = part.text_contents()?;
        // Raw and undecorated: a snippet wants the words, not table borders or link footnotes.
        return html2text::config::with_decorator(html2text::render::TrivialDecorator::new())
            .raw_mode(true)
            .string_from_read(html.as_bytes(), 200)
            .ok();
    }
    msg.body_text(0).map(|t| t.into_owned())
}

/// The header fields and the text prefix of a fetch glued back together: parsed, enough for
/// mail-parser to decode the first text part (transfer encoding, charset) even though the
/// body is cut short.
fn glued(fetch: &Fetch) -> Vec<u8> {
    let header = fetch.header().unwrap_or_default();
    let text = fetch.text().unwrap_or_default();
    let mut raw = Vec::with_capacity(header.len() + text.len());
    raw.extend_from_slice(header);
    raw.extend_from_slice(text);
    raw
}

/// Builds the index row for one fetched message from its header fields. Without a text
/// prefix in the fetch (a first pass), its text is marked pending for `text_of`.
pub(crate) fn meta_of(fetch: &Fetch, uidvalidity: UidValidity) -> Option<MessageMeta> {
    let id = ids::remote(uidvalidity, u64::from(fetch.uid?));
    let raw = glued(fetch);
    let parsed = MessageParser::default().parse(&raw[..]);
    let mut meta = MessageMeta {
        id,
        version: ids::version(fetch.modseq.unwrap_or(0)),
        flags: flags_of(fetch.flags()),
        size: u64::from(fetch.size.unwrap_or(0)),
        has_attachments: fetch.bodystructure().is_some_and(has_attachment),
        date: fetch.internal_date().map(|d| d.timestamp()),
        text_pending: fetch.text().is_none(),
        ..MessageMeta::default()
    };
    if let Some(msg) = parsed {
        meta.auth_results = (msg.headers().iter())
            .filter(|h| {
                h.name
                    .as_str()
                    .eq_ignore_ascii_case("Authentication-Results")
            })
            .filter_map(|h| h.value.as_text().map(str::to_string))
            .collect();
        meta.message_id = msg.message_id().map(str::to_string);
        meta.from = addresses(msg.from());
        meta.to = addresses(msg.to());
        meta.cc = addresses(msg.cc());
        meta.subject = msg.subject().unwrap_or_default().to_string();
        let unsubscribe: Vec<&str> = msg.header_raw("List-Unsubscribe").into_iter().collect();
        meta.list = mailbroker_core::list_of(msg.header_raw("List-Id"), &unsubscribe);
        meta.thread = mailbroker_core::conversation_root(
            msg.header_raw("References"),
            msg.header_raw("In-Reply-To"),
            msg.header_raw("Message-ID"),
        )
        .map(mailbroker_core::Conversation::Headers);
        // A Date header that names no real moment (garbage reads as year 10000) is no date:
        // the server's INTERNALDATE, set above, stands.
        if let Some(date) = msg
            .date()
            .filter(|d| d.is_valid())
            .map(|d| d.to_timestamp())
            .filter(|t| mailbroker_core::plausible_date(*t))
        {
            meta.date = Some(date);
        }
        if let Some(text) = first_text(&msg) {
            meta.snippet = snippet(&text, SNIPPET_CHARS);
            meta.body_prefix = snippet(&text, INDEXED_CHARS);
        }
    }
    Some(meta)
}

/// A message's text from a second-pass fetch (structure, the content header fields, a text
/// prefix).
pub(crate) fn text_of(fetch: &Fetch, uidvalidity: UidValidity) -> Option<MessageText> {
    let mut text = MessageText {
        id: ids::remote(uidvalidity, u64::from(fetch.uid?)),
        has_attachments: fetch.bodystructure().is_some_and(has_attachment),
        ..MessageText::default()
    };
    let raw = glued(fetch);
    if let Some(body) = MessageParser::default()
        .parse(&raw[..])
        .as_ref()
        .and_then(first_text)
    {
        text.snippet = snippet(&body, SNIPPET_CHARS);
        text.body_prefix = snippet(&body, INDEXED_CHARS);
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_names_give_roles() {
        assert_eq!(role_from_name("Deleted Items"), Some(Role::Trash));
        assert_eq!(role_from_name("SPAM"), Some(Role::Junk));
        assert_eq!(role_from_name("Invoices"), None);
    }

    #[test]
    fn names_from_the_wire_are_unescaped_and_decoded() {
        assert_eq!(name_from_wire(r#"we\"ird\\box"#), r#"we"ird\box"#);
        assert_eq!(name_from_wire("Entw&APw-rfe"), "Entwürfe");
        assert_eq!(name_from_wire("&ZeVnLIqe-"), "日本語");
        assert_eq!(name_from_wire("Q&-A"), "Q&A");
        // Not modified UTF-7: kept as sent, never a panic.
        for odd in ["a&b", "&!!-", "&A-", "&AAA-", "&2D3-"] {
            assert_eq!(name_from_wire(odd), odd);
        }
    }

    #[test]
    fn names_to_the_wire_round_trip() {
        for name in [
            "Entwürfe",
            "日本語",
            "Q&A",
            "plain",
            "we\"ird",
            "emoji 📬 box",
        ] {
            assert_eq!(name_from_wire(&name_to_wire(name)), name, "{name}");
        }
        assert_eq!(name_to_wire("Entwürfe"), "Entw&APw-rfe");
        assert_eq!(quoted_name(r#"we"ird\box"#), r#""we\"ird\\box""#);
    }

    #[test]
    fn html_snippets_keep_word_boundaries() {
        let raw = b"From: a@b\r\nSubject: s\r\nContent-Type: text/html\r\n\r\n\
            <table><tr><td>Price</td><td>Total</td></tr></table>one<br>two <a href=\"https://x.example/\">link</a>\
            <ul><li>apple</li><li>pear</li></ul>\r\n";
        let msg = MessageParser::default().parse(&raw[..]).unwrap();
        let text = snippet(&first_text(&msg).unwrap(), SNIPPET_CHARS);
        for word in ["Price", "Total", "one", "two", "link", "apple", "pear"] {
            assert!(
                text.split(|c: char| !c.is_alphanumeric())
                    .any(|w| w == word),
                "{word} is not a word of {text:?}"
            );
        }
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
