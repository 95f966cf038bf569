//! Each account's freshness as `serve` keeps it: shared with `list_accounts` in the same
//! process, and published in the index (its node's row, `store/nodes.rs`) for `serve status`
//! and `mcp status` in another process, on any machine that reaches the index. A service of
//! its own, so the MCP surface reads it without depending on `serve`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use mailbroker_core::Error;
use serde::{Deserialize, Serialize};

use mailbroker_store::Store;

/// How an account is being kept fresh.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Watching {
    /// `idle` (the server announces changes), `polling`, `queued` (waiting for its first
    /// sync: `serve/watch.rs`), or `error`.
    pub watching: String,
    /// Seconds since the epoch of its last background sync.
    pub last_sync_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_step: Option<String>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct ServeStatus {
    pub pid: u32,
    pub url: String,
    pub accounts: BTreeMap<String, Watching>,
    /// Every running `serve` of the home (`read`), by pid, with the accounts it watches;
    /// `pid` and `url` above are the first one's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeStatus {
    /// The machine it runs on.
    pub host: String,
    pub pid: u32,
    pub url: String,
    pub accounts: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Freshness {
    inner: Arc<Mutex<ServeStatus>>,
    /// Told at every change, for `publish`.
    changed: Arc<tokio::sync::Notify>,
    /// For a watcher's handle (`for_watcher`): once this is cancelled, its writes are
    /// dropped, so a watcher finishing after its node gave its account up cannot put the
    /// account back into the node's status.
    stop: Option<tokio_util::sync::CancellationToken>,
}

impl Default for Freshness {
    fn default() -> Self {
        Freshness::new()
    }
}

impl Freshness {
    pub fn new() -> Freshness {
        Freshness {
            inner: Arc::new(Mutex::new(ServeStatus {
                pid: std::process::id(),
                ..ServeStatus::default()
            })),
            changed: Arc::default(),
            stop: None,
        }
    }

    /// The handle a watcher reports through: the same status, its writes dropped once
    /// `stop` (the watcher's own token) is cancelled. The check is made under the status's
    /// lock, and the node cancels before it forgets, so nothing a stopped watcher says
    /// outlives the node's `forget`.
    pub fn for_watcher(&self, stop: tokio_util::sync::CancellationToken) -> Freshness {
        Freshness {
            stop: Some(stop),
            ..self.clone()
        }
    }

    fn update(&self, change: impl FnOnce(&mut ServeStatus)) {
        let mut status = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if self.stop.as_ref().is_some_and(|s| s.is_cancelled()) {
            return;
        }
        change(&mut status);
        self.changed.notify_one();
    }

    /// Has `publish` write the status again though nothing changed (its node's row is new).
    pub fn republish(&self) {
        self.changed.notify_one();
    }

    /// Writes this process's status into node `node`'s row whenever it changes (or is asked
    /// to again, `republish`), until `stop`. A write the index refuses is tried again a
    /// second later: `serve status` would otherwise show a status the node left behind.
    pub async fn publish(
        &self,
        store: &Store,
        node: &str,
        stop: &tokio_util::sync::CancellationToken,
    ) {
        loop {
            let text = {
                let status = self
                    .inner
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                serde_json::to_string(&*status).unwrap_or_default()
            };
            let retry = match store.set_node_status(node, &text).await {
                Ok(()) => None,
                Err(e) => {
                    tracing::warn!(error = %e, "serve: the index did not take this node's status");
                    Some(std::time::Duration::from_secs(1))
                }
            };
            let retried = async {
                match retry {
                    Some(after) => tokio::time::sleep(after).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = self.changed.notified() => {}
                () = retried => {}
                () = stop.cancelled() => return,
            }
        }
    }

    pub fn listening(&self, url: &str) {
        self.update(|s| s.url = url.to_string());
    }

    /// The account is watched this way now (`idle`, `polling`, `queued`).
    pub fn watching(&self, account: &str, how: &str) {
        self.update(|s| {
            let entry = s.accounts.entry(account.to_string()).or_default();
            *entry = Watching {
                watching: how.to_string(),
                last_sync_at: entry.last_sync_at,
                ..Watching::default()
            };
        });
    }

    /// The account was synced at `at`. Its first sync ends before it is watched (`watching`
    /// follows at once and keeps the time): the time is kept from that first one on.
    pub fn synced(&self, account: &str, at: i64) {
        self.update(|s| {
            s.accounts
                .entry(account.to_string())
                .or_default()
                .last_sync_at = Some(at);
        });
    }

    /// The account is watched by another node now.
    pub fn forget(&self, account: &str) {
        self.update(|s| {
            s.accounts.remove(account);
        });
    }

    /// The account cannot be kept fresh now, and why (with what to do).
    pub fn failed(&self, account: &str, e: &Error) {
        self.update(|s| {
            let entry = s.accounts.entry(account.to_string()).or_default();
            entry.watching = "error".into();
            entry.error = Some(e.message().to_string());
            entry.error_type = Some(e.error_type().to_string());
            entry.next_step = e.next_step().map(str::to_string);
        });
    }

    /// How `account` is being kept fresh, if this process watches it.
    pub fn of(&self, account: &str) -> Option<Watching> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .accounts
            .get(account)
            .cloned()
    }
}

/// What the live `serve` nodes of the index say of themselves, together; `None` when none
/// runs.
pub async fn read(store: &Store) -> Result<Option<ServeStatus>, Error> {
    let mut running = Vec::new();
    for (host, pid, text) in store.live_nodes().await? {
        // A node that has not said anything yet (it just started) is listed without accounts.
        let status = serde_json::from_str::<ServeStatus>(&text).unwrap_or_default();
        running.push((host, pid, status));
    }
    let Some((_, pid, first)) = running.first() else {
        return Ok(None);
    };
    let mut all = ServeStatus {
        pid: *pid,
        url: first.url.clone(),
        ..ServeStatus::default()
    };
    for (host, pid, node) in running {
        all.nodes.push(NodeStatus {
            host,
            pid,
            url: node.url,
            accounts: node.accounts.keys().cloned().collect(),
        });
        all.accounts.extend(node.accounts);
    }
    Ok(Some(all))
}
