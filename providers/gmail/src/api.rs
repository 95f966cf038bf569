//! The few Gmail API calls account setup needs (labels, profile), with Google's errors mapped
//! to ours. The synced provider will use the generated client; these stay small on purpose.

use mailbroker_core::{Error, MailboxInfo, Result, Role};
use serde::Deserialize;

use crate::oauth::OAuthSettings;

#[derive(Debug, Clone, Deserialize)]
pub struct Label {
    pub id: String,
    pub name: String,
    #[serde(rename = "type", default)]
    pub kind: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    pub email_address: String,
    pub messages_total: Option<u64>,
    pub history_id: String,
}

/// Google's error to ours; `account` names the next step.
fn status_error(status: reqwest::StatusCode, body: &str, account: &str) -> Error {
    let reason = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| status.to_string());
    match status.as_u16() {
        401 => Error::auth_required(format!("Gmail refused the token: {reason}"))
            .with_next_step(format!("run: mailbroker account login {account}")),
        403 => Error::insufficient_scope(format!("Gmail refused: {reason}"))
            .with_next_step(format!("run: mailbroker account upgrade-scope {account}")),
        404 => Error::not_found(format!("Gmail: {reason}")),
        429 => Error::rate_limited(format!("Gmail: {reason}")).with_next_step("retry in a minute"),
        s if s >= 500 => Error::provider_unavailable(format!("Gmail: {reason}")),
        _ => Error::provider_write_failed(format!("Gmail: {reason}")),
    }
}

async fn get<T: serde::de::DeserializeOwned>(
    settings: &OAuthSettings,
    access: &str,
    path: &str,
    account: &str,
) -> Result<T> {
    let url = format!(
        "{}/gmail/v1/users/me/{path}",
        settings.api_base.trim_end_matches('/')
    );
    let response = reqwest::Client::new()
        .get(&url)
        .bearer_auth(access)
        .send()
        .await
        .map_err(|e| {
            Error::provider_unavailable(format!("Gmail API at {}: {e}", settings.api_base))
        })?;
    let status = response.status();
    let body = response
        .text()
        .await
        .map_err(|e| Error::provider_unavailable(format!("Gmail API: {e}")))?;
    if !status.is_success() {
        return Err(status_error(status, &body, account));
    }
    serde_json::from_str(&body)
        .map_err(|e| Error::provider_unavailable(format!("Gmail API answer: {e}")))
}

pub async fn labels(settings: &OAuthSettings, access: &str, account: &str) -> Result<Vec<Label>> {
    #[derive(Deserialize)]
    struct List {
        #[serde(default)]
        labels: Vec<Label>,
    }
    Ok(get::<List>(settings, access, "labels", account)
        .await?
        .labels)
}

pub async fn profile(settings: &OAuthSettings, access: &str, account: &str) -> Result<Profile> {
    get(settings, access, "profile", account).await
}

/// System labels that act as mailboxes, with their roles. User labels are tags, not places.
pub fn mailboxes(labels: &[Label]) -> Vec<MailboxInfo> {
    let role = |id: &str| match id {
        "INBOX" => Some(Role::Inbox),
        "SPAM" => Some(Role::Junk),
        "TRASH" => Some(Role::Trash),
        "SENT" => Some(Role::Sent),
        "DRAFT" => Some(Role::Drafts),
        _ => None,
    };
    labels
        .iter()
        .filter_map(|l| {
            role(&l.id).map(|r| MailboxInfo {
                name: l.name.clone(),
                role: Some(r),
                delimiter: None,
                selectable: true,
            })
        })
        .collect()
}
