//! Drafts: a message mailbroker saves in an account's Drafts for the person to read, edit and
//! send from their own mail client. mailbroker never sends one.
//!
//! Architecture Invariant: the bytes of a draft are written by a MIME library (mail-builder),
//! never by joining strings, so no value (a subject, a name) can add a header line; addresses
//! are checked before they reach it.

use std::borrow::Cow;

use mail_builder::MessageBuilder;
use mail_builder::headers::address::Address;
use serde::{Deserialize, Serialize};

use crate::{Error, MailboxName, RemoteId, Result, Version};

/// The largest body a draft may have, in bytes.
pub const MAX_DRAFT_BODY: usize = 1024 * 1024;

/// A recipient: an address mailbroker checked, and the name shown beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recipient {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub email: String,
}

impl Recipient {
    /// `email` as typed, checked: one `@`, something either side, and nothing a header could
    /// be split on (spaces, controls, angle brackets, commas…).
    pub fn parse(email: &str, name: Option<String>) -> Result<Recipient> {
        let email = email.trim();
        let bad = |why: &str| {
            Error::validation(format!("{email:?} is not an email address: {why}"))
                .with_next_step("give each recipient as name@example.org")
        };
        let (local, domain) = email.rsplit_once('@').ok_or_else(|| bad("no @"))?;
        if local.is_empty() || domain.is_empty() || !domain.contains('.') && domain != "localhost" {
            return Err(bad("a part before or after the @ is missing"));
        }
        let forbidden =
            |c: char| c.is_control() || c.is_whitespace() || "<>()[],;:\\\"@".contains(c);
        if local.chars().any(forbidden) || domain.chars().any(forbidden) || email.len() > 254 {
            return Err(bad("it has a character an address cannot hold"));
        }
        let name = name
            .map(|n| n.chars().filter(|c| !c.is_control()).collect::<String>())
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty());
        Ok(Recipient {
            name,
            email: email.to_string(),
        })
    }
}

/// Where a draft replies: the message it answers, which providers that thread by their own
/// ids (a Gmail thread, Graph's `createReply`) are given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyOf {
    pub mailbox: MailboxName,
    pub id: RemoteId,
    /// The provider's id of its mailbox, where the index has one.
    #[serde(default)]
    pub folder: Option<String>,
    /// A reply to all: the original's other recipients are in Cc.
    pub all: bool,
}

/// A draft as mailbroker will save it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Draft {
    pub from: Option<Recipient>,
    pub to: Vec<Recipient>,
    pub cc: Vec<Recipient>,
    pub subject: String,
    /// Plain text, UTF-8.
    pub body: String,
    /// Its own Message-ID (without angle brackets), by which it is found again.
    pub message_id: String,
    /// The Message-ID it answers, and the thread's ids before it (oldest first).
    pub in_reply_to: Option<String>,
    pub references: Vec<String>,
    pub reply_of: Option<ReplyOf>,
}

impl Draft {
    /// Checks what a person could have got wrong: someone to write to, a body within
    /// `MAX_DRAFT_BODY`.
    pub fn validate(&self) -> Result<()> {
        if self.to.is_empty() {
            return Err(
                Error::validation("the draft has no recipient").with_next_step(
                    "give --to name@example.org, or reply to a message with --reply-to ID",
                ),
            );
        }
        if self.body.len() > MAX_DRAFT_BODY {
            return Err(Error::limit_exceeded(format!(
                "the draft's body is {} bytes; a draft holds at most {MAX_DRAFT_BODY}",
                self.body.len()
            ))
            .with_next_step("shorten the body, or write the rest in the mail client"));
        }
        Ok(())
    }

    /// The RFC 5322 source, written by mail-builder: headers encoded as each needs, the body
    /// quoted-printable or base64 as its text needs. `date` is seconds since the epoch.
    pub fn source(&self, date: i64) -> Result<Vec<u8>> {
        let mut m = MessageBuilder::new()
            .to(list(&self.to))
            .subject(self.subject.as_str())
            .message_id(self.message_id.as_str())
            .date(date)
            .text_body(self.body.as_str());
        if let Some(from) = &self.from {
            m = m.from(address(from));
        }
        if !self.cc.is_empty() {
            m = m.cc(list(&self.cc));
        }
        if let Some(parent) = &self.in_reply_to {
            m = m.in_reply_to(parent.as_str());
        }
        if !self.references.is_empty() {
            let ids: Vec<Cow<'_, str>> =
                self.references.iter().map(|r| r.as_str().into()).collect();
            m = m.references(ids);
        }
        m.write_to_vec()
            .map_err(|e| Error::internal(format!("writing the draft: {e}")))
    }
}

fn list(rs: &[Recipient]) -> Address<'_> {
    Address::new_list(rs.iter().map(address).collect())
}

fn address(r: &Recipient) -> Address<'_> {
    Address::new_address(r.name.as_deref(), r.email.as_str())
}

/// A draft as a provider saved it: enough to find it again, and to tell whether it is still
/// as mailbroker wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedDraft {
    pub mailbox: MailboxName,
    pub id: RemoteId,
    /// Its version when saved (a modseq, a change key, a Gmail message id): another means
    /// someone changed it since.
    pub version: Version,
    pub message_id: String,
    /// The provider's own handle where it differs from `id` (a Gmail draft id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
}

/// The `stale_state` of an undo that finds the draft no longer as it was written.
pub fn draft_changed(what: &str) -> Error {
    Error::stale_state(format!(
        "the draft is no longer as mailbroker wrote it: {what}; it was left alone"
    ))
    .with_next_step("delete it in the mail client if it is not wanted")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(subject: &str) -> Draft {
        Draft {
            from: None,
            to: vec![Recipient::parse("bob@example.org", Some("Bob".into())).unwrap()],
            cc: Vec::new(),
            subject: subject.into(),
            body: "Thanks — see you then.\n".into(),
            message_id: "d1@mailbroker.local".into(),
            in_reply_to: Some("orig@example.org".into()),
            references: vec!["root@example.org".into(), "orig@example.org".into()],
            reply_of: None,
        }
    }

    #[test]
    fn a_subject_with_a_line_break_adds_no_header() {
        let src = draft("Re: hi\r\nBcc: x@evil.test").source(0).unwrap();
        let text = String::from_utf8(src).unwrap();
        assert!(
            !text
                .lines()
                .any(|l| l.to_ascii_lowercase().starts_with("bcc:")),
            "{text}"
        );
        assert!(text.contains("In-Reply-To: <orig@example.org>"), "{text}");
        assert!(text.contains("<root@example.org>"), "{text}");
    }

    #[test]
    fn addresses_that_could_split_a_header_are_refused() {
        for bad in [
            "a@b.org\r\nBcc: x@evil.test",
            "a b@c.org",
            "nobody",
            "a@b",
            "<a@b.org>",
        ] {
            assert!(Recipient::parse(bad, None).is_err(), "{bad}");
        }
        assert!(Recipient::parse(" a.b+c@d.example ", None).is_ok());
    }
}
