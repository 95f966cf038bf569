//! A person at a terminal, for the decisions mailbroker takes only from one (`approve`,
//! deleting for good, `account set --unattended-deletions`): the command runs on a
//! pseudo-terminal of its own made by util-linux `script`, and `typed` is what the person
//! types there. Everything else in the tests runs without a controlling terminal
//! (`detached`), so no test can answer such a question any other way.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

/// What a command at the terminal showed there and how it ended.
pub struct AtTerminal {
    pub code: i32,
    /// Everything the terminal showed (prompts, the typed answer's echo, output), without
    /// carriage returns.
    pub shown: String,
}

impl AtTerminal {
    /// The last JSON object the terminal showed (`--json` output), if any.
    pub fn json(&self) -> serde_json::Value {
        self.shown
            .lines()
            .rev()
            .find_map(|l| {
                // A prompt without a line break may come first on the line.
                let at = l.find('{')?;
                serde_json::from_str(l[at..].trim()).ok()
            })
            .unwrap_or(serde_json::Value::Null)
    }
}

/// Quotes `arg` for `sh`.
fn quoted(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// Runs `program ARGS…` on a terminal of its own, with `env` set, typing `typed` there.
pub fn run(program: &Path, args: &[&str], env: &[(&str, &str)], typed: &str) -> Result<AtTerminal> {
    use std::io::Write;
    let line: Vec<String> = std::iter::once(program.display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .map(|a| quoted(&a))
        .collect();
    let mut child = Command::new("script")
        .args([
            "--quiet",
            "--return",
            "--command",
            &line.join(" "),
            "/dev/null",
        ])
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("run util-linux script")?;
    child
        .stdin
        .take()
        .context("script's stdin")?
        .write_all(typed.as_bytes())?;
    let out = child.wait_with_output()?;
    Ok(AtTerminal {
        code: out.status.code().unwrap_or(-1),
        shown: String::from_utf8_lossy(&out.stdout).replace('\r', ""),
    })
}

/// Makes `command` run without a controlling terminal (a session of its own), as a program
/// started by an assistant, cron or CI does: whatever terminal the tests run in, mailbroker
/// must not ask it.
pub fn detached(command: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        })
    }
}
