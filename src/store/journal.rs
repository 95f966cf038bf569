//! The change journal and the index update that goes with it, in one transaction.

use mailbroker_core::{Error, MessageFlags};
use serde::{Deserialize, Serialize};
use sqlx::{Sqlite, Transaction};

use super::{Store, db_error, now_secs};

/// A message's place and state, as the journal records it before and after a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageState {
    pub mailbox: String,
    pub uidvalidity: u32,
    pub uid: u32,
    pub read: bool,
    pub flagged: bool,
    pub tags: Vec<String>,
}

/// One message's line in the journal, with what the index must now say about it.
#[derive(Debug, Clone, Serialize)]
pub struct JournalItem {
    pub message_id: i64,
    pub account: String,
    pub outcome: String,
    pub error_type: Option<String>,
    pub error: Option<String>,
    pub before: MessageState,
    pub after: Option<MessageState>,
    /// The server's state as read back (flags and modseq), to write into the index.
    #[serde(skip)]
    pub observed: Option<(u64, MessageFlags)>,
}

/// A change as recorded.
#[derive(Debug, Clone, Serialize)]
pub struct ChangeRecord {
    pub id: i64,
    pub created_at: i64,
    pub origin: String,
    pub selection: serde_json::Value,
    pub patch: serde_json::Value,
    pub plan: Vec<String>,
    pub undo_of: Option<i64>,
    pub applied: i64,
    pub unchanged: i64,
    pub stale: i64,
    pub failed: i64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<JournalItem>,
}

fn json(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_string())
}

impl Store {
    /// Writes the change, its items and the index rows of every message it observed, all in
    /// one transaction. Returns the change id.
    pub async fn record_change(&self, change: &ChangeRecord) -> Result<i64, Error> {
        let mut tx = self.pool().begin().await.map_err(db_error)?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO changes (created_at, origin, selection, patch, plan, undo_of, applied,
               unchanged, stale, failed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(now_secs())
        .bind(&change.origin)
        .bind(change.selection.to_string())
        .bind(change.patch.to_string())
        .bind(json(&change.plan))
        .bind(change.undo_of)
        .bind(change.applied)
        .bind(change.unchanged)
        .bind(change.stale)
        .bind(change.failed)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error)?;
        for item in &change.items {
            sqlx::query(
                "INSERT INTO change_items (change_id, message_id, account_id, outcome, error_type,
                   error, before, after) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(id)
            .bind(item.message_id)
            .bind(&item.account)
            .bind(&item.outcome)
            .bind(item.error_type.as_deref())
            .bind(item.error.as_deref())
            .bind(json(&item.before))
            .bind(item.after.as_ref().map(json))
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
            update_index(&mut tx, item).await?;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(id)
    }

    pub async fn changes(&self, limit: u32) -> Result<Vec<ChangeRecord>, Error> {
        let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM changes ORDER BY id DESC LIMIT ?")
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await
            .map_err(db_error)?;
        let mut out = Vec::new();
        for id in ids {
            let mut change = self.change(id).await?;
            change.items.clear();
            out.push(change);
        }
        Ok(out)
    }

    pub async fn change(&self, id: i64) -> Result<ChangeRecord, Error> {
        type Row = (
            i64,
            i64,
            String,
            String,
            String,
            String,
            Option<i64>,
            i64,
            i64,
            i64,
            i64,
        );
        let row: Option<Row> = sqlx::query_as(
            "SELECT id, created_at, origin, selection, patch, plan, undo_of, applied, unchanged,
               stale, failed FROM changes WHERE id = ?",
        )
        .bind(id)
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)?;
        let Some(r) = row else {
            return Err(Error::not_found(format!("no change {id}"))
                .with_next_step("run: mailbroker changes"));
        };
        type ItemRow = (
            i64,
            String,
            String,
            Option<String>,
            Option<String>,
            String,
            Option<String>,
        );
        let items: Vec<ItemRow> = sqlx::query_as(
            "SELECT message_id, account_id, outcome, error_type, error, before, after
             FROM change_items WHERE change_id = ? ORDER BY message_id",
        )
        .bind(id)
        .fetch_all(self.pool())
        .await
        .map_err(db_error)?;
        let bad =
            |e: serde_json::Error| Error::internal(format!("change {id}: bad journal json: {e}"));
        let items = items
            .into_iter()
            .map(
                |(message_id, account, outcome, error_type, error, before, after)| {
                    Ok(JournalItem {
                        message_id,
                        account,
                        outcome,
                        error_type,
                        error,
                        before: serde_json::from_str(&before).map_err(bad)?,
                        after: after
                            .map(|a| serde_json::from_str(&a))
                            .transpose()
                            .map_err(bad)?,
                        observed: None,
                    })
                },
            )
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(ChangeRecord {
            id: r.0,
            created_at: r.1,
            origin: r.2,
            selection: serde_json::from_str(&r.3).map_err(bad)?,
            patch: serde_json::from_str(&r.4).map_err(bad)?,
            plan: serde_json::from_str(&r.5).map_err(bad)?,
            undo_of: r.6,
            applied: r.7,
            unchanged: r.8,
            stale: r.9,
            failed: r.10,
            items,
        })
    }

    /// The mailbox of `account` named `name`, or holding the role `name`.
    pub async fn resolve_mailbox(&self, account: &str, name: &str) -> Result<String, Error> {
        let found: Option<String> = sqlx::query_scalar(
            "SELECT name FROM mailboxes WHERE account_id = ? AND selectable = 1
               AND (name = ? OR lower(role) = lower(?))
             ORDER BY name = ? DESC LIMIT 1",
        )
        .bind(account)
        .bind(name)
        .bind(name)
        .bind(name)
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)?;
        found.ok_or_else(|| {
            Error::not_found(format!("account {account} has no mailbox or role {name:?}"))
                .with_next_step(format!("run: mailbroker account show {account}"))
        })
    }

    /// Whether any indexed message of `account` carries `tag`.
    pub async fn tag_in_use(&self, account: &str, tag: &str) -> Result<bool, Error> {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM message_tags t JOIN messages m ON m.id = t.message_id
             JOIN mailboxes b ON b.id = m.mailbox_id WHERE b.account_id = ? AND t.tag = ?",
        )
        .bind(account)
        .bind(tag)
        .fetch_one(self.pool())
        .await
        .map_err(db_error)?;
        Ok(n > 0)
    }
}

/// Brings one message's index row in line with what the server showed.
async fn update_index(tx: &mut Transaction<'_, Sqlite>, item: &JournalItem) -> Result<(), Error> {
    let Some((modseq, flags)) = &item.observed else {
        return Ok(());
    };
    let place = item.after.as_ref().unwrap_or(&item.before);
    let mailbox_id: Option<i64> =
        sqlx::query_scalar("SELECT id FROM mailboxes WHERE account_id = ? AND name = ?")
            .bind(&item.account)
            .bind(&place.mailbox)
            .fetch_optional(&mut **tx)
            .await
            .map_err(db_error)?;
    let Some(mailbox_id) = mailbox_id else {
        return Ok(());
    };
    sqlx::query(
        "UPDATE messages SET mailbox_id = ?, uidvalidity = ?, uid = ?, modseq = ?, flags = ?,
           tags = ?, is_read = ?, is_flagged = ? WHERE id = ?",
    )
    .bind(mailbox_id)
    .bind(i64::from(place.uidvalidity))
    .bind(i64::from(place.uid))
    .bind(*modseq as i64)
    .bind(json(&flags.raw))
    .bind(json(&flags.tags))
    .bind(flags.read)
    .bind(flags.flagged)
    .bind(item.message_id)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(())
}
