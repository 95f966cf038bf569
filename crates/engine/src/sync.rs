//! Sync orchestration: for each account, take its lease, connect through the registry, let the
//! adapter feed a `StoreSink`, and report what changed.

use std::time::Instant;

use mailbroker_core::{AccountId, Error, MailboxSyncReport, Result, SyncRequest};
use serde::Serialize;

use crate::registry;
use crate::sessions::Session;
use mailbroker_store::{AccountLock, Store, StoreSink, SyncProgress};

#[derive(Debug, Serialize)]
pub struct AccountSyncReport {
    pub account: AccountId,
    pub mailboxes: Vec<MailboxSyncReport>,
    pub added: u64,
    pub changed: u64,
    pub removed: u64,
    /// Messages whose text (snippet, full-text entry, attachments) was filled in after their
    /// headers were indexed.
    pub text_filled: u64,
    /// Protocol commands sent, login and logout included.
    pub commands: u64,
    pub duration_ms: u64,
    /// Of `duration_ms`, the time to connect, secure the connection and log in.
    pub connect_ms: u64,
    /// Of `duration_ms`, the time until every header was indexed (searchable by from:,
    /// subject:, tag:, dates…), when text was filled in after it; the rest filled text in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers_ms: Option<u64>,
}

/// One account's sync within a sync of `asked` accounts: of several, a failure is set aside
/// (the inner `Err`) so the others go on; asked for one alone, its error is the answer.
pub fn set_aside(
    asked: usize,
    synced: Result<AccountSyncReport>,
) -> Result<std::result::Result<AccountSyncReport, Error>> {
    match synced {
        Err(e) if asked == 1 => Err(e),
        other => Ok(other),
    }
}

/// Syncs one account. `progress` is called as messages arrive and as their text is filled in.
pub async fn sync_account(
    store: &Store,
    id: &AccountId,
    full: bool,
    progress: impl FnMut(SyncProgress) + Send + Sync + 'static,
) -> Result<AccountSyncReport> {
    let started = Instant::now();
    let lock = store.lock_account(id, mailbroker_store::LOCK_WAIT).await?;
    let account = store.account(id).await?;
    let connecting = Instant::now();
    let mut provider = registry::connect(store, &account).await?;
    let connect_ms = connecting.elapsed().as_millis() as u64;
    let synced = sync_with(store, id, lock, provider.as_mut(), full, progress).await;
    provider.close().await;
    let mut report = synced?;
    report.commands = provider.commands_sent();
    report.connect_ms = connect_ms;
    report.duration_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// What a sync that ran to its end records: when, and the unknown outcomes it settles.
async fn settled(store: &Store, id: &AccountId) -> Result<()> {
    store.mark_synced(id).await?;
    // The index is the server's again: an earlier write whose answer was lost shows here
    // (one whose process ended first is marked interrupted, then settled like the rest).
    store.interrupt_orphaned().await?;
    store.settle_unknown().await?;
    Ok(())
}

/// Syncs one account on a session already open (what `serve` does on the connection it
/// watches with), under the account's `lock`, which it gives a waiting write at each of the
/// adapter's checkpoints (`SyncSink::checkpoint`) and releases when done.
pub async fn sync_with(
    store: &Store,
    id: &AccountId,
    lock: AccountLock,
    provider: &mut dyn mailbroker_core::Provider,
    full: bool,
    progress: impl FnMut(SyncProgress) + Send + Sync + 'static,
) -> Result<AccountSyncReport> {
    let sink = StoreSink::new(store.clone(), id.clone()).with_lease(lock);
    sync_into(store, id, sink, provider, (full, progress)).await
}

/// Syncs one account on a change's session, under the lease the session holds and keeps:
/// a staged deletion's run brings the index up to date on the login that then sends its
/// batches, with no other writer between them.
pub async fn sync_on(
    store: &Store,
    id: &AccountId,
    session: &mut Session,
) -> Result<AccountSyncReport> {
    let sink = StoreSink::new(store.clone(), id.clone()).with_fence(session.fence());
    sync_into(store, id, sink, session.provider.as_mut(), (false, |_| {})).await
}

/// Feeds `sink` from the provider's sync and records its end (`settled`).
async fn sync_into(
    store: &Store,
    id: &AccountId,
    sink: StoreSink,
    provider: &mut dyn mailbroker_core::Provider,
    (full, mut progress): (bool, impl FnMut(SyncProgress) + Send + Sync + 'static),
) -> Result<AccountSyncReport> {
    let started = Instant::now();
    let commands_before = provider.commands_sent();
    let known = store.cursors(id).await?;
    let request = SyncRequest { full, known };
    let headers_done = std::sync::Arc::new(std::sync::OnceLock::new());
    let mark = headers_done.clone();
    let mut sink = sink.on_progress(move |p| {
        if matches!(p, SyncProgress::Text { .. }) {
            mark.get_or_init(|| started.elapsed().as_millis() as u64);
        }
        progress(p)
    });
    let synced = match provider.sync(&request, &mut sink).await {
        Ok(mailboxes) => settled(store, id).await.map(|()| mailboxes),
        Err(e) => Err(e.context(format!("sync of account {id}"))),
    };
    // Still holding the account until here: a write waiting for it sees the sync whole.
    let finished = sink.finish().await;
    let mailboxes = synced?;
    finished?;
    Ok(AccountSyncReport {
        account: id.clone(),
        added: mailboxes.iter().map(|m| m.added).sum(),
        changed: mailboxes.iter().map(|m| m.changed).sum(),
        removed: mailboxes.iter().map(|m| m.removed).sum(),
        text_filled: mailboxes.iter().map(|m| m.text_filled).sum(),
        mailboxes,
        commands: provider.commands_sent() - commands_before,
        duration_ms: started.elapsed().as_millis() as u64,
        connect_ms: 0,
        headers_ms: headers_done.get().copied(),
    })
}
