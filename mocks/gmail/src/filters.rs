//! `users.settings.filters`: create, get, list, delete, as Gmail answers them. The gate has
//! already held the request to the discovery document (the `Filter` schema, the
//! `gmail.settings.basic` scope create and delete require); here is what the schema cannot
//! say and Gmail refuses: a filter with no criteria or no action, a label that does not exist
//! (`400 Invalid label: …`), a forward to an address that is not a verified forwarding
//! address, a filter that exists already (`400 Filter already exists`), and a 1,001st filter
//! (Gmail keeps at most 1,000, and answers a 500 at the limit).

use axum::Json;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::api::{Shared, error, lock};

/// Most filters Gmail keeps for a user.
pub const MAX_FILTERS: usize = 1000;

const CRITERIA: [&str; 9] = [
    "from",
    "to",
    "subject",
    "query",
    "negatedQuery",
    "hasAttachment",
    "excludeChats",
    "size",
    "sizeComparison",
];

fn invalid(message: &str) -> Response {
    error(StatusCode::BAD_REQUEST, "invalidArgument", message)
}

/// What of `filter` Gmail keeps: its criteria and action, without empty parts.
fn kept(filter: &Value) -> (Map<String, Value>, Map<String, Value>) {
    let part = |name: &str| -> Map<String, Value> {
        (filter[name].as_object().cloned().unwrap_or_default())
            .into_iter()
            .filter(|(_, v)| {
                !(v.is_null() || v.as_array().is_some_and(Vec::is_empty) || v == &json!(""))
            })
            .collect()
    };
    (part("criteria"), part("action"))
}

fn refusal(s: &crate::state::State, filter: &Value) -> Option<Response> {
    let (criteria, action) = kept(filter);
    if !criteria
        .keys()
        .any(|k| CRITERIA.contains(&k.as_str()) && k != "sizeComparison")
    {
        return Some(invalid("Filter criteria must be specified."));
    }
    if criteria.contains_key("size") != criteria.contains_key("sizeComparison") {
        return Some(invalid("size and sizeComparison must be given together."));
    }
    if action.is_empty() {
        return Some(invalid("Filter action must be specified."));
    }
    if let Some(to) = action.get("forward") {
        return Some(invalid(&format!(
            "Invalid forwarding address: {}",
            to.as_str().unwrap_or_default()
        )));
    }
    for list in ["addLabelIds", "removeLabelIds"] {
        for id in action
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = id.as_str().unwrap_or_default();
            if !s.labels.contains_key(id) {
                return Some(invalid(&format!("Invalid label: {id}")));
            }
        }
    }
    let same = |f: &Value| kept(f) == (criteria.clone(), action.clone());
    if s.filters.values().any(same) {
        return Some(invalid("Filter already exists"));
    }
    if s.filters.len() >= MAX_FILTERS {
        return Some(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "backendError",
            "Backend Error",
        ));
    }
    None
}

pub async fn create(AxState(state): AxState<Shared>, Json(body): Json<Value>) -> Response {
    let mut s = lock(&state);
    if let Some(refused) = refusal(&s, &body) {
        return refused;
    }
    s.next_filter += 1;
    let id = format!("ANe1Bmj{:08x}", s.next_filter);
    let (criteria, action) = kept(&body);
    let filter = json!({ "id": id, "criteria": criteria, "action": action });
    s.filters.insert(id, filter.clone());
    Json(filter).into_response()
}

pub async fn list(AxState(state): AxState<Shared>) -> Response {
    let s = lock(&state);
    let filters: Vec<&Value> = s.filters.values().collect();
    // Gmail leaves the list out when there is none.
    match filters.is_empty() {
        true => Json(json!({})).into_response(),
        false => Json(json!({ "filter": filters })).into_response(),
    }
}

pub(crate) fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "notFound",
        "Requested entity was not found.",
    )
}

pub async fn get(
    AxState(state): AxState<Shared>,
    Path((_, id)): Path<(String, String)>,
) -> Response {
    match lock(&state).filters.get(&id) {
        Some(filter) => Json(filter.clone()).into_response(),
        None => not_found(),
    }
}

pub async fn delete(
    AxState(state): AxState<Shared>,
    Path((_, id)): Path<(String, String)>,
) -> Response {
    match lock(&state).filters.remove(&id) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => not_found(),
    }
}
