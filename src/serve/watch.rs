//! One account kept fresh: connect, catch up, then wait for the server's announcements (IMAP
//! IDLE) or poll, syncing on the same connection each time, until `serve` stops.

use std::time::Duration;

use mailbroker_core::{AccountId, Error, Provider, Result, Role, SyncMode, Watched};
use tokio::time::Instant;

use super::Freshness;
use crate::registry;
use crate::store::Store;

/// IDLE is re-issued well before the 29 minutes after which a server may end it (RFC 2177).
const IDLE_RENEW: Duration = Duration::from_secs(25 * 60);
/// How often an account queued for its first sync asks again for a place.
const FIRST_SYNC_POLL: Duration = Duration::from_secs(1);
/// The longest wait between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

pub struct Watcher {
    pub store: Store,
    /// The node it runs on, and how many first syncs all nodes run at once.
    pub node: String,
    pub first_syncs: u32,
    pub account: AccountId,
    pub freshness: Freshness,
    pub stop: tokio_util::sync::CancellationToken,
    pub interval: Duration,
    pub poll: Duration,
}

impl Watcher {
    /// Keeps the account fresh until `serve` stops; a failure is reported, waited out
    /// (longer each time, with jitter) and retried.
    pub async fn run(self) {
        let id = self.account.to_string();
        let mut failures = 0;
        while !self.stop.is_cancelled() {
            match self.connection().await {
                Ok(()) => return,
                Err(e) => {
                    failures += 1;
                    self.freshness.failed(&id, &e);
                    let wait = backoff(failures, &e, self.interval);
                    tracing::warn!(
                        account = id,
                        error_type = e.error_type(),
                        retry_in_s = wait.as_secs(),
                        "serve: {}",
                        e.message()
                    );
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = self.stop.cancelled() => return,
                    }
                }
            }
        }
    }

    /// One connection's life: connect, catch up, then watch or poll on it until `serve`
    /// stops (`Ok`) or the connection fails; it is closed politely either way.
    async fn connection(&self) -> Result<()> {
        let record = self.store.account(&self.account).await?;
        let first = record.last_sync_at.is_none();
        if first && !self.queue_first_sync().await? {
            return Ok(());
        }
        let watched = self.connect_and_watch(&record, first).await;
        if first && watched.is_err() {
            // Perhaps before its first sync ended it (`watch_on`): the place goes on anyway.
            self.end_first_sync().await;
        }
        watched
    }

    /// Waits for a place among the first syncs all nodes run at once; false if `serve`
    /// stops meanwhile.
    async fn queue_first_sync(&self) -> Result<bool> {
        let mut said = false;
        loop {
            let (node, account) = (&self.node, &self.account);
            if self
                .store
                .claim_first_sync(node, account, self.first_syncs)
                .await?
            {
                if said {
                    // Queued no longer: it shows again once its first sync has run.
                    self.freshness.forget(account.as_str());
                }
                return Ok(true);
            }
            if !said {
                self.freshness.watching(account.as_str(), "queued");
                tracing::info!(account = %account, "serve: first sync queued behind others");
                said = true;
            }
            tokio::select! {
                () = tokio::time::sleep(FIRST_SYNC_POLL) => {}
                () = self.stop.cancelled() => return Ok(false),
            }
        }
    }

    async fn end_first_sync(&self) {
        if let Err(e) = self.store.end_first_sync(&self.account).await {
            // Its place stays taken until this node leaves or is found dead.
            tracing::warn!(account = %self.account, error = %e, "serve: first sync not ended");
        }
    }

    async fn connect_and_watch(
        &self,
        record: &crate::store::AccountRecord,
        first: bool,
    ) -> Result<()> {
        let inbox = self
            .store
            .mailboxes(&self.account)
            .await?
            .into_iter()
            .find(|m| m.role == Some(Role::Inbox))
            .map_or_else(|| "INBOX".to_string(), |m| m.name);
        let mut provider = registry::connect(&self.store, record).await?;
        let watched = self.watch_on(provider.as_mut(), &inbox, first).await;
        provider.close().await;
        watched
    }

    async fn watch_on(&self, provider: &mut dyn Provider, inbox: &str, first: bool) -> Result<()> {
        let id = self.account.to_string();
        let caught_up = self.sync(provider).await;
        if first {
            self.end_first_sync().await;
        }
        caught_up?;
        let stop = self.stop.cancelled();
        tokio::pin!(stop);
        let mut idle = true;
        self.freshness.watching(&id, "idle");
        let mut full_at = Instant::now() + self.interval;
        loop {
            let until_full = full_at.saturating_duration_since(Instant::now());
            let outcome = match idle {
                true => match provider
                    .watch(inbox, until_full.min(IDLE_RENEW), stop.as_mut())
                    .await
                {
                    Err(e) if e.error_type() == "unsupported" => {
                        idle = false;
                        self.freshness.watching(&id, "polling");
                        continue;
                    }
                    other => other?,
                },
                false => tokio::select! {
                    () = tokio::time::sleep(self.poll.min(until_full)) => Watched::Changed,
                    () = stop.as_mut() => Watched::Stopped,
                },
            };
            match outcome {
                Watched::Stopped => return Ok(()),
                Watched::Changed => self.sync(provider).await?,
                Watched::Quiet if Instant::now() >= full_at => self.sync(provider).await?,
                // IDLE ended for its renewal: issued again at once.
                Watched::Quiet => {}
            }
            // Every sync covers the whole account, so one that came due counts as the
            // interval's.
            if Instant::now() >= full_at {
                full_at = Instant::now() + self.interval;
            }
        }
    }

    /// An incremental sync of the whole account on the open session, under the account's
    /// lock (a write waiting for it runs at the sync's next checkpoint); one log line with
    /// its mode and counts.
    async fn sync(&self, provider: &mut dyn Provider) -> Result<()> {
        let lock = (self.store)
            .lock_account(&self.account, crate::store::LOCK_WAIT)
            .await?;
        let report =
            crate::sync::sync_with(&self.store, &self.account, lock, provider, false, |_| {})
                .await?;
        let mode = report
            .mailboxes
            .iter()
            .map(|m| m.mode)
            .max_by_key(|m| weight(*m))
            .unwrap_or(SyncMode::Unchanged);
        tracing::info!(
            account = %self.account,
            mode = ?mode,
            added = report.added,
            changed = report.changed,
            removed = report.removed,
            commands = report.commands,
            "sync"
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self.freshness.synced(self.account.as_str(), now);
        Ok(())
    }
}

/// Which of a sync's mailbox modes its log line names: the one that did the most work.
fn weight(mode: SyncMode) -> u8 {
    match mode {
        SyncMode::Unchanged => 0,
        SyncMode::Delta | SyncMode::Modified => 1,
        SyncMode::Scan => 2,
        SyncMode::Full => 3,
    }
}

/// How long to wait before trying again after the `n`th failure in a row: doubling from a
/// second up to a minute, with up to half again of jitter so accounts on one server do not
/// retry in step; refused credentials wait a whole interval (a person has to act).
fn backoff(n: u32, e: &Error, interval: Duration) -> Duration {
    if matches!(e.error_type(), "auth_required" | "insufficient_scope") {
        return interval;
    }
    let base = Duration::from_secs(1 << n.saturating_sub(1).min(6)).min(MAX_BACKOFF);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    base + base.mul_f64(f64::from(nanos % 1000) / 2000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_minute_and_waits_out_refused_credentials() {
        let down = Error::provider_unavailable("down");
        let interval = Duration::from_secs(300);
        assert!(backoff(1, &down, interval) >= Duration::from_secs(1));
        assert!(backoff(1, &down, interval) < Duration::from_secs(2));
        assert!(backoff(3, &down, interval) >= Duration::from_secs(4));
        assert!(backoff(30, &down, interval) <= MAX_BACKOFF + MAX_BACKOFF / 2);
        let refused = Error::auth_required("revoked");
        assert_eq!(backoff(1, &refused, interval), interval);
    }
}
