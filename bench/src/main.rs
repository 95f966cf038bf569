//! `bench sync --messages N`: seeds a private Dovecot with N messages and measures, in one run,
//! the raw IMAP floor (`UID FETCH 1:* (UID FLAGS ENVELOPE)`, cold then warm) against
//! mailbroker's first sync (cold and warm server cache) and its no-change resync, with peak RSS
//! and the number of IMAP commands. Figures go to BENCHMARKS.md; no test asserts on time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use mailbroker_testkit::{Dovecot, ImapClient, PASSWORD};

mod delete;
mod gmail;
mod graph;
mod jmap;
mod mcp;
mod notmuch;
mod postgres;
mod search;
mod serve;
mod team;

struct Measured {
    wall: Duration,
    max_rss_kb: i64,
    json: serde_json::Value,
}

/// The mailbroker binary beside this one, or `$BENCH_MAILBROKER` (to measure another build).
fn mailbroker_binary() -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("BENCH_MAILBROKER") {
        return Ok(PathBuf::from(bin));
    }
    let me = std::env::current_exe()?;
    let bin = me.with_file_name("mailbroker");
    if !bin.exists() {
        bail!(
            "{} not found: build it first (cargo build --release)",
            bin.display()
        );
    }
    Ok(bin)
}

/// Runs mailbroker and returns wall time, its own peak RSS (wait4) and its JSON output.
fn run_mailbroker(bin: &Path, home: &Path, args: &[&str]) -> Result<Measured> {
    let start = Instant::now();
    let child = Command::new(bin)
        .arg("--home")
        .arg(home)
        .arg("--json")
        .args(args)
        .env("BENCH_PW", PASSWORD)
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.context("stdout")?;
    let mut out = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut out)?;
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    if status != 0 {
        bail!("mailbroker {args:?} failed: {out}");
    }
    Ok(Measured {
        wall,
        max_rss_kb: usage.ru_maxrss,
        json: serde_json::from_str(out.trim()).context("mailbroker json")?,
    })
}

/// Runs mailbroker and returns its measurement with the requests a mock logged meanwhile
/// (`log` reads the mock's whole log).
fn logged<L>(
    log: impl Fn() -> Vec<L>,
    bin: &Path,
    home: &Path,
    args: &[&str],
) -> Result<(Measured, Vec<L>)> {
    let before = log().len();
    let measured = run_mailbroker(bin, home, args)?;
    Ok((measured, log().split_off(before)))
}

/// A bench's write: `update --query in:inbox --add-tag TAG --yes` (every one of the `n`
/// messages must be applied), then the same request again; each with the requests it made.
type Logged<L> = (Measured, Vec<L>);

fn tag_inbox_twice<L>(
    log: impl Fn() -> Vec<L>,
    bin: &Path,
    home: &Path,
    (n, tag): (usize, &str),
) -> Result<(Logged<L>, Logged<L>)> {
    let args = ["update", "--query", "in:inbox", "--add-tag", tag, "--yes"];
    let write = logged(&log, bin, home, &args)?;
    if write.0.json["applied"].as_u64() != Some(n as u64) {
        bail!("not all applied: {}", write.0.json);
    }
    let again = logged(&log, bin, home, &args)?;
    Ok((write, again))
}

/// One measured run of a cloud bench: what it did, its measurement, its requests.
struct CloudRun<'a> {
    what: String,
    measured: &'a Measured,
    requests: String,
}

impl CloudRun<'_> {
    fn new(what: impl Into<String>, measured: &Measured, requests: String) -> CloudRun<'_> {
        CloudRun {
            what: what.into(),
            measured,
            requests,
        }
    }
}

/// Prints a cloud bench: each run's wall time and requests, the speed-up of the `edit` run
/// over the per-message loop, and that loop (`per_message` took `loop_time` for `sample`
/// messages, scaled to `n`).
fn print_cloud(
    title: &str,
    n: usize,
    runs: &[CloudRun<'_>],
    edit: usize,
    (per_message, loop_time, sample): (&str, Duration, usize),
) {
    let scaled = loop_time.as_secs_f64() * n as f64 / sample as f64;
    println!(
        "{title}: {n} messages on the mock through a {} ms round-trip proxy",
        2 * ONE_WAY.as_millis()
    );
    for (i, run) in runs.iter().enumerate() {
        let wall = run.measured.wall.as_secs_f64();
        let faster = match i == edit {
            true => format!("; {:.0}x faster than the per-message loop", scaled / wall),
            false => String::new(),
        };
        println!("{}: {wall:.2} s wall, {}{faster}", run.what, run.requests);
    }
    println!(
        "{per_message} loop: {:.2} s for {sample}, scaled to {n}: {scaled:.1} s",
        loop_time.as_secs_f64()
    );
}

/// Adds user `id` on a plain-IMAP `port` as account `id` and runs its first sync.
fn add_and_sync(bin: &Path, home: &Path, id: &str, port: u16) -> Result<()> {
    let mut add = mailbroker_testkit::account_add_args(id, "127.0.0.1", port, id, "BENCH_PW");
    add.extend(["--tls".into(), "none".into()]);
    let add: Vec<&str> = add.iter().map(String::as_str).collect();
    run_mailbroker(bin, home, &add)?;
    run_mailbroker(bin, home, &["sync"])?;
    Ok(())
}

fn bench_message(i: usize) -> Vec<u8> {
    let senders = [
        "news@shop.example",
        "Alice Example <alice@example.test>",
        "billing@vendor.example",
        "team@work.example",
    ];
    let body = "Hello,\r\n\r\nthis is a benchmark message with a few lines of text so that the \
                snippet and the indexed prefix have something to hold.\r\n\r\nRegards\r\n";
    format!(
        "Return-Path: <bounce@example.test>\r\nReceived: from mx.example.test by imap.example.test; \
         Mon, 2 Nov 2026 10:00:00 +0000\r\nFrom: {}\r\nTo: user@example.test\r\n\
         Subject: Benchmark message {i} about invoices and meetings\r\n\
         Date: Mon, 2 Nov 2026 10:{:02}:{:02} +0000\r\nMessage-ID: <bench{i}@example.test>\r\n\
         MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}",
        senders[i % senders.len()],
        (i / 60) % 60,
        i % 60
    )
    .into_bytes()
}

/// Adds user `bench` over TLS as account `bench` in `home` and runs its first sync.
fn first_sync(bin: &Path, server: &Dovecot, home: &Path) -> Result<Measured> {
    first_sync_on(bin, server, home, &[])
}

/// As `first_sync`, each command given `global` options first (`--database URL`).
fn first_sync_on(bin: &Path, server: &Dovecot, home: &Path, global: &[&str]) -> Result<Measured> {
    let port = server.imaps_port.to_string();
    let ca = server.ca.ca_pem.display().to_string();
    #[rustfmt::skip]
    let add = [
        "account", "add", "imap", "--id", "bench", "--host", "localhost", "--port", &port,
        "--username", "bench", "--password-env", "BENCH_PW", "--ca-file", &ca,
    ];
    let with = |args: &[&str]| -> Vec<String> {
        global.iter().chain(args).map(|s| s.to_string()).collect()
    };
    let add = with(&add);
    run_mailbroker(
        bin,
        home,
        &add.iter().map(String::as_str).collect::<Vec<_>>(),
    )?;
    let sync = with(&["sync"]);
    run_mailbroker(
        bin,
        home,
        &sync.iter().map(String::as_str).collect::<Vec<_>>(),
    )
}

/// When the index answered searches by header (the process's wall time less the text pass
/// the sync reports), and when it was complete, each against the warm floor.
fn report_first_sync(first: &Measured, floor_warm: Duration) {
    let usable = searchable_after(first);
    println!(
        "first sync: searchable by header after {:.3} s ({:.2}x the warm floor), complete after \
         {:.3} s ({:.2}x), peak RSS {} MB",
        secs(usable),
        secs(usable) / secs(floor_warm),
        secs(first.wall),
        secs(first.wall) / secs(floor_warm),
        first.max_rss_kb / 1024
    );
}

/// When a first sync's index answered searches by header: the process's wall time less the
/// text pass the sync reports.
fn searchable_after(first: &Measured) -> Duration {
    let account = &first.json["accounts"][0];
    let ms = |key: &str| Duration::from_millis(account[key].as_u64().unwrap_or(0));
    let text_pass = match account["headers_ms"].as_u64() {
        Some(_) => ms("duration_ms").saturating_sub(ms("headers_ms")),
        None => Duration::ZERO,
    };
    first.wall.saturating_sub(text_pass)
}

/// The `p` quantile (0–1) of sorted times, in milliseconds.
fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The floor a first sync is measured against: `UID FETCH 1:* (UID FLAGS ENVELOPE)` of
/// user `bench`'s INBOX from a warm server cache, best of three.
async fn warm_floor(server: &Dovecot) -> Result<Duration> {
    let mut best = Duration::MAX;
    for _ in 0..3 {
        best = best.min(floor(server, "(UID FLAGS ENVELOPE)").await?);
    }
    Ok(best)
}

async fn floor(server: &Dovecot, items: &str) -> Result<Duration> {
    let mut client = ImapClient::connect(server, "bench").await?;
    let start = Instant::now();
    let n = client.fetch_all("INBOX", items).await?;
    let took = start.elapsed();
    client.logout().await?;
    if n == 0 {
        bail!("floor fetch returned nothing");
    }
    Ok(took)
}

#[tokio::main]
async fn main() -> Result<()> {
    // `bench write` defaults to 10,000 messages, `bench sync` to 100,000.
    let args: Vec<String> = std::env::args().collect();
    let messages: Option<usize> = match args.iter().position(|a| a == "--messages") {
        Some(i) => Some(args.get(i + 1).context("--messages N")?.parse()?),
        None => None,
    };
    match args.get(1).map(String::as_str) {
        Some("sync") => bench_sync(messages.unwrap_or(100_000)).await,
        Some("write") => bench_write(messages.unwrap_or(10_000)).await,
        Some("mcp") => mcp::bench_mcp(messages.unwrap_or(10_000)).await,
        Some("delete") => delete::bench_delete(messages.unwrap_or(10_000)).await,
        Some("gmail") => gmail::bench_gmail(messages.unwrap_or(10_000)).await,
        Some("graph") => graph::bench_graph(messages.unwrap_or(10_000)).await,
        Some("jmap") => jmap::bench_jmap(messages.unwrap_or(10_000)).await,
        Some("search") => search::bench_search(messages.unwrap_or(100_000)).await,
        Some("postgres") => postgres::bench_postgres(messages.unwrap_or(100_000)).await,
        Some("serve") => serve::bench_serve(messages.unwrap_or(50)).await,
        Some("team") => {
            let accounts = match args.iter().position(|a| a == "--accounts") {
                Some(i) => args.get(i + 1).context("--accounts N")?.parse()?,
                None => 1000,
            };
            team::bench_team(accounts, messages.unwrap_or(50)).await
        }
        _ => {
            bail!(
                "usage: bench sync|write|mcp|delete|gmail|graph|jmap|search|serve|postgres|team [--messages N] [--accounts N]"
            )
        }
    }
}

async fn bench_sync(messages: usize) -> Result<()> {
    let bin = mailbroker_binary()?;
    let server = Dovecot::start()?;
    let seed_start = Instant::now();
    server.import_messages("bench", (0..messages).map(bench_message))?;
    println!(
        "seeded {messages} messages in {:.2} s",
        secs(seed_start.elapsed())
    );

    let envelope = "(UID FLAGS ENVELOPE)";
    let floor_cold = floor(&server, envelope).await?;
    let floor_warm = warm_floor(&server).await?;
    // The same raw reads with the items of each pass of a first sync: what the server alone
    // costs for mailbroker's requests.
    let headers = format!("({} MODSEQ)", mailbroker_imap::NEW_MESSAGE_ITEMS);
    let items_cold = floor(&server, &headers).await?;
    let items_warm = floor(&server, &headers).await?;
    let text_items = format!("({})", mailbroker_imap::TEXT_ITEMS);
    let text_warm = floor(&server, &text_items).await?;

    let cold_home = tempfile::tempdir()?;
    let first_cold = first_sync(&bin, &server, cold_home.path())?;
    let warm_home = tempfile::tempdir()?;
    let first_warm = first_sync(&bin, &server, warm_home.path())?;
    let added = first_warm.json["accounts"][0]["added"]
        .as_u64()
        .unwrap_or(0);
    if added != messages as u64 {
        bail!("first sync indexed {added} of {messages} messages");
    }
    let mut resyncs = Vec::new();
    for _ in 0..5 {
        resyncs.push(run_mailbroker(&bin, warm_home.path(), &["sync"])?);
    }
    resyncs.sort_by_key(|m| m.wall);
    let resync = &resyncs[resyncs.len() / 2];
    let resync_internal = resync.json["accounts"][0]["duration_ms"]
        .as_u64()
        .unwrap_or(0);
    let commands = resync.json["accounts"][0]["commands"].as_u64().unwrap_or(0);
    let connect_ms = resync.json["accounts"][0]["connect_ms"]
        .as_u64()
        .unwrap_or(0);

    println!(
        "floor  UID FETCH 1:* (UID FLAGS ENVELOPE): cold {:.3} s, warm {:.3} s",
        secs(floor_cold),
        secs(floor_warm)
    );
    println!(
        "raw UID FETCH 1:* with the header pass's items: cold {:.3} s, warm {:.3} s; with the \
         text pass's items: warm {:.3} s",
        secs(items_cold),
        secs(items_warm),
        secs(text_warm)
    );
    println!(
        "mailbroker first sync: cold {:.3} s, warm {:.3} s (peak RSS {} MB)",
        secs(first_cold.wall),
        secs(first_warm.wall),
        first_warm.max_rss_kb.max(first_cold.max_rss_kb) / 1024
    );
    report_first_sync(&first_warm, floor_warm);
    println!(
        "no-change resync: {:.1} ms wall incl. process start, {} ms inside sync of which {} ms connect+TLS+login, {} IMAP commands, peak RSS {} MB",
        resync.wall.as_secs_f64() * 1000.0,
        resync_internal,
        connect_ms,
        commands,
        resync.max_rss_kb / 1024
    );
    if std::env::var_os("BENCH_KEEP").is_some() {
        // For profiling by hand: keep the server and the synced index until interrupted.
        let home = warm_home.keep();
        println!(
            "kept: --home {} (imaps port {}, ca {}); Ctrl-C to stop",
            home.display(),
            server.imaps_port,
            server.ca.ca_pem.display()
        );
        loop {
            std::thread::park();
        }
    }
    Ok(())
}

/// One-way delay of the latency proxy: a 20 ms round trip, like a real remote server.
const ONE_WAY: Duration = Duration::from_millis(10);

/// Times `f` and returns its wall time.
async fn timed<T>(f: impl Future<Output = Result<T>>) -> Result<(T, Duration)> {
    let start = Instant::now();
    let out = f.await?;
    Ok((out, start.elapsed()))
}

/// Rounds of the write benchmark: the machine is shared, so one run says little; each round
/// measures mailbroker and the protocol minimum back to back, and the medians are reported.
const WRITE_ROUNDS: usize = 5;

/// One round of the write benchmark.
struct WriteRound {
    contiguous: Measured,
    scattered: Measured,
    minimum: Duration,
}

/// `bench write --messages N`: tags N contiguous and N scattered messages with a new keyword
/// through a 20 ms round-trip proxy, and compares with the per-message STORE loop and with
/// the protocol's minimum round trips measured through the same proxy, round after round.
async fn bench_write(n: usize) -> Result<()> {
    let bin = mailbroker_binary()?;
    let server = Dovecot::start()?;
    server.import_messages("bw", (0..2 * n).map(bench_message))?;
    let total = (2 * n) as u32;
    let low = format!("1:{n}");
    let odd: Vec<String> = (1..=total).step_by(2).map(|u| u.to_string()).collect();
    let mut direct = ImapClient::connect(&server, "bw").await?;
    direct.select("INBOX").await?;
    direct.store_set(&low, "+FLAGS.SILENT ($Low)").await?;
    for chunk in odd.chunks(500) {
        direct
            .store_set(&chunk.join(","), "+FLAGS.SILENT ($Odd)")
            .await?;
    }
    direct.logout().await?;

    let proxy = mailbroker_testkit::Proxy::start(server.imap_port, ONE_WAY)?;
    let home = tempfile::tempdir()?;
    add_and_sync(&bin, home.path(), "bw", proxy.port)?;

    let mut rounds = Vec::new();
    for round in 0..WRITE_ROUNDS {
        let tag = |set: &str| {
            run_mailbroker(
                &bin,
                home.path(),
                &[
                    "update",
                    "--query",
                    &format!("tag:${set}"),
                    "--add-tag",
                    &format!("Bench{set}{round}"),
                    "--yes",
                ],
            )
        };
        let contiguous = tag("Low")?;
        let scattered = tag("Odd")?;
        // The protocol's minimum: connect + login + select + one STORE + one verifying FETCH.
        let ((), minimum) = timed(async {
            let mut c = ImapClient::connect_port(proxy.port, "bw").await?;
            c.select("INBOX").await?;
            c.store_set(&low, &format!("+FLAGS.SILENT (BenchMin{round})"))
                .await?;
            c.fetch_all("INBOX", "(UID FLAGS)").await?;
            Ok(())
        })
        .await?;
        // Every round starts from the same state: the round's keywords come off again (more
        // keywords per message would make each later round read and write more). Those raw
        // STOREs change messages behind mailbroker's back, so a sync (not timed) catches the
        // index up; without it the next round would rightly find them stale.
        let mut direct = ImapClient::connect(&server, "bw").await?;
        direct.select("INBOX").await?;
        direct
            .store_set(
                "1:*",
                &format!("-FLAGS.SILENT (BenchLow{round} BenchOdd{round} BenchMin{round})"),
            )
            .await?;
        direct.logout().await?;
        run_mailbroker(&bin, home.path(), &["sync"])?;
        for (name, m) in [("contiguous", &contiguous), ("scattered", &scattered)] {
            if m.json["applied"].as_u64() != Some(n as u64) {
                bail!("{name}: expected {n} applied: {}", m.json);
            }
        }
        rounds.push(WriteRound {
            contiguous,
            scattered,
            minimum,
        });
    }

    // The per-message path: one UID STORE per message, 200 of them, scaled to N.
    let sample = 200.min(n);
    let uids: Vec<u32> = (1..=sample as u32).collect();
    let mut client = ImapClient::connect_port(proxy.port, "bw").await?;
    client.select("INBOX").await?;
    let ((), loop_time) = timed(client.store_each(&uids, "+FLAGS.SILENT (BenchLoop)")).await?;
    client.logout().await?;
    let loop_scaled = loop_time.as_secs_f64() * n as f64 / sample as f64;
    report_write(n, &rounds, sample, loop_time, loop_scaled);
    Ok(())
}

/// The median and the range of `values`, as "median (min–max)".
fn spread(mut values: Vec<f64>, digits: usize) -> String {
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    let (lo, hi) = (values[0], values[values.len() - 1]);
    format!("{median:.digits$} ({lo:.digits$}–{hi:.digits$})")
}

fn report_write(n: usize, rounds: &[WriteRound], sample: usize, loop_time: Duration, scaled: f64) {
    println!(
        "tagging {n} messages with a new keyword through a {} ms round-trip proxy, {} rounds; median (range)",
        2 * ONE_WAY.as_millis(),
        rounds.len()
    );
    for (i, r) in rounds.iter().enumerate() {
        println!(
            "round {}: contiguous {:.3} s ({} ms local), scattered {:.3} s ({} ms local), minimum {:.3} s",
            i + 1,
            secs(r.contiguous.wall),
            r.contiguous.json["local_ms"],
            secs(r.scattered.wall),
            r.scattered.json["local_ms"],
            secs(r.minimum)
        );
    }
    type Pick = fn(&WriteRound) -> &Measured;
    let runs: [(&str, Pick); 2] = [
        ("contiguous", |r| &r.contiguous),
        ("scattered", |r| &r.scattered),
    ];
    for (name, pick) in runs {
        let field = |f: &str| {
            spread(
                rounds
                    .iter()
                    .map(|r| pick(r).json[f].as_f64().unwrap_or(0.0))
                    .collect(),
                0,
            )
        };
        println!(
            "mailbroker {name}: {} s wall, IMAP commands {}, {} ms with the server, {} ms local (plan, journal, index)",
            spread(rounds.iter().map(|r| secs(pick(r).wall)).collect(), 3),
            field("commands"),
            field("provider_ms"),
            field("local_ms"),
        );
    }
    println!(
        "protocol minimum (raw connect+login+select+STORE+FETCH): {} s",
        spread(rounds.iter().map(|r| secs(r.minimum)).collect(), 3)
    );
    println!(
        "per-message UID STORE loop: {:.3} s for {sample}, scaled to {n}: {scaled:.1} s",
        secs(loop_time),
    );
    println!(
        "speed-up vs per-message loop (contiguous): {}x",
        spread(
            rounds
                .iter()
                .map(|r| scaled / secs(r.contiguous.wall))
                .collect(),
            0
        )
    );
    for (name, pick) in runs {
        println!(
            "mailbroker {name} / protocol minimum of the same round: {}x",
            spread(
                rounds
                    .iter()
                    .map(|r| secs(pick(r).wall) / secs(r.minimum))
                    .collect(),
                2
            )
        );
    }
}
