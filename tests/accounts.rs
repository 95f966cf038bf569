//! `account add|list|show|remove` against a real Dovecot: TLS modes, errors, nothing stored
//! on failure, secrets never printed, and removal taking messages and secrets with it.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{add_account, add_args, mb, mb_args, ok, seed, server};

#[test]
fn add_over_implicit_tls_detects_capabilities_and_roles() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let json = add_account(
        server,
        home.path(),
        "work",
        "alice-add",
        &["--email", "alice@example.test"],
    );
    let account = &json["account"];
    assert_eq!(account["id"], "work");
    assert_eq!(account["provider"], "imap");
    // As a person reads it: the columns are tabs, not pictures of tabs.
    let listed = common::mb_text(home.path(), &["account", "list"]);
    assert_eq!(
        listed.stdout.trim_end(),
        "work\timap\talice@example.test\tlast sync: never",
        "{}",
        listed.stdout
    );
    let exts: Vec<&str> = account["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for ext in ["MOVE", "UIDPLUS", "CONDSTORE", "QRESYNC", "SPECIAL-USE"] {
        assert!(exts.contains(&ext), "{ext} missing from {exts:?}");
    }
    assert_eq!(
        account["capabilities"]["custom_tags"], true,
        "PERMANENTFLAGS \\* not detected"
    );
    let roles: Vec<(String, String)> = account["mailboxes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| !m["role"].is_null())
        .map(|m| {
            (
                m["name"].as_str().unwrap().into(),
                m["role"].as_str().unwrap().into(),
            )
        })
        .collect();
    for (name, role) in [
        ("INBOX", "inbox"),
        ("Trash", "trash"),
        ("Junk", "junk"),
        ("Sent", "sent"),
        ("Archive", "archive"),
        ("Drafts", "drafts"),
    ] {
        assert!(
            roles.contains(&(name.to_string(), role.to_string())),
            "{name}→{role} missing: {roles:?}"
        );
    }
    // The settings stored and shown hold no secret.
    assert!(!json.to_string().contains("password\":"), "{json}");

    let db = home.path().join("index.sqlite3");
    assert_eq!(
        std::fs::metadata(&db).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(home.path()).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

#[test]
fn add_over_starttls_with_password_on_stdin() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let port = server.imap_port.to_string();
    let ca = server.ca.ca_pem.display().to_string();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mailbroker"))
        .args([
            "--home",
            home.path().to_str().unwrap(),
            "--json",
            "account",
            "add",
            "imap",
        ])
        .args([
            "--id",
            "plain",
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "--tls",
            "starttls",
        ])
        .args([
            "--username",
            "bob-starttls",
            "--password-stdin",
            "--ca-file",
            &ca,
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    writeln!(
        child.stdin.take().unwrap(),
        "{}",
        mailbroker_testkit::PASSWORD
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let list = ok(home.path(), &["account", "list"]);
    assert_eq!(list["accounts"][0]["id"], "plain");
    assert_eq!(list["accounts"][0]["settings"]["tls"], "starttls");
}

/// `--preset icloud` brings iCloud's server and TLS mode and says what iCloud needs (an
/// app-specific password); an explicit --host/--port (here: the test Dovecot standing in
/// for iCloud) still wins. An unknown preset names the known ones.
#[test]
fn a_preset_fills_the_server_and_says_what_the_provider_needs() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let port = server.imaps_port.to_string();
    let ca = server.ca.ca_pem.display().to_string();
    let preset = |name: &str, id: &str| {
        let args = [
            "account",
            "add",
            "imap",
            "--id",
            id,
            "--preset",
            name,
            "--host",
            "localhost",
            "--port",
            &port,
            "--username",
            "icloud-preset",
            "--password-env",
            "MB_TEST_PW",
            "--ca-file",
            &ca,
        ];
        mb(home.path(), &args)
    };
    let added = preset("icloud", "ic");
    assert_eq!(added.code, 0, "{}\n{}", added.stdout, added.stderr);
    assert!(
        added.stderr.contains("app-specific password"),
        "{}",
        added.stderr
    );
    let settings = &added.json["account"]["settings"];
    assert_eq!(settings["host"], "localhost", "{settings}");
    assert_eq!(settings["port"], server.imaps_port, "{settings}");
    assert_eq!(settings["tls"], "implicit", "{settings}");
    assert!(ok(home.path(), &["sync"])["accounts"][0]["account"] == "ic");

    let unknown = preset("icloud.com", "other");
    assert_eq!(
        unknown.json["error_type"], "validation_error",
        "{}",
        unknown.stdout
    );
    let step = unknown.json["next_step"].as_str().unwrap();
    assert!(
        step.contains("icloud") && step.contains("fastmail"),
        "{step}"
    );
    let listed = ok(home.path(), &["account", "list"]);
    assert_eq!(listed["accounts"].as_array().unwrap().len(), 1, "{listed}");

    // Neither a preset nor a server: the person is told both ways.
    let neither = mb(
        home.path(),
        &[
            "account",
            "add",
            "imap",
            "--id",
            "x",
            "--username",
            "u",
            "--password-env",
            "MB_TEST_PW",
        ],
    );
    assert_eq!(neither.code, 2, "{}{}", neither.stdout, neither.stderr);
    assert_eq!(neither.json["error_type"], "validation_error");
    let step = neither.json["next_step"].as_str().unwrap();
    assert!(
        step.contains("--preset") && step.contains("icloud"),
        "{step}"
    );
}

#[test]
fn wrong_password_is_auth_required_and_stores_nothing() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut args = add_args("bad", "localhost", server.imaps_port, "carol");
    let env_at = args.len() - 1;
    args[env_at] = "WRONG_PW".to_string();
    args.extend([
        "--ca-file".to_string(),
        server.ca.ca_pem.display().to_string(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = common::mb_with(home.path(), &args, &[("WRONG_PW", "not-the-password")]);
    assert_ne!(run.code, 0);
    assert_eq!(run.json["success"], false);
    assert_eq!(run.json["error_type"], "auth_required", "{}", run.stdout);
    assert!(
        !run.stdout.contains("not-the-password"),
        "password echoed: {}",
        run.stdout
    );
    let list = ok(home.path(), &["account", "list"]);
    assert_eq!(list["accounts"].as_array().unwrap().len(), 0);
}

#[test]
fn untrusted_certificate_and_closed_port_are_provider_unavailable() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    // No --ca-file: the test CA is not a public root.
    let run = mb_args(
        home.path(),
        &add_args("x", "localhost", server.imaps_port, "dave"),
    );
    assert_ne!(run.code, 0);
    assert_eq!(
        run.json["error_type"], "provider_unavailable",
        "{}",
        run.stdout
    );
    assert!(
        run.json["error"].as_str().unwrap().contains("tls"),
        "{}",
        run.stdout
    );
    assert!(
        run.json["next_step"]
            .as_str()
            .unwrap()
            .contains("--ca-file")
    );

    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let run = mb_args(home.path(), &add_args("x", "127.0.0.1", closed, "dave"));
    assert_ne!(run.code, 0);
    assert_eq!(
        run.json["error_type"], "provider_unavailable",
        "{}",
        run.stdout
    );
    let list = ok(home.path(), &["account", "list"]);
    assert_eq!(list["accounts"].as_array().unwrap().len(), 0);
}

#[test]
fn bad_input_is_a_validation_error() {
    let home = tempfile::tempdir().unwrap();
    let run = mb_args(home.path(), &add_args("no spaces", "h", 1, "u"));
    assert_eq!(run.json["error_type"], "validation_error", "{}", run.stdout);
    let run = mb(home.path(), &["account", "show", "ghost"]);
    assert_eq!(run.json["error_type"], "not_found");
    assert!(
        run.json["next_step"]
            .as_str()
            .unwrap()
            .contains("account list")
    );
    let run = mb(home.path(), &["search", "bogus:1"]);
    assert_eq!(run.json["error_type"], "validation_error");
}

#[tokio::test]
async fn remove_takes_messages_and_secrets_along() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    seed(server, "erin-remove", "INBOX", 3)
        .await
        .logout()
        .await
        .unwrap();
    add_account(server, home.path(), "gone", "erin-remove", &[]);
    ok(home.path(), &["sync"]);
    assert_eq!(
        ok(home.path(), &["search", "account:gone"])["messages"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    ok(home.path(), &["account", "remove", "gone"]);
    assert_eq!(
        ok(home.path(), &["search", "account:gone"])["messages"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let run = mb(home.path(), &["account", "show", "gone"]);
    assert_eq!(run.json["error_type"], "not_found");

    let store = mailbroker::store::Store::open(&home.path().join("index.sqlite3"))
        .await
        .unwrap();
    let err = store
        .secret(&"gone".parse().unwrap(), "password")
        .await
        .unwrap_err();
    assert_eq!(err.error_type(), "auth_required");
}

/// What an IMAP server can never do as set up is refused before anything is planned, staged
/// or sent (the adapter's `check`): without MOVE and UIDPLUS a move or a trash deletion would
/// need a bare EXPUNGE, and without UIDPLUS so would a permanent one. `account doctor` logs in
/// and says what the server has.
#[tokio::test]
async fn a_server_without_move_or_uidplus_is_refused_up_front_and_the_doctor_says_why() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut client = seed(server, "nina-bare", "INBOX", 4).await;
    let bare = [
        "--disable-extension",
        "MOVE",
        "--disable-extension",
        "UIDPLUS",
    ];
    add_account(server, home.path(), "bare", "nina-bare", &bare);
    ok(home.path(), &["sync"]);
    let before = client.flags("INBOX").await.unwrap();

    let moved = mb(
        home.path(),
        &["update", "--query", "in:inbox", "--move-to", "archive"],
    );
    assert_eq!(moved.json["error_type"], "unsupported", "{}", moved.stdout);
    assert!(
        moved.stdout.contains("neither MOVE nor UIDPLUS"),
        "{}",
        moved.stdout
    );
    for mode in [&["--permanent"][..], &[][..]] {
        let mut args = vec!["stage-delete", "in:inbox"];
        args.extend(mode);
        let staged = mb(home.path(), &args);
        assert_eq!(
            staged.json["error_type"], "unsupported",
            "{}",
            staged.stdout
        );
        assert!(staged.json["next_step"].is_string(), "{}", staged.stdout);
    }
    assert_eq!(client.flags("INBOX").await.unwrap(), before, "nothing sent");
    let changes = ok(home.path(), &["changes"]);
    assert_eq!(changes["changes"].as_array().unwrap().len(), 0, "{changes}");
    let manifests = ok(home.path(), &["delete-staged"]);
    assert_eq!(manifests["manifests"].as_array().unwrap().len(), 0);

    let doctor = ok(home.path(), &["account", "doctor", "bare"]);
    let doctor = &doctor["doctor"];
    assert_eq!(doctor["account"], "bare", "{doctor}");
    assert!(doctor["mailboxes"].as_u64().unwrap() >= 6, "{doctor}");
    let extensions = doctor["extensions"].as_array().unwrap();
    assert!(
        !extensions.iter().any(|e| e == "UIDPLUS" || e == "MOVE"),
        "{doctor}"
    );
    assert!(extensions.iter().any(|e| e == "CONDSTORE"), "{doctor}");
    client.logout().await.unwrap();
}
