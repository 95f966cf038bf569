//! Test servers for mailbroker's own tests and benchmarks: a throw-away Dovecot with a
//! private CA, GNU Mailutils' imap4d as the worst-case IMAP server, plus helpers to seed and inspect mail from "another client".
//!
//! Not part of the product. Each `Dovecot` runs from a private config in a temp directory on
//! free loopback ports and is stopped when dropped (or, if the test process dies, by the
//! parent-death signal set when it was spawned).

pub mod applescript;
mod certs;
pub mod cyrus;
mod dovecot;
mod imap;
pub mod imap4d;
pub mod jmap_push;
pub mod jmap_session;
mod proxy;

pub mod memory;
pub mod mounts;
pub mod secret_service;
pub mod terminal;
pub mod tokens;

pub mod oauth;
pub mod postgres;

pub use certs::TestCa;
pub use dovecot::{Dovecot, PASSWORD, sieve_installed};
pub use imap::{ImapClient, message, reply};
pub use proxy::Proxy;

/// Whether a missing Dovecot must fail the test run (CI) rather than skip.
pub fn dovecot_required() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// `mailbroker account add imap` arguments for `user` at `host:port`, the password read from
/// the environment variable `password_env`.
pub fn account_add_args(
    id: &str,
    host: &str,
    port: u16,
    user: &str,
    password_env: &str,
) -> Vec<String> {
    let port = port.to_string();
    [
        "account",
        "add",
        "imap",
        "--id",
        id,
        "--host",
        host,
        "--port",
        &port,
        "--username",
        user,
        "--password-env",
        password_env,
    ]
    .map(String::from)
    .to_vec()
}

/// An exclusive lock on making `dir`, held until the value is dropped: tests of one binary
/// run in parallel, and two making the same venv at once break it for both.
pub(crate) fn made_once(dir: &std::path::Path) -> std::fs::File {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).expect("make the directory's parent");
    }
    let lock = std::fs::File::create(dir.with_extension("lock")).expect("open the lock file");
    lock.lock().expect("lock the directory's making");
    lock
}

/// A Python venv under `dir` with `requirements` installed, made once (a marker file records
/// it). `None` when python3 with venv is missing outside CI; under CI that fails instead.
pub fn python_venv(dir: &std::path::Path, requirements: &[&str]) -> Option<std::path::PathBuf> {
    use std::process::Command;
    let py = dir.join("bin/python");
    let ready = dir.join(format!(".{}", requirements.join("+")));
    let _making = made_once(dir);
    if ready.exists() {
        return Some(py);
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(dir)
        .status();
    if !made.is_ok_and(|s| s.success()) {
        assert!(
            !dovecot_required(),
            "CI=true but python3 -m venv failed: .ci/run must provide python3 with venv"
        );
        eprintln!("skipping: python3 with venv is not available");
        return None;
    }
    let pip = Command::new(dir.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(requirements)
        .status()
        .expect("run pip");
    assert!(pip.success(), "pip install {requirements:?} failed");
    std::fs::write(&ready, "").expect("mark the venv ready");
    Some(py)
}

/// Runs a client script (`program script CONFIG_JSON`, the config as its one argument) and
/// returns the JSON object on the last line it printed; its whole output when it fails.
pub fn run_client(
    program: &std::path::Path,
    script: &std::path::Path,
    config: &serde_json::Value,
) -> serde_json::Value {
    let out = std::process::Command::new(program)
        .arg(script)
        .arg(config.to_string())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed ({config}):\n{stdout}\n{stderr}",
        script.display()
    );
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("json from the client")
}

/// `packages` installed under `target/tmp/NAME` and the test's `script` (a path under the
/// repository's `tests/`) copied beside them: the script's path, ready for `run_client` with
/// `node`. `None` when node or npm is missing outside CI.
pub fn node_script(
    tmp: &std::path::Path,
    name: &str,
    packages: &[&str],
    script: &std::path::Path,
) -> Option<std::path::PathBuf> {
    let dir = node_modules(&tmp.join(name), packages)?;
    let file = script.file_name().expect("a script file");
    std::fs::copy(script, dir.join(file)).expect("copy the client script");
    Some(dir.join(file))
}

/// A directory under `dir` with the npm `packages` installed (`name@version` each), made once
/// (a marker file records it). `None` when node or npm is missing outside CI; under CI that
/// fails instead.
pub fn node_modules(dir: &std::path::Path, packages: &[&str]) -> Option<std::path::PathBuf> {
    use std::process::Command;
    let ready = dir.join(format!(".{}", packages.join("+").replace('/', "_")));
    let _making = made_once(dir);
    if ready.exists() {
        return Some(dir.to_path_buf());
    }
    let npm = Command::new("npm").arg("--version").output();
    if !npm.is_ok_and(|o| o.status.success()) {
        assert!(
            !dovecot_required(),
            "CI=true but npm is missing: .ci/run must install nodejs and npm"
        );
        eprintln!("skipping: node and npm are not installed");
        return None;
    }
    std::fs::create_dir_all(dir).expect("make the node directory");
    std::fs::write(
        dir.join("package.json"),
        "{\"private\": true, \"type\": \"module\"}\n",
    )
    .expect("write package.json");
    let installed = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(dir)
        .args(packages)
        .status()
        .expect("run npm");
    assert!(installed.success(), "npm install {packages:?} failed");
    std::fs::write(&ready, "").expect("mark the node directory ready");
    Some(dir.to_path_buf())
}
