//! MCP over Streamable HTTP: the bearer token, Origin and Host checks, read-only unless
//! writes are allowed, and a non-loopback bind refused without its flag.

mod common;

use std::path::Path;

use common::mcp::{err_call, http_session, ids, init_body, ok_call, setup, tool_names};
use mailbroker::home::Home;
use mailbroker::mcp::McpOptions;
use mailbroker::mcp::http::{self, HttpOptions};
use mailbroker::mcp::sessions::SessionLimits;
use mailbroker::store::Store;
use serde_json::json;

async fn http_server(home: &Path, writes: bool) -> (String, tokio::sync::oneshot::Sender<()>) {
    let token_file = home.join("token");
    std::fs::write(&token_file, "0123456789abcdef0123\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let options = HttpOptions {
        addr: "0".into(),
        allow_remote: false,
        token_file: Some(token_file),
        mcp: McpOptions {
            allow_writes: writes,
            ..McpOptions::default()
        },
        sessions: SessionLimits::default(),
        console: mailbroker::console::ConsoleAt::Off,
        oauth: Default::default(),
    };
    listen(home, options).await
}

async fn listen(home: &Path, options: HttpOptions) -> (String, tokio::sync::oneshot::Sender<()>) {
    let h = Home::resolve(Some(home)).unwrap();
    let store = Store::open(&h.database()).await.unwrap();
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
    for write in mailbroker::mcp::WRITE_TOOLS {
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
    let step = refused["next_step"].as_str().unwrap_or_default();
    assert!(
        step.contains("mailbroker mcp --http ADDR --http-allow-writes"),
        "{refused}"
    );
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

/// A listener with no token file and no `$MAILBROKER_MCP_TOKEN`: the home's own token.
fn home_token_options(sessions: SessionLimits) -> HttpOptions {
    HttpOptions {
        addr: "0".into(),
        allow_remote: false,
        token_file: None,
        mcp: McpOptions::default(),
        sessions,
        console: mailbroker::console::ConsoleAt::Off,
        oauth: Default::default(),
    }
}

/// The status of an `initialize` carrying `authorization` (the whole header, if any).
async fn initialize_with(url: &str, authorization: Option<&str>) -> u16 {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .json(&init_body());
    if let Some(value) = authorization {
        request = request.header("Authorization", value);
    }
    request.send().await.unwrap().status().as_u16()
}

/// An empty, blank or one-character `HOME/mcp-token` (a first start on a full disk leaves an
/// empty 0644 one) used to let requests without a token in: an empty presented token equalled
/// the empty stored one. The file is now replaced by a strong private token, and nothing
/// without it gets in.
#[tokio::test]
async fn a_weak_home_token_file_is_replaced_and_never_lets_anyone_in() {
    use std::os::unix::fs::PermissionsExt;
    assert!(
        std::env::var_os(http::TOKEN_ENV).is_none(),
        "this test needs ${} unset",
        http::TOKEN_ENV
    );
    for weak in ["", " \n\t", "x"] {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join("mcp-token");
        std::fs::write(&file, weak).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (url, stop) = listen(home.path(), home_token_options(SessionLimits::default())).await;
        for presented in [None, Some("Bearer "), Some("Bearer"), Some("Bearer x")] {
            assert_eq!(
                initialize_with(&url, presented).await,
                401,
                "{weak:?} file, {presented:?} presented"
            );
        }
        let token = std::fs::read_to_string(&file).unwrap();
        assert!(token.trim().len() >= 32, "{weak:?} was kept");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{weak:?}");
        let bearer = format!("Bearer {}", token.trim());
        assert_eq!(initialize_with(&url, Some(&bearer)).await, 200);
        let _ = stop.send(());
    }
}

/// A page on another local port (another program's server) names that port in its Host:
/// the listener used to check the name only.
#[tokio::test]
async fn a_host_with_another_port_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let (url, stop) = http_server(home.path(), false).await;
    let port = url.split(':').nth(2).unwrap().trim_end_matches("/mcp");
    let post = |host: String| {
        reqwest::Client::new()
            .post(&url)
            .bearer_auth("0123456789abcdef0123")
            .header("Host", host)
            .header("Accept", "application/json, text/event-stream")
            .json(&init_body())
            .send()
    };
    let other = post("127.0.0.1:1".into()).await.unwrap();
    assert!(other.status().is_client_error(), "{}", other.status());
    let bare = post("localhost".into()).await.unwrap();
    assert!(bare.status().is_client_error(), "{}", bare.status());
    let same = post(format!("localhost:{port}")).await.unwrap();
    assert_eq!(same.status(), 200);
    let _ = stop.send(());
}

/// Opens a session as a raw client would; its id.
async fn open_session(url: &str, token: &str) -> String {
    let answer = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .json(&init_body())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let id = answer.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let _ = answer.text().await;
    let initialized = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("Mcp-Session-Id", &id)
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert!(
        initialized.status().is_success(),
        "{}",
        initialized.status()
    );
    id
}

/// The status of a ping in session `id`.
async fn ping(url: &str, token: &str, id: &str) -> u16 {
    let answer = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("Mcp-Session-Id", id)
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let _ = answer.text().await;
    status
}

/// Sessions used to stay for good (about 50 KB each). An idle one is closed, and past the
/// cap the least recently used gives way; a closed session answers 404, so the client starts
/// a new one.
#[tokio::test]
async fn idle_sessions_are_reclaimed_and_their_number_is_capped() {
    let home = tempfile::tempdir().unwrap();
    let limits = SessionLimits {
        idle: std::time::Duration::from_millis(1500),
        max: 3,
    };
    let (url, stop) = listen(home.path(), home_token_options(limits)).await;
    let token = std::fs::read_to_string(home.path().join("mcp-token")).unwrap();
    let token = token.trim();
    let idle = open_session(&url, token).await;
    assert_eq!(ping(&url, token, &idle).await, 200);
    tokio::time::sleep(std::time::Duration::from_millis(1800)).await;
    assert_eq!(ping(&url, token, &idle).await, 404, "an idle session stays");

    let mut open = Vec::new();
    for _ in 0..4 {
        open.push(open_session(&url, token).await);
    }
    assert_eq!(ping(&url, token, &open[0]).await, 404, "the cap was passed");
    for id in &open[1..] {
        assert_eq!(ping(&url, token, id).await, 200);
    }
    let _ = stop.send(());
}

/// `mcp status` decided whether a listener runs by looking for `/proc/PID`, which macOS (the
/// Mail.app platform) does not have: there no listener was ever seen, and its entry was
/// removed as stale. Run where `/proc` is empty (a mount namespace with a blank tmpfs on
/// it, as on a system without procfs), it still sees this process's listener.
#[tokio::test]
async fn a_running_listener_is_seen_without_proc() {
    if !mailbroker_testkit::mounts::can_mount() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let (_url, stop) = http_server(home.path(), false).await;
    let entry = home
        .path()
        .join(format!("mcp-listeners/{}.json", std::process::id()));
    while !entry.exists() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let script = r#"mount -t tmpfs none /proc && exec "$0" --home "$1" --json mcp status"#;
    let out = std::process::Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            script,
        ])
        .arg(env!("CARGO_BIN_EXE_mailbroker"))
        .arg(home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let pids: Vec<u64> = status["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids, [u64::from(std::process::id())], "{stdout}");
    let _ = stop.send(());
}
