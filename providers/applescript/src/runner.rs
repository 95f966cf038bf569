//! Running a script: `osascript` (the path in `$MAILBROKER_OSASCRIPT` if set) with the script
//! on its standard input, never on its command line (where any user could read it in the
//! process list). Its answer is the JSON the script printed.
//!
//! Architecture Invariant: one script runs at a time in a process. Mail.app serves Apple
//! events from one queue; scripts sent side by side only wait on each other there, and time
//! out.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use mailbroker_core::{Error, Result};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// Where a test, or an unusual install, points the runner at its `osascript`.
pub const OSASCRIPT_ENV: &str = "MAILBROKER_OSASCRIPT";
const OSASCRIPT: &str = "/usr/bin/osascript";
/// What a script allows Mail for its commands (`with timeout of`); the process gets a
/// little more before it is killed.
pub const TIMEOUT_SECS: u32 = 120;
const GRACE: Duration = Duration::from_secs(15);

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Whether a script only reads, or changes mail: a write whose answer is lost may have
/// happened (`outcome_unknown`); a read can simply be tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
}

#[derive(Debug, Clone)]
pub struct Runner {
    program: PathBuf,
    /// What a script allows Mail (`with timeout of`).
    pub timeout_secs: u32,
    /// How much longer osascript gets before it is killed.
    pub grace: Duration,
}

impl Runner {
    /// The `osascript` to run; `unsupported` where there is none (any system but macOS).
    pub fn locate() -> Result<Runner> {
        let program = std::env::var_os(OSASCRIPT_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(OSASCRIPT));
        Runner::at(program)
    }

    /// The runner of the `osascript` at `program`.
    pub fn at(program: PathBuf) -> Result<Runner> {
        if !program.is_file() {
            return Err(no_osascript(&program));
        }
        Ok(Runner {
            program,
            timeout_secs: TIMEOUT_SECS,
            grace: GRACE,
        })
    }

    /// Runs `script` and returns the JSON it answered.
    pub async fn run(&self, script: &str, kind: Kind) -> Result<Value> {
        let _turn = ONE_AT_A_TIME.lock().await;
        let mut child = tokio::process::Command::new(&self.program)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|_| no_osascript(&self.program))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A script refused before it was read whole ran none of it.
            stdin
                .write_all(script.as_bytes())
                .await
                .map_err(|e| Error::provider_unavailable(format!("osascript: {e}")))?;
        }
        let limit = Duration::from_secs(u64::from(self.timeout_secs)) + self.grace;
        let output = match tokio::time::timeout(limit, child.wait_with_output()).await {
            Ok(Ok(output)) => output,
            Ok(Err(e)) => return Err(lost(kind, &format!("osascript failed: {e}"))),
            Err(_) => {
                return Err(lost(
                    kind,
                    &format!("Mail.app did not answer within {} s", limit.as_secs()),
                ));
            }
        };
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            return Err(script_error(&stderr, kind));
        }
        serde_json::from_slice(&output.stdout).map_err(|e| {
            lost(
                kind,
                &format!("Mail.app's answer was not the JSON the script builds: {e}"),
            )
        })
    }
}

fn no_osascript(program: &std::path::Path) -> Error {
    Error::unsupported(format!(
        "the AppleScript route drives macOS Mail.app and needs osascript, which is not at {}: it works only on macOS",
        program.display()
    ))
    .with_next_step("use this account's server route, or run mailbroker on the Mac where Mail.app has the account")
}

/// A script that ended without its answer: for a write, what it did is not known.
fn lost(kind: Kind, why: &str) -> Error {
    match kind {
        Kind::Read => {
            Error::provider_unavailable(why.to_string()).with_next_step("run the request again")
        }
        Kind::Write => {
            Error::outcome_unknown(format!("{why}; some of the messages may have been changed"))
                .with_next_step(
                    "run the request again: it reads the messages first and sends nothing twice",
                )
        }
    }
}

/// The AppleEvent error number at the end of osascript's message (`… (-1728)`).
pub fn error_number(stderr: &str) -> Option<i64> {
    let open = stderr.rfind("(-")?;
    let close = stderr[open..].find(')')? + open;
    stderr[open + 1..close].parse().ok()
}

/// A script that stopped with an AppleEvent error, in our vocabulary: errors raised before
/// any message was touched (no such account or mailbox, Mail not running, not allowed) are
/// what they say; anything else in a write may have come after a change.
pub fn script_error(stderr: &str, kind: Kind) -> Error {
    let message = stderr
        .split("execution error: ")
        .nth(1)
        .unwrap_or(stderr)
        .trim()
        .to_string();
    match error_number(stderr) {
        Some(-600 | -609) => Error::provider_unavailable(format!("Mail.app is not running ({message})"))
            .with_next_step("open Mail.app, then run the request again"),
        Some(-1712) => lost(kind, &format!("Mail.app timed out ({message})")),
        Some(-1728) => Error::not_found(format!("Mail.app has no such item: {message}"))
            .with_next_step("check the account's --mail-account name and its mailboxes in Mail.app, then run: mailbroker sync"),
        Some(-1743) => Error::auth_required(format!("macOS did not allow mailbroker to control Mail.app ({message})"))
            .with_next_step("allow it in System Settings > Privacy & Security > Automation, then run the request again"),
        _ => lost(kind, &format!("the script failed: {message}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apple_event_numbers_map_to_our_errors() {
        let e = |n: &str, k| script_error(&format!("-:1:2: execution error: x ({n})"), k);
        assert_eq!(e("-609", Kind::Write).error_type(), "provider_unavailable");
        assert_eq!(e("-1712", Kind::Write).error_type(), "outcome_unknown");
        assert_eq!(e("-1712", Kind::Read).error_type(), "provider_unavailable");
        assert_eq!(e("-1728", Kind::Write).error_type(), "not_found");
        assert_eq!(e("-1743", Kind::Read).error_type(), "auth_required");
        assert_eq!(e("-2700", Kind::Write).error_type(), "outcome_unknown");
        assert_eq!(error_number("no number"), None);
    }
}
