//! Gmail sync under pressure, against the Gmail mock: rate limits narrow the number of reads
//! in flight only for a while, and a first sync that was killed resumes from what it had
//! indexed instead of fetching everything again.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::gmail::{add_account, control};
use common::ok;
use mailbroker_mock_gmail::{GmailMock, Logged};
use serde_json::json;

/// The metadata GETs the mock answered 200, in order.
fn metadata_gets(log: &[Logged]) -> Vec<&Logged> {
    log.iter()
        .filter(|r| r.method == "GET" && r.path.contains("/messages/") && r.status == 200)
        .collect()
}

/// `mailbroker sync` for `home`, started in the background.
fn start_sync(home: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_mailbroker"))
        .arg("--home")
        .arg(home)
        .args(["--json", "sync"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mailbroker sync")
}

/// Waits until the mock has answered `n` metadata GETs.
async fn until_fetched(mock: &GmailMock, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while metadata_gets(&mock.requests()).len() < n {
        assert!(
            Instant::now() < deadline,
            "the sync did not get to {n} messages"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_narrow_the_reads_in_flight_only_for_a_while() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    mock.seed(1500, &["INBOX"], None);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path(), "g", &[]).await;
    let from = mock.requests().len();
    // A third of all calls answer 429 at first, then none.
    control(
        &mock,
        "faults",
        json!({ "rate_limit": 0.33, "retry_after_secs": 0 }),
    )
    .await;
    let mut sync = start_sync(home.path());
    until_fetched(&mock, 250).await;
    control(&mock, "faults", json!({ "latency_ms": 5 })).await;
    let status = tokio::task::spawn_blocking(move || sync.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
    let log = mock.requests().split_off(from);
    assert!(log.iter().any(|r| r.status == 429), "no rate limit was met");
    // The tail of the first batch of 500, long after the limits stopped: the reads in
    // flight are back up (a window that only ever shrank would still be at one).
    let gets = metadata_gets(&log);
    let tail = gets[400..500].iter().map(|r| r.in_flight).max().unwrap();
    assert!(
        tail >= 6,
        "at most {tail} reads in flight after the rate limits ended"
    );
    assert_eq!(
        ok(home.path(), &["search", "--limit", "10000", "in:inbox"])["messages"]
            .as_array()
            .unwrap()
            .len(),
        1500
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_first_sync_resumes_where_it_stopped() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    mock.seed(3000, &["INBOX", "UNREAD"], None);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path(), "g", &[]).await;
    let mut first = start_sync(home.path());
    // Messages are indexed 500 at a time, the last batch's write still under way when the
    // next is fetched: by 2,100 fetched, at least 1,500 are indexed for sure.
    until_fetched(&mock, 2100).await;
    first.kill().unwrap();
    first.wait().unwrap();
    // Meanwhile another client archives a message the killed sync had indexed, and one
    // arrives.
    let early = mock.ids_with(Some("INBOX"))[0].clone();
    control(
        &mock,
        "modify",
        json!({ "ids": [early], "add": [], "remove": ["INBOX"] }),
    )
    .await;
    mock.seed(1, &["INBOX", "UNREAD"], None);

    let before = metadata_gets(&mock.requests()).len();
    let resumed = ok(home.path(), &["sync"]);
    let fetched = metadata_gets(&mock.requests()).len() - before;
    assert!(
        fetched < 1600,
        "the resumed sync fetched {fetched} messages again: {resumed}"
    );
    let count = |q: &str| {
        ok(home.path(), &["search", "--limit", "10000", q])["messages"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(count("in:inbox"), 3000, "{resumed}");
    assert_eq!(count("in:archive"), 1);
    // And the next sync is incremental again.
    let next = ok(home.path(), &["sync"]);
    assert_eq!(
        common::mailbox_report(&next, "INBOX")["mode"],
        "unchanged",
        "{next}"
    );
}
