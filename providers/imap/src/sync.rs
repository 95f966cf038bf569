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
//! A message another client moved shows as a new UID in one mailbox and an expunge in
//! another, in whichever order they are listed. So expunges are not applied as they are
//! found, and a new message whose Message-ID another mailbox of the account holds is only
//! glimpsed (flags and Message-ID): once every mailbox was looked at, the sink matches the
//! two (`SyncSink::settle_moves`), moving the row in place (same local id, no refetch of
//! its headers and text) and removing the rest; a cursor is stored only after that. Truly
//! new mail (a Message-ID the account does not hold) is fetched in the same pass.
//!
//! Memory does not grow with mailbox size beyond one UID list: fetched messages are handed to
//! the sink in batches and each FETCH stream is consumed to its end before the next command.
//!
//! A write waiting for the account runs at a checkpoint (`SyncSink::checkpoint`): after
//! each mailbox, each `UID FETCH` of new messages and each of text. What is carried past one
//! (the UIDs that left a mailbox, and the arrivals glimpsed in another) names only UIDs the
//! server no longer has or the index does not hold yet, which no write can reach; a moved
//! message gets a new UID, so a write cannot bring one of those back.

use mailbroker_core::Seen;
use std::collections::{HashMap, HashSet};

use futures::TryStreamExt;
use mailbroker_core::{
    Arrival, Error, MailboxInfo, MailboxSyncReport, MessageFlags, RemoteId, Result, SameMessage,
    SyncMode, SyncRequest, SyncSink,
};

use crate::connect::{COMMAND_TIMEOUT, imap_error, timed};
use crate::convert;
use crate::ids::{self, Cursor, Uid, UidValidity};
use crate::session::{Counters, Glimpse, ImapProvider, MailboxStatus};
use crate::uidset;

/// Messages handed to the sink per call: large enough to amortise a transaction, small enough
/// that memory stays flat.
const BATCH: usize = 1000;

/// What a new message's first fetch asks for: flags and counters and the header fields the
/// index keeps, which servers cache (Dovecot answers this about as fast as ENVELOPE). PEEK
/// keeps `\Seen` untouched. The index is searchable by these once the pass ends.
pub const NEW_MESSAGE_ITEMS: &str = "UID FLAGS RFC822.SIZE INTERNALDATE \
     BODY.PEEK[HEADER.FIELDS (FROM TO CC SUBJECT DATE MESSAGE-ID LIST-ID LIST-UNSUBSCRIBE REFERENCES IN-REPLY-TO AUTHENTICATION-RESULTS)]";

/// The second pass, for messages whose headers are indexed: the structure (attachments), the
/// content header fields that say how to decode the text, and a prefix of the text for the
/// snippet and full-text search. The server reads each message's file for these, which
/// makes them several times slower than the first pass's items.
pub const TEXT_ITEMS: &str = "UID BODYSTRUCTURE \
     BODY.PEEK[HEADER.FIELDS (MIME-VERSION CONTENT-TYPE CONTENT-TRANSFER-ENCODING)] \
     BODY.PEEK[TEXT]<0.2048>";

pub(crate) async fn sync_account(
    imap: &mut ImapProvider,
    request: &SyncRequest,
    sink: &mut dyn SyncSink,
) -> Result<Vec<MailboxSyncReport>> {
    imap.enable_qresync().await?;
    imap.synced.clear();
    let (mailboxes, statuses) = imap.list_with_status(true).await?;
    sink.apply(Seen::Mailboxes(mailboxes.clone())).await?;
    let statuses: HashMap<String, MailboxStatus> = statuses.into_iter().collect();
    let known: HashMap<&str, Cursor> = request
        .known
        .iter()
        .filter(|(_, cursor)| cursor.is_known())
        .map(|(name, cursor)| (name.as_str(), Cursor::read(cursor)))
        .collect();
    let mut reports = Vec::new();
    let mut unsettled = Vec::new();
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
        match synced {
            Ok(Synced::Done(report)) => reports.push(report),
            Ok(Synced::Unsettled(u)) => unsettled.push(u),
            Err(e) => reports.push(skipped(&mailbox.name, e)?),
        }
        sink.checkpoint().await?;
    }
    for outcome in settle(imap, unsettled, sink).await? {
        reports.push(outcome);
    }
    fill_text(imap, &mut reports, sink).await?;
    Ok(reports)
}

/// The second pass: the text of every message whose headers are indexed and whose text is
/// not (new in this sync, or left by one that was cut short), mailbox by mailbox.
async fn fill_text(
    imap: &mut ImapProvider,
    reports: &mut [MailboxSyncReport],
    sink: &mut dyn SyncSink,
) -> Result<()> {
    let mut pending = Vec::new();
    for report in reports.iter().filter(|r| r.error.is_none()) {
        let ids = sink.text_pending(&report.mailbox).await?;
        if !ids.is_empty() {
            pending.push((report.mailbox.clone(), ids));
        }
    }
    let total: u64 = pending.iter().map(|(_, uids)| uids.len() as u64).sum();
    let mut filled = 0;
    for (mailbox, ids) in pending {
        sink.text_progress(filled, total);
        let selected = imap.select(&mailbox, false).await?;
        let uidvalidity = selected.uid_validity.unwrap_or(0);
        // Ids of an earlier UIDVALIDITY name nothing now; the next sync refetches the mailbox.
        let mut uids: Vec<Uid> = ids
            .iter()
            .filter_map(|id| ids::uid_in(id, uidvalidity))
            .collect();
        uids.sort_unstable();
        let mut here = 0;
        let items = format!("({TEXT_ITEMS})");
        for set in uidset::chunks(&uids, TEXT_ITEMS.len() + 32) {
            let mut batches =
                Batches::open(imap, &set, &items, (uidvalidity, convert::text_of)).await?;
            while let Some(batch) = batches.next().await? {
                here += batch.len() as u64;
                sink.apply(Seen::TextFilled {
                    mailbox: mailbox.to_string(),
                    texts: batch,
                })
                .await?;
                sink.text_progress(filled + here, total);
            }
            drop(batches);
            fetch_complete(imap).await?;
            sink.checkpoint().await?;
        }
        filled += here;
        if let Some(report) = reports.iter_mut().find(|r| r.mailbox == mailbox) {
            report.text_filled = here;
        }
    }
    Ok(())
}

/// The report of a mailbox the server refused (gone meanwhile, a name it will not take):
/// the others go on, and its cursor, left cleared, makes the next sync retry it. Any other
/// error (a lost connection) ends the sync.
fn skipped(mailbox: &str, e: Error) -> Result<MailboxSyncReport> {
    match e {
        Error::NotFound(_) | Error::ProviderWriteFailed(_) => {
            tracing::warn!(mailbox, error = %e, "sync: mailbox skipped");
            Ok(MailboxSyncReport {
                error: Some(e.message().to_string()),
                ..empty_report(mailbox)
            })
        }
        e => Err(e.context(format!("sync of mailbox {mailbox:?}"))),
    }
}

fn empty_report(mailbox: &str) -> MailboxSyncReport {
    MailboxSyncReport::new(mailbox, SyncMode::Full)
}

/// A mailbox's sync, or what it waits for: messages left it, or arrived in it that may
/// have been moved from another mailbox. Another client's move shows as a new UID in one
/// mailbox and an expunge in another, in whichever order the mailboxes are listed; only
/// once every mailbox was looked at can the two be matched (`settle`).
enum Synced {
    Done(MailboxSyncReport),
    Unsettled(Unsettled),
}

struct Unsettled {
    report: MailboxSyncReport,
    /// The mailbox's cursor, stored once it is settled (a sync cut short before then looks
    /// again next time).
    now: Cursor,
    gone: Vec<RemoteId>,
    arrivals: Vec<Arrival>,
}

async fn sync_mailbox(
    imap: &mut ImapProvider,
    mailbox: &MailboxInfo,
    status: MailboxStatus,
    cursor: Option<Cursor>,
    sink: &mut dyn SyncSink,
) -> Result<Synced> {
    let name = mailbox.name.as_str();
    let condstore = imap.caps.has("CONDSTORE");
    let mut report = empty_report(name);
    if let Some(c) = cursor
        && condstore
        && c.uidvalidity == status.uidvalidity
        && c.uidnext == Uid::from(status.uidnext)
        && Some(c.highestmodseq) == status.highestmodseq
    {
        imap.synced
            .insert(name.to_string(), Counters::of_status(&status));
        report.mode = SyncMode::Unchanged;
        return Ok(Synced::Done(report));
    }

    let selected = imap.select(name, condstore).await?;
    imap.synced
        .insert(name.to_string(), Counters::of_selected(&selected));
    let now = Cursor {
        uidvalidity: selected.uid_validity.unwrap_or(0),
        uidnext: Uid::from(selected.uid_next.unwrap_or(0)),
        highestmodseq: selected.highest_modseq.unwrap_or(0),
    };
    let cursor = match cursor {
        Some(c) if c.uidvalidity == now.uidvalidity => Some(c),
        Some(_) => {
            report.cursor_voided = true;
            None
        }
        None => None,
    };

    let Some(old) = cursor else {
        // First sync, --full or a new UIDVALIDITY: rebuild this mailbox from scratch.
        sink.apply(Seen::Voided {
            mailbox: name.to_string(),
        })
        .await?;
        if selected.exists > 0 {
            let hint = u64::from(selected.exists);
            report.added = fetch_new(imap, name, now.uidvalidity, "1:*", hint, sink).await?;
        }
        sink.apply(Seen::Done {
            mailbox: name.to_string(),
            cursor: now.to_cursor(),
        })
        .await?;
        return Ok(Synced::Done(report));
    };

    report.mode = incremental_mode(imap.qresync_enabled, condstore, old.highestmodseq);
    let mut gone = Vec::new();
    if old.uidnext > 1 {
        (report.changed, gone) = check_known(imap, name, old, report.mode, sink).await?;
    }
    // New messages last: the expunge checks above compare only UIDs below the old UIDNEXT.
    let mut arrivals = Vec::new();
    if now.uidnext > old.uidnext && selected.exists > 0 {
        let new = imap.glimpse(&format!("{}:*", old.uidnext.max(1))).await?;
        // `n:*` always names the highest UID, even below `n`.
        let new = new.into_iter().filter(|(uid, ..)| *uid >= old.uidnext);
        let (maybe_moved, fresh) = maybe_moved(name, now.uidvalidity, new.collect(), sink).await?;
        report.added = fetch_uids(imap, name, now.uidvalidity, &fresh, sink).await?;
        arrivals = maybe_moved;
    }
    if gone.is_empty() && arrivals.is_empty() {
        sink.apply(Seen::Done {
            mailbox: name.to_string(),
            cursor: now.to_cursor(),
        })
        .await?;
        return Ok(Synced::Done(report));
    }
    Ok(Synced::Unsettled(Unsettled {
        report,
        now,
        gone,
        arrivals,
    }))
}

/// New messages split by whether another mailbox of the account holds their Message-ID
/// (they may have been moved from there: settled later) or not (new: fetched now).
async fn maybe_moved(
    mailbox: &str,
    uidvalidity: UidValidity,
    new: Vec<Glimpse>,
    sink: &mut dyn SyncSink,
) -> Result<(Vec<Arrival>, Vec<Uid>)> {
    let ids: Vec<String> = new.iter().filter_map(|(.., id, _)| id.clone()).collect();
    let elsewhere = match ids.is_empty() {
        true => HashSet::new(),
        false => sink.known_elsewhere(mailbox, ids).await?,
    };
    let mut arrivals = Vec::new();
    let mut fresh = Vec::new();
    for (uid, modseq, flags, id, size) in new {
        match id.filter(|id| elsewhere.contains(id)) {
            Some(message_id) => arrivals.push(Arrival {
                id: ids::remote(uidvalidity, uid),
                version: ids::version(modseq),
                flags,
                same: SameMessage::Content { message_id, size },
            }),
            None => fresh.push(uid),
        }
    }
    Ok((arrivals, fresh))
}

/// Matches what left mailboxes against what arrived in others (`SyncSink::settle_moves`),
/// fetches the arrivals no departure explains (selecting their mailbox again), and stores
/// each mailbox's cursor.
async fn settle(
    imap: &mut ImapProvider,
    unsettled: Vec<Unsettled>,
    sink: &mut dyn SyncSink,
) -> Result<Vec<MailboxSyncReport>> {
    if unsettled.is_empty() {
        return Ok(Vec::new());
    }
    let departures = unsettled
        .iter()
        .map(|u| (u.report.mailbox.clone(), u.gone.clone()))
        .collect();
    let arrivals = unsettled
        .iter()
        .map(|u| (u.report.mailbox.clone(), u.arrivals.clone()))
        .collect();
    let settled = sink.settle_moves(departures, arrivals).await?;
    let condstore = imap.caps.has("CONDSTORE");
    let mut reports = Vec::with_capacity(unsettled.len());
    for mut u in unsettled {
        let name = u.report.mailbox.clone();
        let done = settled
            .iter()
            .find(|s| s.mailbox == name)
            .cloned()
            .unwrap_or_default();
        u.report.removed += done.removed;
        u.report.changed += done.moved_in;
        if !done.unmatched.is_empty() {
            match imap.select(&name, condstore).await {
                Ok(selected) if selected.uid_validity == Some(u.now.uidvalidity) => {
                    let uidvalidity = u.now.uidvalidity;
                    let uids: Vec<Uid> = done
                        .unmatched
                        .iter()
                        .filter_map(|id| ids::uid_in(id, uidvalidity))
                        .collect();
                    u.report.added += fetch_uids(imap, &name, uidvalidity, &uids, sink).await?;
                }
                // Recreated meanwhile: its cursor stays, and the next sync starts it over.
                Ok(_) => {
                    reports.push(u.report);
                    continue;
                }
                Err(e) => {
                    reports.push(skipped(&name, e)?);
                    continue;
                }
            }
        }
        sink.apply(Seen::Done {
            mailbox: name.to_string(),
            cursor: u.now.to_cursor(),
        })
        .await?;
        reports.push(u.report);
    }
    Ok(reports)
}

/// The cheapest route to the flag changes and expunges among indexed messages.
fn incremental_mode(qresync: bool, condstore: bool, highestmodseq: u64) -> SyncMode {
    match (qresync, condstore, highestmodseq > 0) {
        (true, _, true) => SyncMode::Delta,
        (false, true, true) => SyncMode::Modified,
        _ => SyncMode::Scan,
    }
}

/// Brings the already-indexed UIDs (below the old UIDNEXT) up to date by `mode`; returns how
/// many changed and which are gone (removed when the sync settles).
async fn check_known(
    imap: &mut ImapProvider,
    name: &str,
    old: Cursor,
    mode: SyncMode,
    sink: &mut dyn SyncSink,
) -> Result<(u64, Vec<RemoteId>)> {
    let known_range = format!("1:{}", old.uidnext - 1);
    let uv = old.uidvalidity;
    let present = match mode {
        SyncMode::Delta => {
            let (changed, gone) =
                changed_since(imap, name, uv, &known_range, old.highestmodseq, true, sink).await?;
            let gone = gone.into_iter().map(|uid| ids::remote(uv, uid)).collect();
            return Ok((changed, gone));
        }
        SyncMode::Modified => {
            let (changed, _) =
                changed_since(imap, name, uv, &known_range, old.highestmodseq, false, sink).await?;
            (changed, imap.uid_list(&known_range).await?)
        }
        _ => compare_all_flags(imap, name, uv, &known_range, sink).await?,
    };
    let (changed, present) = present;
    let present = present
        .into_iter()
        .map(|uid| ids::remote(uv, uid))
        .collect();
    Ok((changed, sink.indexed_except(name, present).await?))
}

/// Fetches the messages of `uids` in full (in UID sets) and hands them to the sink.
async fn fetch_uids(
    imap: &mut ImapProvider,
    mailbox: &str,
    uidvalidity: UidValidity,
    uids: &[Uid],
    sink: &mut dyn SyncSink,
) -> Result<u64> {
    let mut added = 0;
    for set in uidset::chunks(uids, NEW_MESSAGE_ITEMS.len() + 32) {
        let hint = uids.len() as u64;
        added += fetch_new(imap, mailbox, uidvalidity, &set, hint, sink).await?;
        sink.checkpoint().await?;
    }
    Ok(added)
}

/// Fetches every message of `set` (a UID set or range) and hands them to the sink in
/// batches.
async fn fetch_new(
    imap: &mut ImapProvider,
    mailbox: &str,
    uidvalidity: UidValidity,
    set: &str,
    total_hint: u64,
    sink: &mut dyn SyncSink,
) -> Result<u64> {
    let modseq = if imap.caps.has("CONDSTORE") {
        " MODSEQ"
    } else {
        ""
    };
    let items = format!("({NEW_MESSAGE_ITEMS}{modseq})");
    let mut added = 0;
    let mut batches = Batches::open(imap, set, &items, (uidvalidity, convert::meta_of)).await?;
    while let Some(batch) = batches.next().await? {
        added += batch.len() as u64;
        sink.apply(Seen::Arrived {
            mailbox: mailbox.to_string(),
            messages: batch,
        })
        .await?;
        sink.progress(added, total_hint);
    }
    drop(batches);
    fetch_complete(imap).await?;
    Ok(added)
}

/// The answers to one `UID FETCH`, turned into items by `convert` and taken in batches of
/// `BATCH` as they arrive, so memory stays flat and the sink writes while more arrive.
struct Batches<'a, T> {
    stream: std::pin::Pin<Box<dyn futures::Stream<Item = FetchItem> + Send + 'a>>,
    convert: Convert<T>,
}

type FetchItem = async_imap::error::Result<async_imap::types::Fetch>;
/// A fetch answer to an item, with the UIDVALIDITY of the mailbox it came from.
type Convert<T> = (
    UidValidity,
    fn(&async_imap::types::Fetch, UidValidity) -> Option<T>,
);

impl<'a, T> Batches<'a, T> {
    async fn open(
        imap: &'a mut ImapProvider,
        set: &str,
        items: &str,
        convert: Convert<T>,
    ) -> Result<Batches<'a, T>> {
        imap.commands += 1;
        let stream = timed(
            "uid fetch",
            COMMAND_TIMEOUT,
            imap.session.uid_fetch(set, items),
        )
        .await?
        .map_err(|e| imap_error("uid fetch", e))?;
        Ok(Batches {
            stream: Box::pin(stream),
            convert,
        })
    }

    /// The next batch; `None` once the answer is complete.
    async fn next(&mut self) -> Result<Option<Vec<T>>> {
        let mut batch = Vec::with_capacity(BATCH);
        while batch.len() < BATCH {
            let next = timed("uid fetch", COMMAND_TIMEOUT, self.stream.try_next())
                .await?
                .map_err(|e| imap_error("uid fetch", e))?;
            match next {
                Some(fetch) => batch.extend((self.convert.1)(&fetch, self.convert.0)),
                None => break,
            }
        }
        Ok((!batch.is_empty()).then_some(batch))
    }
}

/// After a fetch's answers: async-imap's stream ends quietly when the connection drops; a
/// NOOP that fails tells a truncated fetch from a complete one before a cursor is trusted.
async fn fetch_complete(imap: &mut ImapProvider) -> Result<()> {
    imap.command("NOOP", |_| {}).await
}

/// Flag changes since `modseq` among already-indexed UIDs; with `vanished` (QRESYNC), also the
/// UIDs expunged since then.
async fn changed_since(
    imap: &mut ImapProvider,
    mailbox: &str,
    uidvalidity: UidValidity,
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
    let changed = flush_flags(sink, mailbox, uidvalidity, changes).await?;
    Ok((changed, gone))
}

/// Without CONDSTORE: every indexed message's flags, compared by the sink. The list is one
/// UID and a few flags per message, so even 100k messages stay a few megabytes.
async fn compare_all_flags(
    imap: &mut ImapProvider,
    mailbox: &str,
    uidvalidity: UidValidity,
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
    let changed = flush_flags(sink, mailbox, uidvalidity, all).await?;
    Ok((changed, present))
}

async fn flush_flags(
    sink: &mut dyn SyncSink,
    mailbox: &str,
    uidvalidity: UidValidity,
    changes: Vec<(Uid, u64, MessageFlags)>,
) -> Result<u64> {
    if changes.is_empty() {
        return Ok(0);
    }
    let changes = changes
        .into_iter()
        .map(|(uid, modseq, flags)| (ids::remote(uidvalidity, uid), ids::version(modseq), flags))
        .collect();
    sink.apply(Seen::FlagsChanged {
        mailbox: mailbox.to_string(),
        changes,
    })
    .await
}

impl ImapProvider {
    pub(crate) async fn select(
        &mut self,
        mailbox: &str,
        condstore: bool,
    ) -> Result<async_imap::types::Mailbox> {
        self.commands += 1;
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
