//! Driving Gmail accounts against the Gmail mock: the browser step of the OAuth flow, and an
//! account that is added and synced in one call.

use std::path::Path;

use mailbroker_mock_gmail::GmailMock;
use mailbroker_testkit::oauth;
use serde_json::{Value, json};

/// Runs an OAuth command (`account add gmail …` or `account login …`) with the browser step
/// played against the mock, and checks that no token was printed.
pub async fn with_browser(home: &Path, args: Vec<String>) -> super::Run {
    with_browser_env(home, args, &[]).await
}

/// As `with_browser`, with `env` set for the command (e.g. `MAILBROKER_LOG`).
pub async fn with_browser_env(home: &Path, args: Vec<String>, env: &[(&str, &str)]) -> super::Run {
    let bin = Path::new(env!("CARGO_BIN_EXE_mailbroker"));
    // The test's own variables win over the home's defaults (its key file, say).
    let database = super::database_env(home);
    let mut all: Vec<(&str, &str)> = database.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.extend(env.iter().copied());
    let env = all;
    let run = oauth::with_browser_env(bin, home, &args, &env)
        .await
        .unwrap();
    assert!(
        run.url.contains("code_challenge_method=S256"),
        "{}",
        run.url
    );
    let stdout = String::from_utf8_lossy(&run.output.stdout).into_owned();
    for secret in TOKEN_PREFIXES {
        assert!(
            !stdout.contains(secret) && !run.stderr.contains(secret),
            "a token was printed"
        );
    }
    super::Run {
        code: run.output.status.code().unwrap_or(-1),
        json: serde_json::from_str(stdout.trim()).unwrap_or(Value::Null),
        stdout,
        stderr: run.stderr,
    }
}

/// How the mock's access and refresh tokens begin: none may ever be printed or logged.
pub const TOKEN_PREFIXES: [&str; 2] = ["ya29.", "1//mock-"];

/// The arguments of an OAuth command against `mock`, its client file saved in `home`.
pub fn oauth_args(mock: &GmailMock, home: &Path, first: &[&str]) -> Vec<String> {
    oauth::mock_args(home, &mock.url, first)
}

/// Runs `account login ID --no-browser` and consents, as the person would; it must succeed.
pub async fn login(home: &Path, id: &str) {
    let args = ["account", "login", id, "--no-browser"]
        .map(String::from)
        .to_vec();
    let login = with_browser(home, args).await;
    assert_eq!(login.code, 0, "{}\n{}", login.stdout, login.stderr);
}

/// Posts to one of the mock's control routes.
pub async fn control(mock: &GmailMock, path: &str, body: Value) -> Value {
    oauth::control(&mock.url, path, body).await
}

/// Adds Gmail account `id` (no quota limit: the mock has none) and returns the add's output.
pub async fn add_account(mock: &GmailMock, home: &Path, id: &str, extra: &[&str]) -> Value {
    let mut first = vec!["account", "add", "gmail", "--id", id, "--quota", "1000000"];
    first.extend(extra);
    let added = with_browser(home, oauth_args(mock, home, &first)).await;
    assert_eq!(added.code, 0, "{}\n{}", added.stdout, added.stderr);
    json!(added.json)
}
