//! Drafts over IMAP: `APPEND` to the drafts mailbox with `\Draft`, found again by its
//! Message-ID (async-imap does not hand back UIDPLUS's APPENDUID, and a server without UIDPLUS
//! has none), and removed by an undo only while it is as written: the same UID (a mail client
//! that saves an edit appends a new message) and, with CONDSTORE, the same modseq.

use async_imap::imap_proto::{MailboxDatum, Response};
use mailbroker_core::{Draft, Error, MailboxInfo, PlacedDraft, Result, draft_changed};

use crate::connect::{COMMAND_TIMEOUT, timed};
use crate::convert;
use crate::ids::{self, Uid};
use crate::session::ImapProvider;

impl ImapProvider {
    pub(crate) async fn append_draft(
        &mut self,
        draft: &Draft,
        source: &[u8],
        drafts: &MailboxInfo,
    ) -> Result<PlacedDraft> {
        let wire = convert::name_to_wire(&drafts.name);
        self.commands += 1;
        let appended = timed(
            "append",
            COMMAND_TIMEOUT,
            (self.session).append(&wire, Some("(\\Draft \\Seen)"), None, source),
        )
        .await?;
        self.drain_unsolicited();
        appended.map_err(|e| {
            // The message was sent whole before the answer: a lost answer leaves it unknown.
            Error::outcome_unknown(format!("imap append to {:?}: {e}", drafts.name))
                .with_next_step("look in the Drafts mailbox before writing it again")
        })?;
        let selected = self
            .select(&drafts.name, self.caps.has("CONDSTORE"))
            .await?;
        let uidvalidity = selected.uid_validity.unwrap_or(0);
        let mut hits: Vec<Uid> = Vec::new();
        let search = format!("UID SEARCH HEADER Message-ID \"{}\"", draft.message_id);
        self.command(&search, |resp| {
            if let Response::MailboxData(MailboxDatum::Search(uids)) = resp {
                hits.extend(uids.iter().map(|u| Uid::from(*u)));
            }
        })
        .await?;
        let uid = match hits[..] {
            [uid] => uid,
            _ => {
                return Err(Error::verification_failed(format!(
                    "the draft was appended to {:?} but {} messages carry its Message-ID",
                    drafts.name,
                    hits.len()
                ))
                .with_next_step("look in the Drafts mailbox"));
            }
        };
        let seen = self.glimpse(&uid.to_string()).await?;
        let Some((_, modseq, flags, ..)) = seen.first() else {
            return Err(Error::verification_failed(
                "the draft left Drafts as it was saved",
            ));
        };
        if !flags.raw.iter().any(|f| f.eq_ignore_ascii_case("\\Draft")) {
            return Err(Error::verification_failed(
                "the server saved the draft without \\Draft",
            ));
        }
        Ok(PlacedDraft {
            mailbox: drafts.name.clone(),
            id: ids::remote(uidvalidity, uid),
            version: ids::version(*modseq),
            message_id: draft.message_id.clone(),
            handle: None,
        })
    }

    pub(crate) async fn expunge_draft(&mut self, placed: &PlacedDraft) -> Result<()> {
        if !self.caps.has("UIDPLUS") {
            return Err(Error::unsupported(
                "this server cannot remove one message alone (no UIDPLUS)",
            )
            .with_next_step("delete the draft in the mail client"));
        }
        let selected = self
            .select(&placed.mailbox, self.caps.has("CONDSTORE"))
            .await?;
        let uid = (selected.uid_validity)
            .and_then(|v| ids::uid_in(&placed.id, v))
            .ok_or_else(|| draft_changed("its mailbox was recreated"))?;
        let seen = self.glimpse(&uid.to_string()).await?;
        let Some((_, modseq, _, message_id, _)) = seen.first() else {
            return Err(draft_changed("it is gone (sent, deleted, or saved again)"));
        };
        let same_id = message_id.as_deref() == Some(placed.message_id.as_str());
        if !same_id || ids::version(*modseq) != placed.version {
            return Err(draft_changed("it was changed after it was saved"));
        }
        let unchanged = match *modseq {
            0 => String::new(),
            m => format!(" (UNCHANGEDSINCE {m})"),
        };
        self.command(
            &format!("UID STORE {uid}{unchanged} +FLAGS.SILENT (\\Deleted)"),
            |_| {},
        )
        .await?;
        self.command(&format!("UID EXPUNGE {uid}"), |_| {}).await?;
        if !self.glimpse(&uid.to_string()).await?.is_empty() {
            return Err(Error::verification_failed(
                "the draft is still there after it was expunged",
            ));
        }
        Ok(())
    }
}
