//! A `mailbroker serve` process for the tests, and what they wait for through its MCP.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mailbroker_testkit::{ImapClient, message};
use serde_json::json;

use super::mcp::{Session, ok_call};

/// A running `mailbroker serve`, its MCP URL and everything it logged.
pub struct Serve {
    child: Option<Child>,
    pub url: String,
    log: Arc<Mutex<String>>,
}

impl Serve {
    pub fn start(home: &Path) -> Serve {
        Serve::start_with(home, &[])
    }

    pub fn start_with(home: &Path, args: &[&str]) -> Serve {
        Serve::spawn(home, args, None)
    }

    /// Started with at most `open_files` open files (its soft and hard limit).
    #[allow(dead_code)]
    pub fn start_with_open_files(home: &Path, args: &[&str], open_files: u64) -> Serve {
        Serve::spawn(home, args, Some(open_files))
    }

    fn spawn(home: &Path, args: &[&str], open_files: Option<u64>) -> Serve {
        let token = super::mcp::token_file(home);
        let mut command = Command::new(env!("CARGO_BIN_EXE_mailbroker"));
        if let Some(open_files) = open_files {
            super::limit_open_files(&mut command, open_files);
        }
        let mut child = command
            .arg("--home")
            .arg(home)
            .args(["serve", "--http", "127.0.0.1:0", "--http-allow-writes"])
            .args(args)
            .arg("--http-token-file")
            .arg(&token)
            .env("MAILBROKER_SECRET_STORE", "index")
            .env("MB_TEST_PW", mailbroker_testkit::PASSWORD)
            .envs(super::database_env(home))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start mailbroker serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let url = first
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no url in {first:?}"))
            .to_string();
        let log = Arc::new(Mutex::new(first + "\n"));
        let kept = log.clone();
        // Drained all along: a full pipe would stall the server.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        Serve {
            child: Some(child),
            url,
            log,
        }
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Its process id, while it runs.
    #[allow(dead_code)]
    pub fn pid(&self) -> Option<u64> {
        self.child.as_ref().map(|c| u64::from(c.id()))
    }

    pub fn signal(&self) {
        if let Some(child) = &self.child {
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
        }
    }

    /// SIGKILL: nothing of it runs on.
    pub fn kill(&mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// SIGTERM; how it exited and how long it took.
    pub fn terminate(&mut self) -> (Option<i32>, Duration) {
        let sent = Instant::now();
        self.signal();
        (self.wait(), sent.elapsed())
    }

    /// Its exit code, once it has exited (`None` if it had to be killed after 30 s).
    pub fn wait(&mut self) -> Option<i32> {
        let mut child = self.child.take().unwrap();
        let sent = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code();
            }
            if sent.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.terminate();
        }
    }
}

/// Polls `check` every 50 ms until it holds; how long that took, or a panic after `limit`.
pub async fn within<F, Fut>(limit: Duration, what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

/// How many messages `query` finds over MCP.
pub async fn total(session: &Session, query: &str) -> u64 {
    let found = ok_call(session, "search_messages", json!({ "query": query })).await;
    found["total"]
        .as_u64()
        .unwrap_or_else(|| panic!("no total: {found}"))
}

/// Waits until `query` finds exactly one message over MCP; how long that took, or a panic
/// after `limit`.
pub async fn found_once(session: &Session, query: &str, limit: Duration) -> Duration {
    within(
        limit,
        query,
        || async move { total(session, query).await == 1 },
    )
    .await
}

/// Another client APPENDs a message with this subject to INBOX: it is searchable over MCP
/// within 3 s.
pub async fn arrives(other: &mut ImapClient, session: &Session, subject: &str) {
    let body = message(90, "x@example.test", subject, "b");
    other.append("INBOX", "", &body).await.unwrap();
    let query = format!("subject:\"{subject}\"");
    found_once(session, &query, Duration::from_secs(3)).await;
}

/// The accounts each running `serve` of the index `home` opens watches, by pid, as `serve
/// status` shows them from that home (none until one has published its status).
pub fn watched_by(home: &Path) -> Vec<(u64, Vec<String>)> {
    let status = super::mb(home, &["serve", "status"]).json;
    status["serve"]["nodes"]
        .as_array()
        .map(|nodes| {
            nodes
                .iter()
                .map(|n| {
                    let accounts = n["accounts"].as_array().unwrap().iter();
                    let names = accounts.map(|a| a.as_str().unwrap().to_string());
                    (n["pid"].as_u64().unwrap(), names.collect())
                })
                .collect()
        })
        .unwrap_or_default()
}
