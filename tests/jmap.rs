//! A JMAP account through the real binary, against a real JMAP server (a private Cyrus 3.6):
//! added with a password, synced, searched, tagged (read back on the server), undone, moved
//! to the archive; staged deletions in both modes.

mod common;

use common::{mb, ok};
use mailbroker_testkit::cyrus::Cyrus;
use serde_json::{Value, json};

/// The shared Cyrus with user `user` made and given `n` Inbox emails from `from`: their ids.
async fn seeded(user: &str, n: usize, from: &str) -> Option<(&'static Cyrus, Vec<String>)> {
    let cyrus = mailbroker_testkit::cyrus::shared()?;
    cyrus.add_user(user).await.unwrap();
    let ids = cyrus.seed(user, "Inbox", n, from, &[]).await.unwrap();
    Some((cyrus, ids))
}

/// A Cyrus user with `n` Inbox emails from Erin, and account `j` for it, synced.
async fn account(user: &str, n: usize) -> Option<(&'static Cyrus, tempfile::TempDir, Vec<String>)> {
    let (cyrus, ids) = seeded(user, n, "erin@example.test").await?;
    let home = tempfile::tempdir().unwrap();
    let add = mailbroker_testkit::cyrus::account_add_args("j", &cyrus.url(), user, "MB_TEST_PW");
    let added = common::mb_args(home.path(), &add);
    assert_eq!(added.code, 0, "{}", added.stdout);
    let added = added.json;
    assert_eq!(added["account"]["provider"], "jmap", "{added}");
    ok(home.path(), &["sync"]);
    Some((cyrus, home, ids))
}

/// The server's keywords and mailboxes of email `id`.
async fn keywords(cyrus: &Cyrus, user: &str, id: &str) -> Value {
    cyrus.email(user, id).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jmap_account_syncs_tags_undoes_and_moves() {
    let Some((cyrus, home, ids)) = account("e2e", 30).await else {
        return;
    };
    let found = ok(
        home.path(),
        &["search", "--limit", "100", "from:erin in:inbox"],
    );
    assert_eq!(found["total"], 30, "{found}");

    let tagged = ok(
        home.path(),
        &[
            "update",
            "--query",
            "from:erin",
            "--add-tag",
            "Invoice",
            "--read",
            "--yes",
        ],
    );
    assert_eq!(tagged["applied"], 30, "{tagged}");
    let email = keywords(cyrus, "e2e", &ids[7]).await;
    let has = |k: &str| {
        email["keywords"]
            .as_object()
            .unwrap()
            .keys()
            .any(|x| x.eq_ignore_ascii_case(k))
    };
    assert!(has("invoice") && has("$seen"), "{email}");
    assert_eq!(
        ok(home.path(), &["search", "tag:Invoice is:read"])["total"],
        30
    );

    let undone = ok(
        home.path(),
        &["undo", &tagged["change_id"].to_string(), "--yes"],
    );
    assert_eq!(undone["applied"], 30, "{undone}");
    let email = keywords(cyrus, "e2e", &ids[7]).await;
    assert!(email["keywords"].as_object().unwrap().is_empty(), "{email}");

    let one = ok(home.path(), &["search", "subject:\"Message 3\""]);
    let local = one["messages"][0]["id"].to_string();
    let moved = ok(
        home.path(),
        &["update", &local, "--move-to", "archive", "--yes"],
    );
    assert_eq!(moved["applied"], 1, "{moved}");
    let boxes = cyrus.mailboxes("e2e").await.unwrap();
    let email = keywords(cyrus, "e2e", &ids[3]).await;
    assert_eq!(
        email["mailboxIds"],
        json!({ boxes["Archive"].clone(): true }),
        "{email}"
    );
    assert_eq!(ok(home.path(), &["search", "in:archive"])["total"], 1);
}

/// A staged deletion in trash mode moves exactly the staged emails to the trash and undoes;
/// one in permanent mode destroys exactly the staged ones. A `$` tag is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staged_deletions_delete_exactly_the_staged_emails() {
    let Some((cyrus, home, ids)) = account("deletions", 6).await else {
        return;
    };
    let user = "deletions";
    let boxes = cyrus.mailboxes(user).await.unwrap();
    let staged = ok(home.path(), &["stage-delete", "subject:\"Message 1\""]);
    let manifest = staged["manifest"]["id"].to_string();
    let run = ok(home.path(), &["delete-staged", &manifest, "--yes"]);
    assert_eq!(run["counts"]["done"], 1, "{run}");
    let trashed = keywords(cyrus, user, &ids[1]).await;
    assert_eq!(
        trashed["mailboxIds"],
        json!({ boxes["Trash"].clone(): true }),
        "{trashed}"
    );
    let undone = ok(
        home.path(),
        &["undo", &run["change_id"].to_string(), "--yes"],
    );
    assert_eq!(undone["applied"], 1, "{undone}");
    let back = keywords(cyrus, user, &ids[1]).await;
    assert_eq!(
        back["mailboxIds"],
        json!({ boxes["Inbox"].clone(): true }),
        "{back}"
    );

    common::allow_unattended(home.path(), "j");
    let query = "subject:\"Message 2\" OR subject:\"Message 4\"";
    let staged = ok(home.path(), &["stage-delete", query, "--permanent"]);
    let manifest = staged["manifest"]["id"].to_string();
    let run = ok(home.path(), &["delete-staged", &manifest, "--yes"]);
    assert_eq!(run["counts"]["done"], 2, "{run}");
    let left = cyrus
        .call(user, json!([["Email/query", { "accountId": user }, "q"]]))
        .await
        .unwrap();
    let left: Vec<&str> = left[0][1]["ids"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(left.len(), 4, "{left:?}");
    assert!(!left.contains(&ids[2].as_str()) && !left.contains(&ids[4].as_str()));
    assert_eq!(ok(home.path(), &["search", "from:erin"])["total"], 4);

    let tag = mb(
        home.path(),
        &[
            "update",
            "--query",
            "from:erin",
            "--add-tag",
            "$Junk",
            "--yes",
        ],
    );
    assert_eq!(tag.code, 2, "{}", tag.stdout);
    assert_eq!(tag.json["error_type"], "validation_error", "{}", tag.stdout);
    let doctor = ok(home.path(), &["account", "doctor", "j"]);
    assert_eq!(doctor["doctor"]["mailboxes"], 6, "{doctor}");
}

#[test]
fn plain_http_to_another_host_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let url = "http://mail.example.com/jmap";
    let add = mailbroker_testkit::cyrus::account_add_args("j", url, "me", "MB_TEST_PW");
    let run = common::mb_args(home.path(), &add);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert_eq!(run.json["error_type"], "validation_error", "{}", run.stdout);
    assert!(run.json["error"].as_str().unwrap().contains("clear text"));
}

/// A JMAP server with a private CA over TLS: trusted with `--ca-file`, refused without it
/// with a next step that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_ca_is_trusted_with_ca_file() {
    let user = "tls";
    let Some((cyrus, _)) = seeded(user, 2, "tls@example.test").await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let mut add =
        mailbroker_testkit::cyrus::account_add_args("t", &cyrus.https_url(), user, "MB_TEST_PW");
    let refused = common::mb_args(home.path(), &add);
    assert_eq!(refused.code, 4, "{}", refused.stdout);
    let step = refused.json["next_step"].as_str().unwrap_or_default();
    assert!(step.contains("--ca-file"), "{}", refused.stdout);
    add.extend([
        "--ca-file".to_string(),
        cyrus.ca.ca_pem.display().to_string(),
    ]);
    let added = common::mb_args(home.path(), &add);
    assert_eq!(added.code, 0, "{}", added.stdout);
    ok(home.path(), &["sync"]);
    assert_eq!(
        ok(home.path(), &["search", "from:tls@example.test"])["total"],
        2
    );
}

/// The mailboxes of email `id` on the server, by name.
async fn mailboxes_of(cyrus: &Cyrus, user: &str, id: &str) -> Vec<String> {
    let names: std::collections::BTreeMap<String, String> = cyrus
        .mailboxes(user)
        .await
        .unwrap()
        .into_iter()
        .map(|(name, id)| (id, name))
        .collect();
    let email = keywords(cyrus, user, id).await;
    let mut of: Vec<String> = email["mailboxIds"]
        .as_object()
        .unwrap()
        .keys()
        .map(|id| names[id].clone())
        .collect();
    of.sort();
    of
}

/// With `--tags mailboxes` (Fastmail's labels mode) a tag is a mailbox the email is in
/// beside its others: added and removed (and undone) without the email leaving its inbox,
/// a new label created on the way, and one left in no mailbox put in the archive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_as_mailboxes_add_and_remove_membership_without_moving() {
    let Some(cyrus) = mailbroker_testkit::cyrus::shared() else {
        return;
    };
    let user = "labels";
    cyrus.add_user(user).await.unwrap();
    let made = json!([["Mailbox/set", { "accountId": user,
        "create": { "w": { "name": "Work", "parentId": null } } }, "m"]]);
    let made = cyrus.call(user, made).await.unwrap();
    let work = made[0][1]["created"]["w"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ids = cyrus
        .seed(user, "Inbox", 4, "lena@example.test", &[])
        .await
        .unwrap();
    let only_work = cyrus
        .seed(user, "Work", 1, "work@example.test", &[])
        .await
        .unwrap();
    let join = json!([["Email/set", { "accountId": user,
        "update": { ids[0].clone(): { format!("mailboxIds/{work}"): true } } }, "s"]]);
    cyrus.call(user, join).await.unwrap();

    let home = tempfile::tempdir().unwrap();
    let mut add =
        mailbroker_testkit::cyrus::account_add_args("l", &cyrus.url(), user, "MB_TEST_PW");
    add.extend(["--tags".to_string(), "mailboxes".to_string()]);
    let added = common::mb_args(home.path(), &add);
    assert_eq!(added.code, 0, "{}", added.stdout);
    ok(home.path(), &["sync"]);
    assert_eq!(ok(home.path(), &["search", "in:inbox"])["total"], 4);
    assert_eq!(ok(home.path(), &["search", "tag:Work"])["total"], 2);

    // A new label, nested: its mailboxes are made, and the emails stay in the inbox.
    let query = "subject:\"Message 1\" in:inbox";
    let tagged = ok(
        home.path(),
        &[
            "update",
            "--query",
            query,
            "--add-tag",
            "Clients/Acme",
            "--yes",
        ],
    );
    assert_eq!(tagged["applied"], 1, "{tagged}");
    assert_eq!(mailboxes_of(cyrus, user, &ids[1]).await, ["Acme", "Inbox"]);
    assert_eq!(
        ok(home.path(), &["search", "tag:Clients/Acme in:inbox"])["total"],
        1
    );

    let query = "tag:Work in:inbox";
    let removed = ok(
        home.path(),
        &["update", "--query", query, "--remove-tag", "work", "--yes"],
    );
    assert_eq!(removed["applied"], 1, "{removed}");
    assert_eq!(mailboxes_of(cyrus, user, &ids[0]).await, ["Inbox"]);
    let change = removed["change_id"].to_string();
    let undone = ok(home.path(), &["undo", &change, "--yes"]);
    assert_eq!(undone["applied"], 1, "{undone}");
    assert_eq!(mailboxes_of(cyrus, user, &ids[0]).await, ["Inbox", "Work"]);

    // The last label of an email in no other mailbox: it goes to the archive.
    let query = "in:Work";
    let removed = ok(
        home.path(),
        &["update", "--query", query, "--remove-tag", "Work", "--yes"],
    );
    assert_eq!(removed["applied"], 1, "{removed}");
    assert_eq!(mailboxes_of(cyrus, user, &only_work[0]).await, ["Archive"]);
    assert_eq!(ok(home.path(), &["search", "in:archive"])["total"], 1);

    let place = mb(
        home.path(),
        &[
            "update",
            "--query",
            "in:inbox",
            "--add-tag",
            "Trash",
            "--yes",
        ],
    );
    assert_eq!(
        place.json["error_type"], "validation_error",
        "{}",
        place.stdout
    );
}

/// `get_messages` over MCP with ids of two accounts, one of which cannot be reached: the
/// JMAP emails are read (their blobs downloaded), and the other id comes back in `failed`
/// with its account named, without costing the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_unreadable_account_costs_only_its_own_messages() {
    let Some((cyrus, home, _)) = account("mixed", 2).await else {
        return;
    };
    let proxy =
        mailbroker_testkit::Proxy::start(cyrus.imap_port, std::time::Duration::ZERO).unwrap();
    let mut add =
        mailbroker_testkit::account_add_args("i", "127.0.0.1", proxy.port, "mixed", "MB_TEST_PW");
    add.extend(["--tls".to_string(), "none".to_string()]);
    assert_eq!(common::mb_args(home.path(), &add).code, 0);
    ok(home.path(), &["sync", "i"]);
    let id_in = |account: &str| {
        let found = ok(home.path(), &["search", &format!("account:{account}")]);
        found["messages"][0]["id"].as_i64().unwrap()
    };
    let (jmap, imap) = (id_in("j"), id_in("i"));
    drop(proxy);

    let client = common::mcp::client(None, rmcp::model::ProtocolVersion::V_2025_11_25);
    let session = common::mcp::connect(home.path(), client).await;
    let ids = json!({ "ids": [jmap, imap] });
    let read = common::mcp::ok_call(&session, "get_messages", ids).await;
    let messages = read["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{read}");
    assert_eq!(messages[0]["account"], "j");
    assert!(
        messages[0]["body"]
            .as_str()
            .unwrap()
            .contains("Body of message"),
        "{read}"
    );
    let failed = &read["failed"][0];
    assert_eq!(failed["id"], imap, "{read}");
    assert_eq!(failed["account"], "i", "{read}");
    assert_eq!(failed["error_type"], "provider_unavailable", "{read}");
    assert!(
        failed["error"].as_str().unwrap().contains("account i"),
        "{read}"
    );
    session.cancel().await.ok();
}

/// Mail from lists, delivered over Cyrus's IMAP after the first sync, is found by `list:`:
/// the JMAP sync reads List-Id and List-Unsubscribe as header properties.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_from_lists_is_found_by_its_list() {
    let Some((cyrus, home, _)) = account("lists", 2).await else {
        return;
    };
    let mut imap = mailbroker_testkit::ImapClient::connect_port(cyrus.imap_port, "lists")
        .await
        .unwrap();
    let news = "From: news@lists.example\r\nTo: lists@localhost\r\nSubject: Digest\r\n\
                List-Id: Example News <news.lists.example>\r\n\
                Message-ID: <l1@lists.example>\r\n\r\nDigest\r\n";
    let sale = "From: deals@shop.example\r\nTo: lists@localhost\r\nSubject: Sale\r\n\
                List-Unsubscribe: <mailto:out@esp.example>, <https://shop.example/u?1>\r\n\
                Message-ID: <l2@shop.example>\r\n\r\nSale\r\n";
    for raw in [news, sale] {
        imap.append("INBOX", "", raw.as_bytes()).await.unwrap();
    }
    imap.logout().await.unwrap();
    ok(home.path(), &["sync"]);
    let found = ok(home.path(), &["search", "list:news.lists.example"]);
    assert_eq!(found["total"], 1, "{found}");
    assert_eq!(found["messages"][0]["subject"], "Digest", "{found}");
    assert_eq!(found["messages"][0]["list"], "news.lists.example");
    let sale = ok(home.path(), &["search", "list:shop.example"]);
    assert_eq!(sale["messages"][0]["subject"], "Sale", "{sale}");
    assert_eq!(ok(home.path(), &["search", "is:list"])["total"], 2);
    assert_eq!(ok(home.path(), &["search", "-list:*"])["total"], 2);
}

/// A conversation over Inbox and Sent, delivered over Cyrus's IMAP, is one JMAP thread: its
/// rows carry it and `thread:` archives the whole of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_is_one_thread() {
    let Some((cyrus, home, _)) = account("threads", 2).await else {
        return;
    };
    let mut imap = mailbroker_testkit::ImapClient::connect_port(cyrus.imap_port, "threads")
        .await
        .unwrap();
    let mut refs = Vec::new();
    for i in 0..4 {
        let (mailbox, from) = match i % 2 {
            0 => ("INBOX", "dana@example.test"),
            _ => ("Sent", "threads@localhost"),
        };
        let raw = mailbroker_testkit::reply(i, from, "Lunch on Friday?", &refs);
        imap.append(mailbox, "", raw.as_bytes()).await.unwrap();
        refs.push(format!("<lunch{i}@example.test>"));
    }
    imap.logout().await.unwrap();
    ok(home.path(), &["sync"]);
    let found = ok(home.path(), &["search", "subject:lunch in:anywhere"]);
    let rows = found["messages"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{found}");
    let thread = rows[0]["thread"].as_str().unwrap();
    assert!(
        rows.iter()
            .all(|r| r["thread"] == thread && r["thread_messages"] == 4),
        "{found}"
    );
    let query = format!("thread:{thread}");
    let done = ok(
        home.path(),
        &["update", "--query", &query, "--move-to", "archive", "--yes"],
    );
    assert_eq!(done["applied"], 4, "{done}");
    let archived = ok(home.path(), &["search", "in:archive subject:lunch"]);
    assert_eq!(archived["total"], 4, "{archived}");
}

/// `account add jmap` with `args` after the URL (password from `MB_TEST_PW`).
fn add_jmap(home: &std::path::Path, url: &str, extra: &[&str]) -> common::Run {
    let mut args = vec![
        "account",
        "add",
        "jmap",
        "--id",
        "x",
        "--url",
        url,
        "--username",
        "me",
        "--password-env",
        "MB_TEST_PW",
    ];
    args.extend(extra);
    mb(home, &args)
}

/// The password went in clear where a JMAP URL or its session said: `--url
/// 'http://localhost:x@127.0.0.2/jmap'` passed the "plain http only to this machine" rule
/// (read by splitting the text, its host looked like `localhost`), and a session's `apiUrl`
/// on another origin, over plain http, was used as given. Every URL is now read by a URL
/// parser, none may carry a user name, and credentials go only to the session's own origin
/// (or an https origin the person trusted); a redirect to another origin is not followed.
/// The host at 127.0.0.2 (standing for another machine) gets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_go_only_where_the_session_is() {
    use mailbroker_testkit::jmap_session::{Reply, SessionServer, session};
    let elsewhere = SessionServer::http([127, 0, 0, 2], Reply::Nothing)
        .await
        .unwrap();
    let other = elsewhere.url.clone();
    let home = tempfile::tempdir().unwrap();
    let host_port = other.trim_start_matches("http://");

    let userinfo = add_jmap(
        home.path(),
        &format!("http://localhost:x@{host_port}/jmap"),
        &[],
    );
    assert_eq!(userinfo.code, 2, "{}", userinfo.stdout);
    assert_eq!(
        userinfo.json["error_type"], "validation_error",
        "{}",
        userinfo.stdout
    );

    let api_elsewhere = SessionServer::http(
        [127, 0, 0, 1],
        Reply::Session(session(&format!("{other}/api"), None)),
    )
    .await
    .unwrap();
    let refused = add_jmap(home.path(), &api_elsewhere.url, &[]);
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    assert!(
        refused.json["error"]
            .as_str()
            .unwrap()
            .contains("another origin"),
        "{}",
        refused.stdout
    );
    let next = refused.json["next_step"].as_str().unwrap_or_default();
    assert!(next.contains("--trust-origin"), "{next}");
    // Only an https origin can be trusted.
    let plain = add_jmap(home.path(), &api_elsewhere.url, &["--trust-origin", &other]);
    assert_eq!(
        plain.json["error_type"], "validation_error",
        "{}",
        plain.stdout
    );
    assert!(
        api_elsewhere
            .got()
            .iter()
            .all(|g| g.request.contains("well-known"))
    );

    let redirect = SessionServer::http(
        [127, 0, 0, 1],
        Reply::Redirect(format!("{other}/.well-known/jmap")),
    )
    .await
    .unwrap();
    let redirected = add_jmap(home.path(), &redirect.url, &[]);
    assert_ne!(redirected.code, 0, "{}", redirected.stdout);

    assert!(
        elsewhere.got().is_empty(),
        "another host was sent {:?}",
        elsewhere.got()
    );
    let listed = ok(home.path(), &["account", "list"]);
    assert!(
        listed["accounts"].as_array().unwrap().is_empty(),
        "{listed}"
    );
}

/// Over https: a certificate the roots do not know says so and names `--ca-file` (it said
/// only "error sending request"); a `--ca-file` holding no certificate is refused; and with
/// the right CA, a session naming a plain-http `apiUrl` (a step down from https) gets no
/// credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_failures_say_what_they_are_and_https_never_steps_down() {
    use mailbroker_testkit::jmap_session::{Reply, SessionServer, session};
    let certs = tempfile::tempdir().unwrap();
    let ca = mailbroker_testkit::TestCa::generate(certs.path()).unwrap();
    let catcher = SessionServer::http([127, 0, 0, 1], Reply::Nothing)
        .await
        .unwrap();
    let secure = SessionServer::https(
        &ca,
        Reply::Session(session(&format!("{}/api", catcher.url), None)),
    )
    .await
    .unwrap();
    let url = secure.url.replace("127.0.0.1", "localhost");
    let home = tempfile::tempdir().unwrap();

    let untrusted = add_jmap(home.path(), &url, &[]);
    assert_eq!(untrusted.code, 4, "{}", untrusted.stdout);
    assert!(
        untrusted.json["error"]
            .as_str()
            .unwrap()
            .contains("certificate"),
        "{}",
        untrusted.stdout
    );
    assert!(
        untrusted.json["next_step"]
            .as_str()
            .unwrap()
            .contains("--ca-file")
    );

    let empty = certs.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let empty = empty.display().to_string();
    let no_cert = add_jmap(home.path(), &url, &["--ca-file", &empty]);
    assert_eq!(
        no_cert.json["error_type"], "validation_error",
        "{}",
        no_cert.stdout
    );

    let ca_file = ca.ca_pem.display().to_string();
    let down = add_jmap(home.path(), &url, &["--ca-file", &ca_file]);
    assert_eq!(down.code, 2, "{}", down.stdout);
    assert!(
        down.json["error"].as_str().unwrap().contains("http"),
        "{}",
        down.stdout
    );
    assert!(
        catcher.got().is_empty(),
        "the plain-http API was sent {:?}",
        catcher.got()
    );
}

/// A server that allows one method call a request (`maxCallsInRequest: 1`) was sent two or
/// three at once. Calls go in as many requests as the limit asks, a reference to an earlier
/// request's result resolved by the client: a sync, a write and its undo all work, and the
/// server refused nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_takes_one_call_a_request_gets_one() {
    let user = "one-call";
    let Some((cyrus, _)) = seeded(user, 5, "erin@example.test").await else {
        return;
    };
    let front = mailbroker_testkit::jmap_push::PushFront::start_limited(cyrus, user, Some(1))
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let add = mailbroker_testkit::cyrus::account_add_args("j", &front.url(), user, "MB_TEST_PW");
    let added = common::mb_args(home.path(), &add);
    assert_eq!(added.code, 0, "{}", added.stdout);
    ok(home.path(), &["sync"]);
    let found = ok(home.path(), &["search", "from:erin"]);
    assert_eq!(found["total"], 5, "{found}");
    let tagged = ok(
        home.path(),
        &[
            "update",
            "--query",
            "from:erin",
            "--add-tag",
            "Seen1",
            "--yes",
        ],
    );
    assert_eq!(tagged["applied"], 5, "{tagged}");
    ok(home.path(), &["sync"]);
    let undone = ok(home.path(), &["undo", &tagged["change_id"].to_string()]);
    assert_eq!(undone["applied"], 5, "{undone}");
    assert_eq!(
        front.over_limit(),
        0,
        "requests over the server's limit were sent"
    );
    assert!(front.api_requests() > 5);
}

/// A JMAP account on Cyrus keeps its rules over the ManageSieve Cyrus serves on the session's
/// host (timsieved, over STARTTLS since the session is https, trusted by `--ca-file`): staged
/// (nothing sent), approved at a terminal, read back, run on LMTP delivery, its backfill a
/// second change, and undone so that the next mail stays in the inbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jmap_accounts_rule_is_kept_by_its_hosts_managesieve_and_runs_on_delivery() {
    let user = "jmap-rules";
    let Some((cyrus, _)) = seeded(user, 2, "news@example.org").await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let mut add =
        mailbroker_testkit::cyrus::account_add_args("j", &cyrus.https_url(), user, "MB_TEST_PW");
    let port = cyrus.sieve_port.to_string();
    let ca = cyrus.ca.ca_pem.display().to_string();
    add.extend(["--ca-file", &ca, "--sieve-port", &port].map(String::from));
    let added = common::mb_args(h, &add);
    assert_eq!(added.code, 0, "{}", added.stdout);
    ok(h, &["sync"]);
    let stage = [
        "rule",
        "stage",
        "--account",
        "j",
        "--name",
        "news",
        "--when",
        "from:news",
        "--move-to",
        "archive",
        "--add-tag",
        "news",
        "--read",
        "--backfill",
    ];
    let staged = ok(h, &stage);
    let m = &staged["rule_manifest"];
    assert_eq!(m["matches"], 2, "{staged}");
    let text = m["provider_text"].as_str().unwrap();
    assert!(text.contains("fileinto :create \"Archive\""), "{text}");
    assert_eq!(
        ok(h, &["rule", "list", "--account", "j"])["rules"],
        json!([])
    );

    let id = m["id"].to_string();
    let approved = common::at_terminal(h, &["rule", "approve", &id], "yes\n");
    assert_eq!(approved.code, 0, "{}", approved.shown);
    let listed = ok(h, &["rule", "list", "--account", "j"]);
    assert_eq!(listed["rules"][0]["name"], "news", "{listed}");
    assert_eq!(listed["rules"][0]["ours"], true, "{listed}");
    let backfilled = ok(h, &["search", "from:news in:archive"]);
    assert_eq!(backfilled["total"], 2, "the backfill: {backfilled}");

    let arriving = |n: usize, subject: &str| {
        mailbroker_testkit::message(n, "News <news@example.org>", subject, "hi")
    };
    cyrus.deliver(user, &arriving(7, "Issue 7")).unwrap();
    let mut imap = mailbroker_testkit::ImapClient::connect_port(cyrus.imap_port, user)
        .await
        .unwrap();
    let archived = imap.subjects("Archive").await.unwrap();
    assert!(archived.contains(&"Issue 7".to_string()), "{archived:?}");
    let flags = imap.flags("Archive").await.unwrap();
    assert!(
        flags
            .values()
            .all(|f| f.iter().any(|f| f == "news") && f.iter().any(|f| f == "\\Seen")),
        "{flags:?}"
    );

    let shown = ok(h, &["rule", "staged", &id]);
    let change = shown["rule_manifests"][0]["change_id"].to_string();
    let undone = ok(h, &["undo", &change]);
    assert_eq!(undone["applied"], 1, "{undone}");
    assert_eq!(
        ok(h, &["rule", "list", "--account", "j"])["rules"],
        json!([])
    );
    cyrus.deliver(user, &arriving(8, "Issue 8")).unwrap();
    let inbox = imap.subjects("INBOX").await.unwrap();
    assert!(inbox.contains(&"Issue 8".to_string()), "{inbox:?}");
}
