//! Bringing the index up to date, mailbox by mailbox.
//!
//! Per mailbox, the cheapest route the server allows:
//! 1. counters unchanged since the stored cursor (UIDVALIDITY, UIDNEXT, HIGHESTMODSEQ, from one
//!    LIST-STATUS) → nothing is selected or fetched;
//! 2. UIDVALIDITY changed, no cursor, or `--full` → every message is fetched;
//! 3. QRESYNC → new UIDs, then `CHANGEDSINCE … VANISHED` for flags and expunges;
//! 4. CONDSTORE → new UIDs, `CHANGEDSINCE` for flags, a UID list for expunges;
//! 5. neither → new UIDs, then every message's flags compared with the index.
//!
//! Memory does not grow with mailbox size beyond one UID list: fetched messages are handed to
//! the sink in batches and each FETCH stream is consumed to its end before the next command.

use std::collections::HashMap;

use futures::TryStreamExt;
use mailbroker_core::{
    Error, MailboxCursor, MailboxInfo, MailboxSyncReport, MessageFlags, Result, SyncMode,
    SyncRequest, SyncSink, Uid,
};

use crate::connect::{COMMAND_TIMEOUT, imap_error, timed};
use crate::convert;
use crate::session::{ImapProvider, MailboxStatus};

/// Messages handed to the sink per call: large enough to amortise a transaction, small enough
/// that memory stays flat.
const BATCH: usize = 1000;

/// What a new message's fetch asks for: flags and counters, the structure (attachments), the
/// header fields the index keeps (servers cache these, unlike the whole header) and a prefix
/// of the text for the snippet. PEEK keeps `\Seen` untouched. Content-Type and
/// Content-Transfer-Encoding come along so the text prefix can be decoded.
pub const NEW_MESSAGE_ITEMS: &str = "UID FLAGS RFC822.SIZE INTERNALDATE BODYSTRUCTURE \
     BODY.PEEK[HEADER.FIELDS (FROM TO CC SUBJECT DATE MESSAGE-ID MIME-VERSION CONTENT-TYPE \
     CONTENT-TRANSFER-ENCODING)] BODY.PEEK[TEXT]<0.2048>";

pub(crate) async fn sync_account(
    imap: &mut ImapProvider,
    request: &SyncRequest,
    sink: &mut dyn SyncSink,
) -> Result<Vec<MailboxSyncReport>> {
    imap.enable_qresync().await?;
    let (mailboxes, statuses) = imap.list_with_status(true).await?;
    sink.mailboxes(&mailboxes).await?;
    let statuses: HashMap<String, MailboxStatus> = statuses.into_iter().collect();
    let known: HashMap<&str, MailboxCursor> = request
        .known
        .iter()
        .map(|(name, cursor)| (name.as_str(), *cursor))
        .collect();
    let mut reports = Vec::new();
    for mailbox in mailboxes.iter().filter(|m| m.selectable) {
        let cursor = if request.full {
            None
        } else {
            known.get(mailbox.name.as_str()).copied()
        };
        let synced = match statuses.get(&mailbox.name) {
            Some(status) => sync_mailbox(imap, mailbox, *status, cursor, sink).await,
            None => match imap.status(&mailbox.name).await {
                Ok(status) => sync_mailbox(imap, mailbox, status, cursor, sink).await,
                Err(e) => Err(e),
            },
        };
        let report = match synced {
            Ok(report) => report,
            // The server refused this one mailbox (gone meanwhile, a name it will not take):
            // report it and go on; its cursor stays cleared, so the next sync retries it.
            Err(e @ (Error::NotFound(_) | Error::ProviderWriteFailed(_))) => {
                tracing::warn!(mailbox = %mailbox.name, error = %e, "sync: mailbox skipped");
                MailboxSyncReport {
                    error: Some(e.message().to_string()),
                    ..empty_report(&mailbox.name)
                }
            }
            Err(e) => return Err(e.context(format!("sync of mailbox {:?}", mailbox.name))),
        };
        reports.push(report);
    }
    Ok(reports)
}

fn empty_report(mailbox: &str) -> MailboxSyncReport {
    MailboxSyncReport {
        mailbox: mailbox.to_string(),
        mode: SyncMode::Full,
        added: 0,
        changed: 0,
        removed: 0,
        uidvalidity_reset: false,
        error: None,
    }
}

async fn sync_mailbox(
    imap: &mut ImapProvider,
    mailbox: &MailboxInfo,
    status: MailboxStatus,
    cursor: Option<MailboxCursor>,
    sink: &mut dyn SyncSink,
) -> Result<MailboxSyncReport> {
    let name = mailbox.name.as_str();
    let condstore = imap.caps.has("CONDSTORE");
    let mut report = empty_report(name);
    if let Some(c) = cursor
        && condstore
        && c.uidvalidity == status.uidvalidity
        && c.uidnext == Uid::from(status.uidnext)
        && Some(c.highestmodseq) == status.highestmodseq
    {
        report.mode = SyncMode::Unchanged;
        return Ok(report);
    }

    let selected = imap.select(name, condstore).await?;
    let now = MailboxCursor {
        uidvalidity: selected.uid_validity.unwrap_or(0),
        uidnext: Uid::from(selected.uid_next.unwrap_or(0)),
        highestmodseq: selected.highest_modseq.unwrap_or(0),
    };
    let cursor = match cursor {
        Some(c) if c.uidvalidity == now.uidvalidity => Some(c),
        Some(_) => {
            report.uidvalidity_reset = true;
            None
        }
        None => None,
    };

    let Some(old) = cursor else {
        // First sync, --full or a new UIDVALIDITY: rebuild this mailbox from scratch.
        sink.reset_mailbox(name, now.uidvalidity).await?;
        if selected.exists > 0 {
            report.added = fetch_new(imap, name, 1, u64::from(selected.exists), sink).await?;
        }
        sink.mailbox_done(name, now).await?;
        return Ok(report);
    };

    report.mode = incremental_mode(imap.qresync_enabled, condstore, old.highestmodseq);
    if old.uidnext > 1 {
        let (changed, removed) = check_known(imap, name, old, report.mode, sink).await?;
        report.changed = changed;
        report.removed = removed;
    }
    // New messages last: the expunge checks above compare only UIDs below the old UIDNEXT.
    if now.uidnext > old.uidnext && selected.exists > 0 {
        let hint = now.uidnext - old.uidnext;
        report.added = fetch_new(imap, name, old.uidnext.max(1), hint, sink).await?;
    }
    sink.mailbox_done(name, now).await?;
    Ok(report)
}

/// The cheapest route to the flag changes and expunges among indexed messages.
fn incremental_mode(qresync: bool, condstore: bool, highestmodseq: u64) -> SyncMode {
    match (qresync, condstore, highestmodseq > 0) {
        (true, _, true) => SyncMode::Qresync,
        (false, true, true) => SyncMode::Condstore,
        _ => SyncMode::Flags,
    }
}

/// Brings the already-indexed UIDs (below the old UIDNEXT) up to date by `mode`; returns how
/// many changed and how many are gone.
async fn check_known(
    imap: &mut ImapProvider,
    name: &str,
    old: MailboxCursor,
    mode: SyncMode,
    sink: &mut dyn SyncSink,
) -> Result<(u64, u64)> {
    let known_range = format!("1:{}", old.uidnext - 1);
    match mode {
        SyncMode::Qresync => {
            let (changed, vanished) =
                changed_since(imap, name, &known_range, old.highestmodseq, true, sink).await?;
            Ok((changed, sink.remove_messages(name, vanished).await?))
        }
        SyncMode::Condstore => {
            let (changed, _) =
                changed_since(imap, name, &known_range, old.highestmodseq, false, sink).await?;
            let present = imap.uid_list(&known_range).await?;
            Ok((changed, sink.retain_messages(name, present).await?))
        }
        _ => {
            let (changed, present) = compare_all_flags(imap, name, &known_range, sink).await?;
            Ok((changed, sink.retain_messages(name, present).await?))
        }
    }
}

/// Fetches every message with UID ≥ `from` and hands them to the sink in batches.
async fn fetch_new(
    imap: &mut ImapProvider,
    mailbox: &str,
    from: Uid,
    total_hint: u64,
    sink: &mut dyn SyncSink,
) -> Result<u64> {
    let modseq = if imap.caps.has("CONDSTORE") {
        " MODSEQ"
    } else {
        ""
    };
    let items = format!("({NEW_MESSAGE_ITEMS}{modseq})");
    let range = format!("{from}:*");
    imap.commands += 1;
    let mut added = 0u64;
    let mut batch = Vec::with_capacity(BATCH);
    {
        let mut stream = timed(
            "uid fetch",
            COMMAND_TIMEOUT,
            imap.session.uid_fetch(&range, &items),
        )
        .await?
        .map_err(|e| imap_error("uid fetch", e))?;
        while let Some(fetch) = timed("uid fetch", COMMAND_TIMEOUT, stream.try_next())
            .await?
            .map_err(|e| imap_error("uid fetch", e))?
        {
            // `from:*` always returns the highest UID even when it is below `from`.
            let Some(meta) = convert::meta_of(&fetch).filter(|m| m.uid >= from) else {
                continue;
            };
            batch.push(meta);
            if batch.len() == BATCH {
                added += batch.len() as u64;
                sink.upsert_messages(mailbox, std::mem::take(&mut batch))
                    .await?;
                sink.progress(added, total_hint);
            }
        }
    }
    // async-imap's stream ends quietly when the connection drops; a NOOP that fails tells a
    // truncated fetch from a complete one before the cursor is trusted.
    imap.command("NOOP", |_| {}).await?;
    added += batch.len() as u64;
    if !batch.is_empty() {
        sink.upsert_messages(mailbox, batch).await?;
        sink.progress(added, total_hint);
    }
    Ok(added)
}

/// Flag changes since `modseq` among already-indexed UIDs; with `vanished` (QRESYNC), also the
/// UIDs expunged since then.
async fn changed_since(
    imap: &mut ImapProvider,
    mailbox: &str,
    range: &str,
    modseq: u64,
    vanished: bool,
    sink: &mut dyn SyncSink,
) -> Result<(u64, Vec<Uid>)> {
    let modifier = if vanished { " VANISHED" } else { "" };
    let command = format!("UID FETCH {range} (UID FLAGS MODSEQ) (CHANGEDSINCE {modseq}{modifier})");
    let mut changes = Vec::new();
    let mut gone = Vec::new();
    imap.fetch_flags(&command, &mut changes, &mut gone).await?;
    let changed = flush_flags(sink, mailbox, changes).await?;
    Ok((changed, gone))
}

/// Without CONDSTORE: every indexed message's flags, compared by the sink. The list is one
/// UID and a few flags per message, so even 100k messages stay a few megabytes.
async fn compare_all_flags(
    imap: &mut ImapProvider,
    mailbox: &str,
    range: &str,
    sink: &mut dyn SyncSink,
) -> Result<(u64, Vec<Uid>)> {
    let mut all = Vec::new();
    imap.fetch_flags(
        &format!("UID FETCH {range} (UID FLAGS)"),
        &mut all,
        &mut Vec::new(),
    )
    .await?;
    let present = all.iter().map(|(uid, _, _)| *uid).collect();
    let changed = flush_flags(sink, mailbox, all).await?;
    Ok((changed, present))
}

async fn flush_flags(
    sink: &mut dyn SyncSink,
    mailbox: &str,
    changes: Vec<(Uid, u64, MessageFlags)>,
) -> Result<u64> {
    if changes.is_empty() {
        return Ok(0);
    }
    sink.update_flags(mailbox, changes).await
}

impl ImapProvider {
    pub(crate) async fn select(
        &mut self,
        mailbox: &str,
        condstore: bool,
    ) -> Result<async_imap::types::Mailbox> {
        self.commands += 1;
        self.prepared = None;
        let wire = convert::name_to_wire(mailbox);
        let selected = if condstore {
            timed(
                "select",
                COMMAND_TIMEOUT,
                self.session.select_condstore(&wire),
            )
            .await?
        } else {
            timed("select", COMMAND_TIMEOUT, self.session.select(&wire)).await?
        };
        let selected = selected.map_err(|e| match e {
            async_imap::error::Error::No(text) => {
                Error::not_found(format!("imap select {mailbox:?} refused: {text}"))
            }
            other => imap_error("select", other),
        })?;
        self.drain_unsolicited();
        if selected.uid_validity.is_none() {
            return Err(Error::provider_unavailable(format!(
                "imap select {mailbox:?} returned no UIDVALIDITY"
            )));
        }
        Ok(selected)
    }

    pub(crate) async fn status(&mut self, mailbox: &str) -> Result<MailboxStatus> {
        let items = if self.caps.has("CONDSTORE") {
            "(UIDVALIDITY UIDNEXT HIGHESTMODSEQ)"
        } else {
            "(UIDVALIDITY UIDNEXT)"
        };
        self.commands += 1;
        let mb = timed(
            "status",
            COMMAND_TIMEOUT,
            self.session.status(convert::name_to_wire(mailbox), items),
        )
        .await?
        .map_err(|e| imap_error("status", e))?;
        self.drain_unsolicited();
        Ok(MailboxStatus {
            uidvalidity: mb.uid_validity.unwrap_or(0),
            uidnext: mb.uid_next.unwrap_or(0),
            highestmodseq: mb.highest_modseq,
        })
    }

    /// The UIDs present in `range` of the selected mailbox.
    pub(crate) async fn uid_list(&mut self, range: &str) -> Result<Vec<Uid>> {
        self.commands += 1;
        let uids = timed(
            "uid search",
            COMMAND_TIMEOUT,
            self.session.uid_search(format!("UID {range}")),
        )
        .await?
        .map_err(|e| imap_error("uid search", e))?;
        self.drain_unsolicited();
        Ok(uids.into_iter().map(Uid::from).collect())
    }
}
