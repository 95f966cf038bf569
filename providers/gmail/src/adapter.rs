//! The Gmail adapter's offline half: setup with the browser flow, login again, the doctor,
//! the connector (an expired token is refreshed and stored first), tag rules and the plan.
//! Tokens are the account's `oauth` secret.

use async_trait::async_trait;
use mailbroker_core::{
    AccountId, AccountInfo, Adapter, Capabilities, Connector, Consent, DeleteBatch, DoctorReport,
    Error, Grouping, NewAccount, ProviderKind, Ready, Result, Secrets, WriteBatch,
};

use crate::client::Client;
use crate::convert::{self, Cursor};
use crate::oauth::{self, OAuthSettings, SCOPE_FULL, SCOPE_MODIFY, SCOPE_SETTINGS, Tokens};
use crate::{GmailProvider, MAX_LABEL_LEN, api};
use mailbroker_oauth::{SECRET_KIND, encode};

fn scopes(permanent_delete: bool) -> Vec<&'static str> {
    if permanent_delete {
        vec![SCOPE_MODIFY, SCOPE_FULL]
    } else {
        vec![SCOPE_MODIFY]
    }
}

fn capabilities(tokens: &Tokens) -> Capabilities {
    Capabilities {
        extensions: tokens.scopes.clone(),
        custom_tags: true,
        max_tag_len: Some(MAX_LABEL_LEN),
    }
}

/// Authorizes in the browser and reads the labels and the profile: an account to store.
pub async fn setup(
    id: &AccountId,
    email: Option<String>,
    settings: OAuthSettings,
    client_secret: Option<String>,
    permanent_delete: bool,
    how: Consent,
) -> Result<NewAccount> {
    settings.check_endpoints()?;
    let wanted = scopes(permanent_delete);
    let tokens = oauth::authorize(
        &settings,
        client_secret.as_deref(),
        &wanted,
        how,
        id.as_str(),
    )
    .await?;
    let client = Client::new(settings.clone(), tokens.clone(), id.as_str())?;
    let labels = api::labels(&client).await?;
    let profile = api::profile(&client).await?;
    let mut cursor = Cursor::default();
    cursor.set_labels(&labels);
    Ok(NewAccount {
        provider: ProviderKind::Gmail,
        email: email.or(Some(profile.email_address)),
        settings: serde_json::to_value(&settings).map_err(|e| Error::internal(e.to_string()))?,
        capabilities: capabilities(&tokens),
        // The label map, so writes know label ids before the first sync.
        cursor: Some(cursor.encode()),
        secret: Some((SECRET_KIND.to_string(), encode(&tokens)?)),
        mailboxes: convert::mailboxes(),
    })
}

pub struct Gmail;

#[async_trait]
impl Adapter for Gmail {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Gmail
    }

    fn validate_tag(&self, _account: &AccountInfo<'_>, tag: &str, _new: bool) -> Result<()> {
        crate::validate_tag(tag)
    }

    /// The filter's JSON; a tag's label by its id where the account knows it, else as a
    /// label to be made on approval.
    fn rule_text(
        &self,
        account: &AccountInfo<'_>,
        rule: &mailbroker_core::Rule,
        _mailboxes: &[(String, Option<mailbroker_core::Role>)],
    ) -> Result<String> {
        let cursor = Cursor::parse(account.cursor);
        let filter = crate::filters::filter(rule, |tag| cursor.label_id(tag).map(str::to_string))?;
        serde_json::to_string_pretty(&crate::filters::essence(&filter))
            .map_err(|e| Error::internal(e.to_string()))
    }

    fn tag_exists(&self, account: &AccountInfo<'_>, tag: &str) -> bool {
        Cursor::parse(account.cursor).label_id(tag).is_some()
    }

    fn plan(&self, account: &AccountInfo<'_>, batch: &WriteBatch) -> Vec<String> {
        crate::write::plan(&Cursor::parse(account.cursor), batch)
    }

    /// Adding a label a message has, or removing one it lacks, changes nothing, and a
    /// `batchModify` takes up to 1,000 messages with one label change.
    fn grouping(&self) -> Grouping {
        Grouping::Whole
    }

    fn plan_delete(&self, account: &AccountInfo<'_>, batch: &DeleteBatch) -> Vec<String> {
        crate::write::plan_delete(account.capabilities, batch)
    }

    async fn connector(
        &self,
        account: &AccountInfo<'_>,
        secrets: &dyn Secrets,
    ) -> Result<Box<dyn Connector>> {
        let (settings, tokens) =
            mailbroker_oauth::access_token::<OAuthSettings>(account, secrets, oauth::refresh)
                .await?;
        let provider = GmailProvider::new(
            settings,
            tokens,
            account.cursor,
            account.capabilities.clone(),
            account.id.as_str(),
        )?;
        Ok(Box::new(Ready(Box::new(provider))))
    }

    async fn login(
        &self,
        account: &AccountInfo<'_>,
        secrets: &dyn Secrets,
        upgrade: mailbroker_core::Upgrade,
        how: Consent,
    ) -> Result<Capabilities> {
        let settings: OAuthSettings = account.settings()?;
        let old: Option<Tokens> = secrets
            .get(SECRET_KIND)
            .await
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok());
        let had = |scope: &str| {
            (old.as_ref()).is_some_and(|t: &Tokens| t.scopes.iter().any(|s| s == scope))
        };
        let mut wanted = scopes(upgrade.permanent_delete || had(SCOPE_FULL));
        if upgrade.rules || had(SCOPE_SETTINGS) {
            wanted.push(SCOPE_SETTINGS);
        }
        let secret = old.and_then(|t| t.client_secret);
        let id = account.id.as_str();
        let tokens = oauth::authorize(&settings, secret.as_deref(), &wanted, how, id).await?;
        secrets.set(SECRET_KIND, &encode(&tokens)?).await?;
        Ok(Capabilities {
            extensions: tokens.scopes.clone(),
            ..account.capabilities.clone()
        })
    }

    async fn doctor(
        &self,
        account: &AccountInfo<'_>,
        secrets: &dyn Secrets,
    ) -> Result<DoctorReport> {
        let (settings, tokens) =
            mailbroker_oauth::access_token::<OAuthSettings>(account, secrets, oauth::refresh)
                .await?;
        // The client refreshes once if Gmail refuses the token (revoked or expired early).
        let client = Client::new(settings.clone(), tokens, account.id.as_str())?;
        let profile = api::profile(&client).await?;
        let scopes = client.scopes().await;
        let summary = format!(
            "{}: token ok, API reachable at {}, {} ({} messages), scopes: {}",
            account.id,
            settings.api_base,
            profile.email_address,
            profile.messages_total.unwrap_or(0),
            scopes.join(" ")
        );
        Ok(DoctorReport {
            summary,
            details: serde_json::json!({
                "account": account.id,
                "email": profile.email_address,
                "permanent_delete": scopes.iter().any(|s| s == SCOPE_FULL),
                "scopes": scopes,
                "messages": profile.messages_total,
                "api_base": settings.api_base,
            }),
        })
    }
}
