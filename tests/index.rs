//! The index across schema versions: a migration keeps what the index held.

mod common;

use common::ok;
use sqlx::Connection;

/// A home whose index was migrated only up to schema `version` and then given `rows` (SQL):
/// what an older mailbroker left behind. Returns the home and the index's URL.
async fn home_with_index_at(version: i64, rows: &str) -> (tempfile::TempDir, String) {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("index.sqlite3");
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::migrate!("./crates/store/migrations")
        .run_to(version, &mut conn)
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(rows.to_string()))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    (home, url)
}

/// An index written before message state had its own table (schema 5) still shows each
/// message's flags, tags and read state after the upgrade, and `is:` and `tag:` searches
/// still find them.
#[tokio::test]
async fn message_state_survives_the_upgrade_to_its_own_table() {
    let (home, _) = home_with_index_at(
        5,
        r#"INSERT INTO accounts (id, provider, settings, capabilities, created_at)
             VALUES ('old', 'imap', '{}', '{"extensions":[],"custom_tags":true}', 0);
           INSERT INTO mailboxes (id, account_id, name, role) VALUES (1, 'old', 'INBOX', 'inbox');
           INSERT INTO messages (id, mailbox_id, uidvalidity, uid, modseq, subject, is_read,
               is_flagged, flags, tags)
             VALUES (7, 1, 1, 70, 42, 'Kept', 1, 0, '["\\Seen","$Kept"]', '["$Kept"]'),
                    (8, 1, 1, 80, 43, 'Plain', 0, 1, '["\\Flagged"]', '[]');
           INSERT INTO message_tags (message_id, tag) VALUES (7, '$Kept');"#,
    )
    .await;

    let found = ok(home.path(), &["search", "tag:$Kept", "is:read"]);
    let messages = found["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{found}");
    assert_eq!(messages[0]["id"], 7);
    // Later migrations carry the modseq on as the message's version, with its id.
    assert_eq!(messages[0]["version"], "42");
    assert_eq!(messages[0]["remote_id"], "1:70");
    assert_eq!(messages[0]["tags"], serde_json::json!(["$Kept"]));
    assert_eq!(messages[0]["flags"], serde_json::json!(["\\Seen", "$Kept"]));
    let flagged = ok(home.path(), &["search", "is:flagged"]);
    let messages = flagged["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{flagged}");
    assert_eq!(messages[0]["id"], 8);
    assert_eq!(messages[0]["read"], false);
}

/// Changes journaled before a write's unanswered messages had a count of their own (schema
/// 31 and earlier) counted them as failed; the upgrade splits that count by the outcomes of
/// the change's messages.
#[tokio::test]
async fn an_older_changes_unanswered_messages_are_counted_as_unknown_after_the_upgrade() {
    let state = |uid: u32| {
        format!(
            r#"{{"mailbox":"INBOX","uidvalidity":5,"uid":{uid},"read":true,"flagged":false,"tags":[]}}"#
        )
    };
    let (home, _) = home_with_index_at(
        6,
        &format!(
            r#"INSERT INTO changes (id, created_at, origin, selection, patch, plan, applied, failed)
                 VALUES (4, 0, 'cli', '{{"query":"tag:x"}}', '{{"flagged":true}}', '[]', 1, 2);
               INSERT INTO change_items (change_id, message_id, account_id, outcome, error_type,
                   error, before, after) VALUES
                 (4, 7, 'old', 'applied', NULL, NULL, '{a}', '{a}'),
                 (4, 8, 'old', 'unknown', 'outcome_unknown', 'no answer', '{b}', NULL),
                 (4, 9, 'old', 'failed', 'verification_failed', 'did not show it', '{c}', NULL);"#,
            a = state(70),
            b = state(80),
            c = state(90)
        ),
    )
    .await;

    let shown = ok(home.path(), &["changes", "4"]);
    let change = &shown["change"];
    assert_eq!(
        common::outcome_counts(change),
        [Some(1), Some(1), Some(1)],
        "{shown}"
    );
}

/// Journal entries written before states were stored once per change (schema 6) still show
/// every item's state before and after, UIDs included, and two messages that shared a state
/// now share one stored row.
#[tokio::test]
async fn journal_items_survive_the_upgrade_to_shared_states() {
    let (home, url) = home_with_index_at(6,
        r#"INSERT INTO changes (id, created_at, origin, selection, patch, plan, applied, failed)
             VALUES (3, 0, 'cli', '{"query":"tag:x"}', '{"add_tags":["Done"]}', '[]', 2, 1);
           INSERT INTO change_items (change_id, message_id, account_id, outcome, error_type,
               error, before, after) VALUES
             (3, 7, 'old', 'applied', NULL, NULL,
              '{"mailbox":"INBOX","uidvalidity":5,"uid":70,"read":true,"flagged":false,"tags":["x"]}',
              '{"mailbox":"Archive","uidvalidity":6,"uid":1,"read":true,"flagged":false,"tags":["x","Done"]}'),
             (3, 8, 'old', 'applied', NULL, NULL,
              '{"mailbox":"INBOX","uidvalidity":5,"uid":80,"read":true,"flagged":false,"tags":["x"]}',
              '{"mailbox":"Archive","uidvalidity":6,"uid":2,"read":true,"flagged":false,"tags":["x","Done"]}'),
             (3, 9, 'old', 'failed', 'verification_failed', 'did not show it',
              '{"mailbox":"INBOX","uidvalidity":5,"uid":90,"read":false,"flagged":true,"tags":[]}',
              NULL);"#,
    )
    .await;

    let shown = ok(home.path(), &["changes", "3"]);
    let items = shown["change"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "{shown}");
    // Later migrations join UIDVALIDITY and UID into the message's remote id.
    let state =
        |mailbox: &str, validity: u32, uid: u32, read: bool, flagged: bool, tags: &[&str]| {
            serde_json::json!({"mailbox": mailbox, "remote_id": format!("{validity}:{uid}"),
            "read": read, "flagged": flagged, "tags": tags})
        };
    assert_eq!(items[0]["message_id"], 7);
    assert_eq!(
        items[0]["before"],
        state("INBOX", 5, 70, true, false, &["x"])
    );
    assert_eq!(
        items[0]["after"],
        state("Archive", 6, 1, true, false, &["x", "Done"])
    );
    assert_eq!(
        items[1]["before"],
        state("INBOX", 5, 80, true, false, &["x"])
    );
    assert_eq!(
        items[1]["after"],
        state("Archive", 6, 2, true, false, &["x", "Done"])
    );
    assert_eq!(items[2]["outcome"], "failed");
    assert_eq!(items[2]["error_type"], "verification_failed");
    assert_eq!(items[2]["before"], state("INBOX", 5, 90, false, true, &[]));
    assert!(items[2]["after"].is_null(), "{shown}");

    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM change_states WHERE change_id = 3")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(stored, 3, "two shared states and the failed item's own");
}

/// What a write opens ahead comes from `selection_places`: the account and mailbox of each
/// selected message, found without reading the messages; and an unknown id is refused there,
/// before any session opens, as it is when the targets are read.
#[tokio::test]
async fn a_selection_names_its_places_and_refuses_unknown_ids() {
    let (home, _) = home_with_index_at(
        7,
        r#"INSERT INTO accounts (id, provider, settings, capabilities, created_at)
             VALUES ('a', 'imap', '{}', '{"extensions":[],"custom_tags":true}', 0);
           INSERT INTO mailboxes (id, account_id, name, role)
             VALUES (1, 'a', 'INBOX', 'inbox'), (2, 'a', 'Archive', 'archive'),
                    (3, 'a', 'Empty', NULL);
           INSERT INTO messages (id, mailbox_id, uidvalidity, uid, subject)
             VALUES (7, 1, 1, 70, 'Kept'), (8, 2, 1, 80, 'Filed'), (9, 2, 1, 81, 'Also');
           INSERT INTO message_state (id, tags) VALUES (7, '["$Kept"]'), (8, '["$Kept"]'),
             (9, '[]');
           INSERT INTO message_tags (message_id, tag) VALUES (7, '$Kept'), (8, '$Kept');"#,
    )
    .await;
    let store = mailbroker::store::Store::open(&home.path().join("index.sqlite3"))
        .await
        .unwrap();
    let place = |mailbox: &str| ("a".parse().unwrap(), mailbox.to_string());

    let by_ids = store.selection_places(&[8, 9], None).await.unwrap();
    assert_eq!(by_ids, vec![place("Archive")]);
    let query = mailbroker::search::parse("tag:$Kept", 0).unwrap();
    let by_query = store.selection_places(&[], Some(&query)).await.unwrap();
    assert_eq!(by_query, vec![place("Archive"), place("INBOX")]);
    let unknown = store.selection_places(&[7, 999], None).await.unwrap_err();
    assert_eq!(unknown.error_type(), "not_found", "{unknown:?}");
    assert!(unknown.message().contains("999"), "{unknown:?}");
    store.close().await;
}

/// An index written while the snippet was a column of `messages` (schema 13) still shows each
/// message's snippet after it moves to its own table, and a message without one shows none.
#[tokio::test]
async fn snippets_survive_the_move_to_their_own_table() {
    let (home, _) = home_with_index_at(
        13,
        r#"INSERT INTO accounts (id, provider, settings, capabilities, created_at)
             VALUES ('old', 'imap', '{}', '{"extensions":[],"custom_tags":true}', 0);
           INSERT INTO mailboxes (id, account_id, name, role) VALUES (1, 'old', 'INBOX', 'inbox');
           INSERT INTO messages (id, mailbox_id, uidvalidity, uid, subject, date, snippet)
             VALUES (7, 1, 1, 70, 'With text', 2, 'the kept snippet'),
                    (8, 1, 1, 80, 'Without', 1, '');
           INSERT INTO message_state (id) VALUES (7), (8);"#,
    )
    .await;

    let found = ok(home.path(), &["search", "in:inbox"]);
    let messages = found["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{found}");
    assert_eq!(messages[0]["id"], 7);
    assert_eq!(messages[0]["snippet"], "the kept snippet");
    assert_eq!(messages[1]["id"], 8);
    assert_eq!(messages[1]["snippet"], "");
}

/// An index from before the header and state indexes (schema 23) answers from the new
/// indexes after the upgrade: senders and subjects by their words (the last one also as the
/// start of a word), punctuation alone as a substring, unread messages by their mailbox (also
/// after a move), attachments by account; a set of terms with OR and negation counts the
/// same messages its page lists.
#[tokio::test]
async fn headers_state_and_attachments_are_read_from_indexes_after_the_upgrade() {
    let (home, url) = home_with_index_at(
        23,
        r#"INSERT INTO accounts (id, provider, settings, capabilities, created_at)
             VALUES ('old', 'imap', '{}', '{"extensions":[],"custom_tags":true}', 0);
           INSERT INTO mailboxes (id, account_id, name, role)
             VALUES (1, 'old', 'INBOX', 'inbox'), (2, 'old', 'Archive', 'archive');
           INSERT INTO messages (id, mailbox_id, remote_id, from_addr, to_addr, subject, date,
               has_attachments)
             VALUES (1, 1, '1:1', 'Alice Example <alice@example.test>', 'me@example.org',
                     'Quarterly reports', 5, 1),
                    (2, 1, '1:2', 'bob@example.test', 'me@example.org', 're: report', 4, 0),
                    (3, 1, '1:3', 'Shop <news@shop.example>', 'me@example.org',
                     'Xreportage for lunch', 3, 1),
                    (4, 2, '1:4', 'Bob Builder <bob@build.example>', 'alice@example.test',
                     'Lunch', 2, 0);
           INSERT INTO messages (id, mailbox_id, remote_id, from_addr, subject, date,
               text_pending)
             VALUES (5, 2, '1:5', 'Carol <carol@pending.example>', 'Pending', 1, 1);
           INSERT INTO message_state (id, is_read) VALUES (1, 0), (2, 1), (3, 0), (4, 0), (5, 1);"#,
    )
    .await;
    let search = |query: &str| ok(home.path(), &["search", "--limit", "100", query]);
    for (query, want) in [
        ("from:ali", vec![1]),
        ("from:example.test", vec![1, 2]),
        ("from:\"Alice Example\"", vec![1]),
        ("from:bob", vec![2, 4]),
        ("to:alice", vec![4]),
        // Inside a word is not a word's start: docs/search.md says so.
        ("from:lice", vec![]),
        ("from:@", vec![1, 2, 3, 4, 5]),
        // A message whose text (and so its header index row) is still to come: by substring.
        ("from:carol", vec![5]),
        ("from:arol", vec![5]),
        ("from:carol OR from:ali", vec![1, 5]),
        ("subject:report", vec![1, 2]),
        ("subject:report -from:bob", vec![1]),
        ("(from:alice OR from:bob) -subject:lunch", vec![1, 2]),
        ("is:unread in:inbox", vec![1, 3]),
        ("account:old has:attachment", vec![1, 3]),
    ] {
        let found = search(query);
        assert_eq!(common::message_ids(&found), want, "{query}: {found}");
        assert_eq!(found["total"], want.len(), "{query}");
    }

    // A move in the index carries the state row's mailbox with it; a message's text coming
    // in indexes its headers, and a deleted message leaves the header index.
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    for sql in [
        "UPDATE messages SET mailbox_id = 2 WHERE id = 3",
        "UPDATE messages SET text_pending = 0 WHERE id = 5",
        "DELETE FROM messages WHERE id = 2",
        "INSERT INTO message_headers (message_headers, rank) VALUES ('integrity-check', 1)",
    ] {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut conn)
            .await
            .unwrap();
    }
    conn.close().await.unwrap();
    assert_eq!(common::message_ids(&search("from:carol")), vec![5]);
    assert_eq!(common::message_ids(&search("from:arol")), Vec::<i64>::new());
    assert_eq!(common::message_ids(&search("from:bob")), vec![4]);
    assert_eq!(common::message_ids(&search("is:unread in:inbox")), vec![1]);
    assert_eq!(
        common::message_ids(&search("is:unread in:archive")),
        vec![3, 4]
    );
}

/// An index from before conversations were an account's (schema 32) keeps its thread ids
/// meaningful: the upgrade rewrites them so that the same conversation in two accounts is
/// two, and a message that named a conversation's Message-ID under another subject (on
/// IMAP) is no longer in it; a Gmail thread keeps every subject it has.
#[tokio::test]
async fn conversations_become_each_accounts_on_the_upgrade() {
    let (home, _) = home_with_index_at(
        32,
        r#"INSERT INTO accounts (id, provider, settings, capabilities, created_at)
             VALUES ('a', 'imap', '{}', '{"extensions":[],"custom_tags":true}', 0),
                    ('b', 'imap', '{}', '{"extensions":[],"custom_tags":true}', 0),
                    ('g', 'gmail', '{}', '{"extensions":[],"custom_tags":true}', 0);
           INSERT INTO mailboxes (id, account_id, name, role)
             VALUES (1, 'a', 'INBOX', 'inbox'), (2, 'b', 'INBOX', 'inbox'),
                    (3, 'g', 'INBOX', 'inbox');
           INSERT INTO messages (id, mailbox_id, remote_id, subject, date, thread_id)
             VALUES (1, 1, '1:1', 'Lunch', 3, 'aaaaaaaaaaaa'),
                    (2, 1, '1:2', 'Re: [team] Lunch', 2, 'aaaaaaaaaaaa'),
                    (3, 1, '1:3', 'Cheap watches', 1, 'aaaaaaaaaaaa'),
                    (4, 2, '1:1', 'Lunch', 3, 'aaaaaaaaaaaa'),
                    (5, 3, 'g1', 'Lunch', 2, 'bbbbbbbbbbbb'),
                    (6, 3, 'g2', 'New subject', 1, 'bbbbbbbbbbbb');
           INSERT INTO message_state (id, mailbox_id)
             VALUES (1, 1), (2, 1), (3, 1), (4, 2), (5, 3), (6, 3);"#,
    )
    .await;
    let found = ok(home.path(), &["search", "--limit", "100", "in:inbox"]);
    let thread = |id: i64| {
        let rows = found["messages"].as_array().unwrap();
        let row = rows
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("{id}: {found}"));
        (
            row["thread"].as_str().unwrap().to_string(),
            row["thread_messages"].as_i64().unwrap(),
        )
    };
    assert_eq!(thread(1), (thread(2).0, 2), "{found}");
    assert_ne!(thread(3).0, thread(1).0, "{found}");
    assert_eq!(thread(3).1, 1);
    assert_ne!(
        thread(4).0,
        thread(1).0,
        "one conversation across accounts: {found}"
    );
    assert_eq!(
        thread(5),
        (thread(6).0, 2),
        "a server's thread keeps its subjects: {found}"
    );
    for old in ["aaaaaaaaaaaa", "bbbbbbbbbbbb"] {
        let by_old = ok(home.path(), &["search", &format!("thread:{old}")]);
        assert_eq!(by_old["total"], 0, "{by_old}");
    }
}
