//! The Inbox's `messageRules` (list, get, create, delete), as Graph v1.0 documents them: a
//! rule is created with `displayName`, `sequence` and `actions` (each "Required"), answered
//! `201 Created` with the rule as Exchange keeps it (`hasError`, `isReadOnly`, and the
//! `…Contains` strings in capitals, as the reference's example answers them). A folder a rule
//! moves or copies to must exist. The gate has already held the body to the `messageRule`
//! type and the token to `MailboxSettings.Read`/`ReadWrite`. A mailbox whose rules Graph
//! refuses (`State::rules_refused`, as some personal accounts answer) gets 403.

use serde_json::{Value, json};

use crate::api::{Answer, Inner, answer, error, not_found, ok};
use crate::state::State;

/// The predicates whose strings Exchange keeps in capitals.
const CONTAINS: [&str; 6] = [
    "bodyContains",
    "bodyOrSubjectContains",
    "headerContains",
    "recipientContains",
    "senderContains",
    "subjectContains",
];

fn invalid(message: &str) -> Answer {
    error(400, "ErrorInvalidRequest", message)
}

fn kept(body: &Value, id: String) -> Value {
    let mut rule = body.clone();
    rule["id"] = json!(id);
    rule["hasError"] = json!(false);
    rule["isReadOnly"] = json!(false);
    if rule.get("isEnabled").is_none_or(Value::is_null) {
        rule["isEnabled"] = json!(true);
    }
    for part in ["conditions", "exceptions"] {
        for key in CONTAINS {
            if let Some(Value::Array(items)) = rule.get_mut(part).and_then(|p| p.get_mut(key)) {
                for item in items.iter_mut() {
                    if let Some(s) = item.as_str() {
                        *item = json!(s.to_uppercase());
                    }
                }
            }
        }
    }
    rule
}

fn create(state: &mut State, req: &Inner) -> Answer {
    let body = &req.body;
    for required in ["displayName", "sequence", "actions"] {
        if body.get(required).is_none_or(Value::is_null) {
            return invalid(&format!("The property '{required}' is required."));
        }
    }
    if body["sequence"].as_i64().is_none_or(|n| n < 1) {
        return invalid("The property 'sequence' must be a positive number.");
    }
    for folder in ["moveToFolder", "copyToFolder"] {
        if let Some(id) = body["actions"][folder].as_str()
            && state.folder(id).is_none()
        {
            return error(
                404,
                "ErrorItemNotFound",
                "The specified object was not found in the store.",
            );
        }
    }
    let id = state.new_id("rule");
    let rule = kept(body, id.clone());
    state.rules.insert(id, rule.clone());
    answer(201, rule)
}

/// Answers a request under `me/mailFolders/{folder}/messageRules`.
pub fn route(state: &mut State, req: &Inner, folder: &str, rest: &[&str]) -> Answer {
    if state.folder(folder).and_then(|f| f.well_known) != Some("inbox") {
        return not_found("folder");
    }
    if state.rules_refused {
        return error(
            403,
            "ErrorAccessDenied",
            "Access is denied. Check credentials and try again.",
        );
    }
    match (req.method.as_str(), rest) {
        ("GET", []) => ok(json!({ "value": state.rules.values().collect::<Vec<_>>() })),
        ("POST", []) => create(state, req),
        ("GET", [id]) => match state.rules.get(*id) {
            Some(rule) => ok(rule.clone()),
            None => not_found("rule"),
        },
        ("DELETE", [id]) => match state.rules.remove(*id) {
            Some(_) => answer(204, Value::Null),
            None => not_found("rule"),
        },
        _ => error(400, "BadRequest", "Unsupported request"),
    }
}
