//! Server-side rules on Gmail (filters) and Outlook (inbox rules), through the real binary
//! against the mocks, which hold every request to the provider's published schema and
//! scopes: a rule staged (nothing sent), refused without the permission rules need (with the
//! step that asks for it), installed beside the person's own, read back, changed as one
//! change, listed, and undone to exactly what was there.

mod common;

use std::path::Path;

use common::{at_terminal, ok};
use mailbroker_mock_gmail::{GmailMock, SCOPE_SETTINGS};
use serde_json::{Value, json};

fn stage(h: &Path, account: &str, when: &str) -> Value {
    let args = [
        "rule",
        "stage",
        "--account",
        account,
        "--name",
        "news",
        "--when",
        when,
        "--move-to",
        "archive",
        "--add-tag",
        "News",
        "--read",
        "--backfill",
    ];
    ok(h, &args)["rule_manifest"].clone()
}

fn approve(h: &Path, id: &Value) -> mailbroker_testkit::terminal::AtTerminal {
    at_terminal(h, &["rule", "approve", &id.to_string()], "yes\n")
}

/// The change a carried-out manifest made.
fn change_of(h: &Path, id: &Value) -> String {
    let shown = ok(h, &["rule", "staged", &id.to_string()]);
    shown["rule_manifests"][0]["change_id"].to_string()
}

fn names(h: &Path, account: &str) -> Vec<(String, bool)> {
    let listed = ok(h, &["rule", "list", "--account", account]);
    (listed["rules"].as_array().unwrap().iter())
        .map(|r| (r["name"].as_str().unwrap().to_string(), r["ours"] == true))
        .collect()
}

/// The filters' criteria as Gmail keeps them.
fn criteria(mock: &GmailMock) -> Vec<Value> {
    mock.filters()
        .iter()
        .map(|f| f["criteria"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gmail_rule_is_a_filter_installed_with_its_scope_changed_whole_and_undone() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    mock.seed(3, &["INBOX", "UNREAD"], Some("News <news@example.org>"));
    mock.seed(1, &["INBOX"], Some("Boss <boss@example.org>"));
    // The person's own filter, made in Gmail.
    let theirs =
        json!({"criteria": {"from": "boss@example.org"}, "action": {"addLabelIds": ["STARRED"]}});
    let made = reqwest::Client::new()
        .post(format!("{}/gmail/v1/users/me/settings/filters", mock.url))
        .bearer_auth(mock.token(&[SCOPE_SETTINGS]))
        .json(&theirs)
        .send()
        .await
        .unwrap();
    assert!(made.status().is_success());
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::gmail::add_account(&mock, h, "g", &[]).await;
    ok(h, &["sync"]);

    let m = stage(h, "g", "from:news");
    assert_eq!(m["matches"], 3, "{m}");
    let text: Value = serde_json::from_str(m["provider_text"].as_str().unwrap()).unwrap();
    assert_eq!(text["criteria"], json!({"from": "news"}), "{text}");
    assert_eq!(
        text["action"],
        json!({"addLabelIds": ["News (new label)"], "removeLabelIds": ["INBOX", "UNREAD"]})
    );

    // Without gmail.settings.basic nothing is sent, and the manifest waits.
    let refused = approve(h, &m["id"]);
    assert_ne!(refused.code, 0, "{}", refused.shown);
    assert!(
        refused.shown.contains("insufficient_scope"),
        "{}",
        refused.shown
    );
    assert!(
        refused
            .shown
            .contains("mailbroker account upgrade-scope g --rules"),
        "{}",
        refused.shown
    );
    assert_eq!(mock.filters().len(), 1);
    let waiting = ok(h, &["rule", "staged", &m["id"].to_string()]);
    assert_eq!(
        waiting["rule_manifests"][0]["status"], "pending",
        "{waiting}"
    );
    let args = ["account", "upgrade-scope", "g", "--rules", "--no-browser"].map(String::from);
    let upgraded = common::gmail::with_browser(h, args.to_vec()).await;
    assert_eq!(upgraded.code, 0, "{}\n{}", upgraded.stdout, upgraded.stderr);
    let scopes = &upgraded.json["account"]["capabilities"]["extensions"];
    assert!(
        scopes.as_array().unwrap().contains(&json!(SCOPE_SETTINGS)),
        "{scopes}"
    );

    let approved = approve(h, &m["id"]);
    assert_eq!(approved.code, 0, "{}", approved.shown);
    let first = change_of(h, &m["id"]);
    assert_eq!(
        criteria(&mock),
        [json!({"from": "boss@example.org"}), json!({"from": "news"})]
    );
    let ours = &mock.filters()[1]["action"];
    assert!(
        ours["addLabelIds"][0]
            .as_str()
            .unwrap()
            .starts_with("Label_"),
        "{ours}"
    );
    assert_eq!(
        ok(h, &["search", "from:news in:archive"])["total"],
        3,
        "the backfill"
    );
    let listed = names(h, "g");
    assert!(listed.contains(&("news".to_string(), true)), "{listed:?}");
    assert!(
        listed
            .iter()
            .any(|(n, ours)| n.contains("boss@example.org") && !ours),
        "{listed:?}"
    );

    // A changed rule is its filter deleted and the new one made: one change.
    let changed = stage(h, "g", "from:news subject:weekly");
    let approved = approve(h, &changed["id"]);
    assert_eq!(approved.code, 0, "{}", approved.shown);
    let second = change_of(h, &changed["id"]);
    assert_eq!(
        criteria(&mock),
        [
            json!({"from": "boss@example.org"}),
            json!({"from": "news", "subject": "weekly"})
        ]
    );
    let undone = ok(h, &["undo", &second]);
    assert_eq!(undone["applied"], 1, "{undone}");
    assert_eq!(
        criteria(&mock),
        [json!({"from": "boss@example.org"}), json!({"from": "news"})]
    );
    let undone = ok(h, &["undo", &first]);
    assert_eq!(undone["applied"], 1, "{undone}");
    assert_eq!(criteria(&mock), [json!({"from": "boss@example.org"})]);
    assert_eq!(names(h, "g").iter().filter(|(_, ours)| *ours).count(), 0);

    // What Gmail cannot take: a term its search has no word for, refused when staged; a
    // 1,001st filter, refused before anything is sent.
    let any_list = [
        "rule",
        "stage",
        "--account",
        "g",
        "--name",
        "l",
        "--when",
        "list:*",
        "--read",
    ];
    let run = common::mb(h, &any_list);
    assert_eq!(run.json["error_type"], "validation_error", "{}", run.stdout);
    assert!(
        run.json["error"].as_str().unwrap().contains("list:*"),
        "{}",
        run.stdout
    );
    mock.add_filters(mailbroker_mock_gmail::MAX_FILTERS - 1);
    let full = stage(h, "g", "from:news");
    let refused = approve(h, &full["id"]);
    assert!(
        refused.shown.contains("at most 1000 filters"),
        "{}",
        refused.shown
    );
    assert!(
        refused.shown.contains("Gmail's settings"),
        "{}",
        refused.shown
    );
    assert_eq!(mock.filters().len(), mailbroker_mock_gmail::MAX_FILTERS);
}

fn rules_of(mock: &mailbroker_mock_graph::GraphMock) -> Vec<(String, Value, Value)> {
    (mock.rules().iter())
        .map(|r| {
            let name = r["displayName"].as_str().unwrap().to_string();
            (name, r["sequence"].clone(), r["conditions"].clone())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outlook_rule_comes_after_the_persons_is_changed_whole_and_undone() {
    let mock = mailbroker_mock_graph::GraphMock::start("me@mock.example")
        .await
        .unwrap();
    mock.seed(3, "inbox", "news@example.org", true);
    // The person's own rule, which forwards: listed as theirs, never touched.
    let theirs = json!({"displayName": "boss", "sequence": 1, "isEnabled": true,
        "conditions": {"senderContains": ["boss"]},
        "actions": {"forwardTo": [{"emailAddress": {"address": "me@elsewhere.example"}}]}});
    let made = reqwest::Client::new()
        .post(format!(
            "{}/v1.0/me/mailFolders/inbox/messageRules",
            mock.url
        ))
        .bearer_auth(mock.token())
        .json(&theirs)
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201);
    // Signed in without MailboxSettings.ReadWrite (the tenant's consent lacks it).
    let mail_only = json!({"grantable": ["Mail.ReadWrite", "offline_access", "User.Read"]});
    mailbroker_testkit::oauth::control(&mock.url, "identity", mail_only).await;
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::graph::add_account(&mock, h).await;
    ok(h, &["sync"]);

    for (when, extra, naming) in [
        ("subject:weekly", "--read", "subject:weekly"),
        ("from:news", "--read", "from:news"),
        ("from:news@example.org", "--flag", "flag"),
    ] {
        let args = [
            "rule",
            "stage",
            "--account",
            "ms",
            "--name",
            "x",
            "--when",
            when,
            extra,
        ];
        let run = common::mb(h, &args);
        assert_eq!(run.json["error_type"], "validation_error", "{}", run.stdout);
        assert!(
            run.json["error"].as_str().unwrap().contains(naming),
            "{}",
            run.stdout
        );
    }
    let m = stage(h, "ms", "from:news@example.org");
    assert_eq!(m["matches"], 3, "{m}");
    let text: Value = serde_json::from_str(m["provider_text"].as_str().unwrap()).unwrap();
    assert_eq!(
        text["conditions"]["fromAddresses"][0]["emailAddress"]["address"], "news@example.org",
        "{text}"
    );
    assert_eq!(mock.rules().len(), 1, "staging sends nothing");

    // Without the permission nothing is sent; signed in again with it, the rule goes in.
    let refused = approve(h, &m["id"]);
    assert!(
        refused.shown.contains("insufficient_scope"),
        "{}",
        refused.shown
    );
    assert!(
        refused.shown.contains("mailbroker account login ms"),
        "{}",
        refused.shown
    );
    assert_eq!(mock.rules().len(), 1);
    mailbroker_testkit::oauth::control(&mock.url, "identity", json!({"grantable": []})).await;
    let bin = Path::new(env!("CARGO_BIN_EXE_mailbroker"));
    let login =
        mailbroker_testkit::oauth::with_device_code(bin, h, &["account", "login", "ms"], &mock.url)
            .await
            .unwrap();
    assert!(login.output.status.success(), "{}", login.stderr);
    let approved = approve(h, &m["id"]);
    assert_eq!(approved.code, 0, "{}", approved.shown);
    let first = change_of(h, &m["id"]);
    let rules = rules_of(&mock);
    assert_eq!(
        (rules[1].0.as_str(), &rules[1].1),
        ("news", &json!(2)),
        "{rules:?}"
    );
    let ours = &mock.rules()[1]["actions"];
    assert_eq!(
        ours["moveToFolder"],
        json!(mock.folder_id("archive").unwrap()),
        "{ours}"
    );
    assert_eq!(ours["assignCategories"], json!(["News"]));
    assert_eq!(
        ok(h, &["search", "from:news in:archive"])["total"],
        3,
        "the backfill"
    );
    let listed = ok(h, &["rule", "list", "--account", "ms"]);
    let boss = &listed["rules"][0];
    assert_eq!(
        (boss["name"].as_str(), &boss["ours"], &boss["forwards"]),
        (Some("boss"), &json!(false), &json!(true))
    );
    assert_eq!(names(h, "ms")[1], ("news".to_string(), true));

    let changed = stage(h, "ms", "from:news@example.org -has:attachment");
    let approved = approve(h, &changed["id"]);
    assert_eq!(approved.code, 0, "{}", approved.shown);
    let second = change_of(h, &changed["id"]);
    assert_eq!(mock.rules().len(), 2);
    assert_eq!(
        mock.rules()[1]["exceptions"],
        json!({"hasAttachments": true})
    );
    ok(h, &["undo", &second]);
    assert_eq!(mock.rules().len(), 2);
    assert!(
        mock.rules()[1].get("exceptions").is_none(),
        "{:?}",
        mock.rules()
    );
    ok(h, &["undo", &first]);
    assert_eq!(
        rules_of(&mock),
        [(
            "boss".to_string(),
            json!(1),
            json!({"senderContains": ["BOSS"]})
        )]
    );

    // A mailbox whose rules Graph refuses, as some personal accounts do: a next step that
    // says so, and nothing changes.
    mock.refuse_rules(true);
    let again = stage(h, "ms", "from:news@example.org");
    let refused = approve(h, &again["id"]);
    assert_ne!(refused.code, 0, "{}", refused.shown);
    assert!(refused.shown.contains("unsupported"), "{}", refused.shown);
    assert!(
        refused.shown.contains("personal Microsoft accounts"),
        "{}",
        refused.shown
    );
}
