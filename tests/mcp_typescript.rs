//! The real `mailbroker` binary driven by the official TypeScript MCP SDK, which validates
//! every result's structured content against the tool's output schema, error results
//! included: over stdio and Streamable HTTP, every tool, each error class and each
//! confirmation path come back as results, never as a thrown schema error.

mod common;

use std::path::{Path, PathBuf};

use common::mcp::{HTTP_TOKEN, error_types, http_server, http_server_with, troubled_accounts};
use common::{add_account, ok, seed, server};
use serde_json::Value;

/// The SDK version this contract test pins.
const SDK: &str = "@modelcontextprotocol/sdk@1.32.2";

/// node_modules with the SDK under target/, made once, and the client script beside it.
fn node() -> Option<PathBuf> {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.mjs");
    mailbroker_testkit::node_script(tmp, "ts-mcp", &[SDK], &script)
}

fn drive(script: &Path, config: Value) -> Value {
    mailbroker_testkit::run_client(Path::new("node"), script, &config)
}

/// A call the SDK returned as an error result of `error_type` (not one it threw).
fn refused_as(seen: &Value, call: &str, error_type: &str) {
    let r = &seen[call];
    assert!(r.get("thrown").is_none(), "{call} threw: {r}");
    assert_eq!(r["isError"], true, "{call}: {r}");
    assert_eq!(r["body"]["error_type"], error_type, "{call}: {r}");
    assert!(
        r["body"]["next_step"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "{call}: {r}"
    );
}

/// A call the SDK returned as a successful result.
fn answered(seen: &Value, call: &str) -> Value {
    let r = &seen[call];
    assert!(r.get("thrown").is_none(), "{call} threw: {r}");
    assert_eq!(r["isError"], false, "{call}: {r}");
    r["body"].clone()
}

#[tokio::test]
async fn the_typescript_sdk_gets_every_answer_as_a_result() {
    let Some(dovecot) = server() else { return };
    let Some(dir) = node() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut imap = seed(dovecot, "ts-user", "INBOX", 8).await;
    add_account(dovecot, home.path(), "ts", "ts-user", &[]);
    ok(home.path(), &["sync", "--account", "ts"]);
    troubled_accounts(dovecot, home.path()).await;
    let http = http_server(home.path());
    let readonly = http_server_with(home.path(), false);
    let before_flags = imap.flags("INBOX").await.unwrap();
    for (n, transport) in ["stdio", "http"].iter().enumerate() {
        let subjects: Vec<String> = (0..4)
            .map(|k| format!("Report number {}", 4 * n + k))
            .collect();
        let seen = drive(
            &dir,
            serde_json::json!({
                "transport": transport, "bin": env!("CARGO_BIN_EXE_mailbroker"),
                "home": home.path(), "url": http.1, "token": HTTP_TOKEN, "account": "ts",
                "subjects": subjects, "error_types": error_types(),
                "readonly_url": (*transport == "http").then_some(&readonly.1),
            }),
        );
        check_run(&seen, transport);
    }
    drop((http, readonly));
    let trash = imap.flags("Trash").await.unwrap();
    assert_eq!(
        trash.len(),
        4,
        "only the accepted and approved moves: {trash:?}"
    );
    // The call with the unknown `dryRun` changed nothing; the flag set was undone.
    let inbox = imap.flags("INBOX").await.unwrap();
    for (uid, flags) in &inbox {
        assert_eq!(Some(flags), before_flags.get(uid), "uid {uid} changed");
    }
}

fn check_run(seen: &Value, transport: &str) {
    let tools = seen["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 11, "{seen}");
    assert_eq!(seen["schema_rejects"], serde_json::json!([]), "{transport}");
    assert_eq!(
        answered(seen, "accounts")["accounts"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let mailboxes = answered(seen, "mailboxes");
    assert!(
        mailboxes.to_string().contains("\"role\":\"inbox\""),
        "{mailboxes}"
    );
    assert_eq!(
        answered(seen, "search")["messages"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let read = answered(seen, "read");
    assert!(
        read["messages"][0]["body"]
            .as_str()
            .is_some_and(|b| !b.is_empty()),
        "{read}"
    );
    assert_eq!(answered(seen, "sync")["accounts"][0]["account"], "ts");
    for (call, error_type) in [
        ("validation", "validation_error"),
        ("wrong_type", "validation_error"),
        ("unknown_field", "validation_error"),
        ("unsupported", "unsupported"),
        ("not_found", "not_found"),
        ("unknown_account", "not_found"),
        ("unavailable", "provider_unavailable"),
        ("auth", "auth_required"),
        ("undo_again", "stale_state"),
        ("declined", "confirmation_declined"),
        ("refused", "confirmation_required"),
        ("unapproved", "confirmation_required"),
    ] {
        refused_as(seen, call, error_type);
    }
    let field = seen["unknown_field"]["body"]["error"].as_str().unwrap();
    assert!(
        field.contains("dryRun") && field.contains("dry_run"),
        "{field}"
    );
    // The write, its journal entry and its undo.
    let change = answered(seen, "flagged")["change_id"].clone();
    assert_eq!(answered(seen, "undo")["applied"], 1, "{seen}");
    let changes = answered(seen, "changes");
    assert_eq!(changes["changes"][0]["id"], change);
    assert_eq!(changes["changes"][0]["origin"], "mcp:ts-test");
    assert!(changes["changes"][0]["undone_by"].is_i64(), "{changes}");
    // The plan in the user's words, then the elicitation-confirmed move.
    let summary = &answered(seen, "dry_run")["summary"]["text"];
    let summary = summary.as_str().unwrap();
    for part in [
        "moves 1 message(s) to trash",
        "from",
        "dated",
        "chosen by id",
    ] {
        assert!(summary.contains(part), "{part:?} not in {summary:?}");
    }
    let accepted = answered(seen, "accepted");
    assert_eq!(accepted["applied"], 1, "{seen}");
    assert_eq!(accepted["changed_ids"].as_array().unwrap().len(), 1);
    // Fails closed: the next step sends the person to `mailbroker approve`; once they
    // approved, the token runs the write.
    let step = seen["unapproved"]["body"]["next_step"].as_str().unwrap();
    assert!(step.contains("mailbroker approve"), "{step}");
    assert_eq!(seen["shell_approve_status"], 6, "{seen}");
    assert_eq!(seen["approve_status"], 0, "{seen}");
    assert_eq!(answered(seen, "approved")["applied"], 1, "{seen}");
    if transport == "http" {
        let listed = seen["readonly_tools"].as_array().unwrap();
        assert!(!listed.iter().any(|t| t == "update_message"), "{listed:?}");
        refused_as(seen, "writes_disabled", "writes_disabled");
    }
}
