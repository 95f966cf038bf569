//! The real `mailbroker` binary driven by the official TypeScript MCP SDK, which validates
//! every result's structured content against the tool's output schema, error results
//! included: over stdio and Streamable HTTP, a success, each error class and each
//! confirmation path come back as results, never as a thrown schema error.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::mcp::{HTTP_TOKEN, http_server};
use common::{add_account, ok, seed, server};
use serde_json::Value;

/// The SDK version this contract test pins.
const SDK: &str = "@modelcontextprotocol/sdk@1.32.2";

/// node_modules with the SDK under target/, made once, and the client script beside it.
fn node() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ts-mcp");
    let dir = mailbroker_testkit::node_modules(&dir, &[SDK])?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.mjs");
    std::fs::copy(script, dir.join("mcp_client.mjs")).expect("copy the client script");
    Some(dir)
}

fn drive(dir: &Path, config: Value) -> Value {
    let out = Command::new("node")
        .arg(dir.join("mcp_client.mjs"))
        .arg(config.to_string())
        .output()
        .expect("run the TypeScript client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "TypeScript client failed ({config}):\n{stdout}\n{stderr}"
    );
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("json from the client")
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

#[tokio::test]
async fn the_typescript_sdk_gets_every_answer_as_a_result() {
    let Some(dovecot) = server() else { return };
    let Some(dir) = node() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut imap = seed(dovecot, "ts-user", "INBOX", 8).await;
    add_account(dovecot, home.path(), "ts", "ts-user", &[]);
    ok(home.path(), &["sync"]);
    let http = http_server(home.path());
    let before_flags = imap.flags("INBOX").await.unwrap();
    for (n, transport) in ["stdio", "http"].iter().enumerate() {
        let subjects: Vec<String> = (0..3)
            .map(|k| format!("Report number {}", 3 * n + k))
            .collect();
        let seen = drive(
            &dir,
            serde_json::json!({
                "transport": transport, "bin": env!("CARGO_BIN_EXE_mailbroker"),
                "home": home.path(), "url": http.1, "token": HTTP_TOKEN, "subjects": subjects,
            }),
        );
        assert_eq!(seen["tools"].as_array().unwrap().len(), 8, "{seen}");
        assert_eq!(seen["search"]["isError"], false, "{seen}");
        assert_eq!(
            seen["search"]["body"]["messages"].as_array().unwrap().len(),
            3
        );
        refused_as(&seen, "validation", "validation_error");
        refused_as(&seen, "not_found", "not_found");
        refused_as(&seen, "unknown_field", "validation_error");
        assert_eq!(seen["accepted"]["isError"], false, "{seen}");
        assert_eq!(seen["accepted"]["body"]["applied"], 1, "{seen}");
        refused_as(&seen, "declined", "confirmation_declined");
        refused_as(&seen, "refused", "confirmation_required");
        // Fails closed: the next step sends the person to `mailbroker approve`.
        let step = seen["refused"]["body"]["next_step"].as_str().unwrap();
        assert!(step.contains("mailbroker approve"), "{step}");
    }
    drop(http);
    let trash = imap.flags("Trash").await.unwrap();
    assert_eq!(trash.len(), 2, "only the accepted moves: {trash:?}");
    // The call with the unknown `dryRun` changed nothing.
    let inbox = imap.flags("INBOX").await.unwrap();
    for (uid, flags) in &inbox {
        assert_eq!(Some(flags), before_flags.get(uid), "uid {uid} changed");
    }
}
