//! Gmail account setup against the Gmail mock: the whole OAuth flow as a script would drive it
//! with --no-browser (PKCE checked by the mock), refresh on expiry, and `auth_required` after
//! the user revokes access.

mod common;

use common::gmail::{oauth_args, with_browser};
use mailbroker_mock_gmail::GmailMock;
use serde_json::{Value, json};

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

/// Any page on this machine can reach the sign-in's loopback listener. A forged redirect (a
/// code, or a refusal, with a state it made up) used to abort the sign-in; it is answered
/// 400 and ignored, and the person's own redirect completes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_redirect_neither_ends_nor_aborts_the_sign_in() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_mailbroker"));
    let args = oauth_args(&mock, &["account", "add", "gmail", "--id", "g"]);
    let run = mailbroker_testkit::oauth::with_browser_after_forgeries(bin, home.path(), &args)
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.output.stdout);
    assert!(run.output.status.success(), "{stdout}\n{}", run.stderr);
    let added: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(added["account"]["email"], "me@mock.example", "{added}");
}
