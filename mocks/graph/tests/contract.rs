//! The mock's fidelity, judged by Microsoft's own clients: the Python Graph SDK
//! (`msgraph-sdk`, whose request builders come from Graph's metadata) drives folders, delta,
//! PATCH, move, master categories, `$batch` and permanentDelete against it (`contract.py`),
//! and every effect is checked on the mock's state as well as in the SDK's answers.

use std::path::{Path, PathBuf};
use std::process::Command;

use mailbroker_mock_graph::GraphMock;

const CLIENTS: [&str; 3] = ["msgraph-sdk==1.65.0", "deprecated==1.3.1", "msal==1.39.0"];

/// A venv with Microsoft's clients under target/, made once; `None` (skipped) without Python
/// outside CI.
pub fn python() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("py-msgraph");
    mailbroker_testkit::python_venv(&venv, &CLIENTS)
}

fn run(py: PathBuf, script: &str, args: Vec<String>) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(script);
    let out = Command::new(py)
        .arg(script)
        .args(args)
        .output()
        .expect("run the contract script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "contract failed:\n{stdout}\n{stderr}");
    serde_json::from_str(stdout.trim()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn microsofts_graph_sdk_drives_the_mock() {
    let Some(py) = python() else {
        return;
    };
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    mock.add_folder("Receipts", Some("inbox")).unwrap();
    mock.seed(30, "inbox", "news@shop.example", true);
    let args = vec![mock.url.clone(), mock.token()];
    let summary = tokio::task::spawn_blocking(move || run(py, "contract.py", args))
        .await
        .unwrap();
    assert_eq!(summary["batch"], 2, "{summary}");
    assert_eq!(summary["rules"], true, "{summary}");
    assert_eq!(summary["attachments"], true, "{summary}");
    assert!(mock.rules().is_empty());

    // What the SDK saw is what the mock holds.
    for id in summary["targets"].as_array().unwrap() {
        let message = mock.message(id.as_str().unwrap()).unwrap();
        assert_eq!(message["categories"], serde_json::json!(["Invoices"]));
    }
    let log = mock.requests();
    let batches: Vec<_> = log.iter().filter_map(|l| l.inner).collect();
    assert_eq!(batches, [20, 5], "{log:?}");
    assert!(
        log.iter()
            .any(|l| l.path.ends_with("/move") && l.status == 201)
    );
    assert!(
        log.iter()
            .any(|l| l.path.ends_with("/permanentDelete") && l.status == 204)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn microsofts_sign_in_library_completes_the_device_code_flow() {
    let Some(py) = python() else {
        return;
    };
    let certs = tempfile::tempdir().unwrap();
    let ca = mailbroker_testkit::TestCa::generate(certs.path()).unwrap();
    let mock = GraphMock::start_tls("me@mock.example", &ca.cert_pem, &ca.key_pem)
        .await
        .unwrap();
    assert!(mock.url.starts_with("https://"));
    let url = mock.url.clone();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/msal_contract.py");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(py)
            .arg(script)
            .args([&url, "mailbroker-test"])
            .env("REQUESTS_CA_BUNDLE", &ca.ca_pem)
            .output()
    })
    .await
    .unwrap()
    .expect("run the msal script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "msal failed:\n{stdout}\n{stderr}");
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["username"], "me@mock.example");

    // msal polled while the person had not approved, then got tokens, then refreshed.
    let answers: Vec<String> = mock
        .requests()
        .into_iter()
        .filter_map(|l| l.oauth)
        .collect();
    let pending = answers
        .iter()
        .take_while(|a| *a == "authorization_pending")
        .count();
    assert!(pending >= 1, "{answers:?}");
    assert_eq!(answers[pending..], ["tokens", "tokens"], "{answers:?}");
}
