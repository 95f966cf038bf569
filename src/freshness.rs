//! Each account's freshness as `serve` keeps it: shared with `list_accounts` in the same
//! process, and written to `serve/PID.json` in the home for `serve status` and `mcp status`
//! in another, one file per `serve` process of the home (a node: each watches its share of
//! the accounts). A service of its own, so the MCP surface reads it without depending on
//! `serve`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use mailbroker_core::Error;
use serde::{Deserialize, Serialize};

use crate::home::Home;

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
    pub pid: u32,
    pub url: String,
    pub accounts: Vec<String>,
}

/// Where the running `serve` processes of a home say how they are doing.
fn status_dir(home: &Home) -> PathBuf {
    home.root().join("serve")
}

/// Where the `serve` process `pid` says how it is doing.
fn status_file(home: &Home, pid: u32) -> PathBuf {
    status_dir(home).join(format!("{pid}.json"))
}

#[derive(Debug, Clone)]
pub struct Freshness {
    inner: Arc<Mutex<ServeStatus>>,
    file: PathBuf,
}

impl Freshness {
    pub fn new(home: &Home) -> Freshness {
        Freshness {
            inner: Arc::new(Mutex::new(ServeStatus {
                pid: std::process::id(),
                ..ServeStatus::default()
            })),
            file: {
                let _ = std::fs::create_dir_all(status_dir(home));
                status_file(home, std::process::id())
            },
        }
    }

    fn update(&self, change: impl FnOnce(&mut ServeStatus)) {
        let mut status = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        change(&mut status);
        // A status file that cannot be written only leaves `serve status` behind. Written
        // beside and renamed into place: `serve status` in another process never reads it
        // half written.
        if let Ok(text) = serde_json::to_string_pretty(&*status) {
            let beside = self.file.with_extension("json.new");
            if std::fs::write(&beside, text).is_ok() {
                let _ = std::fs::rename(&beside, &self.file);
            }
        }
    }

    pub fn listening(&self, url: &str) {
        self.update(|s| s.url = url.to_string());
    }

    pub fn stopped(&self) {
        let _ = std::fs::remove_file(&self.file);
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

/// What the running `serve` processes of this home wrote of themselves, together; `None`
/// when none runs. The file of one that is gone (killed) is removed.
pub fn read(home: &Home) -> Option<ServeStatus> {
    let mut running = Vec::new();
    for entry in std::fs::read_dir(status_dir(home)).ok()?.flatten() {
        let path = entry.path();
        // `PID.json`, or `PID.json.new` while it is being written.
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let pid = name.split('.').next().and_then(|p| p.parse::<u32>().ok());
        if !pid.is_some_and(crate::util::running) {
            let _ = std::fs::remove_file(&path);
            continue;
        }
        let parsed = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str::<ServeStatus>(&text).ok());
        if let Some(status) = parsed.filter(|_| name.ends_with(".json")) {
            running.push(status);
        }
    }
    running.sort_by_key(|s| s.pid);
    let first = running.first()?.clone();
    let mut all = ServeStatus {
        pid: first.pid,
        url: first.url.clone(),
        ..ServeStatus::default()
    };
    for node in running {
        all.nodes.push(NodeStatus {
            pid: node.pid,
            url: node.url,
            accounts: node.accounts.keys().cloned().collect(),
        });
        all.accounts.extend(node.accounts);
    }
    Some(all)
}

/// Each account's freshness, a few lines each, for a person: how it is watched, its last
/// sync, and what went wrong with what to do.
pub fn print_accounts(accounts: &BTreeMap<String, Watching>) {
    for (account, w) in accounts {
        let when = w
            .last_sync_at
            .map_or_else(|| "never".to_string(), crate::output::rfc3339);
        crate::say!("  {account}: {}, last sync {when}", w.watching);
        if let Some(error) = &w.error {
            crate::say!(
                "    {}: {error}",
                w.error_type.as_deref().unwrap_or("error")
            );
        }
        if let Some(step) = &w.next_step {
            crate::say!("    next: {step}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `serve status` reads while a `serve` writes: a file caught half written is skipped,
    /// not taken for a process that is gone; the file of one that is gone is removed.
    #[test]
    fn a_status_half_written_is_skipped_and_a_gone_process_forgotten() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(tmp.path())).unwrap();
        let mine = Freshness::new(&home);
        mine.listening("http://127.0.0.1:1/mcp");
        mine.watching("work", "idle");
        let half = status_dir(&home).join(format!("{}.json.new", std::process::id()));
        std::fs::write(&half, "{\"pid\":").unwrap();
        // No process has pid 0 to signal: a file of such a one is a killed process's.
        let gone = status_dir(&home).join("0.json");
        std::fs::write(&gone, "{}").unwrap();
        let all = read(&home).unwrap();
        assert_eq!(all.nodes.len(), 1, "{all:?}");
        assert_eq!(all.nodes[0].accounts, vec!["work".to_string()]);
        assert!(half.exists(), "a live writer's file stays");
        assert!(!gone.exists(), "a gone process's file is removed");
        std::fs::write(status_file(&home, std::process::id()), "").unwrap();
        assert!(read(&home).is_none(), "half written: not read");
        assert!(status_file(&home, std::process::id()).exists());
    }
}
