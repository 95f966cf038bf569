//! `bench graph --messages N`: a Microsoft account on the Graph mock behind the 20 ms
//! round-trip proxy: the first sync, then one category added to N messages (requests counted
//! from the mock's log: `$batch` calls that wrote, read-backs, delta pages, the rest; the goal being ≤ 520
//! requests for the writes of 10,000 edits), the same request again, and one PATCH per
//! message through the same proxy for comparison.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use mailbroker_mock_graph::{GraphMock, Logged};
use mailbroker_testkit::{Proxy, oauth};
use serde_json::json;

fn summary(log: &[Logged]) -> String {
    let batches = log.iter().filter(|r| r.inner.is_some()).count();
    let writing = log
        .iter()
        .filter(|r| r.inner.is_some() && r.writes > 0)
        .count();
    let deltas = log
        .iter()
        .filter(|r| r.path.contains("/messages/delta"))
        .count();
    format!(
        "{} requests: {writing} $batch calls that wrote, {} other $batch calls (read-backs), {deltas} delta pages, {} other single requests",
        log.len(),
        batches - writing,
        log.len() - batches - deltas
    )
}

pub async fn bench_graph(n: usize) -> Result<()> {
    let bin = super::mailbroker_binary()?;
    let mock = GraphMock::start("bench@mock.example").await?;
    let ids = mock.seed(n, "inbox", "news@shop.example", true);
    let port: u16 = mock.url.rsplit(':').next().context("mock port")?.parse()?;
    let proxy = Proxy::start(port, super::ONE_WAY)?;
    let url = format!("http://127.0.0.1:{}", proxy.port);
    let home = tempfile::tempdir()?;
    let add = [
        "account",
        "add",
        "graph",
        "--id",
        "m",
        "--client-id",
        "bench",
    ];
    let endpoints = ["--graph-base", url.as_str(), "--authority", url.as_str()];
    let all: Vec<&str> = add.iter().chain(&endpoints).copied().collect();
    let added = oauth::with_device_code(&bin, home.path(), &all, &mock.url).await?;
    if !added.output.status.success() {
        bail!("account add graph failed: {}", added.stderr);
    }

    let (sync, sync_log) = super::logged(|| mock.requests(), &bin, home.path(), &["sync"])?;
    let ((write, write_log), (again, again_log)) =
        super::tag_inbox_twice(|| mock.requests(), &bin, home.path(), (n, "Bench"))?;

    // The per-message route: one PATCH per message, through the same proxy.
    let token = mock.token();
    let http = reqwest::Client::new();
    let sample = &ids[..ids.len().min(200)];
    let start = Instant::now();
    for id in sample {
        http.patch(format!("{url}/v1.0/me/messages/{id}"))
            .bearer_auth(&token)
            .json(&json!({ "isRead": true }))
            .send()
            .await?
            .error_for_status()?;
    }
    let loop_time = start.elapsed();
    let runs = [
        super::CloudRun::new("first sync", &sync, summary(&sync_log)),
        super::CloudRun::new(
            format!("add a category to {n}"),
            &write,
            summary(&write_log),
        ),
        super::CloudRun::new("same request again", &again, summary(&again_log)),
    ];
    let per_message = ("per-message PATCH", loop_time, sample.len());
    super::print_cloud("Graph", n, &runs, 1, per_message);
    Ok(())
}
