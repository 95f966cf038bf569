//! Writes against a real JMAP server (a private Cyrus 3.6): 1,000 keyword edits in two
//! requests after the session (preconditions, then `Email/set` with its read-back), an email
//! another client changed left alone as `stale_state`, a tag holding `/` stored as spelt, and
//! a move to the archive.

use std::collections::BTreeMap;

use mailbroker_core::{
    FlagOp, MailboxCursor, Outcome, Provider, SyncRequest, WriteBatch, WriteTarget,
};
use mailbroker_jmap::{Auth, JmapProvider};
use mailbroker_testkit::cyrus::Cyrus;
use mailbroker_testkit::memory::MemoryIndex;
use serde_json::{Value, json};

fn cyrus() -> Option<&'static Cyrus> {
    mailbroker_testkit::cyrus::shared()
}

async fn session(cyrus: &Cyrus, user: &str, index: &MemoryIndex) -> JmapProvider {
    let auth = Auth::Basic {
        username: user.into(),
        password: mailbroker_testkit::PASSWORD.into(),
    };
    JmapProvider::connect(&cyrus.url(), auth, index.account_cursor.as_deref())
        .await
        .unwrap()
}

/// A user with `n` Inbox emails, synced into a fresh index; their ids.
async fn synced(cyrus: &Cyrus, user: &str, n: usize) -> (MemoryIndex, Vec<String>) {
    cyrus.add_user(user).await.unwrap();
    let ids = cyrus
        .seed(user, "Inbox", n, "dana@example.test", &[])
        .await
        .unwrap();
    let mut index = MemoryIndex::new();
    let mut jmap = session(cyrus, user, &index).await;
    jmap.sync(&SyncRequest::default(), &mut index)
        .await
        .unwrap();
    (index, ids)
}

/// The batch the planner would build for `ids` of the Inbox.
fn batch(index: &MemoryIndex, ids: &[String], op: FlagOp, move_to: Option<&str>) -> WriteBatch {
    let targets = ids
        .iter()
        .map(|id| {
            let meta = index.meta(id).unwrap();
            WriteTarget {
                id: meta.id.clone(),
                version: meta.version.clone(),
                message_id: meta.message_id.clone(),
                size: Some(meta.size),
                flags: meta.flags.clone(),
            }
        })
        .collect();
    let folders: BTreeMap<String, String> = index
        .roles
        .keys()
        .filter_map(|name| Some((name.clone(), index.remote_of(name)?)))
        .collect();
    WriteBatch {
        mailbox: "Inbox".into(),
        synced: index.cursors.get("Inbox").cloned().unwrap_or_default(),
        op,
        move_to: move_to.map(str::to_string),
        move_synced: MailboxCursor::default(),
        targets,
        folders,
    }
}

/// The server's keywords and mailbox ids of `id`.
async fn on_server(cyrus: &Cyrus, user: &str, id: &str) -> Value {
    cyrus.email(user, id).await.unwrap()
}

fn tag(name: &str) -> FlagOp {
    FlagOp {
        add_tags: vec![name.into()],
        ..FlagOp::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_keyword_edits_take_two_requests_after_the_session() {
    let Some(cyrus) = cyrus() else { return };
    let (index, ids) = synced(cyrus, "w-many", 1000).await;
    let mut jmap = session(cyrus, "w-many", &index).await;
    let op = FlagOp {
        read: Some(true),
        ..tag("Invoice")
    };
    let results = jmap.apply(&batch(&index, &ids, op, None)).await.unwrap();
    assert_eq!(results.len(), 1000);
    assert!(
        results.iter().all(|r| r.outcome == Outcome::Applied),
        "{:?}",
        results[0]
    );
    let observed = &results[0].observed.as_ref().unwrap().1;
    assert!(
        observed.read
            && observed
                .tags
                .iter()
                .any(|t| t.eq_ignore_ascii_case("Invoice"))
    );
    // The session, Email/changes, and Email/set with its read-back.
    assert_eq!(jmap.commands_sent(), 3);
    let server = on_server(cyrus, "w-many", &ids[999]).await;
    assert_eq!(server["keywords"]["$seen"], true, "{server}");
}

/// An email another client changed over IMAP between the sync and the write is
/// `stale_state` and left as that client left it; the others are written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_email_changed_elsewhere_is_stale_and_untouched() {
    let Some(cyrus) = cyrus() else { return };
    let user = "w-stale";
    let (index, ids) = synced(cyrus, user, 4).await;
    // Another client flags the third email over IMAP (Cyrus's own imapd, the same mail).
    let mut imap = mailbroker_testkit::ImapClient::connect_port(cyrus.imap_port, user)
        .await
        .unwrap();
    let uids: Vec<u32> = imap.flags("INBOX").await.unwrap().keys().copied().collect();
    imap.store("INBOX", uids[2], "+FLAGS", "\\Flagged")
        .await
        .unwrap();
    imap.logout().await.unwrap();
    let mut changed = Vec::new();
    for id in &ids {
        if on_server(cyrus, user, id).await["keywords"]["$flagged"] == true {
            changed.push(id.clone());
        }
    }
    let [changed] = &changed[..] else {
        panic!("one email should be flagged over IMAP: {changed:?}");
    };
    let other = ids.iter().find(|id| *id != changed).unwrap();
    let mut jmap = session(cyrus, user, &index).await;
    let results = jmap
        .apply(&batch(&index, &ids, tag("Later"), None))
        .await
        .unwrap();
    let outcome = |id: &str| {
        results
            .iter()
            .find(|r| r.id.as_str() == id)
            .unwrap()
            .outcome
    };
    assert_eq!(outcome(changed), Outcome::Stale);
    assert_eq!(outcome(other), Outcome::Applied);
    let untouched = on_server(cyrus, user, changed).await;
    assert!(untouched["keywords"].get("Later").is_none(), "{untouched}");
    assert!(untouched["keywords"].get("later").is_none(), "{untouched}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_with_a_slash_is_stored_as_spelt_and_a_move_lands() {
    let Some(cyrus) = cyrus() else { return };
    let user = "w-slash";
    let (index, ids) = synced(cyrus, user, 2).await;
    let mut jmap = session(cyrus, user, &index).await;
    let results = jmap
        .apply(&batch(&index, &ids[..1], tag("work/clients"), None))
        .await
        .unwrap();
    assert_eq!(results[0].outcome, Outcome::Applied, "{results:?}");
    let server = on_server(cyrus, user, &ids[0]).await;
    assert_eq!(server["keywords"]["work/clients"], true, "{server}");
    assert!(
        server["keywords"].get("work~1clients").is_none(),
        "{server}"
    );

    let moved = jmap
        .apply(&batch(
            &index,
            &ids[1..],
            FlagOp::default(),
            Some("Archive"),
        ))
        .await
        .unwrap();
    assert_eq!(moved[0].outcome, Outcome::Applied, "{moved:?}");
    assert_eq!(moved[0].moved_to.as_ref().unwrap().0, "Archive");
    let boxes = cyrus.mailboxes(user).await.unwrap();
    let server = on_server(cyrus, user, &ids[1]).await;
    assert_eq!(
        server["mailboxIds"],
        json!({ boxes["Archive"].clone(): true }),
        "{server}"
    );
}
