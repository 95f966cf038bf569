//! `bench gmail --messages N`: a Gmail account on the Gmail mock behind the 20 ms round-trip
//! proxy: first sync, then one label added to N messages (API requests counted from the mock's
//! log, the goal being ≤ 12 per 10,000 edits), the same request again, and the per-message
//! `messages.modify` loop through the same proxy for comparison.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use mailbroker_mock_gmail::{GmailMock, Logged, SCOPE_MODIFY};
use mailbroker_testkit::{Proxy, oauth};
use serde_json::json;

/// Quota units per call (Google's published table).
fn units(r: &Logged) -> u64 {
    let p = r.path.as_str();
    match () {
        _ if p.ends_with("/batchModify") || p.ends_with("/batchDelete") => 50,
        _ if p.ends_with("/history") => 2,
        _ if p.ends_with("/labels") || p.ends_with("/profile") => 1,
        _ => 5,
    }
}

fn summary(log: &[Logged]) -> String {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for r in log {
        let name = r.path.rsplit('/').next().unwrap_or("").to_string();
        let name = if name.len() == 16 {
            "messages/{id}".into()
        } else {
            name
        };
        *by.entry(format!("{} {name}", r.method)).or_default() += 1;
    }
    let units: u64 = log.iter().map(units).sum();
    format!("{} requests, {units} quota units: {by:?}", log.len())
}

pub async fn bench_gmail(n: usize) -> Result<()> {
    let bin = super::mailbroker_binary()?;
    let mock = GmailMock::start("bench@mock.example").await?;
    mock.seed(n, &["INBOX", "UNREAD"], None);
    // A label that exists before the write (the common case: tagging with a known label).
    mock.seed(1, &["Bench"], None);
    let port: u16 = mock.url.rsplit(':').next().context("mock port")?.parse()?;
    let proxy = Proxy::start(port, super::ONE_WAY)?;
    let api = format!("http://127.0.0.1:{}", proxy.port);
    let home = tempfile::tempdir()?;
    let add = ["account", "add", "gmail", "--id", "g", "--quota", "1000000"];
    let added = oauth::with_browser(
        &bin,
        home.path(),
        &oauth::mock_args(home.path(), &api, &add),
    )
    .await?;
    if !added.output.status.success() {
        bail!("account add failed: {}", added.stderr);
    }

    let (sync, sync_log) = super::logged(|| mock.requests(), &bin, home.path(), &["sync"])?;
    let ((write, write_log), (again, again_log)) =
        super::tag_inbox_twice(|| mock.requests(), &bin, home.path(), (n, "Bench"))?;
    let new_label = [
        "update",
        "--query",
        "in:inbox",
        "--add-tag",
        "Fresh",
        "--yes",
    ];
    let (fresh, fresh_log) = super::logged(|| mock.requests(), &bin, home.path(), &new_label)?;

    // The per-message route: one messages.modify per message, through the same proxy.
    let token = mock.token(&[SCOPE_MODIFY]);
    let ids: Vec<String> = mock.ids_with(Some("INBOX")).into_iter().take(200).collect();
    let start = Instant::now();
    let http = reqwest::Client::new();
    for id in &ids {
        http.post(format!("{api}/gmail/v1/users/me/messages/{id}/modify"))
            .bearer_auth(&token)
            .json(&json!({ "removeLabelIds": ["UNREAD"] }))
            .send()
            .await?
            .error_for_status()?;
    }
    let loop_time = start.elapsed();
    let runs = [
        super::CloudRun::new("first sync", &sync, summary(&sync_log)),
        super::CloudRun::new(format!("add a label to {n}"), &write, summary(&write_log)),
        super::CloudRun::new(
            format!("add a label Gmail does not have yet to {n}"),
            &fresh,
            summary(&fresh_log),
        ),
        super::CloudRun::new("same request again", &again, summary(&again_log)),
    ];
    let per_message = ("per-message messages.modify", loop_time, ids.len());
    super::print_cloud("Gmail", n, &runs, 1, per_message);
    Ok(())
}
