//! The Gmail provider against the Gmail mock, through the real binary: sync (full, then by
//! history), label writes in batches of 1,000 with one history verification, rate limits
//! and a lost answer, and staged deletion (trash with undo, permanent with the full scope).

mod common;

use std::path::Path;

use common::gmail::{add_account, control, with_browser};
use common::mcp;
use common::{mb, ok};
use mailbroker_mock_gmail::{GmailMock, Logged};
use serde_json::json;

fn calls<'a>(log: &'a [Logged], suffix: &str) -> Vec<&'a Logged> {
    log.iter().filter(|r| r.path.ends_with(suffix)).collect()
}

/// Requests logged after the first `from`.
fn since(mock: &GmailMock, from: usize) -> Vec<Logged> {
    mock.requests().split_off(from)
}

/// A mock with `count` unread INBOX messages and a synced account `g` for it.
async fn synced(count: usize) -> (GmailMock, tempfile::TempDir) {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    mock.seed(count, &["INBOX", "UNREAD"], None);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path(), "g", &[]).await;
    ok(home.path(), &["sync"]);
    (mock, home)
}

/// `update --query QUERY CHANGE…` as arguments.
fn update<'a>(query: &'a str, change: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["update", "--query", query];
    args.extend(change);
    args
}

fn count(home: &Path, query: &str) -> usize {
    let found = ok(home, &["search", "--limit", "10000", query]);
    found["messages"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_in_full_then_by_history() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(5000, &["INBOX", "UNREAD"], None);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path(), "g", &[]).await;

    let first = ok(home.path(), &["sync"]);
    assert_eq!(first["accounts"][0]["added"], 5000, "{first}");
    assert_eq!(count(home.path(), "in:inbox is:unread"), 5000);
    // A reader that stops early (`| head`) ends the command quietly, without a panic.
    let mut search = std::process::Command::new(env!("CARGO_BIN_EXE_mailbroker"))
        .arg("--home")
        .arg(home.path())
        .args(["search", "--limit", "10000", "in:inbox"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    std::io::Read::read_exact(search.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(search.stdout.take());
    let ended = search.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&ended.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(ended.status.code(), Some(101));

    // Reading a message fetches its source (format=raw), never from the index.
    let found = ok(
        home.path(),
        &["search", "--limit", "1", "subject:\"Message 42\""],
    );
    let id = found["messages"][0]["id"].to_string();
    let shown = ok(home.path(), &["show", &id, "--body"]);
    assert_eq!(shown["message"]["body"], "Body of message 42.", "{shown}");
    let gets = calls(&mock.requests(), "/messages").len();
    assert_eq!(gets, 10, "messages.list pages of 500");

    // Changes by another client: 7 starred and read, 2 archived, 1 deleted for good.
    control(
        &mock,
        "modify",
        json!({ "ids": ids[..7], "add": ["STARRED"], "remove": ["UNREAD"] }),
    )
    .await;
    control(
        &mock,
        "modify",
        json!({ "ids": ids[10..12], "remove": ["INBOX"] }),
    )
    .await;
    let token = mock.token(&[mailbroker_mock_gmail::SCOPE_FULL]);
    let deleted = reqwest::Client::new()
        .post(format!(
            "{}/gmail/v1/users/me/messages/batchDelete",
            mock.url
        ))
        .bearer_auth(token)
        .json(&json!({ "ids": [ids[20]] }))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);

    let before = mock.requests().len();
    let second = ok(home.path(), &["sync"]);
    let account = &second["accounts"][0];
    assert_eq!(
        (account["changed"].as_u64(), account["removed"].as_u64()),
        (Some(9), Some(1)),
        "{second}"
    );
    let log = since(&mock, before);
    let gets = log.iter().filter(|r| r.path.contains("/messages/")).count();
    assert_eq!(gets, 9, "only the messages history names are read: {log:?}");
    assert_eq!(calls(&log, "/history").len(), 1);
    assert_eq!(count(home.path(), "is:flagged is:read"), 7);
    assert_eq!(count(home.path(), "in:archive"), 2);
    assert_eq!(count(home.path(), "in:inbox"), 4997);

    // Nothing changed since: one history call, nothing read. The access token has expired
    // meanwhile: it is refreshed on the way, and no log line carries a token.
    control(&mock, "faults", json!({ "expire_tokens": true })).await;
    let before = mock.requests().len();
    let third = common::mb_with(home.path(), &["sync"], &[("MAILBROKER_LOG", "trace")]);
    assert_eq!(third.code, 0, "{}", third.stdout);
    assert_eq!(third.json["accounts"][0]["changed"], 0);
    for secret in ["ya29.", "1//mock-"] {
        assert!(!third.stderr.contains(secret), "a token was logged");
    }
    assert!(third.stderr.contains("TRACE"), "trace logging was on");
    let log = since(&mock, before);
    let refused = log.iter().filter(|r| r.status == 401).count();
    assert_eq!(
        refused, 1,
        "one refusal, then the refreshed token works: {log:?}"
    );
    assert_eq!(
        since(&mock, before)
            .iter()
            .filter(|r| r.path.contains("/messages"))
            .count(),
        0
    );

    // History expired: the next sync is a full one, and the index ends up the same.
    control(
        &mock,
        "modify",
        json!({ "ids": [ids[30]], "add": ["STARRED"] }),
    )
    .await;
    control(&mock, "expire-history", json!({})).await;
    let full = ok(home.path(), &["sync"]);
    assert_eq!(full["accounts"][0]["added"], 4999, "{full}");
    assert_eq!(count(home.path(), "is:flagged"), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_2500_in_three_batches_verified_by_history() {
    let (mock, home) = synced(2500).await;
    mock.seed(1, &["Invoices"], Some("billing@example.test"));
    ok(home.path(), &["sync"]);

    let args = update("in:inbox", &["--add-tag", "Invoices", "--read", "--yes"]);
    let dry = ok(
        home.path(),
        &update(
            "in:inbox",
            &["--add-tag", "Invoices", "--read", "--dry-run"],
        ),
    );
    assert!(dry["plan"].to_string().contains("batchModify ×3"), "{dry}");
    let before = mock.requests().len();
    let done = ok(home.path(), &args);
    assert_eq!(done["applied"], 2500, "{done}");
    let log = since(&mock, before);
    let batches = calls(&log, "/messages/batchModify");
    let sizes: Vec<Option<usize>> = batches.iter().map(|r| r.ids).collect();
    assert_eq!(sizes, vec![Some(1000), Some(1000), Some(500)]);
    // One history call for the preconditions, one to verify; no per-message reads.
    assert_eq!(calls(&log, "/history").len(), 2, "{log:?}");
    assert!(
        !log.iter()
            .any(|r| r.method == "GET" && r.path.contains("/messages/")),
        "{log:?}"
    );
    assert_eq!(log.len(), 5, "{log:?}");

    let label = mock
        .ids_with(None)
        .into_iter()
        .find(|id| mock.label_names(id).contains(&"Invoices".to_string()));
    assert!(label.is_some());
    let unread = mock.ids_with(Some("UNREAD"));
    assert!(
        unread.is_empty(),
        "{} still unread on the server",
        unread.len()
    );
    assert_eq!(count(home.path(), "tag:Invoices is:read in:inbox"), 2500);

    // The same request again writes nothing.
    let before = mock.requests().len();
    let again = ok(home.path(), &args);
    assert_eq!(
        (again["applied"].as_u64(), again["unchanged"].as_u64()),
        (Some(0), Some(2500)),
        "{again}"
    );
    assert!(calls(&since(&mock, before), "/messages/batchModify").is_empty());

    // Archive, then undo: the messages are back in the inbox. The index's own verified write
    // is no reason to re-read a message: no per-message GET here either.
    let before = mock.requests().len();
    let archived = ok(
        home.path(),
        &update("subject:\"Message 1\"", &["--move-to", "archive", "--yes"]),
    );
    let n = archived["applied"].as_u64().unwrap();
    assert!(n > 100, "{archived}");
    let log = since(&mock, before);
    assert!(
        !log.iter().any(|r| r.path.contains("/messages/1")),
        "{log:?}"
    );
    assert_eq!(mock.ids_with(Some("INBOX")).len() as u64, 2500 - n);
    let change = archived["change_id"].as_i64().unwrap();
    let undone = ok(home.path(), &["undo", &change.to_string(), "--yes"]);
    assert_eq!(undone["applied"].as_u64(), Some(n), "{undone}");
    assert_eq!(mock.ids_with(Some("INBOX")).len(), 2500);
    assert_eq!(count(home.path(), "in:inbox"), 2500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_and_a_lost_answer_lose_and_double_nothing() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    mock.seed(1200, &["INBOX", "UNREAD"], None);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path(), "g", &[]).await;

    // 30% of calls answered 429 (Retry-After: 0): sync and a write still complete.
    control(
        &mock,
        "faults",
        json!({ "rate_limit": 0.3, "retry_after_secs": 0 }),
    )
    .await;
    let synced = ok(home.path(), &["sync"]);
    assert_eq!(synced["accounts"][0]["added"], 1200, "{synced}");
    let before = mock.requests().len();
    let done = ok(
        home.path(),
        &update("in:inbox", &["--add-tag", "Later", "--yes"]),
    );
    assert_eq!(done["applied"], 1200, "{done}");
    let log = since(&mock, before);
    assert!(
        log.iter().any(|r| r.status == 429),
        "the storm hit: {log:?}"
    );
    let landed: usize = calls(&log, "/messages/batchModify")
        .iter()
        .filter(|r| r.status == 204)
        .map(|r| r.ids.unwrap_or(0))
        .sum();
    assert_eq!(landed, 1200, "each id written once");
    control(&mock, "faults", json!({ "rate_limit": 0.0 })).await;
    assert_eq!(count(home.path(), "tag:Later"), 1200);

    // The write lands but its answer is lost: not resent; history shows it applied.
    control(&mock, "faults", json!({ "drop_after_write": 1 })).await;
    let before = mock.requests().len();
    let flagged = mb(
        home.path(),
        &update("subject:\"Message 7\"", &["--flag", "--yes"]),
    );
    let log = since(&mock, before);
    assert_eq!(
        calls(&log, "/messages/batchModify").len(),
        1,
        "not resent: {log:?}"
    );
    assert_eq!(flagged.code, 0, "{}", flagged.stdout);
    let n = flagged.json["applied"].as_u64().unwrap();
    assert!(n > 0);
    assert_eq!(mock.ids_with(Some("STARRED")).len() as u64, n);
    assert_eq!(count(home.path(), "is:flagged"), n as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staged_deletion_trash_undo_and_permanent() {
    let (mock, home) = synced(6).await;
    mock.seed(3, &["INBOX"], Some("friend@example.test"));
    ok(home.path(), &["sync"]);

    let staged = ok(home.path(), &["stage-delete", "from:news@shop.example"]);
    assert_eq!(staged["manifest"]["summary"]["count"], 6);
    let id = staged["manifest"]["id"].as_i64().unwrap().to_string();
    let run = ok(home.path(), &["delete-staged", &id, "--yes"]);
    assert_eq!(run["counts"]["done"], 6, "{run}");
    assert_eq!(mock.ids_with(Some("TRASH")).len(), 6);
    assert_eq!(count(home.path(), "in:trash"), 6);
    let change = run["change_id"].as_i64().unwrap().to_string();
    let undone = ok(home.path(), &["undo", &change]);
    assert_eq!(undone["applied"], 6, "{undone}");
    assert!(mock.ids_with(Some("TRASH")).is_empty());
    assert_eq!(mock.ids_with(Some("INBOX")).len(), 9);
    assert_eq!(mock.ids_with(Some("UNREAD")).len(), 6, "unread as before");

    // Permanent deletion needs the full scope: refused with the step that grants it.
    common::allow_unattended(home.path(), "g");
    let staged = ok(
        home.path(),
        &["stage-delete", "--permanent", "from:news@shop.example"],
    );
    let id = staged["manifest"]["id"].as_i64().unwrap().to_string();
    let refused = mb(home.path(), &["delete-staged", &id, "--yes"]);
    assert_eq!(refused.code, 5, "{}", refused.stdout);
    let failure = &refused.json["failures"][0];
    assert_eq!(
        failure["error_type"], "insufficient_scope",
        "{}",
        refused.stdout
    );
    assert_eq!(
        failure["next_step"],
        "run: mailbroker account upgrade-scope g"
    );
    assert_eq!(
        refused.json["counts"]["pending"], 6,
        "kept for the next run"
    );
    assert_eq!(mock.ids_with(None).len(), 9);
    let args = ["account", "upgrade-scope", "g", "--no-browser"].map(String::from);
    let upgrade = with_browser(home.path(), args.to_vec()).await;
    assert_eq!(upgrade.code, 0, "{}\n{}", upgrade.stdout, upgrade.stderr);
    let run = ok(home.path(), &["delete-staged", &id, "--yes"]);
    assert_eq!(run["counts"]["done"], 6, "{run}");
    assert_eq!(mock.ids_with(None).len(), 3);
    assert_eq!(
        calls(&mock.requests(), "/messages/batchDelete")
            .iter()
            .filter(|r| r.status == 204)
            .count(),
        1
    );
    assert_eq!(count(home.path(), "from:news@shop.example"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_knows_the_labels_gmail_has() {
    let (mock, home) = synced(3).await;
    // A label made in Gmail that no message carries yet, then a sync to learn of it.
    let made = reqwest::Client::new()
        .post(format!("{}/gmail/v1/users/me/labels", mock.url))
        .bearer_auth(mock.token(&[mailbroker_mock_gmail::SCOPE_MODIFY]))
        .json(&json!({ "name": "Receipts" }))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 200);
    ok(home.path(), &["sync"]);

    let version = rmcp::model::ProtocolVersion::V_2025_11_25;
    let session = mcp::connect(home.path(), mcp::client(None, version)).await;
    let id = mcp::ids(&session, "in:inbox").await[0];
    let typo = mcp::err_call(
        &session,
        "update_message",
        json!({ "ids": [id], "add_tags": ["Reciepts"] }),
    )
    .await;
    assert_eq!(typo["error_type"], "not_found", "{typo}");
    let done = mcp::ok_call(
        &session,
        "update_message",
        json!({ "ids": [id], "add_tags": ["Receipts"] }),
    )
    .await;
    assert_eq!(done["applied"], 1, "{done}");
    let tagged = mock
        .ids_with(None)
        .into_iter()
        .filter(|m| mock.label_names(m).contains(&"Receipts".to_string()));
    assert_eq!(tagged.count(), 1);
}

/// Gmail label edits are idempotent, so the planner groups every message of a mailbox under
/// the request's whole label change (the adapter says so): 3,000 inbox messages, half of
/// them unread, marked read and tagged in one request take 3 `batchModify` calls of 1,000
/// ids, not 2 + 2 for the two per-message changes (read and tag; tag only). Messages needing
/// nothing still get no call: a repeat sends none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_label_change_for_a_mailbox_takes_the_fewest_batch_modify_calls() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    mock.seed(1500, &["INBOX", "UNREAD"], None);
    mock.seed(1500, &["INBOX"], None);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path(), "g", &[]).await;
    ok(home.path(), &["sync"]);
    let args = update("in:inbox", &["--read", "--add-tag", "Done", "--yes"]);

    let before = mock.requests().len();
    let run = ok(home.path(), &args);
    assert_eq!(run["applied"], 3000, "{run}");
    let log = since(&mock, before);
    let writes = calls(&log, "/messages/batchModify");
    assert_eq!(writes.len(), 3, "{:?}", run["plan"]);
    // One batch: one history read for its preconditions and one for its verification.
    assert_eq!(calls(&log, "/history").len(), 2, "{:?}", run["plan"]);
    assert!(mock.ids_with(Some("UNREAD")).is_empty());
    assert_eq!(count(home.path(), "tag:Done is:read"), 3000);

    let before = mock.requests().len();
    let again = ok(home.path(), &args);
    assert_eq!(again["unchanged"], 3000, "{again}");
    assert!(calls(&since(&mock, before), "/messages/batchModify").is_empty());
}

/// A label change over several mailboxes is one batch: Gmail's `batchModify` takes ids of
/// any mailbox, so 400 messages in INBOX, SENT and All Mail tagged in one request take one
/// call and one history read on each side of it, not three of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_change_across_mailboxes_is_one_batch() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    mock.seed(200, &["INBOX"], Some("carol@example.test"));
    mock.seed(100, &["SENT"], Some("carol@example.test"));
    mock.seed(100, &[], Some("carol@example.test"));
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path(), "g", &[]).await;
    ok(home.path(), &["sync"]);
    let args = update("from:carol", &["--add-tag", "Carol", "--yes"]);
    let before = mock.requests().len();
    let run = ok(home.path(), &args);
    assert_eq!(run["applied"], 400, "{run}");
    let log = since(&mock, before);
    assert_eq!(
        calls(&log, "/messages/batchModify").len(),
        1,
        "{:?}",
        run["plan"]
    );
    assert_eq!(calls(&log, "/history").len(), 2, "{:?}", run["plan"]);
    assert!(
        run["plan"][1].as_str().unwrap().contains("all mailboxes"),
        "{run}"
    );
    for (place, n) in [("in:inbox", 200), ("in:sent", 100), ("in:archive", 100)] {
        assert_eq!(
            count(home.path(), &format!("tag:Carol {place}")),
            n,
            "{place}"
        );
    }
    let labelled = mock.ids_with(None);
    let labelled = labelled
        .iter()
        .filter(|id| mock.label_names(id).iter().any(|l| l == "Carol"));
    assert_eq!(labelled.count(), 400);
}

/// A staged message another client archived (out of INBOX) before the run was still
/// trashed or deleted for good. It is left alone and reported moved, in both modes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_message_moved_since_is_left_alone_in_both_modes() {
    for mode in ["trash", "permanent"] {
        let mock = GmailMock::start("me@mock.example").await.unwrap();
        mock.seed(3, &["INBOX", "UNREAD"], None);
        let home = tempfile::tempdir().unwrap();
        add_account(&mock, home.path(), "g", &["--allow-permanent-delete"]).await;
        ok(home.path(), &["sync"]);
        common::allow_unattended(home.path(), "g");
        let mut args = vec!["stage-delete", "in:inbox"];
        if mode == "permanent" {
            args.push("--permanent");
        }
        let staged = ok(home.path(), &args);
        let manifest = staged["manifest"]["id"].to_string();
        let archived = mock.ids_with(Some("INBOX"))[0].clone();
        control(
            &mock,
            "modify",
            json!({ "ids": [archived], "add": [], "remove": ["INBOX"] }),
        )
        .await;
        let run = mb(home.path(), &["delete-staged", &manifest, "--yes"]);
        assert_eq!(run.json["counts"]["moved"], 1, "{mode}: {}", run.stdout);
        let labels = mock.label_names(&archived);
        assert!(
            !labels.contains(&"TRASH".to_string()) && !labels.is_empty(),
            "{mode}: {labels:?}"
        );
        assert_eq!(run.json["counts"]["done"], 2, "{mode}: {}", run.stdout);
        let trashed = mock.ids_with(Some("TRASH")).len();
        assert_eq!(trashed, if mode == "trash" { 2 } else { 0 }, "{mode}");
    }
}

/// Mail from lists is found by `list:` and `is:list`: Gmail's metadata headers carry List-Id
/// and List-Unsubscribe when asked for them, and the mock gives only what is asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_from_lists_is_found_by_its_list() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    mock.seed(3, &["INBOX"], None);
    let headers = |extra: (&'static str, &'static str)| {
        vec![
            ("From", "news@lists.example"),
            ("Subject", "Digest"),
            ("Date", "Mon, 2 Nov 2026 10:00:00 +0000"),
            extra,
        ]
    };
    let news = mock.add_message(
        &headers(("List-Id", "Example News <news.lists.example>")),
        "Digest",
        &["INBOX"],
    );
    mock.add_message(
        &headers(("List-Unsubscribe", "<https://shop.example/u?1>")),
        "Sale",
        &["INBOX"],
    );
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path(), "g", &[]).await;
    ok(home.path(), &["sync"]);
    assert_eq!(count(home.path(), "is:list"), 2);
    assert_eq!(count(home.path(), "-list:*"), 3);
    let found = ok(home.path(), &["search", "list:news.lists.example"]);
    assert_eq!(found["total"], 1, "{found}");
    assert_eq!(found["messages"][0]["remote_id"], news, "{found}");
    assert_eq!(found["messages"][0]["list"], "news.lists.example");
    assert_eq!(count(home.path(), "list:shop.example"), 1);
}

/// A Gmail thread is one conversation: `thread:` with the id its rows carry selects it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_is_found_and_changed_by_its_id() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(5, &["INBOX"], None);
    for id in &ids[1..3] {
        assert!(mock.set_thread(id, &ids[0]));
    }
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path(), "g", &[]).await;
    ok(home.path(), &["sync"]);
    let first = ok(home.path(), &["search", "subject:\"Message 0\""]);
    let thread = first["messages"][0]["thread"].as_str().unwrap().to_string();
    assert_eq!(first["messages"][0]["thread_messages"], 3, "{first}");
    let query = format!("thread:{thread}");
    assert_eq!(count(home.path(), &query), 3);
    let done = ok(home.path(), &update(&query, &["--flag", "--yes"]));
    assert_eq!(done["applied"], 3, "{done}");
    assert_eq!(count(home.path(), "is:flagged"), 3);
}
