//! No server write escapes the journal: repeated ids are one selection, and an index that
//! cannot be written (read-only, a full disk) stops a change before anything is sent, or,
//! when it fails after the server was written, leaves an entry that says `outcome_unknown`.
//! Nor does a change hold the index while it waits on its server.

mod common;

use std::path::Path;

use common::mcp::{client, connect, ids as mcp_ids, ok_call};
use common::{add_account, mb, ok, server};
use mailbroker_testkit::mounts::{self, Mount};
use mailbroker_testkit::{ImapClient, message};
use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};

/// `n` messages from Dana in INBOX of a fresh account "i" for `user`, synced; their ids.
async fn setup(user: &str, home: &Path, n: usize) -> Option<(ImapClient, Vec<String>)> {
    let server = server()?;
    let mut client = ImapClient::connect(server, user).await.unwrap();
    for i in 0..n {
        let body = message(i, "dana@example.test", &format!("Item {i}"), "text");
        client.append("INBOX", "", &body).await.unwrap();
    }
    add_account(server, home, "i", user, &[]);
    ok(home, &["sync"]);
    let found = ok(home, &["search", "--limit", "10000", "in:inbox"]);
    let ids = found["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].to_string())
        .collect();
    Some((client, ids))
}

/// `ids` repeated `times` times, as `$(for i in $(seq 60); do seq 111 120; done)` gives them.
fn repeated(ids: &[String], times: usize) -> Vec<&str> {
    (0..times)
        .flat_map(|_| ids.iter().map(String::as_str))
        .collect()
}

#[tokio::test]
async fn repeated_ids_are_one_selection_journaled_and_undoable() {
    let home = tempfile::tempdir().unwrap();
    let Some((mut client, ids)) = setup("i-repeat", home.path(), 10).await else {
        return;
    };
    // 600 ids: the same ten in every chunk of 500 the index reads them in.
    let mut args = vec!["update"];
    args.extend(repeated(&ids, 60));
    args.extend(["--move-to", "Archive", "--yes"]);
    let moved = ok(home.path(), &args);
    assert_eq!(moved["applied"], 10, "{moved}");
    assert!(moved["change_id"].is_i64(), "{moved}");
    assert_eq!(client.flags("Archive").await.unwrap().len(), 10);
    assert!(client.flags("INBOX").await.unwrap().is_empty());
    let archived = ok(home.path(), &["search", "--limit", "100", "in:archive"]);
    assert_eq!(archived["messages"].as_array().unwrap().len(), 10);
    let change = moved["change_id"].to_string();
    let shown = ok(home.path(), &["changes", &change]);
    assert_eq!(shown["change"]["items"].as_array().unwrap().len(), 10);

    let undone = ok(home.path(), &["undo", &change, "--yes"]);
    assert_eq!(undone["applied"], 10, "{undone}");
    assert_eq!(client.flags("INBOX").await.unwrap().len(), 10);

    let mut args = vec!["update"];
    args.extend(repeated(&ids, 60));
    args.extend(["--add-tag", "Twice", "--yes"]);
    let tagged = ok(home.path(), &args);
    assert_eq!(tagged["applied"], 10, "{tagged}");
    let on_server = client.flags("INBOX").await.unwrap();
    assert!(
        on_server.values().all(|f| f.contains(&"Twice".to_string())),
        "{on_server:?}"
    );
}

#[tokio::test]
async fn repeated_ids_over_mcp_are_one_selection() {
    let home = tempfile::tempdir().unwrap();
    let Some((mut client_imap, _)) = setup("i-repeat-mcp", home.path(), 3).await else {
        return;
    };
    let session = connect(home.path(), client(None, ProtocolVersion::V_2025_11_25)).await;
    let found = mcp_ids(&session, "in:inbox").await;
    let ids: Vec<i64> = (0..200).flat_map(|_| found.iter().copied()).collect();
    let args = json!({ "ids": ids, "add_tags": ["Seen3"], "create_missing_tags": true });
    let plan = ok_call(
        &session,
        "update_message",
        json!({ "ids": ids, "add_tags": ["Seen3"], "create_missing_tags": true, "dry_run": true }),
    )
    .await;
    assert_eq!(plan["planned"], 3, "{plan}");
    let token = plan["confirm_token"].clone();
    let mut args = args;
    if token.is_string() {
        args["confirm_token"] = token;
    }
    let done = ok_call(&session, "update_message", args).await;
    assert_eq!(done["applied"], 3, "{done}");
    let on_server = client_imap.flags("INBOX").await.unwrap();
    assert!(
        on_server.values().all(|f| f.contains(&"Seen3".to_string())),
        "{on_server:?}"
    );
    session.cancel().await.unwrap();
}

/// The server's flags of INBOX and whether anything is in Archive: what an unwritten change
/// must leave as it was.
async fn server_state(client: &mut ImapClient) -> (Value, usize) {
    let flags = client.flags("INBOX").await.unwrap();
    (json!(flags), client.flags("Archive").await.unwrap().len())
}

/// The run failed as `error_type`, saying that nothing was sent.
fn refused_before_sending(run: &common::Run, error_type: &str) {
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert_eq!(run.json["error_type"], error_type, "{}", run.stdout);
    let error = run.json["error"].as_str().unwrap_or_default();
    assert!(error.contains("nothing was sent"), "{}", run.stdout);
}

#[tokio::test]
async fn a_read_only_index_sends_nothing() {
    let home = tempfile::tempdir().unwrap();
    let Some((mut client, _)) = setup("i-readonly", home.path(), 30).await else {
        return;
    };
    if !mounts::can_mount() {
        return;
    }
    let before = server_state(&mut client).await;
    let index = home.path().join("index.sqlite3");
    let _ro = Mount::read_only_file(&index).unwrap();
    for change in [["--add-tag", "Blocked"], ["--move-to", "Archive"]] {
        let mut args = vec!["update", "--query", "in:inbox", "--yes"];
        args.extend(change);
        let run = mb(home.path(), &args);
        assert_eq!(server_state(&mut client).await, before, "{args:?}");
        refused_before_sending(&run, "writes_disabled");
    }
}

/// A home on a 4 MiB tmpfs holding a synced account of 300 messages; `None` when skipped.
async fn home_on_small_disk(user: &str) -> Option<(tempfile::TempDir, Mount, ImapClient)> {
    server()?;
    if !mounts::can_mount() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let disk = Mount::tmpfs(dir.path(), 4096).unwrap();
    let (client, _) = setup(user, dir.path(), 300).await?;
    Some((dir, disk, client))
}

#[tokio::test]
async fn a_full_disk_sends_nothing() {
    let Some((home, _disk, mut client)) = home_on_small_disk("i-full").await else {
        return;
    };
    let before = server_state(&mut client).await;
    // Room to open the index (its 32 KiB shared-memory file), none to journal a change.
    let filler = mounts::fill(home.path(), 36).unwrap();
    let request = [
        "update",
        "--query",
        "in:inbox",
        "--add-tag",
        "Full",
        "--yes",
    ];
    let run = mb(home.path(), &request);
    assert_eq!(server_state(&mut client).await, before, "{}", run.stdout);
    refused_before_sending(&run, "limit_exceeded");
    std::fs::remove_file(filler).unwrap();
    let retried = ok(home.path(), &request);
    assert_eq!(retried["applied"], 300, "{retried}");
}

#[tokio::test]
async fn a_disk_full_after_the_write_leaves_an_unknown_entry_and_a_rerun_converges() {
    let Some(server) = server() else { return };
    let Some((home, _disk, mut client)) = home_on_small_disk("i-full-after").await else {
        return;
    };
    // The same account again, through a proxy that holds the STORE until the disk is full.
    let proxy =
        mailbroker_testkit::Proxy::start(server.imap_port, std::time::Duration::ZERO).unwrap();
    common::add_proxied(home.path(), "p", proxy.port, "i-full-after");
    ok(home.path(), &["sync", "--account", "p"]);
    let request = [
        "update",
        "--query",
        "account:p in:inbox",
        "--add-tag",
        "Late",
        "--yes",
    ];
    proxy.hold_at("UID STORE");
    let dir = home.path().to_path_buf();
    let run = tokio::task::spawn_blocking(move || mb(&dir, &request));
    common::until_held(&proxy, "the STORE").await;
    let filler = mounts::fill(home.path(), 0).unwrap();
    proxy.release();
    let first = run.await.unwrap();
    assert_ne!(first.code, 0, "{}", first.stdout);
    // Sent, not recorded: its outcome is unknown, and the next step says what to fix first.
    assert_eq!(
        first.json["error_type"], "outcome_unknown",
        "{}",
        first.stdout
    );
    let next = first.json["next_step"].as_str().unwrap_or_default();
    assert!(next.contains("free space"), "{}", first.stdout);
    let on_server = client.flags("INBOX").await.unwrap();
    assert!(
        on_server.values().all(|f| f.contains(&"Late".to_string())),
        "the STORE was released, so the server has the tag: {on_server:?}"
    );
    std::fs::remove_file(filler).unwrap();

    // The change is journaled, every message's outcome unknown; its process has ended, so
    // it is interrupted rather than executing.
    let list = ok(home.path(), &["changes"]);
    let entry = &list["changes"][0];
    assert_eq!(entry["status"], "interrupted", "{list}");
    let shown = ok(home.path(), &["changes", &entry["id"].to_string()]);
    let items = shown["change"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 300, "{shown}");
    assert!(
        items
            .iter()
            .all(|i| i["outcome"] == "unknown" && i["error_type"] == "outcome_unknown"),
        "{shown}"
    );

    // A rerun re-reads the server, sends no STORE, and the index catches up.
    proxy.take_sent();
    let rerun = ok(home.path(), &request);
    assert_eq!(rerun["applied"], 0, "{rerun}");
    assert_eq!(rerun["unchanged"], 300, "{rerun}");
    let sent = proxy.take_sent();
    assert!(!sent.contains("UID STORE"), "{sent}");
    assert_eq!(
        common::indexed_flags(home.path(), "p", "INBOX"),
        client.flags("INBOX").await.unwrap()
    );
}

#[tokio::test]
async fn undo_asks_as_update_does() {
    let home = tempfile::tempdir().unwrap();
    let Some((mut client, ids)) = setup("i-undo-asks", home.path(), 30).await else {
        return;
    };
    let moved = ok(
        home.path(),
        &[
            "update",
            "--query",
            "in:inbox",
            "--move-to",
            "Archive",
            "--yes",
        ],
    );
    assert_eq!(moved["applied"], 30, "{moved}");
    let change = moved["change_id"].to_string();
    // 30 messages, no terminal: refused, nothing moved back.
    let asked = mb(home.path(), &["undo", &change]);
    assert_eq!(asked.code, 6, "{}", asked.stdout);
    assert_eq!(
        asked.json["error_type"], "confirmation_required",
        "{}",
        asked.stdout
    );
    assert_eq!(client.flags("Archive").await.unwrap().len(), ids.len());
    let undone = ok(home.path(), &["undo", &change, "--yes"]);
    assert_eq!(undone["applied"], 30, "{undone}");
    assert!(client.flags("Archive").await.unwrap().is_empty());
}

/// A change waiting on its server holds no write lock on the index: meanwhile another
/// process syncs a second account, writing its new messages, and finishes at once rather
/// than after SQLite's 30 s busy timeout with "database is locked".
#[tokio::test]
async fn another_writer_goes_on_while_a_batch_waits_on_its_server() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    common::seed(server, "w-held", "INBOX", 3)
        .await
        .logout()
        .await
        .unwrap();
    let proxy =
        mailbroker_testkit::Proxy::start(server.imap_port, std::time::Duration::ZERO).unwrap();
    common::add_proxied(home.path(), "held", proxy.port, "w-held");
    let mut other = common::seed(server, "w-other", "INBOX", 2).await;
    add_account(server, home.path(), "other", "w-other", &[]);
    ok(home.path(), &["sync"]);
    for i in 0..5 {
        let body = message(100 + i, "carol@example.test", "Meanwhile", "arrived later");
        other.append("INBOX", "", &body).await.unwrap();
    }

    proxy.hold_at("UID STORE");
    let dir = home.path().to_path_buf();
    let change = tokio::task::spawn_blocking(move || {
        mb(
            &dir,
            &[
                "update",
                "--query",
                "account:held",
                "--add-tag",
                "Held",
                "--yes",
            ],
        )
    });
    common::until_held(&proxy, "the change's STORE").await;
    let started = std::time::Instant::now();
    let dir = home.path().to_path_buf();
    let sync = tokio::task::spawn_blocking(move || mb(&dir, &["sync", "--account", "other"]))
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(sync.code, 0, "{}\n{}", sync.stdout, sync.stderr);
    assert_eq!(sync.json["accounts"][0]["added"], 5, "{}", sync.stdout);
    assert!(
        took < std::time::Duration::from_secs(10),
        "the sync waited {took:?} for the index"
    );
    assert_eq!(ok(home.path(), &["search", "from:carol"])["total"], 5);

    proxy.release();
    let change = change.await.unwrap();
    assert_eq!(change.code, 0, "{}\n{}", change.stdout, change.stderr);
    assert_eq!(change.json["applied"], 3, "{}", change.stdout);
    assert_eq!(ok(home.path(), &["search", "tag:Held"])["total"], 3);
    other.logout().await.unwrap();
}

/// An index restored from a backup with mode 0644 stayed readable by everyone on the
/// machine, secrets and all: only a new index was made 0600. Any open now makes it private.
#[test]
fn an_index_readable_by_others_is_made_private_again() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    common::ok(home.path(), &["account", "list"]);
    let index = home.path().join("index.sqlite3");
    std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o644)).unwrap();
    common::ok(home.path(), &["account", "list"]);
    let mode = std::fs::metadata(&index).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

/// A home on a read-only filesystem answered `internal`; a write says `writes_disabled` and
/// what to do, and a search, which writes nothing, reads the index as it is.
#[tokio::test]
async fn a_read_only_home_is_writes_disabled() {
    let home = tempfile::tempdir().unwrap();
    let Some(_) = setup("i-rohome", home.path(), 3).await else {
        return;
    };
    if !mounts::can_mount() {
        return;
    }
    let _ro = Mount::read_only_file(home.path()).unwrap();
    assert_eq!(ok(home.path(), &["search", "in:inbox"])["total"], 3);
    let run = mb(
        home.path(),
        &["update", "--query", "in:inbox", "--read", "--yes"],
    );
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert_eq!(run.json["error_type"], "writes_disabled", "{}", run.stdout);
    assert!(run.json["next_step"].as_str().is_some(), "{}", run.stdout);
    // `account list` took 30 s and printed 14 lines of the pool's retries: it says why at
    // once, in two lines (the error and what to do).
    let started = std::time::Instant::now();
    let listed = common::mb_text(home.path(), &["account", "list"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_ne!(listed.code, 0);
    assert_eq!(listed.stderr.lines().count(), 2, "{}", listed.stderr);
    assert!(
        listed.stderr.contains("writes_disabled"),
        "{}",
        listed.stderr
    );
}

/// A move whose answer was lost stayed `unknown` for good, and could never be undone, even
/// once a sync showed it had landed. The sync settles it: `applied`, and undoable.
#[tokio::test]
async fn a_lost_move_that_a_sync_shows_landed_can_be_undone() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut client = common::seed(server, "i-settle", "INBOX", 3).await;
    let proxy =
        mailbroker_testkit::Proxy::start(server.imap_port, std::time::Duration::ZERO).unwrap();
    common::add_proxied(home.path(), "s", proxy.port, "i-settle");
    ok(home.path(), &["sync"]);
    proxy.cut_after("UID MOVE");
    let lost = mb(
        home.path(),
        &[
            "update",
            "--query",
            "in:inbox",
            "--move-to",
            "Archive",
            "--yes",
        ],
    );
    assert_eq!(lost.json["applied"], 0, "{}", lost.stdout);
    assert_eq!(
        client.flags("Archive").await.unwrap().len(),
        3,
        "the move landed"
    );
    let change = lost.json["change_id"].to_string();
    let journal = ok(home.path(), &["changes", &change]);
    assert_eq!(
        journal["change"]["items"][0]["outcome"], "unknown",
        "{journal}"
    );
    assert_eq!(
        journal["change"]["items"][0]["asked"]["mailbox"], "Archive",
        "{journal}"
    );

    ok(home.path(), &["sync"]);
    let journal = ok(home.path(), &["changes", &change]);
    assert_eq!(journal["change"]["applied"], 3, "{journal}");
    assert_eq!(
        journal["change"]["items"][0]["outcome"], "applied",
        "{journal}"
    );
    let undone = ok(home.path(), &["undo", &change, "--yes"]);
    assert_eq!(undone["applied"], 3, "{undone}");
    assert_eq!(client.flags("INBOX").await.unwrap().len(), 3);
}

/// A write over two mailboxes is two batches, and each is journaled as it comes back: while
/// the second waits on its server, the first's messages already say `applied` (and the
/// index shows their tag), the second's still `unknown`, and the change `executing`.
#[tokio::test]
async fn each_batch_is_journaled_as_it_comes_back() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut client = common::seed(server, "i-per-batch", "INBOX", 3).await;
    client.create("Archive").await.unwrap();
    for i in 0..2 {
        let body = message(10 + i, "erin@example.test", "Old", "text");
        client.append("Archive", "", &body).await.unwrap();
    }
    let proxy =
        mailbroker_testkit::Proxy::start(server.imap_port, std::time::Duration::ZERO).unwrap();
    common::add_proxied(home.path(), "p", proxy.port, "i-per-batch");
    ok(home.path(), &["sync"]);
    let request = [
        "update",
        "--query",
        "account:p",
        "--add-tag",
        "Done",
        "--yes",
    ];
    // Batches go in mailbox order: Archive's, then INBOX's, held at its SELECT.
    proxy.hold_at("SELECT \"INBOX\"");
    let dir = home.path().to_path_buf();
    let run = tokio::task::spawn_blocking(move || mb(&dir, &request));
    common::until_held(&proxy, "INBOX's SELECT").await;

    let list = ok(home.path(), &["changes"]);
    let entry = &list["changes"][0];
    assert_eq!(entry["status"], "executing", "{list}");
    assert_eq!(entry["applied"], 2, "{list}");
    assert_eq!(
        (&entry["failed"], &entry["unknown"]),
        (&json!(0), &json!(3)),
        "the unsent batch counts as unknown: {list}"
    );
    let shown = ok(home.path(), &["changes", &entry["id"].to_string()]);
    let items = shown["change"]["items"].as_array().unwrap();
    let outcome_in = |mailbox: &str| -> Vec<&Value> {
        items
            .iter()
            .filter(|i| i["before"]["mailbox"] == mailbox)
            .map(|i| &i["outcome"])
            .collect()
    };
    assert_eq!(outcome_in("Archive"), vec!["applied"; 2], "{shown}");
    assert_eq!(outcome_in("INBOX"), vec!["unknown"; 3], "{shown}");
    let archive = common::indexed_flags(home.path(), "p", "Archive");
    assert!(
        archive.values().all(|f| f.contains(&"Done".to_string())),
        "{archive:?}"
    );

    proxy.release();
    let done = run.await.unwrap();
    assert_eq!(done.code, 0, "{}", done.stdout);
    assert_eq!(done.json["applied"], 5, "{}", done.stdout);
    let list = ok(home.path(), &["changes"]);
    let entry = &list["changes"][0];
    assert_eq!(entry["status"], "done", "{list}");
    assert_eq!(
        (&entry["applied"], &entry["failed"], &entry["unknown"]),
        (&json!(5), &json!(0), &json!(0)),
        "{list}"
    );
}

/// A process stopped past its lease (SIGSTOP) still sent its batch after another process
/// had taken the account. Here the lease is taken from under a write while its first batch
/// waits on the server: that batch, already sent, is not journaled over what the new
/// holder may have written (its lines stay `unknown`), and nothing more is sent.
#[tokio::test]
async fn a_writer_that_lost_its_lease_sends_and_journals_nothing_more() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut client = common::seed(server, "i-fenced", "INBOX", 3).await;
    client.create("Archive").await.unwrap();
    for i in 0..2 {
        let body = message(10 + i, "erin@example.test", "Old", "text");
        client.append("Archive", "", &body).await.unwrap();
    }
    let proxy =
        mailbroker_testkit::Proxy::start(server.imap_port, std::time::Duration::ZERO).unwrap();
    common::add_proxied(home.path(), "p", proxy.port, "i-fenced");
    ok(home.path(), &["sync"]);
    proxy.take_sent();
    // Batches go in mailbox order: Archive's first, held at its STORE.
    proxy.hold_at("UID STORE");
    let dir = home.path().to_path_buf();
    let request = [
        "update",
        "--query",
        "account:p",
        "--add-tag",
        "Late",
        "--yes",
    ];
    let run = tokio::task::spawn_blocking(move || mb(&dir, &request));
    common::until_held(&proxy, "Archive's STORE").await;

    // Another process takes the account, as one would once the lease ran out.
    let url = format!("sqlite://{}", home.path().join("index.sqlite3").display());
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE account_leases SET holder = 'other', holder_host = 'elsewhere', fence = fence + 1,
           expires_at = 9999999999999 WHERE account_id = 'p'",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::Connection::close(conn).await.unwrap();
    proxy.release();

    let done = run.await.unwrap();
    assert_ne!(done.code, 0, "{}", done.stdout);
    let sent = proxy.take_sent();
    assert_eq!(
        sent.matches("UID STORE").count(),
        1,
        "a second batch was sent:\n{sent}"
    );
    let archive = common::indexed_flags(home.path(), "p", "Archive");
    assert!(
        archive.values().all(|f| !f.contains(&"Late".to_string())),
        "a writer without the lease wrote the index: {archive:?}"
    );
    let inbox = client.flags("INBOX").await.unwrap();
    assert!(
        inbox.values().all(|f| !f.contains(&"Late".to_string())),
        "{inbox:?}"
    );
}
