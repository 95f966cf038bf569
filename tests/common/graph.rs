//! A Microsoft account on the Graph mock, added as a person would: the test plays the person
//! who types the code the command shows.

use mailbroker_mock_graph::GraphMock;
use mailbroker_testkit::oauth::with_device_code_env;
use serde_json::Value;

/// Runs `account add graph` and approves the code it shows, as the person would.
pub async fn add_account(mock: &GraphMock, home: &std::path::Path) -> (Value, String) {
    add_account_as(mock, home, "ms").await
}

/// The same, for account `id`: `(account add's JSON, all it printed)`.
pub async fn add_account_as(mock: &GraphMock, home: &std::path::Path, id: &str) -> (Value, String) {
    let args = ["account", "add", "graph", "--id", id, "--client-id", "app"];
    let endpoints = ["--graph-base", &mock.url, "--authority", &mock.url];
    let all: Vec<&str> = args.iter().chain(&endpoints).copied().collect();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_mailbroker"));
    let database = super::database_env(home);
    let env: Vec<(&str, &str)> = database.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = with_device_code_env(bin, home, &all, &mock.url, &env)
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.output.stdout).to_string();
    assert!(run.output.status.success(), "{stdout}\n{}", run.stderr);
    (serde_json::from_str(&stdout).unwrap(), stdout + &run.stderr)
}
