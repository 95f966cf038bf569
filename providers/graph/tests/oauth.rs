//! The device code flow and refresh against the Graph mock: the code is shown, the client
//! polls until the person approves, the tokens work; a declined sign-in and a revoked grant
//! are `auth_required` with a next step.

use mailbroker_core::Provider;
use mailbroker_graph::GraphProvider;
use mailbroker_graph::oauth::{GraphSettings, device_login, refresh};
use mailbroker_mock_graph::GraphMock;
use mailbroker_testkit::oauth::control;
use serde_json::json;

fn settings(mock: &GraphMock) -> GraphSettings {
    GraphSettings {
        client_id: "mailbroker-test".into(),
        tenant: "common".into(),
        authority: mock.url.clone(),
        graph_base: mock.url.clone(),
    }
}

/// Runs the device flow in the background; returns the user code it showed and its end.
async fn start(
    mock: &GraphMock,
) -> (
    String,
    tokio::task::JoinHandle<mailbroker_core::Result<mailbroker_oauth::Tokens>>,
) {
    let settings = settings(mock);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let flow = tokio::spawn(async move {
        let show = move |uri: &str, code: &str| {
            assert!(uri.ends_with("/devicelogin"), "{uri}");
            let _ = tx.send(code.to_string());
        };
        device_login(&settings, show, "m").await
    });
    (rx.await.unwrap(), flow)
}

#[tokio::test]
async fn a_device_code_approved_by_the_person_gives_working_tokens() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let (code, flow) = start(&mock).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !flow.is_finished(),
        "the client waits while the person has not approved"
    );
    control(&mock.url, "device/approve", json!({"user_code": code})).await;
    let tokens = flow.await.unwrap().unwrap();
    assert!(
        tokens.scopes.iter().any(|s| s == "Mail.ReadWrite"),
        "{:?}",
        tokens.scopes
    );

    let mut graph = GraphProvider::new(&mock.url, tokens.access_token.clone(), "m").unwrap();
    let folders = graph.list_mailboxes().await.unwrap();
    assert!(folders.iter().any(|f| f.name == "Inbox"));

    let fresh = refresh(&settings(&mock), &tokens, "m").await.unwrap();
    assert_ne!(fresh.access_token, tokens.access_token);
    control(&mock.url, "revoke-all", json!({})).await;
    let revoked = refresh(&settings(&mock), &fresh, "m").await.unwrap_err();
    assert_eq!(revoked.error_type(), "auth_required", "{revoked:?}");
    assert!(revoked.next_step().is_some());
    let refused = graph.list_mailboxes().await.unwrap_err();
    assert_eq!(refused.error_type(), "auth_required", "{refused:?}");
}

#[tokio::test]
async fn a_declined_sign_in_is_auth_required() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let (code, flow) = start(&mock).await;
    control(
        &mock.url,
        "device/approve",
        json!({"user_code": code, "approve": false}),
    )
    .await;
    let refused = flow.await.unwrap().unwrap_err();
    assert_eq!(refused.error_type(), "auth_required", "{refused:?}");
    assert!(
        refused.message().contains("authorization_declined"),
        "{refused:?}"
    );
}
