//! `users.drafts`: create (as JSON with `message.raw`, or as a media upload of the message,
//! `multipart/related` at the discovery document's upload path), get and delete, as Gmail
//! answers them. A draft is a message with the `DRAFT` label; one made with a `threadId` joins
//! that thread only as Gmail documents it: its `References` or `In-Reply-To` name a message
//! of the thread and its subject is the thread's; otherwise Gmail starts a new thread. There
//! is no `drafts.send` or `messages.send` route: mailbroker never sends, and a call to one is
//! answered 404 and logged.

use axum::Json;
use axum::extract::{Path, State as AxState};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use mail_parser::{MessageParser, PartType};
use serde_json::{Value, json};

use crate::api::{Shared, error, lock};
use crate::filters::not_found;
use crate::state::State;

/// The media of an upload, beside its JSON metadata.
#[derive(Debug, Clone)]
pub struct Media {
    pub media_type: String,
    pub bytes: Vec<u8>,
}

fn bad(message: &str) -> Response {
    error(StatusCode::BAD_REQUEST, "badRequest", message)
}

/// Reads a `multipart/related` upload: its JSON metadata and its media; else why not (a
/// `400 badRequest`).
pub fn upload(
    headers: &HeaderMap,
    query: &[(String, String)],
    body: &[u8],
) -> Result<(Vec<u8>, Media), &'static str> {
    let kind = query
        .iter()
        .find(|(k, _)| k == "uploadType")
        .map(|(_, v)| v.as_str());
    if kind != Some("multipart") {
        return Err("The mock takes uploadType=multipart uploads only.");
    }
    let content_type = (headers.get(header::CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.to_ascii_lowercase().starts_with("multipart/related"))
        .ok_or("A multipart upload must be multipart/related.")?;
    let mut whole = format!("Content-Type: {content_type}\r\n\r\n").into_bytes();
    whole.extend_from_slice(body);
    let parsed = MessageParser::default()
        .parse(&whole[..])
        .ok_or("The multipart body could not be read.")?;
    let PartType::Multipart(children) = &parsed.parts[0].body else {
        return Err("The multipart body could not be read.");
    };
    let parts: Vec<_> = children
        .iter()
        .filter_map(|i| parsed.parts.get(*i as usize))
        .collect();
    let [metadata, media] = parts[..] else {
        return Err("A multipart upload has two parts: metadata and media.");
    };
    let media_type = (media.headers.iter())
        .find(|h| h.name.as_str().eq_ignore_ascii_case("Content-Type"))
        .and_then(|h| h.value.as_content_type())
        .map(|c| match c.subtype() {
            Some(sub) => format!("{}/{sub}", c.ctype()),
            None => c.ctype().to_string(),
        })
        .unwrap_or_default();
    Ok((
        metadata.contents().to_vec(),
        Media {
            media_type,
            bytes: media.contents().to_vec(),
        },
    ))
}

/// A message's header fields, unfolded, and its body, as the mock keeps messages.
fn fields(raw: &[u8]) -> Option<(Vec<(String, String)>, String)> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .or_else(|| text.split_once("\n\n"))?;
    let mut headers: Vec<(String, String)> = Vec::new();
    for line in head.lines() {
        match (line.starts_with([' ', '\t']), headers.last_mut()) {
            (true, Some((_, value))) => value.push_str(line),
            _ => {
                let (name, value) = line.split_once(':')?;
                headers.push((name.trim().to_string(), value.trim().to_string()));
            }
        }
    }
    Some((headers, body.to_string()))
}

fn draft_json(s: &State, id: &str) -> Option<Value> {
    let message_id = s.drafts.get(id)?;
    let m = s.messages.get(message_id)?;
    Some(json!({ "id": id, "message": m.json("minimal", &[]) }))
}

/// The thread a draft joins: `thread` when the draft answers one of its messages and keeps
/// its subject, as Gmail requires; else a thread of its own.
fn thread_of(s: &State, thread: Option<&str>, headers: &[(String, String)]) -> Option<String> {
    let thread = thread?;
    let named = |name: &str| -> String {
        (headers.iter())
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let answers = format!("{} {}", named("References"), named("In-Reply-To"));
    let plain = |subject: &str| subject.trim().trim_start_matches("Re:").trim().to_string();
    let in_thread = s.messages.values().filter(|m| m.thread_id == thread);
    let joined = in_thread.into_iter().any(|m| {
        m.header("Message-ID")
            .is_some_and(|id| answers.contains(id.trim()))
            && plain(m.header("Subject").unwrap_or("")) == plain(&named("Subject"))
    });
    joined.then(|| thread.to_string())
}

pub async fn create(
    AxState(state): AxState<Shared>,
    media: Option<axum::Extension<Media>>,
    Json(body): Json<Value>,
) -> Response {
    let raw = match (media, body["message"]["raw"].as_str()) {
        (Some(axum::Extension(media)), _) => media.bytes,
        (None, Some(raw)) => {
            let engine = base64::engine::general_purpose::URL_SAFE;
            match engine
                .decode(raw.trim_end_matches('='))
                .or_else(|_| engine.decode(raw))
            {
                Ok(bytes) => bytes,
                Err(_) => return bad("Invalid value for ByteString"),
            }
        }
        (None, None) => return bad("Missing draft message"),
    };
    let Some((headers, text)) = fields(&raw) else {
        return bad("Invalid RFC822 message");
    };
    if !headers
        .iter()
        .any(|(n, _)| ["to", "cc", "bcc"].contains(&n.to_ascii_lowercase().as_str()))
    {
        return bad("Recipient address required");
    }
    let mut s = lock(&state);
    let thread = thread_of(&s, body["message"]["threadId"].as_str(), &headers);
    let id = s.add_message(headers, &text, &["DRAFT"]);
    if let (Some(thread), Some(m)) = (thread, s.messages.get_mut(&id)) {
        m.thread_id = thread;
    }
    s.next_draft += 1;
    let draft_id = format!("r-{:019}", s.next_draft);
    s.drafts.insert(draft_id.clone(), id);
    Json(draft_json(&s, &draft_id)).into_response()
}

pub async fn get(
    AxState(state): AxState<Shared>,
    Path((_, id)): Path<(String, String)>,
) -> Response {
    match draft_json(&lock(&state), &id) {
        Some(draft) => Json(draft).into_response(),
        None => not_found(),
    }
}

/// Deletes a draft for good (Gmail's `drafts.delete` does not move it to the trash).
pub async fn delete(
    AxState(state): AxState<Shared>,
    Path((_, id)): Path<(String, String)>,
) -> Response {
    let mut s = lock(&state);
    let Some(message) = s.drafts.remove(&id) else {
        return not_found();
    };
    s.delete_many(&[message]);
    StatusCode::NO_CONTENT.into_response()
}

/// What `drafts.update` does to a draft: its message replaced by a new one (a new message
/// id), as when the person edits it in Gmail.
pub fn edit(s: &mut State, draft: &str) -> Option<String> {
    let old = s.drafts.get(draft)?.clone();
    let m = s.messages.get(&old)?.clone();
    s.delete_many(&[old]);
    let body = format!("{}\r\n(edited)", m.body);
    let id = s.add_message(m.headers.clone(), &body, &["DRAFT"]);
    if let Some(new) = s.messages.get_mut(&id) {
        new.thread_id = m.thread_id;
    }
    s.drafts.insert(draft.to_string(), id.clone());
    Some(id)
}
