//! The Gmail API routes (paths and shapes from Google's discovery document `gmail.v1.json`).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State as AxState};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::state::{Event, State};

pub type Shared = Arc<Mutex<State>>;

/// Google's error envelope.
pub fn error(status: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({ "error": {
        "code": status.as_u16(), "message": message,
        "status": status.canonical_reason().unwrap_or("").to_uppercase().replace(' ', "_"),
        "errors": [{ "message": message, "domain": "global", "reason": reason }],
    }});
    (status, Json(body)).into_response()
}

pub fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What every API call passes through: the mailbox, and Gmail v1's discovery document with
/// the record of what requests carried that it lacks.
#[derive(Clone)]
pub struct Gate {
    pub state: Shared,
    pub discovery: Arc<crate::discovery::Discovery>,
    pub wire: mailbroker_mock_server::contract::WireLog,
}

/// Bearer check, the discovery document's contract, fault injection and the request log,
/// for every API call.
pub async fn authorize(AxState(gate): AxState<Gate>, request: Request, next: Next) -> Response {
    let state = gate.state.clone();
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let query: Vec<(String, String)> = request
        .uri()
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 20).await else {
        return error(
            StatusCode::BAD_REQUEST,
            "badRequest",
            "The request body could not be read.",
        );
    };
    // A media upload: its metadata is the JSON checked below, its media goes on beside it.
    let (bytes, media) = match path.starts_with("/upload/") {
        true => match crate::drafts::upload(&parts.headers, &query, &bytes) {
            Ok((metadata, media)) => (metadata, Some(media)),
            Err(why) => return error(StatusCode::BAD_REQUEST, "badRequest", why),
        },
        false => (bytes.to_vec(), None),
    };
    if let Some(media) = &media
        && let Err(refusal) = gate
            .discovery
            .check_media(&method, &path, &media.media_type)
    {
        // Refused as Gmail refuses it; the answer, not the wire log, tells the client.
        let status = StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::BAD_REQUEST);
        return error(status, refusal.reason, &refusal.message);
    }
    let json: Value = match bytes.is_empty() {
        true => Value::Null,
        false => match serde_json::from_slice(&bytes) {
            Ok(v) => v,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "parseError",
                    &format!("Invalid JSON payload received. {e}"),
                );
            }
        },
    };
    let mut request = Request::from_parts(parts, Body::from(bytes));
    if let Some(media) = media {
        // What the route reads is the metadata; the media rides beside it.
        (request.headers_mut()).insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        request.extensions_mut().insert(media);
    }
    let (verdict, in_flight, latency) = {
        let mut s = lock(&state);
        s.in_flight += 1;
        let in_flight = s.in_flight;
        let latency = s.faults.latency;
        let scopes = token
            .and_then(|t| s.tokens.get(&t).cloned())
            .filter(|t| t.expires > Instant::now());
        let verdict = match scopes {
            None => Err(error(
                StatusCode::UNAUTHORIZED,
                "authError",
                "Request had invalid authentication credentials.",
            )),
            Some(t) => match gate
                .discovery
                .check(&method, &path, &query, &json, &t.scopes)
            {
                Err(refusal) => {
                    if refusal.wire {
                        gate.wire
                            .undocumented(format!("{method} {path}: {}", refusal.message));
                    }
                    let status =
                        StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::BAD_REQUEST);
                    Err(error(status, refusal.reason, &refusal.message))
                }
                Ok(()) => faulted(&mut s).map_or(Ok(()), Err),
            },
        };
        (verdict, in_flight, latency)
    };
    tokio::time::sleep(latency).await;
    let response = match verdict {
        Ok(()) => next.run(request).await,
        Err(r) => r,
    };
    let ids = response.extensions().get::<BatchSize>().map(|b| b.0);
    let mut s = lock(&state);
    s.in_flight -= 1;
    s.log.push(crate::state::Logged {
        method,
        path,
        status: response.status().as_u16(),
        ids,
        in_flight,
    });
    drop(s);
    response
}

/// The faults a test switched on, for one call that passed the checks: a server error or a
/// rate limit, as Gmail answers them; `None` when the call is to be answered.
fn faulted(s: &mut State) -> Option<Response> {
    s.faults.counter += 1;
    let every = if s.faults.rate_limit > 0.0 {
        (1.0 / s.faults.rate_limit).round() as u64
    } else {
        0
    };
    if s.faults.errors > 0 {
        s.faults.errors -= 1;
        return Some(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "backendError",
            "Backend Error",
        ));
    }
    if every > 0 && s.faults.counter.is_multiple_of(every) {
        let mut r = error(
            StatusCode::TOO_MANY_REQUESTS,
            "rateLimitExceeded",
            "Too many requests",
        );
        if let Ok(v) = HeaderValue::from_str(&s.faults.retry_after_secs.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return Some(r);
    }
    None
}

/// How many ids a batch call held, for the request log.
#[derive(Clone, Copy)]
struct BatchSize(usize);

/// A write's answer, or — when the test asked for it — a connection that breaks after the
/// write was applied, before its answer arrives.
fn written(state: &Shared, ok: Response) -> Response {
    let mut s = lock(state);
    if s.faults.drop_after_write == 0 {
        return ok;
    }
    s.faults.drop_after_write -= 1;
    // A body that fails at once: hyper aborts the connection mid-answer.
    let broken = futures::stream::once(async {
        Err::<Vec<u8>, _>(std::io::Error::other("connection dropped by the mock"))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_LENGTH, "100")
        .body(Body::from_stream(broken))
        .unwrap_or(ok)
}

type Params = Query<Vec<(String, String)>>;

fn param<'a>(params: &'a [(String, String)], key: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn params_all(params: &[(String, String)], key: &str) -> Vec<String> {
    params
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .collect()
}

pub async fn profile(AxState(state): AxState<Shared>) -> Response {
    let s = lock(&state);
    Json(json!({
        "emailAddress": s.email, "messagesTotal": s.messages.len(),
        "threadsTotal": s.messages.len(), "historyId": s.history_id.to_string(),
    }))
    .into_response()
}

pub async fn labels_list(AxState(state): AxState<Shared>) -> Response {
    let s = lock(&state);
    let labels: Vec<Value> = s.labels.values().map(|l| l.json()).collect();
    Json(json!({ "labels": labels })).into_response()
}

#[derive(Deserialize)]
pub struct NewLabel {
    name: String,
}

pub async fn labels_create(
    AxState(state): AxState<Shared>,
    Json(body): Json<NewLabel>,
) -> Response {
    let mut s = lock(&state);
    if body.name.trim().is_empty()
        || s.labels
            .values()
            .any(|l| l.name.eq_ignore_ascii_case(&body.name))
    {
        return error(
            StatusCode::CONFLICT,
            "alreadyExists",
            "Label name exists or conflicts",
        );
    }
    let label = s.create_label(&body.name);
    Json(label.json()).into_response()
}

/// The subset of Gmail's search language the mock understands.
fn matches(s: &State, m: &crate::state::Message, q: &str) -> bool {
    q.split_whitespace().all(|term| {
        let (neg, term) = term.strip_prefix('-').map_or((false, term), |t| (true, t));
        let lower = term.to_lowercase();
        let hit = if let Some(v) = lower.strip_prefix("from:") {
            m.header("From")
                .is_some_and(|f| f.to_lowercase().contains(v))
        } else if let Some(v) = lower.strip_prefix("subject:") {
            m.header("Subject")
                .is_some_and(|f| f.to_lowercase().contains(v))
        } else if let Some(v) = lower
            .strip_prefix("label:")
            .or_else(|| lower.strip_prefix("in:"))
        {
            s.labels
                .values()
                .any(|l| l.name.to_lowercase() == v && m.labels.contains(&l.id))
        } else if lower == "is:unread" {
            m.labels.contains("UNREAD")
        } else if lower == "is:starred" {
            m.labels.contains("STARRED")
        } else {
            m.snippet.to_lowercase().contains(&lower)
                || m.header("Subject")
                    .is_some_and(|f| f.to_lowercase().contains(&lower))
        };
        hit != neg
    })
}

pub async fn messages_list(AxState(state): AxState<Shared>, Query(params): Params) -> Response {
    let s = lock(&state);
    let max: usize = param(&params, "maxResults")
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
        .clamp(1, 500);
    let start: usize = param(&params, "pageToken")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let q = param(&params, "q").unwrap_or("");
    let label_ids = params_all(&params, "labelIds");
    let spam_trash = param(&params, "includeSpamTrash") == Some("true");
    // Newest first, as Gmail lists.
    let hits: Vec<&crate::state::Message> = s
        .messages
        .values()
        .rev()
        .filter(|m| spam_trash || !(m.labels.contains("SPAM") || m.labels.contains("TRASH")))
        .filter(|m| label_ids.iter().all(|l| m.labels.contains(l)))
        .filter(|m| matches(&s, m, q))
        .collect();
    let page: Vec<Value> = hits
        .iter()
        .skip(start)
        .take(max)
        .map(|m| json!({ "id": m.id, "threadId": m.thread_id }))
        .collect();
    let mut body = json!({ "resultSizeEstimate": hits.len() });
    if !page.is_empty() {
        body["messages"] = page.into();
    }
    if start + max < hits.len() {
        body["nextPageToken"] = (start + max).to_string().into();
    }
    Json(body).into_response()
}

pub async fn messages_get(
    AxState(state): AxState<Shared>,
    Path((_, id)): Path<(String, String)>,
    Query(params): Params,
) -> Response {
    let s = lock(&state);
    let format = param(&params, "format").unwrap_or("full");
    if !["minimal", "full", "raw", "metadata"].contains(&format) {
        return error(StatusCode::BAD_REQUEST, "invalidArgument", "Invalid format");
    }
    match s.messages.get(&id) {
        Some(m) => Json(m.json(format, &params_all(&params, "metadataHeaders"))).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "notFound",
            "Requested entity was not found.",
        ),
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Modify {
    ids: Vec<String>,
    add_label_ids: Vec<String>,
    remove_label_ids: Vec<String>,
}

fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "notFound",
        "Requested entity was not found.",
    )
}

/// One message's label change, answered with its minimal resource.
fn apply_modify(s: &mut State, id: &str, add: &[String], remove: &[String]) -> Response {
    if !s.modify(id, add, remove) {
        return not_found();
    }
    match s.messages.get(id) {
        Some(m) => Json(m.json("minimal", &[])).into_response(),
        None => not_found(),
    }
}

fn unknown_label(s: &State, body: &Modify) -> Option<String> {
    body.add_label_ids
        .iter()
        .chain(&body.remove_label_ids)
        .find(|l| !s.labels.contains_key(*l))
        .cloned()
}

pub async fn messages_modify(
    AxState(state): AxState<Shared>,
    Path((_, id)): Path<(String, String)>,
    Json(body): Json<Modify>,
) -> Response {
    let answer = {
        let mut s = lock(&state);
        if body.add_label_ids.len() > 100 || body.remove_label_ids.len() > 100 {
            return error(
                StatusCode::BAD_REQUEST,
                "invalidArgument",
                "Too many labels",
            );
        }
        if let Some(l) = unknown_label(&s, &body) {
            return error(
                StatusCode::BAD_REQUEST,
                "invalidArgument",
                &format!("Invalid label: {l}"),
            );
        }
        apply_modify(&mut s, &id, &body.add_label_ids, &body.remove_label_ids)
    };
    written(&state, answer)
}

pub async fn messages_batch_modify(
    AxState(state): AxState<Shared>,
    Json(body): Json<Modify>,
) -> Response {
    let size = body.ids.len();
    let mut answer = {
        let mut s = lock(&state);
        if size > 1000 {
            return too_many(size);
        }
        if let Some(l) = unknown_label(&s, &body) {
            return error(
                StatusCode::BAD_REQUEST,
                "invalidArgument",
                &format!("Invalid label: {l}"),
            );
        }
        s.modify_many(&body.ids, &body.add_label_ids, &body.remove_label_ids);
        StatusCode::NO_CONTENT.into_response()
    };
    answer = written(&state, answer);
    with_size(answer, size)
}

/// batchModify and batchDelete take at most 1,000 ids.
fn too_many(size: usize) -> Response {
    let message = "Too many ids: at most 1000";
    with_size(
        error(StatusCode::BAD_REQUEST, "invalidArgument", message),
        size,
    )
}

fn with_size(mut r: Response, size: usize) -> Response {
    r.extensions_mut().insert(BatchSize(size));
    r
}

pub async fn messages_trash(
    AxState(state): AxState<Shared>,
    Path((_, id, verb)): Path<(String, String, String)>,
) -> Response {
    let answer = {
        let mut s = lock(&state);
        let (add, remove) = match verb.as_str() {
            "trash" => (vec!["TRASH".to_string()], vec!["INBOX".to_string()]),
            "untrash" => (vec![], vec!["TRASH".to_string()]),
            _ => return error(StatusCode::NOT_FOUND, "notFound", "Not Found"),
        };
        apply_modify(&mut s, &id, &add, &remove)
    };
    written(&state, answer)
}

pub async fn messages_batch_delete(
    AxState(state): AxState<Shared>,
    Json(body): Json<Modify>,
) -> Response {
    // Its scope (`https://mail.google.com/` alone) is the discovery document's, checked
    // before any call is answered.
    let size = body.ids.len();
    if size > 1000 {
        return too_many(size);
    }
    {
        lock(&state).delete_many(&body.ids);
    }
    with_size(
        written(&state, StatusCode::NO_CONTENT.into_response()),
        size,
    )
}

/// A history record as Gmail sends it, holding only the wanted kinds of change (none: skipped).
fn history_json(h: &crate::state::HistoryRecord, wanted: &dyn Fn(&str) -> bool) -> Option<Value> {
    let mut entry = json!({ "id": h.id.to_string() });
    let mut messages: Vec<Value> = Vec::new();
    let mut seen = BTreeSet::new();
    for (id, event) in &h.changes {
        let msg = json!({ "id": id, "threadId": id });
        let (kind, field, item) = match event {
            Event::Added => ("messageAdded", "messagesAdded", json!({ "message": msg })),
            Event::Deleted => (
                "messageDeleted",
                "messagesDeleted",
                json!({ "message": msg }),
            ),
            Event::LabelsAdded(l) => (
                "labelAdded",
                "labelsAdded",
                json!({ "message": msg, "labelIds": l }),
            ),
            Event::LabelsRemoved(l) => (
                "labelRemoved",
                "labelsRemoved",
                json!({ "message": msg, "labelIds": l }),
            ),
        };
        if !wanted(kind) {
            continue;
        }
        if seen.insert(id) {
            messages.push(msg.clone());
        }
        match entry[field].as_array_mut() {
            Some(list) => list.push(item),
            None => entry[field] = json!([item]),
        }
    }
    (!messages.is_empty()).then(|| {
        entry["messages"] = messages.into();
        entry
    })
}

pub async fn history_list(AxState(state): AxState<Shared>, Query(params): Params) -> Response {
    let s = lock(&state);
    let Some(start) = param(&params, "startHistoryId").and_then(|v| v.parse::<u64>().ok()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalidArgument",
            "startHistoryId is required",
        );
    };
    if start < s.oldest_history {
        return error(
            StatusCode::NOT_FOUND,
            "notFound",
            "Requested entity was not found.",
        );
    }
    let types: BTreeSet<String> = params_all(&params, "historyTypes").into_iter().collect();
    let max: usize = param(&params, "maxResults")
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
        .clamp(1, 500);
    let skip: usize = param(&params, "pageToken")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let wanted = |kind: &str| types.is_empty() || types.contains(kind);
    let records: Vec<Value> = s
        .history
        .iter()
        .filter(|h| h.id > start)
        .filter_map(|h| history_json(h, &wanted))
        .collect();
    let page: Vec<Value> = records.iter().skip(skip).take(max).cloned().collect();
    let mut body = json!({ "historyId": s.history_id.to_string() });
    if !page.is_empty() {
        body["history"] = page.into();
    }
    if skip + max < records.len() {
        body["nextPageToken"] = (skip + max).to_string().into();
    }
    Json(body).into_response()
}
