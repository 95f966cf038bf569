//! The authorization code flow with PKCE (S256) and a loopback redirect (RFC 8252): the
//! person consents in a browser, which is sent back to a listener on 127.0.0.1; on a
//! headless machine the address the browser ended on can be pasted instead.
//!
//! Architecture Invariant: only the authorization URL (no secret) is printed, on stderr.

use mailbroker_core::{Consent, Error, Result};
use oauth2::basic::{BasicClient, BasicErrorResponse};
use oauth2::{
    AuthorizationCode, CsrfToken, EndpointNotSet, EndpointSet, PkceCodeChallenge, RedirectUrl,
    RequestTokenError, Scope,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{HttpError, Tokens, http, send, tokens_of};

/// A client with an authorization and a token endpoint.
pub type AuthClient =
    BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// Why no tokens came: the token endpoint refused the code (each provider reads its own
/// refusals), or anything else, already in our vocabulary.
pub enum Refused {
    Grant(RequestTokenError<HttpError, BasicErrorResponse>),
    Other(Error),
}

impl From<Error> for Refused {
    fn from(e: Error) -> Refused {
        Refused::Other(e)
    }
}

/// Runs the flow for `scopes` with the provider's `extra` authorization parameters.
pub async fn authorize(
    oauth: AuthClient,
    scopes: &[&str],
    extra: &[(&str, &str)],
    how: Consent,
    account: &str,
) -> std::result::Result<Tokens, Refused> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Error::internal(format!("cannot listen for the redirect: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::internal(e.to_string()))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/");
    let oauth = oauth.set_redirect_uri(
        RedirectUrl::new(redirect_uri).map_err(|e| Error::internal(e.to_string()))?,
    );
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = oauth
        .authorize_url(CsrfToken::new_random)
        .add_scopes(scopes.iter().map(|s| Scope::new(s.to_string())))
        .set_pkce_challenge(challenge);
    for (k, v) in extra {
        request = request.add_extra_param(*k, *v);
    }
    let (url, state) = request.url();
    eprintln!("Authorize mailbroker in your browser; if it does not open, visit:");
    eprintln!("{url}");
    if how.open_browser {
        let _ = std::process::Command::new("xdg-open")
            .arg(url.as_str())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
    if how.paste {
        eprintln!("(or paste the address the browser ended on, then Enter)");
    }
    let landed = tokio::time::timeout(
        SIGN_IN_WAIT,
        wait_for_redirect(&listener, how.paste, state.secret()),
    )
    .await
    .map_err(|_| {
        Error::auth_required(format!(
            "no authorization came back within {} minutes",
            SIGN_IN_WAIT.as_secs() / 60
        ))
        .with_next_step(format!("run: mailbroker account login {account}"))
    })??;
    let code = code_of(&landed, state.secret(), account)?;
    let response = oauth
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(verifier)
        .request_async(&send(http()?))
        .await
        .map_err(Refused::Grant)?;
    Ok(tokens_of(&response, None, None)?)
}

/// How long the person has to sign in at the browser.
const SIGN_IN_WAIT: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Whether the redirect at `landed` answers this sign-in: it carries the state this request
/// drew. Anything else that reaches the listener (another page on this machine, a stale
/// tab) is not ours and must neither end nor abort the sign-in.
fn answers(landed: &str, state: &str) -> bool {
    url::Url::parse(landed).is_ok_and(|u| {
        u.query_pairs()
            .any(|(k, v)| k == "state" && v.as_ref() == state)
    })
}

/// The code the redirect carried, once its state is checked; a refusal is `auth_required`.
fn code_of(landed: &str, state: &str, account: &str) -> Result<String> {
    let query: Vec<(String, String)> = url::Url::parse(landed)
        .map_err(|e| Error::validation(format!("not a redirect URL: {e}")))?
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let get = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let again = format!("run: mailbroker account login {account}");
    if let Some(error) = get("error") {
        return Err(
            Error::auth_required(format!("authorization was refused: {error}"))
                .with_next_step(again),
        );
    }
    if get("state").as_deref() != Some(state) {
        return Err(
            Error::auth_required("the redirect's state does not match this request")
                .with_next_step(again),
        );
    }
    get("code").ok_or_else(|| Error::auth_required("the redirect carried no code"))
}

/// The URL the browser was sent to with this request's `state`: from the listener, or
/// pasted on stdin. A request with another state is answered and ignored.
async fn wait_for_redirect(
    listener: &tokio::net::TcpListener,
    pasted: bool,
    state: &str,
) -> Result<String> {
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
            let landed = format!("http://127.0.0.1{path}");
            let ours = answers(&landed, state);
            let (status, body) = match ours {
                true => (
                    "200 OK",
                    "mailbroker: authorization received; you can close this window.\n",
                ),
                false => (
                    "400 Bad Request",
                    "mailbroker: this is not the sign-in mailbroker is waiting for.\n",
                ),
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(reply.as_bytes()).await;
            if ours {
                return Ok::<String, Error>(landed);
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
        while let Some(url) = rx.recv().await {
            if answers(&url, state) {
                return Ok::<String, Error>(url);
            }
            eprintln!("that address is not from this sign-in; paste the one the browser ended on");
        }
        // stdin closed without our URL: keep waiting for the browser.
        std::future::pending().await
    };
    tokio::select! {
        r = from_listener => r,
        r = from_stdin => r,
    }
}
