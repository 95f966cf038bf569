//! MCP over Streamable HTTP: the bearer token, Origin and Host checks, read-only unless
//! writes are allowed, and a non-loopback bind refused without its flag.

mod common;

use std::path::Path;

use common::mcp::{err_call, http_session, ids, init_body, ok_call, setup, tool_names};
use mailbroker::home::Home;
use mailbroker::mcp::McpOptions;
use mailbroker::mcp::http::{self, HttpOptions};
use mailbroker::store::Store;
use serde_json::json;

async fn http_server(home: &Path, writes: bool) -> (String, tokio::sync::oneshot::Sender<()>) {
    let token_file = home.join("token");
    std::fs::write(&token_file, "0123456789abcdef0123\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let h = Home::resolve(Some(home)).unwrap();
    let store = Store::open(&h.database()).await.unwrap();
    let options = HttpOptions {
        addr: "0".into(),
        allow_remote: false,
        token_file: Some(token_file),
        mcp: McpOptions {
            allow_writes: writes,
            ..McpOptions::default()
        },
    };
    let bound = http::bind(h, store, options).await.unwrap();
    let url = bound.url().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(bound.run(async move {
        let _ = stopped.await;
    }));
    (url, stop)
}

#[tokio::test]
async fn http_needs_the_token_a_local_origin_and_a_flag_for_writes() {
    let Some((home, _imap)) = setup("mcp-http").await else {
        return;
    };
    let (url, stop) = http_server(home.path(), false).await;
    let raw = reqwest::Client::new();
    let post = |token: Option<&str>, origin: Option<&str>| {
        let mut r = raw
            .post(&url)
            .header("Accept", "application/json, text/event-stream")
            .json(&init_body());
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        if let Some(o) = origin {
            r = r.header("Origin", o);
        }
        r.send()
    };
    let none = post(None, None).await.unwrap();
    assert_eq!(none.status(), 401);
    assert!(
        none.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer")
    );
    assert_eq!(
        post(Some("wrong-token-wrong-token"), None)
            .await
            .unwrap()
            .status(),
        401
    );
    let evil = post(Some("0123456789abcdef0123"), Some("http://evil.example"))
        .await
        .unwrap();
    assert_eq!(evil.status(), 403);
    let good = post(Some("0123456789abcdef0123"), None).await.unwrap();
    assert_eq!(good.status(), 200);
    // The scheme is case-insensitive (RFC 7235).
    for scheme in ["bearer", "BEARER"] {
        let lower = raw
            .post(&url)
            .header("Authorization", format!("{scheme} 0123456789abcdef0123"))
            .header("Accept", "application/json, text/event-stream")
            .json(&init_body())
            .send()
            .await
            .unwrap();
        assert_eq!(lower.status(), 200, "{scheme}");
    }
    // Ending a session answers success, and the session is gone afterwards.
    let session_id = good.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let ended = raw
        .delete(&url)
        .bearer_auth("0123456789abcdef0123")
        .header("Mcp-Session-Id", &session_id)
        .send()
        .await
        .unwrap();
    assert!(
        matches!(ended.status().as_u16(), 200 | 204),
        "{}",
        ended.status()
    );
    let after = raw
        .post(&url)
        .bearer_auth("0123456789abcdef0123")
        .header("Mcp-Session-Id", &session_id)
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 404, "the ended session still answers");
    // DNS rebinding: a request for another host name is refused.
    let rebound = raw
        .post(&url)
        .bearer_auth("0123456789abcdef0123")
        .header("Host", "evil.example")
        .header("Accept", "application/json, text/event-stream")
        .json(&init_body())
        .send()
        .await
        .unwrap();
    assert!(rebound.status().is_client_error(), "{}", rebound.status());

    // Read-only listener: write tools are neither listed nor callable.
    let session = http_session(&url, "0123456789abcdef0123").await;
    let names = tool_names(&session).await;
    assert!(names.contains(&"search_messages".to_string()), "{names:?}");
    for write in ["update_message", "undo_change", "sync_accounts"] {
        assert!(
            !names.contains(&write.to_string()),
            "{write} listed: {names:?}"
        );
    }
    let accounts = ok_call(&session, "list_accounts", json!({})).await;
    assert_eq!(accounts["accounts"][0]["id"], "m");
    let refused = err_call(
        &session,
        "update_message",
        json!({ "ids": [1], "read": true }),
    )
    .await;
    assert_eq!(refused["error_type"], "writes_disabled");
    session.cancel().await.ok();
    let _ = stop.send(());

    // With writes allowed, over HTTP, a write goes through.
    let (url, stop) = http_server(home.path(), true).await;
    let session = http_session(&url, "0123456789abcdef0123").await;
    let id = ids(&session, "subject:\"Report number 2\"").await[0];
    let done = ok_call(
        &session,
        "update_message",
        json!({ "ids": [id], "flagged": true }),
    )
    .await;
    assert_eq!(done["applied"], 1, "{done}");
    session.cancel().await.ok();
    let _ = stop.send(());

    // A non-loopback bind without the flag refuses to start.
    let refused = common::mb(home.path(), &["mcp", "--http", "0.0.0.0:0"]);
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    assert_eq!(refused.json["error_type"], "validation_error");
}
