//! The index on PostgreSQL (`--database` / `MAILBROKER_DATABASE_URL`), through the real
//! binary: two homes given the same database URL (two machines of a team) see one index.

mod common;

use common::{add_account, mb, mb_with, ok, on_postgres, postgres_database, seed, server};

/// Two homes on one database: what one adds, syncs, tags and tokens, the other sees.
#[tokio::test]
async fn two_homes_on_one_database_share_the_index() {
    let Some(server) = server() else {
        return;
    };
    let Some(url) = postgres_database() else {
        return;
    };
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    on_postgres(first.path(), &url);
    on_postgres(second.path(), &url);
    seed(server, "pg-share", "INBOX", 8).await;
    add_account(server, first.path(), "shared", "pg-share", &[]);

    let listed = ok(second.path(), &["account", "list"]);
    let ids: Vec<&str> = listed["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["shared"], "{listed}");

    // No SQLite file in either home: the index is the database.
    ok(second.path(), &["sync"]);
    for home in [first.path(), second.path()] {
        assert!(
            !home.join("index.sqlite3").exists(),
            "an index file in {home:?}"
        );
    }
    let found = ok(first.path(), &["search", "in:inbox", "--limit", "100"]);
    assert_eq!(found["total"], 8, "{found}");

    let token = ok(
        first.path(),
        &["token", "create", "--name", "team", "--accounts", "shared"],
    );
    let tokens = ok(second.path(), &["token", "list"]);
    assert_eq!(tokens["tokens"][0]["name"], "team", "{tokens}");
    assert!(
        !tokens
            .to_string()
            .contains(token["token"].as_str().unwrap())
    );
}

/// A URL that is not PostgreSQL's, or a database that is not there, is refused with what to
/// do, and nothing is written in the home.
#[test]
fn a_bad_database_url_is_refused_with_a_next_step() {
    let home = tempfile::tempdir().unwrap();
    for (url, kind) in [
        ("mysql://u@127.0.0.1/x", "validation_error"),
        ("not a url", "validation_error"),
        ("postgres://nobody@127.0.0.1:1/none", "provider_unavailable"),
    ] {
        let run = mb_with(
            home.path(),
            &["account", "list"],
            &[("MAILBROKER_DATABASE_URL", url)],
        );
        assert_ne!(run.code, 0, "{url}: {}", run.stdout);
        assert_eq!(run.json["error_type"], kind, "{url}: {}", run.stdout);
        assert!(run.json["next_step"].is_string(), "{url}: {}", run.stdout);
    }
    assert!(!home.path().join("index.sqlite3").exists());
    let local = mb(home.path(), &["account", "list"]);
    assert_eq!(local.code, 0, "{}", local.stdout);
}
