//! A stateful Microsoft Graph mail server for tests and demos: nested mail folders, messages
//! with changeKeys, master categories, delta queries, PATCH with `If-Match`, move (immutable
//! ids on request), permanentDelete and `$batch` (at most 20 requests). Shapes follow Graph
//! v1.0 as Microsoft documents it and as its Python SDK sends it (mocks/README.md).
//!
//! The identity side (`oauth.rs`) hands out tokens by the device code flow and refresh;
//! every `/v1.0` call needs a live one.
//!
//! Not shipped. Control routes under `/_mock/` let a test seed mail, change it "from another
//! client", approve a device code as the person would, switch faults on, expire delta links
//! and tokens, and read the request log.

mod api;
mod attachments;
mod drafts;
mod oauth;
mod rules;
pub mod schema;
mod state;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State as AxState};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde::Deserialize;
use serde_json::{Value, json};

pub use api::MAX_BATCH;
use mailbroker_mock_server::contract::WireLog;
pub use oauth::DEVICE_GRANT;
use state::State;
pub use state::{Logged, WELL_KNOWN};

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running mock; stops when dropped, and then fails the test if any request carried what
/// Graph v1.0's published types do not document (`mailbroker_mock_server::contract`).
pub struct GraphMock {
    pub url: String,
    state: Shared,
    wire: WireLog,
    _served: mailbroker_mock_server::Served,
}

impl Drop for GraphMock {
    fn drop(&mut self) {
        self.wire.check();
    }
}

#[derive(Clone)]
struct App {
    state: Shared,
    base: String,
}

fn router(app: App) -> axum::Router {
    axum::Router::new()
        .route("/v1.0/{*path}", any(graph))
        .route("/{tenant}/oauth2/v2.0/devicecode", post(oauth::devicecode))
        .route("/{tenant}/oauth2/v2.0/token", post(oauth::token))
        .route("/{tenant}/oauth2/v2.0/authorize", get(oauth::authorize))
        .route(
            "/{tenant}/v2.0/.well-known/openid-configuration",
            get(oauth::openid_configuration),
        )
        .route("/_mock/device/approve", post(control_approve))
        .route("/_mock/identity", post(control_identity))
        .route("/_mock/revoke-all", post(control_revoke_all))
        .route("/_mock/faults", post(control_faults))
        .route("/_mock/seed", post(control_seed))
        .route("/_mock/folder", post(control_folder))
        .route("/_mock/attachment", post(control_attachment))
        .route("/_mock/modify", post(control_modify))
        .route("/_mock/expire-delta", post(control_expire_delta))
        .route("/_mock/log", get(control_log))
        .with_state(app)
}

/// Every Graph call: logged, then answered by `api::dispatch`.
async fn graph(
    AxState(app): AxState<App>,
    method: Method,
    Path(path): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = match body.is_empty() {
        true => Value::Null,
        false => match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                let error = json!({ "error": { "code": "BadRequest", "message": e.to_string() } });
                return (StatusCode::BAD_REQUEST, Json(error)).into_response();
            }
        },
    };
    let headers: HashMap<String, String> = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_lowercase(), v.to_str().ok()?.to_string())))
        .collect();
    let token = headers
        .get("authorization")
        .and_then(|a| a.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_string();
    let inner = api::Inner {
        method: method.as_str().to_string(),
        path: path.clone(),
        query,
        headers,
        body,
        token,
    };
    let mut state = lock(&app.state);
    // Links name the host the client called, as Graph's do: a client behind a proxy keeps
    // paging through it.
    let base = match inner.headers.get("host") {
        Some(host) => format!(
            "{}://{host}",
            app.base.split("://").next().unwrap_or("http")
        ),
        None => app.base.clone(),
    };
    let answer = api::dispatch(&mut state, &base, &inner);
    let batched = inner.body.get("requests").and_then(Value::as_array);
    let message_write = |method: &str, url: &str| method != "GET" && url.contains("messages/");
    // Writes the server applied: a conditional PATCH refused by If-Match changes nothing.
    let writes = match batched {
        Some(all) => all
            .iter()
            .zip(answer.body["responses"].as_array().into_iter().flatten())
            .filter(|(r, a)| {
                let method = r["method"].as_str().unwrap_or("GET").to_uppercase();
                let applied = a["status"].as_u64().is_some_and(|s| s < 300);
                applied && message_write(&method, r["url"].as_str().unwrap_or_default())
            })
            .count(),
        None => usize::from(message_write(&inner.method, &path) && answer.status < 300),
    };
    state.log.push(Logged {
        method: inner.method.clone(),
        path: format!("/v1.0/{path}"),
        status: answer.status,
        inner: (path == "$batch").then(|| batched.map_or(0, Vec::len)),
        writes,
        oauth: None,
    });
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if writes > 0 && answer.status < 300 && state.faults.drop_after_write > 0 {
        state.faults.drop_after_write -= 1;
        return dropped();
    }
    let mut response = match (answer.raw, answer.body) {
        (Some(raw), _) => (
            status,
            [(header::CONTENT_TYPE, raw.content_type)],
            raw.bytes,
        )
            .into_response(),
        (None, Value::Null) => status.into_response(),
        (None, body) => (status, Json(body)).into_response(),
    };
    if let Some(after) = answer.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, after.into());
    }
    response
}

/// An answer whose body fails at once: the connection is dropped after the write applied.
fn dropped() -> Response {
    let broken = futures::stream::once(async {
        Err::<Vec<u8>, _>(std::io::Error::other("connection dropped by the mock"))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(axum::body::Body::from_stream(broken))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

#[derive(Deserialize)]
struct Approve {
    user_code: String,
    /// False: the person declined.
    #[serde(default = "yes")]
    approve: bool,
}

fn yes() -> bool {
    true
}

/// The person typed the code at the verification page and consented (or declined).
async fn control_approve(AxState(app): AxState<App>, Json(a): Json<Approve>) -> impl IntoResponse {
    let mut s = lock(&app.state);
    let devices = &mut s.identity.devices;
    let code = devices
        .iter()
        .find(|(_, d)| d.user_code == a.user_code)
        .map(|(c, _)| c.clone());
    match (code, a.approve) {
        (Some(code), true) => {
            if let Some(d) = devices.get_mut(&code) {
                d.approved = true;
            }
            Json(json!({ "approved": true }))
        }
        (Some(code), false) => {
            if let Some(d) = devices.get_mut(&code) {
                d.declined = true;
            }
            Json(json!({ "approved": false }))
        }
        (None, _) => Json(json!({ "error": "no such user code" })),
    }
}

#[derive(Deserialize)]
struct IdentityKnobs {
    token_ttl_secs: Option<u64>,
    interval: Option<u64>,
    device_ttl_secs: Option<u64>,
    /// The next this many device code polls are told `slow_down`.
    slow_down: Option<u32>,
    /// Consent to the app was withdrawn (true) or given again (false).
    consent_required: Option<bool>,
    /// The app registration's "Allow public client flows" (Authentication > Advanced
    /// settings); when off, a device code grant is refused with AADSTS7000218.
    public_client_flows: Option<bool>,
    /// Every access token expires now.
    #[serde(default)]
    expire_tokens: bool,
    /// The scopes consent covers from now on (a grant gets the requested ones among them);
    /// an empty list: whatever is asked.
    grantable: Option<Vec<String>>,
}

async fn control_identity(
    AxState(app): AxState<App>,
    Json(k): Json<IdentityKnobs>,
) -> impl IntoResponse {
    let mut s = lock(&app.state);
    let id = &mut s.identity;
    if let Some(ttl) = k.token_ttl_secs {
        id.token_ttl = Some(std::time::Duration::from_secs(ttl));
    }
    if let Some(interval) = k.interval {
        id.interval = interval;
    }
    if let Some(ttl) = k.device_ttl_secs {
        id.device_ttl = Some(std::time::Duration::from_secs(ttl));
    }
    if let Some(n) = k.slow_down {
        id.slow_down = n;
    }
    if let Some(withdrawn) = k.consent_required {
        id.consent_required = withdrawn;
    }
    if let Some(on) = k.public_client_flows {
        id.confidential = !on;
    }
    if k.expire_tokens {
        id.tokens.clear();
    }
    if let Some(scopes) = k.grantable {
        id.grantable = (!scopes.is_empty()).then_some(scopes);
    }
    Json(json!({ "ok": true }))
}

/// The person revoked the app's access: every token and refresh token dies.
async fn control_revoke_all(AxState(app): AxState<App>) -> impl IntoResponse {
    let mut s = lock(&app.state);
    s.identity.tokens.clear();
    s.identity.refresh.clear();
    Json(json!({ "ok": true }))
}

#[derive(Deserialize)]
struct FaultKnobs {
    rate_limit: Option<f64>,
    drop_after_write: Option<u64>,
    revoke_after_writes: Option<u64>,
}

async fn control_faults(
    AxState(app): AxState<App>,
    Json(f): Json<FaultKnobs>,
) -> impl IntoResponse {
    let mut s = lock(&app.state);
    if let Some(share) = f.rate_limit {
        s.faults.rate_limit = share;
        s.faults.counted = 0;
    }
    if let Some(n) = f.drop_after_write {
        s.faults.drop_after_write = n;
    }
    if let Some(n) = f.revoke_after_writes {
        s.faults.revoke_after_writes = Some(n);
    }
    Json(json!({ "ok": true }))
}

#[derive(Deserialize)]
struct Seed {
    count: usize,
    #[serde(default = "inbox")]
    folder: String,
    #[serde(default = "default_from")]
    from: String,
    #[serde(default)]
    unread: bool,
}

fn inbox() -> String {
    "inbox".into()
}

fn default_from() -> String {
    "news@shop.example".into()
}

async fn control_seed(AxState(app): AxState<App>, Json(seed): Json<Seed>) -> impl IntoResponse {
    let ids = lock(&app.state).seed(seed.count, &seed.folder, &seed.from, seed.unread);
    Json(json!({ "ids": ids }))
}

#[derive(Deserialize)]
struct NewAttachment {
    message: String,
    name: String,
    content_type: String,
    text: String,
}

async fn control_attachment(
    AxState(app): AxState<App>,
    Json(new): Json<NewAttachment>,
) -> impl IntoResponse {
    let file = crate::state::FileAttachment {
        name: new.name,
        content_type: new.content_type,
        bytes: new.text.into_bytes(),
        ..Default::default()
    };
    Json(json!({ "id": lock(&app.state).attach(&new.message, file) }))
}

#[derive(Deserialize)]
struct NewFolder {
    name: String,
    parent: Option<String>,
}

async fn control_folder(
    AxState(app): AxState<App>,
    Json(folder): Json<NewFolder>,
) -> impl IntoResponse {
    let id = lock(&app.state).add_folder(&folder.name, folder.parent.as_deref());
    Json(json!({ "id": id }))
}

/// A change "by another client": read state, flag, categories, a move or a deletion.
#[derive(Deserialize)]
struct Modify {
    id: String,
    #[serde(rename = "isRead")]
    is_read: Option<bool>,
    flag: Option<String>,
    categories: Option<Vec<String>>,
    #[serde(rename = "moveTo")]
    move_to: Option<String>,
    #[serde(default)]
    delete: bool,
}

async fn control_modify(AxState(app): AxState<App>, Json(m): Json<Modify>) -> impl IntoResponse {
    let mut s = lock(&app.state);
    if m.delete {
        return Json(json!({ "deleted": s.delete_message(&m.id) }));
    }
    if let Some(to) = &m.move_to {
        return Json(json!({ "id": s.move_message(&m.id, to, true) }));
    }
    s.touch(&m.id);
    let Some(message) = s.messages.get_mut(&m.id) else {
        return Json(json!({ "error": "no such message" }));
    };
    if let Some(read) = m.is_read {
        message.is_read = read;
    }
    if let Some(flag) = m.flag {
        message.flag = flag;
    }
    if let Some(categories) = m.categories {
        message.categories = categories;
    }
    Json(message.json())
}

/// Every delta link handed out so far is void: it gets 410 Gone.
async fn control_expire_delta(AxState(app): AxState<App>) -> impl IntoResponse {
    let mut s = lock(&app.state);
    s.oldest_delta = s.seq + 1;
    Json(json!({ "ok": true }))
}

async fn control_log(AxState(app): AxState<App>) -> impl IntoResponse {
    let log: Vec<Value> = lock(&app.state)
        .log
        .iter()
        .map(|l| {
            json!({ "method": l.method, "path": l.path, "status": l.status, "inner": l.inner,
                "oauth": l.oauth })
        })
        .collect();
    Json(json!({ "requests": log }))
}

impl GraphMock {
    /// Starts on a free loopback port, in the current tokio runtime.
    pub async fn start(email: &str) -> std::io::Result<GraphMock> {
        GraphMock::serve(email, mailbroker_mock_server::bind().await?)
    }

    /// The same over TLS (https links) with this certificate chain and key, for clients that
    /// accept only an https authority (Microsoft's sign-in library).
    pub async fn start_tls(
        email: &str,
        cert_pem: &std::path::Path,
        key_pem: &std::path::Path,
    ) -> std::io::Result<GraphMock> {
        let bound = mailbroker_mock_server::bind_tls(cert_pem, key_pem).await?;
        GraphMock::serve(email, bound)
    }

    fn serve(email: &str, bound: mailbroker_mock_server::Bound) -> std::io::Result<GraphMock> {
        let wire = WireLog::default();
        let state = State::new(email, schema::v1()?, wire.clone());
        let state: Shared = Arc::new(Mutex::new(state));
        let app = router(App {
            state: state.clone(),
            base: bound.url.clone(),
        });
        let served = bound.serve(app);
        Ok(GraphMock {
            url: served.url.clone(),
            state,
            wire,
            _served: served,
        })
    }

    /// What requests carried that Graph v1.0 does not document (each was refused).
    pub fn wire(&self) -> &WireLog {
        &self.wire
    }

    /// The request log so far.
    pub fn requests(&self) -> Vec<Logged> {
        lock(&self.state).log.clone()
    }

    /// A live access token, as if the device code flow had run and every permission the
    /// mock knows were granted.
    pub fn token(&self) -> String {
        self.token_for("Mail.ReadWrite MailboxSettings.ReadWrite offline_access User.Read")
    }

    /// A live access token granting `scope` (space-separated).
    pub fn token_for(&self, scope: &str) -> String {
        lock(&self.state).identity.grant(scope).0
    }

    /// The Inbox's message rules as Exchange keeps them, by id.
    pub fn rules(&self) -> Vec<Value> {
        lock(&self.state).rules.values().cloned().collect()
    }

    /// Graph refuses (403) or serves this mailbox's rules from now on.
    pub fn refuse_rules(&self, refused: bool) {
        lock(&self.state).rules_refused = refused;
    }

    /// Adds `count` messages to `folder` (an id or a well-known name); returns their ids.
    pub fn seed(&self, count: usize, folder: &str, from: &str, unread: bool) -> Vec<String> {
        lock(&self.state).seed(count, folder, from, unread)
    }

    /// Adds a file attachment to message `id` (after those it has, as its MIME source lists
    /// them); its attachment id, or `None` when there is no such message.
    pub fn add_attachment(
        &self,
        id: &str,
        name: &str,
        content_type: &str,
        bytes: &[u8],
    ) -> Option<String> {
        let file = crate::state::FileAttachment {
            name: name.to_string(),
            content_type: content_type.to_string(),
            bytes: bytes.to_vec(),
            ..Default::default()
        };
        lock(&self.state).attach(id, file)
    }

    /// Gives message `id` these Internet headers (`List-Id`, `List-Unsubscribe`), kept as
    /// Exchange keeps them, as extended properties (a change, as for a message delivered
    /// again); whether it exists.
    pub fn set_internet_headers(&self, id: &str, headers: &[(&str, &str)]) -> bool {
        let mut state = lock(&self.state);
        let Some(m) = state.messages.get_mut(id) else {
            return false;
        };
        m.internet_headers = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        state.touch(id);
        true
    }

    /// Puts message `id` in conversation `conversation` (Outlook's conversationId); whether
    /// it exists.
    pub fn set_conversation(&self, id: &str, conversation: &str) -> bool {
        let mut state = lock(&self.state);
        let Some(m) = state.messages.get_mut(id) else {
            return false;
        };
        m.conversation = Some(conversation.to_string());
        state.touch(id);
        true
    }

    /// Adds a folder under `parent` (top level for `None`); returns its id.
    pub fn add_folder(&self, name: &str, parent: Option<&str>) -> Option<String> {
        lock(&self.state).add_folder(name, parent)
    }

    /// A message as Graph would return it, if it exists.
    pub fn message(&self, id: &str) -> Option<Value> {
        lock(&self.state).messages.get(id).map(|m| m.json())
    }

    /// Every message as Graph would return it.
    pub fn messages(&self) -> Vec<Value> {
        lock(&self.state)
            .messages
            .values()
            .map(|m| m.json())
            .collect()
    }

    /// The Internet Message-ID the draft `id` answers, as `createReply` set it.
    pub fn draft_answers(&self, id: &str) -> Option<String> {
        let s = lock(&self.state);
        s.messages.get(id)?.draft.as_ref()?.in_reply_to.clone()
    }

    /// Changes message `id` as the person would in Outlook (a new changeKey).
    pub fn edit(&self, id: &str) {
        lock(&self.state).touch(id);
    }

    /// The names in the mailbox's master category list.
    pub fn category_names(&self) -> Vec<String> {
        lock(&self.state)
            .categories
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }

    /// The id of a folder by id or well-known name.
    pub fn folder_id(&self, key: &str) -> Option<String> {
        lock(&self.state).folder(key).map(|f| f.id.clone())
    }

    /// Ids of the messages in a folder (by id or well-known name).
    pub fn ids_in(&self, folder: &str) -> Vec<String> {
        let s = lock(&self.state);
        let Some(id) = s.folder(folder).map(|f| f.id.clone()) else {
            return Vec::new();
        };
        s.messages
            .values()
            .filter(|m| m.folder == id)
            .map(|m| m.id.clone())
            .collect()
    }
}
