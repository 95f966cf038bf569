//! Sync against a real JMAP server (a private Cyrus 3.6) into testkit's in-memory index:
//! 2,000 emails in nested mailboxes matching the server's own listing, then exactly what
//! another client changed (keywords, a move, a destroyed email) by `Email/changes`, a moved
//! email keeping its row, and a resync with nothing to do in one request.

use std::collections::BTreeSet;

use mailbroker_core::{Provider, SyncMode, SyncRequest};
use mailbroker_jmap::{Auth, JmapProvider};
use mailbroker_testkit::cyrus::Cyrus;
use mailbroker_testkit::memory::MemoryIndex;
use serde_json::{Value, json};

fn cyrus() -> Option<&'static Cyrus> {
    mailbroker_testkit::cyrus::shared()
}

fn auth(user: &str) -> Auth {
    Auth::Basic {
        username: user.into(),
        password: mailbroker_testkit::PASSWORD.into(),
    }
}

/// One sync of `user` from the index's account cursor; the reports and requests sent.
async fn sync(
    cyrus: &Cyrus,
    user: &str,
    index: &mut MemoryIndex,
) -> (Vec<(String, SyncMode, u64, u64, u64)>, u64) {
    let cursor = index.account_cursor.clone();
    let mut jmap = JmapProvider::connect(&cyrus.url(), auth(user), cursor.as_deref())
        .await
        .unwrap();
    let reports = jmap.sync(&SyncRequest::default(), index).await.unwrap();
    let reports = reports
        .into_iter()
        .map(|r| (r.mailbox, r.mode, r.added, r.changed, r.removed))
        .collect();
    (reports, jmap.commands_sent())
}

/// The ids of the emails the server holds in mailbox `id`.
async fn on_server(cyrus: &Cyrus, user: &str, mailbox: &str) -> BTreeSet<String> {
    let got = cyrus
        .call(
            user,
            json!([["Email/query", { "accountId": user, "filter": { "inMailbox": mailbox }, "limit": 10000 }, "q"]]),
        )
        .await
        .unwrap();
    ids(&got[0][1]["ids"])
}

fn ids(list: &Value) -> BTreeSet<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i.as_str().map(str::to_string))
        .collect()
}

fn indexed(index: &MemoryIndex, path: &str) -> BTreeSet<String> {
    index
        .mailboxes
        .get(path)
        .map(|m| m.keys().map(|id| id.as_str().to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sync_then_exactly_the_changes_another_client_made() {
    let Some(cyrus) = cyrus() else { return };
    let user = "sync";
    cyrus.add_user(user).await.unwrap();
    let boxes = cyrus.mailboxes(user).await.unwrap();
    let made = cyrus
        .call(
            user,
            json!([["Mailbox/set", { "accountId": user, "create": {
                "p": { "name": "Projects", "parentId": null },
                "y": { "name": "2026", "parentId": "#p" },
            } }, "c"]]),
        )
        .await
        .unwrap();
    let projects = made[0][1]["created"]["p"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let year = made[0][1]["created"]["y"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let inbox = cyrus
        .seed(user, "Inbox", 1200, "alice@example.test", &[])
        .await
        .unwrap();
    cyrus
        .seed(user, "Projects", 500, "bob@example.test", &["$seen"])
        .await
        .unwrap();
    cyrus
        .seed(user, "2026", 300, "carol@example.test", &["$flagged"])
        .await
        .unwrap();

    let mut index = MemoryIndex::new();
    let (reports, _) = sync(cyrus, user, &mut index).await;
    for (path, id, n) in [
        ("Inbox", &boxes["Inbox"], 1200),
        ("Projects", &projects, 500),
        ("Projects/2026", &year, 300),
    ] {
        let report = reports.iter().find(|r| r.0 == path).unwrap();
        assert_eq!((report.1, report.2), (SyncMode::Full, n), "{reports:?}");
        assert_eq!(
            indexed(&index, path),
            on_server(cyrus, user, id).await,
            "{path}"
        );
    }
    let seen = index.meta(&inbox[0]).unwrap();
    assert!(!seen.flags.read, "{seen:?}");
    assert_eq!(seen.from, "alice@example.test");
    assert!(index.roles["Trash"].is_some(), "{:?}", index.roles);

    // Another client: a keyword and a flag, a move to Archive, a destroyed email.
    let moved = &inbox[1];
    let (moved_local, _) = (index.local(moved).unwrap().1, ());
    cyrus
        .call(
            user,
            json!([["Email/set", { "accountId": user,
                "update": {
                    inbox[2].clone(): { "keywords/work": true, "keywords/$flagged": true },
                    moved.clone(): { format!("mailboxIds/{}", boxes["Inbox"]): null, format!("mailboxIds/{}", boxes["Archive"]): true },
                },
                "destroy": [inbox[3].clone()],
            }, "u"]]),
        )
        .await
        .unwrap();
    let (reports, requests) = sync(cyrus, user, &mut index).await;
    let inbox_report = reports.iter().find(|r| r.0 == "Inbox").unwrap();
    assert_eq!(inbox_report.1, SyncMode::Delta, "{reports:?}");
    assert_eq!(inbox_report.4, 1, "one destroyed: {reports:?}");
    // The session, the mailboxes with the changes, and one read of the two changed.
    assert_eq!(requests, 3, "{reports:?}");
    let tagged = index.meta(&inbox[2]).unwrap();
    assert!(tagged.flags.flagged, "{tagged:?}");
    assert_eq!(tagged.flags.tags, ["work"]);
    assert_eq!(index.local(moved), Some(("Archive".into(), moved_local)));
    assert!(index.local(&inbox[3]).is_none());
    assert_eq!(
        indexed(&index, "Inbox"),
        on_server(cyrus, user, &boxes["Inbox"]).await
    );

    // Nothing more: one request after the session, nothing read.
    let (reports, requests) = sync(cyrus, user, &mut index).await;
    assert!(
        reports.iter().all(|r| r.1 == SyncMode::Unchanged),
        "{reports:?}"
    );
    assert_eq!(requests, 2);
}

/// Mail changed over IMAP on the same server (Cyrus's own imapd) shows up: a keyword another
/// client stored is seen by the next JMAP sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyword_stored_over_imap_is_seen_by_the_next_sync() {
    let Some(cyrus) = cyrus() else { return };
    let user = "imapside";
    cyrus.add_user(user).await.unwrap();
    cyrus
        .seed(user, "Inbox", 5, "gus@example.test", &[])
        .await
        .unwrap();
    let mut index = MemoryIndex::new();
    sync(cyrus, user, &mut index).await;
    let mut imap = mailbroker_testkit::ImapClient::connect_port(cyrus.imap_port, user)
        .await
        .unwrap();
    let uid = *imap.flags("INBOX").await.unwrap().keys().next().unwrap();
    imap.store("INBOX", uid, "+FLAGS", "Imapside")
        .await
        .unwrap();
    imap.logout().await.unwrap();
    let (reports, _) = sync(cyrus, user, &mut index).await;
    let tagged = index.mailboxes["Inbox"]
        .values()
        .filter(|row| {
            row.meta
                .flags
                .tags
                .iter()
                .any(|t| t.eq_ignore_ascii_case("imapside"))
        })
        .count();
    assert_eq!(tagged, 1, "{reports:?}");
    let inbox = reports.iter().find(|r| r.0 == "Inbox").unwrap();
    assert_eq!((inbox.1, inbox.3), (SyncMode::Delta, 1), "{reports:?}");
}
