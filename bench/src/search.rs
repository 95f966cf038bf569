//! `bench search --messages N`: the reads an assistant makes before it writes, on an index of
//! N varied messages (many senders, tags, flags, dates over two years, some large, some with
//! attachments) first synced from Dovecot, beside the raw fetch floor; then ten representative
//! queries run in-process, then the same index served over MCP.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use mailbroker_testkit::Dovecot;

/// Times each query is run.
const RUNS: usize = 200;

/// The queries a person or an assistant types most, one of each kind.
pub const QUERIES: [&str; 10] = [
    "budget",
    "from:alice",
    "tag:Work",
    "is:unread in:inbox",
    "after:2025-06-01 before:2025-07-01",
    "from:alice OR from:bob",
    "newsletter -(from:shop OR tag:Work)",
    "\"quarterly report\"",
    "larger:100K",
    "account:bench has:attachment",
];

const TOPICS: [&str; 8] = [
    "Quarterly report",
    "Invoice",
    "Meeting notes",
    "Travel plans",
    "Newsletter",
    "Project update",
    "Lunch",
    "Security alert",
];

const WORDS: [&str; 8] = [
    "budget", "deadline", "review", "holiday", "contract", "launch", "hiring", "offsite",
];

/// Message `i` of `n`, with its flags: one in 20 from alice, one in 25 from bob, one in 10
/// from the shop, the rest from 1,000 other senders; dated evenly over 2025–2026.
pub fn varied_message(i: usize, n: usize) -> (String, Vec<u8>) {
    let from = match i {
        _ if i.is_multiple_of(20) => "Alice Example <alice@example.test>".to_string(),
        _ if i % 25 == 1 => "bob@example.test".to_string(),
        _ if i % 10 == 2 => "Shop <news@shop.example>".to_string(),
        _ => format!("Sender {0} <sender{0}@domain{1}.example>", i % 1000, i % 37),
    };
    let topic = TOPICS[i % TOPICS.len()];
    let word = WORDS[(i / 8) % WORDS.len()];
    let when = 1_735_689_600 + (i as i64) * (730 * 86_400) / n.max(1) as i64;
    let date = mail_parser::DateTime::from_timestamp(when).to_rfc822();
    let text = format!(
        "Hello,\r\n\r\nabout the {word}: this is message {i} on {topic}, with a few lines so \
         the snippet and the indexed text have something to hold.\r\n\r\nRegards\r\n"
    );
    let padding = if i % 50 == 7 {
        "x".repeat(120_000)
    } else {
        String::new()
    };
    let body = if i % 20 == 3 {
        format!(
            "Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n\
             {text}\r\n--b\r\nContent-Type: application/pdf; name=\"doc{i}.pdf\"\r\n\
             Content-Disposition: attachment; filename=\"doc{i}.pdf\"\r\n\
             Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b--\r\n"
        )
    } else {
        format!("Content-Type: text/plain; charset=utf-8\r\n\r\n{text}{padding}\r\n")
    };
    let message = format!(
        "From: {from}\r\nTo: user@example.test\r\nSubject: {topic}: {word} #{i}\r\n\
         Date: {date}\r\nMessage-ID: <v{i}@example.test>\r\nMIME-Version: 1.0\r\n{body}"
    );
    let mut flags = Vec::new();
    if i % 10 < 7 {
        flags.push("\\Seen");
    }
    if i % 20 == 5 {
        flags.push("\\Flagged");
    }
    for (every, tag) in [(7, "Work"), (11, "Invoice"), (13, "Travel"), (17, "$Later")] {
        if i.is_multiple_of(every) {
            flags.push(tag);
        }
    }
    (flags.join(" "), message.into_bytes())
}

/// One query as `search` and `search_messages` run it: the first page of 20 and the total.
async fn search_page(store: &mailbroker_store::Store, text: &str) -> Result<(usize, u64)> {
    let query = mailbroker_query::parse(text, 1_800_000_000)?;
    let page = store.search_page(&query, 20, 0).await?;
    Ok((page.rows.len(), page.total))
}

pub async fn bench_search(messages: usize) -> Result<()> {
    let bin = super::mailbroker_binary()?;
    if let Some(kept) = std::env::var_os("BENCH_HOME") {
        // For looking into the queries by hand: an index (and a notmuch database) kept by an
        // earlier run.
        let home = std::path::Path::new(&kept);
        // Kept by an earlier build, perhaps: brought up to this one as its next sync would.
        let store = mailbroker_store::Store::open(&home.join("index.sqlite3")).await?;
        let start = Instant::now();
        store.refresh_frequent_words(0).await?;
        println!(
            "kept index brought up to this build in {:.2} s",
            start.elapsed().as_secs_f64()
        );
        store.close().await;
        queries_and_mcp(&bin, home, messages).await?;
        let db = match std::env::var_os("BENCH_NOTMUCH") {
            Some(dir) => super::notmuch::Notmuch::kept(std::path::Path::new(&dir)),
            None => {
                let dir = tempfile::tempdir()?.keep();
                println!("kept: BENCH_NOTMUCH={}", dir.display());
                super::notmuch::Notmuch::index(&dir, messages)?
            }
        };
        return super::notmuch::side_by_side(&bin, home, &db);
    }
    let server = Dovecot::start()?;
    server.import_flagged("bench", (0..messages).map(|i| varied_message(i, messages)))?;
    let floor_warm = super::warm_floor(&server).await?;
    // Dovecot caches the header fields a client asks for on their first fetch: read them once
    // raw, so the first sync meets the same warm cache as the floor (`bench sync` shows both).
    let headers = format!("({} MODSEQ)", mailbroker_imap::NEW_MESSAGE_ITEMS);
    let headers_cold = super::floor(&server, &headers).await?;
    let home = tempfile::tempdir()?;
    let first = super::first_sync(&bin, &server, home.path())?;
    println!(
        "floor UID FETCH 1:* (UID FLAGS ENVELOPE), warm: {:.3} s; the header pass's items \
         read raw, cold: {:.3} s",
        floor_warm.as_secs_f64(),
        headers_cold.as_secs_f64()
    );
    super::report_first_sync(&first, floor_warm);
    if let Some(before) = std::env::var_os("BENCH_BEFORE") {
        first_syncs_side_by_side(&before, &bin, &server)?;
    }
    if std::env::var_os("BENCH_FIRST_SYNCS_ONLY").is_some() {
        return Ok(());
    }
    queries_and_mcp(&bin, home.path(), messages).await?;
    let notmuch_dir = tempfile::tempdir()?;
    let db = super::notmuch::Notmuch::index(notmuch_dir.path(), messages)?;
    super::notmuch::side_by_side(&bin, home.path(), &db)?;
    if std::env::var_os("BENCH_KEEP").is_some() {
        println!(
            "kept: BENCH_HOME={} BENCH_NOTMUCH={}",
            home.keep().display(),
            notmuch_dir.keep().display()
        );
    }
    Ok(())
}

/// First syncs of other builds (`BENCH_BEFORE`, say the release before; several separated as
/// in `PATH`) and of this one into fresh homes from the same server, in turns, each round in
/// the other order, `BENCH_ROUNDS` (3) each: every run's searchable-by-header and complete
/// times and peak memory, then each build's medians and index size, side by side in one run.
/// A shared machine's speed drifts over minutes; turns let every build meet the same drift.
fn first_syncs_side_by_side(
    before: &std::ffi::OsStr,
    now: &std::path::Path,
    server: &Dovecot,
) -> Result<()> {
    let mut bins: Vec<std::path::PathBuf> = std::env::split_paths(before).collect();
    bins.push(now.to_path_buf());
    let rounds = match std::env::var("BENCH_ROUNDS") {
        Ok(r) => r.parse().context("BENCH_ROUNDS takes a number of rounds")?,
        Err(_) => 3,
    };
    if rounds == 0 {
        bail!("BENCH_ROUNDS must be at least 1");
    }
    let name = |bin: &std::path::Path| match bin == now {
        true => "now".to_string(),
        false => bin.display().to_string(),
    };
    let mut runs: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); bins.len()];
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..bins.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for which in order {
            let home = tempfile::tempdir()?;
            let first = super::first_sync(&bins[which], server, home.path())?;
            let size = std::fs::metadata(home.path().join("index.sqlite3"))?.len();
            let run = (
                super::searchable_after(&first).as_secs_f64(),
                first.wall.as_secs_f64(),
                size as f64 / 1_048_576.0,
            );
            println!(
                "  round {}, {}: searchable by header after {:.3} s, complete after {:.3} s, \
                 peak RSS {} MB",
                round + 1,
                name(&bins[which]),
                run.0,
                run.1,
                first.max_rss_kb / 1024
            );
            runs[which].push(run);
        }
    }
    for (bin, mut r) in bins.iter().zip(runs) {
        r.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (usable, _, size) = r[r.len() / 2];
        let mut complete: Vec<f64> = r.iter().map(|x| x.1).collect();
        complete.sort_by(f64::total_cmp);
        println!(
            "first sync, {}: searchable by header after {usable:.3} s, complete after {:.3} s \
             (medians of {}), index {size:.1} MB",
            name(bin),
            complete[complete.len() / 2],
            r.len()
        );
    }
    Ok(())
}

async fn queries_and_mcp(
    bin: &std::path::Path,
    home: &std::path::Path,
    messages: usize,
) -> Result<()> {
    let db = home.join("index.sqlite3");
    let store = mailbroker_store::Store::open(&db).await?;
    println!(
        "index: {:.1} MB",
        std::fs::metadata(&db)?.len() as f64 / 1_048_576.0
    );
    println!(
        "{messages} messages indexed; each query {RUNS} times in-process (page of 20 + total):"
    );
    for text in QUERIES {
        let (rows, total) = search_page(&store, text).await?;
        if rows == 0 {
            bail!("{text} matched nothing: the data set does not exercise it");
        }
        let mut times = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let start = Instant::now();
            search_page(&store, text).await?;
            times.push(start.elapsed());
        }
        times.sort();
        println!(
            "  {text:<40} {total:>6} match  p50 {:>6.2} ms  p95 {:>6.2} ms",
            super::percentile(&times, 0.5),
            super::percentile(&times, 0.95)
        );
    }
    store.close().await;
    super::mcp::serve_and_time(bin, home, &QUERIES)
        .await
        .context("MCP over the same index")
}
