//! Gmail account setup against the Gmail mock: the whole OAuth flow as a script would drive it
//! with --no-browser (PKCE checked by the mock), refresh on expiry, and `auth_required` after
//! the user revokes access.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use mailbroker_mock_gmail::GmailMock;
use serde_json::{Value, json};

/// Runs an OAuth command (`account add gmail …` or `account login …`), playing the browser:
/// it takes the authorization URL from stderr, lets the mock approve, and follows the
/// redirect to mailbroker's loopback listener.
async fn with_browser(home: &Path, args: Vec<String>) -> common::Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mailbroker"))
        .arg("--home")
        .arg(home)
        .arg("--json")
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (url, rest) = tokio::task::spawn_blocking(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = String::new();
        let mut seen = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap() == 0 {
                panic!("no authorization URL on stderr: {seen}");
            }
            seen.push_str(&line);
            if line.starts_with("http") && line.contains("code_challenge=") {
                return (line.trim().to_string(), reader);
            }
        }
    })
    .await
    .unwrap();
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let consent = browser.get(&url).send().await.unwrap();
    assert_eq!(consent.status(), 302);
    let back = consent.headers()["location"].to_str().unwrap().to_string();
    assert!(back.starts_with("http://127.0.0.1:"), "{back}");
    let landed = browser.get(&back).send().await.unwrap();
    assert_eq!(landed.status(), 200);
    let out = tokio::task::spawn_blocking(move || {
        let mut tail = String::new();
        let mut rest = rest;
        std::io::Read::read_to_string(&mut rest, &mut tail).ok();
        let out = child.wait_with_output().unwrap();
        (out, tail)
    })
    .await
    .unwrap();
    let (out, stderr) = out;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    for secret in ["ya29.", "1//mock-"] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "a token was printed"
        );
    }
    common::Run {
        code: out.status.code().unwrap_or(-1),
        json: serde_json::from_str(stdout.trim()).unwrap_or(Value::Null),
        stdout,
        stderr,
    }
}

fn oauth_args(mock: &GmailMock, first: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = first.iter().map(|s| s.to_string()).collect();
    args.extend([
        "--client-id".to_string(),
        "mailbroker-test".into(),
        "--no-browser".into(),
        "--api-base".into(),
        mock.url.clone(),
        "--auth-url".into(),
        format!("{}/o/oauth2/v2/auth", mock.url),
        "--token-url".into(),
        format!("{}/token", mock.url),
    ]);
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_setup_refresh_and_revocation() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    let http = reqwest::Client::new();
    let control = |path: &str, body: Value| {
        http.post(format!("{}/_mock/{path}", mock.url))
            .json(&body)
            .send()
    };
    control("seed", json!({ "count": 5, "labels": ["INBOX", "UNREAD"] }))
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();

    let added = with_browser(
        home.path(),
        oauth_args(&mock, &["account", "add", "gmail", "--id", "g"]),
    )
    .await;
    assert_eq!(added.code, 0, "{}\n{}", added.stdout, added.stderr);
    let account = &added.json["account"];
    assert_eq!(account["provider"], "gmail");
    assert_eq!(account["email"], "me@mock.example");
    assert_eq!(
        account["capabilities"]["extensions"],
        json!(["https://www.googleapis.com/auth/gmail.modify"])
    );
    let roles: Vec<&str> = account["mailboxes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    for role in ["inbox", "trash", "junk", "sent"] {
        assert!(roles.contains(&role), "{role} missing: {account}");
    }

    let doctor = common::ok(home.path(), &["account", "doctor", "g"]);
    assert_eq!(doctor["doctor"]["messages"], 5);
    assert_eq!(doctor["doctor"]["permanent_delete"], false);

    // The access token expires: the doctor refreshes it (single refresh) and carries on.
    control("faults", json!({ "expire_tokens": true }))
        .await
        .unwrap();
    let refreshed = common::ok(home.path(), &["account", "doctor", "g"]);
    assert_eq!(refreshed["doctor"]["email"], "me@mock.example");
    let log = mock.requests();
    assert!(log.iter().filter(|r| r.path.ends_with("/profile")).count() >= 2);

    // The user revokes access: auth_required, and the next step says how to recover.
    control("revoke-all", json!({})).await.unwrap();
    let refused = common::mb(home.path(), &["account", "doctor", "g"]);
    assert_eq!(refused.code, 3, "{}", refused.stdout);
    assert_eq!(refused.json["error_type"], "auth_required");
    assert_eq!(refused.json["next_step"], "run: mailbroker account login g");

    let login_args = ["account", "login", "g", "--no-browser"]
        .map(String::from)
        .to_vec();
    let login = with_browser(home.path(), login_args).await;
    assert_eq!(login.code, 0, "{}\n{}", login.stdout, login.stderr);
    common::ok(home.path(), &["account", "doctor", "g"]);
}
