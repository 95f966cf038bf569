//! `bench team --accounts N [--messages M]`: a team's deployment at size. One private Dovecot
//! with N users of M messages (50), two `serve` nodes on one private PostgreSQL: how long until
//! every first sync is done, then an arrival in each of 100 accounts (spread over all) timed
//! until it is searchable through either node; each node's memory and open connections; then
//! one node killed outright (SIGKILL) and the time until the other watches every account,
//! with its memory and connections then. `bench postgres` runs the same two nodes at 40
//! accounts, without the kill. `tests/team.rs` runs this scenario at 100 accounts in CI.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use mailbroker_testkit::postgres::Postgres;
use mailbroker_testkit::{Dovecot, ImapClient, message};

use super::mcp::Session;

/// The nodes' takeover time (`serve --takeover`; 30 s by default): a dead node's heartbeat is
/// waited for this long, and its accounts are then opened again on the other.
const TAKEOVER_SECS: u64 = 10;
/// Accounts that get an arrival.
const ARRIVALS: usize = 100;

/// `--database URL` for a run on PostgreSQL; nothing for SQLite in the home.
pub fn on(database: Option<&str>) -> Vec<&str> {
    database.map_or_else(Vec::new, |url| vec!["--database", url])
}

/// One two-node run: where the index is, how many accounts of how many messages, their users'
/// prefix on the Dovecot, and the extra arguments of each node (none: the kill is skipped).
pub struct Team<'a> {
    pub database: Option<&'a str>,
    pub accounts: usize,
    pub per_account: usize,
    pub prefix: &'static str,
    pub nodes: &'a [&'a str],
}

pub async fn bench_team(accounts: usize, per_account: usize) -> Result<()> {
    raise_open_files();
    let _key = sealing_key()?;
    let bin = super::mailbroker_binary()?;
    let server = Dovecot::start()?;
    let cluster = Postgres::start()?;
    println!("two serve nodes on PostgreSQL, {accounts} accounts of {per_account} messages:");
    for n in 0..accounts {
        let mail = (0..per_account).map(|i| super::bench_message(n * 10_000 + i));
        server.import_messages(&format!("team-{n}"), mail)?;
    }
    let database = cluster.database()?;
    let takeover = TAKEOVER_SECS.to_string();
    let team = Team {
        database: Some(&database),
        accounts,
        per_account,
        prefix: "team",
        nodes: &["--first-syncs", "4", "--takeover", &takeover],
    };
    two_nodes(&bin, &server, &team).await
}

/// A key file for the secrets a shared database keeps sealed, named to every process this one
/// starts (`MAILBROKER_SECRET_KEY_FILE`), as every node of a team is given one.
pub fn sealing_key() -> Result<tempfile::TempDir> {
    use std::io::Read;
    let dir = tempfile::tempdir()?;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let key = dir.path().join("key");
    std::fs::write(&key, hex)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))?;
    // SAFETY: set before any process is started, and nothing else reads the environment then.
    unsafe { std::env::set_var("MAILBROKER_SECRET_KEY_FILE", &key) };
    Ok(dir)
}

/// As a person running a thousand accounts raises the limit (README): this process's soft
/// limit on open files to its hard one, inherited by the Dovecot and the nodes it starts.
fn raise_open_files() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// A process's resident memory (MB) and open sockets, from `/proc`.
fn footprint(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = (status.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0);
    let sockets = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            (dir.flatten())
                .filter(|e| {
                    (std::fs::read_link(e.path()).ok())
                        .is_some_and(|t| t.to_string_lossy().starts_with("socket:"))
                })
                .count()
        })
        .unwrap_or(0);
    (rss / 1024, sockets)
}

/// Each node's footprint, the nodes numbered from `first`.
fn print_footprints(nodes: &[Session], first: usize, when: &str) {
    for (n, node) in nodes.iter().enumerate() {
        let (rss, sockets) = footprint(node.pid());
        println!(
            "  node {} {when}: {rss} MB resident, {sockets} open sockets",
            first + n
        );
    }
}

/// Waits until every account was synced, as `serve status` shows it from `home`.
async fn all_synced(bin: &Path, home: &Path, team: &Team<'_>, started: Instant) -> Result<()> {
    let mut status = on(team.database);
    status.extend(["serve", "status"]);
    loop {
        let seen = super::run_mailbroker(bin, home, &status)?;
        let accounts = &seen.json["serve"]["accounts"];
        let synced = (0..team.accounts)
            .filter(|n| accounts[format!("{}-{n}", team.prefix)]["last_sync_at"].is_i64())
            .count();
        if synced == team.accounts {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(1800) {
            bail!(
                "first syncs not done within 30 minutes: {synced} of {}",
                team.accounts
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How many accounts each node watches, as `serve status` shows it from `home`.
fn watching(bin: &Path, home: &Path, team: &Team<'_>) -> Result<Vec<usize>> {
    let mut status = on(team.database);
    status.extend(["serve", "status"]);
    let seen = super::run_mailbroker(bin, home, &status)?;
    Ok(
        (seen.json["serve"]["nodes"].as_array().into_iter().flatten())
            .map(|n| n["accounts"].as_array().map_or(0, Vec::len))
            .collect(),
    )
}

/// Two `serve` nodes (on PostgreSQL each in a home of its own, on SQLite in one home) given
/// the accounts never synced: how long until all are synced, then one arrival in each of up
/// to `ARRIVALS` accounts timed until it is searchable over MCP, through the nodes in turn;
/// with `team.nodes` given, each node's footprint and a takeover after node 0 is killed.
pub async fn two_nodes(bin: &Path, server: &Dovecot, team: &Team<'_>) -> Result<()> {
    let homes = [tempfile::tempdir()?, tempfile::tempdir()?];
    let node_home = |n: usize| match team.database {
        Some(_) => homes[n].path(),
        None => homes[0].path(),
    };
    let user_of = |n: usize| format!("{}-{n}", team.prefix);
    for n in 0..team.accounts {
        let user = user_of(n);
        let mut add: Vec<String> = on(team.database).iter().map(|s| s.to_string()).collect();
        add.extend(mailbroker_testkit::account_add_args(
            &user,
            "127.0.0.1",
            server.imap_port,
            &user,
            "BENCH_PW",
        ));
        add.extend(["--tls".into(), "none".into()]);
        let add: Vec<&str> = add.iter().map(String::as_str).collect();
        super::run_mailbroker(bin, node_home(0), &add)?;
    }
    let started = Instant::now();
    let mut nodes = Vec::new();
    for n in 0..2 {
        let mut args = on(team.database);
        args.extend(["serve", "--http", "127.0.0.1:0", "--http-allow-writes"]);
        args.extend(team.nodes);
        nodes.push(Session::start_with(bin, node_home(n), &args).await?);
    }
    all_synced(bin, node_home(1), team, started).await?;
    let synced_in = started.elapsed();
    let step = (team.accounts / ARRIVALS).max(1);
    let mut times = Vec::new();
    for n in (0..team.accounts).step_by(step) {
        let mut other = ImapClient::connect(server, &user_of(n)).await?;
        let subject = format!("Arrival {n}");
        let arrival = message(900_000 + n, "a@example.test", &subject, "b");
        other.append("INBOX", "", &arrival).await?;
        let query = format!("account:{} subject:\"{subject}\"", user_of(n));
        let node = &nodes[times.len() % 2];
        times.push(node.until_found(&query, Instant::now()).await?);
    }
    times.sort();
    let total = team.accounts * team.per_account;
    println!(
        "  {:<10} first syncs of all {total} messages in {:.1} s ({:.0} messages/s); APPEND to \
         searchable through either node ({} accounts): p50 {:.0} ms, p95 {:.0} ms",
        if team.database.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        },
        synced_in.as_secs_f64(),
        total as f64 / synced_in.as_secs_f64(),
        times.len(),
        super::percentile(&times, 0.5),
        super::percentile(&times, 0.95)
    );
    if team.nodes.is_empty() {
        return Ok(());
    }
    println!(
        "  accounts watched by each node: {:?}",
        watching(bin, node_home(1), team)?
    );
    print_footprints(&nodes, 0, "watching");
    let killed = nodes.remove(0);
    let lost = watching(bin, node_home(1), team)?;
    let killed_at = Instant::now();
    unsafe {
        libc::kill(killed.pid() as libc::pid_t, libc::SIGKILL);
    }
    loop {
        if watching(bin, node_home(1), team)? == [team.accounts] {
            break;
        }
        if killed_at.elapsed() > Duration::from_secs(TAKEOVER_SECS + 600) {
            bail!("no takeover within {} s", TAKEOVER_SECS + 600);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "  kill -9 of node 0 (the nodes watched {lost:?}): all {} accounts watched by node 1 \
         after {:.1} s (takeover time {TAKEOVER_SECS} s)",
        team.accounts,
        killed_at.elapsed().as_secs_f64()
    );
    print_footprints(&nodes, 1, "after the takeover");
    drop(killed);
    Ok(())
}
