//! OAuth accounts (Gmail): setup with the browser flow, login again, and the doctor that checks
//! token, scopes and API reachability. Tokens are stored as the account's `oauth` secret.

use mailbroker_core::{AccountId, Capabilities, Error, ProviderKind, Result};
use mailbroker_gmail::api;
use mailbroker_gmail::client::Client;
use mailbroker_gmail::convert::{Cursor, mailboxes};
use mailbroker_gmail::oauth::{self, OAuthSettings, Redirect, SCOPE_FULL, SCOPE_MODIFY, Tokens};
use serde::Serialize;

use crate::accounts::{AccountView, show};
use crate::store::{AccountRecord, Store, now_secs};

const SECRET_KIND: &str = "oauth";

/// How a person runs the browser step.
pub struct Consent {
    pub open_browser: bool,
    /// Also accept the final redirect URL pasted on stdin.
    pub paste: bool,
}

fn scopes(permanent_delete: bool) -> Vec<&'static str> {
    if permanent_delete {
        vec![SCOPE_MODIFY, SCOPE_FULL]
    } else {
        vec![SCOPE_MODIFY]
    }
}

async fn consent(
    settings: &OAuthSettings,
    secret: Option<&str>,
    scopes: &[&str],
    how: &Consent,
    account: &str,
) -> Result<Tokens> {
    let redirect = if how.paste {
        Redirect::ListenerOrPasted
    } else {
        Redirect::Listener
    };
    oauth::authorize(
        settings,
        secret,
        scopes,
        redirect,
        how.open_browser,
        account,
    )
    .await
}

fn encode(tokens: &Tokens) -> Result<String> {
    serde_json::to_string(tokens).map_err(|e| Error::internal(format!("tokens: {e}")))
}

/// Authorizes in the browser, reads the labels, and stores the account (or nothing).
pub async fn add_gmail(
    store: &Store,
    id: AccountId,
    email: Option<String>,
    settings: OAuthSettings,
    client_secret: Option<String>,
    permanent_delete: bool,
    how: Consent,
) -> Result<AccountView> {
    if store.account(&id).await.is_ok() {
        return Err(Error::validation(format!("account {id} already exists"))
            .with_next_step(format!("run: mailbroker account remove {id}")));
    }
    let wanted = scopes(permanent_delete);
    let tokens = consent(
        &settings,
        client_secret.as_deref(),
        &wanted,
        &how,
        id.as_str(),
    )
    .await?;
    let client = Client::new(settings.clone(), tokens.clone(), id.as_str())?;
    let labels = api::labels(&client).await?;
    let profile = api::profile(&client).await?;
    let mut cursor = Cursor::default();
    cursor.set_labels(&labels);
    let record = AccountRecord {
        id,
        provider: ProviderKind::Gmail,
        email: email.or(Some(profile.email_address)),
        settings: serde_json::to_value(&settings).map_err(|e| Error::internal(e.to_string()))?,
        capabilities: Capabilities {
            extensions: tokens.scopes.clone(),
            custom_tags: true,
            max_tag_len: Some(mailbroker_gmail::MAX_LABEL_LEN),
        },
        created_at: now_secs(),
        last_sync_at: None,
        // The label map, so writes know label ids before the first sync.
        sync_cursor: Some(cursor.encode()),
    };
    store
        .add_account(&record, (SECRET_KIND, &encode(&tokens)?), &mailboxes())
        .await?;
    show(store, &record.id).await
}

fn settings_of(record: &AccountRecord) -> Result<OAuthSettings> {
    if record.provider != ProviderKind::Gmail {
        return Err(Error::unsupported(format!(
            "account {} is not an OAuth account",
            record.id
        )));
    }
    serde_json::from_value(record.settings.clone())
        .map_err(|e| Error::internal(format!("account {}: bad settings: {e}", record.id)))
}

/// Authorizes again (after a revoke, or to add the full scope) and stores the new tokens.
pub async fn login(
    store: &Store,
    id: &AccountId,
    upgrade: bool,
    how: Consent,
) -> Result<AccountView> {
    let record = store.account(id).await?;
    let settings = settings_of(&record)?;
    let old: Option<Tokens> = store
        .secret(id, SECRET_KIND)
        .await
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok());
    let had_full = old
        .as_ref()
        .is_some_and(|t| t.scopes.iter().any(|s| s == SCOPE_FULL));
    let secret = old.and_then(|t| t.client_secret);
    let tokens = consent(
        &settings,
        secret.as_deref(),
        &scopes(upgrade || had_full),
        &how,
        id.as_str(),
    )
    .await?;
    store.set_secret(id, SECRET_KIND, &encode(&tokens)?).await?;
    let caps = Capabilities {
        extensions: tokens.scopes.clone(),
        ..record.capabilities
    };
    store.set_capabilities(id, &caps).await?;
    show(store, id).await
}

/// A live access token for the account, refreshed (and stored) when it has expired.
pub async fn access_token(store: &Store, id: &AccountId) -> Result<(OAuthSettings, Tokens)> {
    let record = store.account(id).await?;
    let settings = settings_of(&record)?;
    let stored: Tokens = serde_json::from_str(&store.secret(id, SECRET_KIND).await?)
        .map_err(|e| Error::internal(format!("account {id}: bad stored tokens: {e}")))?;
    if !oauth::expired(&stored) {
        return Ok((settings, stored));
    }
    let fresh = oauth::refresh(&settings, &stored, id.as_str()).await?;
    store.set_secret(id, SECRET_KIND, &encode(&fresh)?).await?;
    Ok((settings, fresh))
}

#[derive(Debug, Serialize)]
pub struct Doctor {
    pub account: String,
    pub email: String,
    pub scopes: Vec<String>,
    pub permanent_delete: bool,
    pub messages: Option<u64>,
    pub api_base: String,
}

/// Checks the token (refreshing it), its scopes and that the API answers.
pub async fn doctor(store: &Store, id: &AccountId) -> Result<Doctor> {
    let (settings, tokens) = access_token(store, id).await?;
    // The client refreshes once if Gmail refuses the token (revoked or expired early).
    let client = Client::new(settings.clone(), tokens, id.as_str())?;
    let profile = api::profile(&client).await?;
    let scopes = client.scopes().await;
    Ok(Doctor {
        account: id.to_string(),
        email: profile.email_address,
        permanent_delete: scopes.iter().any(|s| s == SCOPE_FULL),
        scopes,
        messages: profile.messages_total,
        api_base: settings.api_base,
    })
}
