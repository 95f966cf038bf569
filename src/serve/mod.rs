//! `mailbroker serve`: one long-running process that serves MCP over Streamable HTTP (with
//! exactly `mcp --http`'s controls) and keeps every account fresh in the background, so an
//! assistant's searches see changes made elsewhere within seconds without `sync_accounts`.
//!
//! - `watch.rs`: one task per account. Where the server can announce changes (IMAP IDLE on
//!   INBOX) it waits for an announcement and syncs on the same connection; otherwise it polls
//!   (Gmail's history, Graph's delta links, IMAP without IDLE). Every mailbox of every account
//!   is also synced (incrementally) every `--interval`, for changes no IDLE announces. A
//!   lost connection backs off with jitter and reconnects; an account whose credentials are
//!   refused is reported and the others go on. An account never synced first waits for a
//!   place among the first syncs all nodes run at once (`--first-syncs`).
//! - `crate::freshness`: each account's freshness (`last_sync_at`, `watching`), shared with
//!   the MCP server's `list_accounts` and published in the node's row for `serve status`.
//!
//! Architecture Invariant: background syncs take the account's lease (`store/leases.rs`), as
//! a write or a deletion does, and only for the sync itself, never while waiting on IDLE. A
//! write that waits for it gets it at the sync's next checkpoint (`SyncSink::checkpoint`,
//! after each batch the sync applies), so it waits for the batch in flight, not for the whole
//! sync; it then holds the lease to its end, so a sync never sees half a write.
//!
//! Several `serve` processes may run on one index (nodes): each beats in the index every third
//! of `--takeover`, and each account is watched by exactly one live node, the accounts spread
//! evenly (`store/nodes.rs`). A node silent for the takeover time is dead: the others take
//! its accounts at their next beat. An account added while nodes run is taken at the next beat
//! too.
//!
//! Stopping (SIGTERM or SIGINT): no new connection is accepted; watchers end their IDLE with
//! DONE and LOGOUT; a write already sent runs to its end and is journaled; then the process
//! exits 0. A process killed outright loses nothing: the next start syncs from the stored
//! cursors.

pub mod command;
mod limits;
mod watch;

use std::collections::BTreeMap;
use std::time::Duration;

use mailbroker_core::{AccountId, Result};

pub use crate::freshness::{Freshness, Watching};

use crate::home::Home;
use crate::mcp::http::{self, HttpOptions};
use crate::store::Store;

/// What `serve` runs with.
pub struct ServeOptions {
    pub http: HttpOptions,
    /// Between syncs of every mailbox of every account, for what no IDLE announces.
    pub interval: Duration,
    /// How often accounts that cannot announce changes (Gmail, Graph, IMAP without IDLE)
    /// are polled.
    pub poll: Duration,
    /// How long a node may be silent before the others take its accounts; it beats every
    /// third of it.
    pub takeover: Duration,
    /// How many first syncs the nodes of the index run at once, over all of them.
    pub first_syncs: u32,
    /// How many accounts this node may watch within its open files (`limits.rs`).
    pub watches: usize,
}

/// How long a stopping `serve` waits for writes in flight and watchers to end.
const STOP_WITHIN: Duration = Duration::from_millis(4500);

/// Serves until SIGTERM or SIGINT, then stops cleanly.
pub async fn run(home: Home, store: Store, mut options: ServeOptions) -> Result<()> {
    let freshness = Freshness::new();
    options.http.mcp.freshness = Some(freshness.clone());
    let work = options.http.mcp.work.clone();
    let bound = http::bind(home.clone(), store.clone(), options.http).await?;
    let stop = tokio_util::sync::CancellationToken::new();
    let mut node = Node {
        id: crate::util::random_hex(8)?,
        watchers: Watchers {
            store: store.clone(),
            first_syncs: options.first_syncs,
            freshness: freshness.clone(),
            interval: options.interval,
            poll: options.poll,
        },
        running: BTreeMap::new(),
        tasks: tokio::task::JoinSet::new(),
        watching: std::collections::HashMap::new(),
        watches: options.watches,
        unwatched: 0,
    };
    node.beat(&stop, options.takeover).await?;
    let node_id = node.id.clone();
    eprintln!(
        "mailbroker serve: MCP on {} ({}); keeping {} account(s) fresh",
        bound.url(),
        bound.describe(),
        node.running.len()
    );
    if let Some(console) = bound.console() {
        eprintln!(
            "mailbroker serve: the console at {console}; sign in: mailbroker console link --origin {}",
            console.trim_end_matches("/console")
        );
    }
    freshness.listening(bound.url());
    let stopping = stop.clone();
    let serving = bound.run(async move {
        http::signalled().await;
        tracing::info!("serve: stopping");
        stopping.cancel();
    });
    let beats = async {
        let every = options.takeover / 3;
        while !stop.is_cancelled() {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = stop.cancelled() => break,
            }
            if let Err(e) = node.beat(&stop, options.takeover).await {
                // Missed beats only let another node take the accounts over.
                tracing::warn!(error = %e, "serve: the index did not take this node's beat");
            }
        }
    };
    let publishing = freshness.publish(&store, &node_id, &stop);
    let (served, (), ()) = tokio::join!(serving, beats, publishing);
    stop.cancel();
    work.close();
    if let Err(e) = store.leave(&node.id).await {
        tracing::warn!(error = %e, "serve: its accounts wait for the takeover time");
    }
    let ended = async {
        work.wait().await;
        while node.tasks.join_next().await.is_some() {}
    };
    if tokio::time::timeout(STOP_WITHIN, ended).await.is_err() {
        tracing::warn!("serve: work still running at exit");
    }
    served
}

/// What a watcher of any account is given.
struct Watchers {
    store: Store,
    first_syncs: u32,
    freshness: Freshness,
    interval: Duration,
    poll: Duration,
}

/// This process as a node: the accounts it watches, each stopped by its own token, and the
/// task watching each.
struct Node {
    id: String,
    watchers: Watchers,
    running: BTreeMap<AccountId, tokio_util::sync::CancellationToken>,
    tasks: tokio::task::JoinSet<()>,
    watching: std::collections::HashMap<tokio::task::Id, AccountId>,
    /// How many accounts it may watch within its open files, and how many of those it was
    /// given it left unwatched at its last beat.
    watches: usize,
    unwatched: usize,
}

impl Node {
    /// Beats, then watches exactly the accounts the index gives it: new ones are started,
    /// ones given to another node stopped.
    async fn beat(
        &mut self,
        stop: &tokio_util::sync::CancellationToken,
        takeover: Duration,
    ) -> Result<()> {
        // A watcher that ended on its own (a panic: it stops only when told to) leaves no
        // claim without a watcher: it is started again below if the account is still ours.
        while let Some(ended) = self.tasks.try_join_next_with_id() {
            let id = match &ended {
                Ok((id, ())) => *id,
                Err(e) => e.id(),
            };
            if let Some(account) = self.watching.remove(&id)
                && self
                    .running
                    .get(&account)
                    .is_some_and(|t| !t.is_cancelled())
            {
                tracing::warn!(account = %account, "serve: a watcher ended; starting it again");
                self.running.remove(&account);
                self.watchers.freshness.forget(account.as_str());
            }
        }
        let (mine, joined) = self
            .watchers
            .store
            .beat_and_share(&self.id, std::process::id(), takeover.as_millis() as i64)
            .await?;
        if joined {
            // The row is new (or another node had taken this one for dead and removed it):
            // it holds no status until this node writes it again.
            self.watchers.freshness.republish();
        }
        self.running.retain(|account, token| {
            let kept = mine.contains(account);
            if !kept {
                token.cancel();
                self.watchers.freshness.forget(account.as_str());
            }
            kept
        });
        let given = mine.len();
        let mut unwatched = 0;
        for account in mine {
            if self.running.contains_key(&account) {
                continue;
            }
            if self.running.len() >= self.watches {
                unwatched += 1;
                continue;
            }
            let token = stop.child_token();
            let w = &self.watchers;
            let watcher = watch::Watcher {
                store: w.store.clone(),
                node: self.id.clone(),
                first_syncs: w.first_syncs,
                account: account.clone(),
                freshness: w.freshness.for_watcher(token.clone()),
                stop: token.clone(),
                interval: w.interval,
                poll: w.poll,
            };
            let task = self.tasks.spawn(watcher.run());
            self.watching.insert(task.id(), account.clone());
            self.running.insert(account, token);
        }
        // Said once each time the count changes, not at every beat.
        if unwatched != self.unwatched && unwatched > 0 {
            let e = limits::unwatched(given, self.watches);
            tracing::error!(unwatched, error = %e, "serve: accounts left unwatched");
        }
        self.unwatched = unwatched;
        Ok(())
    }
}
