//! Drafts as Graph v1.0 makes them: `createReply` and `createReplyAll` (a draft in Drafts
//! answering the message, in its conversation, to its sender, and for all to its other
//! recipients but the user), `POST /me/messages` (a new draft), a `PATCH` of what a draft
//! alone may change (`subject`, `body`, `toRecipients`, `ccRecipients`), and `DELETE`. There
//! is no `send`, `reply`, `replyAll`, `forward` or `sendMail` route: those send, and a call
//! to one is refused and logged as unsupported.

use serde_json::{Map, Value};

use crate::api::{Answer, answer, error, not_found};
use crate::state::{DraftPart, Message, State};

const USER: &str = "me@mock.example";

fn addresses(list: Option<&Value>) -> Result<Vec<String>, Answer> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let items = list
        .as_array()
        .ok_or_else(|| error(400, "ErrorInvalidRecipients", "recipients must be a list"))?;
    (items.iter())
        .map(|r| {
            let address = r["emailAddress"]["address"].as_str().unwrap_or_default();
            match address.contains('@') && !address.contains(['\r', '\n', ' ']) {
                true => Ok(address.to_string()),
                false => Err(error(
                    400,
                    "ErrorInvalidRecipients",
                    "At least one recipient is not valid.",
                )),
            }
        })
        .collect()
}

fn new_draft(
    state: &mut State,
    subject: String,
    part: DraftPart,
    conversation: Option<String>,
) -> Value {
    let id = state.new_id("msg");
    let changed = state.touch_next();
    let folder = state
        .folder("drafts")
        .map(|f| f.id.clone())
        .unwrap_or_default();
    let m = Message {
        id: id.clone(),
        folder,
        subject,
        from: USER.into(),
        received: "2026-12-01T10:00:00Z".into(),
        is_read: true,
        flag: "notFlagged".into(),
        categories: Vec::new(),
        internet_message_id: format!("<{}@mock.example>", id.to_ascii_lowercase()),
        internet_headers: Vec::new(),
        conversation,
        changed,
        draft: Some(part),
        attachments: Vec::new(),
    };
    let json = m.json();
    state.messages.insert(id, m);
    json
}

/// `POST /me/messages/{id}/createReply` (or `createReplyAll`, `all`).
pub fn create_reply(state: &mut State, id: &str, all: bool) -> Answer {
    let Some(original) = state.messages.get(id).cloned() else {
        return not_found("message");
    };
    let mut to = vec![original.from.clone()];
    let mut cc = Vec::new();
    if all {
        let json = original.json();
        for (field, into) in [("toRecipients", &mut to), ("ccRecipients", &mut cc)] {
            let listed = addresses(json.get(field)).unwrap_or_default();
            into.extend(listed.into_iter().filter(|a| !a.eq_ignore_ascii_case(USER)));
        }
    }
    let part = DraftPart {
        to,
        cc,
        body: String::new(),
        in_reply_to: Some(original.internet_message_id.clone()),
    };
    let conversation = original
        .conversation
        .clone()
        .unwrap_or_else(|| format!("conv-{}", original.id));
    let subject = format!("RE: {}", original.subject);
    answer(201, new_draft(state, subject, part, Some(conversation)))
}

/// `POST /me/messages`: a new draft in Drafts.
pub fn create(state: &mut State, body: &Value) -> Answer {
    let (to, cc) = match (
        addresses(body.get("toRecipients")),
        addresses(body.get("ccRecipients")),
    ) {
        (Ok(to), Ok(cc)) => (to, cc),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let part = DraftPart {
        to,
        cc,
        body: body["body"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        in_reply_to: None,
    };
    let subject = body["subject"].as_str().unwrap_or_default().to_string();
    answer(201, new_draft(state, subject, part, None))
}

/// The fields of a `PATCH` only a draft may change; `None` when it names none of them.
pub fn patch(state: &mut State, id: &str, fields: &Map<String, Value>) -> Option<Answer> {
    const DRAFT_ONLY: [&str; 4] = ["subject", "body", "toRecipients", "ccRecipients"];
    if !fields.keys().any(|k| DRAFT_ONLY.contains(&k.as_str())) {
        return None;
    }
    let others = fields.keys().find(|k| {
        !DRAFT_ONLY.contains(&k.as_str()) && !["isRead", "@odata.type"].contains(&k.as_str())
    });
    if let Some(other) = others {
        return Some(error(
            400,
            "ErrorInvalidPropertyUpdateSentAsReadOnly",
            &format!("The property {other} is read-only or not supported by this mock"),
        ));
    }
    let Some(mut part) = state.messages.get(id).map(|m| m.draft.clone()) else {
        return Some(not_found("message"));
    };
    let Some(part) = part.as_mut() else {
        return Some(error(
            400,
            "ErrorInvalidPropertyUpdateSentAsReadOnly",
            "Only a draft's subject, body and recipients can be changed.",
        ));
    };
    for (field, into) in [
        ("toRecipients", &mut part.to),
        ("ccRecipients", &mut part.cc),
    ] {
        if let Some(list) = fields.get(field) {
            match addresses(Some(list)) {
                Ok(list) => *into = list,
                Err(e) => return Some(e),
            }
        }
    }
    if let Some(content) = fields.get("body").and_then(|b| b["content"].as_str()) {
        part.body = content.to_string();
    }
    let part = part.clone();
    state.touch(id);
    let m = state.messages.get_mut(id)?;
    if let Some(subject) = fields.get("subject").and_then(Value::as_str) {
        m.subject = subject.to_string();
    }
    if let Some(read) = fields.get("isRead").and_then(Value::as_bool) {
        m.is_read = read;
    }
    m.draft = Some(part);
    Some(answer(200, m.json()))
}

/// `DELETE /me/messages/{id}`.
pub fn delete(state: &mut State, id: &str) -> Answer {
    match state.delete_message(id) {
        true => answer(204, Value::Null),
        false => not_found("message"),
    }
}
