//! Authorization for Gmail: authorization code + PKCE (S256) with a loopback redirect
//! listener, refresh, and the mapping of a dead grant to `auth_required`.
//!
//! Architecture Invariant: tokens never reach a log line, an error message or stdout. The
//! authorization URL (which holds no secret) is the only thing printed, on stderr.

use mailbroker_core::{Consent, Error, Result};
use mailbroker_oauth::browser::Refused;
pub use mailbroker_oauth::{Tokens, expired};
use mailbroker_oauth::{http, send, tokens_of};
use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, ClientId, ClientSecret, EndpointNotSet, EndpointSet, RedirectUrl, RefreshToken,
    TokenUrl,
};
use serde::{Deserialize, Serialize};

pub const SCOPE_MODIFY: &str = "https://www.googleapis.com/auth/gmail.modify";
pub const SCOPE_FULL: &str = "https://mail.google.com/";
/// What a filter's create and delete need (`users.settings.filters`): asked for only when a
/// person turns rules on for the account (`account upgrade-scope ID --rules`).
pub const SCOPE_SETTINGS: &str = "https://www.googleapis.com/auth/gmail.settings.basic";
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

impl OAuthSettings {
    /// Refuses an endpoint the client secret, a code or a token may not go to
    /// (`mailbroker_core::endpoint`): plain http to another host, a user name in the URL.
    pub fn check_endpoints(&self) -> Result<()> {
        use mailbroker_core::endpoint::credential_url;
        credential_url("--auth-url", &self.auth_url)?;
        credential_url("--token-url", &self.token_url)?;
        credential_url("--api-base", &self.api_base)?;
        Ok(())
    }
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

/// An OAuth client as Google's console gives it: the JSON file downloaded from APIs &
/// Services > Credentials (`client_secret_….json`), `installed` for a Desktop app client,
/// `web` for a web application client.
#[derive(Debug, Clone)]
pub struct ClientFile {
    pub client_id: String,
    pub client_secret: String,
}

impl ClientFile {
    pub fn parse(text: &str) -> Result<ClientFile> {
        let bad = |why: &str| {
            Error::validation(format!("not a Google OAuth client file: {why}")).with_next_step(
                "download the client's JSON from the Google Cloud console (APIs & Services > \
                 Credentials, the download button of the Desktop app client)",
            )
        };
        let json: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(&format!("not JSON ({e})")))?;
        let client = json
            .get("installed")
            .or_else(|| json.get("web"))
            .ok_or_else(|| bad("it has neither \"installed\" nor \"web\""))?;
        let field = |k: &str| {
            client[k]
                .as_str()
                .filter(|v| !v.trim().is_empty())
                .map(|v| v.trim().to_string())
                .ok_or_else(|| bad(&format!("it has no {k}")))
        };
        let file = ClientFile {
            client_id: field("client_id")?,
            client_secret: field("client_secret")?,
        };
        mailbroker_core::secrets::register(&file.client_secret);
        Ok(file)
    }
}

/// A refusal of Google's token endpoint in our terms. What is wrong with the client (its
/// secret missing or wrong, an unknown id) is said so, with how to pass the client file: a
/// new sign-in would fail the same way. A dead grant is `auth_required`; Google expires the
/// refresh tokens of an app whose consent screen is in Testing after 7 days, the likeliest
/// cause for a person's own project.
fn refused<RE: std::error::Error + 'static>(
    e: oauth2::RequestTokenError<RE, oauth2::basic::BasicErrorResponse>,
    account: &str,
    refreshing: bool,
) -> Error {
    use oauth2::basic::BasicErrorResponseType as Kind;
    let oauth2::RequestTokenError::ServerResponse(r) = e else {
        return mailbroker_oauth::token_error(e, account);
    };
    let said = r
        .error_description()
        .map_or(String::new(), |d| format!(" ({d})"));
    let client_file = "sign in with the client file Google gave you: mailbroker account add \
        gmail --credentials client_secret_….json (APIs & Services > Credentials in the Google \
        Cloud console; docs/setup-google.md)";
    match r.error() {
        Kind::InvalidRequest if said.contains("client_secret") => Error::validation(format!(
            "Google needs this OAuth client's secret{said}: a Desktop app client has one"
        ))
        .with_next_step(client_file),
        Kind::InvalidClient | Kind::UnauthorizedClient => Error::validation(format!(
            "Google does not accept this OAuth client{said}: its id or secret is wrong, or it \
             was deleted"
        ))
        .with_next_step(client_file),
        Kind::InvalidGrant if refreshing => Error::auth_required(format!(
            "Google refused the stored sign-in{said}"
        ))
        .with_next_step(format!(
            "run: mailbroker account login {account} (an app whose OAuth consent screen is in \
             Testing must sign in again every 7 days; publish it to stop that)"
        )),
        _ => mailbroker_oauth::token_error(
            oauth2::RequestTokenError::<RE, _>::ServerResponse(r),
            account,
        ),
    }
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
            Refused::Grant(e) => refused(e, account, false),
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
        .map_err(|e| refused(e, account, true))?;
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
