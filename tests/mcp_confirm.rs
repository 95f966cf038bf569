//! The input-required confirmation (protocol 2026-07-28) cannot be forged or reused: its
//! request state is keyed by the server, single-use, and honoured only as the answer to an
//! input request that server issued.

mod common;

use std::path::Path;

use common::mcp::{client, connect, connect_modern, ids};
use common::{add_account, ok, seed, server};
use rmcp::model::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// 5 INBOX messages for `user`, synced into a fresh home.
async fn setup(user: &str) -> Option<(tempfile::TempDir, mailbroker_testkit::ImapClient)> {
    let server = server()?;
    let home = tempfile::tempdir().unwrap();
    let imap = seed(server, user, "INBOX", 5).await;
    add_account(server, home.path(), "c", user, &[]);
    ok(home.path(), &["sync"]);
    Some((home, imap))
}

fn to_trash(id: i64) -> Value {
    json!({ "ids": [id], "move_to": "trash" })
}

/// An elicitation's answer in an input-required retry: yes or no.
fn answer(yes: bool) -> InputResponses {
    let mut responses = InputResponses::new();
    let action = if yes { "accept" } else { "decline" };
    responses.insert(
        "confirm".into(),
        json!({ "action": action, "content": { "confirm": yes } }),
    );
    responses
}

/// Calls update_message once (no input-required round trip is driven), optionally as the
/// retry with `state` and a yes.
async fn call_once(
    session: &common::mcp::Session,
    args: &Value,
    state: Option<String>,
) -> CallToolResponse {
    answer_once(session, args, state, true).await
}

async fn answer_once(
    session: &common::mcp::Session,
    args: &Value,
    state: Option<String>,
    yes: bool,
) -> CallToolResponse {
    let mut params = CallToolRequestParams::new("update_message")
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    if let Some(state) = state {
        params.request_state = Some(state);
        params.input_responses = Some(answer(yes));
    }
    session.call_tool_once(params).await.expect("a result")
}

/// The request state of an input request the server issues for `args`.
async fn asked_state(session: &common::mcp::Session, args: &Value) -> String {
    let first = call_once(session, args, None).await;
    let CallToolResponse::InputRequired(asked) = first else {
        panic!("a move to trash must ask: {first:?}");
    };
    asked.request_state.expect("a request state")
}

/// The error type of a completed call, or panics if it asked for input or succeeded.
fn refused(response: CallToolResponse) -> String {
    let CallToolResponse::Complete(result) = response else {
        panic!("expected a refusal, got {response:?}")
    };
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let body = result.structured_content.unwrap_or(Value::Null);
    body["error_type"].as_str().unwrap_or_default().to_string()
}

async fn trash_count(imap: &mut mailbroker_testkit::ImapClient) -> usize {
    imap.flags("Trash").await.unwrap().len()
}

async fn inbox_ids(home: &Path) -> Vec<i64> {
    let session = connect(home, client(None, ProtocolVersion::V_2025_11_25)).await;
    let found = ids(&session, "in:inbox").await;
    session.cancel().await.ok();
    found
}

#[tokio::test]
async fn a_forged_request_state_is_refused() {
    let Some((home, mut imap)) = setup("cf-forged").await else {
        return;
    };
    let id = inbox_ids(home.path()).await[0];
    // A client that never declared elicitation and was never asked computes the state
    // offline (an unkeyed digest of tool, arguments and ids) and answers "yes" itself.
    let args = to_trash(id);
    // As the server saw them: its typed arguments, defaults included, without dry_run.
    let seen = json!({ "ids": [id], "move_to": "trash", "create_missing_tags": false });
    let mut hasher = Sha256::new();
    hasher.update(b"update_message\0");
    hasher.update(seen.to_string().as_bytes());
    hasher.update(b"\0");
    hasher.update(json!([id]).to_string().as_bytes());
    let forged: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let session = connect_modern(home.path(), client(None, ProtocolVersion::V_2026_07_28)).await;
    for state in [forged, "x".repeat(64), String::new()] {
        let answer = call_once(&session, &args, Some(state)).await;
        assert_eq!(refused(answer), "confirmation_required");
    }
    assert_eq!(trash_count(&mut imap).await, 0);
    session.cancel().await.ok();
}

#[tokio::test]
async fn a_request_state_is_single_use_and_bound_to_its_server() {
    let Some((home, mut imap)) = setup("cf-replay").await else {
        return;
    };
    let inbox = inbox_ids(home.path()).await;
    let args = to_trash(inbox[0]);
    let asking = client(
        Some(ElicitationAction::Accept),
        ProtocolVersion::V_2026_07_28,
    );
    let session = connect_modern(home.path(), asking.clone()).await;
    let state = asked_state(&session, &args).await;
    // Another server process (another key) does not honour it.
    let other = connect_modern(home.path(), asking.clone()).await;
    assert_eq!(
        refused(call_once(&other, &args, Some(state.clone())).await),
        "confirmation_required"
    );
    other.cancel().await.ok();
    // Nor for other arguments.
    let other_args = to_trash(inbox[1]);
    assert_eq!(
        refused(call_once(&session, &other_args, Some(state.clone())).await),
        "confirmation_required"
    );
    // Answered "no", it cannot be answered again with "yes".
    let no = answer_once(&session, &args, Some(state.clone()), false).await;
    assert_eq!(refused(no), "confirmation_declined");
    let replayed = call_once(&session, &args, Some(state)).await;
    assert_eq!(refused(replayed), "confirmation_required");
    assert_eq!(trash_count(&mut imap).await, 0);
    // A fresh request, answered "yes" by its own server, goes ahead.
    let state = asked_state(&session, &args).await;
    let CallToolResponse::Complete(done) = call_once(&session, &args, Some(state)).await else {
        panic!("the answered request should complete");
    };
    assert_ne!(done.is_error, Some(true), "{done:?}");
    assert_eq!(trash_count(&mut imap).await, 1);
    session.cancel().await.ok();
}

#[tokio::test]
async fn with_confirm_with_token_the_dry_runs_token_is_enough() {
    let Some((home, mut imap)) = setup("cf-token").await else {
        return;
    };
    let inbox = inbox_ids(home.path()).await;
    let (id, other) = (inbox[0], inbox[1]);
    let options = mailbroker::mcp::McpOptions {
        confirm_with_token: true,
        ..Default::default()
    };
    let session = common::mcp::connect_with(
        home.path(),
        client(None, ProtocolVersion::V_2025_11_25),
        options,
    )
    .await;
    let mut dry = to_trash(id);
    dry["dry_run"] = true.into();
    let plan = common::mcp::ok_call(&session, "update_message", dry).await;
    let token = plan["confirm_token"].as_str().unwrap().to_string();
    let step = plan["next_step"].as_str().unwrap();
    assert!(!step.contains("mailbroker approve"), "{plan}");
    let mut real = to_trash(id);
    real["confirm_token"] = token.into();
    let done = common::mcp::ok_call(&session, "update_message", real).await;
    assert_eq!(done["applied"], 1, "{done}");
    assert_eq!(trash_count(&mut imap).await, 1);

    // The token binds the set of messages, not the order they were listed in.
    let pair = |ids: [i64; 2]| json!({ "ids": ids, "move_to": "trash" });
    let mut dry = pair([other, id]);
    dry["dry_run"] = true.into();
    let plan = common::mcp::ok_call(&session, "update_message", dry).await;
    let token = plan["confirm_token"].as_str().unwrap().to_string();
    let mut more = json!({ "ids": [other, id, inbox[2]], "move_to": "trash" });
    more["confirm_token"] = token.clone().into();
    let refused = common::mcp::err_call(&session, "update_message", more).await;
    assert_eq!(refused["error_type"], "confirmation_required", "{refused}");
    let mut reordered = pair([id, other]);
    reordered["confirm_token"] = token.into();
    let done = common::mcp::ok_call(&session, "update_message", reordered).await;
    // The first message is in the trash already: unchanged.
    assert_eq!(
        (&done["applied"], &done["unchanged"]),
        (&json!(1), &json!(1)),
        "{done}"
    );
    assert_eq!(trash_count(&mut imap).await, 2);
    session.cancel().await.ok();
}

/// The request state's signature was decoded leniently: an odd trailing digit or a pair that
/// is not hex was dropped, so texts other than the one issued verified. Only the exact state
/// is honoured; the malformed ones leave it unanswered, and it still works afterwards.
#[tokio::test]
async fn a_malformed_request_state_is_refused() {
    let Some((home, mut imap)) = setup("cf-malformed").await else {
        return;
    };
    let id = inbox_ids(home.path()).await[0];
    let args = to_trash(id);
    let asking = client(
        Some(ElicitationAction::Accept),
        ProtocolVersion::V_2026_07_28,
    );
    let session = connect_modern(home.path(), asking).await;
    let state = asked_state(&session, &args).await;
    let (head, signature) = state.rsplit_once('.').unwrap();
    let (first, rest) = signature.split_at(2);
    for malformed in [
        format!("{state}0"),
        format!("{head}.{first}zz{rest}"),
        format!("{head}.{first}{}{rest}", "\u{e9}"),
        format!("{head}.{}", signature.to_uppercase()),
    ] {
        let answer = call_once(&session, &args, Some(malformed.clone())).await;
        assert_eq!(refused(answer), "confirmation_required", "{malformed}");
    }
    assert_eq!(trash_count(&mut imap).await, 0);
    let CallToolResponse::Complete(done) = call_once(&session, &args, Some(state)).await else {
        panic!("the exact state should complete");
    };
    assert_ne!(done.is_error, Some(true), "{done:?}");
    assert_eq!(trash_count(&mut imap).await, 1);
    session.cancel().await.ok();
}
