//! Sync: one history id for the whole account. First (or after history expired): list every
//! id, then `messages.get format=metadata` for each under the quota. Afterwards:
//! `history.list` from the stored history id, and a metadata GET of only the messages it names.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use mailbroker_core::{
    MailboxCursor, MailboxSyncReport, MessageMeta, Result, SyncMode, SyncRequest, SyncSink, Uid,
};
use tokio::sync::Semaphore;

use crate::api;
use crate::client::Client;
use crate::convert::{self, Cursor, UIDVALIDITY};

/// Metadata GETs in flight at first; every rate-limit answer takes one away (down to one).
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
    sink.mailboxes(&convert::mailboxes()).await?;
    let known = request
        .known
        .iter()
        .map(|(_, c)| c.highestmodseq)
        .min()
        .unwrap_or(0);
    let start = if request.full || request.known.len() < convert::mailboxes().len() {
        0
    } else {
        cursor.history_id.min(known)
    };
    let reports = match start {
        0 => full(client, cursor, sink).await?,
        start => match api::history_since(client, start).await {
            Ok(history) => incremental(client, cursor, history, sink).await?,
            Err(e) if e.error_type() == "not_found" => {
                tracing::info!("gmail: history from {start} has expired; syncing in full");
                full(client, cursor, sink).await?
            }
            Err(e) => return Err(e),
        },
    };
    sink.account_cursor(&cursor.encode()).await?;
    Ok(reports)
}

fn report(mailbox: &str, mode: SyncMode) -> MailboxSyncReport {
    MailboxSyncReport {
        mailbox: mailbox.to_string(),
        mode,
        added: 0,
        changed: 0,
        removed: 0,
        uidvalidity_reset: false,
        error: None,
    }
}

async fn finish(
    sink: &mut dyn SyncSink,
    cursor: &mut Cursor,
    history_id: u64,
    reports: BTreeMap<String, MailboxSyncReport>,
) -> Result<Vec<MailboxSyncReport>> {
    cursor.history_id = history_id;
    let done = MailboxCursor {
        uidvalidity: UIDVALIDITY,
        uidnext: 0,
        highestmodseq: history_id,
    };
    for mb in convert::mailboxes() {
        sink.mailbox_done(&mb.name, done).await?;
    }
    Ok(reports.into_values().collect())
}

async fn full(
    client: &Arc<Client>,
    cursor: &mut Cursor,
    sink: &mut dyn SyncSink,
) -> Result<Vec<MailboxSyncReport>> {
    // The history id before listing: whatever changes during the listing, the next
    // incremental sync replays.
    let history_id = api::profile(client).await?.history_id;
    let ids = api::all_ids(client, |n| sink.progress(0, n as u64)).await?;
    let mut reports = BTreeMap::new();
    for mb in convert::mailboxes() {
        sink.reset_mailbox(&mb.name, UIDVALIDITY).await?;
        reports.insert(mb.name.clone(), report(&mb.name, SyncMode::Full));
    }
    fetch_into(client, cursor, &ids, sink, &mut reports, |r| &mut r.added).await?;
    finish(sink, cursor, history_id, reports).await
}

async fn incremental(
    client: &Arc<Client>,
    cursor: &mut Cursor,
    history: api::HistorySince,
    sink: &mut dyn SyncSink,
) -> Result<Vec<MailboxSyncReport>> {
    let (deleted, changed) = api::touched(&history.records);
    let mut reports: BTreeMap<String, MailboxSyncReport> = convert::mailboxes()
        .iter()
        .map(|mb| (mb.name.clone(), report(&mb.name, SyncMode::History)))
        .collect();
    let gone: Vec<Uid> = deleted
        .iter()
        .filter_map(|id| convert::uid_of(id))
        .collect();
    if !gone.is_empty() {
        for mb in convert::mailboxes() {
            let n = sink.remove_messages(&mb.name, gone.clone()).await?;
            if let Some(r) = reports.get_mut(&mb.name) {
                r.removed += n;
            }
        }
    }
    let ids: Vec<String> = changed.into_iter().collect();
    fetch_into(client, cursor, &ids, sink, &mut reports, |r| &mut r.changed).await?;
    if ids.is_empty() && gone.is_empty() {
        reports
            .values_mut()
            .for_each(|r| r.mode = SyncMode::Unchanged);
    }
    finish(sink, cursor, history.history_id, reports).await
}

/// Fetches these messages' metadata and puts each in its place, counting it with `count`.
/// `place_messages` keeps the local id of a message whose labels moved it.
async fn fetch_into(
    client: &Arc<Client>,
    cursor: &Cursor,
    ids: &[String],
    sink: &mut dyn SyncSink,
    reports: &mut BTreeMap<String, MailboxSyncReport>,
    count: fn(&mut MailboxSyncReport) -> &mut u64,
) -> Result<()> {
    let total = ids.len() as u64;
    let mut fetched = 0u64;
    for chunk in ids.chunks(SINK_BATCH) {
        let metas = fetch_metadata(client, cursor, chunk).await?;
        fetched += chunk.len() as u64;
        for (place, list) in by_place(metas) {
            if let Some(r) = reports.get_mut(place) {
                *count(r) += list.len() as u64;
            }
            sink.place_messages(place, list).await?;
        }
        sink.progress(fetched, total);
    }
    Ok(())
}

fn by_place(metas: Vec<MessageMeta>) -> BTreeMap<&'static str, Vec<MessageMeta>> {
    let mut out: BTreeMap<&'static str, Vec<MessageMeta>> = BTreeMap::new();
    for m in metas {
        out.entry(convert::place_of(m.flags.raw.iter()))
            .or_default()
            .push(m);
    }
    out
}

/// Metadata of these messages, fetched concurrently under the quota. A message deleted since
/// it was listed is skipped; any other failure fails the sync (nothing half-written: the
/// cursors only move at the end).
async fn fetch_metadata(
    client: &Arc<Client>,
    cursor: &Cursor,
    ids: &[String],
) -> Result<Vec<MessageMeta>> {
    let permits = Arc::new(Semaphore::new(CONCURRENCY));
    let width = Arc::new(AtomicUsize::new(CONCURRENCY));
    let results: Vec<Result<Option<api::Message>>> = futures::stream::iter(ids.iter().cloned())
        .map(|id| {
            let (client, permits, width) = (client.clone(), permits.clone(), width.clone());
            async move {
                let permit = permits.acquire_owned().await.ok();
                let before = client.rate_limited();
                let answer = api::metadata(&client, &id).await;
                // Met a rate limit: one request fewer in flight from now on (at least one).
                if client.rate_limited() != before
                    && width
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                            (w > 1).then(|| w - 1)
                        })
                        .is_ok()
                    && let Some(p) = permit
                {
                    p.forget();
                }
                match answer {
                    Ok(m) => Ok(Some(m)),
                    Err(e) if e.error_type() == "not_found" => Ok(None),
                    Err(e) => Err(e),
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut metas = Vec::with_capacity(ids.len());
    for r in results {
        if let Some(m) = r? {
            metas.extend(cursor.meta_of(&m));
        }
    }
    Ok(metas)
}
