//! `bench jmap --messages N`: N emails in a private Cyrus's Inbox, reached through the 20 ms
//! round-trip proxy once as a JMAP account and once as an IMAP account (Cyrus's own imapd,
//! the same mail): each account's first sync, one keyword added to all N, and the same
//! request again, with the requests (JMAP, counted at the proxy) and commands (IMAP) each
//! took; and the protocol's floor for the JMAP write: the same `Email/set` calls sent raw
//! through the same proxy, without and with the read-back mailbroker sends with each.

use std::cell::RefCell;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use mailbroker_jmap::wire::{Call, Ids, PatchObject, QueryResponse, SetResponse, nth};
use mailbroker_jmap::{Auth, Client};
use mailbroker_testkit::Proxy;
use mailbroker_testkit::cyrus::{Cyrus, account_add_args};

use super::{CloudRun, Measured};

/// What clients sent through `proxy` since the last look, request by request: HTTP
/// request lines (a body ends without a newline, so they are found by their protocol
/// version), or IMAP command lines.
fn requests(proxy: &Proxy, seen: &RefCell<Vec<String>>) -> Vec<String> {
    let sent = proxy.take_sent();
    let found: Vec<String> = match sent.starts_with("GET ") || sent.starts_with("POST ") {
        true => sent
            .split_inclusive(" HTTP/1.1\n")
            .filter(|r| r.ends_with(" HTTP/1.1\n"))
            .map(str::to_string)
            .collect(),
        false => sent
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect(),
    };
    seen.borrow_mut().extend(found);
    seen.borrow().clone()
}

fn summary(kind: &str, requests: &[String], measured: &Measured) -> String {
    let json = &measured.json;
    let commands = json["commands"].as_u64();
    let split = match (json["provider_ms"].as_u64(), json["local_ms"].as_u64()) {
        (Some(server), Some(local)) => format!("; {server} ms with the server, {local} ms local"),
        _ => String::new(),
    };
    format!(
        "{} {kind} at the proxy (mailbroker counts {}){split}",
        requests.len(),
        commands
            .or(json["accounts"][0]["commands"].as_u64())
            .unwrap_or(0)
    )
}

/// One account's runs: its first sync, the keyword on all `n`, the same again; `kind` is
/// what the proxy counts (requests or commands).
fn runs(
    bin: &Path,
    home: &Path,
    (proxy, kind): (&Proxy, &str),
    (n, tag): (usize, &str),
) -> Result<Vec<String>> {
    let seen = RefCell::new(Vec::new());
    let log = || requests(proxy, &seen);
    let (sync, sync_log) = super::logged(log, bin, home, &["sync"])?;
    let ((write, write_log), (again, again_log)) =
        super::tag_inbox_twice(log, bin, home, (n, tag))?;
    let runs = [
        CloudRun::new("first sync", &sync, summary(kind, &sync_log, &sync)),
        CloudRun::new(
            format!("add a keyword to {n}"),
            &write,
            summary(kind, &write_log, &write),
        ),
        CloudRun::new(
            "same request again",
            &again,
            summary(kind, &again_log, &again),
        ),
    ];
    Ok(runs
        .iter()
        .map(|r| {
            format!(
                "{}: {:.2} s wall, {}",
                r.what,
                r.measured.wall.as_secs_f64(),
                r.requests
            )
        })
        .collect())
}

pub async fn bench_jmap(n: usize) -> Result<()> {
    let bin = super::mailbroker_binary()?;
    let cyrus = Cyrus::start().await?;
    let user = "bench";
    cyrus.add_user(user).await?;
    let started = std::time::Instant::now();
    cyrus
        .seed(user, "Inbox", n, "news@shop.example", &[])
        .await?;
    println!(
        "seeded {n} emails in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let jmap_proxy = Proxy::start(cyrus.port, super::ONE_WAY)?;
    let jmap_home = tempfile::tempdir()?;
    let url = format!("http://127.0.0.1:{}", jmap_proxy.port);
    let add = account_add_args("j", &url, user, "BENCH_PW");
    let add: Vec<&str> = add.iter().map(String::as_str).collect();
    super::run_mailbroker(&bin, jmap_home.path(), &add)?;
    let jmap = runs(
        &bin,
        jmap_home.path(),
        (&jmap_proxy, "requests"),
        (n, "BenchJmap"),
    )?;

    let imap_proxy = Proxy::start(cyrus.imap_port, super::ONE_WAY)?;
    let imap_home = tempfile::tempdir()?;
    let mut add =
        mailbroker_testkit::account_add_args("i", "127.0.0.1", imap_proxy.port, user, "BENCH_PW");
    add.extend(["--tls".into(), "none".into()]);
    let add: Vec<&str> = add.iter().map(String::as_str).collect();
    super::run_mailbroker(&bin, imap_home.path(), &add)?;
    let imap = runs(
        &bin,
        imap_home.path(),
        (&imap_proxy, "commands"),
        (n, "BenchImap"),
    )?;
    if jmap.is_empty() || imap.is_empty() {
        bail!("nothing measured");
    }
    let bare = floor(&url, user, "BenchRaw", false).await?;
    let read_back = floor(&url, user, "BenchRawGet", true).await?;

    println!(
        "Cyrus 3.6, {n} emails, each route through a {} ms round-trip proxy",
        2 * super::ONE_WAY.as_millis()
    );
    for (route, lines) in [("JMAP", &jmap), ("IMAP", &imap)] {
        for line in lines {
            println!("{route} {line}");
        }
    }
    for (what, (took, requests)) in [("Email/set", bare), ("Email/set + Email/get", read_back)] {
        println!(
            "JMAP floor, raw {what} of {n} in {requests} requests (after the session): {:.2} s",
            took.as_secs_f64()
        );
    }
    Ok(())
}

/// Adds `keyword` to every email of `user` with raw `Email/set` calls of the server's
/// `maxObjectsInSet` (each followed by an `Email/get` of the same emails when `read_back`);
/// the time and the requests, counted from the first `Email/set`.
async fn floor(url: &str, user: &str, keyword: &str, read_back: bool) -> Result<(Duration, u64)> {
    let auth = Auth::Basic {
        username: user.into(),
        password: mailbroker_testkit::PASSWORD.into(),
    };
    let mut client = Client::connect(url, auth, &Default::default()).await?;
    let mut ids: Vec<String> = Vec::new();
    loop {
        let query = Call::EmailQuery {
            position: ids.len(),
            limit: client.limits.max_objects_in_get,
        };
        let answers = client.call(vec![query]).await?;
        let page = nth::<QueryResponse>(&answers, 0, "Email/query")?.ids;
        if page.is_empty() {
            break;
        }
        ids.extend(page);
    }
    let before = client.sent();
    let started = Instant::now();
    for chunk in ids.chunks(client.limits.max_objects_in_set) {
        let mut patch = PatchObject::default();
        patch.keyword(keyword, true);
        let update = chunk.iter().map(|id| (id.clone(), patch.clone()));
        let mut calls = vec![Call::EmailUpdate(update.collect())];
        if read_back {
            calls.push(Call::EmailGet {
                ids: Ids::These(chunk.to_vec()),
                properties: &["keywords"],
            });
        }
        let answers = client.call(calls).await?;
        let set: SetResponse = nth(&answers, 0, "Email/set")?;
        if set.updated.len() != chunk.len() {
            bail!(
                "raw Email/set did not update every email: {:?}",
                set.not_updated
            );
        }
    }
    Ok((started.elapsed(), client.sent() - before))
}
