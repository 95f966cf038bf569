//! A message's parts as `format=full` gives them, in the discovery document's `MessagePart`
//! (`partId`, `mimeType`, `filename`, `headers`, `body`, `parts`), and
//! `users.messages.attachments.get`. As the document's `MessagePartBody` says, a part's body
//! is either inline (`data`, base64url) or kept apart under an `attachmentId` for a separate
//! request: here, a part with a file name or that is not text is kept apart.

use axum::extract::{Path, State as AxState};
use axum::response::{IntoResponse, Response};
use axum::{Json, http::StatusCode};
use mail_parser::{Message, MessageParser, MimeHeaders, PartType};
use serde_json::{Value, json};

use crate::api::{Shared, error, lock};

fn base64url(bytes: &[u8]) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE, bytes)
}

/// The attachment id of part `part_id` of message `message`: opaque to a client.
fn attachment_id(message: &str, part_id: &str) -> String {
    format!(
        "ANGj{}",
        base64url(format!("{message}/{part_id}").as_bytes())
    )
}

fn part_id_of(message: &str, attachment: &str) -> Option<String> {
    let encoded = attachment.strip_prefix("ANGj")?;
    let bytes = base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE, encoded).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (owner, part) = text.split_once('/')?;
    (owner == message).then(|| part.to_string())
}

fn mime_type(part: &mail_parser::MessagePart<'_>) -> String {
    part.content_type()
        .map(|c| match c.subtype() {
            Some(sub) => format!("{}/{sub}", c.ctype()).to_ascii_lowercase(),
            None => c.ctype().to_ascii_lowercase(),
        })
        .unwrap_or_else(|| "text/plain".into())
}

/// Part `index` of `parsed` as a `MessagePart`, numbered `part_id`.
fn part_json(parsed: &Message<'_>, index: usize, part_id: &str, message: &str) -> Value {
    let Some(part) = parsed.parts.get(index) else {
        return json!({});
    };
    let raw = parsed.raw_message();
    let headers: Vec<Value> = (part.headers.iter())
        .map(|h| {
            let value = raw
                .get(h.offset_start as usize..h.offset_end as usize)
                .map(|v| String::from_utf8_lossy(v).trim().replace("\r\n", ""))
                .unwrap_or_default();
            json!({ "name": h.name.as_str(), "value": value })
        })
        .collect();
    let filename = part.attachment_name().unwrap_or_default();
    let mut v = json!({
        "partId": part_id, "mimeType": mime_type(part), "filename": filename,
        "headers": headers,
    });
    match &part.body {
        PartType::Multipart(children) => {
            v["body"] = json!({ "size": 0 });
            v["parts"] = (children.iter().enumerate())
                .map(|(n, child)| {
                    let id = match part_id {
                        "" => n.to_string(),
                        _ => format!("{part_id}.{n}"),
                    };
                    part_json(parsed, *child as usize, &id, message)
                })
                .collect();
        }
        body => {
            let contents = part.contents();
            let text = matches!(body, PartType::Text(_) | PartType::Html(_));
            v["body"] = match filename.is_empty() && text {
                true => json!({ "size": contents.len(), "data": base64url(contents) }),
                false => json!({
                    "size": contents.len(), "attachmentId": attachment_id(message, part_id),
                }),
            };
        }
    }
    v
}

/// The `payload` of message `message` whose source is `source`.
pub fn payload(source: &[u8], message: &str) -> Value {
    match MessageParser::default().parse(source) {
        Some(parsed) => part_json(&parsed, 0, "", message),
        None => {
            json!({ "partId": "", "mimeType": "text/plain", "filename": "", "body": { "size": 0 } })
        }
    }
}

/// The decoded body of the part `part_id` names in `source`.
fn part_body(source: &[u8], part_id: &str) -> Option<Vec<u8>> {
    let parsed = MessageParser::default().parse(source)?;
    let mut index = 0usize;
    for step in part_id.split('.').filter(|s| !s.is_empty()) {
        let n: usize = step.parse().ok()?;
        match &parsed.parts.get(index)?.body {
            PartType::Multipart(children) => index = *children.get(n)? as usize,
            _ => return None,
        }
    }
    Some(parsed.parts.get(index)?.contents().to_vec())
}

/// `GET …/messages/{messageId}/attachments/{id}`: a `MessagePartBody`.
pub async fn get(
    AxState(state): AxState<Shared>,
    Path((_, message, id)): Path<(String, String, String)>,
) -> Response {
    let s = lock(&state);
    let body = (s.messages.get(&message))
        .zip(part_id_of(&message, &id))
        .and_then(|(m, part)| part_body(&m.source(), &part));
    match body {
        Some(bytes) => {
            Json(json!({ "size": bytes.len(), "data": base64url(&bytes) })).into_response()
        }
        None => error(
            StatusCode::NOT_FOUND,
            "notFound",
            "Requested entity was not found.",
        ),
    }
}
