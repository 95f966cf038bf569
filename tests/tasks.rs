//! MCP's Tasks extension against a real Dovecot: a client that declares it gets a write over
//! 20,000 messages back as a task, polls it to its end (progress in messages and the journal's
//! change), and the journal and the server agree; a task cancelled while its first batch is
//! on the wire stops at that batch's end, each message sent once, the rest recorded as not
//! sent.

mod common;

use std::time::Duration;

use common::{add_proxied, ok, server, until_held};
use mailbroker_testkit::{Proxy, message};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ElicitationAction, GetTaskParams,
    GetTaskResult, ProtocolVersion, TaskStatus,
};
use serde_json::{Value, json};

const N: usize = 20_000;

fn tasking() -> common::mcp::Client {
    let mut client = common::mcp::client(
        Some(ElicitationAction::Accept),
        ProtocolVersion::V_2025_11_25,
    );
    client.tasks = true;
    client
}

/// Starts `update_message` with `args`: the task's id.
async fn started(session: &common::mcp::Session, args: Value) -> String {
    started_tool(session, "update_message", args).await
}

async fn started_tool(session: &common::mcp::Session, tool: &'static str, args: Value) -> String {
    let params =
        CallToolRequestParams::new(tool).with_arguments(args.as_object().cloned().unwrap());
    match session.call_tool_once(params).await.unwrap() {
        CallToolResponse::Task(task) => task.task.task_id,
        other => panic!("not a task: {other:?}"),
    }
}

/// Polls task `id` to its end: its last answer, and the most messages seen settled before.
async fn polled(session: &common::mcp::Session, id: &str) -> (GetTaskResult, u64) {
    let mut most = 0;
    for _ in 0..1200 {
        let got = session.get_task(GetTaskParams::new(id)).await.unwrap();
        if got.task.task.status.is_terminal() {
            return (got, most);
        }
        let meta = got.meta.as_ref().map(|m| m.0.clone()).unwrap_or_default();
        most = most.max(meta["mailbroker/settled"].as_u64().unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {id} never ended");
}

fn change_of(got: &GetTaskResult) -> String {
    let meta = got.meta.as_ref().expect("progress").0.clone();
    meta["mailbroker/change_id"].to_string()
}

fn seen_on_server(dovecot: &mailbroker_testkit::Dovecot, user: &str) -> usize {
    let found = dovecot
        .doveadm(&["search", "-u", user, "mailbox", "INBOX", "SEEN"])
        .unwrap();
    found.lines().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_update_runs_as_a_task_and_a_cancelled_one_stops_at_a_batch() {
    let Some(dovecot) = server() else {
        return;
    };
    let user = "tasks-20k";
    let bodies = (0..N).map(|i| message(i, "bulk@example.test", &format!("Bulk {i}"), "b"));
    dovecot.import_messages(user, bodies).unwrap();
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let proxy = Proxy::start(dovecot.imap_port, Duration::ZERO).unwrap();
    add_proxied(h, "big", proxy.port, user);
    ok(h, &["sync"]);
    let session = common::mcp::connect(h, tasking()).await;

    // Run to its end, polled: the journal and the server agree, each message written once.
    // While its first batch is held on the wire, the task says where it stands.
    proxy.take_sent();
    proxy.hold_at("UID STORE");
    let id = started(&session, json!({ "query": "from:bulk", "read": true })).await;
    until_held(&proxy, "the first batch's STORE").await;
    let working = session.get_task(GetTaskParams::new(&id)).await.unwrap();
    assert_eq!(working.task.task.status, TaskStatus::Working, "{working:?}");
    let meta = working.meta.as_ref().unwrap().0.clone();
    assert_eq!(
        (&meta["mailbroker/settled"], &meta["mailbroker/planned"]),
        (&json!(0), &json!(N))
    );
    assert!(
        meta["mailbroker/change_id"].is_number(),
        "journaled before the first batch"
    );
    proxy.release();
    let (done, most) = polled(&session, &id).await;
    assert_eq!(done.task.task.status, TaskStatus::Completed, "{done:?}");
    let result = serde_json::to_value(&done).unwrap();
    assert_eq!(
        result["result"]["structuredContent"]["applied"], N,
        "{result}"
    );
    assert!(
        most <= N as u64,
        "progress never passes what was planned: {most}"
    );
    let change = ok(h, &["changes", &change_of(&done)]);
    assert_eq!(change["change"]["applied"], N, "{change}");
    assert_eq!(seen_on_server(dovecot, user), N);
    let stores = proxy
        .take_sent()
        .lines()
        .filter(|l| l.contains("UID STORE"))
        .count();
    assert_eq!(stores, N / 1000, "one STORE a checkpoint");

    // A sync is a task too; its result is the tool's.
    let id = started_tool(&session, "sync_accounts", json!({})).await;
    let (synced, _) = polled(&session, &id).await;
    let synced = serde_json::to_value(&synced).unwrap();
    assert_eq!(synced["status"], "completed", "{synced}");
    assert_eq!(
        synced["result"]["structuredContent"]["accounts"][0]["account"], "big",
        "{synced}"
    );

    // Cancelled while its first batch is held on the way: that batch lands, nothing more is
    // sent, and the journal says which is which.
    proxy.hold_at("UID STORE");
    let id = started(&session, json!({ "query": "from:bulk", "read": false })).await;
    until_held(&proxy, "the first batch's STORE").await;
    session
        .cancel_task(CancelTaskParams::new(&id))
        .await
        .unwrap();
    proxy.release();
    let (ended, _) = polled(&session, &id).await;
    assert_eq!(ended.task.task.status, TaskStatus::Cancelled, "{ended:?}");
    let change = ok(h, &["changes", &change_of(&ended)]);
    assert_eq!(change["change"]["applied"], 1000, "{change}");
    assert_eq!(change["change"]["failed"], N - 1000, "{change}");
    assert_eq!(seen_on_server(dovecot, user), N - 1000);
    let stores = proxy
        .take_sent()
        .lines()
        .filter(|l| l.contains("UID STORE"))
        .count();
    assert_eq!(stores, 1, "nothing sent after the stop, nothing sent twice");
    session.cancel().await.ok();
}

/// A client of 2026-07-28 learns the server takes tasks from `server/discover`, and may keep
/// that and the tool list for an hour (`ttlMs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_says_tasks_are_taken_and_how_long_to_keep_it() {
    let home = tempfile::tempdir().unwrap();
    let session = common::mcp::connect_modern(home.path(), tasking()).await;
    let found = session
        .discover(rmcp::model::RequestMetaObject::default())
        .await
        .unwrap();
    assert!(found.capabilities.supports_tasks(), "{found:?}");
    assert_eq!(found.ttl_ms, 3_600_000);
    let tools = session.list_tools(None).await.unwrap();
    assert_eq!(tools.ttl_ms, Some(3_600_000));
    session.cancel().await.ok();
}
