//! `mailbroker serve` against a real Dovecot: changes made by another client are searchable
//! over MCP within seconds without `sync_accounts` (rmcp in this process, and the official
//! Python SDK), a write through MCP leaves IDLE resumed (seen on the server's side of a
//! proxy), a restarted Dovecot is reconnected to, and SIGTERM while an update is in flight
//! finishes that write, journals it, and exits 0 within 5 s. A write waits only for the
//! background sync's batch in flight, and the sync goes on after it without undoing it. An
//! announcement costs one sync; a server without IDLE is polled, as are JMAP without push
//! (changes), Gmail (history) and Graph (delta) accounts on their mocks, and a JMAP server
//! that pushes is synced at its event stream's announcements; a revoked account is
//! reported with its next step while the others stay fresh; SIGKILL mid-sync loses nothing
//! and the next start resumes by delta.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::mcp::{HTTP_TOKEN, Session, http_session, ok_call};
use common::serve::{Serve, arrives, found_once, total, within};
use common::{add_args, mb_args, ok, server};
use mailbroker_mock_gmail::GmailMock;
use mailbroker_mock_graph::GraphMock;
use mailbroker_testkit::oauth::control;
use mailbroker_testkit::{Dovecot, ImapClient, Proxy, message};
use serde_json::{Value, json};

/// Account "s" for a Dovecot user with three INBOX messages, through a proxy (to watch what
/// it sends), synced once.
async fn account(user: &str) -> Option<(tempfile::TempDir, ImapClient, Proxy)> {
    account_with(user, &[]).await
}

/// The same, added with these further `account add` options.
async fn account_with(
    user: &str,
    options: &[&str],
) -> Option<(tempfile::TempDir, ImapClient, Proxy)> {
    let dovecot = server()?;
    let mut other = ImapClient::connect(dovecot, user).await.unwrap();
    for i in 0..3 {
        other
            .append(
                "INBOX",
                "",
                &message(i, "a@example.test", &format!("Old {i}"), "b"),
            )
            .await
            .unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    let proxy = Proxy::start(dovecot.imap_port, Duration::ZERO).unwrap();
    let mut args = add_args("s", "127.0.0.1", proxy.port, user);
    args.extend(
        ["--tls", "none"]
            .iter()
            .chain(options)
            .map(|a| a.to_string()),
    );
    let added = mb_args(home.path(), &args);
    assert_eq!(added.code, 0, "account add: {}", added.stdout);
    ok(home.path(), &["sync"]);
    Some((home, other, proxy))
}

fn idles(sent: &str) -> usize {
    sent.lines().filter(|l| l.ends_with(" IDLE")).count()
}

/// What clients sent through the proxy until an IDLE was among it.
async fn until_idle(proxy: &Proxy, what: &str, limit: Duration) -> String {
    let mut sent = String::new();
    within(limit, what, || {
        sent.push_str(&proxy.take_sent());
        let idling = idles(&sent) > 0;
        async move { idling }
    })
    .await;
    sent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_elsewhere_are_searchable_within_seconds_and_idle_resumes_after_a_write() {
    let Some((home, mut other, proxy)) = account("serve-fresh").await else {
        return;
    };
    let mut serve = Serve::start(home.path());
    let session = http_session(&serve.url, HTTP_TOKEN).await;
    let mut sent = until_idle(&proxy, "IDLE", Duration::from_secs(10)).await;

    // Another client: a new message, and \Seen on an old one.
    other
        .append(
            "INBOX",
            "",
            &message(7, "new@example.test", "Fresh arrival", "b"),
        )
        .await
        .unwrap();
    other.select("INBOX").await.unwrap();
    other.store_set("1", "+FLAGS (\\Seen)").await.unwrap();
    let took = found_once(
        &session,
        "subject:\"Fresh arrival\"",
        Duration::from_secs(3),
    )
    .await;
    found_once(
        &session,
        "subject:\"Old 0\" is:read",
        Duration::from_secs(3),
    )
    .await;
    eprintln!("searchable after {took:?}");
    let accounts = ok_call(&session, "list_accounts", json!({})).await;
    assert_eq!(accounts["accounts"][0]["watching"], "idle", "{accounts}");
    assert!(accounts["accounts"][0]["last_sync_at"].is_string());

    // A write through MCP while IDLE is on: it succeeds, and IDLE is issued again after it.
    sent.push_str(&proxy.take_sent());
    let before = idles(&sent);
    let ids = common::mcp::ids(&session, "subject:\"Fresh arrival\"").await;
    let write = json!({ "ids": ids, "flagged": true });
    let changed = ok_call(&session, "update_message", write).await;
    assert_eq!(changed["applied"], 1, "{changed}");
    within(Duration::from_secs(5), "IDLE again after the write", || {
        sent.push_str(&proxy.take_sent());
        let resumed = idles(&sent) > before && sent.lines().any(|l| l.contains("UID STORE"));
        async move { resumed }
    })
    .await;
    let flagged = other.flags("INBOX").await.unwrap();
    assert!(flagged.values().any(|f| f.iter().any(|x| x == "\\Flagged")));

    session.cancel().await.unwrap();
    let (code, took) = serve.terminate();
    assert_eq!(code, Some(0), "{}", serve.log());
    assert!(took < Duration::from_secs(5), "stopped after {took:?}");
    let last = proxy.take_sent();
    assert!(last.contains("DONE") && last.contains("LOGOUT"), "{last}");
    let log = serve.log();
    assert!(
        log.lines()
            .any(|l| l.contains(" sync ") && l.contains("account")),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announcement_costs_one_sync_and_idle_follows_it_at_once() {
    let Some((home, mut other, proxy)) = account("serve-one-sync").await else {
        return;
    };
    let _serve = Serve::start(home.path());
    until_idle(&proxy, "IDLE", Duration::from_secs(10)).await;
    let body = message(50, "x@example.test", "Announced", "b");
    other.append("INBOX", "", &body).await.unwrap();
    let mut after = until_idle(&proxy, "IDLE after the sync", Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    after.push_str(&proxy.take_sent());
    let count = |command: &str| after.lines().filter(|l| l.contains(command)).count();
    // The sync's LIST-STATUS and SELECT, the EXAMINE that finds INBOX as the sync left it,
    // and IDLE: no second sync to make sure.
    assert_eq!(count(" LIST "), 1, "{after}");
    assert_eq!(count(" EXAMINE "), 1, "{after}");
    assert_eq!(idles(&after), 1, "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_idle_is_polled() {
    let options = ["--disable-extension", "IDLE"];
    let Some((home, mut other, proxy)) = account_with("serve-no-idle", &options).await else {
        return;
    };
    let serve = Serve::start_with(home.path(), &["--poll", "1"]);
    let session = http_session(&serve.url, HTTP_TOKEN).await;
    within(Duration::from_secs(10), "polling", || {
        let status = ok(home.path(), &["serve", "status"]);
        let polling = status["serve"]["accounts"]["s"]["watching"] == "polling";
        async move { polling }
    })
    .await;
    arrives(&mut other, &session, "Polled arrival").await;
    let sent = proxy.take_sent();
    assert_eq!(idles(&sent), 0, "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gmail_and_graph_accounts_are_polled_by_history_and_delta() {
    let gmail = GmailMock::start("me@gmail.example").await.unwrap();
    let old = gmail.seed(3, &["INBOX"], Some("old@gmail.example"));
    let graph = GraphMock::start("me@mock.example").await.unwrap();
    let filed = graph.seed(2, "inbox", "old@graph.example", true);
    let home = tempfile::tempdir().unwrap();
    common::gmail::add_account(&gmail, home.path(), "g", &[]).await;
    common::graph::add_account(&graph, home.path()).await;
    let serve = Serve::start_with(home.path(), &["--poll", "1"]);
    let session = http_session(&serve.url, HTTP_TOKEN).await;

    // Other clients: a new message and a star in Gmail, a new message and a read in Graph.
    gmail.seed(1, &["INBOX"], Some("new@gmail.example"));
    let star = json!({ "ids": [old[0]], "add": ["STARRED"], "remove": [] });
    common::gmail::control(&gmail, "modify", star).await;
    graph.seed(1, "inbox", "new@graph.example", true);
    control(
        &graph.url,
        "modify",
        json!({"id": filed[0], "isRead": true}),
    )
    .await;
    for query in [
        "from:new@gmail.example",
        "from:old@gmail.example is:flagged",
        "from:new@graph.example",
        "from:old@graph.example is:read",
    ] {
        found_once(&session, query, Duration::from_secs(3)).await;
    }
    let accounts = ok_call(&session, "list_accounts", json!({})).await;
    for account in accounts["accounts"].as_array().unwrap() {
        assert_eq!(account["watching"], "polling", "{accounts}");
    }
}

/// A JMAP account (a real Cyrus, which answers its event stream with 204) is polled by
/// `Email/changes`: another client's new email and keyword are found within the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jmap_account_is_polled_by_its_changes() {
    let Some(cyrus) = mailbroker_testkit::cyrus::shared() else {
        return;
    };
    let user = "serve-jmap";
    cyrus.add_user(user).await.unwrap();
    let old = cyrus
        .seed(user, "Inbox", 2, "old@jmap.example", &[])
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let add = mailbroker_testkit::cyrus::account_add_args("j", &cyrus.url(), user, "MB_TEST_PW");
    assert_eq!(mb_args(home.path(), &add).code, 0);
    let serve = Serve::start_with(home.path(), &["--poll", "1"]);
    let session = http_session(&serve.url, HTTP_TOKEN).await;
    let query = "from:old@jmap.example";
    let synced = || async { total(&session, query).await == 2 };
    within(Duration::from_secs(10), "the first sync", synced).await;

    another_jmap_client(cyrus, user, &old[0], "jmap.example", &session).await;
    let accounts = ok_call(&session, "list_accounts", json!({})).await;
    assert_eq!(accounts["accounts"][0]["watching"], "polling", "{accounts}");
}

/// Another client of `user` adds an email from new@`domain` and flags `old` (from
/// old@`domain`); both are searchable within 3 s.
async fn another_jmap_client(
    cyrus: &mailbroker_testkit::cyrus::Cyrus,
    user: &str,
    old: &str,
    domain: &str,
    session: &Session,
) {
    let new = format!("new@{domain}");
    cyrus.seed(user, "Inbox", 1, &new, &[]).await.unwrap();
    let flag = json!({ "accountId": user, "update": { old: { "keywords/$flagged": true } } });
    cyrus
        .call(user, json!([["Email/set", flag, "f"]]))
        .await
        .unwrap();
    for query in [
        format!("from:{new}"),
        format!("from:old@{domain} is:flagged"),
    ] {
        found_once(session, &query, Duration::from_secs(3)).await;
    }
}

/// A JMAP server that pushes (a front for Cyrus with an event stream of its own): serve
/// waits on the stream, ignores the states it opens with (those the last sync reached), and
/// syncs when a new one comes, long before its 10-minute poll would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jmap_account_that_pushes_is_synced_when_its_event_stream_announces() {
    let Some(cyrus) = mailbroker_testkit::cyrus::shared() else {
        return;
    };
    let user = "serve-push";
    cyrus.add_user(user).await.unwrap();
    let old = cyrus
        .seed(user, "Inbox", 2, "old@push.example", &[])
        .await
        .unwrap();
    let front = mailbroker_testkit::jmap_push::PushFront::start(cyrus, user)
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let add = mailbroker_testkit::cyrus::account_add_args("p", &front.url(), user, "MB_TEST_PW");
    assert_eq!(mb_args(home.path(), &add).code, 0);
    let serve = Serve::start_with(home.path(), &["--poll", "600"]);
    let session = http_session(&serve.url, HTTP_TOKEN).await;
    let synced = || async { total(&session, "from:old@push.example").await == 2 };
    within(Duration::from_secs(10), "the first sync", synced).await;
    within(Duration::from_secs(5), "an event stream", || async {
        front.streams() > 0
    })
    .await;
    // The states a stream opens with are the synced ones: no sync follows them.
    let requests = front.api_requests();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        front.api_requests(),
        requests,
        "a sync ran without a change"
    );
    assert!(
        front.event_query().contains("types=Email,Mailbox"),
        "{}",
        front.event_query()
    );

    another_jmap_client(cyrus, user, &old[0], "push.example", &session).await;
    let accounts = ok_call(&session, "list_accounts", json!({})).await;
    assert_eq!(accounts["accounts"][0]["watching"], "idle", "{accounts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_sees_an_arrival_and_a_flag_change_without_syncing() {
    let Some(py) = common::mcp::python_sdk() else {
        return;
    };
    let Some((home, mut other, _proxy)) = account("serve-python").await else {
        return;
    };
    let serve = Serve::start(home.path());
    // Give the watcher its first sync and IDLE.
    tokio::time::sleep(Duration::from_millis(500)).await;
    other
        .append(
            "INBOX",
            "",
            &message(9, "py@example.test", "Seen by Python", "b"),
        )
        .await
        .unwrap();
    other.select("INBOX").await.unwrap();
    other.store_set("2", "+FLAGS (\\Seen)").await.unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve_client.py");
    let queries = ["subject:\"Seen by Python\"", "subject:\"Old 1\" is:read"];
    let args = json!({ "url": serve.url, "token": HTTP_TOKEN, "queries": queries,
        "within": 3.0 });
    let out = Command::new(py)
        .arg(script)
        .arg(args.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    for query in queries {
        assert!(seen["found"][query].is_number(), "{seen}");
    }
    assert_eq!(seen["tools_called"], json!(["search_messages"]), "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_dovecot_is_reconnected_to() {
    if server().is_none() {
        return;
    }
    let mut dovecot = Dovecot::start().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut args = add_args("r", "127.0.0.1", dovecot.imap_port, "serve-restart");
    args.extend(["--tls", "none"].map(String::from));
    assert_eq!(mb_args(home.path(), &args).code, 0);
    ok(home.path(), &["sync"]);
    let serve = Serve::start(home.path());
    let session = http_session(&serve.url, HTTP_TOKEN).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    dovecot.restart().unwrap();
    let mut other = ImapClient::connect(&dovecot, "serve-restart")
        .await
        .unwrap();
    other
        .append(
            "INBOX",
            "",
            &message(1, "r@example.test", "After restart", "b"),
        )
        .await
        .unwrap();
    found_once(
        &session,
        "subject:\"After restart\"",
        Duration::from_secs(20),
    )
    .await;
    let log = serve.log();
    assert!(
        log.contains("provider_unavailable"),
        "the lost connection was seen: {log}"
    );
}

/// Whether something stands next in line for the account (its lease's waiter in the index).
async fn someone_waits(home: &Path, account: &str) -> bool {
    let index = common::index_reader(home).await;
    let waiter: Option<Option<String>> =
        sqlx::query_scalar("SELECT waiter FROM account_leases WHERE account_id = $1")
            .bind(account)
            .fetch_optional(&index)
            .await
            .unwrap();
    index.close().await;
    waiter.flatten().is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_waits_for_the_sync_batch_in_flight_not_the_whole_sync() {
    let Some((home, mut other, proxy)) = account("serve-step-aside").await else {
        return;
    };
    for name in ["Alpha", "Beta"] {
        other.create(name).await.unwrap();
    }
    ok(home.path(), &["sync"]);
    let serve = Serve::start(home.path());
    let session = Arc::new(http_session(&serve.url, HTTP_TOKEN).await);
    until_idle(&proxy, "IDLE", Duration::from_secs(10)).await;
    // Mail for two other mailboxes, then an arrival IDLE announces: the sync it starts has
    // INBOX, Alpha and Beta to fetch, one after the other, and is held on its way to Alpha.
    for (i, name) in ["Alpha", "Beta"].iter().enumerate() {
        let body = message(20 + i, "x@example.test", &format!("{name} news"), "b");
        other.append(name, "", &body).await.unwrap();
    }
    proxy.hold_at("SELECT \"Alpha\"");
    let trigger = message(30, "x@example.test", "Trigger", "b");
    other.append("INBOX", "", &trigger).await.unwrap();
    common::until_held(&proxy, "the sync's SELECT of Alpha").await;

    let ids = common::mcp::ids(&session, "subject:\"Old 0\"").await;
    let caller = session.clone();
    let mut update = tokio::spawn(async move {
        let args = json!({ "ids": ids, "read": true });
        common::mcp::call(&caller, "update_message", args).await
    });
    within(
        Duration::from_secs(10),
        "the write waiting for the account",
        || someone_waits(home.path(), "s"),
    )
    .await;
    // Alpha's batch goes on; the sync then lets the write in before it selects Beta.
    proxy.hold_at("SELECT \"Beta\"");
    proxy.release();
    let answered = tokio::time::timeout(Duration::from_secs(20), &mut update).await;
    let Ok(answered) = answered else {
        update.abort();
        panic!(
            "the write waited behind the rest of the sync: {}",
            serve.log()
        );
    };
    let (failed, change) = answered.unwrap();
    assert!(!failed, "{change}");
    assert_eq!(change["applied"], 1, "{change}");
    common::until_held(&proxy, "the sync's SELECT of Beta, after the write").await;
    proxy.release();

    found_once(&session, "subject:\"Beta news\"", Duration::from_secs(5)).await;
    // The sync went on after the write without undoing it in the index.
    assert_eq!(total(&session, "subject:\"Old 0\" is:read").await, 1);
    assert_eq!(total(&session, "subject:\"Alpha news\"").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_account_is_reported_with_its_next_step_and_the_others_go_on() {
    let Some((home, mut other, _proxy)) = account("serve-revoked").await else {
        return;
    };
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    mock.seed(2, "inbox", "news@shop.example", true);
    common::graph::add_account(&mock, home.path()).await;
    let serve = Serve::start_with(home.path(), &["--poll", "1"]);
    let session = http_session(&serve.url, HTTP_TOKEN).await;
    let watching = |status: &Value, account: &str| status[account]["watching"].clone();
    let serve_status = || ok(home.path(), &["serve", "status"])["serve"].clone();
    within(Duration::from_secs(10), "both accounts watched", || {
        let status = serve_status()["accounts"].clone();
        let both = watching(&status, "s") == "idle" && watching(&status, "ms") == "polling";
        async move { both }
    })
    .await;

    // The person revokes the app's access: the next poll is refused.
    control(&mock.url, "revoke-all", json!({})).await;
    within(
        Duration::from_secs(10),
        "the revoked account reported",
        || {
            let status = serve_status()["accounts"].clone();
            let reported = watching(&status, "ms") == "error";
            async move { reported }
        },
    )
    .await;
    let status = serve_status()["accounts"].clone();
    assert_eq!(status["ms"]["error_type"], "auth_required", "{status}");
    assert_eq!(
        status["ms"]["next_step"], "run: mailbroker account login ms",
        "{status}"
    );
    assert_eq!(watching(&status, "s"), "idle", "{status}");
    // `mcp status` shows the same under serve's listener; so does `list_accounts`.
    let listeners = ok(home.path(), &["mcp", "status"]);
    let ms = &listeners["listeners"][0]["accounts"]["ms"];
    assert_eq!(ms["error_type"], "auth_required", "{listeners}");
    assert_eq!(ms["next_step"], "run: mailbroker account login ms");
    let accounts = ok_call(&session, "list_accounts", json!({})).await;
    let listed = accounts["accounts"].as_array().unwrap();
    let ms = listed.iter().find(|a| a["id"] == "ms").unwrap();
    assert_eq!(ms["watching"], "error", "{accounts}");
    assert!(
        ms["watch_error"]
            .to_string()
            .contains("mailbroker account login ms"),
        "{accounts}"
    );

    // The IMAP account goes on being kept fresh.
    arrives(&mut other, &session, "Still fresh").await;
    let log = serve.log();
    assert!(log.contains("auth_required"), "{log}");
    assert!(
        !log.contains("mock-at-") && !log.contains("mock-rt-"),
        "a token was logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_sync_loses_nothing_and_the_next_start_resumes_from_the_cursors() {
    let Some((home, mut other, proxy)) = account("serve-sigkill").await else {
        return;
    };
    let mut serve = Serve::start(home.path());
    until_idle(&proxy, "IDLE", Duration::from_secs(10)).await;
    proxy.hold_at("UID FETCH");
    let body = message(60, "x@example.test", "Killed mid-sync", "b");
    other.append("INBOX", "", &body).await.unwrap();
    common::until_held(&proxy, "the sync's FETCH").await;
    serve.kill();
    proxy.release();

    let serve = Serve::start(home.path());
    let session = http_session(&serve.url, HTTP_TOKEN).await;
    found_once(
        &session,
        "subject:\"Killed mid-sync\"",
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(total(&session, "subject:Old").await, 3, "nothing twice");
    // The sync's line is logged after its commit, which the search may see first.
    let logged = |l: &&str| l.contains(" sync ") && l.contains("mode=");
    within(Duration::from_secs(5), "the sync logged", || async {
        serve.log().lines().any(|l| logged(&l))
    })
    .await;
    let log = serve.log();
    let first = log.lines().find(logged).unwrap_or_default();
    assert!(
        !first.contains("mode=Full"),
        "resumed from the stored cursors: {log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_an_update_finishes_the_write_sent_and_journals_it() {
    let Some((home, mut other, proxy)) = account("serve-sigterm").await else {
        return;
    };
    let mut serve = Serve::start(home.path());
    let session = Arc::new(http_session(&serve.url, HTTP_TOKEN).await);
    let ids = common::mcp::ids(&session, "subject:Old").await;
    assert_eq!(ids.len(), 3);
    // The write's STORE reaches the server and its answer is held back: SIGTERM comes while
    // the write is in flight.
    proxy.hold_at("UID STORE");
    let caller = session.clone();
    let update = tokio::spawn(async move {
        let args = json!({ "ids": ids, "read": true });
        common::mcp::call(&caller, "update_message", args).await
    });
    common::until_held(&proxy, "the update's STORE").await;
    let sent = Instant::now();
    serve.signal();
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.release();
    let code = serve.wait();
    let change =
        stopped_with_the_change_journaled(&serve, (code, sent.elapsed()), update, home.path());
    assert_eq!(change["applied"], 3, "{change}");
    let flags = other.flags("INBOX").await.unwrap();
    assert!(
        flags.values().all(|f| f.iter().any(|x| x == "\\Seen")),
        "{flags:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_10000_message_update_leaves_a_consistent_journal() {
    let Some(dovecot) = server() else {
        return;
    };
    let user = "serve-sigterm-10k";
    let n = 10_000;
    let bodies = (0..n).map(|i| message(i, "bulk@example.test", &format!("Bulk {i}"), "b"));
    dovecot.import_messages(user, bodies).unwrap();
    let home = tempfile::tempdir().unwrap();
    let proxy = Proxy::start(dovecot.imap_port, Duration::ZERO).unwrap();
    common::add_proxied(home.path(), "big", proxy.port, user);
    ok(home.path(), &["sync"]);
    let mut serve = Serve::start(home.path());
    let accepting = common::mcp::client(
        Some(rmcp::model::ElicitationAction::Accept),
        rmcp::model::ProtocolVersion::V_2025_11_25,
    );
    let session =
        Arc::new(common::mcp::http_session_answering(&serve.url, HTTP_TOKEN, accepting).await);
    let caller = session.clone();
    let update = tokio::spawn(async move {
        let args = json!({ "query": "from:bulk", "read": true });
        common::mcp::call(&caller, "update_message", args).await
    });
    let mut sent = String::new();
    within(Duration::from_secs(120), "the update's STORE", || {
        sent.push_str(&proxy.take_sent());
        let storing = sent.lines().any(|l| l.contains("UID STORE"));
        async move { storing }
    })
    .await;
    let stopped = serve.terminate();
    let change = stopped_with_the_change_journaled(&serve, stopped, update, home.path());
    let count = |k: &str| change[k].as_u64().unwrap();
    assert_eq!(
        count("applied") + count("failed") + count("unchanged") + count("stale"),
        n as u64,
        "{change}"
    );
    let mut imap = ImapClient::connect(dovecot, user).await.unwrap();
    let seen = imap.uid_search("INBOX", "SEEN").await.unwrap().len() as u64;
    assert_eq!(
        seen,
        count("applied"),
        "the server shows what the journal says"
    );
}

/// Asserts `serve` exited 0 within 5 s; drops the client's call (its answer went with the
/// server: what counts is what was recorded) and returns the journaled change, done.
fn stopped_with_the_change_journaled(
    serve: &Serve,
    (code, took): (Option<i32>, Duration),
    call: tokio::task::JoinHandle<(bool, Value)>,
    home: &Path,
) -> Value {
    assert_eq!(code, Some(0), "{}", serve.log());
    assert!(took < Duration::from_secs(5), "stopped after {took:?}");
    call.abort();
    let changes = ok(home, &["changes"]);
    let change = changes["changes"][0].clone();
    assert_eq!(change["status"], "done", "{changes}");
    change
}

/// `serve status | head` panicked on the closed pipe (so did `mcp status` and `mcp config`):
/// the servers' reports kept the servers' way with SIGPIPE. Each ends quietly now when its
/// reader has gone, as any command does.
#[test]
fn reports_end_quietly_when_their_reader_has_gone() {
    let home = tempfile::tempdir().unwrap();
    common::ok(home.path(), &["account", "list"]);
    for args in [
        &["serve", "status"][..],
        &["mcp", "status"],
        &["mcp", "config"],
        &["serve", "status", "--json"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let ended = Command::new(env!("CARGO_BIN_EXE_mailbroker"))
            .arg("--home")
            .arg(home.path())
            .args(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&ended.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_ne!(ended.status.code(), Some(101), "{args:?}: {stderr}");
    }
}
