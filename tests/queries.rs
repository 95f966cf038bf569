//! The query language and the commands that take one, as a person types them: options
//! anywhere, typos refused, honest empty results and totals; and OR, groups and negation
//! checked against the server's own `UID SEARCH`, through every surface that takes a query.

mod common;

use std::path::Path;

use common::{add_account, mb, mb_text, ok, seed, server};
use mailbroker_testkit::{ImapClient, message};
use serde_json::Value;

/// An account `q` over a seeded INBOX of 12 (alternately from alice and bob; flags and
/// keywords in a cycle of five), one from carol whose text says `--json`, and three read
/// ones from mailing lists (`LISTS`).
async fn setup(user: &str) -> Option<(tempfile::TempDir, ImapClient)> {
    let dovecot = server()?;
    let home = tempfile::tempdir().unwrap();
    let mut imap = seed(dovecot, user, "INBOX", 12).await;
    let carol = message(
        99,
        "carol@example.test",
        "Flags doc",
        "pass json-flag --json here",
    );
    imap.append("INBOX", "", &carol).await.unwrap();
    for list in LISTS {
        imap.append("INBOX", "\\Seen", list.as_bytes())
            .await
            .unwrap();
    }
    add_account(dovecot, home.path(), "q", user, &[]);
    ok(home.path(), &["sync"]);
    Some((home, imap))
}

/// Mail from lists: one with a List-Id, one that only offers a way out (its list is the host
/// the link leads to), one whose List-Id folds over two lines.
const LISTS: [&str; 3] = [
    "From: news@lists.example\r\nTo: user@example.test\r\nSubject: Weekly digest\r\n\
     List-Id: Example News <news.lists.example>\r\n\
     List-Unsubscribe: <mailto:leave@lists.example>\r\nMessage-ID: <l1@lists.example>\r\n\r\nDigest\r\n",
    "From: deals@shop.example\r\nTo: user@example.test\r\nSubject: Winter sale\r\n\
     List-Unsubscribe: <mailto:out@esp.example>,\r\n <https://Shop.Example/unsub?u=1>\r\n\
     Message-ID: <l2@shop.example>\r\n\r\nSale\r\n",
    "From: dev@lists.example\r\nTo: user@example.test\r\nSubject: Re: patch\r\n\
     List-Id: \"Developers\r\n of the example\" <dev.lists.example>\r\n\
     Message-ID: <l3@lists.example>\r\n\r\nPatch\r\n",
];

fn uids(json: &Value) -> Vec<u32> {
    let mut out: Vec<u32> = json["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("no messages in {json}"))
        .iter()
        .map(common::uid_of)
        .collect();
    out.sort_unstable();
    out
}

fn manifests(home: &Path) -> usize {
    let listed = ok(home, &["delete-staged"]);
    listed["manifests"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn options_go_anywhere_and_misspelt_ones_are_refused() {
    let Some((home, _imap)) = setup("qry-cli").await else {
        return;
    };
    let home = home.path();
    // --json after the query words, before them, and as a global option.
    for args in [
        &["search", "from:alice", "--json"][..],
        &["search", "--json", "from:alice"],
        &["--json", "search", "from:alice"],
    ] {
        let run = mb_text(home, args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        let json: Value = serde_json::from_str(&run.stdout).unwrap_or(Value::Null);
        assert_eq!(json["total"], 6, "{args:?}: {}", run.stdout);
        assert_eq!(json["messages"].as_array().map(Vec::len), Some(6));
    }
    // --limit after the words: 3 shown, of 6, and a person is told there are more.
    let run = mb_text(home, &["search", "from:alice", "--limit", "3"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 3, "{}", run.stdout);
    assert!(run.stderr.contains("3 of 6 shown"), "{}", run.stderr);
    let limited = ok(home, &["search", "from:alice", "--limit=3"]);
    assert_eq!(
        (
            limited["messages"].as_array().unwrap().len(),
            &limited["total"]
        ),
        (3, &6.into())
    );

    // stage-delete with its options after the words does what they say.
    let dry = ok(
        home,
        &["stage-delete", "from:bob", "--permanent", "--dry-run"],
    );
    assert_eq!(dry["would_stage"]["mode"], "permanent", "{dry}");
    assert_eq!(dry["would_stage"]["summary"]["count"], 6, "{dry}");
    assert_eq!(manifests(home), 0, "a dry run staged something");
    let staged = ok(
        home,
        &[
            "stage-delete",
            "from:bob",
            "--max-messages",
            "10",
            "--permanent",
        ],
    );
    assert_eq!(staged["manifest"]["mode"], "permanent", "{staged}");
    assert_eq!(staged["manifest"]["summary"]["count"], 6, "{staged}");
    let id = staged["manifest"]["id"].as_i64().unwrap().to_string();
    ok(home, &["delete-staged", "--cancel", &id]);

    // `update --delete` stages through the same path: a dry run stages nothing.
    let args = [
        "update",
        "--query",
        "from:bob",
        "--delete",
        "trash",
        "--dry-run",
    ];
    let dry = ok(home, &args);
    assert_eq!(dry["would_stage"]["mode"], "trash", "{dry}");
    assert_eq!(dry["would_stage"]["count"], 6, "{dry}");
    assert_eq!(manifests(home), 0, "a dry run staged something");

    // A misspelt option is refused with the nearest one, and nothing is staged.
    for (args, nearest) in [
        (
            &["stage-delete", "from:bob", "--permanet"][..],
            "--permanent",
        ),
        (&["search", "--jsno", "from:bob"], "--json"),
        (&["search", "from:bob", "--limt", "3"], "--limit"),
    ] {
        let run = mb_text(home, args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stdout);
        assert!(
            run.stderr.contains(&format!("did you mean {nearest}?")),
            "{args:?}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "{args:?} printed {}", run.stdout);
    }
    let typo = mb(home, &["stage-delete", "from:bob", "--permanet"]);
    assert_eq!(
        typo.json["error_type"], "validation_error",
        "{}",
        typo.stdout
    );
    assert_eq!(manifests(home), 0, "the misspelt command staged a manifest");
    // `-term` still negates.
    let not_alice = ok(home, &["search", "-from:alice", "--json", "in:inbox"]);
    assert_eq!(not_alice["total"], 10, "{not_alice}");
}

#[tokio::test]
async fn empty_results_totals_dates_and_the_terminator_are_honest() {
    let Some((home, _imap)) = setup("qry-empty").await else {
        return;
    };
    let home = home.path();
    let run = mb_text(home, &["search", "from:nobody"]);
    assert_eq!(run.code, 0);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert_eq!(run.stderr.trim(), "no messages match from:nobody");
    let empty = ok(home, &["search", "from:nobody"]);
    assert_eq!(empty["messages"], serde_json::json!([]));
    assert_eq!(empty["total"], 0);
    let all = ok(home, &["search", "in:inbox", "--limit", "5"]);
    assert_eq!(
        (all["messages"].as_array().unwrap().len(), &all["total"]),
        (5, &16.into())
    );

    // An impossible date is refused where it stands.
    let run = mb(home, &["search", "from:alice", "before:2026-02-31"]);
    assert_eq!(run.code, 2);
    assert_eq!(run.json["error_type"], "validation_error");
    let message = run.json["error"].as_str().unwrap();
    assert!(
        message.contains("position 12") && message.contains("before:2026-02-31"),
        "{message}"
    );

    // After `--`, a word starting with dashes is query text, not an option.
    let literal = ok(
        home,
        &["search", "--limit", "5", "--", "--json", "json-flag"],
    );
    assert_eq!(literal["total"], 1, "{literal}");
    assert_eq!(literal["messages"][0]["subject"], "Flags doc");
    let run = mb_text(home, &["search", "json-flag", "--", "--limit"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("no messages match json-flag --limit"),
        "{}",
        run.stderr
    );
}

/// The same criteria in mailbroker's language and in IMAP SEARCH's.
const SAME: [(&str, &str); 10] = [
    (
        "list:news.lists.example",
        "HEADER List-Id news.lists.example",
    ),
    (
        "is:list -list:lists.example",
        "OR HEADER List-Id \"\" HEADER List-Unsubscribe \"\" NOT HEADER List-Id lists.example",
    ),
    (
        "list:* OR from:alice",
        "OR OR HEADER List-Id \"\" HEADER List-Unsubscribe \"\" FROM alice",
    ),
    ("from:alice OR tag:Work", "OR FROM alice KEYWORD Work"),
    (
        "(from:alice OR is:flagged) is:unread",
        "OR FROM alice FLAGGED UNSEEN",
    ),
    (
        "-(from:alice OR tag:$Invoice)",
        "NOT OR FROM alice KEYWORD $Invoice",
    ),
    (
        "{subject:\"number 1\" subject:\"number 2\"} -is:read",
        "OR SUBJECT \"number 1\" SUBJECT \"number 2\" UNSEEN",
    ),
    (
        "is:flagged | tag:Work | from:carol",
        "OR OR FLAGGED KEYWORD Work FROM carol",
    ),
    (
        "-{is:read tag:$Invoice} subject:report",
        "NOT OR SEEN KEYWORD $Invoice SUBJECT report",
    ),
    (
        "zebra -(subject:\"number 3\" OR (from:bob is:read))",
        "BODY zebra NOT OR SUBJECT \"number 3\" (FROM bob SEEN)",
    ),
];

#[tokio::test]
async fn or_groups_and_negation_match_the_servers_own_search() {
    let Some((home, mut imap)) = setup("qry-server").await else {
        return;
    };
    for (ours, imap_criteria) in SAME {
        let expected = imap.uid_search("INBOX", imap_criteria).await.unwrap();
        let found = ok(
            home.path(),
            &["search", "--limit", "1000", &format!("in:inbox ({ours})")],
        );
        assert_eq!(
            uids(&found),
            expected,
            "{ours}  vs  UID SEARCH {imap_criteria}"
        );
        assert!(
            !expected.is_empty(),
            "{imap_criteria} matches nothing: a weak check"
        );
        assert_eq!(found["total"], expected.len(), "{ours}");
    }
}

#[tokio::test]
async fn a_query_means_the_same_messages_on_every_surface() {
    let Some((home, mut imap)) = setup("qry-surfaces").await else {
        return;
    };
    let session = common::mcp::connect(
        home.path(),
        common::mcp::client(None, rmcp::model::ProtocolVersion::V_2025_11_25),
    )
    .await;
    for (n, (ours, imap_criteria)) in SAME.iter().enumerate() {
        let query = format!("in:inbox ({ours})");
        let expected = imap.uid_search("INBOX", imap_criteria).await.unwrap();
        let cli = ok(home.path(), &["search", "--limit", "1000", &query]);
        let cli_ids = common::message_ids(&cli);
        let mut mcp_ids = common::mcp::ids(&session, &query).await;
        mcp_ids.sort_unstable();
        assert_eq!(mcp_ids, cli_ids, "MCP vs CLI: {query}");

        // stage-delete stages exactly those messages.
        let staged = ok(home.path(), &["stage-delete", &query]);
        let id = staged["manifest"]["id"].as_i64().unwrap().to_string();
        let shown = ok(home.path(), &["delete-staged", "--show", &id]);
        let mut staged_ids: Vec<i64> = shown["manifest"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["message_id"].as_i64().unwrap())
            .collect();
        staged_ids.sort_unstable();
        assert_eq!(staged_ids, cli_ids, "stage-delete vs search: {query}");
        ok(home.path(), &["delete-staged", "--cancel", &id]);

        // update --query tags exactly those on the server.
        let tag = format!("Probe{n}");
        let done = ok(
            home.path(),
            &["update", "--query", &query, "--add-tag", &tag, "--yes"],
        );
        assert_eq!(done["applied"], expected.len(), "{done}");
        let tagged = imap
            .uid_search("INBOX", &format!("KEYWORD {tag}"))
            .await
            .unwrap();
        assert_eq!(
            tagged, expected,
            "update --query vs UID SEARCH {imap_criteria}"
        );
    }
    session.cancel().await.ok();
}

/// A signed age or size was read as a number: `older_than:-5d` meant "older than five days
/// from now", every message, for `stage-delete` and MCP `update_message` too. Refused on
/// every surface, with nothing staged or written.
#[tokio::test]
async fn a_negative_age_or_size_is_refused_everywhere() {
    let Some((home, _imap)) = setup("qry-negative").await else {
        return;
    };
    let session = common::mcp::connect(
        home.path(),
        common::mcp::client(None, rmcp::model::ProtocolVersion::V_2025_11_25),
    )
    .await;
    let unread = || ok(home.path(), &["search", "is:unread"])["total"].clone();
    let before = unread();
    for query in ["older_than:-5d", "larger:-1", "newer_than:+2w"] {
        for args in [
            vec!["search", query],
            vec!["stage-delete", query],
            vec!["update", "--query", query, "--read", "--yes"],
        ] {
            let run = mb(home.path(), &args);
            assert_eq!(run.code, 2, "{args:?}: {}", run.stdout);
            assert_eq!(run.json["error_type"], "validation_error", "{args:?}");
        }
        for (tool, args) in [
            ("search_messages", serde_json::json!({ "query": query })),
            (
                "update_message",
                serde_json::json!({ "query": query, "read": true }),
            ),
            (
                "update_message",
                serde_json::json!({ "query": query, "delete": "trash" }),
            ),
        ] {
            let e = common::mcp::err_call(&session, tool, args).await;
            assert_eq!(e["error_type"], "validation_error", "{tool} {query}: {e}");
        }
    }
    assert_eq!(manifests(home.path()), 0, "nothing was staged");
    assert_eq!(unread(), before, "nothing was written");
    session.cancel().await.ok();
}

/// Query text an assistant or a person might send, well-formed or not: fragments of the
/// language in any order, and arbitrary text.
fn query_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let fragment = prop::sample::select(vec![
        "from:alice",
        "tag:Work",
        "is:unread",
        "in:inbox",
        "subject:\"number 1\"",
        "zebra",
        "before:2026-11-03",
        "larger:1K",
        "has:attachment",
        "account:q",
        "list:news",
        "list:*",
        "is:list",
        "list:",
        "thread:0a1b2c3d4e5f",
        "thread:",
        "-thread:x",
        "OR",
        "AND",
        "|",
        "(",
        ")",
        "{",
        "}",
        "-",
        "--",
        "-(",
        "\"",
        ":",
        "x:",
        "é",
        "%",
        "_",
        "'",
        ";",
        "*",
        "NEAR",
        "\"a\"\"b\"",
        "in:anywhere",
        "subject:(",
        "\\",
        "\u{0}",
        "newer_than:1é",
        "older_than:99999999999999999999y",
        "newer_than:9223372036854775807d",
        "larger:18446744073709551615G",
        "smaller:1é",
        "before:2026-02-31",
    ]);
    let spaced =
        prop::collection::vec((fragment, prop::sample::select(vec!["", " ", "  "])), 0..24)
            .prop_map(|parts| {
                parts
                    .into_iter()
                    .map(|(f, s)| format!("{f}{s}"))
                    .collect::<String>()
            });
    // Long runs of a prefix that nests (negation, groups) must be refused or read, never
    // recursed into until the stack runs out.
    let runs = (
        prop::sample::select(vec!["-", "-(", "(", "{", "NOT "]),
        0usize..20_000,
    )
        .prop_map(|(unit, n)| format!("{}zebra", unit.repeat(n)));
    prop_oneof![6 => spaced, 2 => any::<String>(), 1 => runs]
}

/// The same account synced into a second index on PostgreSQL: the same corpus on the other
/// engine, to run the same queries on.
fn same_corpus_on_postgres(
    rt: &tokio::runtime::Runtime,
    user: &str,
) -> Option<(tempfile::TempDir, mailbroker::store::Store)> {
    let url = common::postgres_database()?;
    let home = tempfile::tempdir().unwrap();
    common::on_postgres(home.path(), &url);
    add_account(server()?, home.path(), "q", user, &[]);
    ok(home.path(), &["sync"]);
    let store = rt
        .block_on(mailbroker::store::Store::connect(&url))
        .unwrap();
    Some((home, store))
}

/// What a query found, engine aside: the server's ids of the messages, and the total.
fn found_on(
    rt: &tokio::runtime::Runtime,
    store: &mailbroker::store::Store,
    query: &mailbroker::search::Query,
) -> Result<(Vec<String>, u64), String> {
    let rows = rt
        .block_on(store.search(query, 50, 0))
        .map_err(|e| e.to_string())?;
    let total = rt.block_on(store.count(query)).map_err(|e| e.to_string())?;
    let mut ids: Vec<String> = rows
        .iter()
        .map(|r| r.place.remote_id.as_str().to_string())
        .collect();
    ids.sort();
    Ok((ids, total))
}

/// Any text is parsed or refused with a validation error; what is accepted runs, on SQLite
/// and on PostgreSQL, and both engines find the same messages and the same total.
#[test]
fn any_query_text_parses_or_is_refused_and_accepted_ones_run() {
    use proptest::test_runner::{Config, TestRunner};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some((home, _imap)) = rt.block_on(setup("qry-fuzz")) else {
        return;
    };
    let db = mailbroker::home::Home::resolve(Some(home.path()))
        .unwrap()
        .database();
    let store = rt.block_on(mailbroker::store::Store::open(&db)).unwrap();
    let postgres = same_corpus_on_postgres(&rt, "qry-fuzz");
    let stores: Vec<&mailbroker::store::Store> = std::iter::once(&store)
        .chain(postgres.as_ref().map(|(_, s)| s))
        .collect();
    // The largest queries the parser accepts run too: SQLite's expression depth is limited.
    let max = mailbroker::search::MAX_TERMS;
    let deep = mailbroker::search::MAX_DEPTH;
    for text in [
        vec!["from:a"; max].join(" OR "),
        vec!["-zebra"; max].join(" "),
        format!(
            "{}{}{}",
            "-(".repeat(deep),
            vec!["x OR y"; max / 2].join(" "),
            ")".repeat(deep)
        ),
        format!(
            "{}{}",
            "(a OR ".repeat(deep),
            ")".repeat(deep).replacen(')', "b)", 1)
        ),
    ] {
        let query = mailbroker::search::parse(&text, 0).expect("accepted");
        for store in &stores {
            rt.block_on(store.count(&query))
                .unwrap_or_else(|e| panic!("{}…: {e}", &text[..40]));
        }
    }
    let config = Config {
        cases: 5000,
        failure_persistence: None,
        ..Config::default()
    };
    let (accepted, refused) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    TestRunner::new(config)
        .run(&query_text(), |text| {
            match mailbroker::search::parse(&text, 1_800_000_000) {
                Ok(query) => {
                    accepted.set(accepted.get() + 1);
                    let on_sqlite = found_on(&rt, stores[0], &query)
                        .unwrap_or_else(|e| panic!("{text:?} was accepted but failed: {e}"));
                    assert!(on_sqlite.0.len() as u64 <= on_sqlite.1, "{text:?}");
                    for other in &stores[1..] {
                        let there = found_on(&rt, other, &query).unwrap_or_else(|e| {
                            panic!("{text:?} was accepted but failed on PostgreSQL: {e}")
                        });
                        assert_eq!(there, on_sqlite, "{text:?}: PostgreSQL against SQLite");
                    }
                }
                Err(e) => {
                    refused.set(refused.get() + 1);
                    assert!(
                        ["validation_error", "unsupported"].contains(&e.error_type()),
                        "{text:?}: {e}"
                    );
                }
            }
            Ok(())
        })
        .unwrap();
    // Both outcomes were exercised, so the property says something about each.
    let (accepted, refused) = (accepted.get(), refused.get());
    assert!(
        accepted > 300 && refused > 300,
        "accepted {accepted}, refused {refused}"
    );
}

/// An index made before lists and conversations were indexed (the columns empty, as the
/// migration leaves them) learns both from one `sync --full`, keeping every local id.
#[tokio::test]
async fn an_older_index_learns_lists_and_threads_from_a_full_sync() {
    use sqlx::{Connection, SqliteConnection};
    let Some((home, _imap)) = setup("qry-backfill").await else {
        return;
    };
    let ids = |query: &str| -> Vec<i64> {
        let found = ok(home.path(), &["search", "--limit", "100", query]);
        found["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_i64().unwrap())
            .collect()
    };
    let listed = ids("is:list");
    assert_eq!(listed.len(), 3);
    let all = ids("in:anywhere");
    let db = home.path().join("index.sqlite3");
    let mut conn = SqliteConnection::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    sqlx::query("UPDATE messages SET list_id = NULL, thread_id = NULL")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    assert!(ids("is:list").is_empty());
    ok(home.path(), &["sync", "--full"]);
    assert_eq!(ids("is:list"), listed);
    assert_eq!(ids("in:anywhere"), all);
    let alice = ok(home.path(), &["search", "from:alice", "--limit", "1"]);
    assert_eq!(alice["messages"][0]["thread_messages"], 1, "{alice}");
}

/// `from:sender5@` selected `sender50@…` through `sender59@…` too (its last word matched as
/// the start of longer words), so `stage-delete 'from:sender5@'` staged mail from eleven
/// senders. A value that ends in punctuation pins its last word's end, on SQLite and on
/// PostgreSQL; one that ends in a letter or digit keeps the prefix rule.
#[tokio::test]
async fn a_value_ending_in_punctuation_selects_only_what_was_typed() {
    let Some(dovecot) = server() else {
        return;
    };
    let user = "qry-pinned";
    let home = tempfile::tempdir().unwrap();
    let mut imap = ImapClient::connect(dovecot, user).await.unwrap();
    for (i, from) in [
        "sender5@example.org",
        "sender50@example.org",
        "sender59@example.org",
    ]
    .iter()
    .enumerate()
    {
        let mail = message(i, from, &format!("Note {i}"), "hello");
        imap.append("INBOX", "", &mail).await.unwrap();
    }
    add_account(dovecot, home.path(), "q", user, &[]);
    ok(home.path(), &["sync"]);
    let senders = |found: &Value| -> Vec<String> {
        let mut out: Vec<String> = found["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["from"].as_str().unwrap().to_string())
            .collect();
        out.sort();
        out
    };
    let pinned = ok(home.path(), &["search", "from:sender5@"]);
    assert_eq!(senders(&pinned), ["sender5@example.org"], "{pinned}");
    let open = ok(home.path(), &["search", "from:sender5"]);
    assert_eq!(senders(&open).len(), 3, "{open}");
    let domain = ok(home.path(), &["search", "from:sender5@example.org"]);
    assert_eq!(senders(&domain), ["sender5@example.org"], "{domain}");
    let staged = ok(home.path(), &["stage-delete", "from:sender5@"]);
    assert_eq!(staged["manifest"]["summary"]["count"], 1, "{staged}");

    // The same corpus on PostgreSQL finds the same.
    let Some(url) = common::postgres_database() else {
        return;
    };
    let pg_home = tempfile::tempdir().unwrap();
    common::on_postgres(pg_home.path(), &url);
    add_account(dovecot, pg_home.path(), "q", user, &[]);
    ok(pg_home.path(), &["sync"]);
    let store = mailbroker::store::Store::connect(&url).await.unwrap();
    for (text, want) in [
        ("from:sender5@", 1),
        ("from:sender5", 3),
        ("from:sender5@example.org", 1),
    ] {
        let query = mailbroker::search::parse(text, 0).unwrap();
        assert_eq!(store.count(&query).await.unwrap(), want, "{text}");
    }
}
