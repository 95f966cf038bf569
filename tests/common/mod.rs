//! Shared harness for the integration tests: one Dovecot per test binary, a user per test,
//! and a runner for the real `mailbroker` binary.

#![allow(dead_code)]

pub mod browser;
pub mod gmail;
pub mod graph;
pub mod mcp;
pub mod serve;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use mailbroker_testkit::imap4d::Imap4d;
use mailbroker_testkit::{Dovecot, ImapClient, PASSWORD, dovecot_required, message};
use serde_json::Value;

static SERVER: OnceLock<Option<Dovecot>> = OnceLock::new();

/// The shared Dovecot, or `None` (test skipped) when it is not installed outside CI.
/// In CI a missing or broken Dovecot fails the test.
/// The IMAP UID of a message as the CLI shows it (its remote id is `UIDVALIDITY:UID`).
/// The local ids of a search's messages, sorted.
pub fn message_ids(found: &Value) -> Vec<i64> {
    let mut ids: Vec<i64> = found["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

pub fn uid_of(message: &Value) -> u32 {
    let id = message["remote_id"].as_str().expect("a remote id");
    let (_, uid) = id.split_once(':').expect("an IMAP id");
    uid.parse().expect("a numeric UID")
}

pub fn server() -> Option<&'static Dovecot> {
    SERVER
        .get_or_init(|| {
            if !Dovecot::available() {
                assert!(
                    !dovecot_required(),
                    "CI=true but dovecot is not installed: .ci/run must install dovecot-imapd"
                );
                eprintln!("skipping: dovecot is not installed (apt-get install dovecot-imapd)");
                return None;
            }
            let server = Dovecot::start().expect("start dovecot");
            server.stop_at_exit();
            Some(server)
        })
        .as_ref()
}

static IMAP4D: OnceLock<Option<Imap4d>> = OnceLock::new();

/// The worst-case IMAP server (GNU Mailutils imap4d), shared by a test binary; `None` where
/// it is not installed outside CI (with `CI=true` a missing one fails the test).
pub fn imap4d() -> Option<&'static Imap4d> {
    IMAP4D
        .get_or_init(|| {
            if !Imap4d::available() {
                assert!(
                    !dovecot_required(),
                    "CI=true but imap4d is not installed: .ci/run must install mailutils-imap4d"
                );
                eprintln!("skipping: imap4d is not installed (apt-get install mailutils-imap4d)");
                return None;
            }
            let server = Imap4d::start().expect("start imap4d");
            server.stop_at_exit();
            Some(server)
        })
        .as_ref()
}

/// Result of one `mailbroker` run.
pub struct Run {
    pub code: i32,
    pub json: Value,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `mailbroker --home HOME --json ARGS…` with `MB_TEST_PW` set to the test password.
pub fn mb(home: &Path, args: &[&str]) -> Run {
    mb_with(home, args, &[])
}

pub fn mb_with(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut all = vec!["--json"];
    all.extend(args);
    run_binary(home, &all, env)
}

/// Runs `mailbroker --home HOME ARGS…` as a person would, without `--json`.
pub fn mb_text(home: &Path, args: &[&str]) -> Run {
    run_binary(home, args, &[])
}

/// The PostgreSQL database each home given one keeps its index in (`on_postgres`).
static DATABASES: std::sync::Mutex<Vec<(std::path::PathBuf, String)>> =
    std::sync::Mutex::new(Vec::new());

/// From now on every `mailbroker` run with this home uses database `url` (as
/// `MAILBROKER_DATABASE_URL`, which is how a node of a team deployment is told).
#[allow(dead_code)]
pub fn on_postgres(home: &Path, url: &str) {
    let mut all = DATABASES.lock().unwrap_or_else(|e| e.into_inner());
    all.push((home.to_path_buf(), url.to_string()));
}

/// The database URL a home was given, if any.
pub fn database_of(home: &Path) -> Option<String> {
    let all = DATABASES.lock().unwrap_or_else(|e| e.into_inner());
    all.iter()
        .find(|(h, _)| h == home)
        .map(|(_, url)| url.clone())
}

/// `MAILBROKER_DATABASE_URL` for a process run with this home, when it was given one, and
/// the team's key file: in a shared database a secret is stored sealed or not at all, so
/// every node of a team is given the same key, as README says to do.
pub fn database_env(home: &Path) -> Vec<(&'static str, String)> {
    let Some(url) = database_of(home) else {
        return Vec::new();
    };
    vec![
        ("MAILBROKER_DATABASE_URL", url),
        ("MAILBROKER_SECRET_KEY_FILE", team_key_file()),
    ]
}

/// The key file every PostgreSQL home of this test process is given (0600, 64 hex digits).
pub fn team_key_file() -> String {
    static KEY: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = KEY.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("team.key");
        std::fs::write(&key, "5e".repeat(32)).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        dir
    });
    dir.path().join("team.key").display().to_string()
}

/// A fresh database in the shared private PostgreSQL cluster, as a URL; `None` when
/// PostgreSQL is missing outside CI (under CI that fails instead).
#[allow(dead_code)]
pub fn postgres_database() -> Option<String> {
    let pg = mailbroker_testkit::postgres::shared()?;
    Some(pg.database().expect("create a database"))
}

fn run_binary(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = command(home, args, env);
    finish(&mut cmd, args)
}

/// `mailbroker --json ARGS…` with at most `open_files` open files (its soft and hard limit).
#[allow(dead_code)]
pub fn mb_open_files(home: &Path, args: &[&str], open_files: u64) -> Run {
    let mut all = vec!["--json"];
    all.extend(args);
    let mut cmd = command(home, &all, &[]);
    limit_open_files(&mut cmd, open_files);
    finish(&mut cmd, &all)
}

/// `cmd`'s process may open at most `open_files` files (its soft and hard limit).
pub fn limit_open_files(cmd: &mut Command, open_files: u64) {
    let limit = libc::rlimit {
        rlim_cur: open_files,
        rlim_max: open_files,
    };
    // SAFETY: setrlimit is async-signal-safe and touches only this child.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            match libc::setrlimit(libc::RLIMIT_NOFILE, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
}

fn command(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mailbroker"));
    cmd.envs(database_env(home));
    cmd.arg("--home")
        .arg(home)
        .args(args)
        .env("MB_TEST_PW", PASSWORD)
        .env_remove("MAILBROKER_HOME")
        // Never the keyring of the desktop the tests run on (tests/keyring.rs has its own).
        .env("MAILBROKER_SECRET_STORE", "index")
        .stdin(Stdio::null());
    // As an assistant's shell or cron runs it: no terminal to ask, whatever the tests run in.
    mailbroker_testkit::terminal::detached(&mut cmd);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn finish(cmd: &mut Command, args: &[&str]) -> Run {
    let out = cmd.output().expect("run mailbroker");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !stdout.contains(PASSWORD) && !stderr.contains(PASSWORD),
        "a secret was printed by {args:?}"
    );
    let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    Run {
        code: out.status.code().unwrap_or(-1),
        json,
        stdout,
        stderr,
    }
}

/// Runs `mailbroker --home HOME --json ARGS…` as the person at a terminal of its own, who
/// types `typed` there (`"y\n"`, `"delete\n"`).
pub fn at_terminal(
    home: &Path,
    args: &[&str],
    typed: &str,
) -> mailbroker_testkit::terminal::AtTerminal {
    let home = home.display().to_string();
    let mut all = vec!["--home", home.as_str(), "--json"];
    all.extend(args);
    let bin = Path::new(env!("CARGO_BIN_EXE_mailbroker"));
    let database = database_env(Path::new(&home));
    let mut env = vec![
        ("MB_TEST_PW", PASSWORD),
        ("MAILBROKER_SECRET_STORE", "index"),
    ];
    env.extend(database.iter().map(|(k, v)| (*k, v.as_str())));
    let run = mailbroker_testkit::terminal::run(bin, &all, &env, typed).expect("a terminal");
    assert!(
        !run.shown.contains(PASSWORD),
        "a secret was printed by {args:?}"
    );
    run
}

/// The person allows permanent deletions of `account`'s mail to run unattended (as for a
/// cron job), at their terminal.
pub fn allow_unattended(home: &Path, account: &str) {
    let run = at_terminal(
        home,
        &["account", "set", account, "--unattended-deletions"],
        "allow\n",
    );
    assert_eq!(run.code, 0, "{}", run.shown);
}

/// Runs and insists on success, returning the JSON.
/// A journaled change's `applied`, `failed` and `unknown` counts, as `changes` shows them.
pub fn outcome_counts(change: &Value) -> [Option<u64>; 3] {
    ["applied", "failed", "unknown"].map(|k| change[k].as_u64())
}

pub fn ok(home: &Path, args: &[&str]) -> Value {
    let run = mb(home, args);
    assert_eq!(
        run.code, 0,
        "mailbroker {args:?} failed\nstdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    assert_eq!(run.json["success"], true, "{}", run.stdout);
    run.json
}

/// `account add imap` arguments for `user` at `host:port`, password from `MB_TEST_PW`.
pub fn add_args(id: &str, host: &str, port: u16, user: &str) -> Vec<String> {
    mailbroker_testkit::account_add_args(id, host, port, user, "MB_TEST_PW")
}

/// Runs with owned arguments (built by `add_args` and friends).
pub fn mb_args(home: &Path, args: &[String]) -> Run {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    mb(home, &args)
}

/// Adds IMAP account `id` for `user` over implicit TLS with the test CA.
pub fn add_account(server: &Dovecot, home: &Path, id: &str, user: &str, extra: &[&str]) -> Value {
    let mut args = add_args(id, "localhost", server.imaps_port, user);
    args.extend(["--tls", "implicit", "--ca-file"].map(String::from));
    args.push(server.ca.ca_pem.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    let run = mb_args(home, &args);
    assert_eq!(
        run.code, 0,
        "account add failed\nstdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    run.json
}

/// Appends `n` messages to `mailbox`, with a mix of flags and keywords.
pub async fn seed(server: &Dovecot, user: &str, mailbox: &str, n: usize) -> ImapClient {
    let mut client = ImapClient::connect(server, user).await.expect("imap login");
    for i in 0..n {
        let flags = match i % 5 {
            0 => "\\Seen",
            1 => "\\Seen \\Flagged",
            2 => "$Invoice",
            3 => "\\Seen $Invoice Work",
            _ => "",
        };
        let from = if i % 2 == 0 {
            "Alice <alice@example.test>"
        } else {
            "bob@example.test"
        };
        let body = message(
            i,
            from,
            &format!("Report number {i}"),
            &format!("body text {i} zebra"),
        );
        client.append(mailbox, flags, &body).await.expect("append");
    }
    client
}

/// The home's index, opened read-only beside the processes that write it.
pub async fn index_reader(home: &Path) -> sqlx::AnyPool {
    sqlx::any::install_default_drivers();
    let url = database_of(home)
        .unwrap_or_else(|| format!("sqlite://{}?mode=ro", home.join("index.sqlite3").display()));
    sqlx::AnyPool::connect(&url).await.unwrap()
}

/// Which engine holds a test's index.
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// A fresh home whose index is on `engine` (a new PostgreSQL database for each); `None` when
/// PostgreSQL is missing outside CI (under CI that fails instead).
#[allow(dead_code)]
pub fn home_on(engine: Engine) -> Option<tempfile::TempDir> {
    let home = tempfile::tempdir().unwrap();
    if engine == Engine::Postgres {
        on_postgres(home.path(), &postgres_database()?);
    }
    Some(home)
}

/// Every byte the index holds, to look for a secret in: the SQLite file and its WAL (free
/// pages included), or a dump of the PostgreSQL database.
#[allow(dead_code)]
pub fn index_bytes(home: &Path) -> Vec<u8> {
    if let Some(url) = database_of(home) {
        let cluster = mailbroker_testkit::postgres::shared().expect("the cluster");
        return cluster.dump(&url).expect("a dump").into_bytes();
    }
    let mut all = Vec::new();
    for name in ["index.sqlite3", "index.sqlite3-wal"] {
        if let Ok(bytes) = std::fs::read(home.join(name)) {
            all.extend(bytes);
        }
    }
    all
}

/// Where the processes of a deployment run: two `serve` nodes and a third machine's CLI. On
/// SQLite (one machine) all three share one home; on PostgreSQL each has a home of its own,
/// all given one database URL, as machines of a team are.
#[allow(dead_code)]
pub struct Team {
    engine: Engine,
    homes: Vec<tempfile::TempDir>,
}

#[allow(dead_code)]
impl Team {
    pub fn sqlite() -> Team {
        Team {
            engine: Engine::Sqlite,
            homes: vec![tempfile::tempdir().unwrap()],
        }
    }

    /// `None` when PostgreSQL is missing outside CI (under CI that fails instead).
    pub fn postgres() -> Option<Team> {
        let url = postgres_database()?;
        let homes: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        for home in &homes {
            on_postgres(home.path(), &url);
        }
        Some(Team {
            engine: Engine::Postgres,
            homes,
        })
    }

    /// Node `n`'s home (0 or 1).
    pub fn node(&self, n: usize) -> &Path {
        self.homes[n.min(self.homes.len() - 1)].path()
    }

    /// The engine's name, to keep the test servers' users of each apart.
    pub fn name(&self) -> &'static str {
        match self.engine {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "pg",
        }
    }

    /// The home of the CLI on a third machine.
    pub fn third(&self) -> &Path {
        self.homes[self.homes.len() - 1].path()
    }
}

/// Every indexed message of `mailbox` for `account`: UID → sorted raw flags.
pub fn indexed_flags(
    home: &Path,
    account: &str,
    mailbox: &str,
) -> std::collections::BTreeMap<u32, Vec<String>> {
    let q = format!("account:{account} in:\"{mailbox}\"");
    let json = ok(home, &["search", "--limit", "100000", &q]);
    json["messages"]
        .as_array()
        .expect("messages array")
        .iter()
        .map(|m| {
            let mut flags: Vec<String> = m["flags"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap().to_string())
                .collect();
            flags.sort();
            (uid_of(m), flags)
        })
        .collect()
}

/// The sync report of one mailbox from a `sync --json` answer.
pub fn mailbox_report<'a>(sync: &'a Value, mailbox: &str) -> &'a Value {
    sync["accounts"][0]["mailboxes"]
        .as_array()
        .expect("mailboxes")
        .iter()
        .find(|m| m["mailbox"] == mailbox)
        .unwrap_or_else(|| panic!("no report for {mailbox}: {sync}"))
}

/// Adds account `id` for `user` over plain IMAP through a loopback proxy on `port` (a
/// `mailbroker_testkit::Proxy` in front of the server, to delay, hold or cut commands).
pub fn add_proxied(home: &Path, id: &str, port: u16, user: &str) {
    let mut args = add_args(id, "127.0.0.1", port, user);
    args.extend(["--tls", "none"].map(String::from));
    let run = mb_args(home, &args);
    assert_eq!(run.code, 0, "account add through the proxy: {}", run.stdout);
}

/// Waits until `proxy` holds the command it was told to (`hold_at`); `what` names it when
/// it never comes.
pub async fn until_held(proxy: &mailbroker_testkit::Proxy, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !proxy.holding() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} was never sent"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
