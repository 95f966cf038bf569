//! A Microsoft account end to end, against the Graph mock: `account add graph` signs in by
//! the device code flow (the test plays the person who types the code), `sync` indexes the
//! nested folders with their roles, a change made elsewhere arrives by delta; writes go in
//! `$batch` calls with If-Match, are verified by read-back and undo; staged deletion in both
//! modes. No token is ever printed.

mod common;

use common::graph::add_account;
use common::{mb, ok};
use mailbroker_mock_graph::GraphMock;
use mailbroker_testkit::oauth::control;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_microsoft_account_signs_in_syncs_and_runs_staged_deletions() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let receipts = mock.add_folder("Receipts", Some("inbox")).unwrap();
    let inbox = mock.seed(30, "inbox", "news@shop.example", true);
    mock.seed(10, &receipts, "billing@acme.example", false);
    let home = tempfile::tempdir().unwrap();

    let (added, printed) = add_account(&mock, home.path()).await;
    let account = &added["account"];
    assert_eq!(account["provider"], "graph", "{added}");
    assert_eq!(account["email"], "me@mock.example");
    let names: Vec<&str> = account["mailboxes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"Inbox/Receipts"), "{names:?}");

    let synced = ok(home.path(), &["sync"]);
    assert_eq!(synced["accounts"][0]["added"], 40, "{synced}");
    assert!(
        synced["accounts"][0]["commands"].as_u64().unwrap() > 0,
        "requests are counted"
    );
    let count =
        |query: &str| ok(home.path(), &["search", "--limit", "100", query])["total"].clone();
    assert_eq!(count("account:ms"), 40);
    assert_eq!(count("in:inbox is:unread"), 30);
    assert_eq!(count("from:billing"), 10);

    control(
        &mock.url,
        "modify",
        json!({"id": inbox[0], "categories": ["Work"]}),
    )
    .await;
    control(
        &mock.url,
        "modify",
        json!({"id": inbox[1], "moveTo": "deleteditems"}),
    )
    .await;
    let again = ok(home.path(), &["sync"]);
    assert_eq!(again["success"], true, "{again}");
    assert_eq!(count("tag:Work"), 1);
    assert_eq!(count("in:trash"), 1);
    assert_eq!(count("in:inbox"), 29);

    // Staged deletion: trash mode moves to Deleted Items and undoes; permanent deletes.
    let filed = mock.ids_in(&receipts);
    let staged = ok(home.path(), &["stage-delete", "from:billing"]);
    let manifest = staged["manifest"]["id"].to_string();
    let run = ok(home.path(), &["delete-staged", &manifest, "--yes"]);
    assert_eq!(run["counts"]["done"], 10, "{run}");
    assert_eq!(mock.ids_in("deleteditems").len(), 11);
    assert_eq!(count("in:trash"), 11);
    let change = run["change_id"].to_string();
    let undone = ok(home.path(), &["undo", &change, "--yes"]);
    assert_eq!(undone["applied"], 10, "{undone}");
    assert_eq!(mock.ids_in(&receipts).len(), 10);
    common::allow_unattended(home.path(), "ms");
    let staged = ok(
        home.path(),
        &["stage-delete", "from:billing", "--permanent"],
    );
    let manifest = staged["manifest"]["id"].to_string();
    let gone = ok(home.path(), &["delete-staged", &manifest, "--yes"]);
    assert_eq!(gone["counts"]["done"], 10, "{gone}");
    assert!(filed.iter().all(|id| mock.message(id).is_none()));
    assert_eq!(count("from:billing"), 0);

    let doctor = ok(home.path(), &["account", "doctor", "ms"]);
    assert_eq!(doctor["doctor"]["email"], "me@mock.example", "{doctor}");
    let all = format!("{printed}{synced}{again}{staged}{run}{gone}{doctor}");
    assert!(
        !all.contains("mock-at-") && !all.contains("mock-rt-"),
        "a token was printed"
    );
}

fn categories(mock: &GraphMock, id: &str) -> Vec<String> {
    let m = mock.message(id).unwrap();
    m["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

/// The `$batch` calls logged since `from`, with how many requests each carried.
fn batches(mock: &GraphMock, from: usize) -> Vec<usize> {
    mock.requests()
        .split_off(from)
        .iter()
        .filter_map(|r| r.inner)
        .collect()
}

/// Messages of the write test.
const N: usize = 1000;

/// A tag added to 1,000 messages whose categories differ: each keeps its own plus the new one,
/// in `$batch` calls of ≤ 20 and a read-back; a repeat sends nothing; undo restores each
/// list; a message changed elsewhere is stale (If-Match); under 30% rate limiting every
/// write lands once; a move keeps ids and undoes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_keep_categories_verify_undo_and_survive_rate_limits() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(N, "inbox", "news@shop.example", true);
    for (n, id) in ids.iter().enumerate() {
        let mine = match n % 3 {
            0 => json!([]),
            1 => json!(["Red"]),
            _ => json!(["Blue", "Green"]),
        };
        control(&mock.url, "modify", json!({"id": id, "categories": mine})).await;
    }
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    ok(home.path(), &["sync"]);
    let before: Vec<Vec<String>> = ids.iter().map(|id| categories(&mock, id)).collect();

    let from = mock.requests().len();
    let tag = [
        "update",
        "--query",
        "in:inbox",
        "--add-tag",
        "Done",
        "--yes",
    ];
    let tagged = ok(home.path(), &tag);
    assert_eq!(tagged["applied"], N, "{tagged}");
    for (id, old) in ids.iter().zip(&before) {
        let mut want = old.clone();
        want.push("Done".into());
        assert_eq!(categories(&mock, id), want);
    }
    let calls = batches(&mock, from);
    assert!(calls.iter().all(|n| *n <= 20), "{calls:?}");
    let writing = mock.requests().split_off(from);
    let writing = writing
        .iter()
        .filter(|r| r.inner.is_some() && r.writes > 0)
        .count();
    assert_eq!(writing, N / 20, "one $batch of PATCHes per 20 messages");
    assert_eq!(calls.len(), N / 20, "no read-back GETs: {calls:?}");
    // Verified by the folder's delta instead: the walk to the pre-write link (nothing
    // changed since the sync: one page), then the written messages in pages of 200.
    let deltas = mock.requests()[from..]
        .iter()
        .filter(|r| r.path.contains("/messages/delta"))
        .count();
    assert!(
        (1 + N / 200..=2 + N / 200).contains(&deltas),
        "{deltas} delta pages"
    );
    let from = mock.requests().len();
    let again = ok(home.path(), &tag);
    assert_eq!(again["unchanged"], N, "{again}");
    assert!(batches(&mock, from).is_empty(), "a repeat sends nothing");

    let change = tagged["change_id"].as_i64().unwrap().to_string();
    let undone = ok(home.path(), &["undo", &change, "--yes"]);
    assert_eq!(undone["applied"], N, "{undone}");
    for (id, old) in ids.iter().zip(&before) {
        assert_eq!(&categories(&mock, id), old);
    }

    // Changed elsewhere after the sync: If-Match refuses, the message is left alone.
    control(&mock.url, "modify", json!({"id": ids[0], "isRead": true})).await;
    let shown = ok(home.path(), &["search", "--limit", "5000", "in:inbox"]);
    let local = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["remote_id"] == ids[0].as_str())
        .unwrap()["id"]
        .to_string();
    let flag = mb(home.path(), &["update", &local, "--flag", "--yes"]);
    assert_eq!(flag.json["stale"], 1, "{}", flag.stdout);
    assert_eq!(flag.code, 5, "a stale message is the server's word: exit 5");
    let flag_status = &mock.message(&ids[0]).unwrap()["flag"]["flagStatus"];
    assert_eq!(flag_status, "notFlagged");
    ok(home.path(), &["sync"]);

    control(&mock.url, "faults", json!({"rate_limit": 0.3})).await;
    let unread = ["update", "--query", "in:inbox is:unread", "--read", "--yes"];
    let read = ok(home.path(), &unread);
    assert_eq!(read["applied"], N - 1, "{read}");
    assert!(
        ids.iter()
            .all(|id| mock.message(id).unwrap()["isRead"] == true)
    );
    control(&mock.url, "faults", json!({"rate_limit": 0.0})).await;

    // A lost answer: the `$batch` of PATCHes landed but its answer never came. Nothing is
    // sent again: its messages are read back, and show the tag, so each is applied, the
    // others' answers stand; a rerun finds every message as asked. The tag is one the
    // mailbox has, so the first write is the `$batch` itself.
    control(&mock.url, "faults", json!({"drop_after_write": 1})).await;
    let lost = ok(home.path(), &tag);
    assert_eq!(lost["applied"], N, "{lost}");
    let rerun = ok(home.path(), &tag);
    assert_eq!(rerun["unchanged"], N, "{rerun}");
    for id in &ids {
        let lost = categories(&mock, id)
            .iter()
            .filter(|c| *c == "Done")
            .count();
        assert_eq!(lost, 1, "tagged once, nothing applied twice");
    }

    let archive = [
        "update",
        "--query",
        "in:inbox",
        "--move-to",
        "archive",
        "--yes",
    ];
    let moved = ok(home.path(), &archive);
    assert_eq!(moved["applied"], N, "{moved}");
    let mut archived = mock.ids_in("archive");
    archived.sort();
    let mut all = ids.clone();
    all.sort();
    assert_eq!(archived, all, "immutable ids survive the move");
    let count = |q: &str| ok(home.path(), &["search", "--limit", "1", q])["total"].clone();
    assert_eq!(count("in:archive"), N);
    let change = moved["change_id"].as_i64().unwrap().to_string();
    let back = ok(home.path(), &["undo", &change, "--yes"]);
    assert_eq!(back["applied"], N, "{back}");
    assert_eq!(mock.ids_in("inbox").len(), N);
}

/// The assistant's flow over MCP on a Microsoft account, checked in the mock: search, tag
/// (a new category, asked for), archive, stage a deletion (confirmed, never run by a tool),
/// and undo.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_assistant_flow_over_mcp_works_on_a_microsoft_account() {
    use common::mcp::{client, connect, ok_call};
    use rmcp::model::{ElicitationAction, ProtocolVersion};

    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let news = mock.seed(4, "inbox", "messages-noreply@linkedin.example", true);
    mock.seed(3, "inbox", "alice@example.test", false);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    ok(home.path(), &["sync"]);
    let accepting = client(
        Some(ElicitationAction::Accept),
        ProtocolVersion::V_2025_11_25,
    );
    let session = connect(home.path(), accepting).await;

    let found = ok_call(
        &session,
        "search_messages",
        json!({"query": "from:linkedin"}),
    )
    .await;
    let ids: Vec<i64> = found["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 4, "{found}");
    let args = json!({"ids": ids, "add_tags": ["Social"], "move_to": "archive",
                      "create_missing_tags": true});
    let done = ok_call(&session, "update_message", args).await;
    assert_eq!(done["applied"], 4, "{done}");
    let mut archived = mock.ids_in("archive");
    archived.sort();
    let mut want = news.clone();
    want.sort();
    assert_eq!(archived, want);
    assert!(
        news.iter()
            .all(|id| categories(&mock, id) == vec!["Social"])
    );

    let staged = ok_call(
        &session,
        "update_message",
        json!({"query": "from:alice", "delete": "trash"}),
    )
    .await;
    assert!(staged["manifest_id"].is_i64(), "{staged}");
    assert_eq!(
        mock.ids_in("deleteditems").len(),
        0,
        "a tool never runs a deletion"
    );

    let change = done["change_id"].as_i64().unwrap();
    let undone = ok_call(&session, "undo_change", json!({"change_id": change})).await;
    assert_eq!(undone["applied"], 4, "{undone}");
    assert_eq!(mock.ids_in("inbox").len(), 7);
    assert!(news.iter().all(|id| categories(&mock, id).is_empty()));
}

/// The token endpoint's answers so far that handed out tokens.
fn grants(mock: &GraphMock) -> usize {
    mock.requests()
        .iter()
        .filter(|l| l.oauth.as_deref() == Some("tokens"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_refreshed_on_expiry_and_a_revoked_grant_asks_for_login() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    mock.seed(5, "inbox", "news@shop.example", true);
    // Tokens that expire within the refresh margin: every command must refresh first.
    control(&mock.url, "identity", json!({"token_ttl_secs": 30})).await;
    let home = tempfile::tempdir().unwrap();
    let (_, printed) = add_account(&mock, home.path()).await;
    let mut seen = printed;

    for round in 1..=2 {
        let before = grants(&mock);
        let synced = mb(home.path(), &["sync"]);
        assert_eq!(synced.code, 0, "{}\n{}", synced.stdout, synced.stderr);
        // One refresh each time, with the refresh token the last one rotated in.
        assert_eq!(grants(&mock) - before, 1, "round {round}");
        seen += &(synced.stdout + &synced.stderr);
    }

    // Graph refuses the token before its stored expiry: the command renews it and goes on.
    control(
        &mock.url,
        "identity",
        json!({"token_ttl_secs": 3600, "expire_tokens": true}),
    )
    .await;
    let before = grants(&mock);
    let doctor = ok(home.path(), &["account", "doctor", "ms"]);
    assert_eq!(grants(&mock) - before, 1, "{doctor}");
    seen += &doctor.to_string();

    control(&mock.url, "revoke-all", json!({})).await;
    let refused = mb(home.path(), &["sync"]);
    assert_eq!(refused.code, 3, "{}", refused.stdout);
    assert_eq!(
        refused.json["error_type"], "auth_required",
        "{}",
        refused.stdout
    );
    assert_eq!(
        refused.json["next_step"],
        "run: mailbroker account login ms"
    );
    seen += &(refused.stdout + &refused.stderr);
    assert!(
        !seen.contains("mock-at-") && !seen.contains("mock-rt-") && !seen.contains("mock-dc-"),
        "a token was printed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_may_sign_in_in_a_browser_instead_of_typing_a_code() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    mock.seed(3, "inbox", "news@shop.example", true);
    let home = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_mailbroker"));
    let endpoints = ["--graph-base", &mock.url, "--authority", &mock.url];
    let browser = ["--browser", "--no-browser"];
    let add: Vec<String> = [
        "account",
        "add",
        "graph",
        "--id",
        "web",
        "--client-id",
        "app",
    ]
    .iter()
    .chain(&endpoints)
    .chain(&browser)
    .map(|s| s.to_string())
    .collect();
    let run = mailbroker_testkit::oauth::with_browser(bin, home.path(), &add)
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.output.stdout);
    assert!(run.output.status.success(), "{stdout}\n{}", run.stderr);
    // The authorization code flow with PKCE, to the tenant's authorize endpoint.
    assert!(
        run.url
            .starts_with(&format!("{}/common/oauth2/v2.0/authorize?", mock.url))
            && run.url.contains("code_challenge_method=S256"),
        "{}",
        run.url
    );
    assert!(!stdout.contains("mock-at-") && !run.stderr.contains("mock-rt-"));
    assert_eq!(ok(home.path(), &["sync"])["accounts"][0]["added"], 3);

    // Signing in again the same way replaces the stored tokens.
    control(&mock.url, "revoke-all", json!({})).await;
    assert_eq!(
        mb(home.path(), &["sync"]).json["error_type"],
        "auth_required"
    );
    let login: Vec<String> = ["account", "login", "web"]
        .iter()
        .chain(&browser)
        .map(|s| s.to_string())
        .collect();
    let again = mailbroker_testkit::oauth::with_browser(bin, home.path(), &login)
        .await
        .unwrap();
    assert!(again.output.status.success(), "{}", again.stderr);
    ok(home.path(), &["sync"]);
}

/// A top-level folder named `Inbox/Receipts` and the child `Receipts` of Inbox used to be one
/// mailbox in the index: the top-level folder's mail was never indexed, a move to it landed
/// in the child, and a staged deletion of it deleted the child's mail too. Each is its own
/// mailbox now (the `/` inside a name written `\/`), and every write touches the folder named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_in_a_folder_name_never_merges_two_folders() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let top = mock.add_folder("Inbox/Receipts", None).unwrap();
    let child = mock.add_folder("Receipts", Some("inbox")).unwrap();
    let in_top = mock.seed(3, &top, "top@shop.example", true);
    let in_child = mock.seed(5, &child, "child@shop.example", true);
    let inbox = mock.seed(2, "inbox", "news@shop.example", true);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    let synced = ok(home.path(), &["sync"]);
    assert_eq!(synced["accounts"][0]["added"], 10, "{synced}");
    let count =
        |query: &str| ok(home.path(), &["search", "--limit", "100", query])["total"].clone();
    assert_eq!(count(r#"in:"Inbox\/Receipts""#), 3);
    assert_eq!(count("in:Inbox/Receipts"), 5);
    assert_eq!(count("from:top@shop.example"), 3);

    let moved = ok(
        home.path(),
        &[
            "update",
            "--query",
            "from:news",
            "--move-to",
            r"Inbox\/Receipts",
            "--yes",
        ],
    );
    assert_eq!(moved["applied"], 2, "{moved}");
    let mut expected: Vec<String> = in_top.iter().chain(&inbox).cloned().collect();
    expected.sort();
    let mut landed = mock.ids_in(&top);
    landed.sort();
    assert_eq!(landed, expected, "the move went to the folder named");
    assert_eq!(mock.ids_in(&child).len(), 5);

    common::allow_unattended(home.path(), "ms");
    let staged = ok(
        home.path(),
        &["stage-delete", r"in:Inbox\/Receipts", "--permanent"],
    );
    assert_eq!(staged["manifest"]["summary"]["count"], 5, "{staged}");
    let manifest = staged["manifest"]["id"].to_string();
    let run = ok(home.path(), &["delete-staged", &manifest, "--yes"]);
    assert_eq!(run["counts"]["done"], 5, "{run}");
    assert!(mock.ids_in(&top).is_empty());
    let mut kept = mock.ids_in(&child);
    kept.sort();
    let mut want = in_child.clone();
    want.sort();
    assert_eq!(kept, want, "the other folder's mail is untouched");
    assert_eq!(count("in:Inbox/Receipts"), 5);
}

/// Folder names come from the server: one holding ESC, BEL and an OSC sequence reached the
/// terminal raw in `account show`. Every human line now shows control characters as their
/// pictures (`--json` keeps the exact name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_text_never_reaches_the_terminal_raw() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let evil = "Evil\u{1b}]0;owned\u{7}\u{1b}[31mred\nforged row";
    mock.add_folder(evil, None).unwrap();
    mock.seed(2, "inbox", "news@shop.example", true);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    ok(home.path(), &["sync"]);
    let shown = ok(home.path(), &["account", "show", "ms"]);
    let names = shown["account"]["mailboxes"].to_string();
    assert!(
        names.contains("\\u001b]0;owned"),
        "JSON keeps the name: {names}"
    );
    let escaped = evil.replace('\\', r"\\").replace('/', r"\/");
    let runs = [
        common::mb_text(home.path(), &["account", "show", "ms"]),
        common::mb_text(home.path(), &["account", "list"]),
        common::mb_text(home.path(), &["sync"]),
        common::mb_text(
            home.path(),
            &[
                "update",
                "--query",
                "in:inbox",
                "--move-to",
                &escaped,
                "--dry-run",
            ],
        ),
        common::mb_text(home.path(), &["search", &format!("in:\"{escaped}x\"")]),
    ];
    for run in &runs {
        let all = format!("{}{}", run.stdout, run.stderr);
        // Line breaks and the layout's own column tabs are mailbroker's; nothing else is.
        assert!(
            !all.chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "a control character reached the terminal: {all:?}"
        );
        assert!(!all.contains("\nforged row"), "a forged row: {all}");
    }
    assert!(
        runs[0].stdout.contains("Evil\u{241b}]0;owned\u{2407}"),
        "{}",
        runs[0].stdout
    );
    assert!(
        runs[3].stdout.contains("to \"Evil"),
        "the plan names it: {}",
        runs[3].stdout
    );
}

/// `" Work "` was taken as a new category beside `Work`, and bidi controls reordered how a
/// name shows. A new category is refused with either (nothing sent); one the account already
/// carries, set by another client, can still be named to remove it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_category_with_edge_spaces_or_bidi_controls_is_refused() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(2, "inbox", "news@shop.example", true);
    control(
        &mock.url,
        "modify",
        json!({"id": ids[0], "categories": [" Old "]}),
    )
    .await;
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    ok(home.path(), &["sync"]);
    let from = mock.requests().len();
    for bad in [" Work ", "Work ", "Wo\u{202e}rk", "\u{2066}Work"] {
        let run = mb(
            home.path(),
            &["update", "--query", "in:inbox", "--add-tag", bad, "--yes"],
        );
        assert_eq!(run.code, 2, "{bad:?}: {}", run.stdout);
        assert_eq!(run.json["error_type"], "validation_error", "{bad:?}");
    }
    assert_eq!(mock.requests().len(), from, "nothing was sent");
    let removed = ok(
        home.path(),
        &[
            "update",
            "--query",
            "in:inbox",
            "--remove-tag",
            " Old ",
            "--yes",
        ],
    );
    assert_eq!(removed["applied"], 1, "{removed}");
    assert!(categories(&mock, &ids[0]).is_empty());
}

/// A write after the person withdrew consent ended with exit 5 and no top-level error: it
/// says `auth_required` and the next step, as sync does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_after_a_revoked_grant_asks_for_login() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    mock.seed(3, "inbox", "news@shop.example", true);
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    ok(home.path(), &["sync"]);
    control(&mock.url, "revoke-all", json!({})).await;
    let run = mb(
        home.path(),
        &["update", "--query", "in:inbox", "--read", "--yes"],
    );
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert_eq!(run.json["error_type"], "auth_required", "{}", run.stdout);
    assert_eq!(run.json["next_step"], "run: mailbroker account login ms");
}

/// Graph v1.0 has no list property (`unsubscribeEnabled` is beta only, and v1.0 refuses a
/// `$select` naming it): the list comes from the `List-Id` and `List-Unsubscribe` headers,
/// which Exchange keeps as extended properties that the delta expands. A message with a
/// List-Id is found by it; one offering only unsubscribe links by the host they lead to;
/// one whose headers came after the first sync by the next, incremental, one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_from_lists_is_found_by_its_list_through_v1_only() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let plain = mock.seed(2, "inbox", "friend@example.test", true);
    let news = mock.seed(3, "inbox", "news@shop.example", true);
    assert!(mock.set_internet_headers(
        &news[0],
        &[(
            "List-Unsubscribe",
            "<mailto:out@esp.example>, <https://shop.example/u?1>"
        )]
    ));
    assert!(mock.set_internet_headers(
        &news[1],
        &[
            ("List-Id", "Weekly <weekly.news.example>"),
            ("List-Unsubscribe", "<https://shop.example/u?2>"),
        ]
    ));
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    ok(home.path(), &["sync"]);
    let found = ok(home.path(), &["search", "list:shop.example"]);
    assert_eq!(found["total"], 1, "{found}");
    assert_eq!(found["messages"][0]["list"], "shop.example", "{found}");
    assert_eq!(found["messages"][0]["remote_id"], news[0], "{found}");
    let weekly = ok(home.path(), &["search", "list:weekly.news.example"]);
    assert_eq!(weekly["total"], 1, "{weekly}");
    assert_eq!(weekly["messages"][0]["remote_id"], news[1], "{weekly}");
    let other = ok(home.path(), &["search", "-is:list"]);
    assert_eq!(other["total"], plain.len() + 1, "{other}");

    // The delta link carries the expansion: a later change is read with its headers.
    assert!(mock.set_internet_headers(&news[2], &[("List-Id", "<deals.shop.example>")]));
    ok(home.path(), &["sync"]);
    let deals = ok(home.path(), &["search", "list:deals.shop.example"]);
    assert_eq!(deals["total"], 1, "{deals}");
    assert_eq!(deals["messages"][0]["remote_id"], news[2], "{deals}");
}

/// An Outlook conversation (conversationId) is one thread for `thread:`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_is_found_by_its_thread() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(4, "inbox", "dana@example.test", true);
    let sent = mock.seed(1, "sentitems", "me@mock.example", false);
    for id in [&ids[0], &ids[1], &sent[0]] {
        assert!(mock.set_conversation(id, "AAQkADAwATM0MDAAMS1hZGU5LTU3="));
    }
    let home = tempfile::tempdir().unwrap();
    add_account(&mock, home.path()).await;
    ok(home.path(), &["sync"]);
    let found = ok(home.path(), &["search", "in:sent"]);
    let row = &found["messages"][0];
    assert_eq!(row["thread_messages"], 3, "{found}");
    let query = format!("thread:{}", row["thread"].as_str().unwrap());
    let thread = ok(home.path(), &["search", &query]);
    let mut found: Vec<String> = thread["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["remote_id"].as_str().unwrap().to_string())
        .collect();
    found.sort();
    let mut expected = vec![ids[0].clone(), ids[1].clone(), sent[0].clone()];
    expected.sort();
    assert_eq!(found, expected);
}
