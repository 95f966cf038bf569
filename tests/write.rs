//! The write pipeline against a real Dovecot: patch semantics, idempotence, stale state,
//! move + undo, dry runs, validation before anything is sent, and a connection lost mid-write.

mod common;

use common::{add_account, mb, ok, server};
use mailbroker_testkit::{ImapClient, message};
use serde_json::Value;

fn ids(json: &Value) -> Vec<String> {
    json["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].to_string())
        .collect()
}

fn one_id(home: &std::path::Path, query: &str) -> String {
    let found = ids(&ok(home, &["search", query]));
    assert_eq!(found.len(), 1, "{query}: {found:?}");
    found[0].clone()
}

/// A user with three INBOX messages: 1 `\Seen \Flagged $Other`, 2 `\Seen $Invoice`, 3 none.
/// `None` (test skipped) when Dovecot is not installed outside CI.
async fn setup(user: &str) -> Option<(tempfile::TempDir, ImapClient)> {
    let server = server()?;
    let home = tempfile::tempdir().unwrap();
    let mut client = ImapClient::connect(server, user).await.unwrap();
    for (i, flags) in ["\\Seen \\Flagged $Other", "\\Seen $Invoice", ""]
        .iter()
        .enumerate()
    {
        let body = message(i, "alice@example.test", &format!("Note {i}"), "text");
        client.append("INBOX", flags, &body).await.unwrap();
    }
    add_account(server, home.path(), "w", user, &[]);
    ok(home.path(), &["sync"]);
    Some((home, client))
}

/// `setup`, then another client flags message 3 ("Note 2") after mailbroker indexed it.
/// Returns its id too.
async fn setup_with_note_2_flagged_elsewhere(
    user: &str,
) -> Option<(tempfile::TempDir, ImapClient, String)> {
    let (home, mut client) = setup(user).await?;
    let id = one_id(home.path(), "subject:\"Note 2\"");
    client
        .store("INBOX", 3, "+FLAGS", "\\Flagged")
        .await
        .unwrap();
    Some((home, client, id))
}

#[tokio::test]
async fn adding_a_tag_leaves_everything_else_alone() {
    let Some((home, mut client)) = setup("w-patch").await else {
        return;
    };
    let before = client.flags("INBOX").await.unwrap();
    let id = one_id(home.path(), "subject:\"Note 0\"");
    let report = ok(home.path(), &["update", &id, "--add-tag", "Work"]);
    assert_eq!(report["applied"], 1, "{report}");
    // LOGIN, SELECT, STORE, verifying FETCH, LOGOUT: the mailbox is as the sync left it, so
    // no precondition read is needed.
    assert_eq!(report["commands"], 5, "{report}");
    let after = client.flags("INBOX").await.unwrap();
    assert_eq!(
        after[&1],
        vec!["$Other", "Work", "\\Flagged", "\\Seen"],
        "server: {after:?}"
    );
    assert_eq!(after[&2], before[&2]);
    assert_eq!(after[&3], before[&3]);
    assert!(client.flags("Archive").await.unwrap().is_empty());
    // The index says what the server says.
    assert_eq!(common::indexed_flags(home.path(), "w", "INBOX"), after);
    // The mailbox has changed since the sync (by that write), so the next write reads what
    // changed since each target was indexed before it stores.
    let id = one_id(home.path(), "subject:\"Note 2\"");
    let report = ok(home.path(), &["update", &id, "--flag"]);
    assert_eq!(report["applied"], 1, "{report}");
    assert_eq!(report["commands"], 6, "{report}");
}

#[tokio::test]
async fn repeating_a_request_sends_nothing() {
    let Some((home, _client)) = setup("w-twice").await else {
        return;
    };
    let request = [
        "update",
        "--query",
        "in:inbox",
        "--add-tag",
        "$Triage",
        "--read",
    ];
    let first = ok(home.path(), &request);
    assert_eq!(first["applied"], 3, "{first}");
    assert!(first["commands"].as_u64().unwrap() > 0);
    let plan: Vec<&str> = first["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        plan.iter()
            .any(|l| l.contains("UID STORE") && l.contains("+FLAGS.SILENT")),
        "{plan:?}"
    );
    let second = ok(home.path(), &request);
    assert_eq!(second["applied"], 0, "{second}");
    assert_eq!(second["unchanged"], 3);
    assert_eq!(
        second["commands"], 0,
        "a repeated request must not talk to the server"
    );
    assert!(second["plan"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn a_concurrent_change_is_stale_and_not_overwritten() {
    let Some((home, mut client, id)) = setup_with_note_2_flagged_elsewhere("w-stale").await else {
        return;
    };
    let run = mb(
        home.path(),
        &["update", &id, "--add-tag", "Later", "--unflag"],
    );
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.json["stale"], 1, "{}", run.stdout);
    assert_eq!(run.json["failures"][0]["error_type"], "stale_state");
    let server_flags = client.flags("INBOX").await.unwrap();
    assert_eq!(
        server_flags[&3],
        vec!["\\Flagged"],
        "overwritten: {server_flags:?}"
    );
    // The index was refreshed from what the server showed.
    let shown = ok(home.path(), &["show", &id]);
    assert_eq!(shown["message"]["flagged"], true);
}

/// The journal entry and tag rows are written while the server works, as if every message
/// took the change; when one does not (here, stale), that entry is rolled back and the
/// change is journaled from the read-back: the stale message gets no tag in the index and
/// its journal line says stale.
#[tokio::test]
async fn a_mixed_outcome_is_journaled_from_the_read_back() {
    let Some((home, mut client, stale_id)) = setup_with_note_2_flagged_elsewhere("w-mixed").await
    else {
        return;
    };
    let run = mb(
        home.path(),
        &[
            "update",
            "--query",
            "from:alice",
            "--add-tag",
            "Mixed",
            "--yes",
        ],
    );
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.json["applied"], 2, "{}", run.stdout);
    assert_eq!(run.json["stale"], 1, "{}", run.stdout);
    let change = run.json["change_id"].as_i64().unwrap();

    let tagged = ids(&ok(home.path(), &["search", "tag:Mixed"]));
    assert_eq!(tagged.len(), 2, "{tagged:?}");
    assert!(!tagged.contains(&stale_id), "{tagged:?}");

    let server = client.flags("INBOX").await.unwrap();
    assert_eq!(server[&3], vec!["\\Flagged"], "{server:?}");

    let listed = ok(home.path(), &["changes"]);
    assert_eq!(listed["changes"].as_array().unwrap().len(), 1, "{listed}");
    let shown = ok(home.path(), &["changes", &change.to_string()]);
    for item in shown["change"]["items"].as_array().unwrap() {
        if item["message_id"] == stale_id.parse::<i64>().unwrap() {
            assert_eq!(item["outcome"], "stale", "{item}");
        } else {
            assert_eq!(item["outcome"], "applied", "{item}");
            let tags = item["after"]["tags"].as_array().unwrap();
            assert!(tags.iter().any(|t| t == "Mixed"), "{item}");
        }
    }

    // When every message takes the change, every line says applied.
    let run = mb(
        home.path(),
        &[
            "update",
            "--query",
            "from:alice",
            "--add-tag",
            "Whole",
            "--yes",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(run.json["applied"], 3, "{}", run.stdout);
    assert_eq!(ids(&ok(home.path(), &["search", "tag:Whole"])).len(), 3);
    // Its intent's items only changed their outcome: each reads as the read-back says.
    let change = run.json["change_id"].to_string();
    let shown = ok(home.path(), &["changes", &change]);
    assert_eq!(shown["change"]["status"], "done", "{shown}");
    for item in shown["change"]["items"].as_array().unwrap() {
        assert_eq!(item["outcome"], "applied", "{item}");
        assert!(item["error_type"].is_null(), "{item}");
        let tags = item["after"]["tags"].as_array().unwrap();
        assert!(tags.iter().any(|t| t == "Whole"), "{item}");
    }
    let server = client.flags("INBOX").await.unwrap();
    assert!(
        server.values().all(|f| f.contains(&"Whole".to_string())),
        "{server:?}"
    );
}

#[tokio::test]
async fn move_to_archive_and_undo() {
    let Some((home, mut client)) = setup("w-move").await else {
        return;
    };
    let id = one_id(home.path(), "subject:\"Note 1\"");
    let moved = ok(home.path(), &["update", &id, "--move-to", "archive"]);
    assert_eq!(moved["applied"], 1, "{moved}");
    assert!(!client.flags("INBOX").await.unwrap().contains_key(&2));
    let archive = client.flags("Archive").await.unwrap();
    assert_eq!(
        archive.values().next().unwrap(),
        &vec!["$Invoice", "\\Seen"]
    );
    // The same local id now points at the Archive copy.
    let shown = ok(home.path(), &["show", &id]);
    assert_eq!(shown["message"]["mailbox"], "Archive");

    let change = moved["change_id"].as_i64().unwrap().to_string();
    let undone = ok(home.path(), &["undo", &change]);
    assert_eq!(undone["applied"], 1, "{undone}");
    assert!(client.flags("Archive").await.unwrap().is_empty());
    let inbox = client.flags("INBOX").await.unwrap();
    assert_eq!(inbox.len(), 3);
    assert!(
        inbox.values().any(|f| f == &vec!["$Invoice", "\\Seen"]),
        "{inbox:?}"
    );
    assert_eq!(
        ok(home.path(), &["show", &id])["message"]["mailbox"],
        "INBOX"
    );

    let journal = ok(home.path(), &["changes"]);
    let list = journal["changes"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{journal}");
    assert_eq!(list[0]["undo_of"].as_i64().unwrap().to_string(), change);
    let detail = ok(home.path(), &["changes", &change]);
    assert_eq!(detail["change"]["items"][0]["before"]["mailbox"], "INBOX");
    assert_eq!(detail["change"]["items"][0]["after"]["mailbox"], "Archive");
    assert_eq!(detail["change"]["undone_by"], list[0]["id"], "{detail}");
    let text = common::mb_text(home.path(), &["changes"]);
    assert!(
        text.stdout
            .contains(&format!("undone by change {}", list[0]["id"])),
        "{}",
        text.stdout
    );
    let twice = common::mb(home.path(), &["undo", &change]);
    assert_eq!(twice.json["error_type"], "stale_state", "{}", twice.stdout);
    assert!(
        twice.json["next_step"]
            .as_str()
            .unwrap()
            .contains("mailbroker undo")
    );
}

/// Everything the index holds, as text, for before/after comparisons.
async fn dump(home: &std::path::Path) -> String {
    let pool = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}",
        home.join("index.sqlite3").display()
    ))
    .await
    .unwrap();
    // Every table, so a table added later cannot escape the comparison.
    let tables: Vec<(String,)> = sqlx::query_as(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
           AND name NOT LIKE 'messages_fts%' AND name NOT LIKE '_sqlx%' ORDER BY name",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(tables.iter().any(|(t,)| t == "message_state"), "{tables:?}");
    let mut out = String::new();
    for (table,) in tables {
        let rows: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT json_array(*) FROM (SELECT * FROM \"{table}\") ORDER BY 1"
        )))
        .fetch_all(&pool)
        .await
        .unwrap();
        out.push_str(&format!("{table}: {rows:?}\n"));
    }
    pool.close().await;
    out
}

#[tokio::test]
async fn a_dry_run_changes_nothing_anywhere() {
    let Some((home, mut client)) = setup("w-dry").await else {
        return;
    };
    let server_before = client.flags("INBOX").await.unwrap();
    let index_before = dump(home.path()).await;
    let report = ok(
        home.path(),
        &[
            "update",
            "--query",
            "in:inbox",
            "--add-tag",
            "X1",
            "--unread",
            "--move-to",
            "junk",
            "--dry-run",
        ],
    );
    assert_eq!(report["dry_run"], true);
    assert_eq!(report["planned"], 3, "{report}");
    assert_eq!(report["applied"], 0);
    assert!(report["change_id"].is_null());
    assert!(
        report["plan"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("UID MOVE")),
        "{report}"
    );
    assert_eq!(client.flags("INBOX").await.unwrap(), server_before);
    assert!(client.flags("Junk").await.unwrap().is_empty());
    assert_eq!(dump(home.path()).await, index_before);
}

/// Successful logins of `user` in Dovecot's log.
fn logins(user: &str) -> usize {
    let needle = format!("Login: user=<{user}>");
    server().unwrap().log().matches(&needle).count()
}

#[tokio::test]
async fn invalid_keywords_are_refused_before_anything_is_sent() {
    let Some((home, mut client)) = setup("w-invalid").await else {
        return;
    };
    let before = client.flags("INBOX").await.unwrap();
    let id = one_id(home.path(), "subject:\"Note 0\"");
    let long = "k".repeat(51);
    let logins_before = logins("w-invalid");
    // With --yes the sessions open while the targets are read: the checks come first.
    for yes in [&[][..], &["--yes"][..]] {
        for bad in ["two words", "par(en", "line\r\nbreak", long.as_str()] {
            let run = mb(
                home.path(),
                &[&["update", &id, "--add-tag", bad][..], yes].concat(),
            );
            assert_ne!(run.code, 0);
            assert_eq!(
                run.json["error_type"], "validation_error",
                "{bad:?} {yes:?}: {}",
                run.stdout
            );
        }
    }
    for invalid in [
        &["update", &id, "--add-tag", "A", "--remove-tag", "a"][..],
        &["update", &id][..],
        &["update", &id, "--move-to", "nowhere"][..],
        &[
            "update",
            &id,
            "--yes",
            "--add-tag",
            "A",
            "--remove-tag",
            "a",
        ][..],
        &["update", "--yes", &id][..],
        &["update", &id, "--yes", "--move-to", "nowhere"][..],
        &["update", &id, "999999", "--yes", "--add-tag", "A"][..],
    ] {
        let run = mb(home.path(), invalid);
        assert_ne!(run.code, 0, "{invalid:?}");
        let expected = if invalid.contains(&"nowhere") || invalid.contains(&"999999") {
            "not_found"
        } else {
            "validation_error"
        };
        assert_eq!(
            run.json["error_type"], expected,
            "{invalid:?}: {}",
            run.stdout
        );
    }
    assert_eq!(
        logins("w-invalid"),
        logins_before,
        "mailbroker logged in to the server"
    );
    assert_eq!(client.flags("INBOX").await.unwrap(), before);
}

/// Adds `user` as account `id` through a proxy in front of the test Dovecot (plain IMAP, no
/// added latency) and syncs it. The proxy can cut a connection and records what was sent.
fn add_account_through_proxy(
    server: &mailbroker_testkit::Dovecot,
    home: &std::path::Path,
    id: &str,
    user: &str,
) -> mailbroker_testkit::Proxy {
    let proxy =
        mailbroker_testkit::Proxy::start(server.imap_port, std::time::Duration::ZERO).unwrap();
    let mut args = common::add_args(id, "127.0.0.1", proxy.port, user);
    args.extend(["--tls", "none"].map(String::from));
    assert_eq!(common::mb_args(home, &args).code, 0);
    ok(home, &["sync"]);
    proxy
}

/// Tags every message of INBOX "Early", confirmed ahead.
const TAG_EARLY: [&str; 6] = [
    "update",
    "--query",
    "in:inbox",
    "--add-tag",
    "Early",
    "--yes",
];

/// A fresh account "a" for `user` with three untagged messages in INBOX, reached through a
/// proxy; `None` where the test server is missing outside CI.
async fn three_messages_through_proxy(
    user: &str,
) -> Option<(tempfile::TempDir, ImapClient, mailbroker_testkit::Proxy)> {
    let server = server()?;
    let home = tempfile::tempdir().unwrap();
    let mut client = ImapClient::connect(server, user).await.unwrap();
    for i in 0..3 {
        let body = message(i, "carol@example.test", &format!("Proxied {i}"), "text");
        client.append("INBOX", "", &body).await.unwrap();
    }
    let proxy = add_account_through_proxy(server, home.path(), "a", user);
    Some((home, client, proxy))
}

/// Tags the three messages again. Had the index kept a wrong modseq for any of them, the
/// precondition read would find it changed since it was indexed and leave it alone, stale.
fn next_change_finds_nothing_stale(home: &std::path::Path) {
    let later = ok(
        home,
        &[
            "update",
            "--query",
            "in:inbox",
            "--add-tag",
            "Later",
            "--yes",
        ],
    );
    assert_eq!(later["applied"], 3, "{later}");
    assert_eq!(later["stale"], 0, "{later}");
}

#[tokio::test]
async fn a_write_whose_answer_is_lost_is_unknown_and_a_rerun_converges() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let user = "w-lost";
    let mut client = ImapClient::connect(server, user).await.unwrap();
    for i in 0..4 {
        let body = message(i, "bob@example.test", &format!("Lost {i}"), "text");
        client
            .append("INBOX", if i == 0 { "\\Seen" } else { "" }, &body)
            .await
            .unwrap();
    }
    let proxy = add_account_through_proxy(server, home.path(), "p", user);

    // The STORE reaches the server, but its answer never comes back.
    proxy.cut_after("UID STORE");
    let run = mb(
        home.path(),
        &["update", "--query", "in:inbox", "--add-tag", "Kept"],
    );
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.json["applied"], 0, "{}", run.stdout);
    // It reached the server: not failed, but not known to have applied either.
    assert_eq!(run.json["failed"], 0, "{}", run.stdout);
    assert_eq!(run.json["unknown"], 4, "{}", run.stdout);
    assert_eq!(run.json["success"], false, "{}", run.stdout);
    assert_eq!(run.json["error_type"], "outcome_unknown", "{}", run.stdout);
    let failures = run.json["failures"].as_array().unwrap();
    assert!(
        failures
            .iter()
            .all(|f| f["error_type"] == "outcome_unknown" && f["outcome"] == "unknown"),
        "{}",
        run.stdout
    );
    let on_server = client.flags("INBOX").await.unwrap();
    assert!(
        on_server.values().all(|f| f.contains(&"Kept".to_string())),
        "{on_server:?}"
    );

    // Rerun: the server already shows the change, so nothing is stored again.
    let rerun = ok(
        home.path(),
        &["update", "--query", "in:inbox", "--add-tag", "Kept"],
    );
    assert_eq!(rerun["applied"], 0, "{rerun}");
    assert_eq!(rerun["unchanged"], 4, "{rerun}");
    assert_eq!(rerun["failed"], 0, "{rerun}");
    assert_eq!(rerun["unknown"], 0, "{rerun}");
    assert_eq!(
        common::indexed_flags(home.path(), "p", "INBOX"),
        client.flags("INBOX").await.unwrap()
    );
    // And now the index knows, so a third run does not even connect.
    let third = ok(
        home.path(),
        &["update", "--query", "in:inbox", "--add-tag", "Kept"],
    );
    assert_eq!(third["commands"], 0, "{third}");
}

/// `update --yes` opens its session while it reads the targets: one SELECT and one STORE
/// reach the server. A repeated request may have started to log in by the time it finds
/// nothing to do (the session is then dropped); it stores nothing.
#[tokio::test]
async fn a_confirmed_update_connects_ahead_and_its_repeat_stores_nothing() {
    let Some((home, mut client, proxy)) = three_messages_through_proxy("w-ahead").await else {
        return;
    };
    let request = TAG_EARLY;
    proxy.take_sent();

    let first = mb(home.path(), &request);
    assert_eq!(first.code, 0, "{}", first.stdout);
    assert_eq!(first.json["applied"], 3, "{}", first.stdout);
    let sent = proxy.take_sent();
    assert_eq!(sent.matches(" SELECT ").count(), 1, "{sent}");
    assert_eq!(sent.matches("UID STORE").count(), 1, "{sent}");
    let on_server = client.flags("INBOX").await.unwrap();
    assert!(
        on_server.values().all(|f| f.contains(&"Early".to_string())),
        "{on_server:?}"
    );

    let second = ok(home.path(), &request);
    assert_eq!(second["applied"], 0, "{second}");
    assert_eq!(second["unchanged"], 3, "{second}");
    assert!(second["plan"].as_array().unwrap().is_empty(), "{second}");
    let sent = proxy.take_sent();
    assert!(
        !sent.contains("STORE"),
        "a repeated request stored again: {sent}"
    );
    // At most LOGIN, SELECT and LOGOUT, had the session opened before it was dropped.
    assert!(second["commands"].as_u64().unwrap() <= 3, "{second}");

    // The index rows of the first change hold the modseqs the server gave.
    next_change_finds_nothing_stale(home.path());
}

/// Another client touches a message between mailbroker's STORE and its read-back: same
/// flags, newer modseq. The index is written from the read-back, so it holds that newer
/// modseq and the next change finds nothing stale.
#[tokio::test]
async fn a_message_touched_before_the_read_back_is_indexed_as_read_back() {
    let Some((home, mut client, proxy)) = three_messages_through_proxy("w-touched").await else {
        return;
    };
    proxy.hold_at("UID FETCH");
    let dir = home.path().to_path_buf();
    let run = tokio::task::spawn_blocking(move || mb(&dir, &TAG_EARLY));
    common::until_held(&proxy, "the read-back").await;
    client.store("INBOX", 1, "+FLAGS", "Other").await.unwrap();
    client.store("INBOX", 1, "-FLAGS", "Other").await.unwrap();
    proxy.release();
    let first = run.await.unwrap();
    assert_eq!(first.code, 0, "{}", first.stdout);
    assert_eq!(first.json["applied"], 3, "{}", first.stdout);
    // The index has message 1's newer modseq.
    next_change_finds_nothing_stale(home.path());
    let change = first.json["change_id"].as_i64().unwrap().to_string();
    let shown = ok(home.path(), &["changes", &change]);
    assert_eq!(shown["change"]["applied"], 3, "{shown}");
}

#[tokio::test]
async fn undo_leaves_messages_changed_since_alone() {
    let Some((home, mut client)) = setup("w-undo-stale").await else {
        return;
    };
    let tagged = ok(
        home.path(),
        &["update", "--query", "in:inbox", "--add-tag", "Batch"],
    );
    assert_eq!(tagged["applied"], 3, "{tagged}");
    // Another client removes the tag from message 3; a sync tells the index.
    client.store("INBOX", 3, "-FLAGS", "Batch").await.unwrap();
    ok(home.path(), &["sync"]);
    let change = tagged["change_id"].as_i64().unwrap().to_string();
    let run = mb(home.path(), &["undo", &change]);
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.json["applied"], 2, "{}", run.stdout);
    assert_eq!(run.json["stale"], 1, "{}", run.stdout);
    assert_eq!(run.json["failures"][0]["error_type"], "stale_state");
    let flags = client.flags("INBOX").await.unwrap();
    assert!(
        flags.values().all(|f| !f.contains(&"Batch".to_string())),
        "{flags:?}"
    );
}

#[tokio::test]
async fn without_move_a_move_is_copy_and_expunge_of_exactly_those_uids() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let user = "w-nomove";
    let mut client = ImapClient::connect(server, user).await.unwrap();
    for i in 0..3 {
        let body = message(i, "carol@example.test", &format!("Copy {i}"), "text");
        client.append("INBOX", "\\Seen", &body).await.unwrap();
    }
    // An unrelated message already marked \Deleted must survive the move's expunge.
    client
        .store("INBOX", 3, "+FLAGS", "\\Deleted")
        .await
        .unwrap();
    add_account(
        server,
        home.path(),
        "c",
        user,
        &["--disable-extension", "MOVE"],
    );
    ok(home.path(), &["sync"]);
    let id = one_id(home.path(), "subject:\"Copy 0\"");
    let report = ok(home.path(), &["update", &id, "--move-to", "archive"]);
    assert_eq!(report["applied"], 1, "{report}");
    assert!(
        report["plan"][0].as_str().unwrap().contains("UID COPY"),
        "{report}"
    );
    let inbox = client.flags("INBOX").await.unwrap();
    assert_eq!(
        inbox.keys().copied().collect::<Vec<_>>(),
        vec![2, 3],
        "{inbox:?}"
    );
    assert_eq!(inbox[&3], vec!["\\Deleted", "\\Seen"]);
    let archive = client.flags("Archive").await.unwrap();
    assert_eq!(
        archive.values().collect::<Vec<_>>(),
        vec![&vec!["\\Seen".to_string()]]
    );
    assert_eq!(
        ok(home.path(), &["show", &id])["message"]["mailbox"],
        "Archive"
    );
}

/// 2,400 messages; the odd UIDs are too scattered for one 4,000-byte STORE line, so the write
/// sends several STOREs back to back (pipelined) before its read-back. Each message also
/// carries one of 80 keywords, so the written messages end in more distinct states than the
/// index groups into one statement each: the per-message index update runs.
#[tokio::test]
async fn scattered_uids_take_several_pipelined_stores() {
    let Some(server) = server() else {
        return;
    };
    let user = "w-scatter";
    let total = 2_400u32;
    server
        .import_messages(
            user,
            (0..total as usize).map(|i| message(i, "bob@example.test", &format!("S {i}"), "x")),
        )
        .unwrap();
    let mut client = ImapClient::connect(server, user).await.unwrap();
    client.select("INBOX").await.unwrap();
    for group in 0..80u32 {
        let set: Vec<String> = (1..=total)
            .filter(|u| u % 80 == group)
            .map(|u| u.to_string())
            .collect();
        client
            .store_set(&set.join(","), &format!("+FLAGS.SILENT ($G{group})"))
            .await
            .unwrap();
    }
    let odd: Vec<String> = (1..=total).step_by(2).map(|u| u.to_string()).collect();
    for chunk in odd.chunks(400) {
        client
            .store_set(&chunk.join(","), "+FLAGS.SILENT ($Odd)")
            .await
            .unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    add_account(server, home.path(), "w", user, &[]);
    ok(home.path(), &["sync"]);

    let report = ok(
        home.path(),
        &[
            "update",
            "--query",
            "tag:$Odd",
            "--add-tag",
            "Spread",
            "--yes",
        ],
    );
    assert_eq!(report["applied"], 1_200, "{report}");
    let stores = report["plan"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l.as_str().unwrap().contains("UID STORE"))
        .count();
    assert!(stores >= 2, "expected a split STORE: {report}");
    // LOGIN, SELECT, the STOREs, the verifying FETCH, LOGOUT.
    assert_eq!(report["commands"], stores as u64 + 4, "{report}");
    let after = client.flags("INBOX").await.unwrap();
    assert_eq!(after.len(), total as usize);
    for (uid, flags) in &after {
        assert_eq!(
            flags.iter().any(|f| f == "Spread"),
            uid % 2 == 1,
            "uid {uid}: {flags:?}"
        );
    }
    assert_eq!(common::indexed_flags(home.path(), "w", "INBOX"), after);
}

/// `success` meant two things: for a write that left a message stale (or unknown) the CLI
/// said `"success": true` (with exit 5), MCP `success: false` with no `error_type`. One
/// rule now (SPEC §6): true only when every message is applied or unchanged; a partial
/// report carries the §10 fields of what fell short, and each message's outcome.
#[tokio::test]
async fn success_means_one_thing_on_every_surface() {
    let Some((home, mut client, id)) = setup_with_note_2_flagged_elsewhere("w-success").await
    else {
        return;
    };
    let run = mb(home.path(), &["update", &id, "--add-tag", "Seen1"]);
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.json["stale"], 1, "{}", run.stdout);
    assert_eq!(run.json["success"], false, "{}", run.stdout);
    assert_eq!(run.json["error_type"], "stale_state", "{}", run.stdout);
    assert!(
        run.json["next_step"].as_str().unwrap().contains("sync"),
        "{}",
        run.stdout
    );
    let done = ok(
        home.path(),
        &[
            "update",
            "--query",
            "subject:\"Note 0\"",
            "--add-tag",
            "Seen1",
        ],
    );
    assert_eq!(done["success"], true, "{done}");
    assert!(done.get("error_type").is_none(), "{done}");

    ok(home.path(), &["sync"]);
    client
        .store("INBOX", 3, "-FLAGS", "\\Flagged")
        .await
        .unwrap();
    let session = common::mcp::connect(
        home.path(),
        common::mcp::client(None, rmcp::model::ProtocolVersion::V_2025_11_25),
    )
    .await;
    let args = serde_json::json!({ "ids": [id.parse::<i64>().unwrap()], "read": true });
    let (is_error, body) = common::mcp::call(&session, "update_message", args).await;
    assert!(!is_error, "a partial report is a report: {body}");
    assert_eq!(body["stale"], 1, "{body}");
    assert_eq!(body["success"], false, "{body}");
    assert_eq!(body["error_type"], "stale_state", "{body}");
    session.cancel().await.ok();
}
