//! Moves whose targets are not where the index says: a rerun after a lost MOVE answer, a
//! message expunged or moved by another client before or during the move. Each is reported
//! per message; none fails the batch or is reported `verification_failed`.

mod common;

use std::time::Duration;

use common::{mb, ok, server};
use mailbroker_testkit::{ImapClient, Proxy, message};

const MOVE_ALL: [&str; 7] = [
    "update",
    "--query",
    "in:inbox",
    "--move-to",
    "Archive",
    "--yes",
    "--json",
];

/// Four messages in INBOX for `user`, reached through a proxy as account "m" (added with
/// `extra` arguments), synced.
async fn four_through_proxy_with(
    user: &str,
    extra: &[&str],
) -> Option<(tempfile::TempDir, ImapClient, Proxy)> {
    let server = server()?;
    let mut client = ImapClient::connect(server, user).await.unwrap();
    for i in 0..4 {
        let body = message(i, "hal@example.test", &format!("Move {i}"), "text");
        client.append("INBOX", "", &body).await.unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    let proxy = Proxy::start(server.imap_port, Duration::ZERO).unwrap();
    let mut args = common::add_args("m", "127.0.0.1", proxy.port, user);
    args.extend(["--tls", "none"].iter().chain(extra).map(|a| a.to_string()));
    let added = common::mb_args(home.path(), &args);
    assert_eq!(
        added.code, 0,
        "account add through the proxy: {}",
        added.stdout
    );
    ok(home.path(), &["sync"]);
    Some((home, client, proxy))
}

async fn four_through_proxy(user: &str) -> Option<(tempfile::TempDir, ImapClient, Proxy)> {
    four_through_proxy_with(user, &[]).await
}

/// Runs `args` in the background until the proxy holds the command matching `pattern`.
async fn held(
    home: &std::path::Path,
    proxy: &Proxy,
    pattern: &str,
    args: &'static [&'static str],
) -> tokio::task::JoinHandle<common::Run> {
    proxy.hold_at(pattern);
    let dir = home.to_path_buf();
    let run = tokio::task::spawn_blocking(move || mb(&dir, args));
    common::until_held(proxy, pattern).await;
    run
}

/// The failures of a change report, as (error_type, outcome) pairs.
fn failure_kinds(json: &serde_json::Value) -> Vec<(String, String)> {
    json["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let text = |k: &str| f[k].as_str().unwrap_or_default().to_string();
            (text("error_type"), text("outcome"))
        })
        .collect()
}

#[tokio::test]
async fn a_rerun_after_a_lost_move_answer_finds_the_messages_moved() {
    let Some((home, mut client, proxy)) = four_through_proxy("mv-lost").await else {
        return;
    };
    proxy.cut_after("UID MOVE");
    let first = mb(home.path(), &MOVE_ALL);
    assert_eq!(first.code, 5, "{}", first.stdout);
    assert_eq!(first.json["failed"], 0, "{}", first.stdout);
    assert_eq!(first.json["unknown"], 4, "{}", first.stdout);
    assert_eq!(client.flags("Archive").await.unwrap().len(), 4);

    proxy.take_sent();
    let rerun = mb(home.path(), &MOVE_ALL);
    assert_eq!(rerun.code, 0, "{}", rerun.stdout);
    assert_eq!(rerun.json["failed"], 0, "{}", rerun.stdout);
    assert_eq!(rerun.json["unknown"], 0, "{}", rerun.stdout);
    assert_eq!(rerun.json["unchanged"], 4, "{}", rerun.stdout);
    let sent = proxy.take_sent();
    assert!(!sent.contains("UID MOVE"), "moved again: {sent}");
    let archived = ok(home.path(), &["search", "in:archive"]);
    assert_eq!(
        archived["messages"].as_array().unwrap().len(),
        4,
        "{archived}"
    );
    assert!(
        ok(home.path(), &["search", "in:inbox"])["messages"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_message_expunged_elsewhere_before_the_move_is_stale() {
    let Some((home, mut client, _proxy)) = four_through_proxy("mv-gone").await else {
        return;
    };
    client.expunge("INBOX", &[2]).await.unwrap();
    let run = mb(home.path(), &MOVE_ALL);
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.json["applied"], 3, "{}", run.stdout);
    assert_eq!(run.json["stale"], 1, "{}", run.stdout);
    assert_eq!(
        failure_kinds(&run.json),
        [("stale_state".to_string(), "stale".to_string())]
    );
    assert_eq!(client.flags("Archive").await.unwrap().len(), 3);
}

#[tokio::test]
async fn concurrent_moves_and_expunges_during_a_move_are_reported_per_message() {
    let Some((home, mut client, proxy)) = four_through_proxy("mv-issued").await else {
        return;
    };
    let run = held(home.path(), &proxy, "UID MOVE", &MOVE_ALL).await;
    // While mailbroker's MOVE waits, another client expunges one target, moves one to Trash
    // (a conflicting move: mailbroker's loses, stale) and one where mailbroker moves it.
    // Dovecot then refuses the whole MOVE with NO [EXPUNGEISSUED]; the rest is moved again.
    client.expunge("INBOX", &[1]).await.unwrap();
    client.select("INBOX").await.unwrap();
    client.move_each(&[2], "Trash").await.unwrap();
    client.move_each(&[3], "Archive").await.unwrap();
    proxy.release();
    let run = run.await.unwrap();
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.json["applied"], 1, "{}", run.stdout);
    assert_eq!(run.json["unchanged"], 1, "{}", run.stdout);
    assert_eq!(run.json["stale"], 2, "{}", run.stdout);
    let kinds = failure_kinds(&run.json);
    assert!(
        kinds
            .iter()
            .all(|(t, o)| t == "stale_state" && o == "stale"),
        "{kinds:?}"
    );
    assert_eq!(client.flags("Archive").await.unwrap().len(), 2);
    let archived = ok(home.path(), &["search", "in:archive"]);
    assert_eq!(
        archived["messages"].as_array().unwrap().len(),
        2,
        "{archived}"
    );
}

/// A server without UIDPLUS answers a MOVE without COPYUID: it names no new UIDs. The moved
/// messages are found in the target by their Message-ID and reported moved (not
/// `verification_failed`), their index rows carry the UIDs they have there, and the move
/// undoes.
#[tokio::test]
async fn a_move_whose_answer_names_no_new_uids_is_found_and_reported_moved() {
    let no_uidplus = ["--disable-extension", "UIDPLUS"];
    let Some((home, mut client, proxy)) =
        four_through_proxy_with("mv-no-uidplus", &no_uidplus).await
    else {
        return;
    };
    proxy.strip_code("COPYUID");
    proxy.take_sent();

    let run = ok(home.path(), &MOVE_ALL[..6]);
    let sent = proxy.take_sent();
    assert!(sent.contains("UID MOVE"), "{sent}");
    assert_eq!(run["applied"], 4, "{run}");
    assert!(failure_kinds(&run).is_empty(), "{run}");
    let archive = client.flags("Archive").await.unwrap();
    assert_eq!(archive.len(), 4, "{archive:?}");
    let found = ok(home.path(), &["search", "in:archive"]);
    let mut indexed: Vec<u32> = found["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(common::uid_of)
        .collect();
    indexed.sort_unstable();
    assert_eq!(indexed, archive.keys().copied().collect::<Vec<_>>());

    let change = run["change_id"].as_i64().unwrap().to_string();
    let undone = ok(home.path(), &["undo", &change]);
    assert_eq!(undone["applied"], 4, "{undone}");
    assert_eq!(client.flags("INBOX").await.unwrap().len(), 4);
    assert!(client.flags("Archive").await.unwrap().is_empty());
    client.logout().await.unwrap();
}

/// Undoing a change that took mail out of the trash puts it back there. An update doing
/// that asks first; the undo carried no move role and ran unasked. It asks now, on the CLI
/// and over MCP alike, and runs once confirmed.
#[tokio::test]
async fn undo_into_the_trash_asks_as_the_update_would() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut client = ImapClient::connect(server, "mv-undo-trash").await.unwrap();
    for i in 0..3 {
        let body = message(i, "old@example.test", &format!("Binned {i}"), "x");
        client.append("Trash", "", &body).await.unwrap();
    }
    common::add_account(server, home.path(), "m", "mv-undo-trash", &[]);
    ok(home.path(), &["sync"]);
    let rescued = ok(
        home.path(),
        &["update", "--query", "in:trash", "--move-to", "inbox"],
    );
    assert_eq!(rescued["applied"], 3, "{rescued}");
    let change = rescued["change_id"].to_string();

    let asked = mb(home.path(), &["undo", &change]);
    assert_eq!(
        asked.json["error_type"], "confirmation_required",
        "{}",
        asked.stdout
    );
    let session = common::mcp::connect(
        home.path(),
        common::mcp::client(None, rmcp::model::ProtocolVersion::V_2025_11_25),
    )
    .await;
    let refused = common::mcp::err_call(
        &session,
        "undo_change",
        serde_json::json!({ "change_id": rescued["change_id"] }),
    )
    .await;
    assert_eq!(refused["error_type"], "confirmation_required", "{refused}");
    session.cancel().await.ok();
    assert_eq!(
        client.flags("INBOX").await.unwrap().len(),
        3,
        "nothing moved yet"
    );

    let undone = ok(home.path(), &["undo", &change, "--yes"]);
    assert_eq!(undone["applied"], 3, "{undone}");
    assert_eq!(client.flags("Trash").await.unwrap().len(), 3);
}

/// Senders choose Message-IDs, so two different messages can share one. A move of a
/// message another client had already expunged looked for it in the target by Message-ID
/// alone, and took whatever it found there: a stranger with the same Message-ID, or an
/// older copy the index already holds. Neither is claimed now: the message is reported
/// stale and no index row is moved onto another message.
#[tokio::test]
async fn a_shared_message_id_in_the_target_is_never_taken_for_the_moved_message() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut client = ImapClient::connect(server, "mv-dup-target").await.unwrap();
    let ours = message(7, "x@example.test", "Ours", "short");
    let stranger = message(
        7,
        "x@example.test",
        "Stranger",
        "a much longer body than ours",
    );
    client.append("INBOX", "", &ours).await.unwrap();
    client.append("Archive", "", &stranger).await.unwrap();
    client.append("Archive", "", &ours).await.unwrap();
    common::add_account(server, home.path(), "m", "mv-dup-target", &[]);
    ok(home.path(), &["sync"]);
    client.expunge("INBOX", &[1]).await.unwrap();

    let run = mb(
        home.path(),
        &[
            "update",
            "--query",
            "in:inbox subject:Ours",
            "--move-to",
            "Archive",
            "--yes",
        ],
    );
    assert_eq!(run.json["stale"], 1, "{}", run.stdout);
    assert_eq!(run.json["applied"], 0, "{}", run.stdout);
    assert_eq!(run.json["unchanged"], 0, "{}", run.stdout);
    let archive = ok(home.path(), &["search", "in:Archive"]);
    let mut remote: Vec<&str> = archive["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["remote_id"].as_str().unwrap())
        .collect();
    remote.sort_unstable();
    remote.dedup();
    assert_eq!(
        remote.len(),
        2,
        "each Archive message indexed once: {archive}"
    );
    assert_eq!(archive["total"], 2, "{archive}");
    // The next sync finds it gone.
    ok(home.path(), &["sync"]);
    assert_eq!(ok(home.path(), &["search", "in:inbox"])["total"], 0);
}

/// Two messages sharing a Message-ID moved by another client: the sync paired departures
/// and arrivals by Message-ID alone and could give each index row the other's place. It
/// pairs them by size too, and what it cannot tell apart it fetches again; either way every
/// indexed row shows the message the server has at its UID.
#[tokio::test]
async fn a_sync_never_swaps_two_moved_messages_that_share_a_message_id() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut client = ImapClient::connect(server, "mv-dup-sync").await.unwrap();
    client
        .append("INBOX", "", &message(9, "x@example.test", "Small", "s"))
        .await
        .unwrap();
    let long = "l".repeat(400);
    client
        .append("INBOX", "", &message(9, "x@example.test", "Large", &long))
        .await
        .unwrap();
    common::add_account(server, home.path(), "m", "mv-dup-sync", &[]);
    ok(home.path(), &["sync"]);
    client.select("INBOX").await.unwrap();
    client.move_each(&[1, 2], "Archive").await.unwrap();
    ok(home.path(), &["sync"]);
    // One MOVE each, in this order: Archive's UIDs hold Small, then Large.
    let server_side = ["Small", "Large"];
    let indexed = ok(home.path(), &["search", "in:Archive"]);
    let mut rows: Vec<(u32, String)> = indexed["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                common::uid_of(m),
                m["subject"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    rows.sort();
    let subjects: Vec<String> = rows.into_iter().map(|(_, s)| s).collect();
    assert_eq!(subjects, server_side);
}
