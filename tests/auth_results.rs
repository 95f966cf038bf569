//! The receiving server's verdicts (`Authentication-Results`) through the real binary on
//! Dovecot: shown only from the topmost header, only when the account names its server, never
//! from one a sender wrote.

mod common;

use common::{mb, ok};
use mailbroker_testkit::ImapClient;
use serde_json::json;

fn mail(subject: &str, results: &[&str]) -> Vec<u8> {
    let mut text = String::new();
    for r in results {
        text.push_str(&format!("Authentication-Results: {r}\r\n"));
    }
    text.push_str(&format!(
        "From: Bank <alerts@bank.example>\r\nTo: user@example.test\r\nSubject: {subject}\r\n\
         Message-ID: <{subject}@bank.example>\r\n\r\nPlease confirm your password.\r\n"
    ));
    text.into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_accounts_own_server_is_believed() {
    let Some(server) = common::server() else {
        return;
    };
    let user = "auth-results";
    let mut client = ImapClient::connect(server, user).await.unwrap();
    let own =
        "mx.example.test; spf=fail smtp.mailfrom=bank.example; dmarc=fail header.from=bank.example";
    let forged = "mx.example.test; dkim=pass; spf=pass; dmarc=pass";
    client
        .append("INBOX", "", &mail("phish", &[own, forged]))
        .await
        .unwrap();
    let elsewhere = "relay.evil.example; dkim=pass; spf=pass; dmarc=pass";
    client
        .append("INBOX", "", &mail("relayed", &[elsewhere]))
        .await
        .unwrap();
    // A sender's header above the server's own, naming another server, is passed over.
    client
        .append("INBOX", "", &mail("stacked", &[elsewhere, own]))
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::add_proxied(h, "r", server.imap_port, user);
    ok(h, &["sync"]);
    let id = |q: &str| common::message_ids(&ok(h, &["search", q]))[0].to_string();
    let (phish, relayed, above) = (
        id("subject:phish"),
        id("subject:relayed"),
        id("subject:stacked"),
    );

    // Nobody named this server: nothing is believed.
    let shown = ok(h, &["show", &phish, "--body"]);
    assert!(shown["message"]["auth"].is_null(), "{shown}");

    let bad = mb(h, &["account", "set", "r", "--authserv-id", "mx example"]);
    assert_eq!(bad.json["error_type"], "validation_error", "{}", bad.stdout);
    ok(
        h,
        &["account", "set", "r", "--authserv-id", "mx.example.test"],
    );
    let shown = ok(h, &["show", &phish, "--body"]);
    assert_eq!(
        shown["message"]["auth"],
        json!({"spf": "fail", "dkim": "none", "dmarc": "fail"}),
        "{shown}"
    );
    let shown = ok(h, &["show", &relayed, "--body"]);
    assert!(
        shown["message"]["auth"].is_null(),
        "another server's header: {shown}"
    );
    let shown = ok(h, &["show", &above, "--body"]);
    assert_eq!(
        shown["message"]["auth"]["dmarc"], "fail",
        "the server's own, below: {shown}"
    );

    // Searchable once a sync has read them with the server named: `auth:`.
    let count = |q: &str| ok(h, &["search", q])["total"].as_u64().unwrap();
    assert_eq!(count("auth:fail"), 0, "synced before the server was named");
    ok(h, &["sync", "--full"]);
    assert_eq!(count("auth:fail"), 2, "phish and stacked");
    assert_eq!(count("auth:pass"), 0, "a sender's pass is never believed");
    assert_eq!(count("auth:none"), 1, "relayed");
    assert_eq!(count("-auth:fail subject:relayed"), 1);
    let bad = mb(h, &["search", "auth:maybe"]);
    assert_eq!(bad.json["error_type"], "validation_error", "{}", bad.stdout);

    let client_of = common::mcp::client(None, rmcp::model::ProtocolVersion::V_2025_11_25);
    let session = common::mcp::connect(h, client_of).await;
    let ids: Vec<i64> = [&phish, &relayed]
        .iter()
        .map(|i| i.parse().unwrap())
        .collect();
    let read = common::mcp::ok_call(&session, "get_messages", json!({ "ids": ids })).await;
    let messages = read["messages"].as_array().unwrap();
    assert_eq!(messages[0]["auth"]["dmarc"], "fail", "{read}");
    assert!(messages[1].get("auth").is_none(), "{read}");
    session.cancel().await.unwrap();
}

/// Gmail's own verdicts are known (`mx.google.com`), read from the metadata headers at sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gmails_verdicts_are_searchable() {
    let mock = mailbroker_mock_gmail::GmailMock::start("me@mock.example")
        .await
        .unwrap();
    let headers = |subject: &'static str, results: &'static str| {
        [
            ("Authentication-Results", results),
            ("From", "alerts@bank.example"),
            ("Subject", subject),
            ("Message-ID", "<x@bank.example>"),
        ]
    };
    let google = "mx.google.com; dkim=pass header.i=@bank.example; spf=pass; dmarc=pass";
    mock.add_message(&headers("genuine", google), "hi", &["INBOX"]);
    let spoof = "mx.google.com; spf=fail smtp.mailfrom=bank.example; dmarc=fail";
    mock.add_message(&headers("spoofed", spoof), "hi", &["INBOX"]);
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::gmail::add_account(&mock, h, "g", &[]).await;
    ok(h, &["sync"]);
    let subjects = |q: &str| -> Vec<String> {
        let found = ok(h, &["search", q]);
        (found["messages"].as_array().unwrap().iter())
            .map(|m| m["subject"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(subjects("auth:pass"), ["genuine"]);
    assert_eq!(subjects("auth:fail"), ["spoofed"]);
}

/// Over JMAP (Cyrus), the headers come as `header:Authentication-Results:asText:all`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jmap_verdicts_are_searchable_once_the_server_is_named() {
    let Some(cyrus) = mailbroker_testkit::cyrus::shared() else {
        return;
    };
    let user = "auth-jmap";
    cyrus.add_user(user).await.unwrap();
    let mut client = ImapClient::connect_port(cyrus.imap_port, user)
        .await
        .unwrap();
    let own = "mx.example.test; dmarc=fail header.from=bank.example";
    client
        .append("INBOX", "", &mail("phish", &[own]))
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let add = mailbroker_testkit::cyrus::account_add_args("j", &cyrus.url(), user, "MB_TEST_PW");
    assert_eq!(common::mb_args(h, &add).code, 0);
    ok(
        h,
        &["account", "set", "j", "--authserv-id", "mx.example.test"],
    );
    ok(h, &["sync"]);
    assert_eq!(ok(h, &["search", "auth:fail"])["total"], 1);
}
