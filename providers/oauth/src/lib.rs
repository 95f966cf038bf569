//! OAuth shared by the cloud adapters: the `oauth2` crate's HTTP seam over our reqwest, the
//! tokens an account keeps as its secret, and how a refused grant reads.
//!
//! Architecture Invariant: every token that passes through here is registered with
//! `mailbroker_core::secrets`, so no log line or error can print it.

pub mod browser;

use std::future::Future;
use std::pin::Pin;

use mailbroker_core::{Error, Result};
use oauth2::TokenResponse;
use serde::{Deserialize, Serialize};

/// What the account keeps as its secret.
#[derive(Clone, Serialize, Deserialize)]
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: String,
    /// Seconds since the epoch.
    pub expires_at: i64,
    pub scopes: Vec<String>,
    /// The client secret, when the client has one (installed apps often do).
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// oauth2's HTTP seam over our reqwest; redirects are never followed (a token endpoint that
/// redirects is misconfigured, and following could leak the code).
pub fn http() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| Error::internal(format!("http client: {e}")))
}

pub type HttpFuture =
    Pin<Box<dyn Future<Output = std::result::Result<oauth2::HttpResponse, HttpError>> + Send>>;

#[derive(Debug)]
pub struct HttpError(String);

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HttpError {}

pub fn send(client: reqwest::Client) -> impl Fn(oauth2::HttpRequest) -> HttpFuture {
    move |request: oauth2::HttpRequest| {
        let client = client.clone();
        Box::pin(async move {
            let request =
                reqwest::Request::try_from(request).map_err(|e| HttpError(e.to_string()))?;
            let response = client
                .execute(request)
                .await
                .map_err(|e| HttpError(e.to_string()))?;
            let mut out = http::Response::builder().status(response.status());
            for (k, v) in response.headers() {
                out = out.header(k, v);
            }
            let body = response
                .bytes()
                .await
                .map_err(|e| HttpError(e.to_string()))?;
            out.body(body.to_vec())
                .map_err(|e| HttpError(e.to_string()))
        })
    }
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

pub fn tokens_of(
    response: &oauth2::basic::BasicTokenResponse,
    refresh_fallback: Option<&str>,
    secret: Option<&str>,
) -> Result<Tokens> {
    let refresh = response
        .refresh_token()
        .map(|r| r.secret().clone())
        .or_else(|| refresh_fallback.map(str::to_string))
        .ok_or_else(|| Error::auth_required("the authorization server gave no refresh token"))?;
    for secret in [
        Some(response.access_token().secret().as_str()),
        Some(refresh.as_str()),
        secret,
    ]
    .into_iter()
    .flatten()
    {
        mailbroker_core::secrets::register(secret);
    }
    Ok(Tokens {
        access_token: response.access_token().secret().clone(),
        refresh_token: refresh,
        expires_at: now() + response.expires_in().map_or(3600, |d| d.as_secs() as i64),
        scopes: response
            .scopes()
            .map(|s| s.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default(),
        client_secret: secret.map(str::to_string),
    })
}

/// Maps a token endpoint failure: a refused grant means the user must authorize again.
pub fn token_error<RE: std::error::Error + 'static>(
    e: oauth2::RequestTokenError<RE, oauth2::basic::BasicErrorResponse>,
    account: &str,
) -> Error {
    match e {
        oauth2::RequestTokenError::ServerResponse(r) => {
            Error::auth_required(format!("the authorization server refused: {}", r.error()))
                .with_next_step(format!("run: mailbroker account login {account}"))
        }
        other => Error::provider_unavailable(format!("token endpoint: {other}")),
    }
}

/// Whether the access token should be refreshed before use (a minute of margin).
pub fn expired(tokens: &Tokens) -> bool {
    tokens.expires_at <= now() + 60
}

/// The kind under which an account keeps its tokens as its secret.
pub const SECRET_KIND: &str = "oauth";

/// Tokens as the account's secret holds them.
pub fn encode(tokens: &Tokens) -> Result<String> {
    serde_json::to_string(tokens).map_err(|e| Error::internal(format!("tokens: {e}")))
}

/// The account's settings (the provider's own type) and its stored tokens, refreshed by
/// `refresh` (the provider's refresh grant) and stored again first when the access token
/// has expired.
pub async fn access_token<S>(
    account: &mailbroker_core::AccountInfo<'_>,
    secrets: &dyn mailbroker_core::Secrets,
    refresh: impl AsyncFnOnce(&S, &Tokens, &str) -> Result<Tokens>,
) -> Result<(S, Tokens)>
where
    S: serde::de::DeserializeOwned,
{
    let settings: S = account.settings()?;
    let id = account.id.as_str();
    let stored: Tokens = serde_json::from_str(&secrets.get(SECRET_KIND).await?)
        .map_err(|e| Error::internal(format!("account {id}: bad stored tokens: {e}")))?;
    if !expired(&stored) {
        return Ok((settings, stored));
    }
    let fresh = refresh(&settings, &stored, id).await?;
    secrets.set(SECRET_KIND, &encode(&fresh)?).await?;
    Ok((settings, fresh))
}
