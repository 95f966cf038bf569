//! Authorization for Gmail: authorization code + PKCE (S256) with a loopback redirect
//! listener, refresh, and the mapping of a dead grant to `auth_required`.
//!
//! Architecture Invariant: tokens never reach a log line, an error message or stdout. The
//! authorization URL (which holds no secret) is the only thing printed, on stderr.

use mailbroker_core::{Error, Result};
pub use mailbroker_oauth::{Tokens, expired};
use mailbroker_oauth::{http, send, token_error, tokens_of};
use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet, EndpointSet,
    PkceCodeChallenge, RedirectUrl, RefreshToken, Scope, TokenUrl,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// How the browser's redirect reaches us.
pub enum Redirect {
    /// Only the loopback listener.
    Listener,
    /// The listener, or the final URL pasted on stdin (headless machines).
    ListenerOrPasted,
}

/// Runs the authorization code flow with PKCE; the user consents in a browser.
pub async fn authorize(
    settings: &OAuthSettings,
    secret: Option<&str>,
    scopes: &[&str],
    redirect: Redirect,
    open_browser: bool,
    account: &str,
) -> Result<Tokens> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Error::internal(format!("cannot listen for the redirect: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::internal(e.to_string()))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/");
    let oauth = client(settings, secret, Some(&redirect_uri))?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state) = oauth
        .authorize_url(CsrfToken::new_random)
        .add_scopes(scopes.iter().map(|s| Scope::new(s.to_string())))
        .add_extra_param("access_type", "offline")
        .add_extra_param("prompt", "consent")
        .set_pkce_challenge(challenge)
        .url();
    eprintln!("Authorize mailbroker in your browser; if it does not open, visit:");
    eprintln!("{url}");
    if open_browser {
        let _ = std::process::Command::new("xdg-open")
            .arg(url.as_str())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
    if matches!(redirect, Redirect::ListenerOrPasted) {
        eprintln!("(or paste the address the browser ended on, then Enter)");
    }
    let landed =
        wait_for_redirect(&listener, matches!(redirect, Redirect::ListenerOrPasted)).await?;
    let query: Vec<(String, String)> = url::Url::parse(&landed)
        .map_err(|e| Error::validation(format!("not a redirect URL: {e}")))?
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let get = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if let Some(error) = get("error") {
        return Err(
            Error::auth_required(format!("authorization was refused: {error}"))
                .with_next_step(format!("run: mailbroker account login {account}")),
        );
    }
    if get("state").as_deref() != Some(state.secret().as_str()) {
        return Err(
            Error::auth_required("the redirect's state does not match this request")
                .with_next_step(format!("run: mailbroker account login {account}")),
        );
    }
    let code = get("code").ok_or_else(|| Error::auth_required("the redirect carried no code"))?;
    let response = oauth
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(verifier)
        .request_async(&send(http()?))
        .await
        .map_err(|e| token_error(e, account))?;
    let mut tokens = tokens_of(&response, None, secret)?;
    if tokens.scopes.is_empty() {
        tokens.scopes = scopes.iter().map(|s| s.to_string()).collect();
    }
    Ok(tokens)
}

/// The URL the browser was sent to: from the listener, or pasted on stdin.
async fn wait_for_redirect(listener: &tokio::net::TcpListener, pasted: bool) -> Result<String> {
    let from_listener = async {
        loop {
            let (mut socket, _) = listener
                .accept()
                .await
                .map_err(|e| Error::internal(format!("redirect listener: {e}")))?;
            let mut buf = vec![0u8; 8192];
            let n = socket.read(&mut buf).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).to_string();
            let Some(path) = head.split_whitespace().nth(1).map(str::to_string) else {
                continue;
            };
            let body = "mailbroker: authorization received; you can close this window.\n";
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(reply.as_bytes()).await;
            if path.contains("code=") || path.contains("error=") {
                return Ok::<String, Error>(format!("http://127.0.0.1{path}"));
            }
        }
    };
    if !pasted {
        return from_listener.await;
    }
    // A plain thread, not tokio's stdin: a blocked read must not keep the process alive
    // once the browser's redirect has arrived.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(1);
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::stdin().lock().lines().map_while(|l| l.ok()) {
            if line.trim().starts_with("http") && tx.blocking_send(line.trim().to_string()).is_err()
            {
                return;
            }
        }
    });
    let from_stdin = async {
        match rx.recv().await {
            Some(url) => Ok::<String, Error>(url),
            // stdin closed without a URL: keep waiting for the browser.
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        r = from_listener => r,
        r = from_stdin => r,
    }
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
