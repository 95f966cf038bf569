//! The Gmail session against the Gmail mock: many calls in flight when the token expires
//! share one refresh.

use std::sync::Arc;

use mailbroker_gmail::api;
use mailbroker_gmail::client::Client;
use mailbroker_gmail::oauth::{OAuthSettings, SCOPE_MODIFY, Tokens};
use mailbroker_mock_gmail::GmailMock;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_share_one_refresh() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(32, &["INBOX"], None);
    let (access, refresh) = mock.grant(&[SCOPE_MODIFY]);
    let settings = OAuthSettings {
        client_id: "mailbroker-test".into(),
        auth_url: format!("{}/o/oauth2/v2/auth", mock.url),
        token_url: format!("{}/token", mock.url),
        api_base: mock.url.clone(),
        quota_units_per_sec: 1_000_000,
    };
    let tokens = Tokens {
        access_token: access,
        refresh_token: refresh,
        // Not expired by the clock: only Gmail's 401 says so.
        expires_at: i64::MAX,
        scopes: vec![SCOPE_MODIFY.into()],
        client_secret: None,
    };
    let client: Arc<Client> = Client::new(settings, tokens, "g").unwrap();
    assert_eq!(api::labels(&client).await.unwrap().len(), 12);

    mock.expire_tokens();
    let calls = ids.iter().map(|id| {
        let (client, id) = (client.clone(), id.clone());
        tokio::spawn(async move { api::metadata(&client, &id).await })
    });
    for call in futures::future::join_all(calls).await {
        assert_eq!(call.unwrap().unwrap().label_ids, vec!["INBOX".to_string()]);
    }
    let refused = mock.requests().iter().filter(|r| r.status == 401).count();
    assert!(
        refused >= 2,
        "calls were in flight together: {refused} refusals"
    );
    assert_eq!(mock.refreshes(), 1, "one refresh for all of them");
}
