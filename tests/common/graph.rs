//! A Microsoft account on the Graph mock, added as a person would: the test plays the person
//! who types the code the command shows.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use mailbroker_mock_graph::GraphMock;
use mailbroker_testkit::oauth::control;
use serde_json::{Value, json};

/// Runs `account add graph` and approves the code it shows, as the person would.
pub async fn add_account(mock: &GraphMock, home: &std::path::Path) -> (Value, String) {
    add_account_as(mock, home, "ms").await
}

/// The same, for account `id`.
pub async fn add_account_as(mock: &GraphMock, home: &std::path::Path, id: &str) -> (Value, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mailbroker"))
        .arg("--home")
        .arg(home)
        .args([
            "--json",
            "account",
            "add",
            "graph",
            "--id",
            id,
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
