//! `serve` as an OAuth authorization server for hosted MCP clients, against the official
//! TypeScript SDK's OAuth client (`tests/oauth_client.mjs`) and a person consenting in the
//! console in Chromium with a virtual authenticator as their passkey: discovery from the 401,
//! registration (Dynamic Client Registration, and a client id metadata document served over
//! https with a private CA), the code flow with PKCE, a grant that opens one account read
//! only, refresh, and revocation; and what must be refused.

mod common;

use std::path::{Path, PathBuf};

use common::browser::{CHROMIUM, PLAYWRIGHT, chromium, enroll_link};
use common::{add_account, ok, server};
use serde_json::{Value, json};

const SDK: &str = "@modelcontextprotocol/sdk@1.32.2";
const REDIRECT: &str = "http://127.0.0.1:9/callback";

/// The client script with the SDK and playwright-core beside it; `None` when node or
/// Chromium is missing outside CI (under CI that fails instead).
fn client_script() -> Option<PathBuf> {
    if !chromium() {
        return None;
    }
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let script = tests.join("oauth_client.mjs");
    let main = mailbroker_testkit::node_script(tmp, "oauth-ts", &[SDK, PLAYWRIGHT], &script)?;
    for other in [
        "console_launch.mjs",
        "oauth_browser.mjs",
        "oauth_consent.mjs",
    ] {
        std::fs::copy(tests.join(other), main.with_file_name(other)).expect("copy a script");
    }
    Some(main)
}

fn port_of(url: &str) -> u16 {
    (url.rsplit(':').next())
        .and_then(|tail| tail.trim_end_matches("/mcp").parse().ok())
        .unwrap_or_else(|| panic!("no port in {url}"))
}

/// An `initialize` with `token`: its status and `WWW-Authenticate`.
async fn initialize(mcp: &str, token: &str) -> (u16, String) {
    let answer = reqwest::Client::new()
        .post(mcp)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    let challenge = (answer.headers().get("www-authenticate"))
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (answer.status().as_u16(), challenge)
}

async fn refresh(origin: &str, client_id: &str, token: &str) -> (u16, Value) {
    let answer = reqwest::Client::new()
        .post(format!("{origin}/oauth/token"))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", token),
            ("client_id", client_id),
        ])
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap())
}

/// What an authorization request for `client_id` comes to, followed by nothing: its status
/// and where it sends the browser, or what it shows.
async fn authorize(origin: &str, client_id: &str, resource: &str) -> (u16, String) {
    authorize_to(origin, client_id, resource, REDIRECT).await
}

/// The same, asking to be sent back to `redirect`.
async fn authorize_to(
    origin: &str,
    client_id: &str,
    resource: &str,
    redirect: &str,
) -> (u16, String) {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let answer = http
        .get(format!("{origin}/oauth/authorize"))
        .query(&[
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", redirect),
            (
                "code_challenge",
                "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            ),
            ("code_challenge_method", "S256"),
            ("resource", resource),
        ])
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let location = (answer.headers().get("location")).map(|v| v.to_str().unwrap().to_string());
    (status, location.unwrap_or(answer.text().await.unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_client_connects_by_oauth_sees_what_the_person_granted_and_is_revoked() {
    let Some(server) = server() else {
        return;
    };
    let Some(script) = client_script() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::seed(server, "oauth-work", "INBOX", 3).await;
    common::seed(server, "oauth-home", "INBOX", 2).await;
    add_account(server, h, "work", "oauth-work", &[]);
    add_account(server, h, "home", "oauth-home", &[]);
    ok(h, &["sync"]);
    let serve = common::serve::Serve::start(h);
    let origin = format!("http://localhost:{}", port_of(&serve.url));
    let mcp = format!("{origin}/mcp");
    let shots = tempfile::tempdir().unwrap();

    // Nothing yet: the 401 says where the resource's metadata is, and that names this server.
    let (status, challenge) = initialize(&mcp, "not-a-token").await;
    assert_eq!(status, 401);
    let metadata = format!("{origin}/.well-known/oauth-protected-resource/mcp");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata}\"")),
        "{challenge}"
    );
    let prm: Value = reqwest::get(&metadata).await.unwrap().json().await.unwrap();
    assert_eq!(prm["resource"], mcp.as_str(), "{prm}");
    assert_eq!(prm["authorization_servers"], json!([origin.as_str()]));

    let config = json!({ "mcp": mcp, "enroll": enroll_link(h, &origin), "chromium": CHROMIUM,
        "redirect": REDIRECT, "account": "work", "mode": "r", "shots": shots.path() });
    let seen = mailbroker_testkit::run_client(Path::new("node"), &script, &config);
    assert!(
        seen["client_id"].as_str().unwrap().starts_with("mb-"),
        "registered: {seen}"
    );
    assert!(
        seen["consent"].as_str().unwrap().contains("Test assistant"),
        "{seen}"
    );
    assert_eq!(
        (&seen["state"], &seen["iss"]),
        (&json!("state-123"), &json!(origin))
    );
    let found = seen["search"]["messages"].as_array().expect("messages");
    assert!(!found.is_empty(), "{seen}");
    assert!(
        found.iter().all(|m| m["account"] == "work"),
        "only the granted account: {seen}"
    );
    assert_eq!(seen["refreshed"], "AUTHORIZED", "{seen}");
    assert_ne!(
        seen["first"]["access_token"],
        seen["second"]["access_token"]
    );
    // A code with a wrong verifier is spent; a code presented twice ends what it gave.
    assert_eq!(
        seen["wrong_verifier"]["body"]["error"], "invalid_grant",
        "{seen}"
    );
    assert_eq!(
        seen["after_wrong"]["body"]["error"], "invalid_grant",
        "{seen}"
    );
    assert_eq!(seen["exchanged"]["status"], 200, "{seen}");
    assert_eq!(seen["replayed"]["body"]["error"], "invalid_grant", "{seen}");
    let replayed_token = seen["exchanged"]["body"]["access_token"].as_str().unwrap();
    assert_eq!(
        initialize(&mcp, replayed_token).await.0,
        401,
        "the replayed code's grant ended"
    );

    let client_id = seen["client_id"].as_str().unwrap();
    // `token list` shows the grant; revoking it ends its tokens from the next request on.
    let listed = ok(h, &["token", "list"]);
    let grant = (listed["tokens"].as_array().unwrap().iter())
        .find(|t| t["oauth_client"] == "Test assistant")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(
        (&grant["accounts"], &grant["allow_writes"]),
        (&json!(["work"]), &json!(false))
    );
    let name = grant["name"].as_str().unwrap().to_string();
    let _ = std::fs::remove_dir_all(shots.path());
    // The grant opens `work` only, read only, through every tool, as a scoped token does.
    let access = seen["second"]["access_token"].as_str().unwrap();
    let work = common::message_ids(&ok(h, &["search", "account:work"]));
    let home = common::message_ids(&ok(h, &["search", "account:home"]));
    let scoped = common::mcp::http_session(&mcp, access).await;
    common::mcp::sees_only(&scoped, "work", &work, &home, "home", None).await;
    scoped.cancel().await.ok();
    assert_eq!(initialize(&mcp, access).await.0, 200);
    // Kept as digests only: the index holds none of the tokens.
    let index = common::index_bytes(h);
    for token in [access, seen["second"]["refresh_token"].as_str().unwrap()] {
        assert!(
            !index.windows(token.len()).any(|w| w == token.as_bytes()),
            "a token is in the index"
        );
    }
    // Another server of the same index is another resource: this token was not issued for it.
    let other = common::serve::Serve::start(h);
    let other_mcp = format!("http://localhost:{}/mcp", port_of(&other.url));
    assert_eq!(
        initialize(&other_mcp, access).await.0,
        401,
        "a token for another resource"
    );
    drop(other);
    ok(h, &["token", "revoke", &name]);
    let (status, challenge) = initialize(&mcp, access).await;
    assert_eq!(status, 401);
    assert!(challenge.contains("resource_metadata="), "{challenge}");
    let latest = seen["second"]["refresh_token"].as_str().unwrap();
    assert_eq!(
        refresh(&origin, client_id, latest).await.1["error"],
        "invalid_grant"
    );

    // A refresh token is used once (and the revoked grant's latest opens nothing either).
    let used = seen["first"]["refresh_token"].as_str().unwrap();
    let (status, said) = refresh(&origin, client_id, used).await;
    assert_eq!((status, &said["error"]), (400, &json!("invalid_grant")));

    let latest = seen["second"]["refresh_token"].as_str().unwrap();
    assert_eq!(
        refresh(&origin, client_id, latest).await.1["error"],
        "invalid_grant"
    );

    // What is refused before any consent: another resource, a redirect URI the client did not
    // name, a document over http or at a private address.
    let (status, shown) =
        authorize_to(&origin, client_id, &mcp, "http://127.0.0.1:9/elsewhere").await;
    assert!(
        status == 400 && shown.contains("not a redirect URI the client named"),
        "{shown}"
    );
    let (status, to) = authorize(&origin, client_id, "https://elsewhere.example/mcp").await;
    assert!(
        status == 303 && to.contains("error=invalid_target"),
        "{status} {to}"
    );
    for (client, why) in [
        (
            "http://docs.example/client.json",
            "not a client this server knows",
        ),
        ("https://127.0.0.1:9/client.json", "private or loopback"),
    ] {
        let (status, shown) = authorize(&origin, client, &mcp).await;
        assert_eq!(status, 400, "{client}: {shown}");
        assert!(shown.contains(why), "{client}: {shown}");
    }
}

/// A client known by its client id metadata document, served over https by a CA of the
/// person's own at an origin they trusted (`--oauth-trust-document-origin`), on a server that
/// takes documents only: the SDK's client uses the document's URL as its id and connects;
/// a document larger than 5 KB is refused; registering is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_known_by_its_document_connects_and_an_oversized_one_is_refused() {
    let Some(server) = server() else {
        return;
    };
    let Some(script) = client_script() else {
        return;
    };
    let certs = tempfile::tempdir().unwrap();
    let ca = mailbroker_testkit::TestCa::generate(certs.path()).unwrap();
    let bound = mailbroker_mock_server::bind_tls(&ca.cert_pem, &ca.key_pem)
        .await
        .unwrap();
    let origin_of_documents = bound.url.clone();
    let document = format!("{origin_of_documents}/client.json");
    let big = format!("{origin_of_documents}/big.json");
    let doc = json!({"client_id": document, "client_name": "Document assistant",
        "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"});
    let padded =
        json!({"client_id": big, "redirect_uris": [REDIRECT], "logo_uri": "x".repeat(6000)});
    let app = axum::Router::new()
        .route(
            "/client.json",
            axum::routing::get(move || async move { axum::Json(doc) }),
        )
        .route(
            "/big.json",
            axum::routing::get(move || async move { axum::Json(padded) }),
        );
    let _served = bound.serve(app);

    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::seed(server, "oauth-doc", "INBOX", 2).await;
    add_account(server, h, "work", "oauth-doc", &[]);
    ok(h, &["sync"]);
    let ca_pem = ca.ca_pem.display().to_string();
    let serve = common::serve::Serve::start_with(
        h,
        &[
            "--oauth-registration",
            "cimd",
            "--oauth-trust-document-origin",
            &origin_of_documents,
            "--oauth-document-ca",
            &ca_pem,
        ],
    );
    let origin = format!("http://localhost:{}", port_of(&serve.url));
    let mcp = format!("{origin}/mcp");
    let meta: Value = reqwest::get(format!("{origin}/.well-known/oauth-authorization-server"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        meta["client_id_metadata_document_supported"], true,
        "{meta}"
    );
    assert!(meta.get("registration_endpoint").is_none(), "{meta}");
    let registered = reqwest::Client::new()
        .post(format!("{origin}/oauth/register"))
        .json(&json!({"redirect_uris": [REDIRECT]}))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 403);

    let shots = tempfile::tempdir().unwrap();
    let config = json!({ "mcp": mcp, "enroll": enroll_link(h, &origin), "chromium": CHROMIUM,
        "redirect": REDIRECT, "account": "work", "mode": "r", "cimd": document,
        "revoke_in_console": true,
        "shots": shots.path() });
    let seen = mailbroker_testkit::run_client(Path::new("node"), &script, &config);
    assert_eq!(seen["client_id"], document.as_str(), "{seen}");
    let consent = seen["consent"].as_str().unwrap();
    assert!(
        consent.contains("Document assistant") && consent.contains("first time"),
        "{consent}"
    );
    assert!(
        !seen["search"]["messages"].as_array().unwrap().is_empty(),
        "{seen}"
    );
    assert_eq!(seen["refreshed"], "AUTHORIZED", "{seen}");
    // Revoked in the console, with the passkey: its tokens open nothing any more.
    assert!(
        seen["revoked"].as_str().unwrap().contains("revoked"),
        "{seen}"
    );
    let access = seen["second"]["access_token"].as_str().unwrap();
    assert_eq!(initialize(&mcp, access).await.0, 401);
    assert_eq!(ok(h, &["token", "list"])["tokens"], json!([]));

    let (status, shown) = authorize(&origin, &big, &mcp).await;
    assert_eq!(status, 400, "{shown}");
    assert!(shown.contains("larger than"), "{shown}");
}

/// The official Python SDK's OAuth client registers itself (DCR), sends the person to the
/// console, where they allow `work` read only with their passkey, and then reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdks_oauth_client_registers_and_connects() {
    use std::io::{BufRead, BufReader, Write};
    let Some(server) = server() else {
        return;
    };
    let (Some(node), Some(python)) = (client_script(), common::mcp::python_sdk()) else {
        return;
    };
    let consent_script = node.with_file_name("oauth_consent.mjs");
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::seed(server, "oauth-py", "INBOX", 2).await;
    add_account(server, h, "work", "oauth-py", &[]);
    ok(h, &["sync"]);
    let serve = common::serve::Serve::start(h);
    let origin = format!("http://localhost:{}", port_of(&serve.url));
    let mcp = format!("{origin}/mcp");
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut client = std::process::Command::new(python)
        .arg(tests.join("oauth_client.py"))
        .arg(json!({"mcp": mcp, "redirect": REDIRECT}).to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("the Python client");
    let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let authorize = first["authorize"].as_str().expect("an authorization URL");
    let shots = tempfile::tempdir().unwrap();
    let config = json!({ "enroll": enroll_link(h, &origin), "authorize": authorize,
        "chromium": CHROMIUM, "redirect": REDIRECT, "account": "work", "mode": "r",
        "shots": shots.path() });
    let consented = mailbroker_testkit::run_client(Path::new("node"), &consent_script, &config);
    assert!(
        consented["consent"]
            .as_str()
            .unwrap()
            .contains("Python assistant"),
        "{consented}"
    );
    let back = consented["back"].as_str().unwrap();
    let mut input = client.stdin.take().unwrap();
    writeln!(input, "{back}").unwrap();
    let seen: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(
        seen["client_id"].as_str().unwrap().starts_with("mb-"),
        "{seen}"
    );
    assert_eq!(seen["accounts"]["accounts"][0]["id"], "work", "{seen}");
    assert_eq!(seen["refreshed"], true, "{seen}");
    let found = seen["search"]["messages"].as_array().unwrap();
    assert!(
        !found.is_empty() && found.iter().all(|m| m["account"] == "work"),
        "{seen}"
    );
    let listed = ok(h, &["token", "list"]);
    let grant = (listed["tokens"].as_array().unwrap().iter())
        .find(|t| t["oauth_client"] == "Python assistant")
        .unwrap_or_else(|| panic!("{listed}"));
    ok(h, &["token", "revoke", grant["name"].as_str().unwrap()]);
    writeln!(input, "revoked").unwrap();
    let after: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(after["after_revoke"], "sent to sign in again", "{after}");
    assert!(client.wait().unwrap().success());
}
