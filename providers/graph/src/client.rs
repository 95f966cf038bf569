//! The HTTP side: a small typed client for exactly the Graph endpoints the adapter uses,
//! every request asking for immutable ids, every failure turned into our error vocabulary.

use std::sync::Arc;

use mailbroker_core::{Error, Result, Secrets};
use mailbroker_oauth::{SECRET_KIND, Tokens, encode};
use serde_json::Value;

use crate::oauth::GraphSettings;

/// Asked on every request: a message keeps its id when it moves (and so its index row).
const IMMUTABLE_IDS: &str = "IdType=\"ImmutableId\"";
/// How long, in all, one session waits on Graph's Retry-Afters (a throttled request, alone,
/// a `$batch` envelope or one inside it) before it reports what is still refused.
const MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(300);
/// The longest single wait a Retry-After is taken at.
const LONGEST_WAIT: u64 = 60;

pub struct Client {
    http: reqwest::Client,
    /// The Graph root, `https://graph.microsoft.com` or a mock's URL.
    base: String,
    /// The access token requests carry now.
    token: std::sync::Mutex<String>,
    /// How to renew it when Graph refuses it; `None` for a fixed token.
    renewal: Option<tokio::sync::Mutex<Renewal>>,
    account: String,
    /// HTTP requests sent (a `$batch` is one), for reports and benchmarks.
    sent: std::sync::atomic::AtomicU64,
    /// Time spent waiting on Retry-Afters so far, against `MAX_WAIT`.
    waited: std::sync::Mutex<std::time::Duration>,
}

/// What renews a refused access token: the account's settings, its tokens and where they
/// are kept (a rotated refresh token is stored before it is used).
pub struct Renewal {
    pub settings: GraphSettings,
    pub tokens: Tokens,
    pub secrets: Arc<dyn Secrets>,
}

/// One request inside a `$batch`: a url relative to `/v1.0/`.
#[derive(Debug, Clone)]
pub struct Inner {
    pub method: &'static str,
    pub url: String,
    pub body: Option<Value>,
    pub if_match: Option<String>,
}

/// Its answer: status (0 when there is none), body, `Retry-After`; or, when the call that
/// carried it failed as a whole (its answer lost, the token refused), that error.
#[derive(Debug, Clone)]
pub struct InnerAnswer {
    pub status: u16,
    pub body: Value,
    pub retry_after: Option<u64>,
    pub error: Option<Error>,
}

impl InnerAnswer {
    pub fn new(status: u16, body: Value) -> InnerAnswer {
        InnerAnswer {
            status,
            body,
            retry_after: None,
            error: None,
        }
    }

    /// The answer of a request whose call failed with `e`.
    pub fn failed(e: Error) -> InnerAnswer {
        InnerAnswer {
            error: Some(e),
            ..InnerAnswer::new(0, Value::Null)
        }
    }

    /// Whether the request may have been carried out although no answer says so.
    pub fn lost(&self) -> bool {
        self.error.as_ref().is_some_and(Error::is_unknown_outcome)
    }

    /// Why it brought no state, in our vocabulary: the call's error, else Graph's.
    pub fn error_of(&self) -> Error {
        match &self.error {
            Some(e) => e.clone(),
            None if self.status == 0 => {
                Error::outcome_unknown("graph: the $batch answer left this request out")
            }
            None => error_of(self.status, &self.body, self.retry_after, ""),
        }
    }
}

/// What a GET of a delta link may bring instead of a page: the link is void.
pub enum Page {
    Items(Value),
    Gone,
}

impl Client {
    pub fn new(base: &str, token: String, account: &str) -> Result<Client> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(120))
            .build()
            .map_err(|e| Error::internal(format!("graph http client: {e}")))?;
        Ok(Client {
            http,
            base: base.trim_end_matches('/').to_string(),
            token: std::sync::Mutex::new(token),
            renewal: None,
            account: account.to_string(),
            sent: std::sync::atomic::AtomicU64::new(0),
            waited: std::sync::Mutex::new(std::time::Duration::ZERO),
        })
    }

    /// Whether the session may still wait the `asked` Retry-After (seconds; 1 when Graph
    /// names none) before sending a refused request again, and how long; the wait is
    /// counted against `MAX_WAIT`.
    pub fn may_wait(&self, asked: Option<u64>) -> Option<std::time::Duration> {
        let wait = std::time::Duration::from_secs(asked.unwrap_or(1).clamp(1, LONGEST_WAIT));
        let mut waited = self
            .waited
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if *waited + wait > MAX_WAIT {
            return None;
        }
        *waited += wait;
        Some(wait)
    }

    /// A client for a signed-in account: its token is renewed when Graph refuses it.
    pub fn signed_in(base: &str, renewal: Renewal, account: &str) -> Result<Client> {
        let mut client = Client::new(base, renewal.tokens.access_token.clone(), account)?;
        client.renewal = Some(tokio::sync::Mutex::new(renewal));
        Ok(client)
    }

    fn current_token(&self) -> String {
        self.token
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Renews the access token after Graph refused `failed` (expired early, or revoked):
    /// once for all callers, since the one that renews holds the lock and the others find a
    /// token newer than theirs. False when there is nothing to renew with.
    async fn renew(&self, failed: &str) -> Result<bool> {
        let Some(renewal) = &self.renewal else {
            return Ok(false);
        };
        let mut r = renewal.lock().await;
        if r.tokens.access_token != failed {
            return Ok(true);
        }
        tracing::debug!("graph: access token refused; refreshing");
        let fresh = crate::oauth::refresh(&r.settings, &r.tokens, &self.account).await?;
        r.secrets.set(SECRET_KIND, &encode(&fresh)?).await?;
        *self
            .token
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = fresh.access_token.clone();
        r.tokens = fresh;
        Ok(true)
    }

    /// A URL under `/v1.0/` for `path` (`me/mailFolders`), or `path` itself when it is a
    /// link Graph handed out (nextLink, deltaLink).
    pub fn url(&self, path: &str) -> String {
        match path.starts_with("http") {
            true => path.to_string(),
            false => format!("{}/v1.0/{}", self.base, path.trim_start_matches('/')),
        }
    }

    /// HTTP requests sent so far.
    pub fn requests_sent(&self) -> u64 {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sends `method path` with the token and `Prefer: prefer` (and `body`), counted. A 401
    /// renews the token and sends once more, and a 429 or 503 (throttled, or busy) waits its
    /// Retry-After and sends again while the session's budget lasts: Graph applied nothing
    /// it refused either way. `failed` says what a transport failure means for this
    /// request.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        prefer: &str,
        body: Option<&Value>,
        failed: impl Fn(reqwest::Error) -> Error,
    ) -> Result<reqwest::Response> {
        let mut renewed = false;
        loop {
            let token = self.current_token();
            self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut request = self
                .http
                .request(method.clone(), self.url(path))
                .bearer_auth(&token)
                .header("Prefer", prefer);
            if let Some(body) = body {
                request = request.json(body);
            }
            let answer = request.send().await.map_err(&failed)?;
            let status = answer.status().as_u16();
            if matches!(status, 429 | 503) {
                match self.may_wait(retry_after(&answer)) {
                    Some(wait) => {
                        tracing::debug!(status, ?wait, "graph: throttled; waiting");
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    None => return Ok(answer),
                }
            }
            if status != 401 || renewed || !self.renew(&token).await? {
                return Ok(answer);
            }
            renewed = true;
        }
    }

    pub async fn get(&self, path: &str) -> Result<Value> {
        match self.get_page(path, None).await? {
            Page::Items(v) => Ok(v),
            Page::Gone => Err(Error::not_found(format!("graph: {path} is gone (410)"))),
        }
    }

    /// A GET that reports 410 Gone (a void delta link) as `Page::Gone`.
    pub async fn get_page(&self, path: &str, page_size: Option<usize>) -> Result<Page> {
        let mut prefer = IMMUTABLE_IDS.to_string();
        if let Some(n) = page_size {
            prefer.push_str(&format!(", odata.maxpagesize={n}"));
        }
        let sent = self
            .send(reqwest::Method::GET, path, &prefer, None, |e| {
                self.unreachable(e)
            })
            .await?;
        if sent.status().as_u16() == 410 {
            return Ok(Page::Gone);
        }
        self.json(sent).await.map(Page::Items)
    }

    /// The bytes a GET answers (a message's MIME source, `…/$value`); `None` for 404.
    pub async fn get_bytes(&self, path: &str) -> Result<Option<Vec<u8>>> {
        let sent = self
            .send(reqwest::Method::GET, path, IMMUTABLE_IDS, None, |e| {
                self.unreachable(e)
            })
            .await?;
        let status = sent.status().as_u16();
        if status == 404 {
            return Ok(None);
        }
        if !(200..300).contains(&status) {
            return self.json(sent).await.map(|_| None);
        }
        let bytes = sent.bytes().await.map_err(|e| self.unreachable(e))?;
        Ok(Some(bytes.to_vec()))
    }

    /// The account this session is of (for next steps).
    pub fn account(&self) -> &str {
        &self.account
    }

    /// Deletes what `path` names (204).
    pub async fn delete(&self, path: &str) -> Result<()> {
        let sent = self
            .send(reqwest::Method::DELETE, path, IMMUTABLE_IDS, None, |e| {
                self.unreachable(e)
            })
            .await?;
        match sent.status().as_u16() {
            204 => Ok(()),
            _ => self.json(sent).await.map(drop),
        }
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<Value> {
        self.write(reqwest::Method::POST, path, body).await
    }

    pub async fn patch(&self, path: &str, body: &Value) -> Result<Value> {
        self.write(reqwest::Method::PATCH, path, body).await
    }

    async fn write(&self, method: reqwest::Method, path: &str, body: &Value) -> Result<Value> {
        let sent = (self.send(method, path, IMMUTABLE_IDS, Some(body), |e| {
            self.unreachable(e)
        }))
        .await?;
        self.json(sent).await
    }

    /// One `$batch` call of at most 20 requests; the answers in the order of `requests`.
    /// A connection lost after the call was sent is `outcome_unknown`: some of its writes
    /// may have landed.
    pub async fn batch(&self, requests: &[Inner]) -> Result<Vec<InnerAnswer>> {
        let items: Vec<Value> = requests
            .iter()
            .enumerate()
            .map(|(n, r)| {
                let mut headers = serde_json::json!({ "Prefer": IMMUTABLE_IDS });
                if let Some(key) = &r.if_match {
                    headers["If-Match"] = key.clone().into();
                }
                if r.body.is_some() {
                    headers["Content-Type"] = "application/json".into();
                }
                let mut item = serde_json::json!({
                    "id": n.to_string(), "method": r.method, "url": r.url, "headers": headers,
                });
                if let Some(body) = &r.body {
                    item["body"] = body.clone();
                }
                item
            })
            .collect();
        let writes = requests.iter().any(|r| r.method != "GET");
        let batch = serde_json::json!({ "requests": items });
        let sent = self
            .send(
                reqwest::Method::POST,
                "$batch",
                IMMUTABLE_IDS,
                Some(&batch),
                |e| match writes && !e.is_connect() {
                    // Sent, perhaps received: its writes may have landed.
                    true => lost(),
                    false => self.unreachable(e),
                },
            )
            .await?;
        let status = sent.status().as_u16();
        let body: Value = match sent.json().await {
            Ok(v) => v,
            Err(_) if writes && (200..300).contains(&status) => return Err(lost()),
            Err(_) => Value::Null,
        };
        if !(200..300).contains(&status) {
            return Err(error_of(status, &body, None, &self.account));
        }
        let mut answers: Vec<InnerAnswer> = (0..requests.len())
            .map(|_| InnerAnswer::new(0, Value::Null))
            .collect();
        for r in body["responses"].as_array().into_iter().flatten() {
            let Some(n) = r["id"].as_str().and_then(|i| i.parse::<usize>().ok()) else {
                continue;
            };
            if let Some(slot) = answers.get_mut(n) {
                slot.status = r["status"].as_u64().unwrap_or(0) as u16;
                slot.body = r["body"].clone();
                slot.retry_after = r["headers"]["Retry-After"]
                    .as_str()
                    .and_then(|s| s.parse().ok());
            }
        }
        Ok(answers)
    }

    async fn json(&self, resp: reqwest::Response) -> Result<Value> {
        let status = resp.status().as_u16();
        let retry_after = retry_after(&resp);
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return Ok(body);
        }
        Err(error_of(status, &body, retry_after, &self.account))
    }

    fn unreachable(&self, e: reqwest::Error) -> Error {
        Error::provider_unavailable(format!("graph: {}", without_url(&e))).with_next_step(format!(
            "check the network, then run: mailbroker sync --account {}",
            self.account
        ))
    }
}

/// The seconds an answer's `Retry-After` asks for.
fn retry_after(resp: &reqwest::Response) -> Option<u64> {
    resp.headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// A `$batch` with writes whose answer was lost.
fn lost() -> Error {
    Error::outcome_unknown("graph: the answer to a $batch was lost; its writes may have landed")
        .with_next_step("run: mailbroker sync, then repeat the request; nothing is resent blindly")
}

/// reqwest's error text names the URL, which may carry a delta token: leave it out.
fn without_url(e: &reqwest::Error) -> String {
    let kind = match () {
        _ if e.is_timeout() => "the request timed out",
        _ if e.is_connect() => "could not connect",
        _ => "the request failed",
    };
    kind.to_string()
}

/// Graph's error envelope as our error: the status decides the kind, Graph's code and
/// message say what happened.
pub fn error_of(status: u16, body: &Value, retry_after: Option<u64>, account: &str) -> Error {
    let code = body["error"]["code"].as_str().unwrap_or("unknown");
    let message = body["error"]["message"].as_str().unwrap_or("");
    let text = format!("graph {status} {code}: {message}");
    match status {
        401 => Error::auth_required(text)
            .with_next_step(format!("run: mailbroker account login {account}")),
        403 => Error::insufficient_scope(text).with_next_step(format!(
            "run: mailbroker account login {account} and grant Mail.ReadWrite"
        )),
        404 => Error::not_found(text),
        412 => Error::stale_state(text).with_next_step("run: mailbroker sync, then retry"),
        429 => {
            let wait =
                retry_after.map_or(String::new(), |s| format!(" (Graph asks to wait {s} s)"));
            Error::rate_limited(format!("{text}{wait}")).with_next_step("retry later")
        }
        503 => Error::provider_unavailable(text).with_next_step("retry later"),
        _ => Error::provider_write_failed(text),
    }
}
