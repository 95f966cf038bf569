//! Bearer tokens scoped to accounts (`mailbroker token …`), through the real binary serving
//! MCP over HTTP on a real Dovecot: a scoped token sees and changes only its accounts, a
//! read-only one cannot write, and the index never holds a token.

mod common;

use common::mcp::{HTTP_TOKEN, call, err_call, http_server, http_session, names, ok_call};
use common::{Engine, add_account, home_on, index_bytes, mb, ok, seed, server};
use serde_json::json;

async fn a_scoped_token_sees_and_changes_only_its_accounts(engine: Engine) {
    let Some(server) = server() else {
        return;
    };
    let Some(home) = home_on(engine) else {
        return;
    };
    let h = home.path();
    let (work, personal) = (
        format!("scope-work-{engine:?}"),
        format!("scope-personal-{engine:?}"),
    );
    seed(server, &work, "INBOX", 6).await;
    seed(server, &personal, "INBOX", 6).await;
    add_account(server, h, "work", &work, &[]);
    add_account(server, h, "personal", &personal, &[]);
    ok(h, &["sync"]);

    // The CLI: created once, listed without the token, names and accounts checked.
    let reader = ok(
        h,
        &["token", "create", "--name", "reader", "--accounts", "work"],
    );
    let reader = reader["token"].as_str().unwrap().to_string();
    let writer = ok(
        h,
        &[
            "token",
            "create",
            "--name",
            "writer",
            "--accounts",
            "work",
            "--allow-writes",
        ],
    );
    let writer = writer["token"].as_str().unwrap().to_string();
    assert!(reader.len() >= 32 && reader != writer);
    let again = mb(
        h,
        &["token", "create", "--name", "reader", "--accounts", "work"],
    );
    assert_eq!(
        again.json["error_type"], "validation_error",
        "{}",
        again.stdout
    );
    let unknown = mb(h, &["token", "create", "--name", "x", "--accounts", "nope"]);
    assert_eq!(
        unknown.json["error_type"], "not_found",
        "{}",
        unknown.stdout
    );
    let listed = mb(h, &["token", "list", "--json"]);
    assert_eq!(names(&listed.json, "tokens", "name"), ["reader", "writer"]);
    assert_eq!(listed.json["tokens"][0]["accounts"], json!(["work"]));
    assert!(!listed.stdout.contains(&reader) && !listed.stdout.contains(&writer));
    let index = index_bytes(h);
    for token in [&reader, &writer] {
        assert!(
            !index.windows(token.len()).any(|w| w == token.as_bytes()),
            "a token is in the index"
        );
    }

    let personal: Vec<i64> = common::message_ids(&ok(h, &["search", "account:personal"]));
    let work: Vec<i64> = common::message_ids(&ok(h, &["search", "account:work"]));
    assert!(!personal.is_empty() && !work.is_empty());
    let served = http_server(h);
    let url = &served.1;

    // The owner (the home's token) sees both accounts and stages a personal change.
    let owner = http_session(url, HTTP_TOKEN).await;
    let all = ok_call(&owner, "list_accounts", json!({})).await;
    assert_eq!(names(&all, "accounts", "id").len(), 2, "{all}");
    let owned = ok_call(
        &owner,
        "update_message",
        json!({ "ids": [personal[0]], "flagged": true }),
    )
    .await;
    let personal_change = owned["change_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{owned}"));

    let scoped = http_session(url, &reader).await;
    common::mcp::sees_only(
        &scoped,
        "work",
        &work,
        &personal,
        "personal",
        Some(personal_change),
    )
    .await;

    // A token that may write: its own account only.
    let writing = http_session(url, &writer).await;
    let mine = ok_call(
        &writing,
        "update_message",
        json!({ "ids": [work[0]], "flagged": true }),
    )
    .await;
    assert_eq!(mine["applied"], 1, "{mine}");
    for (tool, args) in [
        (
            "update_message",
            json!({ "ids": [personal[1]], "flagged": true }),
        ),
        (
            "update_message",
            json!({ "ids": [work[1], personal[1]], "read": true }),
        ),
        (
            "update_message",
            json!({ "ids": [personal[1]], "delete": "trash" }),
        ),
        ("undo_change", json!({ "change_id": personal_change })),
        ("sync_accounts", json!({ "account": "personal" })),
    ] {
        let refused = err_call(&writing, tool, args.clone()).await;
        assert_eq!(
            refused["error_type"], "not_found",
            "{tool} {args}: {refused}"
        );
    }
    // A query selects among its own accounts only: personal is untouched.
    let planned = |session, query: &str| {
        let args = json!({ "query": query, "read": false, "dry_run": true });
        async move { call(session, "update_message", args).await.1["planned"].clone() }
    };
    assert_eq!(planned(&writing, "account:personal").await, 0);
    let (everywhere, owners_work) = (
        planned(&owner, "in:anywhere").await,
        planned(&owner, "account:work").await,
    );
    assert_ne!(everywhere, owners_work);
    assert_eq!(planned(&writing, "in:anywhere").await, owners_work);
    let own = ok_call(&writing, "list_changes", json!({})).await;
    assert_eq!(own["changes"].as_array().unwrap().len(), 1, "{own}");
    let staged = mb(h, &["delete-staged", "--json"]);
    assert_eq!(staged.json["manifests"], json!([]), "{}", staged.stdout);

    // Revoked: the token opens nothing from the next request on.
    ok(h, &["token", "revoke", "writer"]);
    let status = reqwest::Client::new()
        .post(url)
        .bearer_auth(&writer)
        .header("Accept", "application/json, text/event-stream")
        .json(&common::mcp::init_body())
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 401);
    let gone = mb(h, &["token", "revoke", "writer"]);
    assert_eq!(gone.json["error_type"], "not_found");
    for session in [owner, scoped, writing] {
        session.cancel().await.ok();
    }
}

/// With the index on SQLite, and on PostgreSQL (where the dump is what is scanned).
#[tokio::test]
async fn a_scoped_token_sees_and_changes_only_its_accounts_on_sqlite() {
    a_scoped_token_sees_and_changes_only_its_accounts(Engine::Sqlite).await;
}

#[tokio::test]
async fn a_scoped_token_sees_and_changes_only_its_accounts_on_postgres() {
    a_scoped_token_sees_and_changes_only_its_accounts(Engine::Postgres).await;
}

/// `token create --name ''` made a token no one could name to revoke.
#[test]
fn a_token_needs_a_name() {
    let home = tempfile::tempdir().unwrap();
    for name in ["", "   ", "a\u{7}b"] {
        let run = mb(
            home.path(),
            &["token", "create", "--name", name, "--accounts", "x"],
        );
        assert_eq!(
            run.json["error_type"], "validation_error",
            "{name:?}: {}",
            run.stdout
        );
    }
    let listed = mb(home.path(), &["token", "list", "--json"]);
    assert!(!listed.stdout.contains("\"name\""), "{}", listed.stdout);
}

/// The engine's listing, which the CLI and MCP render, answers a scoped caller as the surfaces
/// must: another account's message, change and staged deletion as ones that do not exist,
/// and lists without them; the owner sees everything.
#[tokio::test]
async fn the_listing_shows_a_scoped_caller_only_its_accounts() {
    use mailbroker::listing::Listing;
    use mailbroker::scope::Scope;
    let Some(server) = server() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    seed(server, "listing-work", "INBOX", 3).await;
    seed(server, "listing-personal", "INBOX", 3).await;
    add_account(server, h, "work", "listing-work", &[]);
    add_account(server, h, "personal", "listing-personal", &[]);
    ok(h, &["sync"]);
    let personal = common::message_ids(&ok(h, &["search", "account:personal"]));
    let work = common::message_ids(&ok(h, &["search", "account:work"]));
    ok(
        h,
        &["update", "--query", "account:personal", "--flag", "--yes"],
    );
    ok(h, &["update", "--query", "account:work", "--flag", "--yes"]);
    let staged = ok(h, &["stage-delete", "account:personal"]);
    let manifest = staged["manifest"]["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{staged}"));

    let store = mailbroker::store::Store::open(&h.join("index.sqlite3"))
        .await
        .unwrap();
    let scope = Scope::Accounts {
        accounts: ["work".parse().unwrap()].into(),
        allow_writes: false,
    };
    let scoped = Listing::new(&store, &scope);
    let owner = Listing::new(&store, &Scope::Owner);

    let accounts: Vec<String> = (scoped.accounts().await.unwrap().iter())
        .map(|a| a.account.id.to_string())
        .collect();
    assert_eq!(accounts, ["work"]);
    assert_eq!(owner.accounts().await.unwrap().len(), 2);
    let page = scoped.search("", None, 100, 0).await.unwrap();
    assert_eq!(page.total, work.len() as u64);
    let other = "personal".parse().unwrap();
    let refused = scoped.search("", Some(&other), 100, 0).await.unwrap_err();
    assert!(refused.is_not_found(), "{refused:?}");
    let refused = scoped.message(personal[0]).await.unwrap_err();
    assert!(refused.is_not_found(), "{refused:?}");
    assert_eq!(scoped.message(work[0]).await.unwrap().place.id, work[0]);

    let journal = owner.journal(100).await.unwrap();
    assert_eq!((journal.changes.len(), journal.manifests.len()), (2, 1));
    let seen = scoped.journal(100).await.unwrap();
    assert_eq!(seen.changes.len(), 1, "{:?}", seen.changes);
    assert!(seen.manifests.is_empty());
    assert_eq!(scoped.changes(100).await.unwrap().len(), 1);
    let mut visible = Vec::new();
    for change in &journal.changes {
        let full = owner.change(change.id).await.unwrap();
        let mine = full.items.iter().all(|i| i.account.as_str() == "work");
        assert_eq!(
            scoped.change(change.id).await.is_ok(),
            mine,
            "change {}",
            change.id
        );
        visible.extend(mine.then_some(change.id));
    }
    assert_eq!(visible, [seen.changes[0].id]);
    assert!(
        scoped
            .manifest(manifest, true)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(scoped.manifests(&[], 100).await.unwrap().is_empty());
    assert_eq!(owner.manifest(manifest, true).await.unwrap().id, manifest);
    let chosen = mailbroker::change::Selection::Ids(vec![personal[0]]);
    assert!(scoped.selection(chosen).await.unwrap_err().is_not_found());
    store.close().await;
}
