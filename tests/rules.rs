//! `mailbroker rule` against Dovecot with Pigeonhole, through the real binary: a rule staged
//! (nothing sent; the exact Sieve shown; today's matches counted), refused where it names a
//! term a rule cannot see or an action a rule may not do, approved only by a person at a
//! terminal, installed into the person's own active script without touching a byte of it,
//! run on delivery, listed beside the person's rules, its backfill a second change, and
//! undone to the person's script exactly.

mod common;

use std::path::Path;

use common::{add_account, at_terminal, mb, ok, server};
use mailbroker_managesieve::Client;
use mailbroker_testkit::{ImapClient, PASSWORD, dovecot_required, message};
use serde_json::Value;
use tokio::net::TcpStream;

async fn sieve_client(port: u16, user: &str) -> Client<TcpStream> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut client = Client::greet(tcp).await.unwrap();
    client.authenticate(user, PASSWORD).await.unwrap();
    client
}

/// The shared Dovecot and its ManageSieve port; `None` (skipped) without them outside CI.
fn sieve_server() -> Option<(&'static mailbroker_testkit::Dovecot, u16)> {
    let server = server()?;
    let Some(port) = server.sieve_port else {
        assert!(!dovecot_required(), "CI=true but Pigeonhole is missing");
        return None;
    };
    Some((server, port))
}

/// A home with account `work` for `user` (its rules on ManageSieve `port`), whose inbox
/// holds `first`, synced; and an IMAP session of the user's.
async fn account_of(
    server: &'static mailbroker_testkit::Dovecot,
    port: u16,
    user: &str,
    first: &[u8],
) -> (tempfile::TempDir, ImapClient) {
    let home = tempfile::tempdir().unwrap();
    let mut imap = ImapClient::connect(server, user).await.unwrap();
    imap.append("INBOX", "", first).await.unwrap();
    add_account(
        server,
        home.path(),
        "work",
        user,
        &["--sieve-port", &port.to_string()],
    );
    ok(home.path(), &["sync"]);
    (home, imap)
}

fn refused(h: &Path, args: &[&str], error_type: &str, naming: &str) {
    let run = mb(h, args);
    assert_eq!(
        run.json["error_type"], error_type,
        "{args:?}: {}",
        run.stdout
    );
    let said = run.json["error"].as_str().unwrap_or("");
    assert!(said.contains(naming), "{args:?}: {said}");
}

#[tokio::test]
async fn a_rule_is_staged_approved_at_a_terminal_run_on_delivery_and_undone_exactly() {
    let Some((server, port)) = sieve_server() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let user = "rules-person";
    let mut imap = ImapClient::connect(server, user).await.unwrap();
    for i in 0..2 {
        let m = message(i, "News <news@example.org>", &format!("Issue {i}"), "hi");
        imap.append("INBOX", "", &m).await.unwrap();
    }
    imap.append("INBOX", "", &message(5, "bob@example.net", "lunch", "hi"))
        .await
        .unwrap();
    let port_text = port.to_string();
    add_account(server, h, "work", user, &["--sieve-port", &port_text]);
    ok(h, &["sync"]);
    let own = "require [\"fileinto\"];\r\n# the person's own\r\nif header :contains \"subject\" \"invoice\" { fileinto \"INBOX\"; }\r\n";
    let mut client = sieve_client(port, user).await;
    client.put("mine", own).await.unwrap();
    client.set_active("mine").await.unwrap();
    client.logout().await.unwrap();

    // What a rule cannot see or may not do is refused by name; nothing is staged.
    let stage = |when: &str, extra: &[&str]| {
        let mut args = vec![
            "rule",
            "stage",
            "--account",
            "work",
            "--name",
            "news",
            "--when",
            when,
        ];
        args.extend(extra);
        args.into_iter().map(String::from).collect::<Vec<_>>()
    };
    for (args, naming) in [
        (stage("from:news tag:Work", &["--read"]), "tag:Work"),
        (stage("has:attachment", &["--read"]), "has:attachment"),
        (stage("from:news", &["--move-to", "trash"]), "trash"),
        (stage("from:news", &[]), "does nothing"),
        (stage("from:news", &["--move-to", "Nowhere"]), "Nowhere"),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(h, &args, "validation_error", naming);
    }
    assert_eq!(
        ok(h, &["rule", "staged"])["rule_manifests"],
        Value::Array(vec![])
    );

    let staged = ok(
        h,
        &[
            "rule",
            "stage",
            "--account",
            "work",
            "--name",
            "news to Archive",
            "--when",
            "from:news",
            "--move-to",
            "archive",
            "--add-tag",
            "$news",
            "--backfill",
        ],
    );
    let m = &staged["rule_manifest"];
    assert_eq!(m["matches"], 2, "{staged}");
    assert_eq!(m["status"], "pending");
    let text = m["provider_text"].as_str().unwrap();
    assert!(
        text.contains("fileinto :create \"Archive\"") && text.contains("addflag \"$news\""),
        "{text}"
    );
    let id = m["id"].as_i64().unwrap().to_string();
    let mut client = sieve_client(port, user).await;
    assert_eq!(
        client.get("mine").await.unwrap(),
        own,
        "staging sends nothing"
    );
    client.logout().await.unwrap();

    // Only a person at a terminal approves it.
    refused(
        h,
        &["rule", "approve", &id],
        "confirmation_required",
        "terminal",
    );
    let approved = at_terminal(h, &["rule", "approve", &id], "yes\n");
    assert_eq!(approved.code, 0, "{}", approved.shown);
    let shown = ok(h, &["rule", "staged", &id]);
    let change = shown["rule_manifests"][0]["change_id"]
        .as_i64()
        .expect("its change");
    let journal = ok(h, &["changes", &change.to_string()]);
    assert_eq!(journal["change"]["applied"], 1, "{journal}");
    let archived = ok(h, &["search", "from:news"]);
    let boxes: Vec<&str> = (archived["messages"].as_array().unwrap().iter())
        .map(|m| m["mailbox"].as_str().unwrap())
        .collect();
    assert_eq!(boxes, ["Archive", "Archive"], "the backfill: {archived}");

    // Installed into the person's script: their bytes kept; it runs on delivery.
    let mut client = sieve_client(port, user).await;
    let installed = client.get("mine").await.unwrap();
    client.logout().await.unwrap();
    assert_eq!(mailbroker_managesieve::section::persons(&installed), own);
    let new = message(7, "News <news@example.org>", "Issue 7", "hi");
    server.deliver(user, &new).unwrap();
    assert!(
        imap.subjects("Archive")
            .await
            .unwrap()
            .contains(&"Issue 7".to_string())
    );
    let listed = ok(h, &["rule", "list", "--account", "work"]);
    let rules = listed["rules"].as_array().unwrap();
    assert!(
        rules
            .iter()
            .any(|r| r["name"] == "news to Archive" && r["ours"] == true),
        "{listed}"
    );
    assert!(
        rules
            .iter()
            .any(|r| r["name"] == "mine" && r["ours"] == false),
        "{listed}"
    );

    // The undo puts the person's script back exactly; the next news stays in the inbox.
    let undone = ok(h, &["undo", &change.to_string()]);
    assert_eq!(undone["applied"], 1, "{undone}");
    let mut client = sieve_client(port, user).await;
    assert_eq!(client.get("mine").await.unwrap(), own, "byte for byte");
    client.logout().await.unwrap();
    server
        .deliver(
            user,
            &message(8, "News <news@example.org>", "Issue 8", "hi"),
        )
        .unwrap();
    assert!(
        imap.subjects("INBOX")
            .await
            .unwrap()
            .contains(&"Issue 8".to_string())
    );
    let listed = ok(h, &["rule", "list", "--account", "work"]);
    assert!(
        !(listed["rules"].as_array().unwrap().iter()).any(|r| r["ours"] == true),
        "{listed}"
    );
}

/// An assistant lists the server's rules and proposes one over MCP: a manifest for the user
/// to approve, never installed by the call; a term a rule cannot see is refused by name.
#[tokio::test]
async fn an_assistant_proposes_a_rule_and_only_a_person_installs_it() {
    use common::mcp::{HTTP_TOKEN, call, http_server, http_session, ok_call};
    let Some((server, port)) = sieve_server() else {
        return;
    };
    let user = "rules-assistant";
    let first = message(1, "Shop <deals@shop.example>", "Sale", "hi");
    let (home, _imap) = account_of(server, port, user, &first).await;
    let h = home.path();
    let mcp = http_server(h);
    let session = http_session(&mcp.1, HTTP_TOKEN).await;
    let listed = ok_call(
        &session,
        "propose_rule",
        serde_json::json!({"account": "work", "action": "list"}),
    )
    .await;
    assert_eq!(listed["rules"], Value::Array(vec![]), "{listed}");
    let proposed = ok_call(
        &session,
        "propose_rule",
        serde_json::json!({"account": "work", "action": "propose", "name": "deals",
                           "when": "from:shop.example", "add_tags": ["Deals"], "read": true}),
    )
    .await;
    let m = &proposed["rule_manifest"];
    assert_eq!(m["matches"], 1, "{proposed}");
    assert!(
        m["provider_text"]
            .as_str()
            .unwrap()
            .contains("addflag \"Deals\""),
        "{proposed}"
    );
    let step = proposed["next_step"].as_str().unwrap();
    assert!(
        step.contains(&format!("mailbroker rule approve {}", m["id"])),
        "{step}"
    );
    let (is_error, refused) = call(
        &session,
        "propose_rule",
        serde_json::json!({"account": "work", "action": "propose", "name": "x",
                           "when": "in:inbox", "read": true}),
    )
    .await;
    assert!(
        is_error && refused["error_type"] == "validation_error",
        "{refused}"
    );
    assert!(
        refused["error"].as_str().unwrap().contains("in:inbox"),
        "{refused}"
    );
    // An action outside the list is refused, never dropped: no rule that forwards is staged.
    let forward = serde_json::json!({"account": "work", "action": "propose", "name": "fw",
                                     "when": "from:shop.example", "forward_to": "x@elsewhere.example"});
    let (is_error, refused) = call(&session, "propose_rule", forward).await;
    assert!(
        is_error && refused["error_type"] == "validation_error",
        "{refused}"
    );
    assert!(
        refused["error"].as_str().unwrap().contains("forward_to"),
        "{refused}"
    );
    session.cancel().await.ok();
    // Nothing reached the server: no script, no rule.
    let mut client = sieve_client(port, user).await;
    assert_eq!(client.list().await.unwrap(), []);
    client.logout().await.unwrap();
    let staged = ok(h, &["rule", "staged"]);
    assert_eq!(
        staged["rule_manifests"].as_array().unwrap().len(),
        1,
        "{staged}"
    );
    assert_eq!(staged["rule_manifests"][0]["status"], "pending", "{staged}");
    assert_eq!(
        staged["rule_manifests"][0]["origin"], "mcp:mcp-test",
        "who proposed it"
    );
}

/// A name and a value carrying Sieve's own syntax (`"`, `\`, `;`, a comment's `#`) are only
/// ever a comment's text and a string: the server accepts the script (CHECKSCRIPT), and the
/// rule matches exactly the subject it names on delivery.
#[tokio::test]
async fn sieve_syntax_in_a_rules_name_or_value_stays_text() {
    let Some((server, port)) = sieve_server() else {
        return;
    };
    let user = "rules-syntax";
    let first = message(1, "a@example.net", "hello", "hi");
    let (home, mut imap) = account_of(server, port, user, &first).await;
    let h = home.path();
    let name = "evil\"; discard; # \\";
    let when = r#"subject:"quarterly \"report\"; stop;""#;
    let staged = ok(
        h,
        &[
            "rule",
            "stage",
            "--account",
            "work",
            "--name",
            name,
            "--when",
            when,
            "--add-tag",
            "$q",
        ],
    );
    let id = staged["rule_manifest"]["id"].as_i64().unwrap().to_string();
    let approved = at_terminal(h, &["rule", "approve", &id], "yes\n");
    assert_eq!(approved.code, 0, "the server took it: {}", approved.shown);
    let listed = ok(h, &["rule", "list", "--account", "work"]);
    assert!(
        (listed["rules"].as_array().unwrap().iter())
            .any(|r| r["name"] == name && r["ours"] == true),
        "{listed}"
    );
    let said = message(2, "b@example.net", "Quarterly \"report\"; stop; now", "x");
    server.deliver(user, &said).unwrap();
    server
        .deliver(user, &message(3, "c@example.net", "quarterly summary", "x"))
        .unwrap();
    let tagged = imap.uid_search("INBOX", "KEYWORD $q").await.unwrap();
    assert_eq!(tagged.len(), 1, "only the subject it names");
    let mut client = sieve_client(port, user).await;
    let names: Vec<String> = client
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(
        names,
        ["mailbroker"],
        "a script of its own: the person had none"
    );
    client.logout().await.unwrap();
}
