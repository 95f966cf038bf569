//! Staged deletion against Dovecot: staging changes nothing, execution deletes exactly the
//! staged messages (trash or for good), survives kill -9, skips changed identities, and undo
//! brings trashed mail back.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{add_account, mb, ok, server};
use mailbroker_testkit::{ImapClient, message};
use serde_json::Value;

/// `n` INBOX messages from news@shop.example (the ones to delete) and 3 from a friend.
async fn setup(user: &str, n: usize) -> Option<(tempfile::TempDir, ImapClient)> {
    let server = server()?;
    let home = tempfile::tempdir().unwrap();
    let mut imap = ImapClient::connect(server, user).await.unwrap();
    for i in 0..n {
        let flags = if i % 2 == 0 { "\\Seen $Promo" } else { "" };
        let body = message(i, "news@shop.example", &format!("Offer {i}"), "buy");
        imap.append("INBOX", flags, &body).await.unwrap();
    }
    for i in 0..3 {
        let body = message(100 + i, "friend@example.test", &format!("Hello {i}"), "hi");
        imap.append("INBOX", "\\Flagged", &body).await.unwrap();
    }
    add_account(server, home.path(), "d", user, &[]);
    ok(home.path(), &["sync"]);
    Some((home, imap))
}

async fn subjects(imap: &mut ImapClient, mailbox: &str) -> Vec<String> {
    imap.subjects(mailbox).await.unwrap()
}

fn stage(home: &Path, args: &[&str]) -> i64 {
    let mut all = vec!["stage-delete"];
    all.extend(args);
    let staged = ok(home, &all);
    staged["manifest"]["id"].as_i64().expect("manifest id")
}

#[tokio::test]
async fn staging_changes_nothing_and_trash_is_undoable() {
    let Some((home, mut imap)) = setup("del-trash", 4).await else {
        return;
    };
    let before = imap.flags("INBOX").await.unwrap();
    let index_before = mb(home.path(), &["search", "in:inbox"]).stdout;
    let staged = ok(home.path(), &["stage-delete", "from:news@shop.example"]);
    let manifest = &staged["manifest"];
    assert_eq!(manifest["status"], "pending");
    assert_eq!(manifest["summary"]["count"], 4);
    assert_eq!(
        manifest["summary"]["top_senders"][0]["from"],
        "news@shop.example"
    );
    assert_eq!(manifest["summary"]["mailboxes"]["d/INBOX"], 4);
    let id = manifest["id"].as_i64().unwrap();
    // Staged, not deleted: the server and the index are as they were.
    assert_eq!(imap.flags("INBOX").await.unwrap(), before);
    assert_eq!(
        mb(home.path(), &["search", "in:inbox"]).stdout,
        index_before
    );
    let listed = ok(home.path(), &["delete-staged"]);
    assert_eq!(listed["manifests"][0]["id"], id);

    // Without a terminal it needs --yes; a dry run shows the plan and sends nothing.
    let refused = mb(home.path(), &["delete-staged", &id.to_string()]);
    assert_eq!(
        refused.json["error_type"], "confirmation_required",
        "{}",
        refused.stdout
    );
    let plan = ok(
        home.path(),
        &["delete-staged", &id.to_string(), "--dry-run"],
    );
    assert!(plan["plan"].to_string().contains("UID MOVE"), "{plan}");
    assert_eq!(imap.flags("INBOX").await.unwrap(), before);

    let run = ok(home.path(), &["delete-staged", &id.to_string(), "--yes"]);
    assert_eq!(run["status"], "done", "{run}");
    assert_eq!(run["counts"]["done"], 4, "{run}");
    let trash = subjects(&mut imap, "Trash").await;
    assert_eq!(trash, vec!["Offer 0", "Offer 1", "Offer 2", "Offer 3"]);
    assert_eq!(
        subjects(&mut imap, "INBOX").await,
        vec!["Hello 0", "Hello 1", "Hello 2"]
    );
    let again = ok(home.path(), &["delete-staged", &id.to_string(), "--yes"]);
    assert_eq!(again["status"], "done");

    // The run is a journaled change; undo moves the messages back with their flags.
    let change = run["change_id"].as_i64().unwrap();
    let undone = ok(home.path(), &["undo", &change.to_string()]);
    assert_eq!(undone["applied"], 4, "{undone}");
    assert!(imap.flags("Trash").await.unwrap().is_empty());
    let after = imap.flags("INBOX").await.unwrap();
    let promo = after
        .values()
        .filter(|f| f.contains(&"$Promo".to_string()))
        .count();
    assert_eq!((after.len(), promo), (7, 2), "{after:?}");
}

#[tokio::test]
async fn permanent_deletion_expunges_only_the_staged_messages() {
    let Some((home, mut imap)) = setup("del-perm", 3).await else {
        return;
    };
    // Another client flagged one of the friend's messages \Deleted and has not expunged it.
    let keep = *imap.flags("INBOX").await.unwrap().keys().last().unwrap();
    imap.store("INBOX", keep, "+FLAGS", "\\Deleted")
        .await
        .unwrap();
    ok(home.path(), &["sync"]);
    let id = stage(home.path(), &["--permanent", "from:news@shop.example"]);
    let plan = ok(
        home.path(),
        &["delete-staged", &id.to_string(), "--dry-run"],
    );
    assert!(plan["plan"].to_string().contains("UID EXPUNGE"), "{plan}");
    // `--yes` does not stand for a person: without a terminal, nothing is deleted.
    let unattended = mb(home.path(), &["delete-staged", &id.to_string(), "--yes"]);
    assert_eq!(
        unattended.json["error_type"], "confirmation_required",
        "{}",
        unattended.stdout
    );
    let step = unattended.json["next_step"].as_str().unwrap();
    assert!(
        step.contains("account set d --unattended-deletions"),
        "{step}"
    );
    assert_eq!(imap.flags("INBOX").await.unwrap().len(), 6);
    // The person at the terminal must type the word; anything else deletes nothing.
    let declined = common::at_terminal(home.path(), &["delete-staged", &id.to_string()], "yes\n");
    assert_eq!(
        declined.json()["error_type"],
        "confirmation_declined",
        "{}",
        declined.shown
    );
    assert_eq!(imap.flags("INBOX").await.unwrap().len(), 6);
    let done = common::at_terminal(
        home.path(),
        &["delete-staged", &id.to_string(), "--yes"],
        "delete\n",
    );
    assert!(
        done.shown.contains("Type delete to go on"),
        "{}",
        done.shown
    );
    let run = done.json();
    assert_eq!(run["counts"]["done"], 3, "{}", done.shown);
    let left = imap.flags("INBOX").await.unwrap();
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(left[&keep].contains(&"\\Deleted".to_string()));
    assert!(imap.flags("Trash").await.unwrap().is_empty());
    // Gone from the index, kept as metadata for the journal.
    let found = ok(home.path(), &["search", "from:news@shop.example"]);
    assert_eq!(found["messages"], Value::Array(vec![]));
    let change = ok(home.path(), &["changes", &run["change_id"].to_string()]);
    assert_eq!(change["change"]["applied"], 3);
}

#[tokio::test]
async fn a_recreated_mailbox_is_skipped_and_limits_and_cancel_hold() {
    let Some(server) = server() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let mut imap = ImapClient::connect(server, "del-ident").await.unwrap();
    imap.create("Work").await.unwrap();
    for i in 0..3 {
        let body = message(i, "boss@example.test", &format!("Old {i}"), "x");
        imap.append("Work", "", &body).await.unwrap();
    }
    add_account(server, home.path(), "d", "del-ident", &[]);
    ok(home.path(), &["sync"]);

    let over = mb(
        home.path(),
        &["stage-delete", "--max-messages", "2", "in:Work"],
    );
    assert_eq!(over.json["error_type"], "limit_exceeded", "{}", over.stdout);
    assert_eq!(
        ok(home.path(), &["delete-staged"])["manifests"],
        Value::Array(vec![])
    );

    let id = stage(home.path(), &["in:Work"]);
    // The mailbox is deleted and recreated with new mail: same UIDs, new UIDVALIDITY.
    imap.delete("Work").await.unwrap();
    imap.create("Work").await.unwrap();
    for i in 0..3 {
        let body = message(i, "boss@example.test", &format!("New {i}"), "x");
        imap.append("Work", "", &body).await.unwrap();
    }
    let run = mb(home.path(), &["delete-staged", &id.to_string(), "--yes"]);
    assert_eq!(run.json["counts"]["skipped"], 3, "{}", run.stdout);
    assert_eq!(
        subjects(&mut imap, "Work").await,
        vec!["New 0", "New 1", "New 2"]
    );
    assert!(imap.flags("Trash").await.unwrap().is_empty());

    // A cancelled manifest never runs.
    ok(home.path(), &["sync"]);
    let id = stage(home.path(), &["in:Work"]);
    ok(home.path(), &["delete-staged", "--cancel", &id.to_string()]);
    let refused = mb(home.path(), &["delete-staged", &id.to_string(), "--yes"]);
    assert_eq!(
        refused.json["error_type"], "validation_error",
        "{}",
        refused.stdout
    );
    assert_eq!(subjects(&mut imap, "Work").await.len(), 3);
}

fn counts(home: &Path, id: i64) -> Value {
    let listed = mb(home, &["delete-staged"]);
    listed.json["manifests"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["id"] == id))
        .map(|m| m["counts"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn killed_midway_a_run_resumes_without_loss_or_repeat() {
    let Some(server) = server() else {
        return;
    };
    const N: usize = 20_000;
    let home = tempfile::tempdir().unwrap();
    server
        .import_messages(
            "del-kill",
            (0..N).map(|i| message(i, "bulk@list.example", &format!("Bulk {i}"), "x")),
        )
        .unwrap();
    let mut imap = ImapClient::connect(server, "del-kill").await.unwrap();
    for i in 0..3 {
        let body = message(i, "friend@example.test", &format!("Keep {i}"), "x");
        imap.append("INBOX", "\\Deleted", &body).await.unwrap();
    }
    add_account(server, home.path(), "d", "del-kill", &[]);
    ok(home.path(), &["sync"]);
    let id = stage(home.path(), &["--permanent", "from:bulk@list.example"]);
    common::allow_unattended(home.path(), "d");

    let mut child = Command::new(env!("CARGO_BIN_EXE_mailbroker"))
        .arg("--home")
        .arg(home.path())
        .args([
            "--json",
            "delete-staged",
            &id.to_string(),
            "--yes",
            "--batch-size",
            "100",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        let done = counts(home.path(), id)["done"].as_u64().unwrap_or(0);
        if done >= 2_000 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "no progress");
        std::thread::sleep(Duration::from_millis(10));
    }
    // SIGKILL: no cleanup, no last checkpoint.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let at_kill = counts(home.path(), id);
    let done = at_kill["done"].as_u64().unwrap_or(0);
    let pending = at_kill["pending"].as_u64().unwrap_or(0);
    assert!(
        pending > 0,
        "the run finished before it could be killed: {at_kill}"
    );
    assert_eq!(done + pending, N as u64, "{at_kill}");

    let rerun = ok(home.path(), &["delete-staged", &id.to_string(), "--yes"]);
    assert_eq!(rerun["status"], "done", "{rerun}");
    assert_eq!(rerun["counts"], serde_json::json!({ "done": N }), "{rerun}");
    // The server holds none of the staged messages and all the unrelated ones.
    let left = subjects(&mut imap, "INBOX").await;
    assert_eq!(left, vec!["Keep 0", "Keep 1", "Keep 2"]);
    let changes = ok(home.path(), &["changes"]);
    let total: i64 = changes["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["applied"].as_i64().unwrap() + c["unchanged"].as_i64().unwrap())
        .sum();
    assert_eq!(
        total, N as i64,
        "each item is journaled exactly once: {changes}"
    );
}

/// An assistant with a shell could run `approve TOKEN --yes` or `delete-staged ID --yes`
/// itself. Approving needs the controlling terminal even with `--yes`, and says so before it
/// looks the token up, so a program without one learns nothing about any token. Unattended
/// permanent deletions (cron) run only for an account a person allowed at a terminal, which
/// is journaled and shown, and can be taken back.
#[tokio::test]
async fn only_a_person_at_a_terminal_approves_or_deletes_for_good() {
    let Some((home, mut imap)) = setup("del-person", 2).await else {
        return;
    };
    for args in [
        &["approve", "no-such-token", "--yes"][..],
        &["approve", "no-such-token"],
    ] {
        let run = mb(home.path(), args);
        assert_eq!(run.code, 6, "{args:?}: {}", run.stdout);
        assert_eq!(run.json["error_type"], "confirmation_required");
        assert!(
            run.json["error"].as_str().unwrap().contains("terminal"),
            "{}",
            run.stdout
        );
        assert!(!run.stdout.contains("no-such-token"), "{}", run.stdout);
    }
    let at_terminal = common::at_terminal(home.path(), &["approve", "no-such-token"], "y\n");
    assert_eq!(
        at_terminal.json()["error_type"],
        "not_found",
        "{}",
        at_terminal.shown
    );

    let refused = mb(
        home.path(),
        &["account", "set", "d", "--unattended-deletions"],
    );
    assert_eq!(
        refused.json["error_type"], "confirmation_required",
        "{}",
        refused.stdout
    );
    let id = stage(home.path(), &["--permanent", "from:news@shop.example"]);
    common::allow_unattended(home.path(), "d");
    let shown = ok(home.path(), &["account", "show", "d"]);
    assert!(
        shown["account"]["unattended_deletions_since"].is_i64(),
        "{shown}"
    );
    let run = ok(home.path(), &["delete-staged", &id.to_string(), "--yes"]);
    assert_eq!(run["counts"]["done"], 2, "{run}");
    assert_eq!(imap.flags("INBOX").await.unwrap().len(), 3);

    // Taken back: the next permanent run needs a person again.
    ok(
        home.path(),
        &["account", "set", "d", "--no-unattended-deletions"],
    );
    let id = stage(home.path(), &["--permanent", "from:friend@example.test"]);
    let again = mb(home.path(), &["delete-staged", &id.to_string(), "--yes"]);
    assert_eq!(
        again.json["error_type"], "confirmation_required",
        "{}",
        again.stdout
    );
    assert_eq!(imap.flags("INBOX").await.unwrap().len(), 3);
}

/// A staged message another client moved to Archive before the run was counted "already
/// done" (its UID was gone from INBOX), as if it had been deleted. It is left alone and
/// reported moved, in both modes, and the others are deleted.
#[tokio::test]
async fn a_staged_message_moved_since_is_left_alone_in_both_modes() {
    for (mode, user) in [("trash", "del-moved-t"), ("permanent", "del-moved-p")] {
        let Some((home, mut imap)) = setup(user, 3).await else {
            return;
        };
        common::allow_unattended(home.path(), "d");
        let mut args = vec!["from:news@shop.example"];
        if mode == "permanent" {
            args.insert(0, "--permanent");
        }
        let id = stage(home.path(), &args);
        imap.select("INBOX").await.unwrap();
        imap.move_each(&[1], "Archive").await.unwrap();
        let run = mb(home.path(), &["delete-staged", &id.to_string(), "--yes"]);
        let counts = &run.json["counts"];
        assert_eq!(counts["done"], 2, "{mode}: {}", run.stdout);
        assert_eq!(counts["moved"], 1, "{mode}: {}", run.stdout);
        assert_eq!(
            subjects(&mut imap, "Archive").await,
            ["Offer 0"],
            "{mode}: it stays where it went"
        );
    }
}

/// A surface that says yes; `Person(true)` is one where a person runs staged deletions.
struct Person(bool);

#[async_trait::async_trait]
impl mailbroker::change::Confirmation for Person {
    type Answer = ();

    fn runs_deletions(&self) -> bool {
        self.0
    }

    async fn confirm(
        &mut self,
        _: mailbroker::change::Asking<'_>,
    ) -> mailbroker_core::Result<mailbroker::change::Confirmed<()>> {
        Ok(mailbroker::change::Confirmed::Yes)
    }
}

/// A staged deletion's run was a second pipeline: it synced each account on one login, then
/// logged in again for its batches (the account free in between), read the account's row
/// three times, and read each batch's rows twice. It is an operation of the one change
/// request: per account one lease, one login and one read of its row, and each staged
/// message's row read once.
#[tokio::test]
async fn a_staged_deletion_logs_in_once_per_account_and_reads_each_row_once() {
    let Some(server) = server() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let mut accounts = Vec::new();
    for (account, user) in [("a", "del-once-a"), ("b", "del-once-b")] {
        let mut imap = ImapClient::connect(server, user).await.unwrap();
        for i in 0..15 {
            let body = message(i, "news@shop.example", &format!("Offer {i}"), "buy");
            imap.append("INBOX", "", &body).await.unwrap();
        }
        let proxy = mailbroker_testkit::Proxy::start(server.imap_port, Duration::ZERO).unwrap();
        let mut args = common::add_args(account, "127.0.0.1", proxy.port, user);
        args.extend(["--tls", "none"].map(String::from));
        assert_eq!(common::mb_args(home.path(), &args).code, 0);
        accounts.push((proxy, imap));
    }
    ok(home.path(), &["sync"]);
    let id = stage(home.path(), &["from:news@shop.example"]);
    accounts
        .iter()
        .for_each(|(proxy, _)| drop(proxy.take_sent()));

    let h = mailbroker::home::Home::resolve(Some(home.path())).unwrap();
    let store = mailbroker::store::Store::open(&h.database()).await.unwrap();
    let work = tokio_util::task::TaskTracker::new();
    let cx = mailbroker::change::Context {
        home: &h,
        store: &store,
        work: &work,
    };
    let request = mailbroker::change::ChangeRequest {
        operation: mailbroker::change::Operation::Run {
            manifest: id,
            batch_size: 10,
            progress: Default::default(),
        },
        dry_run: false,
        origin: "cli".into(),
        confirm_above: 25,
        budget: None,
        follow: Default::default(),
    };
    // Where no person runs deletions (an assistant's surface), its yes runs nothing.
    let refused = mailbroker::change::request(&cx, request.clone(), &mut Person(false)).await;
    let Err(refused) = refused else {
        panic!("a run went ahead without a person");
    };
    assert_eq!(refused.error_type(), "confirmation_required");
    assert_eq!(counts(home.path(), id)["pending"], 30);

    let before = store.reads();
    let outcome = mailbroker::change::request(&cx, request, &mut Person(true)).await;
    let after = store.reads();
    let Ok(mailbroker::change::Outcome::Ran { report, manifest }) = outcome else {
        panic!("the run did not run");
    };
    assert_eq!(manifest.counts.done, 30, "{manifest:?}");
    assert_eq!(report.tally.get(mailbroker_core::Outcome::Applied), 30);
    assert!(report.success(), "{report:?}");
    let read = after - before;
    assert_eq!(read.accounts, 2, "account rows read");
    // Each account's mailboxes: once to plan, once after the sync that may change them.
    assert_eq!(read.mailboxes, 4, "mailbox lists read");
    assert_eq!(read.messages, 30, "message rows read");
    for (proxy, imap) in &mut accounts {
        let sent = proxy.take_sent();
        assert_eq!(sent.matches(" LOGIN ").count(), 1, "{sent}");
        assert_eq!(imap.flags("Trash").await.unwrap().len(), 15);
    }
}
