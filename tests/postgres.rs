//! The index on PostgreSQL (`--database` / `MAILBROKER_DATABASE_URL`), through the real
//! binary: two homes given the same database URL (two machines of a team) see one index.

mod common;

use common::{add_account, mb, mb_with, ok, on_postgres, postgres_database, seed, server};

/// Database `url` brought to PostgreSQL schema `version` and given `rows`: a database an
/// older release left, for an upgrade to start from.
async fn database_at(url: &str, version: i64, rows: &str) {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(url)
        .await
        .unwrap();
    sqlx::migrate!("./crates/store/migrations/postgres")
        .run_to(version, &mut conn)
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(rows.to_string()))
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::Connection::close(conn).await.unwrap();
}

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
    let sieve_port = server.sieve_port.map(|p| p.to_string());
    let sieve: Vec<&str> = match &sieve_port {
        Some(port) => vec!["--sieve-port", port],
        None => Vec::new(),
    };
    add_account(server, first.path(), "shared", "pg-share", &sieve);

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

    // A staged deletion run from one home: the other finds its run in the journal.
    let staged = ok(first.path(), &["stage-delete", "in:inbox"]);
    let id = staged["manifest"]["id"]
        .as_i64()
        .expect("a manifest")
        .to_string();
    ok(first.path(), &["delete-staged", &id, "--yes"]);
    let shown = ok(second.path(), &["delete-staged", "--show", &id]);
    let runs = shown["manifest"]["runs"]
        .as_array()
        .expect("its runs")
        .clone();
    assert_eq!(runs.len(), 1, "{shown}");
    let change = ok(second.path(), &["changes", &runs[0].to_string()]);
    assert_eq!(change["change"]["applied"], 8, "{change}");

    // A rule staged from one home is approved at the other's terminal, and undone there.
    if sieve_port.is_some() {
        a_rule_on_one_database(first.path(), second.path());
    }

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

/// A rule manifest staged from `first` is approved at `second`'s terminal: both read it from
/// the one database, which journals its change; its undo there takes it off the server.
fn a_rule_on_one_database(first: &std::path::Path, second: &std::path::Path) {
    let stage = "rule stage --account shared --name archive-news --when from:news --read";
    let staged = ok(first, &stage.split(' ').collect::<Vec<_>>());
    let id = staged["rule_manifest"]["id"]
        .as_i64()
        .expect("a manifest")
        .to_string();
    let program = std::path::Path::new(env!("CARGO_BIN_EXE_mailbroker"));
    let home = second.display().to_string();
    let env = common::database_env(second);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args = ["--home", &home, "--json", "rule", "approve", &id];
    let approved = mailbroker_testkit::terminal::run(program, &args, &env, "yes\n").unwrap();
    assert_eq!(approved.code, 0, "{}", approved.shown);
    let shown = ok(first, &["rule", "staged", &id]);
    let m = &shown["rule_manifests"][0];
    assert_eq!(m["status"], "done", "{shown}");
    let listed = ok(first, &["rule", "list", "--account", "shared"]);
    assert_eq!(listed["rules"][0]["name"], "archive-news", "{listed}");
    let change = m["change_id"].as_i64().expect("its change").to_string();
    ok(second, &["undo", &change]);
    let listed = ok(first, &["rule", "list", "--account", "shared"]);
    assert_eq!(listed["rules"], serde_json::json!([]), "{listed}");
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

/// A database made before a write's unanswered messages had a count of their own
/// (PostgreSQL's schema 1) is upgraded when a home connects: each change's `failed` split by
/// its items' outcomes, as SQLite's index is (`tests/index.rs`).
#[tokio::test]
async fn an_older_databases_unanswered_messages_are_counted_as_unknown_after_the_upgrade() {
    let Some(url) = postgres_database() else {
        return;
    };
    database_at(
        &url,
        1,
        r#"INSERT INTO changes (id, created_at, origin, selection, patch, plan, applied, failed)
             VALUES (4, 0, 'cli', '{"ids":[7,8,9]}', '{"flagged":true}', '[]', 1, 2);
           INSERT INTO change_states (id, change_id, state) VALUES
             (1, 4, '{"mailbox":"INBOX","read":true,"flagged":false,"tags":[]}');
           INSERT INTO change_items (change_id, message_id, account_id, outcome, error_type,
               error, before_state, after_state, before_id) VALUES
             (4, 7, 'old', 'applied', NULL, NULL, 1, 1, '5:70'),
             (4, 8, 'old', 'unknown', 'outcome_unknown', 'no answer', 1, NULL, '5:80'),
             (4, 9, 'old', 'failed', 'verification_failed', 'did not show it', 1, NULL, '5:90');"#,
    )
    .await;

    let home = tempfile::tempdir().unwrap();
    on_postgres(home.path(), &url);
    let listed = ok(home.path(), &["changes"]);
    let change = &listed["changes"][0];
    assert_eq!(
        common::outcome_counts(change),
        [Some(1), Some(1), Some(1)],
        "{listed}"
    );
}

/// On PostgreSQL, `account add imap --password-env` without a key file stored the password
/// in `credentials.secret` in the clear (`secret_store: index`), in every dump and in reach
/// of every database user. A secret in a shared database is sealed or not stored at all:
/// without a key the account is refused, with the step that makes one, and nothing is
/// written; with the team's key it is sealed.
#[tokio::test]
async fn a_shared_database_never_holds_a_secret_in_the_clear() {
    let Some(server) = server() else {
        return;
    };
    let Some(url) = postgres_database() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    on_postgres(home.path(), &url);
    let port = server.imaps_port.to_string();
    let ca = server.ca.ca_pem.display().to_string();
    let add = [
        "account",
        "add",
        "imap",
        "--id",
        "clear",
        "--host",
        "localhost",
        "--port",
        &port,
        "--tls",
        "implicit",
        "--ca-file",
        &ca,
        "--username",
        "pg-clear",
        "--password-env",
        "MB_TEST_PW",
    ];
    for store in ["auto", "index", "keyring"] {
        let refused = mb_with(
            home.path(),
            &add,
            &[
                ("MAILBROKER_SECRET_KEY_FILE", ""),
                ("MAILBROKER_SECRET_STORE", store),
            ],
        );
        assert_eq!(refused.code, 2, "{store}: {}", refused.stdout);
        assert_eq!(
            refused.json["error_type"], "validation_error",
            "{}",
            refused.stdout
        );
        let next = refused.json["next_step"].as_str().unwrap_or_default();
        assert!(next.contains("openssl rand -hex 32"), "{next}");
        assert!(next.contains("MAILBROKER_SECRET_KEY_FILE"), "{next}");
    }
    let listed = ok(home.path(), &["account", "list"]);
    assert_eq!(listed["accounts"].as_array().unwrap().len(), 0, "{listed}");
    let dump = common::index_bytes(home.path());
    let clear = mailbroker_testkit::PASSWORD.as_bytes();
    assert!(!dump.windows(clear.len()).any(|w| w == clear));

    // With the key every node is given, it is stored sealed.
    let added = ok(home.path(), &add);
    assert_eq!(added["account"]["id"], "clear", "{added}");
    let shown = ok(home.path(), &["account", "show", "clear"]);
    assert_eq!(shown["account"]["secret_store"], "sealed", "{shown}");
    let dump = common::index_bytes(home.path());
    assert!(
        !dump.windows(clear.len()).any(|w| w == clear),
        "the password in a dump"
    );
    ok(home.path(), &["sync"]);
}

/// A database from before conversations were an account's (PostgreSQL's schema 2) has its
/// thread ids rewritten when a home connects, as SQLite's index has (`tests/index.rs`): the
/// same conversation in two accounts is two, and a message that named its Message-ID under
/// another subject is not in it.
#[tokio::test]
async fn an_older_databases_conversations_become_each_accounts() {
    let Some(url) = postgres_database() else {
        return;
    };
    database_at(
        &url,
        2,
        r#"INSERT INTO accounts (id, provider, settings, capabilities, created_at)
             VALUES ('a', 'imap', '{}', '{"extensions":[],"custom_tags":true}', 0),
                    ('b', 'imap', '{}', '{"extensions":[],"custom_tags":true}', 0);
           INSERT INTO mailboxes (id, account_id, name, role)
             VALUES (1, 'a', 'INBOX', 'inbox'), (2, 'b', 'INBOX', 'inbox');
           INSERT INTO messages (id, mailbox_id, remote_id, subject, date, thread_id)
             VALUES (1, 1, '1:1', 'Lunch', 3, 'aaaaaaaaaaaa'),
                    (2, 1, '1:2', 'Re: Lunch', 2, 'aaaaaaaaaaaa'),
                    (3, 1, '1:3', 'Cheap watches', 1, 'aaaaaaaaaaaa'),
                    (4, 2, '1:1', 'Lunch', 3, 'aaaaaaaaaaaa');
           INSERT INTO message_state (id, mailbox_id) VALUES (1, 1), (2, 1), (3, 1), (4, 2);"#,
    )
    .await;

    let home = tempfile::tempdir().unwrap();
    on_postgres(home.path(), &url);
    let found = ok(home.path(), &["search", "--limit", "100", "in:inbox"]);
    let rows = found["messages"].as_array().unwrap();
    let thread = |id: i64| {
        let row = rows.iter().find(|r| r["id"] == id).unwrap();
        (
            row["thread"].as_str().unwrap().to_string(),
            row["thread_messages"].clone(),
        )
    };
    assert_eq!(thread(1), (thread(2).0, serde_json::json!(2)), "{found}");
    assert_ne!(thread(3).0, thread(1).0, "{found}");
    assert_ne!(thread(4).0, thread(1).0, "{found}");
}

/// Every node talked to the database in clear ("SQLx was built without TLS support" for
/// `sslmode=require`). Against the private cluster with TLS on and a private CA:
/// `sslmode=verify-full` with that CA connects, and every connection a `serve` node holds is
/// encrypted (`pg_stat_ssl`); another CA is refused, saying what to give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_to_postgresql_is_tls_checked_against_the_ca() {
    let Some(server) = server() else {
        return;
    };
    let Some(plain) = postgres_database() else {
        return;
    };
    let cluster = mailbroker_testkit::postgres::shared().unwrap();
    let ca = cluster.ca.ca_pem.display().to_string();
    let url = format!(
        "{}?sslmode=verify-full&sslrootcert={ca}",
        plain.replace("127.0.0.1", "localhost")
    );
    let home = tempfile::tempdir().unwrap();
    on_postgres(home.path(), &url);
    seed(server, "pg-tls", "INBOX", 3).await;
    add_account(server, home.path(), "t", "pg-tls", &[]);
    let serve = common::serve::Serve::start(home.path());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let (all, tls) = loop {
        let found = ok(home.path(), &["search", "in:inbox"]);
        let counts = cluster.tls_connections(&plain).unwrap();
        if found["total"] == 3 && counts.0 > 0 {
            break counts;
        }
        assert!(std::time::Instant::now() < deadline, "no sync: {found}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(tls, all, "{} of {all} connections in clear", all - tls);
    drop(serve);

    let certs = tempfile::tempdir().unwrap();
    let other = mailbroker_testkit::TestCa::generate(certs.path()).unwrap();
    let wrong = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        plain.replace("127.0.0.1", "localhost"),
        other.ca_pem.display()
    );
    let refused = mb_with(
        home.path(),
        &["account", "list"],
        &[("MAILBROKER_DATABASE_URL", &wrong)],
    );
    assert_eq!(refused.code, 4, "{}", refused.stdout);
    let next = refused.json["next_step"].as_str().unwrap_or_default();
    assert!(next.contains("sslrootcert"), "{}", refused.stdout);
}

/// A database URL given as `--database` shows its password in `ps` for as long as a node
/// runs: the command warns, and says what to use instead; from the environment it does not.
#[test]
fn a_password_on_the_command_line_is_warned_about() {
    let Some(url) = postgres_database() else {
        return;
    };
    let with_password = url.replacen("mailbroker@", "mailbroker:s3cret@", 1);
    let home = tempfile::tempdir().unwrap();
    let key = common::team_key_file();
    let env = [("MAILBROKER_SECRET_KEY_FILE", key.as_str())];
    let warned = mb_with(
        home.path(),
        &["--database", &with_password, "account", "list"],
        &env,
    );
    assert_eq!(warned.code, 0, "{}\n{}", warned.stdout, warned.stderr);
    assert!(warned.stderr.contains("ps"), "{}", warned.stderr);
    assert!(
        warned.stderr.contains("MAILBROKER_DATABASE_URL"),
        "{}",
        warned.stderr
    );
    assert!(!warned.stderr.contains("s3cret"), "{}", warned.stderr);
    let quiet = mb_with(
        home.path(),
        &["account", "list"],
        &[("MAILBROKER_DATABASE_URL", &with_password), env[0]],
    );
    assert_eq!(quiet.code, 0, "{}", quiet.stdout);
    assert!(!quiet.stderr.contains("warning"), "{}", quiet.stderr);
}

/// A write whose database went away after the server took it waited about 70 s and then
/// said `provider_unavailable` (exit 4, "retry later"): nothing says whether the messages
/// changed. It says `outcome_unknown` with the change's id, sooner; once the database is
/// back, the same request converges and sends nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_database_went_away_says_its_outcome_is_unknown() {
    let Some(server) = server() else {
        return;
    };
    if !mailbroker_testkit::postgres::Postgres::available() {
        assert!(
            !mailbroker_testkit::postgres::required(),
            "CI=true but no PostgreSQL"
        );
        return;
    }
    let mut cluster = mailbroker_testkit::postgres::Postgres::start().unwrap();
    let url = cluster.database().unwrap();
    let home = tempfile::tempdir().unwrap();
    on_postgres(home.path(), &url);
    let mut client = seed(server, "pg-gone", "INBOX", 4).await;
    let proxy =
        mailbroker_testkit::Proxy::start(server.imap_port, std::time::Duration::ZERO).unwrap();
    common::add_proxied(home.path(), "g", proxy.port, "pg-gone");
    ok(home.path(), &["sync"]);
    proxy.hold_at("UID STORE");
    let dir = home.path().to_path_buf();
    let request = [
        "update",
        "--query",
        "in:inbox",
        "--add-tag",
        "Gone",
        "--yes",
    ];
    let run = tokio::task::spawn_blocking(move || mb(&dir, &request));
    common::until_held(&proxy, "the STORE").await;
    tokio::task::block_in_place(|| cluster.stop());
    let released = std::time::Instant::now();
    proxy.release();
    let first = run.await.unwrap();
    let took = released.elapsed();
    assert_eq!(first.code, 5, "{}\n{}", first.stdout, first.stderr);
    assert_eq!(
        first.json["error_type"], "outcome_unknown",
        "{}",
        first.stdout
    );
    assert!(
        first.json["error"].as_str().unwrap().contains("change 1"),
        "{}",
        first.stdout
    );
    assert!(
        took < std::time::Duration::from_secs(40),
        "said after {took:?}"
    );
    let on_server = client.flags("INBOX").await.unwrap();
    assert!(on_server.values().all(|f| f.contains(&"Gone".to_string())));

    tokio::task::block_in_place(|| cluster.start_again()).unwrap();
    proxy.take_sent();
    let rerun = ok(
        home.path(),
        &[
            "update",
            "--query",
            "in:inbox",
            "--add-tag",
            "Gone",
            "--yes",
        ],
    );
    assert_eq!(rerun["applied"], 0, "{rerun}");
    assert_eq!(rerun["unchanged"], 4, "{rerun}");
    assert!(!proxy.take_sent().contains("UID STORE"), "sent twice");
}
