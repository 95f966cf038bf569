//! The team scenario at a small size, so its code path keeps working: one Dovecot with 100
//! users of 50 messages, two `serve` nodes on one PostgreSQL. Every first sync is done through
//! the nodes, both watch some of the accounts and together all of them, an arrival in each of
//! ten accounts is searchable through either node, and when one node is killed outright the
//! other watches every account and finds arrivals in those it took over. `scripts/bench team`
//! runs it at a thousand accounts and times it (BENCHMARKS.md).

mod common;

use std::time::Duration;

use common::mcp::{HTTP_TOKEN, http_session};
use common::serve::{Serve, arrives, watched_by, within};
use common::{Team, server};
use mailbroker_testkit::{ImapClient, message};

const ACCOUNTS: usize = 100;
const PER_ACCOUNT: usize = 50;
/// The nodes' takeover time, shorter than the default's 30 s to keep the test short.
const TAKEOVER: u64 = 10;

fn account(n: usize) -> String {
    format!("t{n}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_accounts_on_two_nodes_are_synced_watched_and_taken_over() {
    let Some(dovecot) = server() else {
        return;
    };
    let Some(team) = Team::postgres() else {
        return;
    };
    let h = team.third();
    let user = |n: usize| format!("team-{n}");
    for n in 0..ACCOUNTS {
        let mail = (0..PER_ACCOUNT).map(|i| {
            let subject = format!("Report {i} of {}", user(n));
            message(n * 1000 + i, "colleague@example.test", &subject, "figures")
        });
        dovecot.import_messages(&user(n), mail).unwrap();
        common::add_account(dovecot, h, &account(n), &user(n), &[]);
    }
    // A node whose open files could not hold every account's connections refuses to start.
    let refused = common::mb_open_files(team.node(0), &["serve", "--http", "127.0.0.1:0"], 300);
    assert_ne!(refused.code, 0, "{}", refused.stdout);
    assert_eq!(
        refused.json["error_type"], "limit_exceeded",
        "{}",
        refused.stdout
    );
    assert!(
        refused.json["next_step"]
            .as_str()
            .unwrap()
            .contains("ulimit -n")
    );

    let takeover = TAKEOVER.to_string();
    let args = ["--takeover", takeover.as_str(), "--first-syncs", "4"];
    let mut first = Serve::start_with(team.node(0), &args);
    let second = Serve::start_with(team.node(1), &args);
    let all: Vec<String> = (0..ACCOUNTS).map(account).collect();

    // Every first sync is done by the nodes, and between them they watch every account.
    let synced = || async {
        let status = common::ok(h, &["serve", "status"]);
        let accounts = &status["serve"]["accounts"];
        all.iter().all(|a| accounts[a]["last_sync_at"].is_i64())
    };
    within(Duration::from_secs(300), "every first sync", synced).await;
    let spread = || async {
        let nodes = watched_by(h);
        let mut union: Vec<String> = nodes.iter().flat_map(|(_, a)| a.clone()).collect();
        union.sort_by_key(|a| a[1..].parse::<usize>().unwrap_or(usize::MAX));
        nodes.len() == 2 && nodes.iter().all(|(_, a)| !a.is_empty()) && union == all
    };
    within(Duration::from_secs(60), "both nodes watching", spread).await;
    let total = common::ok(h, &["search", "subject:Report"])["total"].clone();
    assert_eq!(
        total,
        (ACCOUNTS * PER_ACCOUNT) as u64,
        "every message indexed"
    );

    let sessions = [
        http_session(&first.url, HTTP_TOKEN).await,
        http_session(&second.url, HTTP_TOKEN).await,
    ];
    for n in (0..ACCOUNTS).step_by(ACCOUNTS / 10) {
        let mut other = ImapClient::connect(dovecot, &user(n)).await.unwrap();
        arrives(
            &mut other,
            &sessions[n % 2],
            &format!("Arrival in {}", user(n)),
        )
        .await;
    }

    // The first node dies outright: the second takes every account over.
    let (_, lost) = (watched_by(h).into_iter())
        .find(|(pid, _)| Some(*pid) == first.pid())
        .expect("the first node watches some accounts");
    first.kill();
    let one_node = || async {
        matches!(watched_by(h).as_slice(), [(_, accounts)] if accounts.len() == ACCOUNTS)
    };
    within(
        Duration::from_secs(TAKEOVER + 20),
        "one node with all",
        one_node,
    )
    .await;
    for name in lost.iter().take(5) {
        let n: usize = name[1..].parse().unwrap();
        let mut other = ImapClient::connect(dovecot, &user(n)).await.unwrap();
        arrives(&mut other, &sessions[1], &format!("Taken over {name}")).await;
    }
    for session in sessions {
        session.cancel().await.ok();
    }
    drop(second);
}
