//! One account's session with the Gmail API through the generated client (`google-gmail1`):
//! the access token (refreshed once, for every caller, when Gmail refuses it), the per-user
//! quota as a token bucket, retries with backoff and jitter that honour Retry-After, and the
//! line between "not sent" and "sent, no answer".
//!
//! Reads are retried freely. A write is retried only when Gmail said it did nothing (429, a
//! rate-limit 403, a refused token); a write whose answer never arrived, or that failed on
//! Gmail's side (5xx), is `outcome_unknown` and is never resent from here: the caller re-reads.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use google_gmail1::{Gmail, common, hyper_rustls};
use hyper_util::client::legacy::connect::HttpConnector;
use mailbroker_core::{Error, Result};
use tokio::sync::Mutex;

use crate::oauth::{self, OAuthSettings, Tokens};

/// Attempts per call before a retryable failure is reported.
const ATTEMPTS: u32 = 8;
/// First backoff step; doubles per attempt, with jitter, capped at `MAX_BACKOFF`.
const BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(32);
/// Longest Retry-After we wait for before giving up with `rate_limited`.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);
const TIMEOUT: Duration = Duration::from_secs(60);

/// The generated Gmail hub over rustls (aws-lc-rs, the web PKI roots; plain http only for a
/// loopback API base such as the mock).
pub type Hub = Gmail<hyper_rustls::HttpsConnector<HttpConnector>>;

/// A call as the generated client makes it: the hub, and the delegate that records a
/// failure's status and Retry-After.
pub type Call<'a, T> = Pin<Box<dyn Future<Output = google_gmail1::Result<T>> + Send + 'a>>;

/// Gmail's per-user quota as a token bucket (units per second, a second's worth of burst).
pub struct Quota {
    rate: f64,
    state: std::sync::Mutex<(f64, Instant)>,
}

impl Quota {
    pub fn new(units_per_sec: u32) -> Quota {
        let rate = f64::from(units_per_sec.max(1));
        Quota {
            rate,
            state: std::sync::Mutex::new((rate, Instant::now())),
        }
    }

    /// How long to wait before spending `units`; the units are spent (booked) at once, so
    /// concurrent callers queue behind each other.
    pub fn reserve(&self, units: u32) -> Duration {
        let Ok(mut s) = self.state.lock() else {
            return Duration::ZERO;
        };
        let now = Instant::now();
        let (level, at) = *s;
        let refilled = (level + now.duration_since(at).as_secs_f64() * self.rate).min(self.rate);
        let after = refilled - f64::from(units);
        *s = (after, now);
        if after >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-after / self.rate)
        }
    }
}

/// A call's verb, for errors and for the retry rule.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
}

/// The token the hub sends, shared with the refresher. The generated calls ask for their own
/// default scopes; the account's token has the scopes it was granted, so they are ignored.
#[derive(Clone)]
struct TokenCell(Arc<std::sync::Mutex<String>>);

impl common::GetToken for TokenCell {
    fn get_token<'a>(
        &'a self,
        _scopes: &'a [&str],
    ) -> Pin<
        Box<
            dyn Future<
                    Output = std::result::Result<
                        Option<String>,
                        Box<dyn std::error::Error + Send + Sync>,
                    >,
                > + Send
                + 'a,
        >,
    > {
        let token = self.0.lock().map(|t| t.clone()).ok();
        Box::pin(async move { Ok(token) })
    }
}

/// Records what a failed answer said, so the retry rule can see the status and Retry-After
/// (the generated client keeps only the JSON body otherwise).
#[derive(Default)]
pub struct Recorder {
    status: u16,
    retry_after: Option<Duration>,
    body: Option<serde_json::Value>,
}

impl common::Delegate for Recorder {
    fn http_failure(
        &mut self,
        response: &common::Response,
        err: Option<&serde_json::Value>,
    ) -> common::Retry {
        self.status = response.status().as_u16();
        self.retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        self.body = err.cloned();
        common::Retry::Abort
    }
}

pub struct Client {
    hub: Hub,
    settings: OAuthSettings,
    account: String,
    tokens: Mutex<Tokens>,
    sent_token: TokenCell,
    quota: Quota,
    requests: AtomicU64,
    rate_limited: AtomicU64,
}

/// What one attempt came to.
enum Attempt<T> {
    Done(T),
    /// Gmail did nothing; try again after this long.
    Retry(Duration, Error),
    /// The token was refused; refresh once and try again.
    Refresh(String),
}

fn hub(settings: &OAuthSettings, token: TokenCell) -> Result<Hub> {
    let roots = rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| Error::internal(format!("tls: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector);
    let mut hub = Gmail::new(client, token);
    let base = format!("{}/", settings.api_base.trim_end_matches('/'));
    hub.base_url(base.clone());
    hub.root_url(base);
    Ok(hub)
}

impl Client {
    pub fn new(settings: OAuthSettings, tokens: Tokens, account: &str) -> Result<Arc<Client>> {
        let sent_token = TokenCell(Arc::new(std::sync::Mutex::new(tokens.access_token.clone())));
        Ok(Arc::new(Client {
            hub: hub(&settings, sent_token.clone())?,
            quota: Quota::new(settings.quota_units_per_sec),
            settings,
            account: account.to_string(),
            tokens: Mutex::new(tokens),
            sent_token,
            requests: AtomicU64::new(0),
            rate_limited: AtomicU64::new(0),
        }))
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// How many answers so far were rate limits (429 or a rate-limit 403).
    pub fn rate_limited(&self) -> u64 {
        self.rate_limited.load(Ordering::Relaxed)
    }

    pub async fn scopes(&self) -> Vec<String> {
        self.tokens.lock().await.scopes.clone()
    }

    /// Runs one generated call (`call(hub, delegate)`) under the quota, with the retry rule
    /// for its `kind`. `units` is its quota cost, `verb` names it in errors.
    pub async fn call<T, F>(&self, kind: Kind, units: u32, verb: &str, call: F) -> Result<T>
    where
        F: for<'a> Fn(&'a Hub, &'a mut Recorder) -> Call<'a, T>,
    {
        let mut refreshed = false;
        let mut attempt = 0;
        loop {
            attempt += 1;
            tokio::time::sleep(self.quota.reserve(units)).await;
            let token = self.tokens.lock().await.access_token.clone();
            self.requests.fetch_add(1, Ordering::Relaxed);
            let mut recorder = Recorder::default();
            let answer = tokio::time::timeout(TIMEOUT, call(&self.hub, &mut recorder)).await;
            match self.judge(kind, verb, answer, recorder)? {
                Attempt::Done(value) => return Ok(value),
                Attempt::Refresh(reason) if !refreshed => {
                    refreshed = true;
                    self.refresh(&token, &reason).await?;
                }
                Attempt::Refresh(reason) => {
                    return Err(Error::auth_required(format!(
                        "Gmail refused a fresh token: {reason}"
                    ))
                    .with_next_step(format!("run: mailbroker account login {}", self.account)));
                }
                Attempt::Retry(wait, error) => {
                    if attempt >= ATTEMPTS || wait > MAX_RETRY_AFTER {
                        return Err(error);
                    }
                    tracing::debug!(verb, attempt, ?wait, "gmail: retrying after {error}");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// What one answer means: done, retry (nothing happened), refresh, or an error. A write
    /// that may have happened is `outcome_unknown`, never retried.
    fn judge<T>(
        &self,
        kind: Kind,
        verb: &str,
        answer: std::result::Result<google_gmail1::Result<T>, tokio::time::error::Elapsed>,
        recorder: Recorder,
    ) -> Result<Attempt<T>> {
        let transport = |what: String| -> Result<Attempt<T>> {
            match kind {
                Kind::Write => Err(unknown(verb, &what)),
                Kind::Read => {
                    let e = Error::provider_unavailable(format!("Gmail API {verb}: {what}"));
                    Ok(Attempt::Retry(self.backoff(1), e))
                }
            }
        };
        let error = match answer {
            Err(_) => return transport(format!("no answer in {} s", TIMEOUT.as_secs())),
            Ok(Ok(value)) => return Ok(Attempt::Done(value)),
            Ok(Err(e)) => e,
        };
        match error {
            google_gmail1::Error::HttpError(e) if e.is_connect() => {
                let e = Error::provider_unavailable(format!("Gmail API {verb}: {e}"));
                Ok(Attempt::Retry(self.backoff(1), e))
            }
            google_gmail1::Error::HttpError(e) => transport(e.to_string()),
            google_gmail1::Error::Io(e) => transport(e.to_string()),
            // A read whose body broke off arrives as undecodable JSON.
            google_gmail1::Error::JsonDecodeError(_, e) => transport(e.to_string()),
            google_gmail1::Error::BadRequest(_) | google_gmail1::Error::Failure(_) => {
                self.failure(kind, verb, recorder)
            }
            other => Err(Error::internal(format!("Gmail API {verb}: {other}"))),
        }
    }

    fn failure<T>(&self, kind: Kind, verb: &str, r: Recorder) -> Result<Attempt<T>> {
        let status = r.status;
        let reason = GoogleError::parse(r.body.as_ref(), status);
        if status == 401 {
            return Ok(Attempt::Refresh(reason.message));
        }
        if status == 429 || reason.is_rate_limit() {
            self.rate_limited.fetch_add(1, Ordering::Relaxed);
            let wait = r.retry_after.unwrap_or_else(|| self.backoff(2));
            let error = Error::rate_limited(format!("Gmail API {verb}: {}", reason.message))
                .with_next_step("wait a minute and run the request again");
            return Ok(Attempt::Retry(wait + jitter(wait), error));
        }
        if status >= 500 {
            let message = format!("Gmail API {verb}: {}", reason.message);
            return match kind {
                Kind::Write => Err(unknown(verb, &reason.message)),
                Kind::Read => Ok(Attempt::Retry(
                    self.backoff(3),
                    Error::provider_unavailable(message),
                )),
            };
        }
        Err(reason.into_error(status, verb, &self.account))
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let base = BACKOFF.saturating_mul(1 << attempt.min(8)).min(MAX_BACKOFF);
        base + jitter(base)
    }

    /// Refreshes the token unless another caller already did since `failed` was handed out.
    async fn refresh(&self, failed: &str, reason: &str) -> Result<()> {
        let mut tokens = self.tokens.lock().await;
        if tokens.access_token != failed {
            return Ok(());
        }
        tracing::debug!("gmail: access token refused ({reason}); refreshing");
        *tokens = oauth::refresh(&self.settings, &tokens, &self.account).await?;
        if let Ok(mut sent) = self.sent_token.0.lock() {
            sent.clone_from(&tokens.access_token);
        }
        Ok(())
    }
}

/// Up to half of `base`, from the clock's nanoseconds: enough to spread retries apart.
fn jitter(base: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    base.mul_f64(f64::from(nanos % 1000) / 2000.0)
}

fn unknown(verb: &str, reason: &str) -> Error {
    Error::outcome_unknown(format!(
        "Gmail API {verb}: the write was sent but its answer was lost ({reason})"
    ))
    .with_next_step("run the request again: mailbroker re-reads the messages before writing")
}

/// Google's error body: `{"error": {"code", "message", "errors": [{"reason"}]}}`.
struct GoogleError {
    message: String,
    reasons: Vec<String>,
}

impl GoogleError {
    fn parse(body: Option<&serde_json::Value>, status: u16) -> GoogleError {
        let v = body.cloned().unwrap_or_default();
        let message = v["error"]["message"]
            .as_str()
            .map_or_else(|| format!("HTTP {status}"), str::to_string);
        let reasons = v["error"]["errors"]
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|e| e["reason"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        GoogleError { message, reasons }
    }

    fn is_rate_limit(&self) -> bool {
        self.reasons
            .iter()
            .any(|r| r == "userRateLimitExceeded" || r == "rateLimitExceeded")
    }

    fn into_error(self, status: u16, verb: &str, account: &str) -> Error {
        let message = format!("Gmail API {verb}: {}", self.message);
        match status {
            403 => Error::insufficient_scope(message)
                .with_next_step(format!("run: mailbroker account upgrade-scope {account}")),
            404 => Error::not_found(message),
            400 => Error::validation(message),
            _ => Error::provider_write_failed(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_books_units_ahead() {
        let q = Quota::new(100);
        assert_eq!(q.reserve(60), Duration::ZERO);
        // 40 units left; 60 more need 20 units of refill, about 0.2 s.
        let wait = q.reserve(60);
        assert!(
            wait > Duration::from_millis(150) && wait <= Duration::from_millis(200),
            "{wait:?}"
        );
        // The next caller queues behind the first.
        assert!(q.reserve(50) > wait);
    }

    #[test]
    fn google_errors_map_to_ours() {
        let body = serde_json::json!({"error": {"code": 403, "message": "Rate Limit Exceeded",
            "errors": [{"reason": "userRateLimitExceeded"}]}});
        assert!(GoogleError::parse(Some(&body), 403).is_rate_limit());
        let body = serde_json::json!({"error": {"code": 403, "message": "Insufficient Permission",
            "errors": [{"reason": "insufficientPermissions"}]}});
        let e = GoogleError::parse(Some(&body), 403);
        assert!(!e.is_rate_limit());
        let e = e.into_error(403, "batchDelete", "home");
        assert_eq!(e.error_type(), "insufficient_scope");
        assert!(e.to_string().contains("Insufficient Permission"));
    }
}
