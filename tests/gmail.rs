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
        oauth_args(
            &mock,
            home.path(),
            &["account", "add", "gmail", "--id", "g"],
        ),
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
    let step = refused.json["next_step"].as_str().unwrap();
    assert!(
        step.starts_with("run: mailbroker account login g "),
        "{step}"
    );

    common::gmail::login(home.path(), "g").await;
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
    let args = oauth_args(
        &mock,
        home.path(),
        &["account", "add", "gmail", "--id", "g"],
    );
    let run = mailbroker_testkit::oauth::with_browser_after_forgeries(bin, home.path(), &args)
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.output.stdout);
    assert!(run.output.status.success(), "{stdout}\n{}", run.stderr);
    let added: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(added["account"]["email"], "me@mock.example", "{added}");
}

/// Google requires the secret of a Desktop app client at its token endpoint. The client file
/// its console downloads holds both; a bare `--client-id` is refused by Google at the code
/// exchange, and mailbroker says what is missing and how to pass it (not "log in again").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_id_without_its_secret_is_refused_with_how_to_pass_the_file() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = ["account", "add", "gmail", "--id", "g"]
        .map(String::from)
        .to_vec();
    args.extend(["--client-id".into(), "mailbroker-test".into()]);
    args.extend(mailbroker_testkit::oauth::endpoint_args(&mock.url));
    let refused = with_browser(home.path(), args).await;
    assert_eq!(refused.code, 2, "{}\n{}", refused.stdout, refused.stderr);
    assert_eq!(
        refused.json["error_type"], "validation_error",
        "{}",
        refused.json
    );
    let message = refused.json["error"].as_str().unwrap();
    assert!(message.contains("secret"), "{message}");
    let step = refused.json["next_step"].as_str().unwrap();
    assert!(step.contains("--credentials client_secret_"), "{step}");
    assert!(step.contains("docs/setup-google.md"), "{step}");
    assert!(!step.contains("account login"), "{step}");
    let listed = common::ok(home.path(), &["account", "list"]);
    assert_eq!(listed["accounts"], json!([]), "no half-added account");

    // A file that is not Google's client JSON is named as such before any browser opens.
    let wrong = home.path().join("client.json");
    std::fs::write(&wrong, r#"{"client_id": "x"}"#).unwrap();
    let run = common::mb(
        home.path(),
        &[
            "account",
            "add",
            "gmail",
            "--id",
            "g",
            "--no-browser",
            "--credentials",
            wrong.to_str().unwrap(),
        ],
    );
    assert_eq!(run.json["error_type"], "validation_error", "{}", run.stdout);
    assert!(
        run.json["error"].as_str().unwrap().contains("installed"),
        "{}",
        run.json
    );
}

/// An app whose consent screen is in Testing loses its refresh tokens after 7 days: sync is
/// `auth_required` and says so, and after `account login` the next sync works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_testing_grant_explains_itself_and_login_recovers() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    mock.seed(3, &["INBOX"], None);
    let home = tempfile::tempdir().unwrap();
    common::gmail::add_account(&mock, home.path(), "g", &[]).await;
    common::ok(home.path(), &["sync"]);

    common::gmail::control(&mock, "faults", json!({ "expire_refresh_tokens": true })).await;
    for args in [&["sync"][..], &["account", "doctor", "g"]] {
        let refused = common::mb(home.path(), args);
        assert_eq!(refused.code, 3, "{args:?}: {}", refused.stdout);
        assert_eq!(
            refused.json["error_type"], "auth_required",
            "{}",
            refused.stdout
        );
        let said = format!("{} {}", refused.json["error"], refused.json["next_step"]);
        assert!(said.contains("expired or revoked"), "{said}");
        assert!(said.contains("run: mailbroker account login g"), "{said}");
        assert!(
            said.contains("Testing") && said.contains("7 days"),
            "{said}"
        );
    }

    common::gmail::login(home.path(), "g").await;
    mock.seed(1, &["INBOX"], None);
    let synced = common::ok(home.path(), &["sync"]);
    assert_eq!(synced["accounts"][0]["account"], "g", "{synced}");
    let found = common::ok(home.path(), &["search", "account:g"]);
    assert_eq!(found["total"], 4, "{found}");
}

/// A client file saved by an editor that writes a UTF-8 byte order mark was refused as "not
/// JSON"; it is read as the JSON it is. A 200 MB file given as the client file was read
/// whole; anything over a megabyte is refused before it is read, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_file_with_a_byte_order_mark_works_and_a_huge_one_is_refused() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let plain = mailbroker_testkit::oauth::client_file(home.path(), &mock.url);
    let marked = home.path().join("client_secret_bom.json");
    let text = std::fs::read_to_string(&plain).unwrap();
    std::fs::write(&marked, format!("\u{feff}{text}")).unwrap();
    let mut args: Vec<String> = ["account", "add", "gmail", "--id", "g", "--credentials"]
        .map(String::from)
        .to_vec();
    args.push(marked.display().to_string());
    args.extend(mailbroker_testkit::oauth::endpoint_args(&mock.url));
    let added = with_browser(home.path(), args).await;
    assert_eq!(added.code, 0, "{}\n{}", added.stdout, added.stderr);

    let huge = home.path().join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(200 << 20)
        .unwrap();
    let started = std::time::Instant::now();
    let run = common::mb(
        home.path(),
        &[
            "account",
            "add",
            "gmail",
            "--id",
            "h",
            "--no-browser",
            "--credentials",
            huge.to_str().unwrap(),
        ],
    );
    assert_eq!(run.json["error_type"], "validation_error", "{}", run.stdout);
    assert!(
        run.json["error"].as_str().unwrap().contains("bytes"),
        "{}",
        run.stdout
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}
