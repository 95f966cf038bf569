//! The index across schema versions: a migration keeps what the index held.

mod common;

use common::ok;
use sqlx::Connection;

/// An index written before message state had its own table (schema 5) still shows each
/// message's flags, tags and read state after the upgrade, and `is:` and `tag:` searches
/// still find them.
#[tokio::test]
async fn message_state_survives_the_upgrade_to_its_own_table() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("index.sqlite3");
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::migrate!("./migrations")
        .run_to(5, &mut conn)
        .await
        .unwrap();
    sqlx::raw_sql(
        r#"INSERT INTO accounts (id, provider, settings, capabilities, created_at)
             VALUES ('old', 'imap', '{}', '{"extensions":[],"custom_tags":true}', 0);
           INSERT INTO mailboxes (id, account_id, name, role) VALUES (1, 'old', 'INBOX', 'inbox');
           INSERT INTO messages (id, mailbox_id, uidvalidity, uid, modseq, subject, is_read,
               is_flagged, flags, tags)
             VALUES (7, 1, 1, 70, 42, 'Kept', 1, 0, '["\\Seen","$Kept"]', '["$Kept"]'),
                    (8, 1, 1, 80, 43, 'Plain', 0, 1, '["\\Flagged"]', '[]');
           INSERT INTO message_tags (message_id, tag) VALUES (7, '$Kept');"#,
    )
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();

    let found = ok(home.path(), &["search", "tag:$Kept", "is:read"]);
    let messages = found["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{found}");
    assert_eq!(messages[0]["id"], 7);
    assert_eq!(messages[0]["modseq"], 42);
    assert_eq!(messages[0]["tags"], serde_json::json!(["$Kept"]));
    assert_eq!(messages[0]["flags"], serde_json::json!(["\\Seen", "$Kept"]));
    let flagged = ok(home.path(), &["search", "is:flagged"]);
    let messages = flagged["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{flagged}");
    assert_eq!(messages[0]["id"], 8);
    assert_eq!(messages[0]["read"], false);
}
