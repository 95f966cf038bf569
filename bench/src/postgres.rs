//! `bench postgres --messages N`: the index on PostgreSQL beside SQLite, in one run, from
//! one private Dovecot and one private PostgreSQL cluster: first syncs of N varied messages
//! (`bench search`'s corpus), alternating engines; the ten benchmark queries in-process on
//! both, interleaved, with their totals compared; and two `serve` nodes keeping 40 accounts
//! fresh on each engine: how fast their first syncs go through (messages a second, at the
//! default of two first syncs at once) and how long after another client's APPEND a message
//! is searchable over MCP.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use mailbroker_testkit::Dovecot;
use mailbroker_testkit::postgres::Postgres;

use super::search::{QUERIES, varied_message};

/// First syncs of each engine, alternating.
const FIRST_SYNCS: usize = 2;
/// Times each query runs on each engine.
const RUNS: usize = 100;
/// The two-node run: accounts, and messages in each.
const ACCOUNTS: usize = 40;
const PER_ACCOUNT: usize = 500;

pub async fn bench_postgres(messages: usize) -> Result<()> {
    let _key = super::team::sealing_key()?;
    let bin = super::mailbroker_binary()?;
    let server = Dovecot::start()?;
    server.import_flagged("bench", (0..messages).map(|i| varied_message(i, messages)))?;
    let cluster = Postgres::start()?;
    // Dovecot's cache warmed once, as `bench search` does, so every first sync meets it warm.
    let headers = format!("({} MODSEQ)", mailbroker_imap::NEW_MESSAGE_ITEMS);
    super::floor(&server, &headers).await?;
    println!("{messages} messages, first syncs alternating (medians of {FIRST_SYNCS}):");
    let (sqlite_home, pg_url) = first_syncs(&bin, &server, &cluster)?;
    queries(sqlite_home.path(), &pg_url).await?;
    println!("two serve nodes, {ACCOUNTS} accounts of {PER_ACCOUNT} messages:");
    // Users of each engine's own, imported alike: Dovecot answers a mailbox it has served
    // before differently (its IDLE announces at once, not after its half-second batching).
    for engine in ["sqlite", "pg"] {
        for n in 0..ACCOUNTS {
            let mail = (0..PER_ACCOUNT).map(|i| super::bench_message(n * 10_000 + i));
            server.import_messages(&format!("team-{engine}-{n}"), mail)?;
        }
    }
    let team = |database| super::team::Team {
        database,
        accounts: ACCOUNTS,
        per_account: PER_ACCOUNT,
        prefix: if database.is_some() {
            "team-pg"
        } else {
            "team-sqlite"
        },
        nodes: &[],
    };
    super::team::two_nodes(&bin, &server, &team(None)).await?;
    super::team::two_nodes(&bin, &server, &team(Some(&cluster.database()?))).await
}

/// First syncs into fresh indexes, alternating engines: each one's searchable-by-header and
/// complete times (medians). Returns the last of each, to query.
fn first_syncs(
    bin: &Path,
    server: &Dovecot,
    cluster: &Postgres,
) -> Result<(tempfile::TempDir, String)> {
    let mut times: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
    let mut kept = (None, String::new());
    for round in 0..FIRST_SYNCS * 2 {
        let postgres = round % 2 == 1;
        let home = tempfile::tempdir()?;
        let url = cluster.database()?;
        let database = postgres.then_some(url.as_str());
        let first = super::first_sync_on(bin, server, home.path(), &super::team::on(database))?;
        times[usize::from(postgres)].push((
            super::searchable_after(&first).as_secs_f64(),
            first.wall.as_secs_f64(),
        ));
        match postgres {
            true => kept.1 = url,
            false => kept.0 = Some(home),
        }
    }
    for (name, mut t) in ["SQLite", "PostgreSQL"].into_iter().zip(times) {
        t.sort_by(|a, b| a.0.total_cmp(&b.0));
        let usable = t[t.len() / 2].0;
        let mut complete: Vec<f64> = t.iter().map(|x| x.1).collect();
        complete.sort_by(f64::total_cmp);
        println!(
            "  {name:<10} searchable by header after {usable:.2} s, complete after {:.2} s",
            complete[complete.len() / 2]
        );
    }
    Ok((kept.0.context("a SQLite index")?, kept.1))
}

/// The ten queries on both engines, each run alternating between them: p50 and p95 of a
/// page of 20 with its total, and the totals compared.
async fn queries(sqlite_home: &Path, pg_url: &str) -> Result<()> {
    let stores = [
        mailbroker_store::Store::open(&sqlite_home.join("index.sqlite3")).await?,
        mailbroker_store::Store::connect(pg_url).await?,
    ];
    println!("the ten queries in-process, page of 20 + total, {RUNS} runs each alternating:");
    println!(
        "  {:<40} {:>7}  {:>17}  {:>17}",
        "", "matches", "SQLite p50/p95", "PostgreSQL p50/p95"
    );
    for text in QUERIES {
        let query = mailbroker_query::parse(text, 1_800_000_000)?;
        let mut times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        let mut totals = [0, 0];
        for _ in 0..RUNS {
            for (i, store) in stores.iter().enumerate() {
                let start = Instant::now();
                let page = store.search_page(&query, 20, 0).await?;
                times[i].push(start.elapsed());
                totals[i] = page.total;
            }
        }
        if totals[0] != totals[1] {
            bail!(
                "{text}: SQLite found {}, PostgreSQL {}",
                totals[0],
                totals[1]
            );
        }
        for t in &mut times {
            t.sort();
        }
        let p = |t: &[Duration]| {
            format!(
                "{:.2} / {:.2} ms",
                super::percentile(t, 0.5),
                super::percentile(t, 0.95)
            )
        };
        println!(
            "  {text:<40} {:>7}  {:>17}  {:>17}",
            totals[0],
            p(&times[0]),
            p(&times[1])
        );
    }
    for store in stores {
        store.close().await;
    }
    Ok(())
}
