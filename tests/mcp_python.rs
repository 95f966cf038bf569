//! The real `mailbroker` binary driven by an independent client: the official Python MCP SDK,
//! over stdio and over Streamable HTTP, in both protocol eras (`auto` negotiates 2026-07-28
//! and confirms through an input-required round trip; `legacy` uses 2025-11-25 elicitation).
//! What each run changed is checked on the IMAP server itself.

mod common;

use std::path::{Path, PathBuf};

use common::mcp::{error_types, http_server, http_server_with, troubled_accounts};
use common::{add_account, ok, seed, server};

fn python() -> Option<PathBuf> {
    common::mcp::python_sdk()
}

fn drive(py: &Path, config: serde_json::Value) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    mailbroker_testkit::run_client(py, &script, &config)
}

#[tokio::test]
async fn the_python_sdk_lists_searches_and_confirms_over_stdio_and_http() {
    let Some(dovecot) = server() else {
        return;
    };
    let Some(py) = python() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let mut imap = seed(dovecot, "py-user", "INBOX", 12).await;
    add_account(dovecot, home.path(), "py", "py-user", &[]);
    ok(home.path(), &["sync"]);
    troubled_accounts(dovecot, home.path()).await;
    let http = http_server(home.path());
    let status = common::mb(home.path(), &["mcp", "status"]);
    assert_eq!(
        status.json["listeners"][0]["url"],
        http.1.as_str(),
        "{}",
        status.stdout
    );
    assert!(
        status.json["listeners"][0]["token_source"]
            .as_str()
            .unwrap()
            .ends_with("http-token")
    );
    assert!(
        !status.stdout.contains(common::mcp::HTTP_TOKEN),
        "status printed the token"
    );

    let readonly = http_server_with(home.path(), false);
    let runs = [
        ("stdio", "auto"),
        ("stdio", "legacy"),
        ("http", "auto"),
        ("http", "legacy"),
    ];
    let mut trashed = Vec::new();
    let mut kept = Vec::new();
    for (n, (transport, mode)) in runs.iter().enumerate() {
        let subjects: Vec<String> = (0..3)
            .map(|k| format!("Report number {}", 3 * n + k))
            .collect();
        let seen = drive(
            &py,
            serde_json::json!({
                "transport": transport, "mode": mode,
                "bin": env!("CARGO_BIN_EXE_mailbroker"),
                "home": home.path(), "url": http.1, "token": common::mcp::HTTP_TOKEN,
                "subjects": subjects, "account": "py", "error_types": error_types(),
                "readonly_url": (*transport == "http").then_some(&readonly.1),
            }),
        );
        assert!(seen["tools_list_chars"].as_u64().unwrap() > 1000, "{seen}");
        assert_eq!(
            seen["schema_rejects"],
            serde_json::json!([]),
            "{transport} {mode}"
        );
        let era = if *mode == "auto" {
            "2026-07-28"
        } else {
            "2025-11-25"
        };
        assert_eq!(seen["protocol"], era, "{transport} {mode}: {seen}");
        trashed.extend([subjects[0].clone(), subjects[2].clone()]);
        kept.push(subjects[1].clone());
    }
    drop((http, readonly));

    // On the server: exactly the accepted and token-confirmed messages are in Trash; the
    // declined ones never left INBOX.
    let in_trash = subjects_in(&mut imap, "Trash").await;
    let in_inbox = subjects_in(&mut imap, "INBOX").await;
    for s in &trashed {
        assert!(in_trash.contains(s), "{s} not in Trash: {in_trash:?}");
    }
    for s in &kept {
        assert!(
            in_inbox.contains(s),
            "declined {s} left INBOX: {in_inbox:?}"
        );
    }
    assert_eq!(in_trash.len(), trashed.len(), "{in_trash:?}");
    let status = common::mb(home.path(), &["mcp", "status"]);
    assert_eq!(
        status.json["listeners"],
        serde_json::json!([]),
        "{}",
        status.stdout
    );
}

async fn subjects_in(imap: &mut mailbroker_testkit::ImapClient, mailbox: &str) -> Vec<String> {
    imap.subjects(mailbox).await.expect("read subjects")
}
