//! A message's file attachments: `GET me/messages/{id}/attachments` (a collection of
//! `microsoft.graph.fileAttachment`, `$select` honoured) and, as the attachment reference
//! documents, `…/attachments/{id}/$value`, the raw contents.

use serde_json::{Value, json};

use crate::api::{Answer, Inner, not_found, ok, raw, select};
use crate::state::{FileAttachment, State};

fn json_of(a: &FileAttachment) -> Value {
    use base64::Engine;
    json!({
        "@odata.type": "#microsoft.graph.fileAttachment",
        "id": a.id,
        "name": a.name,
        "contentType": a.content_type,
        "size": a.bytes.len(),
        "isInline": false,
        "lastModifiedDateTime": "2026-11-01T10:00:00Z",
        "contentBytes": base64::engine::general_purpose::STANDARD.encode(&a.bytes),
    })
}

pub fn list(state: &State, message: &str, req: &Inner) -> Answer {
    let Some(m) = state.messages.get(message) else {
        return not_found("message");
    };
    let value: Vec<Value> = (m.attachments.iter())
        .map(|a| select(json_of(a), req.query.get("$select")))
        .collect();
    ok(json!({ "value": value }))
}

pub fn value(state: &State, message: &str, attachment: &str) -> Answer {
    let found = (state.messages.get(message))
        .and_then(|m| m.attachments.iter().find(|a| a.id == attachment));
    match found {
        Some(a) => raw(a.bytes.clone(), &a.content_type),
        None => not_found("attachment"),
    }
}
