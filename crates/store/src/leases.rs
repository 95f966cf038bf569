//! Who holds each account, and who waits for it next: a sync and a write on one account never
//! interleave, whichever process (or, once the index can be shared, machine) runs them.
//!
//! A holder keeps its lease by renewing it every `RENEW_EVERY`; one not renewed for
//! `LEASE_MS`, or whose process is gone from this host (killed, say), holds nothing, and the
//! next in line takes the account. One waiter at a time stands next in line: a sync that finds
//! it there at a checkpoint steps aside (`AccountLock::step_aside`), so a write waits for the
//! batch in flight, never for a whole sync. Others poll until the place is free.
//!
//! Invariant: a take happens inside one write transaction that first reads the row, so two
//! live holders never hold one account; each take adds one to the account's `fence`, and a
//! holder's writes check it in their own transaction (`Fence::begin`), so one that lost the
//! account (stalled past its lease) cannot write over its next holder.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mailbroker_core::{AccountId, Error};
use sqlx::{Any, Transaction};

use super::{Store, db_error, now_ms, process_runs};
use crate::util::{host, random_hex};

/// How long a command waits for an account another sync or write holds.
pub const LOCK_WAIT: Duration = Duration::from_secs(300);
/// A lease not renewed for this long is free.
const LEASE_MS: i64 = 30_000;
/// A holder renews its lease each third of `LEASE_MS`.
const RENEW_EVERY: Duration = Duration::from_secs(10);
/// A place in line not renewed for this long is free; a waiter renews it while it polls.
const WAITER_MS: i64 = 5_000;
/// How often a waiter looks again (SQLite tells no one of a change).
const POLL: Duration = Duration::from_millis(50);

/// One process's claim: a random id per lock, so two in one process exclude each other too.
#[derive(Debug, Clone)]
struct Party {
    id: String,
    host: String,
    pid: i64,
}

#[derive(Debug, sqlx::FromRow)]
struct LeaseRow {
    holder: Option<String>,
    holder_host: Option<String>,
    holder_pid: Option<i64>,
    expires_at: Option<i64>,
    waiter: Option<String>,
    waiter_host: Option<String>,
    waiter_pid: Option<i64>,
    waiter_expires_at: Option<i64>,
}

/// What a process wanting the account does next.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Take,
    /// Stand next in line, or renew its place there.
    Queue,
    Wait,
}

/// Whether a claim by `id` (of `host`'s process `pid`, good until `until`) still stands.
fn stands(
    id: Option<&str>,
    (host, pid, until): (Option<&str>, Option<i64>, Option<i64>),
    now: i64,
    here: &str,
    alive: &impl Fn(i64) -> bool,
) -> bool {
    // A process of this host is asked whether it runs; another host's is taken at its word
    // until its lease runs out.
    let running_here = host != Some(here) || pid.is_some_and(alive);
    id.is_some() && until.is_some_and(|u| u > now) && running_here
}

fn step(row: Option<&LeaseRow>, me: &Party, now: i64, alive: &impl Fn(i64) -> bool) -> Step {
    let Some(row) = row else { return Step::Take };
    let held = stands(
        row.holder.as_deref(),
        (row.holder_host.as_deref(), row.holder_pid, row.expires_at),
        now,
        &me.host,
        alive,
    );
    let mine = row.waiter.as_deref() == Some(me.id.as_str());
    let other_waits = !mine
        && stands(
            row.waiter.as_deref(),
            (
                row.waiter_host.as_deref(),
                row.waiter_pid,
                row.waiter_expires_at,
            ),
            now,
            &me.host,
            alive,
        );
    match (held, other_waits) {
        (false, false) => Step::Take,
        (_, true) => Step::Wait,
        (true, false)
            if mine
                && row
                    .waiter_expires_at
                    .is_some_and(|u| u > now + WAITER_MS / 2) =>
        {
            Step::Wait
        }
        (true, false) => Step::Queue,
    }
}

fn busy(account: &str) -> Error {
    Error::provider_unavailable(format!(
        "account {account} is busy with another sync or write"
    ))
    .with_next_step("retry when it has finished")
}

fn lost(account: &str) -> Error {
    Error::stale_state(format!(
        "account {account} was taken over by another process while this one held it"
    ))
    .with_next_step("retry: what was written before is in the index and the journal")
}

impl Store {
    /// Whether any of these lease holders still holds an account: a lease of theirs not
    /// expired and, on this host, their process running (the rule every taker applies).
    pub(super) async fn any_holds(&self, holders: &[String]) -> Result<bool, Error> {
        if holders.is_empty() {
            return Ok(false);
        }
        let rows: Vec<LeaseRow> = sqlx::query_as(
            "SELECT holder, holder_host, holder_pid, expires_at, waiter, waiter_host,
               waiter_pid, waiter_expires_at FROM account_leases WHERE holder IS NOT NULL",
        )
        .fetch_all(self.pool())
        .await
        .map_err(db_error)?;
        let (now, here) = (now_ms(), host());
        Ok(rows.iter().any(|r| {
            let claim = (r.holder_host.as_deref(), r.holder_pid, r.expires_at);
            r.holder.as_ref().is_some_and(|h| holders.contains(h))
                && stands(r.holder.as_deref(), claim, now, &here, &process_runs)
        }))
    }

    /// Takes the account's lease, waiting in line up to `wait`.
    pub async fn lock_account(&self, id: &AccountId, wait: Duration) -> Result<AccountLock, Error> {
        let me = Party {
            id: random_hex(8)?,
            host: host(),
            pid: i64::from(std::process::id()),
        };
        let fence = self
            .wait_in_line(id.as_str(), &me, Instant::now() + wait)
            .await?;
        Ok(AccountLock::holding(self.clone(), id.clone(), me, fence))
    }

    /// Polls until `me` takes the account (its fence), or gives up its place at `deadline`.
    async fn wait_in_line(
        &self,
        account: &str,
        me: &Party,
        deadline: Instant,
    ) -> Result<i64, Error> {
        loop {
            // Read first, write only to act: waiting costs the index no write transactions.
            let row = lease_row(self.pool(), account).await?;
            if step(row.as_ref(), me, now_ms(), &process_runs) != Step::Wait
                && let Some(fence) = self.act(account, me).await?
            {
                return Ok(fence);
            }
            if Instant::now() >= deadline {
                sqlx::query(
                    "UPDATE account_leases SET waiter = NULL WHERE account_id = $1 AND waiter = $2",
                )
                .bind(account)
                .bind(&me.id)
                .execute(self.pool())
                .await
                .map_err(db_error)?;
                return Err(busy(account));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Takes the account or stands in line, deciding again inside the write transaction.
    async fn act(&self, account: &str, me: &Party) -> Result<Option<i64>, Error> {
        let now = now_ms();
        let mut tx = self.write_tx().await?;
        let row = lease_row(&mut *tx, account).await?;
        let taken = match step(row.as_ref(), me, now, &process_runs) {
            Step::Wait => None,
            Step::Take => Some(
                sqlx::query_scalar(
                    "INSERT INTO account_leases (account_id, fence, holder, holder_host, holder_pid,
                       expires_at) VALUES ($1, 1, $2, $3, $4, $5)
                     ON CONFLICT (account_id) DO UPDATE SET fence = account_leases.fence + 1,
                       holder = excluded.holder, holder_host = excluded.holder_host,
                       holder_pid = excluded.holder_pid, expires_at = excluded.expires_at,
                       waiter = NULL, waiter_host = NULL, waiter_pid = NULL,
                       waiter_expires_at = NULL
                     RETURNING fence",
                )
                .bind(account)
                .bind(&me.id)
                .bind(&me.host)
                .bind(me.pid)
                .bind(now + LEASE_MS)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)?,
            ),
            Step::Queue => {
                sqlx::query(
                    "INSERT INTO account_leases (account_id, waiter, waiter_host, waiter_pid,
                       waiter_expires_at) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (account_id) DO UPDATE SET waiter = excluded.waiter,
                       waiter_host = excluded.waiter_host, waiter_pid = excluded.waiter_pid,
                       waiter_expires_at = excluded.waiter_expires_at",
                )
                .bind(account)
                .bind(&me.id)
                .bind(&me.host)
                .bind(me.pid)
                .bind(now + WAITER_MS)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
                None
            }
        };
        tx.commit().await.map_err(db_error)?;
        Ok(taken)
    }
}

async fn lease_row<'c>(
    conn: impl sqlx::Executor<'c, Database = Any>,
    account: &str,
) -> Result<Option<LeaseRow>, Error> {
    sqlx::query_as("SELECT * FROM account_leases WHERE account_id = $1")
        .bind(account)
        .fetch_optional(conn)
        .await
        .map_err(db_error)
}

/// What a holder's writes carry to show the account is still theirs.
#[derive(Debug, Clone)]
pub struct Fence {
    account: String,
    holder: String,
    fence: i64,
}

impl Fence {
    /// Whether the lease is still this holder's, renewing it if so: checked before a batch
    /// is sent, so a holder that lost the account (stalled past its lease) sends nothing
    /// more to its server.
    pub async fn confirm(&self, store: &Store) -> Result<(), Error> {
        match renew(store.pool(), self).await? {
            0 => Err(lost(&self.account)),
            _ => Ok(()),
        }
    }

    /// A write transaction in which the lease is still this holder's (and renewed by it):
    /// a holder that lost the account writes nothing, and says so.
    pub(crate) async fn begin(
        fence: Option<&Fence>,
        store: &Store,
    ) -> Result<Transaction<'static, Any>, Error> {
        let mut tx = store.write_tx().await?;
        if let Some(f) = fence
            && renew(&mut *tx, f).await? == 0
        {
            return Err(lost(&f.account));
        }
        Ok(tx)
    }
}

/// Extends `f`'s lease if it still holds it; the number of rows that says whether it does.
async fn renew<'c>(conn: impl sqlx::Executor<'c, Database = Any>, f: &Fence) -> Result<u64, Error> {
    sqlx::query(
        "UPDATE account_leases SET expires_at = $1 WHERE account_id = $2 AND holder = $3 AND fence = $4",
    )
    .bind(now_ms() + LEASE_MS)
    .bind(&f.account)
    .bind(&f.holder)
    .bind(f.fence)
    .execute(conn)
    .await
    .map(|r| r.rows_affected())
    .map_err(db_error)
}

/// Held while an account is being synced or written; released on drop.
#[derive(Debug)]
pub struct AccountLock {
    store: Store,
    account: AccountId,
    me: Party,
    fence: i64,
    /// Set by the renewing task when the lease turned out to be someone else's.
    lost: Arc<AtomicBool>,
    renewing: Option<tokio::task::JoinHandle<()>>,
}

impl AccountLock {
    fn holding(store: Store, account: AccountId, me: Party, fence: i64) -> AccountLock {
        let mut lock = AccountLock {
            store,
            account,
            me,
            fence,
            lost: Arc::new(AtomicBool::new(false)),
            renewing: None,
        };
        lock.renew_meanwhile();
        lock
    }

    /// This lock's holder id, as the account's lease names it.
    pub fn holder(&self) -> &str {
        &self.me.id
    }

    pub fn fence(&self) -> Fence {
        Fence {
            account: self.account.to_string(),
            holder: self.me.id.clone(),
            fence: self.fence,
        }
    }

    /// Renews the lease every `RENEW_EVERY` while held, through long server round trips that
    /// write nothing to the index.
    fn renew_meanwhile(&mut self) {
        let (store, fence, lost) = (self.store.clone(), self.fence(), self.lost.clone());
        self.renewing = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(RENEW_EVERY).await;
                match renew(store.pool(), &fence).await {
                    Ok(0) => {
                        tracing::warn!(account = %fence.account, "account lease lost");
                        lost.store(true, Ordering::Relaxed);
                        return;
                    }
                    Ok(_) => {}
                    // A busy index: the next round tries again, well within the lease.
                    Err(e) => tracing::debug!(account = %fence.account, "lease not renewed: {e}"),
                }
            }
        }));
    }

    /// Whether someone stands next in line for the account.
    pub async fn awaited(&self) -> Result<bool, Error> {
        if self.lost.load(Ordering::Relaxed) {
            return Err(lost(self.account.as_str()));
        }
        let row = lease_row(self.store.pool(), self.account.as_str()).await?;
        let waits = row.is_some_and(|row| {
            stands(
                row.waiter.as_deref(),
                (
                    row.waiter_host.as_deref(),
                    row.waiter_pid,
                    row.waiter_expires_at,
                ),
                now_ms(),
                &self.me.host,
                &process_runs,
            )
        });
        Ok(waits)
    }

    /// Lets whoever waits for the account have it, then takes it back in turn. The holder
    /// must have nothing half done: what it wrote is committed, and what it read from the
    /// server is applied, because someone else changes the account meanwhile.
    pub async fn step_aside(&mut self) -> Result<(), Error> {
        self.release_now().await?;
        let account = self.account.to_string();
        self.fence = (self.store)
            .wait_in_line(&account, &self.me, Instant::now() + LOCK_WAIT)
            .await?;
        self.lost.store(false, Ordering::Relaxed);
        self.renew_meanwhile();
        Ok(())
    }

    /// Frees the account for the next in line now. Dropping the lock frees it too, but in a
    /// task of its own, which a process that ends at once may never run: its lease would
    /// then stand until its time runs out for anyone who cannot see the process is gone.
    pub async fn release(mut self) {
        if let Err(e) = self.release_now().await {
            tracing::debug!(account = %self.account, "lease not released: {e}");
        }
    }

    async fn release_now(&mut self) -> Result<(), Error> {
        if let Some(task) = self.renewing.take() {
            task.abort();
        }
        release(&self.store, &self.fence()).await
    }
}

async fn release(store: &Store, f: &Fence) -> Result<(), Error> {
    sqlx::query(
        "UPDATE account_leases SET holder = NULL, expires_at = NULL
         WHERE account_id = $1 AND holder = $2 AND fence = $3",
    )
    .bind(&f.account)
    .bind(&f.holder)
    .bind(f.fence)
    .execute(store.pool())
    .await
    .map(drop)
    .map_err(db_error)
}

impl Drop for AccountLock {
    /// Frees the account for the next in line. A process that ends first leaves its lease
    /// behind, which stands no longer than the process on this host (or `LEASE_MS` elsewhere).
    fn drop(&mut self) {
        let Some(task) = self.renewing.take() else {
            return;
        };
        task.abort();
        let (store, fence) = (self.store.clone(), self.fence());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = release(&store, &fence).await {
                    tracing::debug!(account = %fence.account, "lease not released: {e}");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn party(id: &str) -> Party {
        Party {
            id: id.into(),
            host: "here".into(),
            pid: 1,
        }
    }

    fn row(
        holder: Option<(&str, &str, i64, i64)>,
        waiter: Option<(&str, &str, i64, i64)>,
    ) -> LeaseRow {
        LeaseRow {
            holder: holder.map(|h| h.0.into()),
            holder_host: holder.map(|h| h.1.into()),
            holder_pid: holder.map(|h| h.2),
            expires_at: holder.map(|h| h.3),
            waiter: waiter.map(|w| w.0.into()),
            waiter_host: waiter.map(|w| w.1.into()),
            waiter_pid: waiter.map(|w| w.2),
            waiter_expires_at: waiter.map(|w| w.3),
        }
    }

    #[test]
    fn a_lease_stands_while_renewed_and_its_process_runs_here() {
        let me = party("me");
        let alive = |pid: i64| pid != 99;
        let now = 1_000_000;
        let cases = [
            (None, Step::Take),
            (Some(row(None, None)), Step::Take),
            (
                Some(row(Some(("h", "here", 2, now + 1)), None)),
                Step::Queue,
            ),
            // Expired, or its process gone from this host: free.
            (Some(row(Some(("h", "here", 2, now)), None)), Step::Take),
            (
                Some(row(Some(("h", "here", 99, now + 1)), None)),
                Step::Take,
            ),
            // Another host's pid is not this host's to look up.
            (
                Some(row(Some(("h", "there", 99, now + 1)), None)),
                Step::Queue,
            ),
            // Someone else next in line: wait, even when the account is free.
            (
                Some(row(None, Some(("w", "there", 5, now + 1)))),
                Step::Wait,
            ),
            (
                Some(row(
                    Some(("h", "here", 2, now + 1)),
                    Some(("w", "here", 2, now + 1)),
                )),
                Step::Wait,
            ),
            // Their place lapsed, or is mine: take a free account.
            (Some(row(None, Some(("w", "here", 2, now - 1)))), Step::Take),
            (
                Some(row(None, Some(("me", "here", 1, now + 1)))),
                Step::Take,
            ),
            // Mine and fresh: wait; mine and half gone: renew it.
            (
                Some(row(
                    Some(("h", "here", 2, now + 1)),
                    Some(("me", "here", 1, now + WAITER_MS)),
                )),
                Step::Wait,
            ),
            (
                Some(row(
                    Some(("h", "here", 2, now + 1)),
                    Some(("me", "here", 1, now + 10)),
                )),
                Step::Queue,
            ),
        ];
        for (i, (row, want)) in cases.into_iter().enumerate() {
            assert_eq!(step(row.as_ref(), &me, now, &alive), want, "case {i}");
        }
    }

    #[tokio::test]
    async fn a_lease_excludes_a_second_holder_until_dropped() {
        for (_dir, store) in crate::test_stores().await {
            a_lease_excludes_a_second_holder_until_dropped_on(store).await;
        }
    }

    async fn a_lease_excludes_a_second_holder_until_dropped_on(store: Store) {
        let id: AccountId = "work".parse().unwrap();
        let first = store.lock_account(&id, Duration::ZERO).await.unwrap();
        let busy = store
            .lock_account(&id, Duration::from_millis(120))
            .await
            .unwrap_err();
        assert_eq!(busy.error_type(), "provider_unavailable");
        drop(first);
        store
            .lock_account(&id, Duration::from_secs(2))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_holder_stepping_aside_lets_the_waiter_in_then_takes_the_account_back() {
        for (_dir, store) in crate::test_stores().await {
            a_holder_stepping_aside_lets_the_waiter_in_then_takes_the_account_back_on(store).await;
        }
    }

    async fn a_holder_stepping_aside_lets_the_waiter_in_then_takes_the_account_back_on(
        store: Store,
    ) {
        let id: AccountId = "work".parse().unwrap();
        let mut first = store.lock_account(&id, Duration::ZERO).await.unwrap();
        assert!(!first.awaited().await.unwrap(), "nobody waits yet");
        let waiting = {
            let (store, id) = (store.clone(), id.clone());
            tokio::spawn(async move { store.lock_account(&id, Duration::from_secs(10)).await })
        };
        while !first.awaited().await.unwrap() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let stepping = tokio::spawn(async move { first.step_aside().await.map(|()| first) });
        let second = waiting.await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !stepping.is_finished(),
            "the account is back only after the waiter"
        );
        drop(second);
        let first = stepping.await.unwrap().unwrap();
        assert!(!first.awaited().await.unwrap());
        store
            .lock_account(&id, Duration::from_millis(120))
            .await
            .unwrap_err();
    }

    #[tokio::test]
    async fn a_holder_that_lost_its_lease_writes_nothing() {
        for (_dir, store) in crate::test_stores().await {
            a_holder_that_lost_its_lease_writes_nothing_on(store).await;
        }
    }

    async fn a_holder_that_lost_its_lease_writes_nothing_on(store: Store) {
        let id: AccountId = "work".parse().unwrap();
        let first = store.lock_account(&id, Duration::ZERO).await.unwrap();
        let stale = first.fence();
        Fence::begin(Some(&stale), &store)
            .await
            .unwrap()
            .commit()
            .await
            .unwrap();
        // Its lease runs out (a stall past LEASE_MS) and another process takes the account.
        sqlx::query("UPDATE account_leases SET expires_at = 0")
            .execute(store.pool())
            .await
            .unwrap();
        let second = store
            .lock_account(&id, Duration::from_secs(2))
            .await
            .unwrap();
        let refused = Fence::begin(Some(&stale), &store).await.unwrap_err();
        assert_eq!(refused.error_type(), "stale_state");
        Fence::begin(Some(&second.fence()), &store).await.unwrap();
    }
}
