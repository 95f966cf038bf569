//! `mailbroker sync` against a real Dovecot: the index equals the server, incremental syncs
//! pick up exactly what another client changed (by QRESYNC, CONDSTORE or a flag compare), a
//! UIDVALIDITY change rebuilds the mailbox, and a no-change resync fetches nothing.

mod common;

use common::{add_account, indexed_flags, mailbox_report, ok, seed, server};
use mailbroker_testkit::{ImapClient, message};

#[tokio::test]
async fn first_sync_matches_the_server_flag_for_flag() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut client = seed(server, "sync-first", "INBOX", 25).await;
    for i in 0..4 {
        let body = message(100 + i, "carol@example.test", "Archived thing", "old");
        client.append("Archive", "\\Seen Old", &body).await.unwrap();
    }
    add_account(server, home.path(), "a", "sync-first", &[]);
    let sync = ok(home.path(), &["sync", "--account", "a"]);
    assert_eq!(mailbox_report(&sync, "INBOX")["mode"], "full");
    assert_eq!(mailbox_report(&sync, "INBOX")["added"], 25);
    assert_eq!(sync["accounts"][0]["added"], 29);

    for mailbox in ["INBOX", "Archive", "Trash"] {
        let server_flags = client.flags(mailbox).await.unwrap();
        assert_eq!(
            indexed_flags(home.path(), "a", mailbox),
            server_flags,
            "{mailbox}"
        );
    }
    // Keywords are tags too.
    let tagged = ok(home.path(), &["search", "--limit", "1000", "tag:$Invoice"]);
    assert_eq!(tagged["messages"].as_array().unwrap().len(), 10);
    client.logout().await.unwrap();
}

/// Another client flags, unflags, tags, expunges two and appends one; the next sync must find
/// exactly those changes through `expected_mode`.
async fn incremental_case(user: &str, extra: &[&str], expected_mode: &str) {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut client = seed(server, user, "INBOX", 12).await;
    add_account(server, home.path(), "acc", user, extra);
    ok(home.path(), &["sync"]);
    assert_eq!(
        indexed_flags(home.path(), "acc", "INBOX"),
        client.flags("INBOX").await.unwrap()
    );

    client
        .store("INBOX", 3, "+FLAGS", "\\Flagged")
        .await
        .unwrap();
    client.store("INBOX", 1, "-FLAGS", "\\Seen").await.unwrap();
    client.store("INBOX", 5, "+FLAGS", "$Triage").await.unwrap();
    client.expunge("INBOX", &[7, 9]).await.unwrap();
    let body = message(500, "dan@example.test", "Fresh arrival", "new mail");
    client.append("INBOX", "", &body).await.unwrap();

    let sync = ok(home.path(), &["sync"]);
    let inbox = mailbox_report(&sync, "INBOX");
    assert_eq!(inbox["mode"], expected_mode, "{sync}");
    assert_eq!(inbox["added"], 1, "{sync}");
    assert_eq!(inbox["changed"], 3, "{sync}");
    assert_eq!(inbox["removed"], 2, "{sync}");
    assert_eq!(inbox["uidvalidity_reset"], false);
    // Mailboxes nobody touched were not even selected.
    if expected_mode != "scan" {
        assert_eq!(
            mailbox_report(&sync, "Archive")["mode"],
            "unchanged",
            "{sync}"
        );
    }
    assert_eq!(
        indexed_flags(home.path(), "acc", "INBOX"),
        client.flags("INBOX").await.unwrap()
    );
    let fresh = ok(home.path(), &["search", "subject:\"Fresh arrival\""]);
    assert_eq!(fresh["messages"].as_array().unwrap().len(), 1);
    client.logout().await.unwrap();
}

#[tokio::test]
async fn incremental_sync_uses_qresync() {
    incremental_case("inc-qresync", &[], "delta").await;
}

#[tokio::test]
async fn incremental_sync_uses_condstore_without_qresync() {
    incremental_case(
        "inc-condstore",
        &["--disable-extension", "QRESYNC"],
        "modified",
    )
    .await;
}

#[tokio::test]
async fn incremental_sync_compares_flags_without_condstore() {
    incremental_case(
        "inc-flags",
        &[
            "--disable-extension",
            "QRESYNC",
            "--disable-extension",
            "CONDSTORE",
        ],
        "scan",
    )
    .await;
}

#[tokio::test]
async fn uidvalidity_change_resyncs_the_mailbox() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut client = ImapClient::connect(server, "uidvalidity").await.unwrap();
    client.create("Projects").await.unwrap();
    for i in 0..3 {
        client
            .append(
                "Projects",
                "",
                &message(i, "a@example.test", &format!("old {i}"), "x"),
            )
            .await
            .unwrap();
    }
    add_account(server, home.path(), "u", "uidvalidity", &[]);
    ok(home.path(), &["sync"]);
    assert_eq!(indexed_flags(home.path(), "u", "Projects").len(), 3);

    // Recreating the mailbox gives it a new UIDVALIDITY; UIDs 1 and 2 now name other mail.
    client.delete("Projects").await.unwrap();
    client.create("Projects").await.unwrap();
    for i in 0..2 {
        client
            .append(
                "Projects",
                "\\Seen",
                &message(10 + i, "b@example.test", &format!("new {i}"), "y"),
            )
            .await
            .unwrap();
    }
    let sync = ok(home.path(), &["sync"]);
    let report = mailbox_report(&sync, "Projects");
    assert_eq!(report["uidvalidity_reset"], true, "{sync}");
    assert_eq!(report["mode"], "full");
    assert_eq!(
        indexed_flags(home.path(), "u", "Projects"),
        client.flags("Projects").await.unwrap()
    );
    let old = ok(home.path(), &["search", "in:Projects", "subject:old"]);
    assert_eq!(
        old["messages"].as_array().unwrap().len(),
        0,
        "stale rows remain: {old}"
    );
    let new = ok(home.path(), &["search", "in:Projects", "subject:new"]);
    assert_eq!(new["messages"].as_array().unwrap().len(), 2);
    client.logout().await.unwrap();
}

#[tokio::test]
async fn no_change_resync_fetches_nothing() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    seed(server, "nochange", "INBOX", 5)
        .await
        .logout()
        .await
        .unwrap();
    add_account(server, home.path(), "n", "nochange", &[]);
    ok(home.path(), &["sync"]);
    let sync = ok(home.path(), &["sync"]);
    for m in sync["accounts"][0]["mailboxes"].as_array().unwrap() {
        assert_eq!(m["mode"], "unchanged", "{sync}");
    }
    // LOGIN (capabilities come with its answer), ENABLE QRESYNC, LIST-STATUS, LOGOUT.
    assert!(
        sync["accounts"][0]["commands"].as_u64().unwrap() == 4,
        "{sync}"
    );
    // --full refetches regardless.
    let full = ok(home.path(), &["sync", "--full"]);
    assert_eq!(mailbox_report(&full, "INBOX")["mode"], "full");
    assert_eq!(mailbox_report(&full, "INBOX")["added"], 5);
}

#[tokio::test]
async fn search_and_show_read_the_index() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    seed(server, "searcher", "INBOX", 10)
        .await
        .logout()
        .await
        .unwrap();
    add_account(server, home.path(), "s", "searcher", &[]);
    ok(home.path(), &["sync"]);
    let count = |q: &str| {
        ok(home.path(), &["search", "--limit", "1000", q])["messages"]
            .as_array()
            .unwrap()
            .len()
    };
    // seed(): i%5 → 0 \Seen, 1 \Seen \Flagged, 2 $Invoice, 3 \Seen $Invoice Work, 4 none.
    assert_eq!(count("from:alice"), 5);
    assert_eq!(count("is:flagged"), 2);
    assert_eq!(count("is:unread"), 4);
    assert_eq!(count("tag:work"), 2, "tags match case-insensitively");
    assert_eq!(count("-tag:$Invoice"), 6);
    assert_eq!(count("in:inbox is:read"), 6);
    assert_eq!(count("subject:\"number 7\""), 1);
    assert_eq!(count("zebra"), 10, "free text reaches the body");
    assert_eq!(count("from:bob is:flagged"), 1);

    let one = ok(home.path(), &["search", "subject:\"Report number 3\""]);
    let row = &one["messages"][0];
    assert_eq!(row["tags"], serde_json::json!(["$Invoice", "Work"]));
    assert_eq!(row["message_id"], "m3@example.test");
    assert!(
        row["snippet"]
            .as_str()
            .unwrap()
            .contains("body text 3 zebra")
    );
    let id = row["id"].as_i64().unwrap().to_string();
    let shown = ok(home.path(), &["show", &id]);
    assert_eq!(shown["message"]["subject"], "Report number 3");
    assert_eq!(shown["message"]["date"], "2026-11-02T10:00:03Z");
}

#[tokio::test]
async fn a_garbage_date_header_falls_back_to_the_received_date() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut client = ImapClient::connect(server, "sync-date").await.unwrap();
    for date in ["Mon, 32 Foo 99999 99:99:99 +9999", "yesterday, probably"] {
        let mail = format!(
            "From: a@example.test\r\nSubject: Dated {date}\r\nDate: {date}\r\n\
             Message-ID: <{}@example.test>\r\n\r\nbody\r\n",
            date.len()
        );
        client.append("INBOX", "", mail.as_bytes()).await.unwrap();
    }
    add_account(server, home.path(), "d", "sync-date", &[]);
    ok(home.path(), &["sync"]);
    let found = ok(home.path(), &["search", "subject:Dated"]);
    let now_year = mail_parser::DateTime::from_timestamp(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64,
    )
    .year;
    for m in found["messages"].as_array().unwrap() {
        let date = m["date"].as_str().unwrap();
        // The append just now: this year, not year 10000.
        assert!(date.starts_with(&now_year.to_string()), "{m}");
    }
    let recent = ok(home.path(), &["search", "subject:Dated", "newer_than:2d"]);
    assert_eq!(recent["messages"].as_array().unwrap().len(), 2, "{recent}");
}

#[tokio::test]
async fn messages_moved_elsewhere_keep_their_ids_and_are_not_fetched_again() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let user = "sync-moved";
    let mut client = seed(server, user, "INBOX", 6).await;
    let proxy =
        mailbroker_testkit::Proxy::start(server.imap_port, std::time::Duration::ZERO).unwrap();
    common::add_proxied(home.path(), "m", proxy.port, user);
    ok(home.path(), &["sync"]);
    let id_of = |subject: &str| {
        let q = format!("subject:\"{subject}\"");
        ok(home.path(), &["search", &q])["messages"][0]["id"].clone()
    };
    let (moved_a, moved_b) = (id_of("Report number 1"), id_of("Report number 2"));

    // Another client moves two messages to Archive (listed before INBOX, so mailbroker sees
    // them arrive before it sees them leave) and copies a third there.
    client.select("INBOX").await.unwrap();
    client.move_each(&[2, 3], "Archive").await.unwrap();
    client.select("INBOX").await.unwrap();
    client.store("INBOX", 4, "+FLAGS", "Copied").await.unwrap();
    let copy = message(
        3,
        "bob@example.test",
        "Report number 3",
        "body text 3 zebra",
    );
    client.append("Archive", "", &copy).await.unwrap();

    proxy.take_sent();
    let sync = ok(home.path(), &["sync"]);
    let sent = proxy.take_sent();
    assert_eq!(mailbox_report(&sync, "INBOX")["removed"], 0, "{sync}");
    assert_eq!(mailbox_report(&sync, "Archive")["added"], 1, "{sync}");
    assert_eq!(mailbox_report(&sync, "Archive")["changed"], 2, "{sync}");
    // Only the copy's text was fetched.
    assert_eq!(sent.matches("BODY.PEEK[TEXT]").count(), 1, "{sent}");
    assert_eq!(id_of("Report number 1"), moved_a);
    assert_eq!(id_of("Report number 2"), moved_b);
    let archived = ok(home.path(), &["search", "in:archive"]);
    assert_eq!(
        archived["messages"].as_array().unwrap().len(),
        3,
        "{archived}"
    );
    for mailbox in ["INBOX", "Archive"] {
        assert_eq!(
            indexed_flags(home.path(), "m", mailbox),
            client.flags(mailbox).await.unwrap(),
            "{mailbox}"
        );
    }
    // Full text search still finds a moved message by its body.
    let found = ok(home.path(), &["search", "in:archive", "zebra"]);
    assert_eq!(found["messages"].as_array().unwrap().len(), 3, "{found}");
}

/// A first sync indexes headers, then text: between the two, searches by header already
/// work and full-text ones do not yet; the sync says so. A sync cut off during the text
/// pass leaves the text to the next one.
#[tokio::test]
async fn headers_are_searchable_before_the_text_and_a_cut_text_pass_resumes() {
    let Some(server) = server() else { return };
    let user = "sync-text";
    let messages = (0..1200).map(|i| {
        message(
            i,
            "alice@example.test",
            &format!("Item {i}"),
            "the platypus text",
        )
    });
    server.import_messages(user, messages).unwrap();
    let home = tempfile::tempdir().unwrap();
    let proxy =
        mailbroker_testkit::Proxy::start(server.imap_port, std::time::Duration::ZERO).unwrap();
    common::add_proxied(home.path(), "t", proxy.port, user);

    proxy.hold_at("BODY.PEEK[TEXT]");
    let dir = home.path().to_path_buf();
    let run = tokio::task::spawn_blocking(move || common::mb_text(&dir, &["sync"]));
    common::until_held(&proxy, "the text pass").await;
    // Headers first: the index already answers by subject, sender and state.
    let by_subject = ok(home.path(), &["search", "subject:\"Item 1199\""]);
    assert_eq!(by_subject["total"], 1, "{by_subject}");
    let by_sender = ok(home.path(), &["search", "from:alice", "--limit", "2000"]);
    if by_sender["total"] != 1200 {
        let shown: std::collections::BTreeSet<String> = by_sender["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["subject"].as_str().unwrap_or_default().to_string())
            .collect();
        let missing: Vec<String> = (0..1200)
            .map(|i| format!("Item {i}"))
            .filter(|s| !shown.contains(s))
            .collect();
        panic!(
            "{} of 1200 by sender; missing {:?}…",
            by_sender["total"],
            &missing[..missing.len().min(10)]
        );
    }
    assert_eq!(
        ok(home.path(), &["search", "platypus"])["total"],
        0,
        "text before its pass"
    );
    proxy.release();
    let first = run.await.unwrap();
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    assert!(
        first.stderr.contains("headers indexed")
            && first
                .stderr
                .contains("filling in the text of 1200 messages"),
        "{}",
        first.stderr
    );
    assert!(
        first.stdout.contains("text of 1200 filled in"),
        "{}",
        first.stdout
    );
    assert_eq!(ok(home.path(), &["search", "platypus"])["total"], 1200);
    let shown = ok(
        home.path(),
        &["search", "subject:\"Item 7\"", "--limit", "1"],
    );
    assert_eq!(shown["messages"][0]["snippet"], "the platypus text");

    // New mail, and the connection cut as its text is asked for: its headers stay indexed,
    // its text comes with the next sync.
    let mut client = ImapClient::connect(server, user).await.unwrap();
    for i in 0..3 {
        let body = message(
            2000 + i,
            "bob@example.test",
            &format!("Late {i}"),
            "a wombat text",
        );
        client.append("INBOX", "", &body).await.unwrap();
    }
    proxy.cut_after("BODY.PEEK[TEXT]");
    let cut = common::mb(home.path(), &["sync"]);
    assert_ne!(cut.code, 0, "{}", cut.stdout);
    assert_eq!(ok(home.path(), &["search", "from:bob"])["total"], 3);
    assert_eq!(ok(home.path(), &["search", "wombat"])["total"], 0);
    let resumed = ok(home.path(), &["sync"]);
    assert_eq!(resumed["accounts"][0]["text_filled"], 3, "{resumed}");
    assert_eq!(resumed["accounts"][0]["added"], 0, "{resumed}");
    assert_eq!(ok(home.path(), &["search", "wombat"])["total"], 3);
    // Nothing pending: the next sync fetches no text.
    let quiet = ok(home.path(), &["sync"]);
    assert_eq!(quiet["accounts"][0]["text_filled"], 0, "{quiet}");
}

/// Of several accounts, one that cannot be synced does not stop the others: each of them is
/// synced and reported, the failure is reported with its error type and next step, and the
/// exit code is the failure's. Asked for that one account alone, its error is the answer.
#[tokio::test]
async fn one_failing_account_does_not_stop_the_others() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    // Added first, so it is synced first: the others come after its failure.
    let proxy =
        mailbroker_testkit::Proxy::start(server.imap_port, std::time::Duration::ZERO).unwrap();
    common::add_proxied(home.path(), "a-gone", proxy.port, "sync-gone");
    drop(proxy);
    seed(server, "sync-fine", "INBOX", 3)
        .await
        .logout()
        .await
        .unwrap();
    add_account(server, home.path(), "fine", "sync-fine", &[]);

    let all = common::mb(home.path(), &["sync"]);
    assert_eq!(all.code, 4, "{}\n{}", all.stdout, all.stderr);
    assert_eq!(all.json["accounts"][0]["account"], "fine", "{}", all.stdout);
    assert_eq!(all.json["accounts"][0]["added"], 3, "{}", all.stdout);
    let failed = &all.json["failed"][0];
    assert_eq!(failed["account"], "a-gone", "{}", all.stdout);
    assert_eq!(
        failed["error_type"], "provider_unavailable",
        "{}",
        all.stdout
    );
    assert!(
        failed["error"].as_str().unwrap().contains("a-gone"),
        "{}",
        all.stdout
    );
    assert_eq!(ok(home.path(), &["search", "account:fine"])["total"], 3);

    let text = common::mb_text(home.path(), &["sync"]);
    assert_eq!(text.code, 4);
    assert!(
        text.stderr.contains("a-gone: not synced")
            && text.stderr.contains("error[provider_unavailable]")
            && text.stdout.contains("fine: +0 new"),
        "{}\n{}",
        text.stdout,
        text.stderr
    );
    let alone = common::mb(home.path(), &["sync", "--account", "a-gone"]);
    assert_eq!(alone.code, 4);
    assert_eq!(
        alone.json["error_type"], "provider_unavailable",
        "{}",
        alone.stdout
    );

    let session = common::mcp::connect(
        home.path(),
        common::mcp::client(None, rmcp::model::ProtocolVersion::V_2025_11_25),
    )
    .await;
    let synced = common::mcp::ok_call(&session, "sync_accounts", serde_json::json!({})).await;
    assert_eq!(synced["accounts"][0]["account"], "fine", "{synced}");
    assert_eq!(synced["failed"][0]["account"], "a-gone", "{synced}");
    assert_eq!(synced["failed"][0]["error_type"], "provider_unavailable");
    assert!(synced["failed"][0]["next_step"].is_string(), "{synced}");
    let alone = common::mcp::err_call(
        &session,
        "sync_accounts",
        serde_json::json!({ "account": "a-gone" }),
    )
    .await;
    assert_eq!(alone["error_type"], "provider_unavailable");
    session.cancel().await.ok();
}

/// Settling another client's moves reads the index, then writes it. In a deferred
/// transaction that upgrade fails at once (SQLITE_BUSY, no waiting) when another connection
/// commits between the two, as happens when syncs of two accounts of one home overlap (two
/// commands, or `serve`'s watchers). Both syncs, round after round, complete.
#[tokio::test]
async fn two_syncs_settling_moves_at_once_both_complete() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut clients = Vec::new();
    for (id, user) in [("a", "busy-a"), ("b", "busy-b")] {
        let mut client = common::seed(server, user, "INBOX", 200).await;
        client.create("Moved").await.ok();
        common::add_account(server, home.path(), id, user, &[]);
        clients.push(client);
    }
    ok(home.path(), &["sync"]);
    let bin = env!("CARGO_BIN_EXE_mailbroker");
    for round in 0..8u32 {
        for client in clients.iter_mut() {
            client.select("INBOX").await.unwrap();
            let first = 1 + round * 20;
            let uids: Vec<u32> = (first..first + 20).collect();
            client.move_each(&uids, "Moved").await.unwrap();
        }
        let runs: Vec<_> = ["a", "b"]
            .iter()
            .map(|id| {
                std::process::Command::new(bin)
                    .arg("--home")
                    .arg(home.path())
                    .args(["--json", "sync", "--account", id])
                    .env("MAILBROKER_SECRET_STORE", "index")
                    .env("MB_TEST_PW", mailbroker_testkit::PASSWORD)
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for run in runs {
            let out = run.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
    for id in ["a", "b"] {
        let moved = ok(home.path(), &["search", &format!("account:{id} in:Moved")]);
        assert_eq!(moved["total"], 160, "{id}");
    }
}
