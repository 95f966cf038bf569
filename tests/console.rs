//! The console in a real browser: Debian's Chromium driven by playwright-core
//! (`tests/console_browser.mjs`), against the real binary's `mailbroker console` over a home
//! synced from a real Dovecot. A person signs in with the printed link, once; every page
//! shows what the index holds, hostile text from mail as text, and no script runs.
//! Screenshots of each page at 1280×800 go to `target/console-shots/`.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::browser::{CHROMIUM, PLAYWRIGHT, chromium, enroll_link};
use common::mcp::{HTTP_TOKEN, http_server, http_session, ok_call};
use common::{add_account, ok, server};
use mailbroker_testkit::{ImapClient, message};
use serde_json::{Value, json};

/// A mailbox, a subject and a sender a stranger chose, to be shown as text.
const EVIL_BOX: &str = "Evil<script>x";
const EVIL_SUBJECT: &str = "<script>window.pwned=1</script> \"onerror=alert(1) \u{202e}gnp.exe";
const EVIL_FROM: &str = "\"<img src=x onerror=alert(1)>\" <evil@example.test>";

/// node_modules with playwright-core under target/, and the browser script beside it; `None`
/// when node or Chromium is missing outside CI (under CI that fails instead).
fn browser() -> Option<PathBuf> {
    if !chromium() {
        return None;
    }
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let script = tests.join("console_browser.mjs");
    let main = mailbroker_testkit::node_script(tmp, "console-browser", &[PLAYWRIGHT], &script)?;
    // The other scripts, and the launch they share, beside it.
    for other in [
        "console_launch.mjs",
        "console_passkey.mjs",
        "console_person.mjs",
    ] {
        std::fs::copy(tests.join(other), main.with_file_name(other)).expect("copy a script");
    }
    Some(main)
}

/// Everything the browser saw, as the script printed it.
fn browse(script: &Path, config: Value) -> Value {
    mailbroker_testkit::run_client(Path::new("node"), script, &config)
}

/// `mailbroker console` on a free loopback port; its first line says where and how to sign in.
struct Served {
    child: Child,
    url: String,
    link: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn console(home: &Path) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mailbroker"))
        .arg("--home")
        .arg(home)
        .args(["--json", "console", "--listen", "0"])
        .env("MAILBROKER_SECRET_STORE", "index")
        .env_remove("MAILBROKER_HOME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start mailbroker console");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("its stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("its first line");
    let first: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    Served {
        child,
        url: first["url"].as_str().expect("url").to_string(),
        link: first["link"].as_str().expect("link").to_string(),
    }
}

async fn seed(server: &mailbroker_testkit::Dovecot, user: &str) {
    let mut imap = ImapClient::connect(server, user).await.expect("imap login");
    imap.create(EVIL_BOX)
        .await
        .expect("create the hostile mailbox");
    for i in 0..6 {
        let mut m = String::from_utf8(message(
            i,
            "News <news@example.test>",
            &format!("Issue {i}"),
            "hi",
        ))
        .unwrap();
        // Two months, so the chart per month has two bars.
        if i % 2 == 1 {
            m = m.replace("2 Nov 2026", "2 Oct 2026");
        }
        imap.append("INBOX", "", m.as_bytes())
            .await
            .expect("append");
    }
    let evil = message(
        9,
        EVIL_FROM,
        EVIL_SUBJECT,
        "<script>window.pwned=2</script>",
    );
    imap.append(EVIL_BOX, "", &evil)
        .await
        .expect("append the hostile message");
    let promo = message(10, "Promo <promo@example.test>", "Sale", "buy");
    imap.append("INBOX", "", &promo).await.expect("append");
}

#[tokio::test]
async fn a_person_reviews_in_the_console_what_waits_and_what_was_done() {
    let Some(server) = server() else {
        return;
    };
    let Some(node) = browser() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    seed(server, "console-person").await;
    // Its server's rules too, where Pigeonhole runs (CI installs it).
    let sieve_port = server.sieve_port.map(|p| p.to_string());
    let sieve: Vec<&str> = match &sieve_port {
        Some(port) => vec!["--sieve-port", port],
        None => Vec::new(),
    };
    add_account(server, h, "work", "console-person", &sieve);
    ok(h, &["sync"]);
    ok(h, &["update", "--query", "from:news", "--flag", "--yes"]);
    let staged = ok(h, &["stage-delete", "from:news OR from:evil"]);
    let manifest = staged["manifest"]["id"].as_i64().expect("manifest id");
    let shown = ok(h, &["delete-staged", "--show", &manifest.to_string()]);
    let count = shown["manifest"]["summary"]["count"]
        .as_u64()
        .expect("count");
    assert_eq!(count, 7, "{shown}");
    let evil = ok(h, &["search", "from:evil"]);
    let evil_from = evil["messages"][0]["from"]
        .as_str()
        .expect("from")
        .to_string();

    // An assistant's write that waits for the person: a dry run's confirm token.
    let mcp = http_server(h);
    let session = http_session(&mcp.1, HTTP_TOKEN).await;
    let dry = json!({ "query": "from:news", "move_to": "trash", "dry_run": true });
    let planned = ok_call(&session, "update_message", dry.clone()).await;
    let token = planned["confirm_token"]
        .as_str()
        .expect("a confirm token")
        .to_string();
    let evil_dry = json!({ "query": "from:evil", "move_to": "trash", "dry_run": true });
    let mut evil_tokens = Vec::new();
    for _ in 0..2 {
        let planned = ok_call(&session, "update_message", evil_dry.clone()).await;
        evil_tokens.push(
            planned["confirm_token"]
                .as_str()
                .expect("a token")
                .to_string(),
        );
    }

    let served = console(h);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../console-shots");
    std::fs::create_dir_all(&shots).unwrap();
    let deletion = format!("/console/deletions/{manifest}");
    let pages = [
        "/console",
        "/console/deletions",
        &deletion,
        "/console/journal",
        "/console/journal/1",
        "/console/accounts",
    ];
    let seen = browse(
        &node,
        json!({ "link": served.link, "pages": pages, "shots": shots, "chromium": CHROMIUM }),
    );
    assert!(
        seen["signed_in_at"]
            .as_str()
            .unwrap_or("")
            .ends_with("/console"),
        "{seen}"
    );
    assert_eq!(seen["reused_link_status"], 400, "a link opens once");
    assert_eq!(seen["dialogs"], json!([]), "{seen}");
    for path in pages {
        let page = &seen["pages"][path];
        assert_eq!(page["status"], 200, "{path}: {page}");
        assert_eq!(
            page["scripts"], 0,
            "{path}: a script element not the console's own"
        );
        assert_eq!(page["pwned"], Value::Null, "{path}: a script from mail ran");
    }
    let text = |path: &str| {
        seen["pages"][path]["text"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert!(
        text("/console").contains(&format!("mailbroker approve {token}")),
        "{}",
        text("/console")
    );
    assert!(text("/console").contains("update_message"));

    // The staged deletion: its counts, its charts (per month: October and November; per
    // sender) summing to its messages, and the stranger's text as text.
    let page = &seen["pages"][deletion.as_str()];
    let shown_text = text(&deletion);
    assert!(shown_text.contains(&format!("{count} (")), "{shown_text}");
    let subject = mailbroker::output::one_line(EVIL_SUBJECT).into_owned();
    assert!(subject.contains('\u{fffd}') && !subject.contains('\u{202e}'));
    assert!(shown_text.contains(&subject), "{shown_text}");
    assert!(
        shown_text.contains(&evil_from),
        "{evil_from} in {shown_text}"
    );
    assert!(
        shown_text.contains(&format!("work/{EVIL_BOX}")),
        "{shown_text}"
    );
    let sums: Vec<u64> = (page["bar_values"].as_array().expect("charts").iter())
        .map(|values| {
            values
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .sum()
        })
        .collect();
    assert_eq!(sums, [count, count], "{page}");
    let months = page["bar_values"][0].as_array().unwrap().len();
    assert_eq!(months, 2, "{page}");
    assert!(
        text("/console/journal").contains("applied 6"),
        "{}",
        text("/console/journal")
    );
    assert!(
        text("/console/journal/1").contains("applied"),
        "{}",
        text("/console/journal/1")
    );
    assert!(text("/console/accounts").contains("work"));
    for shot in ["00-console", "02-console-deletions-", "05-console-accounts"] {
        let found = std::fs::read_dir(&shots)
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().starts_with(shot));
        assert!(found, "no screenshot {shot}");
    }
    guards(&served, h).await;

    // The person enrolls a passkey at the terminal's link and decides with it.
    let refused = common::mb(h, &["console", "enroll", "--origin", &origin_of(&served)]);
    assert_eq!(
        refused.json["error_type"], "confirmation_required",
        "no terminal: {}",
        refused.stdout
    );
    assert!(!refused.stdout.contains("/console/enroll"));
    // A link past its five minutes is refused (made so here by moving its end back).
    let late = enroll_link(h, &origin_of(&served));
    let index = format!("sqlite://{}", h.join("index.sqlite3").display());
    let mut db = <sqlx::SqliteConnection as sqlx::Connection>::connect(&index)
        .await
        .unwrap();
    sqlx::query("UPDATE console_links SET expires_at = 0")
        .execute(&mut db)
        .await
        .unwrap();
    let refused = reqwest::get(&late).await.unwrap();
    assert_eq!(refused.status(), 400, "an expired link");
    assert!(refused.text().await.unwrap().contains("expired"));
    let enroll = enroll_link(h, &origin_of(&served));
    let (approve, decline, other) = (&token, &evil_tokens[0], &evil_tokens[1]);
    let script = node.with_file_name("console_passkey.mjs");
    let seen = mailbroker_testkit::run_client(
        Path::new("node"),
        &script,
        &json!({ "enroll": enroll, "approve": approve, "decline": decline, "other": other,
                 "manifest": manifest, "shots": shots, "chromium": CHROMIUM }),
    );
    assert!(
        seen["enrolled_at"]
            .as_str()
            .unwrap_or("")
            .ends_with("/console"),
        "{seen}"
    );
    assert!(
        seen["approved"]
            .as_str()
            .unwrap_or("")
            .starts_with("approved"),
        "{seen}"
    );
    assert!(
        seen["declined"]
            .as_str()
            .unwrap_or("")
            .starts_with("declined"),
        "{seen}"
    );
    let ran = seen["ran"].as_str().unwrap_or("");
    let run_change = seen["run_change"]
        .as_i64()
        .unwrap_or_else(|| panic!("{seen}"));
    assert!(
        ran.starts_with(&format!("change {run_change} (console, ")) && ran.ends_with(": applied 7"),
        "{seen}"
    );
    let status = seen["run_status"].as_str().unwrap_or("");
    assert!(status.starts_with("done — its messages: done 7"), "{seen}");
    let undone = seen["undone"].as_str().unwrap_or("");
    assert!(undone.ends_with(": applied 7"), "{seen}");
    let journal = ok(h, &["changes", &run_change.to_string()]);
    assert!(journal["change"]["undone_by"].is_i64(), "{journal}");
    assert_eq!(
        journal["change"]["origin"], "console",
        "who ran it: {journal}"
    );
    let stale = &seen["refused"]["stale"]["body"];
    assert!(
        (stale["error"].as_str().unwrap_or(""))
            .contains("this request is approved: there is nothing left"),
        "{seen}"
    );
    for (what, status) in [
        ("plain", 403),
        ("other", 403),
        ("wrong_form", 403),
        ("stale", 403),
    ] {
        assert_eq!(seen["refused"][what]["status"], status, "{what}: {seen}");
    }
    assert_eq!(
        seen["refused"]["plain"]["body"]["error_type"],
        "confirmation_required"
    );
    assert_eq!(
        seen["reused_enroll_status"], 400,
        "an enrollment link is used once"
    );
    let keys = ok(h, &["console", "passkeys"]);
    assert_eq!(keys["passkeys"].as_array().map(Vec::len), Some(1), "{keys}");
    assert!(keys["passkeys"][0]["last_used_at"].is_i64(), "{keys}");

    // The approved write runs once; the declined one and the one asked for another action
    // do not, and nothing of theirs is written.
    let run = |args: &Value, token: &str| {
        let mut args = args.clone();
        args["dry_run"] = false.into();
        args["confirm_token"] = token.into();
        args
    };
    let done = ok_call(&session, "update_message", run(&dry, approve)).await;
    assert_eq!(done["applied"], 6, "{done}");
    let (is_error, declined) =
        common::mcp::call(&session, "update_message", run(&evil_dry, decline)).await;
    assert!(
        is_error && declined["error_type"] == "confirmation_declined",
        "{declined}"
    );
    let (is_error, waiting) =
        common::mcp::call(&session, "update_message", run(&evil_dry, other)).await;
    assert!(
        is_error && waiting["error_type"] == "confirmation_required",
        "{waiting}"
    );
    let evil = ok(h, &["search", "from:evil"]);
    assert_eq!(evil["messages"][0]["mailbox"], EVIL_BOX, "{evil}");
    session.cancel().await.ok();
    let person = Person {
        script: node.with_file_name("console_person.mjs"),
        credentials: seen["credentials"].clone(),
        shots,
    };
    assert_eq!(person.credentials.as_array().map(Vec::len), Some(1));
    let person = Person {
        credentials: a_form_waits_in_the_console_too(h, &mcp.1, &origin_of(&served), &person),
        ..person
    };
    a_servers_passkey_flag_is_not_met_by_a_terminal(h, &evil_dry).await;
    passkeys_only(h, &origin_of(&served), &evil_dry, &person).await;
}

/// `mailbroker --home H --json ARGS` at a terminal of its own, where `typed` is typed.
fn at_terminal(h: &Path, args: &[&str], typed: &str) -> mailbroker_testkit::terminal::AtTerminal {
    let home = h.display().to_string();
    let program = Path::new(env!("CARGO_BIN_EXE_mailbroker"));
    let env = [("MAILBROKER_SECRET_STORE", "index")];
    let mut all = vec!["--home", &home, "--json"];
    all.extend(args);
    mailbroker_testkit::terminal::run(program, &all, &env, typed).expect("a terminal")
}

/// A write a client asks its user about by its own form (the home lets a person approve
/// anywhere) waits in the console too, and the person declines it there: at 2025-11-25 the
/// call ends declined while the client's form is still open; at 2026-07-28 the client
/// accepts its form afterwards, and the console's no still wins. Nothing runs.
/// Returns the passkey as the person's browser left it (its counter moved on).
fn a_form_waits_in_the_console_too(h: &Path, mcp_url: &str, origin: &str, p: &Person) -> Value {
    let Some(py) = common::mcp::python_sdk() else {
        return p.credentials.clone();
    };
    // The 2025-11-25 client keeps its form open after the person decided (`hold_open`): the
    // call's end must close it, whether the browser is done before or after that.
    let cases = ["legacy", "auto"].map(|mode| {
        json!({ "mode": mode, "args": { "query": "from:promo", "move_to": "trash" },
                "decide": "decline", "timeout": null, "hold_open": mode == "legacy",
                "console": format!("{origin}/console"), "match": "from:promo" })
    });
    let config = json!({
        "url": mcp_url, "token": HTTP_TOKEN,
        "person": ["node", p.script],
        "browser": { "credentials": p.credentials, "shots": p.shots, "shot": "16-console-form",
                     "chromium": CHROMIUM },
        "cases": cases,
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console_client.py");
    let seen = mailbroker_testkit::run_client(&py, &script, &config);
    for case in seen.as_array().expect("cases") {
        assert_eq!(case["asked"][0]["mode"], "form", "{case}");
        assert_eq!(
            case["result"]["error_type"], "confirmation_declined",
            "{case}"
        );
    }
    let still_open = seen[0]["callback_error"].as_str().unwrap_or("");
    assert!(still_open.starts_with("CancelledError"), "{}", seen[0]);
    let decided = seen[1]["person"]["decided"].as_str().unwrap_or("");
    assert!(decided.starts_with("declined"), "{}", seen[1]);
    let promo = ok(h, &["search", "from:promo"]);
    assert_eq!(
        promo["messages"][0]["mailbox"], "INBOX",
        "nothing moved: {promo}"
    );
    seen[1]["person"]["credentials"].clone()
}

/// `args` at a terminal, where the person types yes: refused, naming the console's `page`.
fn refused_at_terminal(h: &Path, args: &[&str], page: &str) {
    let refused = at_terminal(h, args, "yes\n");
    assert_ne!(refused.code, 0, "{}", refused.shown);
    let said = refused.json();
    assert_eq!(
        said["error_type"], "confirmation_required",
        "{}",
        refused.shown
    );
    let step = said["next_step"].as_str().unwrap_or("");
    assert!(step.contains(page), "{}", refused.shown);
}

/// A server started with `--approvals passkey` where the home still lets terminals approve:
/// `mailbroker approve` marks the token approved (the home allows it), and that server still
/// does not run the write, as its yes did not come from a passkey.
async fn a_servers_passkey_flag_is_not_met_by_a_terminal(h: &Path, evil_dry: &Value) {
    let args = [
        "mcp",
        "--http",
        "0",
        "--http-allow-writes",
        "--approvals",
        "passkey",
    ];
    let mcp = common::mcp::http_command(h, &args, &[]);
    let session = http_session(&mcp.1, HTTP_TOKEN).await;
    let planned = ok_call(&session, "update_message", evil_dry.clone()).await;
    let token = planned["confirm_token"].as_str().expect("a token");
    let step = planned["next_step"].as_str().unwrap_or("");
    assert!(
        step.contains("/console/waiting/") && !step.contains("mailbroker approve"),
        "{planned}"
    );
    let approved = at_terminal(h, &["approve", token], "y\n");
    assert_eq!(
        approved.code, 0,
        "the home lets a terminal approve: {}",
        approved.shown
    );
    let mut run = evil_dry.clone();
    run["dry_run"] = false.into();
    run["confirm_token"] = token.into();
    let (is_error, refused) = common::mcp::call(&session, "update_message", run).await;
    assert!(
        is_error && refused["error_type"] == "confirmation_required",
        "{refused}"
    );
    assert!(
        refused["error"]
            .as_str()
            .unwrap_or("")
            .contains("approved at a terminal"),
        "{refused}"
    );
    let evil = ok(h, &["search", "from:evil"]);
    assert_eq!(
        evil["messages"][0]["mailbox"], EVIL_BOX,
        "nothing moved: {evil}"
    );
    session.cancel().await.ok();
}

/// The person's browser, for a page an MCP client opens for them, and their passkey.
#[derive(Clone)]
struct Person {
    script: PathBuf,
    credentials: Value,
    shots: PathBuf,
}

/// With `console approvals passkey`, only the console approves: `mailbroker approve` (even
/// at a terminal), `delete-staged --yes` and a client answering its own question are refused
/// with the console's address, and nothing is written.
async fn passkeys_only(h: &Path, origin: &str, evil_dry: &Value, person: &Person) {
    let at_terminal = |args: &[&str], typed: &str| at_terminal(h, args, typed);
    let set = at_terminal(
        &["console", "approvals", "passkey", "--origin", origin],
        "yes\n",
    );
    assert_eq!(set.code, 0, "{}", set.shown);
    assert_eq!(ok(h, &["console", "approvals"])["approvals"], "passkey");

    let mcp = http_server(h);
    let session = http_session(&mcp.1, HTTP_TOKEN).await;
    let planned = ok_call(&session, "update_message", evil_dry.clone()).await;
    let token = planned["confirm_token"]
        .as_str()
        .expect("a token")
        .to_string();
    assert!(
        planned["next_step"]
            .as_str()
            .unwrap_or("")
            .contains(&format!("{origin}/console")),
        "{planned}"
    );
    let (http, signed) = sign_in(h, origin).await;
    let cookie = signed.headers()["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_string();
    let page = http
        .get(format!("{origin}/console"))
        .header("Cookie", &cookie);
    let page = page.send().await.unwrap().text().await.unwrap();
    assert!(page.contains(&format!("approve:{token}")), "{page}");
    assert!(
        !page.contains("mailbroker approve"),
        "the terminal's route is not offered: {page}"
    );
    refused_at_terminal(h, &["approve", &token], "/console");
    let mut run = evil_dry.clone();
    run["dry_run"] = false.into();
    run["confirm_token"] = token.as_str().into();
    let (is_error, waiting) = common::mcp::call(&session, "update_message", run).await;
    assert!(
        is_error && waiting["error_type"] == "confirmation_required",
        "{waiting}"
    );
    session.cancel().await.ok();

    // A client that answers its own question (elicitation, accepting) is no person here.
    let accepting = common::mcp::client(
        Some(rmcp::model::ElicitationAction::Accept),
        rmcp::model::ProtocolVersion::V_2025_11_25,
    );
    let session = common::mcp::http_session_answering(&mcp.1, HTTP_TOKEN, accepting).await;
    let mut direct = evil_dry.clone();
    direct["dry_run"] = false.into();
    let (is_error, asked) = common::mcp::call(&session, "update_message", direct).await;
    assert!(
        is_error && asked["error_type"] == "confirmation_required",
        "{asked}"
    );
    session.cancel().await.ok();

    // A staged deletion does not run by --yes, nor for good at a terminal.
    let staged = ok(h, &["stage-delete", "from:evil"]);
    let id = staged["manifest"]["id"]
        .as_i64()
        .expect("manifest id")
        .to_string();
    let yes = common::mb(h, &["delete-staged", &id, "--yes"]);
    assert_eq!(
        yes.json["error_type"], "confirmation_required",
        "{}",
        yes.stdout
    );
    let evil = ok(h, &["search", "from:evil"]);
    assert_eq!(
        evil["messages"][0]["mailbox"], EVIL_BOX,
        "nothing moved: {evil}"
    );
    by_the_consoles_page(h, &mcp.1, origin, evil_dry, person);
}

/// A client that can open a URL (MCP URL-mode elicitation, the official Python SDK) is
/// given the console's page of its write, never the token. Accepting it without the person
/// runs nothing; the person declining there runs nothing; the person approving there with
/// their passkey runs the write, once — at protocol 2025-11-25 and at 2026-07-28.
fn by_the_consoles_page(h: &Path, mcp_url: &str, origin: &str, evil_dry: &Value, p: &Person) {
    let Some(py) = common::mcp::python_sdk() else {
        return;
    };
    let mut evil = evil_dry.clone();
    evil.as_object_mut().unwrap().remove("dry_run");
    let promo = json!({ "query": "from:promo", "move_to": "trash" });
    let case = |mode: &str, args: &Value, decide: Value, timeout: Value| json!({ "mode": mode, "args": args, "decide": decide, "timeout": timeout });
    let config = json!({
        "url": mcp_url, "token": HTTP_TOKEN,
        "person": ["node", p.script],
        "browser": { "credentials": p.credentials, "shots": p.shots, "shot": "14-console-asked",
                     "chromium": CHROMIUM },
        "cases": [
            case("legacy", &evil, Value::Null, json!(4)),
            case("auto", &evil, json!("decline"), Value::Null),
            case("legacy", &evil, json!("approve"), Value::Null),
            case("auto", &promo, json!("approve"), Value::Null),
        ],
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console_client.py");
    let seen = mailbroker_testkit::run_client(&py, &script, &config);
    let page = format!("{origin}/console/waiting/");
    for (i, case) in seen.as_array().expect("cases").iter().enumerate() {
        let asked = &case["asked"];
        assert_eq!(asked.as_array().map(Vec::len), Some(1), "case {i}: {case}");
        assert_eq!(asked[0]["mode"], "url", "case {i}: {case}");
        let url = asked[0]["url"].as_str().unwrap_or("");
        assert!(url.starts_with(&page), "case {i}: {url}");
        if let Some(action) = case["person"]["action"].as_str() {
            let token = action.split_once(':').map(|(_, t)| t).unwrap_or("");
            assert!(
                token.len() == 32 && !url.contains(token),
                "case {i}: {url} {action}"
            );
            let text = case["person"]["text"].as_str().unwrap_or("");
            assert_eq!(case["person"]["signed_out_status"], 401, "case {i}: {case}");
            let (from, mailbox) = match i {
                3 => ("promo@example.test", "work/INBOX".to_string()),
                _ => ("evil@example.test", format!("work/{EVIL_BOX}")),
            };
            for shown in ["mcp 0.1.0, session", from, &mailbox] {
                assert!(text.contains(shown), "case {i}: {shown:?} in {text}");
            }
        }
    }
    let (accepted_alone, declined, approved, again) = (&seen[0], &seen[1], &seen[2], &seen[3]);
    assert!(
        accepted_alone["raised"].as_str().is_some(),
        "the server waits for the person, not the client: {accepted_alone}"
    );
    assert_eq!(
        declined["result"]["error_type"], "confirmation_declined",
        "{declined}"
    );
    assert!(
        declined["person"]["after"]
            .as_str()
            .unwrap_or("")
            .contains("declined"),
        "{declined}"
    );
    assert_eq!(approved["is_error"], false, "{approved}");
    assert_eq!(approved["result"]["applied"], 1, "{approved}");
    let after = approved["person"]["after"].as_str().unwrap_or("");
    assert!(
        after.contains("is approved") || after.contains("is used"),
        "{approved}"
    );
    assert_eq!(again["is_error"], false, "{again}");
    assert_eq!(again["result"]["applied"], 1, "{again}");
    for query in ["from:evil", "from:promo"] {
        let found = ok(h, &["search", query]);
        assert_eq!(found["messages"][0]["mailbox"], "Trash", "{found}");
    }
    let journal = ok(h, &["changes"]);
    let by_python = (journal["changes"].as_array().into_iter().flatten())
        .filter(|c| c["origin"] == "mcp:mcp")
        .count();
    assert_eq!(by_python, 2, "two writes ran, once each: {journal}");
    let person = Person {
        credentials: seen[3]["person"]["credentials"].clone(),
        ..p.clone()
    };
    let person = Person {
        credentials: back_to_terminals(h, origin, &person),
        ..person
    };
    if sieve_installed() {
        a_rule_is_installed_from_the_console(h, origin, &person);
    }
}

fn sieve_installed() -> bool {
    let installed = mailbroker_testkit::sieve_installed();
    assert!(installed || !mailbroker_testkit::dovecot_required());
    installed
}

/// A rule proposed at the CLI is read in the console (its exact Sieve) and installed there
/// with the passkey; the server then has it.
fn a_rule_is_installed_from_the_console(h: &Path, origin: &str, p: &Person) {
    let stage = "rule stage --account work --name news-tag --when from:news --add-tag $news";
    let staged = ok(h, &stage.split(' ').collect::<Vec<_>>());
    let id = staged["rule_manifest"]["id"].as_i64().expect("a manifest");
    let seen = mailbroker_testkit::run_client(
        Path::new("node"),
        &p.script,
        &json!({ "url": format!("{origin}/console/rules"), "decide": format!("rule:{id}"),
                 "credentials": p.credentials, "shots": p.shots, "shot": "17-console-rules",
                 "chromium": CHROMIUM }),
    );
    assert!(
        seen["text"]
            .as_str()
            .unwrap_or("")
            .contains("addflag \"$news\""),
        "{seen}"
    );
    let decided = seen["decided"].as_str().unwrap_or("");
    assert!(
        decided.starts_with("rule \"news-tag\" carried out: change"),
        "{seen}"
    );
    let listed = ok(h, &["rule", "list", "--account", "work"]);
    assert!(
        (listed["rules"].as_array().unwrap().iter())
            .any(|r| r["name"] == "news-tag" && r["ours"] == true),
        "{listed}"
    );
}

/// Terminals approve again only by the passkey: `console approvals person` at a terminal is
/// refused (a program with a shell can fake one), the console's button with the passkey
/// does it.
fn back_to_terminals(h: &Path, origin: &str, p: &Person) -> Value {
    refused_at_terminal(h, &["console", "approvals", "person"], "/console/accounts");
    assert_eq!(ok(h, &["console", "approvals"])["approvals"], "passkey");
    let seen = mailbroker_testkit::run_client(
        Path::new("node"),
        &p.script,
        &json!({ "url": format!("{origin}/console/accounts"), "decide": "approvals:person",
                 "credentials": p.credentials, "shots": p.shots, "shot": "15-console-approvals",
                 "chromium": CHROMIUM }),
    );
    assert!(
        seen["decided"]
            .as_str()
            .unwrap_or("")
            .starts_with("a person may approve"),
        "{seen}"
    );
    assert_eq!(ok(h, &["console", "approvals"])["approvals"], "person");
    seen["credentials"].clone()
}

fn origin_of(served: &Served) -> String {
    served.url.trim_end_matches("/console").to_string()
}

/// A client that follows no redirect, and the answer to a new `console link` it opened.
async fn sign_in(home: &Path, origin: &str) -> (reqwest::Client, reqwest::Response) {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let link = ok(home, &["console", "link", "--origin", origin]);
    let link = link["link"].as_str().unwrap_or_else(|| panic!("{link}"));
    let signed = http.get(link).send().await.unwrap();
    assert_eq!(
        signed.status(),
        303,
        "a sign-in link redirects to the console"
    );
    (http, signed)
}

/// What a page is refused without: its host, its origin, its session's form token.
async fn guards(served: &Served, home: &Path) {
    let origin = origin_of(served);
    let (http, signed) = sign_in(home, &origin).await;
    let headers = signed.headers();
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"));
    let cookie = headers["set-cookie"].to_str().unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let cookie = cookie.split(';').next().unwrap().to_string();
    let page = |host: Option<&str>| {
        let mut r = http.get(&served.url).header("Cookie", &cookie);
        if let Some(host) = host {
            r = r.header("Host", host);
        }
        r.send()
    };
    let html = page(None).await.unwrap().text().await.unwrap();
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the sign-out form's token")
        .to_string();
    assert_eq!(page(Some("evil.example")).await.unwrap().status(), 421);
    let post = |from: &str, csrf: &str| {
        http.post(format!("{origin}/console/sign-out"))
            .header("Cookie", &cookie)
            .header("Origin", from)
            .form(&[("csrf", csrf)])
            .send()
    };
    assert_eq!(
        post("http://evil.example", &csrf).await.unwrap().status(),
        403
    );
    assert_eq!(post(&origin, "0123").await.unwrap().status(), 403);
    assert_eq!(
        page(None).await.unwrap().status(),
        200,
        "refused posts changed nothing"
    );
    assert_eq!(post(&origin, &csrf).await.unwrap().status(), 200);
    assert_eq!(page(None).await.unwrap().status(), 401, "signed out");
    let no_cookie = http.get(&served.url).send().await.unwrap();
    assert_eq!(no_cookie.status(), 401);
}

/// `serve` shows the console beside `/mcp` on its own port, at `localhost`: a browser signs
/// in with `console link`, the accounts page says how `serve` watches each account, and
/// `/mcp` keeps its bearer token.
#[tokio::test]
async fn serve_shows_the_console_beside_mcp() {
    let Some(server) = server() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    common::seed(server, "console-serve", "INBOX", 3).await;
    add_account(server, h, "work", "console-serve", &[]);
    ok(h, &["sync"]);
    let serve = common::serve::Serve::start(h);
    let port = (serve.url.rsplit(':').next())
        .and_then(|tail| tail.trim_end_matches("/mcp").parse::<u16>().ok())
        .unwrap_or_else(|| panic!("no port in {}", serve.url));
    let origin = format!("http://localhost:{port}");
    let (http, signed) = sign_in(h, &origin).await;
    let cookie = signed.headers()["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_string();
    let get = |path: &str| {
        http.get(format!("{origin}{path}"))
            .header("Cookie", &cookie)
            .send()
    };
    assert_eq!(get("/console").await.unwrap().status(), 200);
    // The node says how it watches once its first beat is in the index.
    let mut accounts = String::new();
    for _ in 0..100 {
        accounts = get("/console/accounts")
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if !accounts.contains("no serve is running") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        accounts.contains("work") && !accounts.contains("no serve is running"),
        "{accounts}"
    );
    let other_host = http
        .get(format!("http://127.0.0.1:{port}/console"))
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(
        other_host.status(),
        421,
        "the console answers only at its origin"
    );
    let mcp = http.post(&serve.url).json(&json!({})).send().await.unwrap();
    assert_eq!(mcp.status(), 401, "/mcp keeps its bearer token");
}
