//! Recording a change batch by batch: the one journal protocol of writes, undos and staged
//! deletions.
//!
//! Architecture Invariant: a batch's journal lines and the index rows they explain are
//! committed in one transaction, right after the batch comes back; a change's row says
//! `executing` until `close_change`. What a crash leaves is therefore true batch by batch:
//! recorded batches say how they ended, and the rest still says what the intent said
//! (`unknown` for a write's messages, `pending` for a manifest's), which the next request
//! re-reads from the server.

use mailbroker_core::{Error, Outcome};
use sqlx::{Any, Transaction};

use super::journal::{ChangeStatus, JournalItem, insert_items, update_index};
use super::{Store, db_error};

impl Store {
    /// Records one batch of change `id`: its journal lines (replacing what the intent said of
    /// those messages), its counts, and the index rows of every message the server read
    /// back, in one transaction. If it fails, the intent stays as it was.
    ///
    /// With `as_intended` (every message of the batch was applied exactly as its intent
    /// line says), those lines only change their outcome: one statement instead of deleting
    /// and writing them again, about 20 ms less for 10,000 messages.
    pub async fn record_batch(
        &self,
        id: i64,
        items: &[JournalItem],
        as_intended: bool,
        fence: &super::Fence,
    ) -> Result<(), Error> {
        tracing::debug!(items = items.len(), "journal: recording a batch");
        // Only while the account is still this writer's: one that lost it (stalled past its
        // lease) must not write over what its next holder indexed; its lines stay unknown.
        let mut tx = super::Fence::begin(Some(fence), self).await?;
        record_items(&mut tx, id, items, as_intended).await?;
        update_index(&mut tx, items).await?;
        tracing::debug!("journal: batch's index rows updated");
        // What this batch read back may show an earlier change's lost write landed.
        let read_back: Vec<i64> = items
            .iter()
            .filter(|i| i.observed.is_some())
            .map(|i| i.message_id)
            .collect();
        if !read_back.is_empty() {
            super::settle::settle(&mut tx, Some(&read_back)).await?;
        }
        tx.commit().await.map_err(db_error)?;
        tracing::debug!("journal: batch recorded");
        Ok(())
    }

    /// Ends change `id`: the lines of messages no batch carried (`rest`: they needed
    /// nothing, or the run ended before their batch), and status `done`.
    pub async fn close_change(&self, id: i64, rest: &[JournalItem]) -> Result<(), Error> {
        let mut tx = self.write_tx().await?;
        if !rest.is_empty() {
            record_items(&mut tx, id, rest, false).await?;
        }
        sqlx::query("UPDATE changes SET status = $1 WHERE id = $2")
            .bind(ChangeStatus::Done)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }
}

/// Puts a batch's lines into change `id`'s journal, in place of any its intent holds for the
/// same messages, and moves the change's counts by what the batch changed: each replaced
/// intent line was counted `unknown` until now.
pub(crate) async fn record_items(
    tx: &mut Transaction<'_, Any>,
    id: i64,
    items: &[JournalItem],
    as_intended: bool,
) -> Result<(), Error> {
    let ids: Vec<i64> = items.iter().map(|i| i.message_id).collect();
    let (low, high) = (ids.iter().min(), ids.iter().max());
    let ids = serde_json::to_string(&ids).map_err(|e| Error::internal(e.to_string()))?;
    // The range lets SQLite walk the change's lines in key order and test each against the
    // list, instead of one key lookup per listed message (about 10 ms less for 10,000).
    let replacing = match as_intended {
        true => {
            "UPDATE change_items SET outcome = 'applied', error_type = NULL, error = NULL
             WHERE change_id = $1 AND message_id BETWEEN $2 AND $3
               AND message_id IN (SELECT CAST(value AS BIGINT) FROM json_each($4))"
        }
        false => {
            "DELETE FROM change_items WHERE change_id = $1 AND message_id BETWEEN $2 AND $3
               AND message_id IN (SELECT CAST(value AS BIGINT) FROM json_each($4))"
        }
    };
    let replaced = sqlx::query(replacing)
        .bind(id)
        .bind(low)
        .bind(high)
        .bind(ids)
        .execute(&mut **tx)
        .await
        .map_err(db_error)?
        .rows_affected() as i64;
    if !as_intended {
        insert_items(tx, id, items).await?;
    }
    tracing::debug!("journal: batch's items recorded");
    let count = |o: Outcome| items.iter().filter(|j| j.outcome == o).count() as i64;
    sqlx::query(
        "UPDATE changes SET applied = applied + $1, unchanged = unchanged + $2,
           stale = stale + $3, failed = failed + $4,
           unknown = CASE WHEN unknown + $5 - $6 > 0 THEN unknown + $5 - $6 ELSE 0 END
           WHERE id = $7",
    )
    .bind(count(Outcome::Applied))
    .bind(count(Outcome::Unchanged))
    .bind(count(Outcome::Stale))
    .bind(count(Outcome::Failed))
    .bind(count(Outcome::Unknown))
    .bind(replaced)
    .bind(id)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(())
}
