//! The worst-case IMAP server, GNU Mailutils imap4d (no UIDPLUS, MOVE, CONDSTORE, QRESYNC,
//! ENABLE or SPECIAL-USE; no keywords; a plain EXPUNGE removes every `\Deleted` message of
//! the mailbox): what mailbroker can do there it does and verifies, and what it cannot it
//! refuses before anything is sent, never risking another client's mail.

mod common;

use std::collections::BTreeMap;

use common::{mb, ok};
use mailbroker_testkit::{ImapClient, Proxy, message};
use serde_json::Value;

/// An imap4d user with `inbox` messages in INBOX and two in Archive, where every third
/// INBOX message is read and every fourth flagged; account "w" behind a proxy that shows
/// what mailbroker sends, synced.
struct Setup {
    home: tempfile::TempDir,
    port: u16,
    login: String,
    proxy: Proxy,
}

impl Setup {
    /// Another client, for one step: imap4d keeps a session's flag changes in memory and
    /// writes its mailbox file when the session leaves it, so each step logs out.
    async fn other(&self) -> ImapClient {
        ImapClient::connect_port(self.port, &self.login)
            .await
            .unwrap()
    }

    /// Another client sets or clears (`action`) `flag` on message `uid` of INBOX.
    async fn store(&self, uid: u32, action: &str, flag: &str) {
        let mut client = self.other().await;
        client.store("INBOX", uid, action, flag).await.unwrap();
        client.logout().await.unwrap();
    }

    /// The server's flags of `mailbox`: UID → sorted flags.
    async fn on_server(&self, mailbox: &str) -> BTreeMap<u32, Vec<String>> {
        let mut client = self.other().await;
        let flags = client.flags(mailbox).await.unwrap();
        client.logout().await.unwrap();
        flags
    }
}

async fn setup(user: &str, inbox: usize) -> Option<Setup> {
    let server = common::imap4d()?;
    let login = server.add_user(user).unwrap();
    let mut client = ImapClient::connect_port(server.port, &login).await.unwrap();
    client.create("Archive").await.unwrap();
    for i in 0..inbox {
        let flags = match (i % 3, i % 4) {
            (0, 0) => "\\Seen \\Flagged",
            (0, _) => "\\Seen",
            (_, 0) => "\\Flagged",
            _ => "",
        };
        let body = message(i, "alice@example.test", &format!("Message {i}"), "text");
        client.append("INBOX", flags, &body).await.unwrap();
    }
    for i in 0..2 {
        let body = message(100 + i, "bob@example.test", "Old", "text");
        client.append("Archive", "\\Seen", &body).await.unwrap();
    }
    client.logout().await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let proxy = Proxy::start(server.port, std::time::Duration::ZERO).unwrap();
    common::add_proxied(home.path(), "w", proxy.port, &login);
    ok(home.path(), &["sync"]);
    Some(Setup {
        home,
        port: server.port,
        login,
        proxy,
    })
}

#[tokio::test]
async fn the_index_equals_the_server_by_a_flag_scan() {
    let Some(s) = setup("w-sync", 12).await else {
        return;
    };
    for mailbox in ["INBOX", "Archive"] {
        assert_eq!(
            common::indexed_flags(s.home.path(), "w", mailbox),
            s.on_server(mailbox).await,
            "{mailbox}"
        );
    }
    // Another client changes flags: the next sync compares every flag (no CONDSTORE), and
    // never sends CHANGEDSINCE, which this server accepts without advertising it.
    s.store(2, "+FLAGS", "\\Seen").await;
    s.store(5, "-FLAGS", "\\Flagged").await;
    s.proxy.take_sent();
    let synced = ok(s.home.path(), &["sync"]);
    let inbox = common::mailbox_report(&synced, "INBOX");
    assert_eq!(inbox["mode"], "scan", "{synced}");
    assert_eq!(inbox["changed"], 2, "{synced}");
    let sent = s.proxy.take_sent();
    assert!(!sent.contains("CHANGEDSINCE"), "{sent}");
    assert!(!sent.contains("ENABLE"), "{sent}");
    assert_eq!(
        common::indexed_flags(s.home.path(), "w", "INBOX"),
        s.on_server("INBOX").await
    );
}

#[tokio::test]
async fn a_flag_write_is_sent_once_and_read_back() {
    let Some(s) = setup("w-flag", 8).await else {
        return;
    };
    s.proxy.take_sent();
    let run = ok(s.home.path(), &inbox_update(&["--flag"]));
    // Messages 0 and 4 were flagged already.
    assert_eq!(run["applied"], 6, "{run}");
    assert_eq!(run["unchanged"], 2, "{run}");
    let sent = s.proxy.take_sent();
    let store = sent.find("UID STORE").expect("a STORE");
    let read_back = sent[store..].find("UID FETCH");
    assert!(read_back.is_some(), "no read-back after the STORE: {sent}");
    let server = s.on_server("INBOX").await;
    assert!(
        server
            .values()
            .all(|f| f.contains(&"\\Flagged".to_string())),
        "{server:?}"
    );
    assert_eq!(common::indexed_flags(s.home.path(), "w", "INBOX"), server);
    // Again: nothing left to do, nothing sent.
    let again = ok(s.home.path(), &inbox_update(&["--flag"]));
    assert_eq!(again["applied"], 0, "{again}");
    assert!(!s.proxy.take_sent().contains("STORE"));
}

/// `update --query in:inbox CHANGE… --yes` as arguments.
fn inbox_update<'a>(change: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["update", "--query", "in:inbox"];
    args.extend(change);
    args.push("--yes");
    args
}

/// A refusal: `unsupported`, with a next step that is true on this server, and nothing
/// sent to it (the proxy saw no command at all).
fn refused(s: &Setup, args: &[&str]) -> Value {
    s.proxy.take_sent();
    let run = mb(s.home.path(), args);
    assert_eq!(run.code, 2, "{args:?}: {}", run.stdout);
    assert_eq!(run.json["error_type"], "unsupported", "{}", run.stdout);
    let sent = s.proxy.take_sent();
    assert!(sent.is_empty(), "{args:?} sent {sent}");
    run.json
}

#[tokio::test]
async fn tags_moves_and_deletions_are_refused_before_anything_is_sent() {
    let Some(s) = setup("w-refuse", 4).await else {
        return;
    };
    let tag = refused(&s, &inbox_update(&["--add-tag", "Later"]));
    assert!(
        tag["error"].as_str().unwrap().contains("PERMANENTFLAGS"),
        "{tag}"
    );
    let step = tag["next_step"].as_str().unwrap();
    assert!(step.contains("read, flagged"), "{tag}");
    let moved = refused(&s, &inbox_update(&["--move-to", "archive"]));
    let step = moved["next_step"].as_str().unwrap();
    assert!(step.contains("another mail client"), "{moved}");
    for staged in [
        vec!["stage-delete", "from:alice"],
        vec!["stage-delete", "from:alice", "--permanent"],
    ] {
        let refusal = refused(&s, &staged);
        let step = refusal["next_step"].as_str().unwrap();
        // Trash mode is refused here too, so the step must not send the person there.
        assert!(!step.contains("trash mode"), "{staged:?}: {refusal}");
        assert!(
            step.contains("another mail client"),
            "{staged:?}: {refusal}"
        );
    }
    let manifests = ok(s.home.path(), &["delete-staged"]);
    assert_eq!(manifests["manifests"], serde_json::json!([]), "{manifests}");
}

/// A message another client marked `\Deleted` (and has not expunged) is that client's to
/// expunge: whatever mailbroker runs in the same mailbox, it is still there after.
#[tokio::test]
async fn a_message_another_client_marked_deleted_survives() {
    let Some(s) = setup("w-deleted", 4).await else {
        return;
    };
    s.store(3, "+FLAGS", "\\Deleted").await;
    ok(s.home.path(), &["sync"]);
    let home = s.home.path().to_path_buf();
    let runs = [
        inbox_update(&["--read"]),
        inbox_update(&["--move-to", "archive"]),
        inbox_update(&["--move-to", "trash"]),
        vec!["stage-delete", "in:inbox"],
        vec!["stage-delete", "in:inbox", "--permanent"],
    ];
    for args in runs {
        mb(&home, &args);
    }
    ok(&home, &["sync"]);
    let server = s.on_server("INBOX").await;
    assert_eq!(server.len(), 4, "{server:?}");
    assert!(server[&3].contains(&"\\Deleted".to_string()), "{server:?}");
    let sent = s.proxy.take_sent();
    assert!(!sent.contains("EXPUNGE"), "{sent}");
    assert_eq!(common::indexed_flags(&home, "w", "INBOX"), server);
}
