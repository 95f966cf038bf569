//! Drafts through the real binary: a reply saved in the account's Drafts, threaded, marked as
//! a draft, never sent; `undo` removes it while it is as saved, and leaves one the person
//! changed (`stale_state`). On Dovecot and Cyrus over IMAP, Cyrus over JMAP, and the Gmail
//! and Graph mocks, whose every request is checked against the provider's own documents.

mod common;

use std::path::Path;

use common::{mb, ok};
use mail_parser::{HeaderValue, MessageParser};
use mailbroker_testkit::ImapClient;
use serde_json::Value;

/// The message the drafts answer: from alice to the person and carol, copied to dave, the
/// second of a thread.
fn original() -> Vec<u8> {
    b"From: Alice <alice@example.test>\r\nTo: user@example.test, carol@example.test\r\n\
      Cc: dave@example.test\r\nSubject: Lunch plans\r\nDate: Mon, 2 Nov 2026 10:00:00 +0000\r\n\
      Message-ID: <orig1@example.test>\r\nReferences: <root@example.test>\r\n\
      In-Reply-To: <root@example.test>\r\nMIME-Version: 1.0\r\n\
      Content-Type: text/plain; charset=utf-8\r\n\r\nShall we meet at noon?\r\n"
        .to_vec()
}

fn body_file(home: &Path, text: &str) -> String {
    let path = home.join("body.txt");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn addresses(v: Option<&mail_parser::Address<'_>>) -> Vec<String> {
    v.map(|a| {
        a.iter()
            .filter_map(|a| a.address())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

/// Checks a saved reply's source: threaded on the original, to its sender, the others in Cc,
/// the body and the quote in it, and no header a subject could have smuggled in.
fn check_reply(source: &[u8]) {
    let m = MessageParser::default().parse(source).expect("MIME");
    assert_eq!(m.subject(), Some("Re: Lunch plans"));
    assert_eq!(m.in_reply_to().as_text(), Some("orig1@example.test"));
    let refs: Vec<String> = match m.references() {
        HeaderValue::TextList(l) => l.iter().map(|s| s.to_string()).collect(),
        other => other
            .as_text()
            .map(|t| vec![t.to_string()])
            .unwrap_or_default(),
    };
    assert_eq!(refs, ["root@example.test", "orig1@example.test"]);
    assert_eq!(addresses(m.to()), ["alice@example.test"]);
    let mut cc = addresses(m.cc());
    cc.sort();
    assert!(cc.contains(&"carol@example.test".to_string()), "{cc:?}");
    assert!(cc.contains(&"dave@example.test".to_string()), "{cc:?}");
    let text = m.body_text(0).unwrap_or_default();
    assert!(text.contains("Noon suits me. — Dana"), "{text}");
    assert!(text.contains("> Shall we meet at noon?"), "{text}");
}

/// No line of the header starts a field that was not asked for.
fn assert_no_injected_header(source: &[u8]) {
    let text = String::from_utf8_lossy(source);
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    assert!(
        !head
            .lines()
            .any(|l| l.to_ascii_lowercase().starts_with("bcc:")),
        "{head}"
    );
    let m = MessageParser::default().parse(source).expect("MIME");
    assert!(m.bcc().is_none());
    assert!(m.subject().unwrap_or_default().contains("Bcc: x@evil.test"));
}

/// Saves the reply to the original (the only `Lunch plans` in the index); its change id and
/// Message-ID.
fn save_reply(home: &Path) -> (String, String) {
    let found = ok(home, &["search", "subject:\"Lunch plans\" in:inbox"]);
    let id = common::message_ids(&found)[0].to_string();
    let body = body_file(home, "Noon suits me. — Dana\n");
    let saved = ok(
        home,
        &[
            "draft",
            "--reply-to",
            &id,
            "--all",
            "--quote",
            "--body-file",
            &body,
        ],
    );
    assert_eq!(saved["applied"], 1, "{saved}");
    let message_id = saved["draft"]["message_id"].as_str().unwrap().to_string();
    (saved["change_id"].to_string(), message_id)
}

fn new_draft_with_injection(home: &Path, account: &str) -> Value {
    let body = body_file(home, "Hello.\n");
    ok(
        home,
        &[
            "draft",
            "--account",
            account,
            "--to",
            "bob@example.test",
            "--subject",
            "Hi\r\nBcc: x@evil.test",
            "--body-file",
            &body,
        ],
    )
}

/// The message of `mailbox` carrying `message_id`: its UID, flags and source.
async fn find(
    client: &mut ImapClient,
    mailbox: &str,
    message_id: &str,
) -> Option<(u32, Vec<String>, Vec<u8>)> {
    let all = client.sources(mailbox).await.unwrap();
    all.into_iter()
        .find(|(_, (_, src))| String::from_utf8_lossy(src).contains(message_id))
        .map(|(uid, (flags, src))| (uid, flags, src))
}

/// `account add imap` of `user` at `port` (plain, on loopback).
fn imap_account(port: u16, user: &str, account: &str) -> Vec<String> {
    let mut args = common::add_args(account, "127.0.0.1", port, user);
    args.extend(["--tls".into(), "none".into()]);
    args
}

/// The scenario on the account `add` makes, whose server is seen as another IMAP client at
/// `port` (plain, on loopback) would see it.
async fn scenario(home: &Path, port: u16, user: &str, account: &str, add: &[String]) {
    let mut client = ImapClient::connect_port(port, user).await.unwrap();
    client.append("INBOX", "", &original()).await.unwrap();
    let run = common::mb_args(home, add);
    assert_eq!(run.code, 0, "{}", run.stderr);
    ok(home, &["sync"]);

    let (change, message_id) = save_reply(home);
    let (uid, flags, source) = find(&mut client, "Drafts", &message_id)
        .await
        .expect("in Drafts");
    assert!(flags.iter().any(|f| f == "\\Draft"), "{flags:?}");
    check_reply(&source);
    let undone = ok(home, &["undo", &change]);
    assert_eq!(undone["applied"], 1, "{undone}");
    assert!(
        find(&mut client, "Drafts", &message_id).await.is_none(),
        "undo removes it"
    );
    let _ = uid;

    // A draft the person changed after it was saved is left alone.
    let (change, message_id) = save_reply(home);
    let (uid, ..) = find(&mut client, "Drafts", &message_id).await.unwrap();
    client
        .store("Drafts", uid, "+FLAGS", "\\Flagged")
        .await
        .unwrap();
    let refused = mb(home, &["undo", &change]);
    assert_ne!(refused.code, 0, "{}", refused.stdout);
    assert_eq!(
        refused.json["error_type"], "stale_state",
        "{}",
        refused.stdout
    );
    assert!(
        find(&mut client, "Drafts", &message_id).await.is_some(),
        "kept"
    );

    let injected = new_draft_with_injection(home, account);
    let id = injected["draft"]["message_id"].as_str().unwrap();
    let (_, _, source) = find(&mut client, "Drafts", id).await.unwrap();
    assert_no_injected_header(&source);
}

#[tokio::test]
async fn a_reply_draft_on_dovecot_is_threaded_and_undone_while_unchanged() {
    let Some(server) = common::server() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let (port, user) = (server.imap_port, "drafts-dovecot");
    scenario(
        home.path(),
        port,
        user,
        "dd",
        &imap_account(port, user, "dd"),
    )
    .await;
}

#[tokio::test]
async fn a_reply_draft_on_cyrus_imap_is_threaded_and_undone_while_unchanged() {
    let Some(cyrus) = mailbroker_testkit::cyrus::shared() else {
        return;
    };
    let user = "drafts-cyrus";
    cyrus.add_user(user).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let port = cyrus.imap_port;
    scenario(
        home.path(),
        port,
        user,
        "dc",
        &imap_account(port, user, "dc"),
    )
    .await;
}

/// Over JMAP on Cyrus: `Email/import` of an uploaded blob in Drafts with `$draft`, which
/// Cyrus's IMAP shows as `\Draft`.
#[tokio::test]
async fn a_reply_draft_on_cyrus_jmap_is_threaded_and_undone_while_unchanged() {
    let Some(cyrus) = mailbroker_testkit::cyrus::shared() else {
        return;
    };
    let user = "drafts-jmap";
    cyrus.add_user(user).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let add = mailbroker_testkit::cyrus::account_add_args("dj", &cyrus.url(), user, "MB_TEST_PW");
    scenario(home.path(), cyrus.imap_port, user, "dj", &add).await;
}

/// No request of the run reached a method that sends (`messages.send`, `drafts.send`, Graph's
/// `send`, `sendMail`, `reply`, `replyAll`, `forward`).
fn assert_nothing_sent(paths: &[String]) {
    for path in paths {
        let last = path
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        assert!(
            !["send", "sendmail", "reply", "replyall", "forward"].contains(&last.as_str()),
            "a send call: {path}"
        );
    }
    assert!(!paths.is_empty());
}

/// On the Gmail mock: `drafts.create` (the message uploaded, in the original's thread), an
/// undo's `drafts.get` and `drafts.delete`; a draft edited in Gmail (a new message id) stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_draft_on_gmail_joins_the_thread_and_is_undone_while_unchanged() {
    use mailbroker_mock_gmail::GmailMock;
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    let headers = [
        ("From", "Alice <alice@example.test>"),
        ("To", "me@mock.example, carol@example.test"),
        ("Cc", "dave@example.test"),
        ("Subject", "Lunch plans"),
        ("Date", "Mon, 2 Nov 2026 10:00:00 +0000"),
        ("Message-ID", "<orig1@example.test>"),
        ("References", "<root@example.test>"),
        ("In-Reply-To", "<root@example.test>"),
        ("Content-Type", "text/plain; charset=utf-8"),
    ];
    let original = mock.add_message(&headers, "Shall we meet at noon?\r\n", &["INBOX"]);
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::gmail::add_account(&mock, h, "g", &[]).await;
    ok(h, &["sync"]);

    let (change, _) = save_reply(h);
    let drafts = mock.drafts();
    assert_eq!(drafts.len(), 1, "{drafts:?}");
    assert!(drafts[0].labels.contains(&"DRAFT".to_string()));
    assert_eq!(drafts[0].thread, original, "in the original's thread");
    check_reply(&drafts[0].source);
    let undone = ok(h, &["undo", &change]);
    assert_eq!(undone["applied"], 1, "{undone}");
    assert!(mock.drafts().is_empty(), "undo deletes it");

    let (change, _) = save_reply(h);
    let draft = mock.drafts()[0].id.clone();
    mock.edit_draft(&draft).unwrap();
    let refused = mb(h, &["undo", &change]);
    assert_eq!(
        refused.json["error_type"], "stale_state",
        "{}",
        refused.stdout
    );
    assert_eq!(mock.drafts().len(), 1, "an edited draft is kept");

    let injected = new_draft_with_injection(h, "g");
    let id = injected["draft"]["message_id"].as_str().unwrap();
    let made = mock.drafts();
    let made = made
        .iter()
        .find(|d| d.source.windows(id.len()).any(|w| w == id.as_bytes()));
    assert_no_injected_header(&made.expect("the new draft").source);
    let paths: Vec<String> = mock.requests().iter().map(|r| r.path.clone()).collect();
    assert_nothing_sent(&paths);
}

/// On the Graph mock: `createReplyAll` (Graph threads it) then a `PATCH` of the draft's own
/// body and recipients; undone by `DELETE` while its changeKey is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_draft_on_graph_is_made_by_create_reply_and_undone_while_unchanged() {
    use mailbroker_mock_graph::GraphMock;
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let original = mock.seed(1, "inbox", "alice@example.test", true).remove(0);
    mock.set_conversation(&original, "conv-lunch");
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::graph::add_account(&mock, h).await;
    ok(h, &["sync"]);
    let id = common::message_ids(&ok(h, &["search", "subject:\"Message 0\""]))[0].to_string();
    let body = body_file(h, "Noon suits me. — Dana\n");
    let reply = ["draft", "--reply-to", &id, "--all", "--body-file", &body];
    let drafts = |mock: &GraphMock| -> Vec<Value> {
        (mock.messages().into_iter())
            .filter(|m| m["isDraft"] == true)
            .collect()
    };

    let saved = ok(h, &reply);
    let made = drafts(&mock);
    assert_eq!(made.len(), 1, "{made:?}");
    let draft = &made[0];
    assert_eq!(draft["parentFolderId"], mock.folder_id("drafts").unwrap());
    assert_eq!(draft["conversationId"], "conv-lunch");
    assert_eq!(draft["subject"], "Re: Message 0");
    assert_eq!(
        draft["toRecipients"][0]["emailAddress"]["address"],
        "alice@example.test"
    );
    assert!(
        draft["body"]["content"]
            .as_str()
            .unwrap()
            .contains("Noon suits me")
    );
    let answered = mock.draft_answers(draft["id"].as_str().unwrap());
    assert_eq!(
        answered,
        mock.message(&original).unwrap()["internetMessageId"]
            .as_str()
            .map(String::from)
    );
    ok(h, &["undo", &saved["change_id"].to_string()]);
    assert!(drafts(&mock).is_empty(), "undo deletes it");

    let saved = ok(h, &reply);
    let draft = drafts(&mock)[0]["id"].as_str().unwrap().to_string();
    mock.edit(&draft);
    let refused = mb(h, &["undo", &saved["change_id"].to_string()]);
    assert_eq!(
        refused.json["error_type"], "stale_state",
        "{}",
        refused.stdout
    );
    assert_eq!(drafts(&mock).len(), 1, "an edited draft is kept");
    let paths: Vec<String> = mock.requests().iter().map(|r| r.path.clone()).collect();
    assert_nothing_sent(&paths);
}

/// An assistant saves a reply with `create_draft` (Dovecot): in Drafts with `\Draft`, the
/// result names it; an address that would add a header is refused before anything is sent;
/// `undo_change` removes the draft.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assistant_saves_a_reply_draft_and_undoes_it() {
    use serde_json::json;
    let Some(server) = common::server() else {
        return;
    };
    let (port, user) = (server.imap_port, "drafts-mcp");
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let mut client = ImapClient::connect_port(port, user).await.unwrap();
    client.append("INBOX", "", &original()).await.unwrap();
    assert_eq!(common::mb_args(h, &imap_account(port, user, "dm")).code, 0);
    ok(h, &["sync"]);
    let id = common::message_ids(&ok(h, &["search", "subject:\"Lunch plans\""]))[0];

    let client_of = common::mcp::client(None, rmcp::model::ProtocolVersion::V_2025_11_25);
    let session = common::mcp::connect(h, client_of).await;
    let injected = json!({ "account": "dm", "to": ["a@example.org\r\nBcc: x@evil.test"],
        "subject": "Hi", "body": "Hello" });
    let refused = common::mcp::err_call(&session, "create_draft", injected).await;
    assert_eq!(refused["error_type"], "validation_error", "{refused}");
    assert!(
        client.sources("Drafts").await.unwrap().is_empty(),
        "nothing saved"
    );

    let args = json!({ "reply_to": id, "all": true, "body": "Noon suits me. — Dana" });
    let saved = common::mcp::ok_call(&session, "create_draft", args).await;
    assert_eq!(saved["draft"]["mailbox"], "Drafts", "{saved}");
    assert_eq!(
        saved["draft"]["to"],
        json!(["alice@example.test"]),
        "{saved}"
    );
    let message_id = saved["draft"]["message_id"].as_str().unwrap();
    let (_, flags, source) = find(&mut client, "Drafts", message_id)
        .await
        .expect("saved");
    assert!(flags.iter().any(|f| f == "\\Draft"));
    let parsed = MessageParser::default().parse(&source[..]).unwrap();
    assert_eq!(parsed.in_reply_to().as_text(), Some("orig1@example.test"));

    let undo = json!({ "change_id": saved["change_id"] });
    common::mcp::ok_call(&session, "undo_change", undo).await;
    assert!(
        find(&mut client, "Drafts", message_id).await.is_none(),
        "undone"
    );
    session.cancel().await.unwrap();
}

/// No code path can send: no product source names a provider's send method or scope (or
/// Mail.app's `send` command), and no SMTP client is linked. (The mocks, for their part, serve no send route.)
#[test]
fn no_code_path_sends_mail() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let forbidden = [
        "sendMail",
        "/send\"",
        "/reply\"",
        "/replyAll\"",
        "/forward\"",
        "createForward",
        "drafts_send",
        "messages_send",
        "drafts().send",
        "gmail.send",
        "gmail.compose",
        "Mail.Send",
        "SMTP",
    ];
    let mut read = 0;
    let mut stack: Vec<std::path::PathBuf> = ["src", "crates", "providers"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        read += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if let Some(word) = forbidden.iter().find(|w| code.contains(*w)) {
                panic!("{}:{}: {word}: {line}", path.display(), n + 1);
            }
            // Mail.app's own command, in a script: `send m`, `tell m to send`.
            if code.starts_with("send ") || code.ends_with(" to send") {
                panic!("{}:{}: AppleScript send: {line}", path.display(), n + 1);
            }
        }
    }
    assert!(read > 100, "read {read} files");
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
    for smtp in [
        "name = \"lettre\"",
        "name = \"mail-send\"",
        "name = \"async-smtp\"",
    ] {
        assert!(!lock.contains(smtp), "{smtp} is linked");
    }
}
