//! Microsoft Graph as Microsoft documents it, against the mock that enforces it: each
//! endpoint's permission, throttling of any request (a `$batch` envelope too), a token revoked
//! in the middle of a write, a staged message another client moved, the undo of a trash run,
//! and reading a message's body. Each report is checked against the mock's state, message by
//! message.

mod common;

use std::collections::HashMap;

use common::graph::add_account;
use common::{mb, ok};
use mailbroker_mock_graph::GraphMock;
use mailbroker_testkit::oauth::control;
use serde_json::{Value, json};

/// What a person who signs in with the app's old permissions grants.
const MAIL_ONLY: [&str; 3] = ["Mail.ReadWrite", "offline_access", "User.Read"];

/// Every indexed message of the account: remote (Graph) id → local id.
fn local_ids(home: &std::path::Path) -> HashMap<String, i64> {
    let all = ok(home, &["search", "--limit", "100000", "in:anywhere"]);
    all["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["remote_id"].as_str().unwrap().to_string(),
                m["id"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Each message's reported outcome: "applied" unless the report lists it as failed, stale
/// or unknown.
fn outcomes(report: &Value) -> HashMap<i64, String> {
    report["failures"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            (
                f["id"].as_i64().unwrap(),
                f["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Adding a tag read and created the mailbox's master category list first, which needs
/// MailboxSettings permissions mailbroker did not ask for: on a real tenant every tag failed.
/// A message's categories need Mail.ReadWrite alone, so tags work without the list; where
/// MailboxSettings.ReadWrite is granted, a new category is also added to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_work_with_mail_permissions_alone_and_the_list_follows_its_own() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(1000, "inbox", "news@shop.example", true);
    control(&mock.url, "identity", json!({ "grantable": MAIL_ONLY })).await;
    let home = tempfile::tempdir().unwrap();
    let (added, _) = add_account(&mock, home.path()).await;
    let granted = added["account"]["capabilities"]["extensions"].to_string();
    assert!(!granted.contains("MailboxSettings"), "{granted}");
    ok(home.path(), &["sync"]);
    let tagged = ok(
        home.path(),
        &[
            "update",
            "--query",
            "in:inbox",
            "--add-tag",
            "Fresh",
            "--yes",
        ],
    );
    assert_eq!(tagged["applied"], 1000, "{tagged}");
    assert!(
        ids.iter()
            .all(|id| mock.message(id).unwrap()["categories"] == json!(["Fresh"]))
    );
    assert!(!mock.category_names().contains(&"Fresh".to_string()));
    let doctor = ok(home.path(), &["account", "doctor", "ms"]);
    assert_eq!(
        doctor["doctor"]["missing_scopes"],
        json!(["MailboxSettings.ReadWrite"])
    );
    let text = common::mb_text(home.path(), &["account", "doctor", "ms"]).stdout;
    assert!(text.contains("run: mailbroker account login ms"), "{text}");

    // The person signs in again and grants the list: a new category joins it.
    control(&mock.url, "identity", json!({ "grantable": [] })).await;
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_mailbroker"));
    let login = mailbroker_testkit::oauth::with_device_code(
        bin,
        home.path(),
        &["account", "login", "ms"],
        &mock.url,
    )
    .await
    .unwrap();
    assert!(login.output.status.success(), "{}", login.stderr);
    let more = ok(
        home.path(),
        &[
            "update",
            "--query",
            "in:inbox",
            "--add-tag",
            "Listed",
            "--yes",
        ],
    );
    assert_eq!(more["applied"], 1000, "{more}");
    assert!(mock.category_names().contains(&"Listed".to_string()));
}

/// Any Graph request may be throttled, a `$batch` envelope included. An envelope's 429 ended
/// the run, and messages written by the batch's earlier calls were reported failed. Under a
/// storm of 429s on every third request, a tag edit of 1,000 messages and a sync both finish,
/// every message is tagged exactly once, and the report matches the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_429s_on_every_request_is_waited_out() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(1000, "inbox", "news@shop.example", true);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    control(&mock.url, "faults", json!({ "rate_limit": 0.3 })).await;
    let synced = ok(home.path(), &["sync"]);
    assert_eq!(synced["accounts"][0]["added"], 1000, "{synced}");
    let tagged = ok(
        home.path(),
        &[
            "update",
            "--query",
            "in:inbox",
            "--add-tag",
            "Stormy",
            "--yes",
        ],
    );
    control(&mock.url, "faults", json!({ "rate_limit": 0.0 })).await;
    assert_eq!(tagged["applied"], 1000, "{tagged}");
    for id in &ids {
        assert_eq!(
            mock.message(id).unwrap()["categories"],
            json!(["Stormy"]),
            "{id}"
        );
    }
    let envelopes = mock
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("$batch") && r.status == 429)
        .count();
    assert!(
        envelopes > 0,
        "no envelope was throttled: the test proves nothing"
    );
}

/// The person revokes the app while a write runs: 300 messages, the grant withdrawn after
/// 260 writes. Every message written is reported applied or outcome_unknown, never failed;
/// every one reported failed is unwritten on the server; and the report says what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_revoked_mid_write_reports_each_message_as_the_server_has_it() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    mock.seed(300, "inbox", "news@shop.example", true);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    ok(home.path(), &["sync"]);
    let ids = local_ids(home.path());
    control(&mock.url, "faults", json!({ "revoke_after_writes": 260 })).await;
    let run = mb(
        home.path(),
        &["update", "--query", "in:inbox", "--read", "--yes"],
    );
    assert_eq!(run.json["error_type"], "auth_required", "{}", run.stdout);
    assert_eq!(run.code, 3, "{}", run.stdout);
    let reported = outcomes(&run.json);
    let mut written = 0;
    for (remote, local) in &ids {
        let on_server = mock.message(remote).unwrap()["isRead"] == true;
        let outcome = reported.get(local).map_or("applied", String::as_str);
        written += usize::from(on_server);
        match outcome {
            "applied" => assert!(on_server, "{remote} reported applied, not written"),
            "failed" => assert!(!on_server, "{remote} written, reported failed"),
            "unknown" => {}
            other => panic!("{remote}: {other}"),
        }
    }
    assert_eq!(written, 260, "the mock revoked after 260 writes");
    assert_eq!(
        ["applied", "failed", "unknown"]
            .iter()
            .map(|k| run.json[*k].as_u64().unwrap())
            .sum::<u64>(),
        300,
        "{}",
        run.stdout
    );
}

/// A staged message another client moved before the run was deleted from where it went
/// (trash mode: taken out of Archive; permanent mode: purged), with or without a sync in
/// between. It is left alone now, and the manifest says it moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_message_moved_since_is_left_alone_in_both_modes() {
    for (mode, sync_between) in [("trash", false), ("permanent", true), ("permanent", false)] {
        let mock = GraphMock::start("me@mock.example").await.unwrap();
        let ids = mock.seed(3, "inbox", "news@shop.example", true);
        let home = tempfile::tempdir().unwrap();
        add_account(&mock, home.path()).await;
        ok(home.path(), &["sync"]);
        common::allow_unattended(home.path(), "ms");
        let mut stage = vec!["stage-delete", "from:news"];
        if mode == "permanent" {
            stage.push("--permanent");
        }
        let staged = ok(home.path(), &stage);
        let manifest = staged["manifest"]["id"].to_string();
        control(
            &mock.url,
            "modify",
            json!({ "id": ids[0], "moveTo": "archive" }),
        )
        .await;
        if sync_between {
            ok(home.path(), &["sync"]);
        }
        let run = mb(home.path(), &["delete-staged", &manifest, "--yes"]);
        let counts = &run.json["counts"];
        assert_eq!(counts["done"], 2, "{mode}: {}", run.stdout);
        assert_eq!(counts["skipped"], 1, "{mode}: {}", run.stdout);
        assert_eq!(counts["moved"], 1, "{mode}: {}", run.stdout);
        let kept = mock
            .message(&ids[0])
            .expect("the moved message still exists");
        assert_eq!(
            kept["parentFolderId"],
            mock.folder_id("archive").unwrap().as_str(),
            "{mode}: it stays where the other client put it"
        );
        let shown = ok(home.path(), &["delete-staged", "--show", &manifest]);
        let left: Vec<&Value> = shown["manifest"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["status"] == "skipped")
            .collect();
        assert!(
            left[0]["error"]
                .as_str()
                .unwrap()
                .contains("moved since it was staged"),
            "{shown}"
        );
    }
}

/// The journal's before-state of a deleted message was the index row as staged, and its
/// undo wrote all of it back: read, flagged and categories another client had set before the
/// run were lost. A deletion's undo puts the message back where it was, nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undoing_a_trash_run_changes_nothing_but_where_the_mail_is() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(2, "inbox", "news@shop.example", true);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    ok(home.path(), &["sync"]);
    let staged = ok(home.path(), &["stage-delete", "from:news"]);
    let manifest = staged["manifest"]["id"].to_string();
    for id in &ids {
        let set = json!({ "id": id, "isRead": true, "flag": "flagged", "categories": ["Kept"] });
        control(&mock.url, "modify", set).await;
    }
    let run = ok(home.path(), &["delete-staged", &manifest, "--yes"]);
    assert_eq!(run["counts"]["done"], 2, "{run}");
    let undone = ok(
        home.path(),
        &["undo", &run["change_id"].to_string(), "--yes"],
    );
    assert_eq!(undone["applied"], 2, "{undone}");
    for id in &ids {
        let m = mock.message(id).unwrap();
        assert_eq!(
            m["parentFolderId"],
            mock.folder_id("inbox").unwrap().as_str()
        );
        assert_eq!(m["isRead"], true, "{m}");
        assert_eq!(m["flag"]["flagStatus"], "flagged", "{m}");
        assert_eq!(m["categories"], json!(["Kept"]), "{m}");
    }
}

/// Outlook messages could not be read (`unsupported`): the body comes from the message's
/// MIME source, as for IMAP and Gmail, with the same window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_microsoft_message_can_be_read() {
    use common::mcp::{client, connect, ok_call};
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    mock.seed(1, "inbox", "news@shop.example", true);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    ok(home.path(), &["sync"]);
    let id = *local_ids(home.path()).values().next().unwrap();
    let shown = ok(home.path(), &["show", &id.to_string(), "--body"]);
    let body = shown.to_string();
    assert!(body.contains("Body of "), "{shown}");
    let session = connect(
        home.path(),
        client(None, rmcp::model::ProtocolVersion::V_2025_11_25),
    )
    .await;
    let read = ok_call(&session, "get_messages", json!({ "ids": [id] })).await;
    let text = read["messages"][0]["body"].as_str().unwrap_or_default();
    assert!(text.contains("Body of "), "{read}");
    session.cancel().await.ok();
}

/// A write named its folders by path, so every write session listed the whole folder tree
/// to find their ids, and one request read the same facts again and again. The index keeps
/// each folder's id from the sync: an assistant's tag and move of 1,000 messages sends no
/// folder listing, and reads the account's row, its mailboxes and each message's row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_finds_its_folders_without_listing_the_tree() {
    use common::mcp::{client, ok_call};
    use rmcp::model::{ElicitationAction, ProtocolVersion};
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(1000, "inbox", "news@shop.example", true);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    ok(home.path(), &["sync"]);
    let from = mock.requests().len();
    let index = mailbroker::home::Home::resolve(Some(home.path()))
        .unwrap()
        .database();
    let store = mailbroker::store::Store::open(&index).await.unwrap();
    let session = common::mcp::connect_store(
        home.path(),
        store.clone(),
        client(
            Some(ElicitationAction::Accept),
            ProtocolVersion::V_2025_11_25,
        ),
    )
    .await;
    let args = json!({ "query": "in:inbox", "add_tags": ["Batch"], "move_to": "archive",
        "create_missing_tags": true });
    let before = store.reads();
    let done = ok_call(&session, "update_message", args).await;
    let after = store.reads();
    session.cancel().await.ok();
    assert_eq!(done["applied"], 1000, "{done}");
    let read = after - before;
    assert_eq!(read.accounts, 1, "account rows read");
    assert_eq!(read.mailboxes, 1, "mailbox lists read");
    assert_eq!(read.messages, 1000, "message rows read");
    assert_eq!(mock.ids_in("archive").len(), ids.len());
    let listings: Vec<String> = mock.requests()[from..]
        .iter()
        .filter(|r| r.path.contains("/mailFolders") && !r.path.contains("/messages/delta"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(listings.is_empty(), "{listings:?}");
}

/// An app registered without "Allow public client flows" is a confidential client to
/// Microsoft: its device code grant is refused with AADSTS7000218. Only the registration can
/// fix that, so the error says where the switch is, and nothing is half-added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_without_public_client_flows_is_explained() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    control(
        &mock.url,
        "identity",
        json!({ "public_client_flows": false }),
    )
    .await;
    let home = tempfile::tempdir().unwrap();
    let args = [
        "account",
        "add",
        "graph",
        "--id",
        "ms",
        "--client-id",
        "app",
    ];
    let endpoints = ["--graph-base", &mock.url, "--authority", &mock.url];
    let all: Vec<&str> = args.iter().chain(&endpoints).copied().collect();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_mailbroker"));
    let run = mailbroker_testkit::oauth::with_device_code(bin, home.path(), &all, &mock.url)
        .await
        .unwrap();
    assert_eq!(run.output.status.code(), Some(2), "{}", run.stderr);
    let refused: Value = serde_json::from_slice(&run.output.stdout).unwrap();
    assert_eq!(refused["error_type"], "validation_error", "{refused}");
    let error = refused["error"].as_str().unwrap();
    assert!(
        error.contains("AADSTS7000218") && error.contains("app"),
        "{error}"
    );
    let step = refused["next_step"].as_str().unwrap();
    assert!(step.contains("Allow public client flows"), "{step}");
    assert!(step.contains("docs/setup-microsoft.md"), "{step}");
    assert_eq!(ok(home.path(), &["account", "list"])["accounts"], json!([]));

    // Once the switch is on, the same command signs in.
    control(
        &mock.url,
        "identity",
        json!({ "public_client_flows": true }),
    )
    .await;
    let (added, _) = add_account(&mock, home.path()).await;
    assert_eq!(added["account"]["provider"], "graph", "{added}");
}

/// Another client moves a message and marks it read: the next sync moves its row (Graph's
/// ids survive a move, so the row with the same id is the message), keeping its local id,
/// with the new state, and without a second row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_moved_elsewhere_keeps_its_local_id() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(3, "inbox", "news@shop.example", false);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    ok(home.path(), &["sync"]);
    let before = local_ids(home.path());
    let moved = json!({ "id": ids[0], "moveTo": "archive" });
    control(&mock.url, "modify", moved).await;
    control(&mock.url, "modify", json!({ "id": ids[0], "isRead": true })).await;
    ok(home.path(), &["sync"]);
    assert_eq!(local_ids(home.path()), before, "same rows, same local ids");
    let archived = ok(home.path(), &["search", "in:archive"]);
    let rows = archived["messages"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{archived}");
    assert_eq!(rows[0]["id"].as_i64(), Some(before[&ids[0]]), "{archived}");
    assert_eq!(rows[0]["read"], true, "{archived}");
    assert_eq!(count_in(home.path(), "in:inbox"), 2);
}

fn count_in(home: &std::path::Path, query: &str) -> usize {
    let found = ok(home, &["search", "--limit", "100", query]);
    found["messages"].as_array().unwrap().len()
}
