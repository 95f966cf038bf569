//! `mailbroker serve`: one long-running process that serves MCP over Streamable HTTP (with
//! exactly `mcp --http`'s controls) and keeps every account fresh in the background, so an
//! assistant's searches see changes made elsewhere within seconds without `sync_accounts`.
//!
//! - `watch.rs`: one task per account. Where the server can announce changes (IMAP IDLE on
//!   INBOX) it waits for an announcement and syncs on the same connection; otherwise it polls
//!   (Gmail's history, Graph's delta links, IMAP without IDLE). Every mailbox of every account
//!   is also synced (incrementally) every `--interval`, for changes no IDLE announces. A lost connection backs off with jitter and reconnects; an
//!   account whose credentials are refused is reported and the others go on.
//! - `status.rs`: each account's freshness (`last_sync_at`, `watching`), shared with the MCP
//!   server's `list_accounts` and written for `serve status`.
//!
//! Architecture Invariant: background syncs take the account's lock, as a write or a
//! deletion does, and only for the sync itself, never while waiting on IDLE. A write that
//! waits for it gets it at the sync's next checkpoint (`SyncSink::checkpoint`, after each
//! batch the sync applies), so it waits for the batch in flight, not for the whole sync; it
//! then holds the lock to its end, so a sync never sees half a write.
//!
//! Stopping (SIGTERM or SIGINT): no new connection is accepted; watchers end their IDLE with
//! DONE and LOGOUT; a write already sent runs to its end and is journaled; then the process
//! exits 0. A process killed outright loses nothing: the next start syncs from the stored
//! cursors.

pub mod command;
mod watch;

use std::time::Duration;

use mailbroker_core::Result;

pub use crate::freshness::{Freshness, Watching, print_accounts, read as running, status_file};

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
}

/// How long a stopping `serve` waits for writes in flight and watchers to end.
const STOP_WITHIN: Duration = Duration::from_millis(4500);

/// Serves until SIGTERM or SIGINT, then stops cleanly.
pub async fn run(home: Home, store: Store, mut options: ServeOptions) -> Result<()> {
    let freshness = Freshness::new(&home);
    options.http.mcp.freshness = Some(freshness.clone());
    let work = options.http.mcp.work.clone();
    let bound = http::bind(home.clone(), store.clone(), options.http).await?;
    let stop = tokio_util::sync::CancellationToken::new();
    let accounts = store.accounts().await?;
    let mut watchers = tokio::task::JoinSet::new();
    for account in &accounts {
        let watcher = watch::Watcher {
            home: home.clone(),
            store: store.clone(),
            account: account.id.clone(),
            freshness: freshness.clone(),
            stop: stop.clone(),
            interval: options.interval,
            poll: options.poll,
        };
        watchers.spawn(watcher.run());
    }
    eprintln!(
        "mailbroker serve: MCP on {} ({}); keeping {} account(s) fresh",
        bound.url(),
        bound.describe(),
        accounts.len()
    );
    freshness.listening(bound.url());
    let stopping = stop.clone();
    let served = bound
        .run(async move {
            http::signalled().await;
            tracing::info!("serve: stopping");
            stopping.cancel();
        })
        .await;
    stop.cancel();
    work.close();
    let ended = async {
        work.wait().await;
        while watchers.join_next().await.is_some() {}
    };
    if tokio::time::timeout(STOP_WITHIN, ended).await.is_err() {
        tracing::warn!("serve: work still running at exit");
    }
    freshness.stopped();
    served
}
