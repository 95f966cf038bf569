//! A stateful Gmail API server for tests and demos: labels, messages, history, OAuth with PKCE,
//! and faults a test switches on. Paths and shapes follow Google's discovery document
//! (`gmail.v1.json`); `tests/contract.rs` drives it with Google's own Python client and checks
//! every answer against that document.
//!
//! Not shipped. Control routes under `/_mock/` let a test seed mail, change labels "from
//! another client", set faults and read the request log.

mod api;
pub mod discovery;
mod drafts;
mod filters;
mod oauth;
mod parts;
mod state;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State as AxState;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

pub use filters::MAX_FILTERS;
use mailbroker_mock_server::contract::WireLog;
use state::State;
pub use state::{Logged, SCOPE_FULL, SCOPE_MODIFY, SCOPE_SETTINGS, TEST_CLIENT};

/// The client file Google's console downloads for the test client (a Desktop app client:
/// `installed`), pointing at the mock at `url`, as `account add gmail --credentials` reads it.
pub fn client_file(url: &str) -> serde_json::Value {
    json!({ "installed": {
        "client_id": TEST_CLIENT.0,
        "project_id": "mailbroker-mock",
        "auth_uri": format!("{url}/o/oauth2/v2/auth"),
        "token_uri": format!("{url}/token"),
        "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
        "client_secret": TEST_CLIENT.1,
        "redirect_uris": ["http://localhost"],
    }})
}

pub(crate) fn lock(state: &api::Shared) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running mock; stops when dropped, and then fails the test if any request carried what
/// Gmail's discovery document does not document (`mailbroker_mock_server::contract`).
pub struct GmailMock {
    pub url: String,
    state: api::Shared,
    wire: WireLog,
    _served: mailbroker_mock_server::Served,
}

/// A draft as the mock keeps it (`GmailMock::drafts`).
#[derive(Debug, Clone)]
pub struct MockDraft {
    pub id: String,
    pub message: String,
    pub thread: String,
    pub labels: Vec<String>,
    pub headers: Vec<(String, String)>,
    /// The message as Gmail would give it in `format=raw`.
    pub source: Vec<u8>,
}

impl MockDraft {
    /// Its header field `name`, each value.
    pub fn header(&self, name: &str) -> Vec<&str> {
        (self.headers.iter())
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

impl Drop for GmailMock {
    fn drop(&mut self) {
        self.wire.check();
    }
}

fn router(gate: api::Gate) -> axum::Router {
    let state = gate.state.clone();
    let user = "/gmail/v1/users/{user}";
    let api = axum::Router::new()
        .route(&format!("{user}/profile"), get(api::profile))
        .route(
            &format!("{user}/labels"),
            get(api::labels_list).post(api::labels_create),
        )
        .route(&format!("{user}/messages"), get(api::messages_list))
        .route(
            &format!("{user}/messages/batchModify"),
            post(api::messages_batch_modify),
        )
        .route(
            &format!("{user}/messages/batchDelete"),
            post(api::messages_batch_delete),
        )
        .route(&format!("{user}/messages/{{id}}"), get(api::messages_get))
        .route(
            &format!("{user}/messages/{{id}}/attachments/{{attachment}}"),
            get(parts::get),
        )
        .route(
            &format!("{user}/messages/{{id}}/modify"),
            post(api::messages_modify),
        )
        .route(
            &format!("{user}/messages/{{id}}/{{verb}}"),
            post(api::messages_trash),
        )
        .route(&format!("{user}/history"), get(api::history_list))
        .route(&format!("{user}/drafts"), post(drafts::create))
        .route(&format!("/upload{user}/drafts"), post(drafts::create))
        .route(
            &format!("{user}/drafts/{{id}}"),
            get(drafts::get).delete(drafts::delete),
        )
        .route(
            &format!("{user}/settings/filters"),
            get(filters::list).post(filters::create),
        )
        .route(
            &format!("{user}/settings/filters/{{id}}"),
            get(filters::get).delete(filters::delete),
        )
        // Any other path under the API is answered by the gate too: the discovery document
        // decides what it is (a method the mock lacks, or none of Gmail's).
        .fallback(|| async {
            api::error(
                axum::http::StatusCode::NOT_IMPLEMENTED,
                "notImplemented",
                "a documented method this mock does not serve",
            )
        })
        .layer(axum::middleware::from_fn_with_state(gate, api::authorize));
    axum::Router::new()
        .merge(api)
        .route("/o/oauth2/v2/auth", get(oauth::authorize))
        .route("/token", post(oauth::token))
        .route("/revoke", post(oauth::revoke))
        .route("/_mock/seed", post(control_seed))
        .route("/_mock/modify", post(control_modify))
        .route("/_mock/faults", post(control_faults))
        .route("/_mock/log", get(control_log))
        .route("/_mock/token", post(control_token))
        .route("/_mock/expire-history", post(control_expire_history))
        .route("/_mock/revoke-all", post(control_revoke_all))
        .with_state(state)
}

#[derive(Deserialize)]
struct Seed {
    count: usize,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default = "default_from")]
    from: String,
}

fn default_from() -> String {
    "news@shop.example".into()
}

async fn control_seed(
    AxState(state): AxState<api::Shared>,
    Json(seed): Json<Seed>,
) -> impl IntoResponse {
    let mut s = lock(&state);
    let ids = s.seed(seed.count, &seed.labels, &seed.from);
    Json(json!({ "ids": ids, "historyId": s.history_id.to_string() }))
}

#[derive(Deserialize)]
struct DirectModify {
    ids: Vec<String>,
    #[serde(default)]
    add: Vec<String>,
    #[serde(default)]
    remove: Vec<String>,
}

/// A label change "by another client": history records it like any other.
async fn control_modify(
    AxState(state): AxState<api::Shared>,
    Json(m): Json<DirectModify>,
) -> impl IntoResponse {
    let mut s = lock(&state);
    for id in &m.ids {
        s.modify(id, &m.add, &m.remove);
    }
    Json(json!({ "historyId": s.history_id.to_string() }))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct FaultSpec {
    rate_limit: f64,
    retry_after_secs: u64,
    errors: u32,
    drop_after_write: u32,
    expire_tokens: bool,
    /// Every refresh token dies, as Google expires them for an app in Testing after 7 days.
    expire_refresh_tokens: bool,
    token_ttl_secs: Option<u64>,
    latency_ms: u64,
}

async fn control_faults(
    AxState(state): AxState<api::Shared>,
    Json(f): Json<FaultSpec>,
) -> impl IntoResponse {
    let mut s = lock(&state);
    s.faults.rate_limit = f.rate_limit;
    s.faults.retry_after_secs = f.retry_after_secs;
    s.faults.errors = f.errors;
    s.faults.drop_after_write = f.drop_after_write;
    s.faults.latency = Duration::from_millis(f.latency_ms);
    if let Some(ttl) = f.token_ttl_secs {
        s.token_ttl = Duration::from_secs(ttl);
    }
    if f.expire_tokens {
        s.expire_tokens();
    }
    if f.expire_refresh_tokens {
        s.refresh_tokens.clear();
        s.expire_tokens();
    }
    Json(json!({ "ok": true }))
}

async fn control_log(AxState(state): AxState<api::Shared>) -> impl IntoResponse {
    Json(json!({ "requests": lock(&state).log }))
}

#[derive(Deserialize)]
struct TokenSpec {
    scopes: Vec<String>,
}

/// An access token without the OAuth dance, for tests of the API alone.
async fn control_token(
    AxState(state): AxState<api::Shared>,
    Json(t): Json<TokenSpec>,
) -> impl IntoResponse {
    let token = lock(&state).mint_token(t.scopes, None);
    Json(json!({ "access_token": token }))
}

/// The user revoked access (e.g. in their Google account): every grant and token dies.
async fn control_revoke_all(AxState(state): AxState<api::Shared>) -> impl IntoResponse {
    let mut s = lock(&state);
    s.refresh_tokens.clear();
    s.tokens.clear();
    Json(json!({ "ok": true }))
}

/// History before now is forgotten: an older startHistoryId gets 404.
async fn control_expire_history(AxState(state): AxState<api::Shared>) -> impl IntoResponse {
    let mut s = lock(&state);
    s.oldest_history = s.history_id;
    Json(json!({ "oldestHistoryId": s.oldest_history.to_string() }))
}

impl GmailMock {
    /// Starts on a free loopback port, in the current tokio runtime.
    pub async fn start(email: &str) -> std::io::Result<GmailMock> {
        let state: api::Shared = Arc::new(Mutex::new(State::new(email)));
        let wire = WireLog::default();
        let gate = api::Gate {
            state: state.clone(),
            discovery: discovery::v1()?,
            wire: wire.clone(),
        };
        let served = mailbroker_mock_server::bind().await?.serve(router(gate));
        Ok(GmailMock {
            url: served.url.clone(),
            state,
            wire,
            _served: served,
        })
    }

    /// What requests carried that Gmail's discovery document lacks (each was refused).
    pub fn wire(&self) -> &WireLog {
        &self.wire
    }

    /// The request log so far.
    pub fn requests(&self) -> Vec<Logged> {
        lock(&self.state).log.clone()
    }

    /// A grant as if the OAuth flow had run: (access token, refresh token) with these scopes.
    pub fn grant(&self, scopes: &[&str]) -> (String, String) {
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        let mut s = lock(&self.state);
        let refresh = format!("1//mock-{}", state::random_hex(16));
        s.refresh_tokens.insert(refresh.clone(), scopes.clone());
        let access = s.mint_token(scopes, Some(refresh.clone()));
        (access, refresh)
    }

    /// How many times a refresh token was exchanged for an access token.
    pub fn refreshes(&self) -> u64 {
        lock(&self.state).refreshes
    }

    /// Every access token expires now (as `/_mock/faults` `expire_tokens`).
    pub fn expire_tokens(&self) {
        lock(&self.state).expire_tokens();
    }

    /// The user's filters as Gmail keeps them (`users.settings.filters`), by id.
    pub fn filters(&self) -> Vec<serde_json::Value> {
        lock(&self.state).filters.values().cloned().collect()
    }

    /// Gives the user `count` more filters of their own (each starring mail from another
    /// sender), as if made in Gmail's settings.
    pub fn add_filters(&self, count: usize) {
        let mut s = lock(&self.state);
        for _ in 0..count {
            s.next_filter += 1;
            let id = format!("ANe1Bmj{:08x}", s.next_filter);
            let filter = serde_json::json!({"id": id,
                "criteria": {"from": format!("person{}@example.org", s.next_filter)},
                "action": {"addLabelIds": ["STARRED"]}});
            s.filters.insert(id, filter);
        }
    }

    /// Each draft as Gmail keeps it: its id, its message's id, thread id, labels and header
    /// fields.
    pub fn drafts(&self) -> Vec<MockDraft> {
        let s = lock(&self.state);
        (s.drafts.iter())
            .filter_map(|(id, message)| {
                let m = s.messages.get(message)?;
                Some(MockDraft {
                    id: id.clone(),
                    message: m.id.clone(),
                    thread: m.thread_id.clone(),
                    labels: m.labels.iter().cloned().collect(),
                    headers: m.headers.clone(),
                    source: m.source(),
                })
            })
            .collect()
    }

    /// Edits draft `id` as the person would in Gmail (`drafts.update`: a new message id).
    pub fn edit_draft(&self, id: &str) -> Option<String> {
        drafts::edit(&mut lock(&self.state), id)
    }

    /// A current access token with these scopes.
    pub fn token(&self, scopes: &[&str]) -> String {
        let scopes = scopes.iter().map(|s| s.to_string()).collect();
        lock(&self.state).mint_token(scopes, None)
    }

    /// Adds `count` messages with these labels (by id or name; a new name becomes a user
    /// label), from `from` (else the default sender), as `/_mock/seed` does; returns their ids.
    pub fn seed(&self, count: usize, labels: &[&str], from: Option<&str>) -> Vec<String> {
        let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
        let from = from.map_or_else(default_from, str::to_string);
        lock(&self.state).seed(count, &labels, &from)
    }

    /// Adds one message with these headers, body and label ids; returns its id.
    pub fn add_message(&self, headers: &[(&str, &str)], body: &str, labels: &[&str]) -> String {
        let headers = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        lock(&self.state).add_message(headers, body, labels)
    }

    /// Puts message `id` in thread `thread` (Gmail threads a reply with what it answers);
    /// whether it exists.
    pub fn set_thread(&self, id: &str, thread: &str) -> bool {
        let mut state = lock(&self.state);
        match state.messages.get_mut(id) {
            Some(m) => {
                m.thread_id = thread.to_string();
                true
            }
            None => false,
        }
    }

    /// Ids of the messages that have this label id (all messages for `None`).
    pub fn ids_with(&self, label: Option<&str>) -> Vec<String> {
        let s = lock(&self.state);
        s.messages
            .values()
            .filter(|m| label.is_none_or(|l| m.labels.contains(l)))
            .map(|m| m.id.clone())
            .collect()
    }

    /// The labels of one message, by name.
    pub fn label_names(&self, id: &str) -> Vec<String> {
        let s = lock(&self.state);
        s.messages
            .get(id)
            .map(|m| {
                m.labels
                    .iter()
                    .filter_map(|l| s.labels.get(l).map(|l| l.name.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}
