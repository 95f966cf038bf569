//! The device code flow and refresh against the Graph mock: the code is shown, the client
//! polls as the server says (pending, slow_down) until the person approves, the tokens work;
//! a token Graph refuses is renewed once for every caller and stored; a declined sign-in and
//! a revoked grant are `auth_required`, withdrawn consent `insufficient_scope`, each with a
//! next step.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mailbroker_core::{Provider, Secrets};
use mailbroker_graph::GraphProvider;
use mailbroker_graph::client::Renewal;
use mailbroker_graph::oauth::{GraphSettings, device_login, refresh};
use mailbroker_mock_graph::GraphMock;
use mailbroker_oauth::{SECRET_KIND, Tokens};
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

/// The token endpoint's answers so far, in order.
fn polls(mock: &GraphMock) -> Vec<String> {
    mock.requests()
        .into_iter()
        .filter_map(|l| l.oauth)
        .collect()
}

async fn until(mock: &GraphMock, answer: &str) -> Instant {
    for _ in 0..400 {
        if polls(mock).iter().any(|a| a == answer) {
            return Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the client never got {answer}: {:?}", polls(mock));
}

#[tokio::test]
async fn the_client_polls_as_told_pending_then_slow_down_then_success() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let (code, flow) = start(&mock).await;
    until(&mock, "authorization_pending").await;
    // Microsoft answers slow_down to a client it finds polling too fast.
    control(&mock.url, "identity", json!({"slow_down": 1})).await;
    let slowed = until(&mock, "slow_down").await;
    control(&mock.url, "device/approve", json!({"user_code": code})).await;
    flow.await.unwrap().unwrap();
    let waited = slowed.elapsed();

    let answers = polls(&mock);
    let first_slow = answers.iter().position(|a| a == "slow_down").unwrap();
    assert!(
        answers[..first_slow]
            .iter()
            .all(|a| a == "authorization_pending")
            && answers[first_slow..] == ["slow_down", "tokens"],
        "{answers:?}"
    );
    // RFC 8628 §3.5: after slow_down the interval grows by 5 s (1 s here, so 6 s).
    assert!(
        waited >= Duration::from_secs(5),
        "polled again after {waited:?}"
    );
}

/// Secrets in memory, as the store would keep them.
#[derive(Clone, Default)]
struct Kept(Arc<Mutex<Option<String>>>);

#[async_trait::async_trait]
impl Secrets for Kept {
    async fn get(&self, _kind: &str) -> mailbroker_core::Result<String> {
        Ok(self.0.lock().unwrap().clone().unwrap_or_default())
    }

    async fn set(&self, kind: &str, value: &str) -> mailbroker_core::Result<()> {
        assert_eq!(kind, SECRET_KIND);
        *self.0.lock().unwrap() = Some(value.to_string());
        Ok(())
    }

    fn shared(&self) -> Arc<dyn Secrets> {
        Arc::new(self.clone())
    }
}

async fn signed_in(mock: &GraphMock) -> Tokens {
    let (code, flow) = start(mock).await;
    control(&mock.url, "device/approve", json!({"user_code": code})).await;
    flow.await.unwrap().unwrap()
}

#[tokio::test]
async fn a_token_graph_refuses_is_renewed_and_the_rotated_one_stored() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let tokens = signed_in(&mock).await;
    let kept = Kept::default();
    let renewal = Renewal {
        settings: settings(&mock),
        tokens: tokens.clone(),
        secrets: kept.shared(),
    };
    let mut graph = GraphProvider::signed_in(&mock.url, renewal, "m").unwrap();
    // Graph refuses the token before its stored expiry (as after a password change).
    control(&mock.url, "identity", json!({"expire_tokens": true})).await;
    let granted_before = polls(&mock).iter().filter(|a| *a == "tokens").count();

    let folders = graph.list_mailboxes().await.unwrap();
    assert!(folders.iter().any(|f| f.name == "Inbox"));
    let again = graph.list_mailboxes().await.unwrap();
    assert_eq!(again.len(), folders.len());
    let granted = polls(&mock).iter().filter(|a| *a == "tokens").count() - granted_before;
    assert_eq!(granted, 1, "one refresh: {:?}", polls(&mock));

    // The rotated refresh token was stored (the old one is void now), and it works.
    let stored: Tokens = serde_json::from_str(&kept.get(SECRET_KIND).await.unwrap()).unwrap();
    assert_ne!(stored.refresh_token, tokens.refresh_token);
    assert!(refresh(&settings(&mock), &tokens, "m").await.is_err());
    refresh(&settings(&mock), &stored, "m").await.unwrap();
}

#[tokio::test]
async fn concurrent_callers_share_one_renewal() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let tokens = signed_in(&mock).await;
    let kept = Kept::default();
    let client = Arc::new(
        mailbroker_graph::client::Client::signed_in(
            &mock.url,
            Renewal {
                settings: settings(&mock),
                tokens,
                secrets: kept.shared(),
            },
            "m",
        )
        .unwrap(),
    );
    control(&mock.url, "identity", json!({"expire_tokens": true})).await;
    let granted_before = polls(&mock).iter().filter(|a| *a == "tokens").count();
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.get("me").await })
        })
        .collect();
    for call in calls {
        let me = call.await.unwrap().unwrap();
        assert_eq!(me["mail"], "me@mock.example");
    }
    let granted = polls(&mock).iter().filter(|a| *a == "tokens").count() - granted_before;
    assert_eq!(granted, 1, "single-flight refresh: {:?}", polls(&mock));

    control(&mock.url, "revoke-all", json!({})).await;
    let refused = client.get("me").await.unwrap_err();
    assert_eq!(refused.error_type(), "auth_required", "{refused:?}");
    assert!(
        refused
            .next_step()
            .is_some_and(|s| s.contains("account login"))
    );
}

#[tokio::test]
async fn withdrawn_consent_is_insufficient_scope_with_a_next_step() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let tokens = signed_in(&mock).await;
    control(&mock.url, "identity", json!({"consent_required": true})).await;
    let refused = refresh(&settings(&mock), &tokens, "m").await.unwrap_err();
    assert_eq!(refused.error_type(), "insufficient_scope", "{refused:?}");
    assert!(refused.message().contains("AADSTS65001"), "{refused:?}");
    assert!(
        refused
            .next_step()
            .is_some_and(|s| s.contains("administrator") && s.contains("account login m")),
        "{refused:?}"
    );
}
