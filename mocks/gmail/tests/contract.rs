//! The mock's fidelity, judged by Google's own artefacts: the official Python client
//! (`google-api-python-client`, which builds every request from Google's discovery document)
//! drives the mock, and every answer is checked against that document's schemas.

use std::path::{Path, PathBuf};
use std::process::Command;

use mailbroker_mock_gmail::{GmailMock, SCOPE_FULL, SCOPE_MODIFY, SCOPE_SETTINGS};

const CLIENT: &str = "google-api-python-client==2.202.0";

/// A venv with Google's client under target/, made once; `None` (skipped) without Python
/// outside CI.
fn python() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("py-gapi");
    mailbroker_testkit::python_venv(&venv, &[CLIENT])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn googles_client_and_discovery_document_accept_the_mock() {
    let Some(py) = python() else {
        return;
    };
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    let http = reqwest::Client::new();
    for (count, labels) in [(80, vec!["INBOX"]), (40, vec!["INBOX", "UNREAD"])] {
        let seeded = http
            .post(format!("{}/_mock/seed", mock.url))
            .json(&serde_json::json!({ "count": count, "labels": labels }))
            .send()
            .await
            .unwrap();
        assert!(seeded.status().is_success());
    }
    let modify = mock.token(&[SCOPE_MODIFY]);
    let full = mock.token(&[SCOPE_FULL]);
    let settings = mock.token(&[SCOPE_SETTINGS]);
    let (_, refresh) = mock.grant(&[SCOPE_MODIFY]);
    let (client_id, client_secret) = mailbroker_mock_gmail::TEST_CLIENT;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/contract.py");
    let url = mock.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(py)
            .arg(script)
            .args([
                &url,
                &modify,
                &full,
                &refresh,
                client_id,
                client_secret,
                &settings,
            ])
            .output()
    })
    .await
    .unwrap()
    .expect("run the contract script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "contract failed:\n{stdout}\n{stderr}");
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["refreshed"], true, "{summary}");
    for schema in [
        "Message",
        "ListMessagesResponse",
        "Label",
        "ListHistoryResponse",
        "Profile",
        "Filter",
        "ListFiltersResponse",
        "MessagePartBody",
        "MessagePart",
    ] {
        assert!(
            summary["schemas_checked"][schema].as_u64().unwrap_or(0) > 0,
            "{schema} unchecked: {summary}"
        );
    }
    // The request log saw the over-long batch refused and the scoped batchDelete.
    let log = mock.requests();
    assert!(
        log.iter()
            .any(|r| r.path.ends_with("batchModify") && r.status == 400 && r.ids == Some(1001))
    );
    assert!(
        log.iter()
            .any(|r| r.path.ends_with("batchDelete") && r.status == 403)
    );
    assert!(
        log.iter()
            .any(|r| r.path.ends_with("batchDelete") && r.status == 204)
    );
}
