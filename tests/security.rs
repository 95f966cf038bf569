//! What keeps other people out and secrets in: plain IMAP only to this machine, no password
//! or token in any log line at trace level, strong HTTP tokens in private files, and no
//! terminal control from a crafted message.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use common::gmail::{TOKEN_PREFIXES, oauth_args, with_browser_env};
use common::{add_account, mb, mb_text, mb_with, ok, server};
use mailbroker_mock_gmail::GmailMock;
use mailbroker_testkit::{ImapClient, PASSWORD};
use serde_json::json;

const TRACE: [(&str, &str); 1] = [("MAILBROKER_LOG", "trace")];

#[tokio::test]
async fn plain_imap_goes_only_to_this_machine() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    ImapClient::connect(server, "sec-plain").await.unwrap();
    // 0.0.0.0 reaches this machine's Dovecot, but it is not a loopback address: to
    // mailbroker it is any other host.
    let mut args = common::add_args("p", "0.0.0.0", server.imap_port, "sec-plain");
    args.extend(["--tls", "none"].map(String::from));
    let refused = common::mb_args(home.path(), &args);
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    assert_eq!(refused.json["error_type"], "validation_error");
    assert!(
        refused.json["next_step"]
            .as_str()
            .unwrap()
            .contains("--allow-plaintext")
    );
    assert!(
        ok(home.path(), &["account", "list"])["accounts"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    args.push("--allow-plaintext".into());
    let allowed = common::mb_args(home.path(), &args);
    assert_eq!(allowed.code, 0, "{}\n{}", allowed.stdout, allowed.stderr);
    assert!(allowed.stderr.contains("clear text"), "{}", allowed.stderr);
    // To this machine it needs no flag.
    let mut local = common::add_args("l", "127.0.0.1", server.imap_port, "sec-plain");
    local.extend(["--tls", "none"].map(String::from));
    assert_eq!(common::mb_args(home.path(), &local).code, 0);
}

#[tokio::test]
async fn no_password_in_logs_at_trace_level() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let user = "sec-trace";
    common::seed(server, user, "INBOX", 3).await;
    let mut args = common::add_args("t", "127.0.0.1", server.imap_port, user);
    args.extend(["--tls", "none"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // `mb_with` fails the test if the password appears on stdout or stderr.
    let added = mb_with(home.path(), &args, &TRACE);
    assert_eq!(added.code, 0, "{}", added.stdout);
    assert!(
        added.stderr.contains("LOGIN") && added.stderr.contains("<redacted>"),
        "the LOGIN was not logged at trace level: {}",
        &added.stderr[..added.stderr.len().min(2000)]
    );
    for run in [
        vec!["sync"],
        vec!["update", "--query", "in:inbox", "--flag", "--yes"],
        vec!["show", "1", "--body"],
    ] {
        let run = mb_with(home.path(), &run, &TRACE);
        assert_eq!(run.code, 0, "{}", run.stdout);
    }
    assert!(!PASSWORD.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_oauth_token_in_logs_at_trace_level() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    mock.seed(3, &["INBOX", "UNREAD"], None);
    let home = tempfile::tempdir().unwrap();
    let first = ["account", "add", "gmail", "--id", "g", "--quota", "1000000"];
    // `with_browser_env` fails the test if a token appears on stdout or stderr.
    let added = with_browser_env(home.path(), oauth_args(&mock, home.path(), &first), &TRACE).await;
    assert_eq!(added.code, 0, "{}", added.stdout);
    assert!(added.stderr.contains("TRACE"), "not traced");
    let expire = reqwest::Client::new()
        .post(format!("{}/_mock/faults", mock.url))
        .json(&json!({ "expire_tokens": true }))
        .send()
        .await
        .unwrap();
    assert!(expire.status().is_success());
    // A sync, after a token refresh.
    for args in [vec!["sync"], vec!["account", "doctor", "g"]] {
        let run = mb_with(home.path(), &args, &TRACE);
        assert_eq!(run.code, 0, "{}", run.stdout);
        for prefix in TOKEN_PREFIXES {
            assert!(!run.stderr.contains(prefix), "{args:?} logged a token");
            assert!(!run.stdout.contains(prefix), "{args:?} printed a token");
        }
    }
}

#[tokio::test]
async fn a_password_with_a_line_break_is_invalid() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut args = common::add_args("c", "127.0.0.1", server.imap_port, "sec-crlf");
    args.extend(["--tls", "none"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = mb_with(home.path(), &args, &[("MB_TEST_PW", "pass\r\nword")]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert_eq!(run.json["error_type"], "validation_error", "{}", run.stdout);
}

/// Starts `mailbroker mcp --http 0` with `token` in the environment or a file of `mode`,
/// and returns how it ended, within 10 s.
fn serve_http(token: &str, file_mode: Option<u32>) -> (i32, String) {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mailbroker"));
    cmd.arg("--home")
        .arg(home.path())
        .args(["--json", "mcp", "--http", "0"])
        .stdin(Stdio::null())
        .env_remove("MAILBROKER_MCP_TOKEN");
    match file_mode {
        Some(mode) => {
            let path = home.path().join("token");
            std::fs::write(&path, token).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            cmd.arg("--http-token-file").arg(path);
        }
        None => {
            cmd.env("MAILBROKER_MCP_TOKEN", token);
        }
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (
                status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            );
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return (-1, "still serving".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn weak_or_shared_http_tokens_are_refused() {
    for (token, mode) in [
        ("x", None),
        ("short-token", None),
        ("short", Some(0o600)),
        ("a-long-enough-random-token", Some(0o644)),
    ] {
        let (code, stdout) = serve_http(token, mode);
        assert_eq!(code, 2, "{token:?} {mode:?}: {stdout}");
        assert!(stdout.contains("validation_error"), "{stdout}");
    }
}

#[tokio::test]
async fn a_crafted_message_cannot_drive_the_terminal() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut client = ImapClient::connect(server, "sec-esc").await.unwrap();
    // ESC sequences that set the window title and colour, a BEL, and an encoded CR LF that
    // would start a forged row of `search` output.
    let subject = "Invoice \x1b]0;owned\x07\x1b[31mred =?utf-8?q?x=0D=0A____99_N_forged?=";
    let mail = format!(
        "From: Mallory <m@example.test>\r\nTo: you@example.test\r\nSubject: {subject}\r\n\
         Message-ID: <esc@example.test>\r\nDate: Mon, 2 Nov 2026 10:00:00 +0000\r\n\r\n\
         Body \x1b[2J cleared\r\n"
    );
    client.append("INBOX", "", mail.as_bytes()).await.unwrap();
    add_account(server, home.path(), "e", "sec-esc", &[]);
    ok(home.path(), &["sync"]);
    let raw = |s: &str| s.contains('\x1b') || s.contains('\x07') || s.contains('\r');
    for args in [
        vec!["search", "from:mallory"],
        vec!["show", "1"],
        vec!["show", "1", "--body"],
    ] {
        let run = mb_text(home.path(), &args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        assert!(!raw(&run.stdout), "{args:?}: {:?}", run.stdout);
        assert!(
            run.stdout.contains('\u{241b}'),
            "{args:?}: {:?}",
            run.stdout
        );
    }
    let rows = mb_text(home.path(), &["search", "from:mallory"]);
    assert_eq!(rows.stdout.lines().count(), 1, "{:?}", rows.stdout);
    // JSON keeps the data exact.
    let found = mb(home.path(), &["search", "from:mallory"]);
    assert!(
        found.json["messages"][0]["subject"]
            .as_str()
            .unwrap()
            .contains("\x1b]0;owned\x07"),
        "{}",
        found.stdout
    );
}

/// A message from a stranger with an unrelated subject and one `References:` naming a known
/// Message-ID joined that conversation, in this account and in another:
/// `update --query thread:ID --move-to trash --dry-run` planned the conversation's messages
/// plus the stranger's, in two accounts. A conversation is one account's, and a message
/// joins by its references only when its subject matches once `Re:`, `Fwd:`, `AW:` and list
/// tags are set aside; a scoped token counts only its own accounts' messages of it.
#[tokio::test]
async fn a_stranger_cannot_join_a_conversation_nor_one_across_accounts() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let spam = "From: spam@evil.example\r\nTo: user@example.test\r\nSubject: Cheap watches\r\n\
                Message-ID: <spam1@evil.example>\r\nReferences: <lunch0@example.test>\r\n\
                In-Reply-To: <lunch0@example.test>\r\n\r\nBuy now\r\n";
    let forward = "From: eve@example.test\r\nTo: user@example.test\r\n\
                   Subject: AW: Fwd: [team] Re: Lunch on Friday?\r\n\
                   Message-ID: <fwd1@example.test>\r\nReferences: <lunch0@example.test>\r\n\r\nSee below\r\n";
    for (id, user) in [("alpha", "sec-thread-a"), ("beta", "sec-thread-b")] {
        let mut imap = ImapClient::connect(server, user).await.unwrap();
        let mut refs = Vec::new();
        for i in 0..3 {
            let raw =
                mailbroker_testkit::reply(i, "Dana <dana@example.test>", "Lunch on Friday?", &refs);
            imap.append("INBOX", "", raw.as_bytes()).await.unwrap();
            refs.push(format!("<lunch{i}@example.test>"));
        }
        imap.append("INBOX", "", spam.as_bytes()).await.unwrap();
        imap.append("INBOX", "", forward.as_bytes()).await.unwrap();
        add_account(server, home.path(), id, user, &[]);
    }
    ok(home.path(), &["sync"]);

    let rows = ok(home.path(), &["search", "--limit", "100", "in:inbox"]);
    let rows = rows["messages"].as_array().unwrap();
    let thread_of = |account: &str, from: &str| {
        rows.iter()
            .find(|r| r["account"] == account && r["from"].as_str().unwrap().contains(from))
            .map(|r| {
                (
                    r["thread"].as_str().unwrap().to_string(),
                    r["thread_messages"].clone(),
                )
            })
            .unwrap()
    };
    let (alpha, count) = thread_of("alpha", "dana@");
    assert_eq!(
        count, 4,
        "three messages and the forward with a matching subject: {rows:?}"
    );
    let (beta, _) = thread_of("beta", "dana@");
    assert_ne!(alpha, beta, "one conversation across two accounts");
    assert_ne!(thread_of("alpha", "spam@").0, alpha, "the stranger joined");
    assert_eq!(
        thread_of("alpha", "eve@").0,
        alpha,
        "a forward with the subject joins"
    );

    let planned = ok(
        home.path(),
        &[
            "update",
            "--query",
            &format!("thread:{alpha}"),
            "--move-to",
            "trash",
            "--dry-run",
        ],
    );
    assert_eq!(planned["planned"], 4, "{planned}");

    // A token scoped to alpha sees alpha's count, and none of beta's rows.
    let token = ok(
        home.path(),
        &[
            "token",
            "create",
            "--name",
            "alpha-only",
            "--accounts",
            "alpha",
        ],
    );
    let token = token["token"].as_str().unwrap().to_string();
    let served = common::mcp::http_server(home.path());
    let session = common::mcp::http_session(&served.1, &token).await;
    let query = json!({ "query": format!("thread:{alpha}") });
    let found = common::mcp::ok_call(&session, "search_messages", query).await;
    let messages = found["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{found}");
    assert!(
        messages
            .iter()
            .all(|m| m["thread_messages"] == 4 && m["account"] == "alpha"),
        "{found}"
    );
    session.cancel().await.ok();
}

/// A plain-http `--token-url` (or `--auth-url`, `--api-base`, Microsoft's `--authority`,
/// `--graph-base`) to a host that is not this machine was used as given, and its listener
/// got the client secret and the code in clear. Refused when the command starts, before any
/// sign-in URL is shown; a URL with a user name in it too.
#[test]
fn sign_in_endpoints_in_clear_to_another_host_are_refused_at_once() {
    let home = tempfile::tempdir().unwrap();
    let gmail = [
        "account",
        "add",
        "gmail",
        "--id",
        "g",
        "--client-id",
        "c",
        "--no-browser",
    ];
    let graph = ["account", "add", "graph", "--id", "m", "--client-id", "c"];
    let cases: [(&[&str], &str, &str); 6] = [
        (&gmail, "--token-url", "http://192.0.2.1/token"),
        (&gmail, "--auth-url", "http://192.0.2.1/auth"),
        (&gmail, "--api-base", "http://192.0.2.1/"),
        (&gmail, "--token-url", "http://localhost:x@192.0.2.1/token"),
        (&graph, "--authority", "http://192.0.2.1"),
        (&graph, "--graph-base", "http://192.0.2.1"),
    ];
    for (first, flag, url) in cases {
        let mut args = first.to_vec();
        args.extend([flag, url]);
        let started = std::time::Instant::now();
        let run = mb(home.path(), &args);
        assert_eq!(run.code, 2, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert_eq!(run.json["error_type"], "validation_error", "{}", run.stdout);
        assert!(
            run.json["error"].as_str().unwrap().contains(flag),
            "{}",
            run.stdout
        );
        assert!(
            !run.stderr.contains("http"),
            "a sign-in URL was shown: {}",
            run.stderr
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }
}
