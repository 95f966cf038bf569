//! The AppleScript route against a fake `osascript` that plays Mail.app (testkit's
//! `fake-osascript`: it reads each generated script from stdin, recognises it and answers as
//! Mail would): success, a partial failure, Mail's timeout and the runner's own, a move Mail
//! reports done that landed elsewhere, Mail not running, and no osascript at all.

use std::time::Duration;

use mailbroker_applescript::runner::Runner;
use mailbroker_applescript::{Ids, MailApp};
use mailbroker_core::{
    DeleteBatch, DeleteMode, FlagOp, MailboxCursor, MessageFlags, Outcome, Provider, RemoteId,
    Version, WriteBatch, WriteTarget,
};
use mailbroker_testkit::applescript::{FakeMail, message};
use serde_json::{Value, json};

fn mail(dir: &std::path::Path, n: i64) -> FakeMail {
    let inbox: Vec<Value> = (1..=n)
        .map(|i| {
            message(
                i,
                &format!("m{i}@shop.example"),
                &format!("News {i}"),
                false,
            )
        })
        .collect();
    FakeMail::new(
        dir,
        json!({ "Work": { "mailboxes": { "INBOX": inbox, "Archive": [], "Junk": [], "Trash": [] },
            "junk": "Junk", "trash": "Trash" } }),
    )
}

fn session(fake: &FakeMail, ids: Ids) -> MailApp {
    MailApp::new(Runner::at(fake.program.clone()).unwrap(), "Work", ids)
}

fn targets(range: std::ops::RangeInclusive<i64>) -> Vec<WriteTarget> {
    range
        .map(|i| WriteTarget {
            id: RemoteId::new(i.to_string()),
            version: Version::new("r0f0"),
            message_id: Some(format!("<m{i}@shop.example>")),
            size: None,
            flags: MessageFlags::default(),
        })
        .collect()
}

fn batch(targets: Vec<WriteTarget>, op: FlagOp, move_to: Option<&str>) -> WriteBatch {
    WriteBatch {
        mailbox: "INBOX".into(),
        synced: MailboxCursor::default(),
        op,
        move_to: move_to.map(str::to_string),
        move_synced: MailboxCursor::default(),
        folders: Default::default(),
        targets,
    }
}

fn read() -> FlagOp {
    FlagOp {
        read: Some(true),
        ..FlagOp::default()
    }
}

fn inbox(fake: &FakeMail) -> Vec<Value> {
    fake.read()["accounts"]["Work"]["mailboxes"]["INBOX"]
        .as_array()
        .cloned()
        .unwrap()
}

#[tokio::test]
async fn changes_land_in_scripts_of_fifty_and_are_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let fake = mail(dir.path(), 120);
    let mut app = session(&fake, Ids::Mail);
    let results = app
        .apply(&batch(targets(1..=120), read(), None))
        .await
        .unwrap();
    assert!(
        results.iter().all(|r| r.outcome == Outcome::Applied),
        "{results:?}"
    );
    assert!(results[0].observed.as_ref().is_some_and(|(_, f)| f.read));
    assert!(inbox(&fake).iter().all(|m| m["read"] == true));
    assert_eq!(
        fake.kinds(),
        ["apply", "apply", "apply"],
        "≤ 50 messages per script"
    );
    // The script went on stdin: osascript never had an argument.
    assert!(fake.argument_counts().iter().all(|n| n == "0"));
}

#[tokio::test]
async fn one_failing_message_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let fake = mail(dir.path(), 4);
    fake.update(|s| {
        s["faults"]["fail_message_ids"] = json!(["m2@shop.example"]);
        // Another client deleted message 3.
        s["accounts"]["Work"]["mailboxes"]["INBOX"]
            .as_array_mut()
            .unwrap()
            .retain(|m| m["id"] != 3);
    });
    let mut app = session(&fake, Ids::Mail);
    let results = app
        .apply(&batch(targets(1..=4), read(), None))
        .await
        .unwrap();
    let outcomes: Vec<Outcome> = results.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Applied,
            Outcome::Failed,
            Outcome::Stale,
            Outcome::Applied
        ]
    );
    let failed = results[1].error.as_ref().unwrap();
    assert_eq!(failed.error_type(), "provider_write_failed");
    assert_eq!(
        results[2].error.as_ref().unwrap().error_type(),
        "stale_state"
    );
}

#[tokio::test]
async fn a_move_mail_reports_done_but_put_elsewhere_is_verification_failed() {
    let dir = tempfile::tempdir().unwrap();
    let fake = mail(dir.path(), 2);
    let mut app = session(&fake, Ids::Mail);
    let moved = app
        .apply(&batch(targets(1..=1), FlagOp::default(), Some("Archive")))
        .await
        .unwrap();
    assert_eq!(moved[0].outcome, Outcome::Applied);
    let (mailbox, new_id) = moved[0].moved_to.clone().unwrap();
    assert_eq!(mailbox, "Archive");
    assert_ne!(new_id.as_str(), "1", "Mail gives a moved message a new id");

    // As Mail has done with Gmail moves: reported done, landed in the trash.
    fake.update(|s| s["faults"]["misfile_to"] = json!("Trash"));
    let misfiled = app
        .apply(&batch(targets(2..=2), FlagOp::default(), Some("Archive")))
        .await
        .unwrap();
    assert_eq!(misfiled[0].outcome, Outcome::Failed);
    let error = misfiled[0].error.as_ref().unwrap();
    assert_eq!(error.error_type(), "verification_failed", "{error:?}");
}

#[tokio::test]
async fn deletion_goes_to_the_trash_and_a_gone_message_counts_as_done() {
    let dir = tempfile::tempdir().unwrap();
    let fake = mail(dir.path(), 2);
    let mut app = session(&fake, Ids::Mail);
    let deletion = DeleteBatch {
        mailbox: "INBOX".into(),
        mode: DeleteMode::Trash,
        trash: Some("Trash".into()),
        targets: targets(1..=2),
        folders: Default::default(),
    };
    let first = app.delete(&deletion).await.unwrap();
    assert!(first.iter().all(|r| r.outcome == Outcome::Applied));
    assert_eq!(first[0].moved_to.as_ref().unwrap().0, "Trash");
    let again = app.delete(&deletion).await.unwrap();
    assert!(
        again.iter().all(|r| r.outcome == Outcome::Unchanged),
        "{again:?}"
    );
    let permanent = DeleteBatch {
        mode: DeleteMode::Permanent,
        ..deletion
    };
    let refused = app.delete(&permanent).await.unwrap_err();
    assert_eq!(refused.error_type(), "unsupported");
}

#[tokio::test]
async fn mail_timing_out_mail_not_running_and_no_osascript() {
    let dir = tempfile::tempdir().unwrap();
    let fake = mail(dir.path(), 2);
    let mut app = session(&fake, Ids::Mail);

    fake.update(|s| s["faults"]["timeout"] = json!(true));
    let timed_out = app
        .apply(&batch(targets(1..=2), read(), None))
        .await
        .unwrap();
    let error = timed_out[0].error.as_ref().unwrap();
    assert_eq!(
        timed_out[0].outcome,
        Outcome::Unknown,
        "a write may have happened"
    );
    assert_eq!(error.error_type(), "outcome_unknown");
    assert!(app.list_mailboxes().await.unwrap_err().error_type() == "provider_unavailable");

    fake.update(|s| {
        s["faults"] = json!({});
        s["running"] = json!(false);
    });
    let stopped = session(&fake, Ids::Mail)
        .list_mailboxes()
        .await
        .unwrap_err();
    assert_eq!(stopped.error_type(), "provider_unavailable");
    assert!(stopped.next_step().unwrap().contains("open Mail.app"));

    let missing = Runner::at(dir.path().join("no-such-osascript")).unwrap_err();
    assert_eq!(missing.error_type(), "unsupported");
    assert!(missing.message().contains("macOS"), "{missing:?}");
}

#[tokio::test]
async fn osascript_that_never_returns_is_killed_and_the_write_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let fake = mail(dir.path(), 1);
    fake.update(|s| s["faults"]["hang_secs"] = json!(30));
    let mut runner = Runner::at(fake.program.clone()).unwrap();
    runner.timeout_secs = 0;
    runner.grace = Duration::from_millis(500);
    let mut app = MailApp::new(runner, "Work", Ids::Mail);
    let started = std::time::Instant::now();
    let results = app
        .apply(&batch(targets(1..=1), read(), None))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(results[0].outcome, Outcome::Unknown);
}

#[tokio::test]
async fn as_a_fallback_messages_are_found_by_message_id_and_keep_their_ids() {
    let dir = tempfile::tempdir().unwrap();
    let fake = mail(dir.path(), 2);
    let mut app = session(&fake, Ids::Foreign);
    // The index's ids are another provider's (IMAP's UIDVALIDITY:UID), unknown to Mail.
    let mut foreign = targets(1..=2);
    for (n, t) in foreign.iter_mut().enumerate() {
        t.id = RemoteId::new(format!("77:{}", n + 500));
    }
    let moved = app
        .apply(&batch(foreign.clone(), read(), Some("Archive")))
        .await
        .unwrap();
    assert!(
        moved.iter().all(|r| r.outcome == Outcome::Applied),
        "{moved:?}"
    );
    assert_eq!(moved[0].moved_to.as_ref().unwrap().1, foreign[0].id);
    let sent = &fake.read()["log"][0]["params"]["targets"];
    assert!(sent.as_array().unwrap().iter().all(|t| t["mailId"] == ""));
}
