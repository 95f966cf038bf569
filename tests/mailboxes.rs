//! Mailboxes as the server names them: roles from SPECIAL-USE (never from a decoy folder's
//! name), names with quotes, backslashes and modified UTF-7, and a mailbox that cannot be
//! synced never stopping the others.

mod common;

use common::{add_account, mb, ok, server};
use mailbroker_testkit::{ImapClient, message};
use serde_json::Value;

/// The mailbox named `name` in an `account show` answer.
fn mailbox<'a>(shown: &'a Value, name: &str) -> &'a Value {
    shown["account"]["mailboxes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no mailbox {name:?}: {shown}"))
}

/// One message in INBOX and decoy folders `Clients/Trash` and `junk` for `user`.
async fn decoys(user: &str) -> Option<ImapClient> {
    let server = server()?;
    let mut client = ImapClient::connect(server, user).await.unwrap();
    for name in ["Clients", "Clients/Trash", "junk"] {
        client.create(name).await.unwrap();
    }
    let body = message(0, "eve@example.test", "Decoy target", "text");
    client.append("INBOX", "", &body).await.unwrap();
    Some(client)
}

#[tokio::test]
async fn roles_come_from_special_use_not_from_decoy_names() {
    let Some(mut client) = decoys("mb-decoy").await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    add_account(server().unwrap(), home.path(), "d", "mb-decoy", &[]);
    ok(home.path(), &["sync"]);
    let shown = ok(home.path(), &["account", "show", "d"]);
    for (name, role) in [("Trash", "trash"), ("Junk", "junk"), ("Archive", "archive")] {
        assert_eq!(mailbox(&shown, name)["role"], role, "{shown}");
        assert_eq!(mailbox(&shown, name)["role_source"], "server", "{shown}");
    }
    for decoy in ["Clients/Trash", "junk"] {
        assert!(mailbox(&shown, decoy)["role"].is_null(), "{shown}");
    }

    // A move to junk still asks (no terminal here: refused), and goes to the real Junk.
    let id = ok(home.path(), &["search", "subject:Decoy"])["messages"][0]["id"].to_string();
    let asked = mb(home.path(), &["update", &id, "--move-to", "junk"]);
    assert_eq!(
        asked.json["error_type"], "confirmation_required",
        "{}",
        asked.stdout
    );
    ok(home.path(), &["update", &id, "--move-to", "trash", "--yes"]);
    assert_eq!(client.flags("Trash").await.unwrap().len(), 1);
    assert!(client.flags("Clients/Trash").await.unwrap().is_empty());
}

#[tokio::test]
async fn without_special_use_only_top_level_names_give_roles() {
    let Some(_client) = decoys("mb-names").await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let server = server().unwrap();
    add_account(
        server,
        home.path(),
        "n",
        "mb-names",
        &["--disable-extension", "SPECIAL-USE"],
    );
    ok(home.path(), &["sync"]);
    let shown = ok(home.path(), &["account", "show", "n"]);
    assert_eq!(mailbox(&shown, "Trash")["role"], "trash", "{shown}");
    assert_eq!(mailbox(&shown, "Trash")["role_source"], "name", "{shown}");
    assert!(
        mailbox(&shown, "Clients/Trash")["role"].is_null(),
        "{shown}"
    );
    assert_eq!(mailbox(&shown, "INBOX")["role"], "inbox", "{shown}");
}

#[tokio::test]
async fn hostile_and_international_names_sync_and_are_found() {
    let Some(server) = server() else { return };
    let user = "mb-names-odd";
    let mut client = ImapClient::connect(server, user).await.unwrap();
    // As the server stores them: a quote and a backslash, and "Entwürfe" in modified UTF-7.
    for name in ["we\"ird\\box", "Entw&APw-rfe"] {
        client.create(name).await.unwrap();
        let body = message(1, "fay@example.test", &format!("In {name}"), "text");
        client.append(name, "", &body).await.unwrap();
    }
    for i in 0..3 {
        let body = message(i, "fay@example.test", &format!("Inbox {i}"), "text");
        client.append("INBOX", "", &body).await.unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    add_account(server, home.path(), "o", user, &[]);
    let synced = ok(home.path(), &["sync"]);
    assert_eq!(synced["accounts"][0]["added"], 5, "{synced}");
    let shown = ok(home.path(), &["account", "show", "o"]);
    assert_eq!(mailbox(&shown, "we\"ird\\box")["messages"], 1, "{shown}");
    assert_eq!(mailbox(&shown, "Entwürfe")["messages"], 1, "{shown}");
    let found = ok(home.path(), &["search", "in:Entwürfe"]);
    assert_eq!(found["messages"].as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found["messages"][0]["mailbox"], "Entwürfe", "{found}");

    let id = ok(home.path(), &["search", "subject:\"Inbox 0\""])["messages"][0]["id"].to_string();
    let moved = ok(
        home.path(),
        &["update", &id, "--move-to", "Entwürfe", "--yes"],
    );
    assert_eq!(moved["applied"], 1, "{moved}");
    assert_eq!(client.flags("Entw&APw-rfe").await.unwrap().len(), 2);
    let id = ok(home.path(), &["search", "subject:\"Inbox 1\""])["messages"][0]["id"].to_string();
    ok(
        home.path(),
        &["update", &id, "--move-to", "we\"ird\\box", "--yes"],
    );
    assert_eq!(client.flags("we\"ird\\box").await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_mailbox_that_cannot_be_synced_does_not_stop_the_others() {
    let Some(server) = server() else { return };
    let user = "mb-doomed";
    let mut client = ImapClient::connect(server, user).await.unwrap();
    client.create("Doomed").await.unwrap();
    for i in 0..3 {
        let body = message(i, "gus@example.test", &format!("Kept {i}"), "text");
        client.append("INBOX", "", &body).await.unwrap();
        client.append("Doomed", "", &body).await.unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    let proxy =
        mailbroker_testkit::Proxy::start(server.imap_port, std::time::Duration::ZERO).unwrap();
    common::add_proxied(home.path(), "x", proxy.port, user);
    // The mailbox is deleted between the LIST that named it and its SELECT.
    proxy.hold_at("SELECT \"Doomed\"");
    let dir = home.path().to_path_buf();
    let run = tokio::task::spawn_blocking(move || mb(&dir, &["sync"]));
    common::until_held(&proxy, "the SELECT of Doomed").await;
    client.delete("Doomed").await.unwrap();
    proxy.release();
    let run = run.await.unwrap();
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    let report = &run.json["accounts"][0];
    let doomed = common::mailbox_report(&run.json, "Doomed");
    assert!(doomed["error"].as_str().is_some(), "{}", run.stdout);
    assert_eq!(
        common::mailbox_report(&run.json, "INBOX")["added"],
        3,
        "{report}"
    );
    let found = ok(home.path(), &["search", "in:inbox"]);
    assert_eq!(found["messages"].as_array().unwrap().len(), 3, "{found}");
}
