//! Settling `unknown` journal items. A write whose answer was lost is `unknown`: it may have
//! landed. Once the index shows the message as that change asked (a rerun read it back from
//! the server, or a sync did), the item is `applied` with that state as its after-state, so
//! the change reads true and `undo` can take it back.
//!
//! An `unknown` item's after-state is what its change asked for (`write::journal`); its
//! remote id is not known for a move. It is compared with the index by place, read, flagged
//! and tags (case-blind, as servers compare keywords), never by remote id.

use std::collections::{BTreeMap, BTreeSet};

use mailbroker_core::Error;
use sqlx::{Any, Transaction};

use super::journal::{StoredState, insert_state};
use super::{Store, db_error};

/// An unknown item, what its change asked for, and what the index shows now.
#[derive(sqlx::FromRow)]
struct Pending {
    change_id: i64,
    message_id: i64,
    asked: String,
    mailbox: String,
    remote_id: String,
    #[sqlx(try_from = "crate::sql::Bit")]
    is_read: bool,
    #[sqlx(try_from = "crate::sql::Bit")]
    is_flagged: bool,
    tags: String,
}

impl Pending {
    /// The index's state of the message, if it is what the change asked for.
    fn landed(&self) -> Option<StoredState> {
        let asked: StoredState = serde_json::from_str(&self.asked).ok()?;
        let tags: Vec<String> = serde_json::from_str(&self.tags).ok()?;
        let folded =
            |t: &[String]| -> BTreeSet<String> { t.iter().map(|x| x.to_lowercase()).collect() };
        let same = asked.mailbox == self.mailbox
            && asked.read == self.is_read
            && asked.flagged == self.is_flagged
            && folded(&asked.tags) == folded(&tags);
        same.then(|| StoredState {
            mailbox: self.mailbox.clone(),
            read: self.is_read,
            flagged: self.is_flagged,
            tags,
        })
    }
}

impl Store {
    /// Settles every unknown item whose message the index now shows as its change asked
    /// (after a sync).
    pub async fn settle_unknown(&self) -> Result<u64, Error> {
        let mut tx = self.write_tx().await?;
        let settled = settle(&mut tx, None).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(settled)
    }
}

/// Settles the unknown items of `messages` (all, for `None`) that the index now shows as
/// their change asked, in `tx`; how many.
pub(super) async fn settle(
    tx: &mut Transaction<'_, Any>,
    messages: Option<&[i64]>,
) -> Result<u64, Error> {
    let ids = messages.map(|m| serde_json::to_string(m).unwrap_or_else(|_| "[]".into()));
    let pending: Vec<Pending> = sqlx::query_as(
        "SELECT ci.change_id, ci.message_id, s.state AS asked, b.name AS mailbox, m.remote_id,
           st.is_read, st.is_flagged, st.tags
         FROM change_items ci
         JOIN change_states s ON s.id = ci.after_state
         JOIN messages m ON m.id = ci.message_id
         JOIN mailboxes b ON b.id = m.mailbox_id
         JOIN message_state st ON st.id = m.id
         WHERE ci.outcome = 'unknown'
           AND ($1 IS NULL OR ci.message_id IN (SELECT CAST(value AS BIGINT) FROM json_each($1)))",
    )
    .bind(ids)
    .fetch_all(&mut **tx)
    .await
    .map_err(db_error)?;
    let mut per_change: BTreeMap<i64, i64> = BTreeMap::new();
    for p in &pending {
        let Some(now) = p.landed() else { continue };
        let state = insert_state(tx, p.change_id, &now).await?;
        sqlx::query(
            "UPDATE change_items SET outcome = 'applied', error_type = NULL, error = NULL,
               after_state = $1, after_id = $2 WHERE change_id = $3 AND message_id = $4",
        )
        .bind(state)
        .bind(&p.remote_id)
        .bind(p.change_id)
        .bind(p.message_id)
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
        *per_change.entry(p.change_id).or_default() += 1;
    }
    for (change, n) in &per_change {
        sqlx::query(
            "UPDATE changes SET applied = applied + $1,
               unknown = CASE WHEN unknown > $1 THEN unknown - $1 ELSE 0 END WHERE id = $2",
        )
        .bind(n)
        .bind(change)
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
    }
    // An interrupted change with nothing left unknown says all it will ever say: it is done.
    for change in per_change.keys() {
        sqlx::query(
            "UPDATE changes SET status = 'done' WHERE id = $1 AND status = 'interrupted'
               AND NOT EXISTS (SELECT 1 FROM change_items
                               WHERE change_id = $1 AND outcome = 'unknown')",
        )
        .bind(change)
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
    }
    Ok(per_change.values().sum::<i64>() as u64)
}
