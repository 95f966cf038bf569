//! Driving Gmail accounts against the Gmail mock: the browser step of the OAuth flow, and an
//! account that is added and synced in one call.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use mailbroker_mock_gmail::GmailMock;
use serde_json::{Value, json};

/// Runs an OAuth command (`account add gmail …` or `account login …`), playing the browser:
/// it takes the authorization URL from stderr, lets the mock approve, and follows the
/// redirect to mailbroker's loopback listener.
pub async fn with_browser(home: &Path, args: Vec<String>) -> super::Run {
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
    super::Run {
        code: out.status.code().unwrap_or(-1),
        json: serde_json::from_str(stdout.trim()).unwrap_or(Value::Null),
        stdout,
        stderr,
    }
}

pub fn oauth_args(mock: &GmailMock, first: &[&str]) -> Vec<String> {
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

/// Posts to one of the mock's control routes.
pub async fn control(mock: &GmailMock, path: &str, body: Value) -> Value {
    reqwest::Client::new()
        .post(format!("{}/_mock/{path}", mock.url))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Adds Gmail account `id` (no quota limit: the mock has none) and returns the add's output.
pub async fn add_account(mock: &GmailMock, home: &Path, id: &str, extra: &[&str]) -> Value {
    let mut first = vec!["account", "add", "gmail", "--id", id, "--quota", "1000000"];
    first.extend(extra);
    let added = with_browser(home, oauth_args(mock, &first)).await;
    assert_eq!(added.code, 0, "{}\n{}", added.stdout, added.stderr);
    json!(added.json)
}
