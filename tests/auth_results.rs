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
