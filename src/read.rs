//! Reading a message as a person or an assistant sees it: headers from the index, the text
//! body from the server (HTML turned into plain text), attachments listed, never inlined.
//!
//! Bodies are not kept in the index (only a prefix for search and snippets), so reading one
//! asks the server; a message is read with `BODY.PEEK`-like semantics and stays unread.

use std::collections::BTreeMap;

use mail_parser::{MessageParser, MimeHeaders};
use serde::Serialize;

use crate::registry;
use crate::store::{MessageRow, Store};
use mailbroker_core::{AccountId, Error, RemoteId, Result};

/// The most messages one read returns: bodies are large, and an assistant's context is not.
pub const MAX_MESSAGES: usize = 20;
/// Line width for HTML converted to text; wide, so sentences are not broken mid-way.
const HTML_WIDTH: usize = 200;

#[derive(Debug, Clone, Serialize)]
pub struct Attachment {
    pub name: Option<String>,
    pub content_type: String,
    pub size: u64,
}

/// A message's text and attachments, as read from the server.
#[derive(Debug, Clone, Serialize)]
pub struct MessageText {
    /// The whole plain-text body (HTML converted when there is no text part).
    pub body: String,
    pub attachments: Vec<Attachment>,
}

/// A window of `text`, in characters: (the window, total characters, whether more follows).
pub fn window(text: &str, offset: usize, max_chars: usize) -> (String, usize, bool) {
    let total = text.chars().count();
    let part: String = text.chars().skip(offset).take(max_chars).collect();
    let more = offset.saturating_add(max_chars) < total;
    (part, total, more)
}

/// Turns a message source into its text and attachment list.
pub fn text_of(source: &[u8]) -> Result<MessageText> {
    let message = MessageParser::default()
        .parse(source)
        .ok_or_else(|| Error::provider_unavailable("the server sent a message that is not MIME"))?;
    let mut body = String::new();
    for part in message.text_bodies() {
        let text = if part.is_text_html() {
            let html = part.text_contents().unwrap_or_default();
            html2text::from_read(html.as_bytes(), HTML_WIDTH).unwrap_or_default()
        } else {
            part.text_contents().unwrap_or_default().to_string()
        };
        if !body.is_empty() {
            body.push_str("\n\n");
        }
        body.push_str(text.trim_end());
    }
    if body.is_empty()
        && let Some(html) = message.body_html(0)
    {
        body = html2text::from_read(html.as_bytes(), HTML_WIDTH).unwrap_or_default();
    }
    let attachments = message
        .attachments()
        .map(|a| Attachment {
            name: a.attachment_name().map(str::to_string),
            content_type: a
                .content_type()
                .map(|c| match c.subtype() {
                    Some(sub) => format!("{}/{sub}", c.ctype()),
                    None => c.ctype().to_string(),
                })
                .unwrap_or_else(|| "application/octet-stream".into()),
            size: a.len() as u64,
        })
        .collect();
    Ok(MessageText { body, attachments })
}

/// Reads up to `MAX_MESSAGES` messages: index rows plus their text from the server, in the
/// order asked. One connection per account, one fetch per mailbox.
pub async fn read_messages(store: &Store, ids: &[i64]) -> Result<Vec<(MessageRow, MessageText)>> {
    if ids.is_empty() || ids.len() > MAX_MESSAGES {
        return Err(Error::validation(format!(
            "give between 1 and {MAX_MESSAGES} message ids (got {})",
            ids.len()
        )));
    }
    let mut rows = Vec::with_capacity(ids.len());
    for id in ids {
        rows.push(store.message(*id).await?);
    }
    let mut groups: BTreeMap<(AccountId, String), Vec<RemoteId>> = BTreeMap::new();
    for r in &rows {
        let p = &r.place;
        groups
            .entry((p.account.clone(), p.mailbox.clone()))
            .or_default()
            .push(p.remote_id.clone());
    }
    let mut sources: BTreeMap<(AccountId, String, RemoteId), Vec<u8>> = BTreeMap::new();
    let mut current: Option<(AccountId, Box<dyn mailbroker_core::Provider>)> = None;
    for ((account, mailbox), ids) in groups {
        if current.as_ref().is_none_or(|(a, _)| *a != account) {
            if let Some((_, mut old)) = current.take() {
                old.close().await;
            }
            let record = store.account(&account).await?;
            current = Some((account.clone(), registry::connect(store, &record).await?));
        }
        let Some((_, provider)) = current.as_mut() else {
            continue;
        };
        for (id, source) in provider.fetch_sources(&mailbox, &ids).await? {
            sources.insert((account.clone(), mailbox.clone(), id), source);
        }
    }
    if let Some((_, mut provider)) = current {
        provider.close().await;
    }
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let key = (
            row.place.account.clone(),
            row.place.mailbox.clone(),
            row.place.remote_id.clone(),
        );
        let Some(source) = sources.get(&key) else {
            return Err(Error::stale_state(format!(
                "message {} is no longer on the server",
                row.place.id
            ))
            .with_next_step("run: mailbroker sync"));
        };
        out.push((row, text_of(source)?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_only_mail_becomes_text_and_attachments_are_listed() {
        let source = b"From: a@example.test\r\nSubject: hi\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/html\r\n\r\n\
<p>Hello <b>there</b></p><script>x()</script>\r\n--b\r\nContent-Type: application/pdf\r\n\
Content-Disposition: attachment; filename=bill.pdf\r\n\r\nPDFDATA\r\n--b--\r\n";
        let text = text_of(source).unwrap();
        assert!(text.body.contains("Hello"), "{}", text.body);
        assert!(!text.body.contains("<p>"), "{}", text.body);
        assert_eq!(text.attachments.len(), 1);
        assert_eq!(text.attachments[0].name.as_deref(), Some("bill.pdf"));
        assert_eq!(text.attachments[0].content_type, "application/pdf");
    }

    #[test]
    fn windows_count_characters() {
        let (part, total, more) = window("héllo wörld", 2, 4);
        assert_eq!((part.as_str(), total, more), ("llo ", 11, true));
        let (part, _, more) = window("héllo", 3, 10);
        assert_eq!((part.as_str(), more), ("lo", false));
    }
}
