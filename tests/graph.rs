//! A Microsoft account end to end, against the Graph mock: `account add graph` signs in by
//! the device code flow (the test plays the person who types the code), `sync` indexes the
//! nested folders with their roles, a change made elsewhere arrives by delta, and a write
//! is refused up front with a sentence, nothing sent. No token is ever printed.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{mb, ok};
use mailbroker_mock_graph::GraphMock;
use mailbroker_testkit::oauth::control;
use serde_json::{Value, json};

/// Runs `account add graph` and approves the code it shows, as the person would.
async fn add_account(mock: &GraphMock, home: &std::path::Path) -> (Value, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mailbroker"))
        .arg("--home")
        .arg(home)
        .args([
            "--json",
            "account",
            "add",
            "graph",
            "--id",
            "ms",
            "--client-id",
            "app",
        ])
        .args(["--graph-base", &mock.url, "--authority", &mock.url])
        .env("MAILBROKER_SECRET_STORE", "index")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mailbroker");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(code) = line.split("enter the code ").nth(1) {
                let _ = tx.send(code.trim().to_string());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let code =
        tokio::task::spawn_blocking(move || rx.recv_timeout(std::time::Duration::from_secs(30)))
            .await
            .unwrap()
            .expect("the command shows a user code");
    control(&mock.url, "device/approve", json!({"user_code": code})).await;
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let stderr = reader.join().unwrap();
    assert!(
        out.status.success(),
        "{}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    (
        serde_json::from_str(&stdout).unwrap(),
        format!("{stdout}{stderr}"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_microsoft_account_signs_in_syncs_and_refuses_writes_up_front() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let receipts = mock.add_folder("Receipts", Some("inbox")).unwrap();
    let inbox = mock.seed(30, "inbox", "news@shop.example", true);
    mock.seed(10, &receipts, "billing@acme.example", false);
    let home = tempfile::tempdir().unwrap();

    let (added, printed) = add_account(&mock, home.path()).await;
    let account = &added["account"];
    assert_eq!(account["provider"], "graph", "{added}");
    assert_eq!(account["email"], "me@mock.example");
    let names: Vec<&str> = account["mailboxes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"Inbox/Receipts"), "{names:?}");

    let synced = ok(home.path(), &["sync"]);
    assert_eq!(synced["accounts"][0]["added"], 40, "{synced}");
    let count =
        |query: &str| ok(home.path(), &["search", "--limit", "100", query])["total"].clone();
    assert_eq!(count("account:ms"), 40);
    assert_eq!(count("in:inbox is:unread"), 30);
    assert_eq!(count("from:billing"), 10);

    control(
        &mock.url,
        "modify",
        json!({"id": inbox[0], "categories": ["Work"]}),
    )
    .await;
    control(
        &mock.url,
        "modify",
        json!({"id": inbox[1], "moveTo": "deleteditems"}),
    )
    .await;
    let again = ok(home.path(), &["sync"]);
    assert_eq!(again["success"], true, "{again}");
    assert_eq!(count("tag:Work"), 1);
    assert_eq!(count("in:trash"), 1);
    assert_eq!(count("in:inbox"), 29);

    let before = mock.requests().len();
    let refused = mb(
        home.path(),
        &["update", "--query", "in:inbox", "--read", "--yes"],
    );
    assert_eq!(
        refused.json["error_type"], "unsupported",
        "{}",
        refused.stdout
    );
    assert!(refused.json["next_step"].is_string());
    let sent = mock.requests().split_off(before);
    assert!(sent.iter().all(|r| r.method == "GET"), "{sent:?}");
    assert_eq!(mock.message(&inbox[2]).unwrap()["isRead"], false);
    let staged = mb(home.path(), &["stage-delete", "account:ms"]);
    assert_eq!(
        staged.json["error_type"], "unsupported",
        "{}",
        staged.stdout
    );
    let journal = ok(home.path(), &["changes"]);
    assert_eq!(journal["changes"].as_array().unwrap().len(), 0, "{journal}");
    assert_eq!(ok(home.path(), &["delete-staged"])["manifests"], json!([]));

    let doctor = ok(home.path(), &["account", "doctor", "ms"]);
    assert_eq!(doctor["doctor"]["email"], "me@mock.example", "{doctor}");
    let all = format!("{printed}{synced}{again}{}{doctor}", refused.stdout);
    assert!(
        !all.contains("mock-at-") && !all.contains("mock-rt-"),
        "a token was printed"
    );
}
