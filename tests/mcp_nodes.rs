//! Two `serve` nodes of one index (on SQLite in one home; on PostgreSQL each in a home of its
//! own, one database URL), behind a round-robin proxy: an MCP client (rmcp's,
//! protocol 2026-07-28, which has no sessions) whose every request goes to the next process
//! initializes, searches, is asked to confirm a move to Trash by one process and has its
//! answer honoured by the other, once, when the processes share a key file
//! (`MAILBROKER_SECRET_KEY_FILE`); without one, each process honours only its own.

mod common;

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use common::Team;
use common::mcp::{HTTP_TOKEN, client, http_session_modern, ids, serve_node_env, setup_on};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitationAction, InputResponses, ProtocolVersion,
};
use serde_json::{Value, json};

/// A reverse proxy that sends each request to the next of `upstreams` (base URLs), and the
/// index of the upstream each request went to.
async fn round_robin(upstreams: Vec<String>) -> (String, Arc<Mutex<Vec<usize>>>) {
    let served = Arc::new(Mutex::new(Vec::new()));
    let seen = served.clone();
    let http = reqwest::Client::new();
    let forward = move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
        let (http, served, upstreams) = (http.clone(), seen.clone(), upstreams.clone());
        async move {
            let next = {
                let mut served = served.lock().unwrap();
                let next = served.len() % upstreams.len();
                served.push(next);
                next
            };
            let mut request = http.request(method, format!("{}{}", upstreams[next], uri));
            for (name, value) in &headers {
                // The upstream checks Host against its own address, as a proxy sets it.
                if name != "host" && name != "content-length" {
                    request = request.header(name, value);
                }
            }
            let answer = request.body(body).send().await.unwrap();
            let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
            let mut out = HeaderMap::new();
            for (name, value) in answer.headers() {
                if name != "content-length" && name != "transfer-encoding" {
                    out.insert(name.clone(), value.clone());
                }
            }
            // Streamed as it comes: an answer may be a stream of events.
            let chunks = futures::stream::unfold(answer, |mut answer| async move {
                let chunk = answer.chunk().await.ok().flatten()?;
                Some((Ok::<_, std::io::Error>(chunk), answer))
            });
            (status, out, axum::body::Body::from_stream(chunks))
        }
    };
    let app = axum::Router::new().fallback(forward);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, served)
}

fn base(url: &str) -> String {
    url.trim_end_matches("/mcp").to_string()
}

/// Asks to move `id` to Trash, then answers yes with the state it was given: the answer.
async fn ask_then_answer(proxy: &str, id: i64) -> CallToolResponse {
    let asking = client(
        Some(ElicitationAction::Accept),
        ProtocolVersion::V_2026_07_28,
    );
    let session = http_session_modern(proxy, HTTP_TOKEN, asking).await;
    assert!(ids(&session, "in:inbox").await.contains(&id));
    let args = json!({ "ids": [id], "move_to": "trash" });
    let params = CallToolRequestParams::new("update_message")
        .with_arguments(args.as_object().cloned().unwrap());
    let asked = session.call_tool_once(params.clone()).await.unwrap();
    let CallToolResponse::InputRequired(asked) = asked else {
        panic!("a move to Trash must ask: {asked:?}");
    };
    let mut answer = InputResponses::new();
    answer.insert(
        "confirm".into(),
        json!({ "action": "accept", "content": { "confirm": true } }),
    );
    let mut again = params;
    again.request_state = asked.request_state;
    again.input_responses = Some(answer);
    let done = session.call_tool_once(again).await.unwrap();
    session.cancel().await.ok();
    done
}

fn body(response: &CallToolResponse) -> Value {
    let CallToolResponse::Complete(result) = response else {
        panic!("expected a result, got {response:?}");
    };
    result.structured_content.clone().unwrap_or(Value::Null)
}

/// The key file each machine is given a copy of (the same key), in its home: the team's
/// key, which on PostgreSQL also sealed the account's password.
fn key_file(home: &std::path::Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let key = home.join("secret.key");
    std::fs::copy(common::team_key_file(), &key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    key.display().to_string()
}

async fn a_confirmation_asked_by_one_process_is_answered_on_another(team: Team) {
    let user = format!("nodes-rr-{}", team.name());
    let Some((imap, h)) = setup_on(&user, team.third()).await else {
        return;
    };
    let mut imap = imap;
    let (n0, n1) = (team.node(0), team.node(1));
    let keys = [key_file(n0), key_file(n1)];
    let inbox = common::message_ids(&common::ok(h, &["search", "in:inbox"]));

    // Without a shared key, the other process does not honour the answer: nothing moves.
    let no_key = [("MAILBROKER_SECRET_KEY_FILE", "")];
    let (a, b) = (serve_node_env(n0, &no_key), serve_node_env(n1, &no_key));
    let (proxy, served) = round_robin(vec![base(&a.1), base(&b.1)]).await;
    let refused = body(&ask_then_answer(&proxy, inbox[0]).await);
    assert_eq!(refused["error_type"], "confirmation_required", "{refused}");
    assert!(imap.flags("Trash").await.unwrap().is_empty());
    assert!(served.lock().unwrap().contains(&1));
    drop((a, b));

    // With it, either process honours what the other asked, once.
    let (a, b) = (
        serve_node_env(n0, &[("MAILBROKER_SECRET_KEY_FILE", &keys[0])]),
        serve_node_env(n1, &[("MAILBROKER_SECRET_KEY_FILE", &keys[1])]),
    );
    let (proxy, served) = round_robin(vec![base(&a.1), base(&b.1)]).await;
    let done = body(&ask_then_answer(&proxy, inbox[0]).await);
    assert_eq!(done["applied"], 1, "{done}");
    assert_eq!(imap.flags("Trash").await.unwrap().len(), 1);
    let served = served.lock().unwrap().clone();
    assert!(
        served.contains(&0) && served.contains(&1),
        "both processes served: {served:?}"
    );

    // A client of the protocols with sessions: the process that did not start its session
    // restores it from the index, rather than answering 404.
    let legacy = common::mcp::http_session(&proxy, HTTP_TOKEN).await;
    for _ in 0..3 {
        assert_eq!(ids(&legacy, "in:inbox").await.len(), inbox.len() - 1);
    }
    legacy.cancel().await.ok();
}

/// On SQLite the processes share a home (one machine); on PostgreSQL each runs in a home of
/// its own, given one database URL (machines of a team).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_asked_by_one_process_is_answered_on_another_on_sqlite() {
    a_confirmation_asked_by_one_process_is_answered_on_another(Team::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_asked_by_one_process_is_answered_on_another_on_postgres() {
    let Some(team) = Team::postgres() else {
        return;
    };
    a_confirmation_asked_by_one_process_is_answered_on_another(team).await;
}
