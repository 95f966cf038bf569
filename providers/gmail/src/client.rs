//! One account's HTTP session with the Gmail API: the access token (refreshed once, for every
//! caller, when Gmail refuses it), the per-user quota as a token bucket, retries with backoff
//! and jitter that honour Retry-After, and the line between "not sent" and "sent, no answer".
//!
//! Reads are retried freely. A write is retried only when Gmail said it did nothing (429, a
//! rate-limit 403, a refused token); a write whose answer never arrived, or that failed on
//! Gmail's side (5xx), is `outcome_unknown` and is never resent from here: the caller re-reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mailbroker_core::{Error, Result};
use serde::de::DeserializeOwned;
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

pub struct Client {
    http: reqwest::Client,
    settings: OAuthSettings,
    account: String,
    tokens: Mutex<Tokens>,
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

impl Client {
    pub fn new(settings: OAuthSettings, tokens: Tokens, account: &str) -> Result<Arc<Client>> {
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| Error::internal(format!("http client: {e}")))?;
        Ok(Arc::new(Client {
            http,
            quota: Quota::new(settings.quota_units_per_sec),
            settings,
            account: account.to_string(),
            tokens: Mutex::new(tokens),
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

    fn url(&self, path: &str) -> String {
        format!(
            "{}/gmail/v1/users/me/{path}",
            self.settings.api_base.trim_end_matches('/')
        )
    }

    pub async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
        units: u32,
    ) -> Result<T> {
        let body = self.call(Kind::Read, reqwest::Method::GET, path, query, None, units);
        parse(&body.await?)
    }

    /// A write. `Ok` means Gmail answered with success.
    pub async fn post(&self, path: &str, body: &serde_json::Value, units: u32) -> Result<String> {
        self.call(
            Kind::Write,
            reqwest::Method::POST,
            path,
            &[],
            Some(body),
            units,
        )
        .await
    }

    /// A read sent as POST (labels.create is a write, but harmless to repeat by name).
    pub async fn post_read<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
        units: u32,
    ) -> Result<T> {
        let answer = self.call(
            Kind::Read,
            reqwest::Method::POST,
            path,
            &[],
            Some(body),
            units,
        );
        parse(&answer.await?)
    }

    async fn call(
        &self,
        kind: Kind,
        method: reqwest::Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
        units: u32,
    ) -> Result<String> {
        let mut refreshed = false;
        let mut attempt = 0;
        loop {
            attempt += 1;
            tokio::time::sleep(self.quota.reserve(units)).await;
            let token = self.tokens.lock().await.access_token.clone();
            let mut request = self
                .http
                .request(method.clone(), self.url(path))
                .bearer_auth(&token)
                .query(query);
            if let Some(b) = body {
                request = request.json(b);
            }
            self.requests.fetch_add(1, Ordering::Relaxed);
            match self.attempt(kind, request, path).await? {
                Attempt::Done(text) => return Ok(text),
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
                    tracing::debug!(path, attempt, ?wait, "gmail: retrying after {error}");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    async fn attempt(
        &self,
        kind: Kind,
        request: reqwest::RequestBuilder,
        path: &str,
    ) -> Result<Attempt<String>> {
        let verb = path.split('?').next().unwrap_or(path);
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) if kind == Kind::Write && !e.is_connect() => {
                return Err(unknown(verb, &e.to_string()));
            }
            Err(e) => {
                let error = Error::provider_unavailable(format!("Gmail API {verb}: {e}"));
                return Ok(Attempt::Retry(self.backoff(1), error));
            }
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = match response.text().await {
            Ok(t) => t,
            Err(e) if kind == Kind::Write => return Err(unknown(verb, &e.to_string())),
            Err(e) => {
                let error = Error::provider_unavailable(format!("Gmail API {verb}: {e}"));
                return Ok(Attempt::Retry(self.backoff(1), error));
            }
        };
        if status.is_success() {
            return Ok(Attempt::Done(text));
        }
        let reason = GoogleError::parse(&text, status);
        if status.as_u16() == 401 {
            return Ok(Attempt::Refresh(reason.message));
        }
        if status.as_u16() == 429 || reason.is_rate_limit() {
            self.rate_limited.fetch_add(1, Ordering::Relaxed);
            let wait = retry_after.unwrap_or_else(|| self.backoff(2));
            let error = Error::rate_limited(format!("Gmail API {verb}: {}", reason.message))
                .with_next_step("wait a minute and run the request again");
            return Ok(Attempt::Retry(wait + jitter(wait), error));
        }
        if status.is_server_error() {
            if kind == Kind::Write {
                return Err(unknown(verb, &reason.message));
            }
            let error =
                Error::provider_unavailable(format!("Gmail API {verb}: {}", reason.message));
            return Ok(Attempt::Retry(self.backoff(3), error));
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

fn parse<T: DeserializeOwned>(body: &str) -> Result<T> {
    serde_json::from_str(body)
        .map_err(|e| Error::provider_unavailable(format!("Gmail API answer not understood: {e}")))
}

/// Google's error body: `{"error": {"code", "message", "errors": [{"reason"}]}}`.
struct GoogleError {
    message: String,
    reasons: Vec<String>,
}

impl GoogleError {
    fn parse(body: &str, status: reqwest::StatusCode) -> GoogleError {
        let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let message = v["error"]["message"]
            .as_str()
            .map_or_else(|| status.to_string(), str::to_string);
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

    fn into_error(self, status: reqwest::StatusCode, verb: &str, account: &str) -> Error {
        let message = format!("Gmail API {verb}: {}", self.message);
        match status.as_u16() {
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
        let body = r#"{"error":{"code":403,"message":"Rate Limit Exceeded",
            "errors":[{"reason":"userRateLimitExceeded"}]}}"#;
        assert!(GoogleError::parse(body, reqwest::StatusCode::FORBIDDEN).is_rate_limit());
        let body = r#"{"error":{"code":403,"message":"Insufficient Permission",
            "errors":[{"reason":"insufficientPermissions"}]}}"#;
        let e = GoogleError::parse(body, reqwest::StatusCode::FORBIDDEN);
        assert!(!e.is_rate_limit());
        let e = e.into_error(reqwest::StatusCode::FORBIDDEN, "batchDelete", "home");
        assert_eq!(e.error_type(), "insufficient_scope");
        assert!(e.to_string().contains("Insufficient Permission"));
    }
}
