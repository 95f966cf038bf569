//! An index made by the release before opaque ids (schema 14: integer UIDs, modseqs and
//! IMAP counters) upgrades in place: every message, journal item, manifest item and deleted
//! message keeps its local id and gets the remote id its adapter now spells, and the upgraded
//! index works as before (search, the journal, staged deletions, an undo's plan).
//!
//! `tests/fixtures/index-0014.sqlite3` was made by that release's own binaries with
//! `scripts/upgrade-fixture` (an IMAP account on Dovecot, a Gmail account on the mock, each
//! synced, changed and with staged deletions run and pending).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::ok;
use sqlx::{Connection, SqliteConnection};

const FIXTURE: &[u8] = include_bytes!("fixtures/index-0014.sqlite3");

/// The remote id a row of the old schema gets: what each adapter builds today.
fn remote_id(provider: &str, uidvalidity: i64, uid: i64) -> String {
    match provider {
        // Gmail ids were stored as their number (a bit cast into SQLite's signed integer).
        "gmail" => format!("{:016x}", uid as u64),
        _ => format!("{uidvalidity}:{uid}"),
    }
}

async fn connect(url: &str) -> SqliteConnection {
    SqliteConnection::connect(url).await.unwrap()
}

async fn rows<T>(conn: &mut SqliteConnection, sql: &str) -> Vec<T>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> + Send + Unpin,
{
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_all(conn)
        .await
        .unwrap()
}

type Ids = BTreeMap<(i64, i64), String>;

/// What the old schema holds, each identity already as the new schema must spell it.
struct Expected {
    messages: BTreeMap<i64, (String, String)>,
    cursors: BTreeMap<i64, serde_json::Value>,
    manifest_items: Ids,
    deleted: BTreeMap<i64, String>,
    before: Ids,
    after: Ids,
    fts: Vec<i64>,
    /// Unread messages in an archive, and messages from an address at `acme.example`.
    unread_archived: u64,
    from_domain: BTreeSet<i64>,
}

async fn expected(conn: &mut SqliteConnection) -> Expected {
    let version: i64 = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(version, 14, "the fixture is the previous release's index");
    let provider = "(SELECT provider FROM accounts a WHERE a.id = x.account_id)";
    let messages: Vec<(i64, String, i64, i64, i64)> = rows(
        conn,
        "SELECT m.id, a.provider, m.uidvalidity, m.uid, s.modseq FROM messages m
         JOIN mailboxes b ON b.id = m.mailbox_id JOIN accounts a ON a.id = b.account_id
         JOIN message_state s ON s.id = m.id",
    )
    .await;
    let cursors: Vec<(i64, String, i64, i64, i64)> = rows(
        conn,
        "SELECT b.id, a.provider, b.uidvalidity, b.uidnext, b.highestmodseq FROM mailboxes b
         JOIN accounts a ON a.id = b.account_id",
    )
    .await;
    let items: Vec<(i64, i64, String, i64, i64)> = rows(
        conn,
        &format!(
            "SELECT manifest_id, message_id, {provider}, uidvalidity, uid FROM manifest_items x"
        ),
    )
    .await;
    let deleted: Vec<(i64, String, i64, i64)> = rows(
        conn,
        &format!("SELECT id, {provider}, uidvalidity, uid FROM deleted_messages x"),
    )
    .await;
    // change, message, provider, then UIDVALIDITY and UID before and after.
    type JournalRow = (i64, i64, String, i64, i64, Option<i64>, Option<i64>);
    let journal: Vec<JournalRow> = rows(
        conn,
        &format!(
            "SELECT change_id, message_id, {provider},
               (SELECT state ->> 'uidvalidity' FROM change_states WHERE id = x.before_state),
               before_uid,
               (SELECT state ->> 'uidvalidity' FROM change_states WHERE id = x.after_state),
               after_uid
             FROM change_items x"
        ),
    )
    .await;
    let fts: Vec<(i64,)> = rows(
        conn,
        "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'linkedin' ORDER BY rowid",
    )
    .await;
    let unread_archived: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM messages m JOIN message_state s ON s.id = m.id
         JOIN mailboxes b ON b.id = m.mailbox_id WHERE s.is_read = 0 AND b.role = 'archive'",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    let from_domain: Vec<(i64,)> = rows(
        conn,
        "SELECT id FROM messages WHERE from_addr LIKE '%@acme.example%'",
    )
    .await;
    Expected {
        unread_archived: unread_archived as u64,
        from_domain: from_domain.into_iter().map(|(id,)| id).collect(),
        messages: messages
            .into_iter()
            .map(|(id, p, v, uid, modseq)| {
                let version = if modseq == 0 {
                    String::new()
                } else {
                    modseq.to_string()
                };
                (id, (remote_id(&p, v, uid), version))
            })
            .collect(),
        cursors: cursors
            .into_iter()
            .map(|(id, p, v, next, modseq)| {
                let cursor = match (p.as_str(), v) {
                    (_, 0) => String::new().into(),
                    ("gmail", _) => modseq.to_string().into(),
                    _ => serde_json::json!({"uidvalidity": v, "uidnext": next,
                                            "highestmodseq": modseq}),
                };
                (id, cursor)
            })
            .collect(),
        manifest_items: items
            .into_iter()
            .map(|(m, id, p, v, uid)| ((m, id), remote_id(&p, v, uid)))
            .collect(),
        deleted: deleted
            .into_iter()
            .map(|(id, p, v, uid)| (id, remote_id(&p, v, uid)))
            .collect(),
        before: journal
            .iter()
            .map(|(c, id, p, v, uid, ..)| ((*c, *id), remote_id(p, *v, *uid)))
            .collect(),
        after: journal
            .iter()
            .filter_map(|(c, id, p, _, _, v, uid)| Some(((*c, *id), remote_id(p, (*v)?, (*uid)?))))
            .collect(),
        fts: fts.into_iter().map(|(id,)| id).collect(),
    }
}

#[tokio::test]
async fn an_index_of_the_previous_release_upgrades_row_for_row() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("index.sqlite3");
    std::fs::write(&path, FIXTURE).unwrap();
    let url = format!("sqlite://{}", path.display());
    let mut conn = connect(&url).await;
    let want = expected(&mut conn).await;
    conn.close().await.unwrap();
    // The fixture has what the upgrade must carry: both providers, moves, deletions.
    assert!(want.messages.len() > 40, "{}", want.messages.len());
    assert!(want.messages.values().any(|(id, _)| !id.contains(':')));
    assert!(want.after.len() > 20 && !want.deleted.is_empty());
    assert!(!want.manifest_items.is_empty() && !want.fts.is_empty());

    // Upgraded as a person meets it: by the first command.
    let found = ok(home.path(), &["search", "from:linkedin", "--limit", "500"]);
    let found: BTreeSet<i64> = common::message_ids(&found).into_iter().collect();
    assert_eq!(found, want.fts.iter().copied().collect(), "same messages");

    // Read from the new indexes, the same messages as the old scans found.
    let unread = ok(
        home.path(),
        &["search", "is:unread", "in:archive", "--limit", "1"],
    );
    assert!(want.unread_archived > 0);
    assert_eq!(unread["total"], want.unread_archived, "{unread}");
    let domain = ok(
        home.path(),
        &["search", "from:acme.example", "--limit", "500"],
    );
    let domain: BTreeSet<i64> = common::message_ids(&domain).into_iter().collect();
    assert!(!want.from_domain.is_empty());
    assert_eq!(domain, want.from_domain);

    let mut conn = connect(&url).await;
    let messages: Vec<(i64, String, String)> = rows(
        &mut conn,
        "SELECT m.id, m.remote_id, s.version FROM messages m JOIN message_state s ON s.id = m.id",
    )
    .await;
    let messages: BTreeMap<i64, (String, String)> = messages
        .into_iter()
        .map(|(id, r, v)| (id, (r, v)))
        .collect();
    assert_eq!(messages, want.messages);
    let cursors: Vec<(i64, String)> = rows(&mut conn, "SELECT id, cursor FROM mailboxes").await;
    // IMAP's cursor is JSON (compared as such); Gmail's is a history id.
    let cursors: BTreeMap<i64, serde_json::Value> = cursors
        .into_iter()
        .map(|(id, c)| match c.starts_with('{') {
            true => (id, serde_json::from_str(&c).unwrap()),
            false => (id, c.into()),
        })
        .collect();
    assert_eq!(cursors, want.cursors);
    let items: Vec<(i64, i64, String)> = rows(
        &mut conn,
        "SELECT manifest_id, message_id, remote_id FROM manifest_items",
    )
    .await;
    let items: Ids = items.into_iter().map(|(m, id, r)| ((m, id), r)).collect();
    assert_eq!(items, want.manifest_items);
    let deleted: Vec<(i64, String)> =
        rows(&mut conn, "SELECT id, remote_id FROM deleted_messages").await;
    assert_eq!(
        deleted.into_iter().collect::<BTreeMap<_, _>>(),
        want.deleted
    );
    let journal: Vec<(i64, i64, String, Option<String>)> = rows(
        &mut conn,
        "SELECT change_id, message_id, before_id, after_id FROM change_items",
    )
    .await;
    let before: Ids = journal
        .iter()
        .map(|(c, id, b, _)| ((*c, *id), b.clone()))
        .collect();
    let after: Ids = journal
        .iter()
        .filter_map(|(c, id, _, a)| Some(((*c, *id), a.clone()?)))
        .collect();
    assert_eq!(before, want.before);
    assert_eq!(after, want.after);
    let fts: Vec<(i64,)> = rows(
        &mut conn,
        "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'linkedin' ORDER BY rowid",
    )
    .await;
    assert_eq!(
        fts.into_iter().map(|(id,)| id).collect::<Vec<_>>(),
        want.fts
    );
    // The header index was built from every row the old index had (FTS5 compares it with
    // the messages table), and each state row knows its message's mailbox.
    sqlx::query(
        "INSERT INTO message_headers (message_headers, rank) VALUES ('integrity-check', 1)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let astray: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM message_state s JOIN messages m ON m.id = s.id
         WHERE s.mailbox_id IS NOT m.mailbox_id",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(astray, 0);
    let fk: Vec<(String, i64, String, i64)> = rows(&mut conn, "PRAGMA foreign_key_check").await;
    assert!(fk.is_empty(), "{fk:?}");
    conn.close().await.unwrap();

    // The journal and the index agree under the new ids: undoing the first change (a
    // move to the archive, the messages still there) plans every message, none stale.
    let plan = ok(home.path(), &["undo", "1", "--dry-run"]);
    assert_eq!(plan["stale"], 0, "{plan}");
    assert_eq!(plan["planned"], 10, "{plan}");
    let shown = ok(home.path(), &["changes", "1"]);
    let first = &shown["change"]["items"][0];
    let key = (1, first["message_id"].as_i64().unwrap());
    assert_eq!(first["before"]["remote_id"], want.before[&key].as_str());
    assert_eq!(first["after"]["remote_id"], want.after[&key].as_str());
    let pending = ok(home.path(), &["delete-staged"]);
    assert_eq!(
        pending["manifests"].as_array().unwrap().len(),
        2,
        "{pending}"
    );
}
