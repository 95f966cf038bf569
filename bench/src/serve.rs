//! `bench serve --messages N`: `mailbroker serve` with three IMAP accounts on a private
//! Dovecot. How long after another client's APPEND the message is searchable over MCP (p50
//! and p95 over N arrivals, 50 by default), and the CPU the process spends per hour while
//! nothing happens (measured over 30 s of quiet, from /proc).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mailbroker_testkit::{Dovecot, ImapClient, message};

use super::mcp::Session;

const USERS: [&str; 3] = ["bs1", "bs2", "bs3"];
const QUIET: Duration = Duration::from_secs(30);

/// User plus system CPU time of process `pid` so far.
fn cpu(pid: u32) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start after its ')'.
    let after = stat.rsplit(')').next().context("stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Ok(Duration::from_millis(ticks * 1000 / per_sec))
}

pub async fn bench_serve(arrivals: usize) -> Result<()> {
    let bin = super::mailbroker_binary()?;
    let server = Dovecot::start()?;
    let home = tempfile::tempdir()?;
    for user in USERS {
        server.import_messages(user, (0..100).map(super::bench_message))?;
        super::add_and_sync(&bin, home.path(), user, server.imap_port)?;
    }
    let serve = Session::start_with(&bin, home.path(), &["serve", "--http", "127.0.0.1:0"]).await?;
    // The watchers catch up and settle into IDLE.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = cpu(serve.pid())?;
    tokio::time::sleep(QUIET).await;
    let idle = cpu(serve.pid())? - before;
    let per_hour = idle.as_secs_f64() * 3600.0 / QUIET.as_secs_f64();

    let mut other = ImapClient::connect(&server, USERS[0]).await?;
    let mut times = Vec::with_capacity(arrivals);
    for i in 0..arrivals {
        let subject = format!("Arrival {i}");
        let body = message(100_000 + i, "arrival@example.test", &subject, "b");
        other.append("INBOX", "", &body).await?;
        let query = format!("subject:\"{subject}\"");
        times.push(serve.until_found(&query, Instant::now()).await?);
    }
    times.sort();
    println!("serve: 3 IMAP accounts on loopback Dovecot, IDLE on each INBOX");
    println!(
        "  APPEND by another client to searchable over MCP ({arrivals} arrivals): p50 {:.0} ms, p95 {:.0} ms",
        super::percentile(&times, 0.5),
        super::percentile(&times, 0.95)
    );
    println!(
        "  idle CPU: {:.3} s over {} s, {per_hour:.2} CPU seconds per hour",
        idle.as_secs_f64(),
        QUIET.as_secs()
    );
    Ok(())
}
