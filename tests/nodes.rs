//! Several `mailbroker serve` processes (nodes) of one index against a real Dovecot: they
//! share the accounts, each watched by exactly one, and one takes over what a killed one
//! watched; a write in flight on a killed node leaves a journal a rerun converges from; and a
//! CLI update racing both nodes' syncs of its account is journaled once and leaves every index
//! row as the server has it (the account's lease in the index keeps them from interleaving).
//! Each runs with the index on SQLite (one machine) and on PostgreSQL (three).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::mcp::{HTTP_TOKEN, http_session, ok_call};
use common::serve::{Serve, arrives, watched_by, within};
use common::{Team, mb, ok, server};
use mailbroker_testkit::{ImapClient, Proxy, message};
use serde_json::{Value, json};

/// Two `serve` processes of one index share its four accounts, each watched by exactly one
/// (as `serve status` shows from another process); an arrival on each is searchable through
/// either's MCP within 3 s. Killed outright, one leaves its accounts to the other within the
/// takeover time and 5 s, and arrivals on each are searchable again.
async fn two_nodes_share_the_accounts_and_one_takes_over_when_the_other_dies(team: Team) {
    let Some(dovecot) = server() else {
        return;
    };
    let h = team.third();
    let mut clients = Vec::new();
    for n in 0..4 {
        let user = format!("serve-node-{}-{n}", team.name());
        clients.push(ImapClient::connect(dovecot, &user).await.unwrap());
        common::add_account(dovecot, h, &format!("n{n}"), &user, &[]);
    }
    ok(h, &["sync"]);
    let mut first = Serve::start_with(team.node(0), &["--takeover", "2"]);
    let second = Serve::start_with(team.node(1), &["--takeover", "2"]);
    let all: Vec<String> = (0..4).map(|n| format!("n{n}")).collect();
    let spread = |nodes: &[(u64, Vec<String>)]| {
        let mut union: Vec<String> = nodes.iter().flat_map(|(_, a)| a.clone()).collect();
        union.sort();
        nodes.len() == 2 && nodes.iter().all(|(_, a)| a.len() == 2) && union == all
    };
    let started = std::time::Instant::now();
    while !spread(&watched_by(h)) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "four accounts on two nodes: not within 10 s: {:?}\n{}\n{}",
            watched_by(h),
            first.log(),
            second.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = ok(h, &["serve", "status"]);
    for account in &all {
        let seen = &status["serve"]["accounts"][account];
        assert!(seen["last_sync_at"].is_i64(), "{account} synced: {status}");
    }
    let sessions = [
        http_session(&first.url, HTTP_TOKEN).await,
        http_session(&second.url, HTTP_TOKEN).await,
    ];
    for (n, other) in clients.iter_mut().enumerate() {
        arrives(other, &sessions[n % 2], &format!("Shared {n}")).await;
    }

    first.kill();
    let taken = within(
        Duration::from_secs(2 + 5),
        "one node with all four",
        || async { matches!(watched_by(h).as_slice(), [(_, accounts)] if *accounts == all) },
    )
    .await;
    assert!(taken < Duration::from_secs(7));
    for (n, other) in clients.iter_mut().enumerate() {
        arrives(other, &sessions[1], &format!("Taken over {n}")).await;
    }
    for session in sessions {
        session.cancel().await.ok();
    }
    drop(second);
}

/// The one entry of the journal, and its items, as `changes` shows them from another process.
fn only_change(home: &std::path::Path) -> (Value, Vec<Value>) {
    let list = ok(home, &["changes"]);
    let changes = list["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "journaled once: {list}");
    (changes[0].clone(), items_of(home, &changes[0]))
}

/// The items of a journal entry as `changes ID` shows them.
fn items_of(home: &std::path::Path, change: &Value) -> Vec<Value> {
    let shown = ok(home, &["changes", &change["id"].to_string()]);
    shown["change"]["items"].as_array().unwrap().clone()
}

/// A write in flight on a node killed outright (its STORE sent, the answer not back) leaves
/// its change journaled, `interrupted` once its process is found gone (it stayed `executing`
/// for good), every item `unknown`. The other node takes the account
/// at once (the killed holder's process is gone from this host) and the same update through
/// it converges: nothing failed, every index row matches the server, and after a sync the
/// killed change's items are settled.
async fn a_write_in_flight_on_a_killed_node_leaves_a_journal_a_rerun_converges_from(team: Team) {
    let Some(dovecot) = server() else {
        return;
    };
    let user = &format!("nodes-killed-write-{}", team.name());
    let mut other = common::seed(dovecot, user, "INBOX", 20).await;
    let h = team.third();
    let proxy = Proxy::start(dovecot.imap_port, Duration::ZERO).unwrap();
    common::add_proxied(h, "p", proxy.port, user);
    ok(h, &["sync"]);
    // The rerun asks again for what the killed write may have changed: within one budget.
    let nodes = ["--takeover", "2", "--confirm-above", "50"];
    let mut first = Serve::start_with(team.node(0), &nodes);
    let second = Serve::start_with(team.node(1), &nodes);
    let on_first = Arc::new(http_session(&first.url, HTTP_TOKEN).await);
    let ids = common::mcp::ids(&on_first, "in:inbox").await;
    assert_eq!(ids.len(), 20);
    let before = other.flags("INBOX").await.unwrap();
    let to_flag = before
        .values()
        .filter(|f| !f.iter().any(|x| x == "\\Flagged"))
        .count();
    assert!(to_flag > 0 && to_flag < 20, "{before:?}");
    let request = json!({ "ids": ids, "flagged": true });
    proxy.hold_at("UID STORE");
    let caller = on_first.clone();
    let sent = request.clone();
    let update =
        tokio::spawn(async move { common::mcp::call(&caller, "update_message", sent).await });
    common::until_held(&proxy, "the update's STORE").await;
    first.kill();
    proxy.release();
    update.abort();

    // Its process is gone, so nothing more will be recorded for it: interrupted, not
    // executing forever.
    let (entry, items) = only_change(h);
    assert_eq!(entry["status"], "interrupted", "{entry}");
    assert_eq!(
        items.len(),
        to_flag,
        "an item per message to change: {entry}"
    );
    assert!(items.iter().all(|i| i["outcome"] == "unknown"), "{items:?}");

    let on_second = http_session(&second.url, HTTP_TOKEN).await;
    let rerun = tokio::time::timeout(
        Duration::from_secs(20),
        ok_call(&on_second, "update_message", request),
    )
    .await
    .expect("the killed node's lease held the account");
    let count = |k: &str| rerun[k].as_u64().unwrap_or(0);
    assert_eq!(count("failed"), 0, "{rerun}");
    assert_eq!(count("applied") + count("unchanged"), 20, "{rerun}");
    let on_server = other.flags("INBOX").await.unwrap();
    assert!(
        on_server
            .values()
            .all(|f| f.iter().any(|x| x == "\\Flagged")),
        "{on_server:?}"
    );
    assert_eq!(common::indexed_flags(h, "p", "INBOX"), on_server);

    ok(h, &["sync", "--account", "p"]);
    let list = ok(h, &["changes"]);
    let killed = list["changes"].as_array().unwrap().last().unwrap();
    let items = items_of(h, killed);
    assert!(
        items.iter().all(|i| i["outcome"] != "unknown"),
        "settled by the sync: {items:?}"
    );
    assert_eq!(killed["status"], "done", "nothing left unknown: {killed}");
    on_second.cancel().await.ok();
    drop(second);
}

/// A CLI update from another process, while one node syncs the account at each arrival and
/// the other is asked to sync it over and over: it succeeds, is journaled once, and every
/// index row of the account is as the server has it.
async fn a_cli_update_racing_both_nodes_syncs_is_journaled_once_and_the_index_matches(team: Team) {
    let Some(dovecot) = server() else {
        return;
    };
    let user = &format!("nodes-race-{}", team.name());
    let mut other = common::seed(dovecot, user, "INBOX", 200).await;
    let h = team.third().to_path_buf();
    common::add_account(dovecot, &h, "r", user, &[]);
    ok(&h, &["sync"]);
    let nodes = [
        Serve::start_with(team.node(0), &["--takeover", "2"]),
        Serve::start_with(team.node(1), &["--takeover", "2"]),
    ];
    within(Duration::from_secs(10), "a node watching r", || async {
        watched_by(&h).iter().any(|(_, a)| a == &["r"])
    })
    .await;
    let racing = Arc::new(AtomicBool::new(true));
    let mut arriving = ImapClient::connect(dovecot, user).await.unwrap();
    let arrivals = {
        let racing = racing.clone();
        tokio::spawn(async move {
            let mut n = 0;
            while racing.load(Ordering::Relaxed) {
                let body = message(500 + n, "x@example.test", &format!("Arrival {n}"), "b");
                arriving.append("INBOX", "", &body).await.unwrap();
                n += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            n
        })
    };
    let mut syncing = Vec::new();
    for node in &nodes {
        let (racing, session) = (racing.clone(), http_session(&node.url, HTTP_TOKEN).await);
        syncing.push(tokio::spawn(async move {
            let mut syncs = 0;
            while racing.load(Ordering::Relaxed) {
                ok_call(&session, "sync_accounts", json!({ "account": "r" })).await;
                syncs += 1;
            }
            session.cancel().await.ok();
            syncs
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let dir = h.clone();
    let update = tokio::task::spawn_blocking(move || {
        let query = "account:r from:alice";
        mb(
            &dir,
            &["update", "--query", query, "--add-tag", "Raced", "--yes"],
        )
    })
    .await
    .unwrap();
    racing.store(false, Ordering::Relaxed);
    let arrived = arrivals.await.unwrap();
    for task in syncing {
        assert!(task.await.unwrap() > 0, "each node synced the account");
    }
    assert_eq!(update.code, 0, "{}", update.stdout);
    assert_eq!(update.json["applied"], 100, "{}", update.stdout);
    assert_eq!(update.json["failed"], 0, "{}", update.stdout);
    let (entry, items) = only_change(&h);
    assert_eq!(entry["origin"], "cli", "{entry}");
    assert_eq!(items.len(), 100, "{entry}");

    let on_server = other.flags("INBOX").await.unwrap();
    assert_eq!(
        on_server.len(),
        200 + arrived,
        "every arrival reached the server"
    );
    let session = http_session(&nodes[0].url, HTTP_TOKEN).await;
    arrives(&mut other, &session, "Last one").await;
    let mut on_server = other.flags("INBOX").await.unwrap();
    let indexed = common::indexed_flags(&h, "r", "INBOX");
    on_server.retain(|uid, _| indexed.contains_key(uid));
    assert_eq!(indexed.len(), 200 + arrived + 1, "every arrival indexed");
    assert_eq!(indexed, on_server);
    session.cancel().await.ok();
}

/// Accounts never synced are synced first a given number at a time over all nodes
/// (`--first-syncs 1` here): the index never records two first syncs at once, every account's
/// is seen there, the waiting ones show `queued` in `serve status`, and all end synced.
async fn first_syncs_are_queued_across_the_nodes(team: Team) {
    let Some(dovecot) = server() else {
        return;
    };
    let h = team.third();
    let all: Vec<String> = (0..4).map(|n| format!("f{n}")).collect();
    for (n, account) in all.iter().enumerate() {
        let user = format!("nodes-first-{}-{n}", team.name());
        let bodies = (0..1500).map(|i| message(i, "bulk@example.test", &format!("Bulk {i}"), "b"));
        dovecot.import_messages(&user, bodies).unwrap();
        common::add_account(dovecot, h, account, &user, &[]);
    }
    let index = common::index_reader(h).await;
    let nodes = ["--takeover", "2", "--first-syncs", "1"];
    let _first = Serve::start_with(team.node(0), &nodes);
    let _second = Serve::start_with(team.node(1), &nodes);
    let (mut most, mut seen, mut queued) = (0, std::collections::BTreeSet::new(), false);
    let synced = || async {
        let status = mb(h, &["serve", "status"]).json;
        let accounts = &status["serve"]["accounts"];
        let waiting = all.iter().any(|a| accounts[a]["watching"] == "queued");
        let done = all.iter().all(|a| accounts[a]["last_sync_at"].is_i64());
        (waiting, done)
    };
    let started = std::time::Instant::now();
    for round in 0.. {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "first syncs never ended"
        );
        let running: Vec<String> = sqlx::query_scalar("SELECT account_id FROM first_syncs")
            .fetch_all(&index)
            .await
            .unwrap();
        most = most.max(running.len());
        seen.extend(running);
        if round % 20 == 0 {
            let (waiting, done) = synced().await;
            queued |= waiting;
            if done {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(most, 1, "first syncs at once over both nodes");
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        all,
        "each first sync was queued"
    );
    assert!(queued, "serve status showed an account queued");
    index.close().await;
}

/// A command that ends frees its account before it exits, rather than leaving its lease to
/// a process of another machine to wait out: after `sync` and `update`, no one holds it, and
/// each took it once (its fence counts the takes).
async fn a_command_frees_its_account_before_it_exits(team: Team) {
    let Some(dovecot) = server() else {
        return;
    };
    let user = &format!("nodes-frees-{}", team.name());
    common::seed(dovecot, user, "INBOX", 5).await;
    let h = team.third();
    common::add_account(dovecot, h, "a", user, &[]);
    let lease = || async {
        let index = common::index_reader(h).await;
        let row: (Option<String>, i64) =
            sqlx::query_as("SELECT holder, fence FROM account_leases WHERE account_id = 'a'")
                .fetch_one(&index)
                .await
                .unwrap();
        index.close().await;
        row
    };
    ok(h, &["sync"]);
    assert_eq!(lease().await, (None, 1), "after sync");
    let tagged = ok(
        h,
        &[
            "update",
            "--query",
            "account:a",
            "--add-tag",
            "Freed",
            "--yes",
        ],
    );
    assert_eq!(tagged["applied"], 5, "{tagged}");
    assert_eq!(lease().await, (None, 2), "after update");
}

/// Each scenario with the index on SQLite (the nodes and the CLI in one home) and on
/// PostgreSQL (each in a home of its own, one database URL: three machines of a team).
macro_rules! on_both_engines {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(Team::sqlite()).await;
                }
            )*
        }
        mod postgres {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let Some(team) = Team::postgres() else {
                        return;
                    };
                    super::$scenario(team).await;
                }
            )*
        }
    };
}

on_both_engines!(
    two_nodes_share_the_accounts_and_one_takes_over_when_the_other_dies,
    a_write_in_flight_on_a_killed_node_leaves_a_journal_a_rerun_converges_from,
    a_cli_update_racing_both_nodes_syncs_is_journaled_once_and_the_index_matches,
    first_syncs_are_queued_across_the_nodes,
    a_command_frees_its_account_before_it_exits,
);

/// After the database was stopped and started again, `serve status` listed an account under
/// two nodes for minutes while only one watched it: a node gave the account up, but its
/// watcher, still finishing, wrote the account back into the node's status; and a node whose
/// row another had removed as dead came back with an empty status it never wrote again. A
/// node lists only what its watchers hold; here, with the database down for longer than the
/// takeover time, every account is listed under exactly one node again soon after it is
/// back, none is ever listed twice, and mail arriving on each is searchable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_database_comes_back_each_account_is_listed_once() {
    let Some(dovecot) = server() else {
        return;
    };
    if !mailbroker_testkit::postgres::Postgres::available() {
        assert!(
            !mailbroker_testkit::postgres::required(),
            "CI=true but no PostgreSQL"
        );
        return;
    }
    let mut cluster = mailbroker_testkit::postgres::Postgres::start().unwrap();
    let url = cluster.database().unwrap();
    let homes: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    for home in &homes {
        common::on_postgres(home.path(), &url);
    }
    let h = homes[2].path();
    let mut clients = Vec::new();
    for n in 0..4 {
        let user = format!("serve-back-{n}");
        clients.push(ImapClient::connect(dovecot, &user).await.unwrap());
        common::add_account(dovecot, h, &format!("b{n}"), &user, &[]);
    }
    ok(h, &["sync"]);
    let nodes = [
        Serve::start_with(homes[0].path(), &["--takeover", "2"]),
        Serve::start_with(homes[1].path(), &["--takeover", "2"]),
    ];
    let all: Vec<String> = (0..4).map(|n| format!("b{n}")).collect();
    let once_each = |listed: &[(u64, Vec<String>)]| {
        let mut union: Vec<String> = listed.iter().flat_map(|(_, a)| a.clone()).collect();
        union.sort();
        union == all
    };
    within(
        Duration::from_secs(10),
        "four accounts, once each",
        || async { once_each(&watched_by(h)) },
    )
    .await;

    tokio::task::block_in_place(|| cluster.restart_after(Duration::from_secs(5))).unwrap();
    within(
        Duration::from_secs(20),
        "each account once after the restart",
        || async { once_each(&watched_by(h)) },
    )
    .await;
    // From now on no account is ever listed twice (one may be missing for a moment while it
    // passes from one node to the other, which catches it up before listing it).
    for _ in 0..20 {
        let listed = watched_by(h);
        let mut names: Vec<String> = listed.iter().flat_map(|(_, a)| a.clone()).collect();
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(
            names.len(),
            count,
            "{listed:?}\n{}\n{}",
            nodes[0].log(),
            nodes[1].log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    within(
        Duration::from_secs(20),
        "each account once, settled",
        || async { once_each(&watched_by(h)) },
    )
    .await;
    let session = http_session(&nodes[0].url, HTTP_TOKEN).await;
    for (n, other) in clients.iter_mut().enumerate() {
        arrives(other, &session, &format!("Back {n}")).await;
    }
    session.cancel().await.ok();
}
