//! A JMAP server that pushes: a front for the shared Cyrus (which answers its event source
//! with 204) that serves Cyrus's session with its own `eventSourceUrl`, passes API requests
//! through (counting them), and streams `state` events (RFC 8620 §7.3) as a pushing server
//! does: the current states when a stream opens, then each new state as Cyrus reaches it.
//! With a call limit it announces that `maxCallsInRequest` and refuses a request over it as
//! RFC 8620 §3.6.1 says, as a stricter server than Cyrus would.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Result;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, Sse};
use axum::routing::{get, post};
use futures::Stream;
use serde_json::{Value, json};

use crate::cyrus::Cyrus;

/// How often the front reads Cyrus's states for a new one.
const LOOK_EVERY: Duration = Duration::from_millis(200);

pub struct PushFront {
    pub port: u16,
    seen: Arc<Seen>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Seen {
    api_requests: AtomicUsize,
    /// Requests refused for holding more calls than the announced limit.
    over_limit: AtomicUsize,
    streams: AtomicUsize,
    query: std::sync::Mutex<String>,
}

#[derive(Clone)]
struct Front {
    cyrus: &'static Cyrus,
    user: String,
    port: u16,
    seen: Arc<Seen>,
    max_calls: Option<usize>,
}

impl PushFront {
    /// Starts a front for `user`'s mail on `cyrus`, on a port of its own.
    pub async fn start(cyrus: &'static Cyrus, user: &str) -> Result<PushFront> {
        PushFront::start_limited(cyrus, user, None).await
    }

    /// The same, announcing and holding requests to at most `max_calls` method calls.
    pub async fn start_limited(
        cyrus: &'static Cyrus,
        user: &str,
        max_calls: Option<usize>,
    ) -> Result<PushFront> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let seen = Arc::new(Seen::default());
        let front = Front {
            cyrus,
            user: user.to_string(),
            port,
            seen: seen.clone(),
            max_calls,
        };
        let app = Router::new()
            .route("/.well-known/jmap", get(session))
            .route("/api", post(api))
            .route("/events", get(events))
            .with_state(front);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(PushFront { port, seen, task })
    }

    /// Where the session is found.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// API requests passed through so far.
    pub fn api_requests(&self) -> usize {
        self.seen.api_requests.load(Ordering::SeqCst)
    }

    /// Requests refused for holding more calls than the announced limit.
    pub fn over_limit(&self) -> usize {
        self.seen.over_limit.load(Ordering::SeqCst)
    }

    /// Event streams opened so far.
    pub fn streams(&self) -> usize {
        self.seen.streams.load(Ordering::SeqCst)
    }

    /// The query string of the last event stream opened.
    pub fn event_query(&self) -> String {
        self.seen
            .query
            .lock()
            .map(|q| q.clone())
            .unwrap_or_default()
    }
}

impl Drop for PushFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Cyrus's session, its API and event source made the front's.
async fn session(State(front): State<Front>, headers: HeaderMap) -> Result<String, StatusCode> {
    let mut request = reqwest::Client::new().get(format!("{}/jmap", front.cyrus.url()));
    if let Some(auth) = headers.get(header::AUTHORIZATION) {
        request = request.header(header::AUTHORIZATION, auth.as_bytes());
    }
    let answer = request.send().await.map_err(|_| StatusCode::BAD_GATEWAY)?;
    if !answer.status().is_success() {
        return Err(
            StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY)
        );
    }
    let mut session: Value = answer.json().await.map_err(|_| StatusCode::BAD_GATEWAY)?;
    let base = format!("http://127.0.0.1:{}", front.port);
    session["apiUrl"] = json!(format!("{base}/api"));
    session["eventSourceUrl"] = json!(format!(
        "{base}/events?types={{types}}&closeafter={{closeafter}}&ping={{ping}}"
    ));
    if let Some(max) = front.max_calls {
        session["capabilities"]["urn:ietf:params:jmap:core"]["maxCallsInRequest"] = json!(max);
    }
    Ok(session.to_string())
}

/// An API request, passed to Cyrus as it came.
async fn api(
    State(front): State<Front>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<String, (StatusCode, String)> {
    front.seen.api_requests.fetch_add(1, Ordering::SeqCst);
    let calls = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b["methodCalls"].as_array().map(Vec::len))
        .unwrap_or(0);
    if front.max_calls.is_some_and(|max| calls > max) {
        front.seen.over_limit.fetch_add(1, Ordering::SeqCst);
        let problem = json!({ "type": "urn:ietf:params:jmap:error:limit",
            "limit": "maxCallsInRequest", "status": 400 });
        return Err((StatusCode::BAD_REQUEST, problem.to_string()));
    }
    let gateway = |_| (StatusCode::BAD_GATEWAY, String::new());
    let mut request = reqwest::Client::new()
        .post(format!("{}/jmap/", front.cyrus.url()))
        .header(header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(auth) = headers.get(header::AUTHORIZATION) {
        request = request.header(header::AUTHORIZATION, auth.as_bytes());
    }
    let answer = request.send().await.map_err(gateway)?;
    answer.text().await.map_err(gateway)
}

/// The event stream: the current states at once, then each new one.
async fn events(
    State(front): State<Front>,
    RawQuery(query): RawQuery,
) -> Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>> {
    front.seen.streams.fetch_add(1, Ordering::SeqCst);
    if let Ok(mut q) = front.seen.query.lock() {
        *q = query.unwrap_or_default();
    }
    let stream = futures::stream::unfold((front, None::<Value>), |(front, last)| async move {
        loop {
            if last.is_some() {
                tokio::time::sleep(LOOK_EVERY).await;
            }
            let Ok(now) = states(front.cyrus, &front.user).await else {
                tokio::time::sleep(LOOK_EVERY).await;
                continue;
            };
            if last.as_ref() != Some(&now) {
                let change =
                    json!({ "@type": "StateChange", "changed": { front.user.clone(): now } });
                let event = Event::default().event("state").data(change.to_string());
                return Some((Ok(event), (front, Some(now))));
            }
        }
    });
    Sse::new(stream)
}

/// `user`'s email and mailbox states now.
async fn states(cyrus: &Cyrus, user: &str) -> Result<Value> {
    let calls = json!([
        ["Email/get", { "accountId": user, "ids": [] }, "e"],
        ["Mailbox/get", { "accountId": user, "ids": [] }, "m"],
    ]);
    let got = cyrus.call(user, calls).await?;
    Ok(json!({ "Email": got[0][1]["state"], "Mailbox": got[1][1]["state"] }))
}
