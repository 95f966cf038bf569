//! Attachments through the real binary on Dovecot: listed by part, saved as safe files inside
//! the directory given (never outside it, never over a file, 0600); one part read alone over
//! IMAP, Cyrus JMAP and the Gmail mock.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::{mb, ok};
use mailbroker_testkit::{ImapClient, Proxy};

/// One attachment part named `name` (RFC 2231, so any character can be sent), holding `body`.
fn part(name: &str, body: &str) -> String {
    let encoded: String = (name.bytes())
        .map(|b| match b.is_ascii_alphanumeric() || b"._-".contains(&b) {
            true => (b as char).to_string(),
            false => format!("%{b:02X}"),
        })
        .collect();
    format!(
        "--b\r\nContent-Type: application/octet-stream\r\n\
         Content-Disposition: attachment; filename*=utf-8''{encoded}\r\n\r\n{body}\r\n"
    )
}

const HOSTILE: [&str; 9] = [
    "../../.bashrc",
    "/etc/passwd",
    ".hidden",
    "con",
    "invoice\u{202e}fdp.exe",
    "nul\0byte.txt",
    "report.pdf",
    "report.pdf",
    "",
];

fn message() -> Vec<u8> {
    let long = "x".repeat(300) + ".txt";
    let mut names: Vec<String> = HOSTILE.iter().map(|s| s.to_string()).collect();
    names.push(long);
    let mut text = String::from(
        "From: mallory@example.test\r\nTo: user@example.test\r\nSubject: Files\r\n\
         Message-ID: <files@example.test>\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=b\r\n\r\n\
         --b\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n",
    );
    for (n, name) in names.iter().enumerate() {
        text.push_str(&part(name, &format!("contents {n}")));
    }
    text.push_str(
        "--b\r\nContent-Type: message/rfc822\r\n\r\nFrom: a@example.test\r\nSubject: Forwarded\r\n\r\ninner\r\n",
    );
    text.push_str(&part("big.bin", &"B".repeat(4096)));
    text.push_str("--b--\r\n");
    text.into_bytes()
}

fn names_in(dir: &Path) -> BTreeSet<String> {
    (std::fs::read_dir(dir).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_are_saved_as_safe_files_inside_the_directory() {
    let Some(server) = common::server() else {
        return;
    };
    let user = "attachments";
    let mut client = ImapClient::connect(server, user).await.unwrap();
    client.append("INBOX", "", &message()).await.unwrap();
    let proxy = Proxy::start(server.imap_port, Duration::ZERO).unwrap();
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::add_proxied(h, "a", proxy.port, user);
    ok(h, &["sync"]);
    let id = common::message_ids(&ok(h, &["search", "subject:Files"]))[0].to_string();

    let listed = ok(h, &["attachments", &id]);
    let listed = listed["attachments"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 12, "{listed:?}");
    let forwarded = listed
        .iter()
        .find(|a| a["content_type"] == "message/rfc822")
        .unwrap();
    assert_eq!(forwarded["name"], "Forwarded.eml");
    assert_eq!(forwarded["part"], "12");

    // A directory inside another, with a file a name would collide with.
    let outer = tempfile::tempdir().unwrap();
    let dir = outer.path().join("saved");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("passwd"), "mine").unwrap();
    let refused = mb(
        h,
        &[
            "attachments",
            &id,
            "--to",
            dir.to_str().unwrap(),
            "--max-bytes",
            "1000",
        ],
    );
    assert_eq!(
        refused.json["error_type"], "limit_exceeded",
        "{}",
        refused.stdout
    );
    assert!(
        refused.json["next_step"]
            .as_str()
            .unwrap()
            .contains("--max-bytes")
    );
    assert_eq!(
        names_in(&dir),
        BTreeSet::from(["passwd".to_string()]),
        "nothing written"
    );

    let saved = ok(h, &["attachments", &id, "--to", dir.to_str().unwrap()]);
    let saved = saved["saved"].as_array().unwrap().clone();
    assert_eq!(saved.len(), 12);
    assert_eq!(
        std::fs::read_to_string(dir.join("passwd")).unwrap(),
        "mine",
        "not overwritten"
    );
    assert_eq!(
        names_in(outer.path()),
        BTreeSet::from(["saved".to_string()]),
        "nothing outside"
    );
    let names = names_in(&dir);
    assert_eq!(
        names.len(),
        13,
        "one file each, and the person's own: {names:?}"
    );
    for name in &names {
        assert!(!name.starts_with('.'), "{name:?}");
        assert!(name.len() <= 128, "{name:?}");
        assert!(
            !name.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{name:?}"
        );
    }
    for expected in [
        "bashrc",
        "passwd (1)",
        "hidden",
        "_con",
        "report.pdf",
        "report (1).pdf",
        "attachment",
        "Forwarded.eml",
    ] {
        assert!(names.contains(expected), "{expected} in {names:?}");
    }
    for s in &saved {
        let path = Path::new(s["path"].as_str().unwrap());
        assert_eq!(path.parent().unwrap(), dir, "{path:?}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{path:?}");
        }
    }
    let inner = std::fs::read_to_string(dir.join("Forwarded.eml")).unwrap();
    assert!(
        inner.contains("Subject: Forwarded") && inner.contains("inner"),
        "{inner}"
    );

    // One part is read alone: its MIME header and body, not the whole message.
    proxy.take_sent();
    let one = ok(
        h,
        &[
            "attachments",
            &id,
            "--part",
            "8",
            "--to",
            dir.to_str().unwrap(),
        ],
    );
    assert_eq!(
        one["saved"][0]["path"].as_str().unwrap(),
        dir.join("report (2).pdf").to_str().unwrap()
    );
    let sent = proxy.take_sent();
    assert!(sent.contains("BODY.PEEK[8.MIME] BODY.PEEK[8]"), "{sent}");
    assert!(!sent.contains("BODY.PEEK[]"), "{sent}");
    assert_eq!(
        std::fs::read_to_string(dir.join("report (2).pdf")).unwrap(),
        "contents 6"
    );
    let missing = mb(
        h,
        &[
            "attachments",
            &id,
            "--part",
            "99",
            "--to",
            dir.to_str().unwrap(),
        ],
    );
    assert_eq!(
        missing.json["error_type"], "not_found",
        "{}",
        missing.stdout
    );
}

/// `save_attachments` writes only into the directory the person configured, answers each
/// file as a resource link, and `resources/read` serves it from there alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assistant_saves_attachments_and_reads_them_as_resources() {
    use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams, ResourceContents};
    use serde_json::json;
    let Some(server) = common::server() else {
        return;
    };
    let user = "attachments-mcp";
    let mut client = ImapClient::connect(server, user).await.unwrap();
    client.append("INBOX", "", &message()).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::add_proxied(h, "m", server.imap_port, user);
    ok(h, &["sync"]);
    let id = common::message_ids(&ok(h, &["search", "subject:Files"]))[0];
    let version = rmcp::model::ProtocolVersion::V_2025_11_25;

    let unset = common::mcp::connect(h, common::mcp::client(None, version.clone())).await;
    let args = json!({ "ids": [id], "part": "8" });
    let refused = common::mcp::err_call(&unset, "save_attachments", args.clone()).await;
    assert_eq!(refused["error_type"], "unsupported", "{refused}");
    assert!(
        refused["next_step"]
            .as_str()
            .unwrap()
            .contains("--attachments-dir")
    );
    unset.cancel().await.unwrap();

    // The person sets the home's directory at a terminal; a server started without one uses it.
    let homed = tempfile::tempdir().unwrap();
    ok(
        h,
        &["mcp", "attachments-dir", homed.path().to_str().unwrap()],
    );
    let set = common::mcp::connect(h, common::mcp::client(None, version.clone())).await;
    let body = common::mcp::ok_call(&set, "save_attachments", args.clone()).await;
    let want = homed.path().canonicalize().unwrap().join("report.pdf");
    assert_eq!(body["saved"][0]["path"], want.to_str().unwrap(), "{body}");
    set.cancel().await.unwrap();
    let cleared = ok(h, &["mcp", "attachments-dir", "--none"]);
    assert!(cleared["attachments_dir"].is_null(), "{cleared}");

    let dir = tempfile::tempdir().unwrap();
    let options = mailbroker::mcp::McpOptions {
        attachments: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let session = common::mcp::connect_with(h, common::mcp::client(None, version), options).await;
    let call = CallToolRequestParams::new("save_attachments")
        .with_arguments(args.as_object().cloned().unwrap());
    let result = session.call_tool(call).await.unwrap();
    let body = result.structured_content.clone().unwrap();
    assert_eq!(body["success"], true, "{body}");
    assert_eq!(
        body["saved"][0]["path"],
        dir.path().join("report.pdf").to_str().unwrap()
    );
    let uri = body["saved"][0]["uri"].as_str().unwrap().to_string();
    let linked: Vec<String> = (result.content.iter())
        .filter_map(|c| match c {
            rmcp::model::ContentBlock::ResourceLink(r) => Some(r.uri.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(linked, std::slice::from_ref(&uri));

    let read = session
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap();
    let ResourceContents::BlobResourceContents { blob, .. } = &read.contents[0] else {
        panic!("{read:?}");
    };
    let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, blob).unwrap();
    assert_eq!(bytes, b"contents 6");
    std::fs::write(home.path().join("secret"), "no").unwrap();
    for outside in [
        "mailbroker://attachment/..%2Fsecret",
        "mailbroker://attachment/%2Fetc%2Fpasswd",
        "file:///etc/passwd",
    ] {
        let refused = session
            .read_resource(ReadResourceRequestParams::new(outside))
            .await;
        assert!(refused.is_err(), "{outside} was served");
    }
    session.cancel().await.unwrap();
}

/// Over JMAP on Cyrus, one part is its body structure's blob, downloaded alone and decoded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_part_over_jmap_is_its_own_blob() {
    let Some(cyrus) = mailbroker_testkit::cyrus::shared() else {
        return;
    };
    let user = "attachments-jmap";
    cyrus.add_user(user).await.unwrap();
    let mut client = ImapClient::connect_port(cyrus.imap_port, user)
        .await
        .unwrap();
    client.append("INBOX", "", &message()).await.unwrap();
    let proxy = Proxy::start(cyrus.port, Duration::ZERO).unwrap();
    let url = format!("http://127.0.0.1:{}", proxy.port);
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let add = mailbroker_testkit::cyrus::account_add_args("j", &url, user, "MB_TEST_PW");
    assert_eq!(common::mb_args(h, &add).code, 0);
    ok(h, &["sync"]);
    let id = common::message_ids(&ok(h, &["search", "subject:Files"]))[0].to_string();
    let listed = ok(h, &["attachments", &id]);
    assert_eq!(
        listed["attachments"].as_array().unwrap().len(),
        12,
        "{listed}"
    );

    let dir = tempfile::tempdir().unwrap();
    proxy.take_sent();
    save_report(h, &id, dir.path());
    let sent = proxy.take_sent();
    assert!(sent.contains("bodyStructure"), "{sent}");
    assert_eq!(sent.matches("/download/").count(), 1, "one blob: {sent}");
    save_forwarded(h, &id, dir.path());
}

/// Over Gmail, one part is found in the message's tree of parts (`format=full`) and read by
/// its attachment id, the rest of the message never downloaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_part_over_gmail_is_read_by_its_attachment_id() {
    let mock = mailbroker_mock_gmail::GmailMock::start("me@mock.example")
        .await
        .unwrap();
    let source = String::from_utf8(message()).unwrap();
    let (head, body) = source.split_once("\r\n\r\n").unwrap();
    let headers: Vec<(&str, &str)> = (head.split("\r\n"))
        .map(|line| line.split_once(": ").unwrap())
        .collect();
    let gmail_id = mock.add_message(&headers, body, &["INBOX"]);
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::gmail::add_account(&mock, h, "g", &[]).await;
    ok(h, &["sync"]);
    let id = common::message_ids(&ok(h, &["search", "subject:Files"]))[0].to_string();
    let dir = tempfile::tempdir().unwrap();
    let before = mock.requests().len();
    save_report(h, &id, dir.path());
    let paths: Vec<String> = (mock.requests().into_iter().skip(before))
        .map(|r| r.path)
        .collect();
    let reads = |tail: &str| paths.iter().filter(|p| p.ends_with(tail)).count();
    assert_eq!(reads(&format!("/messages/{gmail_id}")), 1, "{paths:?}");
    assert_eq!(
        (paths.iter())
            .filter(|p| p.contains(&format!("/messages/{gmail_id}/attachments/")))
            .count(),
        1,
        "{paths:?}"
    );
    save_forwarded(h, &id, dir.path());
}

/// Saves part 8 of `message()` (the first `report.pdf`) alone into `dir`.
fn save_report(h: &Path, id: &str, dir: &Path) {
    let to = dir.to_str().unwrap();
    let saved = ok(h, &["attachments", id, "--part", "8", "--to", to]);
    let want = dir.join("report.pdf");
    assert_eq!(saved["saved"][0]["path"], want.to_str().unwrap());
    assert_eq!(std::fs::read_to_string(want).unwrap(), "contents 6");
}

/// Saves part 12 of `message()` (the forwarded message) alone into `dir`.
fn save_forwarded(h: &Path, id: &str, dir: &Path) {
    let to = dir.to_str().unwrap();
    let forwarded = ok(h, &["attachments", id, "--part", "12", "--to", to]);
    let path = forwarded["saved"][0]["path"].as_str().unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains("Subject: Forwarded"), "{path}");
}

/// Over Outlook, whose attachments carry no section number, a part listed from the message's
/// source is found among Graph's attachments by its name and place among its namesakes, and
/// read alone by `attachments/{id}/$value`; a part never listed is read from the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_part_over_graph_is_its_attachments_value() {
    let mock = mailbroker_mock_graph::GraphMock::start("me@mock.example")
        .await
        .unwrap();
    let message = mock
        .seed(1, "inbox", "mallory@example.test", true)
        .remove(0);
    for (name, text) in [
        ("report.pdf", "first"),
        ("notes.txt", "n"),
        ("report.pdf", "second"),
    ] {
        mock.add_attachment(&message, name, "application/pdf", text.as_bytes())
            .unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::graph::add_account(&mock, h).await;
    ok(h, &["sync"]);
    let id = common::message_ids(&ok(h, &["search", "subject:\"Message 0\""]))[0].to_string();
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().to_str().unwrap();
    let paths_since = |from: usize| -> Vec<String> {
        (mock.requests().into_iter().skip(from))
            .map(|r| r.path)
            .collect()
    };

    // Never listed: the part is read from the message's source.
    let before = mock.requests().len();
    let saved = ok(h, &["attachments", &id, "--part", "4", "--to", to]);
    assert_eq!(
        saved["saved"][0]["path"],
        dir.path().join("report.pdf").to_str().unwrap()
    );
    let paths = paths_since(before);
    let whole = |p: &&String| p.ends_with("/$value") && !p.contains("/attachments/");
    assert_eq!(paths.iter().filter(whole).count(), 1, "{paths:?}");

    let listed = ok(h, &["attachments", &id]);
    let parts: Vec<&str> = (listed["attachments"].as_array().unwrap().iter())
        .map(|a| a["part"].as_str().unwrap())
        .collect();
    assert_eq!(parts, ["2", "3", "4"], "{listed}");
    let before = mock.requests().len();
    let saved = ok(h, &["attachments", &id, "--part", "4", "--to", to]);
    let path = saved["saved"][0]["path"].as_str().unwrap();
    assert_eq!(path, dir.path().join("report (1).pdf").to_str().unwrap());
    assert_eq!(std::fs::read_to_string(path).unwrap(), "second");
    let paths = paths_since(before);
    let reads = |f: &dyn Fn(&String) -> bool| paths.iter().filter(|p| f(p)).count();
    assert_eq!(reads(&|p| p.ends_with("/attachments")), 1, "{paths:?}");
    assert_eq!(
        reads(&|p| p.contains("/attachments/") && p.ends_with("/$value")),
        1,
        "{paths:?}"
    );
    assert_eq!(
        reads(&|p| p.ends_with("/$value") && !p.contains("/attachments/")),
        0,
        "{paths:?}"
    );
}
