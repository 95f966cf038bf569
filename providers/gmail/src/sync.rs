//! Sync: one history id for the whole account. First (or after history expired): list every
//! id, then `messages.get format=metadata` for each under the quota. Afterwards:
//! `history.list` from the stored history id, and a metadata GET of only the messages it names.
//!
//! A first sync that was killed resumes: the cursor records the history id it started at
//! (`Cursor::unfinished`) before the first message is indexed, so the next run fetches only
//! what is not indexed yet, plus what history says changed since that start.

use mailbroker_core::Seen;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use mailbroker_core::{
    MailboxSyncReport, MessageMeta, RemoteId, Result, SyncMode, SyncRequest, SyncSink,
};

use crate::api;
use crate::client::Client;
use crate::convert::{self, Cursor};
use crate::window::Window;

/// Most metadata GETs in flight; rate limits narrow this for a while (`Window`).
const CONCURRENCY: usize = 16;
/// Messages handed to the index at a time.
const SINK_BATCH: usize = 500;

pub async fn sync(
    client: &Arc<Client>,
    cursor: &mut Cursor,
    request: &SyncRequest,
    sink: &mut dyn SyncSink,
) -> Result<Vec<MailboxSyncReport>> {
    let labels = api::labels(client).await?;
    cursor.set_labels(&labels);
    sink.apply(Seen::Mailboxes(convert::mailboxes())).await?;
    let known = request
        .known
        .iter()
        .map(|(_, c)| convert::cursor_history(c))
        .min()
        .unwrap_or(0);
    let start = if request.full || request.known.len() < convert::mailboxes().len() {
        0
    } else {
        cursor.history_id.min(known)
    };
    let reads = Reads {
        client: client.clone(),
        window: Arc::new(Window::new(CONCURRENCY)),
    };
    let reports = match start {
        0 => full(&reads, cursor, request.full, sink).await?,
        start => match api::history_since(client, start).await {
            Ok(history) => incremental(&reads, cursor, history, sink).await?,
            Err(e) if e.is_not_found() => {
                tracing::info!("gmail: history from {start} has expired; syncing in full");
                full(&reads, cursor, true, sink).await?
            }
            Err(e) => return Err(e),
        },
    };
    sink.apply(Seen::AccountCursor(cursor.encode().to_string()))
        .await?;
    Ok(reports)
}

fn report(mailbox: &str, mode: SyncMode) -> MailboxSyncReport {
    MailboxSyncReport::new(mailbox, mode)
}

async fn finish(
    sink: &mut dyn SyncSink,
    cursor: &mut Cursor,
    history_id: u64,
    reports: BTreeMap<String, MailboxSyncReport>,
) -> Result<Vec<MailboxSyncReport>> {
    cursor.history_id = history_id;
    cursor.unfinished = None;
    for mb in convert::mailboxes() {
        sink.apply(Seen::Done {
            mailbox: mb.name.to_string(),
            cursor: convert::mailbox_cursor(history_id),
        })
        .await?;
    }
    Ok(reports.into_values().collect())
}

/// The client of one sync, and the window its metadata reads share.
struct Reads {
    client: Arc<Client>,
    window: Arc<Window>,
}

/// Every message: resumed from an unfinished first sync where history still reaches back
/// to its start (unless `refetch`), else from scratch.
async fn full(
    reads: &Reads,
    cursor: &mut Cursor,
    refetch: bool,
    sink: &mut dyn SyncSink,
) -> Result<Vec<MailboxSyncReport>> {
    let mut reports: BTreeMap<String, MailboxSyncReport> = convert::mailboxes()
        .iter()
        .map(|mb| (mb.name.clone(), report(&mb.name, SyncMode::Full)))
        .collect();
    if let Some(started) = cursor.unfinished.filter(|_| !refetch) {
        match resume(reads, cursor, started, sink, &mut reports).await {
            Ok(history_id) => return finish(sink, cursor, history_id, reports).await,
            Err(e) if e.is_not_found() => {
                tracing::info!("gmail: history from {started} has expired; starting over");
            }
            Err(e) => return Err(e),
        }
    }
    // The history id before listing: whatever changes during the listing, the next
    // incremental sync replays.
    let history_id = api::profile(&reads.client).await?.history_id;
    for mb in convert::mailboxes() {
        sink.apply(Seen::Voided {
            mailbox: mb.name.to_string(),
        })
        .await?;
    }
    // From here on, a killed sync resumes instead of starting over.
    cursor.unfinished = Some(history_id);
    sink.apply(Seen::AccountCursor(cursor.encode().to_string()))
        .await?;
    let ids = api::all_ids(&reads.client, |n| sink.progress(0, n as u64)).await?;
    fetch_into(reads, cursor, &ids, sink, &mut reports, |r| &mut r.added).await?;
    finish(sink, cursor, history_id, reports).await
}

/// Goes on with a first sync that began at history id `started` and was interrupted: what
/// it indexed stays; messages not indexed yet are fetched, those history says changed since
/// `started` are fetched again, those gone since are removed. Returns the history id the
/// index is then current with. `not_found` when history no longer reaches back that far.
async fn resume(
    reads: &Reads,
    cursor: &mut Cursor,
    started: u64,
    sink: &mut dyn SyncSink,
    reports: &mut BTreeMap<String, MailboxSyncReport>,
) -> Result<u64> {
    let history = api::history_since(&reads.client, started).await?;
    let (_, changed) = api::touched(&history.records);
    let ids = api::all_ids(&reads.client, |n| sink.progress(0, n as u64)).await?;
    let indexed: HashSet<RemoteId> = sink.indexed_ids().await?.into_iter().collect();
    let listed: HashSet<RemoteId> = ids.iter().map(|id| convert::remote(id)).collect();
    let gone: Vec<RemoteId> = indexed.difference(&listed).cloned().collect();
    remove_everywhere(sink, gone, reports).await?;
    let missing: Vec<String> = ids
        .into_iter()
        .filter(|id| changed.contains(id) || !indexed.contains(&convert::remote(id)))
        .collect();
    tracing::info!(
        indexed = indexed.len(),
        fetching = missing.len(),
        "gmail: resuming an unfinished first sync"
    );
    fetch_into(reads, cursor, &missing, sink, reports, |r| &mut r.added).await?;
    Ok(history.history_id)
}

/// Removes messages (gone from Gmail) from whichever mailbox holds them, counting them.
async fn remove_everywhere(
    sink: &mut dyn SyncSink,
    gone: Vec<RemoteId>,
    reports: &mut BTreeMap<String, MailboxSyncReport>,
) -> Result<()> {
    if gone.is_empty() {
        return Ok(());
    }
    for mb in convert::mailboxes() {
        let n = sink
            .apply(Seen::Gone {
                mailbox: mb.name.to_string(),
                ids: gone.clone(),
            })
            .await?;
        if let Some(r) = reports.get_mut(&mb.name) {
            r.removed += n;
        }
    }
    Ok(())
}

async fn incremental(
    reads: &Reads,
    cursor: &mut Cursor,
    history: api::HistorySince,
    sink: &mut dyn SyncSink,
) -> Result<Vec<MailboxSyncReport>> {
    let (deleted, changed) = api::touched(&history.records);
    let mut reports: BTreeMap<String, MailboxSyncReport> = convert::mailboxes()
        .iter()
        .map(|mb| (mb.name.clone(), report(&mb.name, SyncMode::Delta)))
        .collect();
    let gone: Vec<RemoteId> = deleted.iter().map(|id| convert::remote(id)).collect();
    let nothing_gone = gone.is_empty();
    remove_everywhere(sink, gone, &mut reports).await?;
    let ids: Vec<String> = changed.into_iter().collect();
    fetch_into(reads, cursor, &ids, sink, &mut reports, |r| &mut r.changed).await?;
    if ids.is_empty() && nothing_gone {
        reports
            .values_mut()
            .for_each(|r| r.mode = SyncMode::Unchanged);
    }
    finish(sink, cursor, history.history_id, reports).await
}

/// Fetches these messages' metadata and puts each in its place, counting it with `count`.
/// `mailbroker_core::place` settles a message whose labels moved it as moved, by its id, so
/// it keeps its local id.
async fn fetch_into(
    reads: &Reads,
    cursor: &mut Cursor,
    ids: &[String],
    sink: &mut dyn SyncSink,
    reports: &mut BTreeMap<String, MailboxSyncReport>,
    count: fn(&mut MailboxSyncReport) -> &mut u64,
) -> Result<()> {
    let total = ids.len() as u64;
    let mut fetched = 0u64;
    for chunk in ids.chunks(SINK_BATCH) {
        let messages = fetch_metadata(reads, chunk).await?;
        if messages
            .iter()
            .flat_map(|m| &m.label_ids)
            .any(|l| !cursor.knows(l))
        {
            // A label made since the sync read the map (by another client, or by a write
            // at a checkpoint) would otherwise be no tag at all.
            cursor.set_labels(&api::labels(&reads.client).await?);
        }
        let metas = messages.iter().filter_map(|m| cursor.meta_of(m));
        fetched += chunk.len() as u64;
        for (place, list) in by_place(metas) {
            if let Some(r) = reports.get_mut(place) {
                *count(r) += list.len() as u64;
            }
            mailbroker_core::place(sink, place, list).await?;
        }
        sink.progress(fetched, total);
        sink.checkpoint().await?;
        tracing::debug!(fetched, window = reads.window.width(), "gmail: metadata");
    }
    Ok(())
}

fn by_place(metas: impl Iterator<Item = MessageMeta>) -> BTreeMap<&'static str, Vec<MessageMeta>> {
    let mut out: BTreeMap<&'static str, Vec<MessageMeta>> = BTreeMap::new();
    for m in metas {
        out.entry(convert::place_of(m.flags.raw.iter()))
            .or_default()
            .push(m);
    }
    out
}

/// Metadata of these messages, fetched concurrently under the quota, as many at a time as
/// the window allows. A message deleted since it was listed is skipped; any other failure
/// fails the sync (what earlier chunks indexed stays, and the cursors say what is current).
async fn fetch_metadata(reads: &Reads, ids: &[String]) -> Result<Vec<api::Message>> {
    let results: Vec<Result<Option<api::Message>>> = futures::stream::iter(ids.iter().cloned())
        .map(|id| {
            let (client, window) = (reads.client.clone(), reads.window.clone());
            async move {
                let slot = window.acquire().await;
                let before = client.rate_limited();
                let answer = api::metadata(&client, &id).await;
                window.release(slot, client.rate_limited() != before);
                match answer {
                    Ok(m) => Ok(Some(m)),
                    Err(e) if e.is_not_found() => Ok(None),
                    Err(e) => Err(e),
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut messages = Vec::with_capacity(ids.len());
    for r in results {
        messages.extend(r?);
    }
    Ok(messages)
}
