//! The one-time rewrite of thread ids when conversations became an account's
//! (`migrations/0033_conversations_per_account.sql`): each old id, the hash of its thread key,
//! becomes `sink::scoped_thread_id` of the account, that hash and, for a conversation read
//! from IMAP headers, the message's subject. The marker row is taken in the same
//! transaction, so of several processes upgrading one database only one rewrites.

use mailbroker_core::Error;
use sqlx::AnyPool;

use super::sink::scoped_thread_id;
use super::sql::Sql;
use super::{Backend, ROWS_PER_STATEMENT, db_error};

/// Rewrites every message's thread id if the marker is there; nothing otherwise.
pub(super) async fn rethread(pool: &AnyPool, backend: Backend) -> Result<(), Error> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    let taken: Option<i64> = sqlx::query_scalar("DELETE FROM rethread_pending RETURNING pending")
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
    if taken.is_none() {
        return Ok(());
    }
    let rows: Vec<(i64, String, String, String, String)> = sqlx::query_as(
        "SELECT m.id, a.id, a.provider, m.thread_id, m.subject FROM messages m
         JOIN mailboxes b ON b.id = m.mailbox_id JOIN accounts a ON a.id = b.account_id
         WHERE m.thread_id IS NOT NULL",
    )
    .fetch_all(&mut *tx)
    .await
    .map_err(db_error)?;
    let rewritten: Vec<(i64, String)> = rows
        .into_iter()
        .map(|(id, account, provider, old, subject)| {
            // Only IMAP conversations are read from headers; the others are the server's.
            let subject =
                (provider == "imap").then(|| mailbroker_core::conversation_subject(&subject));
            (id, scoped_thread_id(&account, &old, subject.as_deref()))
        })
        .collect();
    for chunk in rewritten.chunks(ROWS_PER_STATEMENT) {
        let mut q = Sql::new(backend, "WITH v (id, t) AS (");
        q.push_values(chunk, |mut row, (id, thread)| {
            row.push_bind(*id).push_bind(thread.clone());
        });
        q.push(
            ") UPDATE messages SET thread_id = (SELECT t FROM v WHERE v.id = messages.id)
             WHERE id IN (SELECT id FROM v)",
        );
        q.build().execute(&mut *tx).await.map_err(db_error)?;
    }
    tx.commit().await.map_err(db_error)
}
