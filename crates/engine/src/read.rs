//! Reading a message as a person or an assistant sees it: headers from the index, the text
//! body from the server (HTML turned into plain text), attachments listed, never inlined.
//!
//! Bodies are not kept in the index (only a prefix for search and snippets), so reading one
//! asks the server; a message is read with `BODY.PEEK`-like semantics and stays unread.

use std::collections::BTreeMap;

use mail_parser::MessageParser;
use serde::Serialize;

use crate::registry;
use crate::scope::Scope;
use mailbroker_core::{AccountId, Error, RemoteId, Result};
use mailbroker_store::{MessageRow, Store};

/// The most messages one read returns: bodies are large, and an assistant's context is not.
pub const MAX_MESSAGES: usize = 20;
/// Line width for HTML converted to text; wide, so sentences are not broken mid-way.
const HTML_WIDTH: usize = 200;

pub use crate::attachments::Attachment;

/// A message's text and attachments, as read from the server.
#[derive(Debug, Clone, Serialize)]
pub struct MessageText {
    /// The whole plain-text body (HTML converted when there is no text part).
    pub body: String,
    pub attachments: Vec<Attachment>,
    /// The account's own server's verdicts (`Authentication-Results`), where it stated them.
    pub auth: Option<mailbroker_core::AuthVerdicts>,
}

/// A window of `text`, in characters: (the window, total characters, whether more follows).
pub fn window(text: &str, offset: usize, max_chars: usize) -> (String, usize, bool) {
    let total = text.chars().count();
    let part: String = text.chars().skip(offset).take(max_chars).collect();
    let more = offset.saturating_add(max_chars) < total;
    (part, total, more)
}

/// An HTML body as text to read: words, headings and links (as numbered references, their
/// targets listed at the end), in raw mode, without the laid-out tables html2text draws by
/// default. A shop's newsletter laid out in tables came to 7,600 characters of borders and
/// padding that way, and to 1,900 in raw mode: an assistant reads every one of them.
fn html_text(html: &str) -> String {
    html2text::config::plain()
        .raw_mode(true)
        .string_from_read(html.as_bytes(), HTML_WIDTH)
        .unwrap_or_default()
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
            html_text(html)
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
        body = html_text(&html);
    }
    let attachments = (crate::attachments::parts(&message).into_iter())
        .map(|(a, _)| a)
        .collect();
    Ok(MessageText {
        body,
        attachments,
        auth: None,
    })
}

/// One message asked for: its row and text, or why it could not be read.
pub struct Read {
    pub id: i64,
    /// Its account, where the index knows the id.
    pub account: Option<AccountId>,
    pub result: Result<(MessageRow, MessageText)>,
}

/// Reads up to `MAX_MESSAGES` messages: index rows plus their text from the server, in the
/// order asked. One connection per account, one fetch per mailbox. A message that cannot be
/// read (an unknown id, an account that cannot be reached, a route without body reads)
/// costs only itself and the others of its account or mailbox: its error names the account.
/// The ids of a conversation's newest messages (at most as many as one read takes), oldest
/// first, as a conversation is read.
pub async fn thread_ids(store: &Store, thread: &str, scope: &Scope) -> Result<Vec<i64>> {
    let query = scope.narrow(mailbroker_query::Query {
        root: mailbroker_query::Expr::Term(mailbroker_query::Term::Thread(thread.to_string())),
    });
    let rows = store.search(&query, MAX_MESSAGES as u32, 0).await?;
    if rows.is_empty() {
        return Err(
            Error::not_found(format!("no conversation {thread:?} in the index"))
                .with_next_step("take the thread id from a search row's thread field"),
        );
    }
    Ok(rows.iter().rev().map(|r| r.place.id).collect())
}

pub async fn read_messages(store: &Store, ids: &[i64], scope: &Scope) -> Result<Vec<Read>> {
    if ids.is_empty() || ids.len() > MAX_MESSAGES {
        return Err(Error::validation(format!(
            "give between 1 and {MAX_MESSAGES} message ids (got {})",
            ids.len()
        )));
    }
    let mut rows = Vec::with_capacity(ids.len());
    for id in ids {
        // Another account's message is one that does not exist, for a scoped caller.
        let row = store
            .message(*id)
            .await
            .and_then(|row| match scope.opens(&row.place.account) {
                true => Ok(row),
                false => Err(mailbroker_store::no_message(*id)),
            });
        rows.push((*id, row));
    }
    let mut groups: BTreeMap<AccountId, BTreeMap<String, Vec<RemoteId>>> = BTreeMap::new();
    for r in rows.iter().filter_map(|(_, r)| r.as_ref().ok()) {
        let p = &r.place;
        let mailboxes = groups.entry(p.account.clone()).or_default();
        mailboxes
            .entry(p.mailbox.clone())
            .or_default()
            .push(p.remote_id.clone());
    }
    let mut sources = Sources::new();
    let mut trust = BTreeMap::new();
    for (account, mailboxes) in groups {
        let trusted = store
            .trusted_authserv_ids(&account)
            .await
            .unwrap_or_default();
        trust.insert(account.clone(), trusted);
        read_account(store, &account, mailboxes, &mut sources).await;
    }
    let reads: Vec<Read> = (rows.into_iter())
        .map(|(id, row)| Read {
            id,
            account: row.as_ref().ok().map(|r| r.place.account.clone()),
            result: row.and_then(|row| text_from(&sources, row, &trust)),
        })
        .collect();
    for read in &reads {
        if let Ok((_, text)) = &read.result {
            // Only a hint for reading one part alone later: a failure here costs nothing.
            let _ = store.remember_parts(read.id, &text.attachments).await;
        }
    }
    Ok(reads)
}

/// What each mailbox of each account answered: its sources by id, or the error that
/// stopped it.
type Sources = BTreeMap<(AccountId, String), Result<BTreeMap<RemoteId, Vec<u8>>>>;

/// The verdicts of the topmost `Authentication-Results` of `source`, when `trusted` names
/// its server (`mailbroker_core::verdicts`).
pub fn auth_of(source: &[u8], trusted: &[String]) -> Option<mailbroker_core::AuthVerdicts> {
    let message = MessageParser::default().parse_headers(source)?;
    let values: Vec<&str> = (message.headers().iter())
        .filter(|h| {
            h.name
                .as_str()
                .eq_ignore_ascii_case("Authentication-Results")
        })
        .filter_map(|h| h.value.as_text())
        .collect();
    mailbroker_core::verdicts(&values, trusted)
}

/// Reads one account's messages, mailbox by mailbox, on one session.
async fn read_account(
    store: &Store,
    account: &AccountId,
    mailboxes: BTreeMap<String, Vec<RemoteId>>,
    sources: &mut Sources,
) {
    let connected = match store.account(account).await {
        Ok(record) => registry::connect(store, &record).await,
        Err(e) => Err(e),
    };
    let mut provider = match connected {
        Ok(provider) => provider,
        Err(e) => {
            for mailbox in mailboxes.into_keys() {
                sources.insert((account.clone(), mailbox), Err(e.clone()));
            }
            return;
        }
    };
    for (mailbox, ids) in mailboxes {
        let got = provider.fetch_sources(&mailbox, &ids).await;
        let got = got.map(|list| list.into_iter().collect());
        sources.insert((account.clone(), mailbox), got);
    }
    provider.close().await;
}

/// A row's text from what its mailbox answered; an error names the account.
fn text_from(
    sources: &Sources,
    row: MessageRow,
    trust: &BTreeMap<AccountId, Vec<String>>,
) -> Result<(MessageRow, MessageText)> {
    let p = &row.place;
    let answered = sources.get(&(p.account.clone(), p.mailbox.clone()));
    let source = match answered {
        Some(Ok(found)) => found.get(&p.remote_id).ok_or_else(|| {
            Error::stale_state(format!("message {} is no longer on the server", p.id))
                .with_next_step("run: mailbroker sync")
        }),
        Some(Err(e)) => Err(e.clone()),
        None => Err(Error::internal("the message's mailbox was not read")),
    };
    let account = p.account.clone();
    let trusted = trust.get(&account).map(Vec::as_slice).unwrap_or_default();
    let text = source.and_then(|s| {
        let mut text = text_of(s)?;
        text.auth = auth_of(s, trusted);
        Ok(text)
    });
    match text {
        Ok(text) => Ok((row, text)),
        Err(e) => Err(e.in_account(&account)),
    }
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

    #[test]
    fn html_tables_read_as_words_without_borders() {
        let html = "<table width=\"600\"><tr><td><h1>Sale</h1></td></tr><tr><td>Jacket</td>\
                    <td>Now 19.99. <a href=\"https://shop.example/p/1\">See it</a></td></tr></table>";
        let text = html_text(html);
        for words in [
            "Sale",
            "Jacket",
            "Now 19.99.",
            "See it",
            "https://shop.example/p/1",
        ] {
            assert!(text.contains(words), "{words} in {text}");
        }
        assert!(!text.contains('─') && !text.contains('│'), "{text}");
        assert!(text.lines().all(|l| !l.ends_with(' ')), "padded: {text:?}");
    }
}
