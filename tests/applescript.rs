//! The AppleScript route through the binary, with a fake `osascript` playing Mail.app
//! (testkit's `fake-osascript`, named by `MAILBROKER_OSASCRIPT`):
//! - a Mail.app-only account: added, synced by count and newest date, changed, moved to junk,
//!   staged for deletion to the trash, undone; tags and permanent deletion refused up front;
//! - an IMAP account that opted into the fallback, its server down: the update goes through
//!   Mail.app, the report and the journal say so, and undo takes the same route;
//! - an IMAP account that did not opt in never uses it.

mod common;

use common::{mb_with, server};
use mailbroker_testkit::applescript::{FakeMail, message};
use mailbroker_testkit::{ImapClient, Proxy};
use serde_json::{Value, json};

/// Adds the Mail.app account "Work" as account "mac".
const ADD: [&str; 7] = [
    "account",
    "add",
    "applescript",
    "--id",
    "mac",
    "--mail-account",
    "Work",
];

fn env(fake: &FakeMail) -> [(&'static str, &str); 1] {
    [(
        "MAILBROKER_OSASCRIPT",
        fake.program.to_str().expect("a UTF-8 path"),
    )]
}

/// Runs mailbroker with the fake Mail.app and insists on success.
fn ok(home: &std::path::Path, fake: &FakeMail, args: &[&str]) -> Value {
    let run = mb_with(home, args, &env(fake));
    assert_eq!(run.code, 0, "{args:?}\n{}\n{}", run.stdout, run.stderr);
    run.json
}

fn mailbox<'a>(state: &'a Value, path: &str) -> &'a Vec<Value> {
    state["accounts"]["Work"]["mailboxes"][path]
        .as_array()
        .unwrap()
}

#[test]
fn a_mail_app_account_syncs_changes_and_undoes_through_applescript() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let inbox: Vec<Value> = (1..=6)
        .map(|i| {
            message(
                i,
                &format!("n{i}@shop.example"),
                &format!("Offer {i}"),
                false,
            )
        })
        .collect();
    let fake = FakeMail::new(
        dir.path(),
        json!({ "Work": { "mailboxes": { "INBOX": inbox, "Archive": [], "Junk": [], "Trash": [] },
            "junk": "Junk", "trash": "Trash" } }),
    );
    let added = ok(&home, &fake, &ADD);
    assert_eq!(added["account"]["provider"], "applescript", "{added}");
    assert!(
        added["account"]["mailboxes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "Junk" && m["role"] == "junk")
    );

    let listings = |fake: &FakeMail| fake.kinds().iter().filter(|k| *k == "messages").count();
    let synced = ok(&home, &fake, &["sync"]);
    assert_eq!(synced["accounts"][0]["added"], 6, "{synced}");
    assert_eq!(listings(&fake), 1, "the empty mailboxes need no listing");
    let again = ok(&home, &fake, &["sync"]);
    assert_eq!(again["accounts"][0]["added"], 0, "{again}");
    assert_eq!(
        listings(&fake),
        1,
        "an unchanged mailbox (count, newest) is not listed again"
    );
    // A message arrives in Mail.app: the next sync lists that mailbox again.
    fake.update(|s| {
        let inbox = s["accounts"]["Work"]["mailboxes"]["INBOX"]
            .as_array_mut()
            .unwrap();
        inbox.push(message(7, "n7@shop.example", "Offer 7", false));
    });
    let third = ok(&home, &fake, &["sync"]);
    assert_eq!(listings(&fake), 2, "{third}");
    assert_eq!(
        common::ok(&home, &["search", "subject:\"Offer 7\""])["total"],
        1
    );

    let read = ok(
        &home,
        &fake,
        &["update", "--query", "from:shop", "--read", "--yes"],
    );
    assert_eq!(read["applied"], 7, "{read}");
    assert!(read.get("routes").is_none(), "its own route: {read}");
    assert!(
        mailbox(&fake.read(), "INBOX")
            .iter()
            .all(|m| m["read"] == true)
    );
    let change = read["change_id"].to_string();
    let undone = ok(&home, &fake, &["undo", &change, "--yes"]);
    assert_eq!(undone["applied"], 7, "{undone}");
    assert!(
        mailbox(&fake.read(), "INBOX")
            .iter()
            .all(|m| m["read"] == false)
    );

    let junk = ok(
        &home,
        &fake,
        &[
            "update",
            "--query",
            "subject:\"Offer 1\"",
            "--move-to",
            "junk",
            "--yes",
        ],
    );
    assert_eq!(junk["applied"], 1, "{junk}");
    assert_eq!(mailbox(&fake.read(), "Junk").len(), 1);

    // What the route cannot do is refused before anything is planned or sent.
    let before = fake.kinds().len();
    for refused in [
        vec![
            "update",
            "--query",
            "from:shop",
            "--add-tag",
            "Work",
            "--yes",
        ],
        vec!["stage-delete", "from:shop", "--permanent"],
    ] {
        let run = mb_with(&home, &refused, &env(&fake));
        assert_eq!(
            run.json["error_type"], "unsupported",
            "{refused:?}: {}",
            run.stdout
        );
        assert!(run.json["error"].as_str().unwrap().contains("AppleScript"));
    }
    assert_eq!(fake.kinds().len(), before, "nothing ran in Mail.app");

    let staged = ok(&home, &fake, &["stage-delete", "subject:\"Offer 2\""]);
    let manifest = staged["manifest"]["id"].to_string();
    let run = ok(&home, &fake, &["delete-staged", &manifest, "--yes"]);
    assert_eq!(run["counts"]["done"], 1, "{run}");
    assert_eq!(mailbox(&fake.read(), "Trash").len(), 1);

    let doctor = ok(&home, &fake, &["account", "doctor", "mac"]);
    assert_eq!(doctor["doctor"]["route"], "applescript", "{doctor}");
    // Moved to a machine without osascript: the doctor says what is missing.
    let missing = dir.path().join("no-osascript");
    let elsewhere = mb_with(
        &home,
        &["account", "doctor", "mac"],
        &[("MAILBROKER_OSASCRIPT", missing.to_str().unwrap())],
    );
    assert_eq!(
        elsewhere.json["error_type"], "unsupported",
        "{}",
        elsewhere.stdout
    );
    assert!(
        elsewhere.json["error"]
            .as_str()
            .unwrap()
            .contains("only on macOS")
    );
}

#[test]
fn without_osascript_every_call_says_it_needs_macos() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("osascript");
    let run = mb_with(
        dir.path(),
        &ADD,
        &[("MAILBROKER_OSASCRIPT", missing.to_str().unwrap())],
    );
    assert_eq!(run.json["error_type"], "unsupported", "{}", run.stdout);
    assert!(run.json["error"].as_str().unwrap().contains("macOS"));
}

/// IMAP account "i" for a Dovecot user with four INBOX messages, reached through a proxy and
/// synced, and Mail.app holding the same four (by Message-ID, under Mail's own ids).
async fn synced_account(
    user: &str,
) -> Option<(tempfile::TempDir, std::path::PathBuf, FakeMail, Proxy)> {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let server = server()?;
    let mut client = ImapClient::connect(server, user).await.unwrap();
    for i in 0..4 {
        let body = mailbroker_testkit::message(i, "news@shop.example", &format!("Deal {i}"), "b");
        client.append("INBOX", "", &body).await.unwrap();
    }
    let inbox: Vec<Value> = (0..4)
        .map(|i| {
            message(
                100 + i,
                &format!("m{i}@example.test"),
                &format!("Deal {i}"),
                false,
            )
        })
        .collect();
    let fake = FakeMail::new(
        dir.path(),
        json!({ "Work": { "mailboxes": { "INBOX": inbox, "Archive": [], "Trash": [] },
            "junk": null, "trash": "Trash" } }),
    );
    let proxy = Proxy::start(server.imap_port, std::time::Duration::ZERO).unwrap();
    common::add_proxied(&home, "i", proxy.port, user);
    ok(&home, &fake, &["sync"]);
    Some((dir, home, fake, proxy))
}

/// The account's server goes away.
fn down(proxy: Proxy) {
    drop(proxy);
    std::thread::sleep(std::time::Duration::from_millis(300));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opted_in_account_falls_back_to_mail_app_when_its_server_is_down() {
    let Some((_dir, home, fake, proxy)) = synced_account("fallback-on").await else {
        return;
    };
    let set = [
        "account",
        "set",
        "i",
        "--fallback",
        "applescript",
        "--mail-account",
        "Work",
    ];
    let shown = ok(&home, &fake, &set);
    assert_eq!(
        shown["account"]["fallback"]["provider"], "applescript",
        "{shown}"
    );

    down(proxy);
    let run = mb_with(
        &home,
        &["update", "--query", "in:inbox", "--read", "--flag", "--yes"],
        &env(&fake),
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report = run.json;
    assert_eq!(report["applied"], 4, "{report}");
    assert_eq!(
        report["routes"]["applescript"].as_array().map(Vec::len),
        Some(4),
        "{report}"
    );
    assert!(
        mailbox(&fake.read(), "INBOX")
            .iter()
            .all(|m| m["read"] == true && m["flagged"] == true)
    );
    let change = report["change_id"].to_string();
    let journal = ok(&home, &fake, &["changes", &change]);
    let items = journal["change"]["items"].as_array().unwrap();
    assert!(
        items.iter().all(|i| i["route"] == "applescript"),
        "{journal}"
    );
    // The index holds what Mail.app read back: asking again changes nothing.
    let again = ok(
        &home,
        &fake,
        &["update", "--query", "in:inbox", "--read", "--yes"],
    );
    assert_eq!(again["unchanged"], 4, "{again}");

    // Undo takes the same route while the server is still down.
    let undone = ok(&home, &fake, &["undo", &change, "--yes"]);
    assert_eq!(undone["applied"], 4, "{undone}");
    assert_eq!(
        undone["routes"]["applescript"].as_array().map(Vec::len),
        Some(4)
    );
    assert!(
        mailbox(&fake.read(), "INBOX")
            .iter()
            .all(|m| m["read"] == false && m["flagged"] == false)
    );

    // A sync needs the server: the fallback does not stand in for it.
    let sync = mb_with(&home, &["sync"], &env(&fake));
    assert_ne!(sync.code, 0);
    assert!(
        sync.stdout.contains("provider_unavailable"),
        "{}",
        sync.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_that_did_not_opt_in_never_uses_mail_app() {
    let Some((_dir, home, fake, proxy)) = synced_account("fallback-off").await else {
        return;
    };
    down(proxy);
    let run = mb_with(
        &home,
        &["update", "--query", "in:inbox", "--read", "--yes"],
        &env(&fake),
    );
    assert_eq!(
        run.json["error_type"], "provider_unavailable",
        "{}",
        run.stdout
    );
    assert!(
        fake.kinds().is_empty(),
        "Mail.app was never asked: {:?}",
        fake.kinds()
    );
}

/// A Mail.app mailbox whose own name holds a slash (`Clients/Acme` at the top) and the child
/// `Acme` of `Clients` used to share one path, so one of them was never indexed and a move
/// to it could land in the other. Each is its own mailbox now: `Clients\/Acme` and
/// `Clients/Acme`.
#[test]
fn a_slash_in_a_mailbox_name_never_merges_two_mailboxes() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let msgs = |subject: &str, n: i64, first: i64| -> Vec<Value> {
        (first..first + n)
            .map(|i| message(i, &format!("m{i}@mac.example"), subject, false))
            .collect()
    };
    let fake = FakeMail::new(
        dir.path(),
        json!({ "Work": { "mailboxes": {
            "INBOX": msgs("Arrival", 2, 1),
            r"Clients\/Acme": msgs("Top", 3, 10),
            "Clients": [],
            "Clients/Acme": msgs("Child", 4, 20),
            "Trash": [] },
            "junk": null, "trash": "Trash" } }),
    );
    ok(&home, &fake, &ADD);
    let synced = ok(&home, &fake, &["sync"]);
    assert_eq!(synced["accounts"][0]["added"], 9, "{synced}");
    let count = |q: &str| common::ok(&home, &["search", q])["total"].clone();
    assert_eq!(count(r"in:Clients\/Acme"), 3);
    assert_eq!(count("in:Clients/Acme"), 4);
    let moved = ok(
        &home,
        &fake,
        &[
            "update",
            "--query",
            "subject:Arrival",
            "--move-to",
            r"Clients\/Acme",
            "--yes",
        ],
    );
    assert_eq!(moved["applied"], 2, "{moved}");
    let state = fake.read();
    assert_eq!(mailbox(&state, r"Clients\/Acme").len(), 5);
    assert_eq!(mailbox(&state, "Clients/Acme").len(), 4);
    assert_eq!(count(r"in:Clients\/Acme"), 5);
}

/// Through the fallback, Mail.app finds a message by its Message-ID alone, which senders
/// choose: with two in the mailbox sharing it, the first was taken, maybe the wrong one; and
/// a move's read-back could find another message with it in the target. Neither is taken
/// now: two in the source leave it alone (`stale_state`), two in the target make the move's
/// outcome unknown (it was sent), and no index row is moved onto another message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fallback_never_takes_one_of_two_messages_that_share_a_message_id() {
    let Some((_dir, home, fake, proxy)) = synced_account("fallback-dup").await else {
        return;
    };
    fake.update(|s| {
        let boxes = &mut s["accounts"]["Work"]["mailboxes"];
        let inbox = boxes["INBOX"].as_array_mut().unwrap();
        inbox.push(message(200, "m0@example.test", "Not Deal 0", false));
        boxes["Archive"].as_array_mut().unwrap().push(message(
            201,
            "m1@example.test",
            "Old copy",
            false,
        ));
    });
    let set = [
        "account",
        "set",
        "i",
        "--fallback",
        "applescript",
        "--mail-account",
        "Work",
    ];
    ok(&home, &fake, &set);
    down(proxy);
    let run = mb_with(
        &home,
        &[
            "update",
            "--query",
            "in:inbox",
            "--move-to",
            "Archive",
            "--yes",
        ],
        &env(&fake),
    );
    let report = &run.json;
    assert_eq!(report["applied"], 2, "{}", run.stdout);
    assert_eq!(report["stale"], 1, "{}", run.stdout);
    assert_eq!(report["failed"], 0, "{}", run.stdout);
    assert_eq!(report["unknown"], 1, "it was sent: {}", run.stdout);
    let outcome_of = |subject: &str| {
        let id =
            common::ok(&home, &["search", &format!("subject:\"{subject}\"")])["messages"][0]["id"]
                .as_i64()
                .unwrap();
        report["failures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id)
            .map(|f| f["outcome"].as_str().unwrap().to_string())
    };
    assert_eq!(outcome_of("Deal 0").as_deref(), Some("stale"), "{report}");
    assert_eq!(outcome_of("Deal 1").as_deref(), Some("unknown"), "{report}");
    let state = fake.read();
    let inbox_ids: Vec<&str> = mailbox(&state, "INBOX")
        .iter()
        .map(|m| m["message_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        inbox_ids,
        ["m0@example.test", "m0@example.test"],
        "both left alone"
    );
    assert_eq!(mailbox(&state, "Archive").len(), 4);
    // Neither message's index row moved.
    let still = common::ok(&home, &["search", "in:inbox"]);
    assert_eq!(still["total"], 2, "{still}");
}

/// A reply draft in Mail.app: Mail's own `reply` to the original (so Mail threads it), with
/// the recipients, subject and body mailbroker made, saved in Drafts and never sent; `undo`
/// deletes it while it is as saved, and leaves one Mail saved anew after the person's edit.
#[test]
fn a_reply_draft_in_mail_app_is_threaded_and_undone_while_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mut original = message(1, "orig1@example.test", "Lunch plans", false);
    original["source"] = json!(
        "From: Alice <alice@example.test>\r\nTo: user@example.test, carol@example.test\r\n\
         Cc: dave@example.test\r\nSubject: Lunch plans\r\nMessage-ID: <orig1@example.test>\r\n\
         \r\nShall we meet at noon?\r\n"
    );
    let fake = FakeMail::new(
        dir.path(),
        json!({ "Work": { "mailboxes": { "INBOX": [original], "Drafts": [], "Trash": [] },
            "trash": "Trash" } }),
    );
    let mut add = ADD.to_vec();
    add.extend(["--email", "user@example.test"]);
    ok(&home, &fake, &add);
    ok(&home, &fake, &["sync"]);
    let found = common::ok(&home, &["search", "subject:\"Lunch plans\""]);
    let id = common::message_ids(&found)[0].to_string();
    let body = dir.path().join("body.txt");
    std::fs::write(&body, "Noon suits me.\n").unwrap();
    let body = body.to_str().unwrap();
    let reply = ["draft", "--reply-to", &id, "--all", "--body-file", body];

    let saved = ok(&home, &fake, &reply);
    assert_eq!(saved["applied"], 1, "{saved}");
    let drafts = mailbox(&fake.read(), "Drafts").clone();
    assert_eq!(drafts.len(), 1, "{drafts:?}");
    let d = &drafts[0];
    assert_eq!(
        d["in_reply_to"], "orig1@example.test",
        "Mail's reply threads it"
    );
    assert_eq!(d["reply_all"], true);
    assert_eq!(d["subject"], "Re: Lunch plans");
    assert_eq!(d["to"], json!(["alice@example.test"]));
    assert_eq!(d["cc"], json!(["carol@example.test", "dave@example.test"]));
    assert_eq!(d["content"], "Noon suits me.\n");
    assert_eq!(
        fake.kinds().iter().filter(|k| *k == "draft").count(),
        1,
        "{:?}",
        fake.kinds()
    );
    let undone = ok(&home, &fake, &["undo", &saved["change_id"].to_string()]);
    assert_eq!(undone["applied"], 1, "{undone}");
    assert!(
        mailbox(&fake.read(), "Drafts").is_empty(),
        "undo deletes it"
    );
    assert_eq!(mailbox(&fake.read(), "Trash").len(), 1);

    let saved = ok(&home, &fake, &reply);
    // The person edits it in Mail, which saves it as a new message.
    fake.update(|s| {
        let drafts = s["accounts"]["Work"]["mailboxes"]["Drafts"]
            .as_array_mut()
            .unwrap();
        drafts[0]["id"] = json!(5000);
        drafts[0]["message_id"] = json!("edited@fake-mail.local");
    });
    let refused = mb_with(
        &home,
        &["undo", &saved["change_id"].to_string()],
        &env(&fake),
    );
    assert_eq!(
        refused.json["error_type"], "stale_state",
        "{}",
        refused.stdout
    );
    assert_eq!(
        mailbox(&fake.read(), "Drafts").len(),
        1,
        "an edited draft is kept"
    );
}
