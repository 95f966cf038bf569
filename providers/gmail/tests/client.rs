//! The Gmail session against the Gmail mock: many calls in flight when the token expires
//! share one refresh; a label another client makes while a sync runs is a tag of the
//! messages fetched after it.

use std::sync::Arc;

use async_trait::async_trait;
use mailbroker_core::{Capabilities, Provider, Result, SyncRequest};
use mailbroker_gmail::GmailProvider;
use mailbroker_gmail::api;
use mailbroker_gmail::client::Client;
use mailbroker_gmail::oauth::{OAuthSettings, SCOPE_MODIFY, Tokens};
use mailbroker_mock_gmail::GmailMock;
use mailbroker_testkit::memory::{AtCheckpoint, Indexed, MemoryIndex};

/// Settings for the mock and tokens it granted, not expired by the clock (only Gmail's 401
/// says they are).
fn signed_in(mock: &GmailMock) -> (OAuthSettings, Tokens) {
    let (access, refresh) = mock.grant(&[SCOPE_MODIFY]);
    let settings = OAuthSettings {
        client_id: mailbroker_mock_gmail::TEST_CLIENT.0.into(),
        auth_url: format!("{}/o/oauth2/v2/auth", mock.url),
        token_url: format!("{}/token", mock.url),
        api_base: mock.url.clone(),
        quota_units_per_sec: 1_000_000,
    };
    let tokens = Tokens {
        access_token: access,
        refresh_token: refresh,
        expires_at: i64::MAX,
        scopes: vec![SCOPE_MODIFY.into()],
        client_secret: Some(mailbroker_mock_gmail::TEST_CLIENT.1.into()),
    };
    (settings, tokens)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_share_one_refresh() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(32, &["INBOX"], None);
    let (settings, tokens) = signed_in(&mock);
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

/// At the sync's first checkpoint, another client makes a label and puts it on a message
/// the sync has not fetched yet; that message's id.
struct LabelAtCheckpoint {
    client: Arc<Client>,
    all: Vec<String>,
    labelled: Arc<std::sync::Mutex<Option<String>>>,
}

#[async_trait]
impl AtCheckpoint for LabelAtCheckpoint {
    async fn at(&mut self, index: &mut Indexed) -> Result<()> {
        let mut labelled = self.labelled.lock().unwrap().clone();
        if labelled.is_none() {
            let unseen = self.all.iter().find(|id| index.meta(id).is_none());
            let id = unseen.expect("a message left to fetch").clone();
            let label = api::create_label(&self.client, "Late").await?;
            api::batch_modify(&self.client, std::slice::from_ref(&id), &[label.id], &[]).await?;
            labelled = Some(id);
        }
        *self.labelled.lock().unwrap() = labelled;
        Ok(())
    }
}

#[tokio::test]
async fn a_label_made_while_the_sync_runs_is_a_tag_of_the_messages_fetched_after() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    // More than one batch of the sync (500), so it has a checkpoint with messages to come.
    let all = mock.seed(600, &["INBOX"], None);
    let (settings, tokens) = signed_in(&mock);
    let other = Client::new(settings.clone(), tokens.clone(), "other").unwrap();
    let mut gmail =
        GmailProvider::new(settings, tokens, None, Capabilities::default(), "g").unwrap();
    let labelled = Arc::new(std::sync::Mutex::new(None));
    let hook = LabelAtCheckpoint {
        client: other,
        all,
        labelled: labelled.clone(),
    };
    let mut index = MemoryIndex::new().at_checkpoint(hook);
    gmail
        .sync(&SyncRequest::default(), &mut index)
        .await
        .unwrap();
    let id = labelled
        .lock()
        .unwrap()
        .clone()
        .expect("the sync had a checkpoint");
    assert_eq!(
        index.meta(&id).unwrap().flags.tags,
        vec!["Late".to_string()]
    );
    let cursor = index.account_cursor.clone().unwrap_or_default();
    assert!(
        cursor.contains("Late"),
        "the stored label map has it too: {cursor}"
    );
}
