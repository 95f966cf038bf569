//! Authorization for Gmail: authorization code + PKCE (S256) with a loopback redirect
//! listener, refresh, and the mapping of a dead grant to `auth_required`.
//!
//! Architecture Invariant: tokens never reach a log line, an error message or stdout. The
//! authorization URL (which holds no secret) is the only thing printed, on stderr.

use mailbroker_core::{Consent, Error, Result};
use mailbroker_oauth::browser::Refused;
pub use mailbroker_oauth::{Tokens, expired};
use mailbroker_oauth::{http, send, token_error, tokens_of};
use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, ClientId, ClientSecret, EndpointNotSet, EndpointSet, RedirectUrl, RefreshToken,
    TokenUrl,
};
use serde::{Deserialize, Serialize};

pub const SCOPE_MODIFY: &str = "https://www.googleapis.com/auth/gmail.modify";
pub const SCOPE_FULL: &str = "https://mail.google.com/";
pub const GOOGLE_AUTH_URL: &str = "https://accounts.google.com/o/oauth2/v2/auth";
pub const GOOGLE_TOKEN_URL: &str = "https://oauth2.googleapis.com/token";
pub const GOOGLE_API_BASE: &str = "https://gmail.googleapis.com";

/// Where to authorize and which client to present; stored with the account (no secret).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OAuthSettings {
    pub client_id: String,
    pub auth_url: String,
    pub token_url: String,
    pub api_base: String,
    /// Gmail's per-user quota in units per second (Google's default is 250; a Workspace admin
    /// may have a raised one, and the mock has none).
    #[serde(default = "default_quota")]
    pub quota_units_per_sec: u32,
}

pub const DEFAULT_QUOTA: u32 = 250;

fn default_quota() -> u32 {
    DEFAULT_QUOTA
}

type Client = BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

fn client(
    settings: &OAuthSettings,
    secret: Option<&str>,
    redirect: Option<&str>,
) -> Result<Client> {
    let bad = |what: &str, e: String| Error::validation(format!("{what} is not a valid URL: {e}"));
    let mut c = BasicClient::new(ClientId::new(settings.client_id.clone()))
        .set_auth_uri(
            AuthUrl::new(settings.auth_url.clone())
                .map_err(|e| bad("--auth-url", e.to_string()))?,
        )
        .set_token_uri(
            TokenUrl::new(settings.token_url.clone())
                .map_err(|e| bad("--token-url", e.to_string()))?,
        );
    if let Some(s) = secret {
        c = c.set_client_secret(ClientSecret::new(s.to_string()));
    }
    if let Some(r) = redirect {
        c = c.set_redirect_uri(
            RedirectUrl::new(r.to_string()).map_err(|e| bad("redirect", e.to_string()))?,
        );
    }
    Ok(c)
}

/// Runs the authorization code flow with PKCE; the user consents in a browser. Google gives
/// a refresh token only when asked for offline access, and again only with a fresh consent.
pub async fn authorize(
    settings: &OAuthSettings,
    secret: Option<&str>,
    scopes: &[&str],
    how: Consent,
    account: &str,
) -> Result<Tokens> {
    let oauth = client(settings, secret, None)?;
    let extra = [("access_type", "offline"), ("prompt", "consent")];
    let mut tokens = mailbroker_oauth::browser::authorize(oauth, scopes, &extra, how, account)
        .await
        .map_err(|e| match e {
            Refused::Grant(e) => token_error(e, account),
            Refused::Other(e) => e,
        })?;
    if tokens.scopes.is_empty() {
        tokens.scopes = scopes.iter().map(|s| s.to_string()).collect();
    }
    if let Some(secret) = secret {
        mailbroker_core::secrets::register(secret);
        tokens.client_secret = Some(secret.to_string());
    }
    Ok(tokens)
}

/// A fresh access token from the refresh token; a refused grant is `auth_required`.
pub async fn refresh(settings: &OAuthSettings, tokens: &Tokens, account: &str) -> Result<Tokens> {
    let oauth = client(settings, tokens.client_secret.as_deref(), None)?;
    let response = oauth
        .exchange_refresh_token(&RefreshToken::new(tokens.refresh_token.clone()))
        .request_async(&send(http()?))
        .await
        .map_err(|e| token_error(e, account))?;
    let mut fresh = tokens_of(
        &response,
        Some(&tokens.refresh_token),
        tokens.client_secret.as_deref(),
    )?;
    if fresh.scopes.is_empty() {
        fresh.scopes = tokens.scopes.clone();
    }
    Ok(fresh)
}
