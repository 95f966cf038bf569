//! The Graph endpoints mailbroker uses, as one dispatcher over the state, so a request
//! answers the same whether it came alone or inside a `$batch`.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::state::{Category, State};

/// One request, alone or from a `$batch`: the path after `/v1.0/`, its query, its headers
/// (names in lower case), its JSON body, and the access token it carries (a `$batch`'s
/// requests carry the envelope's).
pub struct Inner {
    pub method: String,
    pub path: String,
    pub query: HashMap<String, String>,
    pub headers: HashMap<String, String>,
    pub body: Value,
    pub token: String,
}

/// An answer: status, JSON body (`Value::Null` for none), and `Retry-After` for a 429; or,
/// for a `$value` (a message's MIME source, an attachment's contents), the raw bytes.
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub retry_after: Option<u64>,
    pub raw: Option<Raw>,
}

/// Raw contents and their media type.
pub struct Raw {
    pub bytes: Vec<u8>,
    pub content_type: String,
}

/// An answer of raw contents.
pub(crate) fn raw(bytes: Vec<u8>, content_type: &str) -> Answer {
    Answer {
        raw: Some(Raw {
            bytes,
            content_type: content_type.to_string(),
        }),
        ..answer(200, Value::Null)
    }
}

pub(crate) fn error(status: u16, code: &str, message: &str) -> Answer {
    Answer {
        status,
        body: json!({ "error": { "code": code, "message": message } }),
        retry_after: None,
        raw: None,
    }
}

pub(crate) fn ok(body: Value) -> Answer {
    answer(200, body)
}

pub(crate) fn answer(status: u16, body: Value) -> Answer {
    Answer {
        status,
        body,
        retry_after: None,
        raw: None,
    }
}

/// The scopes any one of which lets a request through, after Microsoft's permission tables
/// for each endpoint (least privileged first); none for `$batch`, whose requests are each
/// checked. A mock that let more through would hide a client that asks for too little.
fn required(method: &str, parts: &[&str]) -> &'static [&'static str] {
    const MAIL_READ: &[&str] = &["Mail.ReadBasic", "Mail.Read", "Mail.ReadWrite"];
    match (method, parts) {
        (_, ["$batch"]) => &[],
        ("GET", ["me"]) => &[
            "User.Read",
            "User.ReadWrite",
            "User.ReadBasic.All",
            "User.Read.All",
        ],
        ("GET", ["me", "outlook", "masterCategories", ..]) => {
            &["MailboxSettings.Read", "MailboxSettings.ReadWrite"]
        }
        (_, ["me", "outlook", ..]) => &["MailboxSettings.ReadWrite"],
        ("GET", ["me", "mailFolders", _, "messageRules", ..]) => {
            &["MailboxSettings.Read", "MailboxSettings.ReadWrite"]
        }
        (_, ["me", "mailFolders", _, "messageRules", ..]) => &["MailboxSettings.ReadWrite"],
        ("GET", ["me", "messages", _, "$value"]) => &["Mail.Read", "Mail.ReadWrite"],
        ("GET", ["me", "messages", _, "attachments", ..]) => &["Mail.Read", "Mail.ReadWrite"],
        ("GET", _) => MAIL_READ,
        _ => &["Mail.ReadWrite"],
    }
}

/// Whether the request's token is live and grants what the endpoint needs: `None` if so,
/// else the answer (401, 403).
fn refused(state: &State, method: &str, parts: &[&str], token: &str) -> Option<Answer> {
    let Some(granted) = state.identity.scopes(token) else {
        return Some(error(
            401,
            "InvalidAuthenticationToken",
            "Access token has expired or is not yet valid.",
        ));
    };
    let needs = required(method, parts);
    let short = crate::oauth::short;
    if needs.is_empty()
        || needs
            .iter()
            .any(|n| granted.iter().any(|g| short(g) == short(n)))
    {
        return None;
    }
    Some(error(
        403,
        "ErrorAccessDenied",
        "Access is denied. Check credentials and try again.",
    ))
}

/// What an endpoint's request may carry, after Graph v1.0's reference: the type whose
/// properties its query options name, and its body (an entity of a type, or an action's
/// documented parameters).
enum Body {
    None,
    Entity(&'static str),
    Action(&'static [&'static str]),
    /// A `$batch` envelope: its requests are each checked when they are dispatched.
    Batch,
}

fn endpoint(method: &str, parts: &[&str]) -> Option<(&'static str, Body)> {
    Some(match (method, parts) {
        ("POST", ["$batch"]) => ("Message", Body::Batch),
        ("GET", ["me"]) => ("User", Body::None),
        ("GET", ["me", "mailFolders", _, "messageRules", ..]) => ("MessageRule", Body::None),
        ("POST", ["me", "mailFolders", _, "messageRules"]) => {
            ("MessageRule", Body::Entity("MessageRule"))
        }
        ("DELETE", ["me", "mailFolders", _, "messageRules", _]) => ("MessageRule", Body::None),
        ("GET", ["me", "mailFolders", ..]) if !parts.contains(&"messages") => {
            ("MailFolder", Body::None)
        }
        ("POST", ["me", "mailFolders"] | ["me", "mailFolders", _, "childFolders"]) => {
            ("MailFolder", Body::Entity("MailFolder"))
        }
        ("GET", ["me", "mailFolders", _, "messages", "delta" | "delta()"]) => {
            ("Message", Body::None)
        }
        ("GET", ["me", "messages", _] | ["me", "messages", _, "$value"]) => ("Message", Body::None),
        // `$value` of an attachment: its raw contents, as the attachment reference documents.
        ("GET", ["me", "messages", _, "attachments", ..]) => ("Attachment", Body::None),
        ("PATCH", ["me", "messages", _]) => ("Message", Body::Entity("Message")),
        ("POST", ["me", "messages"]) => ("Message", Body::Entity("Message")),
        ("DELETE", ["me", "messages", _]) => ("Message", Body::None),
        ("POST", ["me", "messages", _, "createReply" | "createReplyAll"]) => {
            ("Message", Body::Action(&["message", "comment"]))
        }
        // Actions' parameters are in Microsoft's reference pages (message: move,
        // permanentDelete), not in the type definitions.
        ("POST", ["me", "messages", _, "move"]) => ("Message", Body::Action(&["destinationId"])),
        ("POST", ["me", "messages", _, "permanentDelete"]) => ("Message", Body::Action(&[])),
        ("GET", ["me", "outlook", "masterCategories"]) => ("OutlookCategory", Body::None),
        ("POST", ["me", "outlook", "masterCategories"]) => {
            ("OutlookCategory", Body::Entity("OutlookCategory"))
        }
        _ => return None,
    })
}

/// Whether the request names only what Graph v1.0 documents for its endpoint: its query
/// options' names are properties of the endpoint's type, its body's of the body's type (or
/// the action's parameters). A path the mock does not serve is refused as unsupported.
fn documented(
    state: &State,
    method: &str,
    parts: &[&str],
    req: &Inner,
) -> Result<(), crate::schema::Refusal> {
    use crate::schema::Refusal;
    let Some((ty, body)) = endpoint(method, parts) else {
        return Err(Refusal {
            status: 400,
            code: "BadRequest",
            message: format!("Unsupported request: {method} /{}", parts.join("/")),
        });
    };
    state.schema.check_query(ty, &req.query)?;
    match body {
        Body::None | Body::Batch => Ok(()),
        Body::Entity(ty) => state.schema.check_body(ty, &req.body),
        Body::Action(parameters) => match &req.body {
            Value::Object(fields) => match fields.keys().find(|k| {
                !k.starts_with("@odata.") && !parameters.iter().any(|p| p.eq_ignore_ascii_case(k))
            }) {
                Some(unknown) => Err(Refusal {
                    status: 400,
                    code: "RequestBodyRead",
                    message: format!(
                        "The parameter '{unknown}' in the request payload is not a valid parameter for the operation."
                    ),
                }),
                None => Ok(()),
            },
            _ => Ok(()),
        },
    }
}

/// Most requests a `$batch` may carry.
pub const MAX_BATCH: usize = 20;
/// A delta page's size when the client does not ask (`Prefer: odata.maxpagesize`).
const DEFAULT_PAGE: usize = 10;

pub fn dispatch(state: &mut State, base: &str, req: &Inner) -> Answer {
    let path = req.path.trim_matches('/');
    // The SDK's placeholder for the signed-in user, when its rewrite option is off.
    let path = path
        .strip_prefix("users/me-token-to-replace/")
        .map_or_else(|| path.to_string(), |rest| format!("me/{rest}"));
    let parts: Vec<&str> = path.split('/').collect();
    let method = req.method.as_str();
    if let Some(refusal) = refused(state, method, &parts, &req.token) {
        return refusal;
    }
    if let Err(refusal) = documented(state, method, &parts, req) {
        state
            .wire
            .undocumented(format!("{method} /{path}: {}", refusal.message));
        return error(refusal.status, refusal.code, &refusal.message);
    }
    // Any request may be throttled, a `$batch` envelope too (Microsoft's throttling and
    // batching guidance exempts none): then none of its requests ran.
    if state.faults.limited() {
        return Answer {
            retry_after: Some(1),
            ..error(
                429,
                "TooManyRequests",
                "Application is over its MailboxConcurrency limit.",
            )
        };
    }
    let answer = route(state, base, req, method, &parts, &path);
    if answer.status < 300 && method != "GET" && parts.get(1) == Some(&"messages") {
        state.faults.wrote(&mut state.identity);
    }
    answer
}

fn route(
    state: &mut State,
    base: &str,
    req: &Inner,
    method: &str,
    parts: &[&str],
    path: &str,
) -> Answer {
    match (method, parts) {
        ("POST", ["$batch"]) => batch(state, base, req),
        ("GET", ["me"]) => ok(json!({
            "id": "mock-user",
            "displayName": "Mock User",
            "mail": state.email,
            "userPrincipalName": state.email,
        })),
        (_, ["me", "mailFolders", folder, "messageRules", rest @ ..]) => {
            crate::rules::route(state, req, folder, rest)
        }
        ("GET", ["me", "mailFolders"]) => folders(state, None),
        ("POST", ["me", "mailFolders"]) => create_folder(state, None, req),
        ("GET", ["me", "mailFolders", id]) => match state.folder(id) {
            Some(f) => ok(state.folder_json(&f.clone())),
            None => not_found("folder"),
        },
        ("GET", ["me", "mailFolders", id, "childFolders"]) => folders(state, Some(id)),
        ("POST", ["me", "mailFolders", id, "childFolders"]) => create_folder(state, Some(id), req),
        ("GET", ["me", "mailFolders", id, "messages", "delta" | "delta()"]) => {
            delta(state, base, id, req)
        }
        ("GET", ["me", "messages", id]) => match state.messages.get(*id) {
            Some(m) => ok(shaped(m, &req.query)),
            None => not_found("message"),
        },
        ("GET", ["me", "messages", id, "$value"]) => match state.messages.get(*id) {
            Some(m) => raw(m.mime().into_bytes(), "text/plain"),
            None => not_found("message"),
        },
        ("GET", ["me", "messages", id, "attachments"]) => crate::attachments::list(state, id, req),
        ("GET", ["me", "messages", id, "attachments", attachment, "$value"]) => {
            crate::attachments::value(state, id, attachment)
        }
        ("PATCH", ["me", "messages", id]) => patch(state, id, req),
        ("POST", ["me", "messages"]) => crate::drafts::create(state, &req.body),
        ("DELETE", ["me", "messages", id]) => crate::drafts::delete(state, id),
        ("POST", ["me", "messages", id, "createReply"]) => {
            crate::drafts::create_reply(state, id, false)
        }
        ("POST", ["me", "messages", id, "createReplyAll"]) => {
            crate::drafts::create_reply(state, id, true)
        }
        ("POST", ["me", "messages", id, "move"]) => move_message(state, id, req),
        ("POST", ["me", "messages", id, "permanentDelete"]) => match state.delete_message(id) {
            true => answer(204, Value::Null),
            false => not_found("message"),
        },
        ("GET", ["me", "outlook", "masterCategories"]) => ok(json!({
            "value": state.categories.iter().map(category_json).collect::<Vec<_>>()
        })),
        ("POST", ["me", "outlook", "masterCategories"]) => create_category(state, req),
        _ => error(
            400,
            "BadRequest",
            &format!("Unsupported request: {method} /{path}"),
        ),
    }
}

pub(crate) fn not_found(what: &str) -> Answer {
    error(
        404,
        "ErrorItemNotFound",
        &format!("The specified {what} could not be found in the store."),
    )
}

fn folders(state: &State, parent: Option<&str>) -> Answer {
    let parent = match parent {
        Some(p) => match state.folder(p) {
            Some(f) => Some(f.id.clone()),
            None => return not_found("folder"),
        },
        None => None,
    };
    let value: Vec<Value> = state
        .folders
        .iter()
        .filter(|f| f.parent == parent)
        .map(|f| state.folder_json(f))
        .collect();
    ok(json!({ "value": value }))
}

fn create_folder(state: &mut State, parent: Option<&str>, req: &Inner) -> Answer {
    let Some(name) = req.body.get("displayName").and_then(Value::as_str) else {
        return error(400, "ErrorInvalidRequest", "displayName is required");
    };
    match state.add_folder(name, parent) {
        Some(id) => match state.folder(&id) {
            Some(f) => answer(201, state.folder_json(&f.clone())),
            None => not_found("folder"),
        },
        None => not_found("folder"),
    }
}

/// A message as a request's `$select` and `$expand` shape it: the selected properties (and
/// `id`), and the single-value extended properties its `$expand` asks for by id.
fn shaped(m: &crate::state::Message, query: &HashMap<String, String>) -> Value {
    let mut out = select(m.json(), query.get("$select"));
    let asked = query
        .get("$expand")
        .map(|e| extended_ids(e))
        .unwrap_or_default();
    let found = m.extended_properties(&asked);
    if !found.is_empty() {
        out["singleValueExtendedProperties"] = Value::Array(found);
    }
    out
}

/// The ids an `$expand=singleValueExtendedProperties($filter=id eq '…' or id eq '…')`
/// names.
fn extended_ids(expand: &str) -> Vec<String> {
    let Some(filter) = expand
        .split_once("singleValueExtendedProperties(")
        .map(|(_, rest)| rest)
    else {
        return Vec::new();
    };
    filter
        .split("id eq '")
        .skip(1)
        .filter_map(|rest| rest.split_once('\'').map(|(id, _)| id.to_string()))
        .collect()
}

/// Keeps only the `$select`ed properties (and `id`, which Graph always returns).
pub(crate) fn select(message: Value, selected: Option<&String>) -> Value {
    let Some(selected) = selected else {
        return message;
    };
    let keep: Vec<&str> = selected.split(',').map(str::trim).collect();
    let Value::Object(all) = message else {
        return message;
    };
    let kept: Map<String, Value> = all
        .into_iter()
        .filter(|(k, _)| k == "id" || k.starts_with('@') || keep.contains(&k.as_str()))
        .collect();
    Value::Object(kept)
}

/// `…/messages/delta`: a first call lists the folder from the start, later ones what changed
/// since their `$deltatoken`. Pages follow `@odata.nextLink`, whose `$skiptoken` holds the
/// span the run covers and the last id listed (items go in id order, so a change while a
/// client pages shifts nothing); the last page carries `@odata.deltaLink` current with the
/// moment the run began, so what changes while a client pages is listed by the next delta,
/// not lost. Both tokens carry the first call's `$select` and `$expand`, as Graph encodes a
/// delta's query options into its links.
fn delta(state: &State, base: &str, folder: &str, req: &Inner) -> Answer {
    let Some(folder) = state.folder(folder).map(|f| f.id.clone()) else {
        return not_found("folder");
    };
    let first = || {
        let options = DeltaOptions::of(&req.query);
        Some((0, state.seq, options, String::new()))
    };
    let run = match (req.query.get("$skiptoken"), req.query.get("$deltatoken")) {
        (Some(skip), _) => parse_skip(skip),
        (None, Some(token)) => parse_delta_token(token)
            .map(|(since, options)| (since, state.seq, options, String::new())),
        (None, None) => first(),
    };
    let Some((since, now, options, after)) = run else {
        return error(400, "ErrorInvalidUrlQuery", "bad delta token");
    };
    if since > 0 && since < state.oldest_delta {
        return error(
            410,
            "SyncStateNotFound",
            "The sync state generation is not found; start a new sync.",
        );
    }
    let page = req
        .headers
        .get("prefer")
        .and_then(|p| p.split("odata.maxpagesize=").nth(1))
        .and_then(|n| n.split([',', ';', ' ']).next()?.parse().ok())
        .unwrap_or(DEFAULT_PAGE)
        .max(1);
    let (changed, removed) = state.delta(&folder, since, now);
    let mut items: Vec<(String, Value)> = changed
        .iter()
        .map(|m| (m.id.clone(), shaped(m, &options.0)))
        .collect();
    // A first run lists what is there; only a later one says what left.
    let removed = match since {
        0 => Vec::new(),
        _ => removed,
    };
    items.extend(removed.into_iter().map(|id| {
        let item = json!({ "id": id, "@removed": { "reason": "deleted" } });
        (id, item)
    }));
    items.sort_by(|a, b| a.0.cmp(&b.0));
    items.retain(|(id, _)| after.is_empty() || *id > after);
    let more = items.len() > page;
    items.truncate(page);
    let link =
        |query: String| format!("{base}/v1.0/me/mailFolders/{folder}/messages/delta?{query}");
    let last = items.last().map(|(id, _)| id.clone()).unwrap_or_default();
    let mut body = json!({ "value": items.into_iter().map(|(_, v)| v).collect::<Vec<_>>() });
    let carried = options.encode();
    if more {
        body["@odata.nextLink"] = link(format!("$skiptoken={since}.{now}.{carried}.{last}")).into();
    } else {
        body["@odata.deltaLink"] = link(format!("$deltatoken={now}.{carried}")).into();
    }
    ok(body)
}

/// A delta's `$select` and `$expand`, carried in its tokens (URL-safe base64 of JSON).
struct DeltaOptions(HashMap<String, String>);

impl DeltaOptions {
    fn of(query: &HashMap<String, String>) -> DeltaOptions {
        let kept = query
            .iter()
            .filter(|(k, _)| matches!(k.as_str(), "$select" | "$expand"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        DeltaOptions(kept)
    }

    fn encode(&self) -> String {
        use base64::Engine;
        let json = serde_json::to_vec(&self.0).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    fn decode(text: &str) -> Option<DeltaOptions> {
        use base64::Engine;
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .ok()?;
        serde_json::from_slice(&json).ok().map(DeltaOptions)
    }
}

fn parse_skip(token: &str) -> Option<(u64, u64, DeltaOptions, String)> {
    let mut parts = token.splitn(4, '.');
    Some((
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
        DeltaOptions::decode(parts.next()?)?,
        parts.next()?.to_string(),
    ))
}

fn parse_delta_token(token: &str) -> Option<(u64, DeltaOptions)> {
    let (since, options) = token.split_once('.')?;
    Some((since.parse().ok()?, DeltaOptions::decode(options)?))
}

/// PATCH of a message's writable mail properties. `If-Match` with another changeKey is
/// refused (412); a property that is not writable is refused (400), as Graph refuses a
/// whole message read back and sent again.
fn patch(state: &mut State, id: &str, req: &Inner) -> Answer {
    let Some(current) = state.messages.get(id) else {
        return not_found("message");
    };
    // An entity tag, as the message's `@odata.etag` gives it (weak, `W/"…"`), or `*`.
    let tag = |t: &str| {
        let t = t.strip_prefix("W/").unwrap_or(t);
        (t.len() >= 2 && t.starts_with('"') && t.ends_with('"'))
            .then(|| t[1..t.len() - 1].to_string())
    };
    if let Some(expected) = req.headers.get("if-match")
        && expected != "*"
        && tag(expected).as_deref() != Some(current.change_key().as_str())
    {
        return error(
            412,
            "ErrorIrresolvableConflict",
            "The send or update operation could not be performed because the change key passed in the request does not match the current change key for the item.",
        );
    }
    let Value::Object(fields) = &req.body else {
        return error(400, "ErrorInvalidRequest", "the body must be a JSON object");
    };
    if let Some(answered) = crate::drafts::patch(state, id, fields) {
        return answered;
    }
    let writable = ["isRead", "flag", "categories", "@odata.type"];
    if let Some(bad) = fields.keys().find(|k| !writable.contains(&k.as_str())) {
        return error(
            400,
            "ErrorInvalidPropertyUpdateSentAsReadOnly",
            &format!("The property {bad} is read-only or not supported by this mock"),
        );
    }
    let flag = fields
        .get("flag")
        .and_then(|f| f.get("flagStatus"))
        .and_then(Value::as_str);
    if flag.is_some_and(|f| !["notFlagged", "flagged", "complete"].contains(&f)) {
        return error(400, "ErrorInvalidRequest", "flagStatus is not valid");
    }
    let categories: Option<Vec<String>> = match fields.get("categories") {
        Some(Value::Array(list)) => Some(
            list.iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect(),
        ),
        Some(_) => return error(400, "ErrorInvalidRequest", "categories must be a list"),
        None => None,
    };
    let read = fields.get("isRead").and_then(Value::as_bool);
    state.touch(id);
    let Some(m) = state.messages.get_mut(id) else {
        return not_found("message");
    };
    if let Some(read) = read {
        m.is_read = read;
    }
    if let Some(flag) = flag {
        m.flag = flag.to_string();
    }
    if let Some(categories) = categories {
        // A PATCH replaces the whole list.
        m.categories = categories;
    }
    ok(m.json())
}

fn move_message(state: &mut State, id: &str, req: &Inner) -> Answer {
    // The SDK sends the property PascalCase, as the schema's action parameter is named.
    let Some(target) = req
        .body
        .get("destinationId")
        .or_else(|| req.body.get("DestinationId"))
        .and_then(Value::as_str)
    else {
        return error(400, "ErrorInvalidRequest", "destinationId is required");
    };
    if state.folder(target).is_none() {
        return not_found("folder");
    }
    let immutable = req
        .headers
        .get("prefer")
        .is_some_and(|p| p.contains("IdType=\"ImmutableId\""));
    match state.move_message(id, target, immutable) {
        Some(new_id) => match state.messages.get(&new_id) {
            Some(m) => answer(201, m.json()),
            None => not_found("message"),
        },
        None => not_found("message"),
    }
}

fn category_json(c: &Category) -> Value {
    json!({ "id": c.id, "displayName": c.name, "color": c.color })
}

fn create_category(state: &mut State, req: &Inner) -> Answer {
    let Some(name) = req.body.get("displayName").and_then(Value::as_str) else {
        return error(400, "ErrorInvalidRequest", "displayName is required");
    };
    // Names compare as Exchange compares them: case-blind, beyond ASCII too.
    if state
        .categories
        .iter()
        .any(|c| c.name.to_lowercase() == name.to_lowercase())
    {
        return error(
            409,
            "ErrorAlreadyExists",
            "A category with this name exists.",
        );
    }
    let category = Category {
        id: state.new_id("cat"),
        name: name.to_string(),
        color: req
            .body
            .get("color")
            .and_then(Value::as_str)
            .unwrap_or("preset0")
            .to_string(),
    };
    let body = category_json(&category);
    state.categories.push(category);
    answer(201, body)
}

/// `$batch`: at most 20 requests, run in order (so `dependsOn` always holds), each answered
/// as it would be alone. Urls may be relative (`/me/…`) or absolute, as the SDK sends them.
fn batch(state: &mut State, base: &str, req: &Inner) -> Answer {
    let Some(requests) = req.body.get("requests").and_then(Value::as_array) else {
        return error(400, "BadRequest", "requests is required");
    };
    if requests.len() > MAX_BATCH {
        return error(
            400,
            "BadRequest",
            &format!("A batch may hold at most {MAX_BATCH} requests"),
        );
    }
    let mut responses = Vec::with_capacity(requests.len());
    for r in requests {
        let id = r.get("id").cloned().unwrap_or(Value::Null);
        let url = r.get("url").and_then(Value::as_str).unwrap_or_default();
        let (path, query) = split_url(url, base);
        let inner = Inner {
            method: r
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("GET")
                .to_uppercase(),
            path,
            query,
            headers: r
                .get("headers")
                .and_then(Value::as_object)
                .map(|h| {
                    h.iter()
                        .filter_map(|(k, v)| Some((k.to_lowercase(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default(),
            body: r.get("body").cloned().unwrap_or(Value::Null),
            token: req.token.clone(),
        };
        let answer = dispatch(state, base, &inner);
        let mut headers = json!({ "Content-Type": "application/json" });
        if let Some(after) = answer.retry_after {
            headers["Retry-After"] = after.to_string().into();
        }
        // A body that is not JSON travels base64-encoded, as Graph sends it.
        let body = match &answer.raw {
            Some(raw) => {
                use base64::Engine;
                headers["Content-Type"] = raw.content_type.clone().into();
                base64::engine::general_purpose::STANDARD
                    .encode(&raw.bytes)
                    .into()
            }
            None => answer.body,
        };
        responses.push(json!({
            "id": id,
            "status": answer.status,
            "headers": headers,
            "body": body,
        }));
    }
    ok(json!({ "responses": responses }))
}

/// A batch item's url as a path after `/v1.0/` and its query, whether it is absolute (as the
/// SDK sends it) or relative (`/me/…`, as Graph's documentation writes it).
fn split_url(url: &str, base: &str) -> (String, HashMap<String, String>) {
    let root = format!("{base}/v1.0/");
    let parsed = url::Url::parse(&root).and_then(|r| r.join(url.trim_start_matches('/')));
    let Ok(parsed) = parsed else {
        return (url.to_string(), HashMap::new());
    };
    let path = parsed.path().trim_start_matches('/');
    let path = path.strip_prefix("v1.0/").unwrap_or(path);
    let path = percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned();
    (path, parsed.query_pairs().into_owned().collect())
}
