//! The change journal and the index update that goes with it, in one transaction.

use mailbroker_core::{Error, MessageFlags, Uid};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

use sqlx::{QueryBuilder, Sqlite, Transaction};

use super::{ROWS_PER_STATEMENT, Store, db_error, now_secs};

/// A message's place and state, as the journal records it before and after a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageState {
    pub mailbox: String,
    pub uidvalidity: u32,
    pub uid: Uid,
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
        let id = insert_change(&mut tx, change).await?;
        insert_items(&mut tx, id, &change.items).await?;
        tracing::debug!("journal: items inserted");
        update_index(&mut tx, &change.items).await?;
        tracing::debug!("journal: index updated");
        tx.commit().await.map_err(db_error)?;
        tracing::debug!("journal: committed");
        Ok(id)
    }

    /// A change without items yet; a staged deletion's run adds them batch by batch.
    pub async fn open_change(&self, change: &ChangeRecord) -> Result<i64, Error> {
        let mut tx = self.pool().begin().await.map_err(db_error)?;
        let id = insert_change(&mut tx, change).await?;
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
    /// The mailbox a move target names in an account (a name, else a role), with its role.
    pub async fn resolve_mailbox(
        &self,
        account: &str,
        name: &str,
    ) -> Result<(String, Option<String>), Error> {
        let found: Option<(String, Option<String>)> = sqlx::query_as(
            "SELECT name, role FROM mailboxes WHERE account_id = ? AND selectable = 1
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

/// Brings the index rows of observed messages in line with what the server showed: one
/// `UPDATE … FROM (VALUES …)` per 500 messages rather than one statement per message.
/// The change's own row (its items follow with `insert_items`).
pub(crate) async fn insert_change(
    tx: &mut Transaction<'_, Sqlite>,
    change: &ChangeRecord,
) -> Result<i64, Error> {
    sqlx::query_scalar(
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
    .fetch_one(&mut **tx)
    .await
    .map_err(db_error)
}

pub(crate) async fn insert_items(
    tx: &mut Transaction<'_, Sqlite>,
    id: i64,
    items: &[JournalItem],
) -> Result<(), Error> {
    for chunk in items.chunks(ROWS_PER_STATEMENT) {
        let mut q = QueryBuilder::<Sqlite>::new(
            "INSERT INTO change_items (change_id, message_id, account_id, outcome, error_type,
               error, before, after) ",
        );
        q.push_values(chunk, |mut row, item| {
            row.push_bind(id)
                .push_bind(item.message_id)
                .push_bind(item.account.clone())
                .push_bind(item.outcome.clone())
                .push_bind(item.error_type.clone())
                .push_bind(item.error.clone())
                .push_bind(json(&item.before))
                .push_bind(item.after.as_ref().map(json));
        });
        q.build().execute(&mut **tx).await.map_err(db_error)?;
    }
    Ok(())
}

pub(crate) async fn update_index(
    tx: &mut Transaction<'_, Sqlite>,
    items: &[JournalItem],
) -> Result<(), Error> {
    let mut mailbox_ids: HashMap<(String, String), i64> = HashMap::new();
    let mut rows = Vec::new();
    for item in items {
        let Some((modseq, flags)) = &item.observed else {
            continue;
        };
        let place = item.after.as_ref().unwrap_or(&item.before);
        let key = (item.account.clone(), place.mailbox.clone());
        let mailbox_id = match mailbox_ids.get(&key) {
            Some(id) => *id,
            None => {
                let found: Option<i64> = sqlx::query_scalar(
                    "SELECT id FROM mailboxes WHERE account_id = ? AND name = ?",
                )
                .bind(&key.0)
                .bind(&key.1)
                .fetch_optional(&mut **tx)
                .await
                .map_err(db_error)?;
                let Some(id) = found else { continue };
                mailbox_ids.insert(key, id);
                id
            }
        };
        let moved = item
            .after
            .as_ref()
            .is_some_and(|a| a.mailbox != item.before.mailbox);
        rows.push((item.message_id, mailbox_id, place, *modseq, flags, moved));
    }
    // Only the tags that differ from what the index held are touched: adding one tag to
    // 10,000 messages is 10,000 inserts, not a rewrite of every message's tag rows.
    let mut added = Vec::new();
    let mut removed = Vec::new();
    for item in items {
        if let Some((_, flags)) = &item.observed {
            let before = &item.before.tags;
            added.extend(
                flags
                    .tags
                    .iter()
                    .filter(|t| !before.contains(t))
                    .map(|t| (item.message_id, t.clone())),
            );
            removed.extend(
                before
                    .iter()
                    .filter(|t| !flags.tags.contains(t))
                    .map(|t| (item.message_id, t.clone())),
            );
        }
    }
    // Moved messages change their identity columns; the rest only their flags, which keeps
    // SQLite from touching the (mailbox, uidvalidity, uid) index for them.
    let (moved, stayed): (Vec<_>, Vec<_>) = rows.into_iter().partition(|r| r.5);
    for (rows, moved) in [(moved, true), (stayed, false)] {
        for chunk in rows.chunks(ROWS_PER_STATEMENT) {
            let mut q = QueryBuilder::<Sqlite>::new(if moved {
                "UPDATE messages SET modseq = v.column2, flags = v.column3, tags = v.column4,
                   is_read = v.column5, is_flagged = v.column6, mailbox_id = v.column7,
                   uidvalidity = v.column8, uid = v.column9 FROM ("
            } else {
                "UPDATE messages SET modseq = v.column2, flags = v.column3, tags = v.column4,
                   is_read = v.column5, is_flagged = v.column6 FROM ("
            });
            q.push_values(
                chunk,
                |mut row, (id, mailbox_id, place, modseq, flags, _)| {
                    row.push_bind(*id)
                        .push_bind(*modseq as i64)
                        .push_bind(json(&flags.raw))
                        .push_bind(json(&flags.tags))
                        .push_bind(flags.read)
                        .push_bind(flags.flagged);
                    if moved {
                        row.push_bind(*mailbox_id)
                            .push_bind(i64::from(place.uidvalidity))
                            .push_bind(place.uid as i64);
                    }
                },
            );
            q.push(") AS v WHERE messages.id = v.column1");
            q.build().execute(&mut **tx).await.map_err(db_error)?;
        }
    }
    for chunk in added.chunks(ROWS_PER_STATEMENT) {
        let mut q =
            QueryBuilder::<Sqlite>::new("INSERT OR IGNORE INTO message_tags (message_id, tag) ");
        q.push_values(chunk, |mut row, (id, tag)| {
            row.push_bind(*id).push_bind(tag.clone());
        });
        q.build().execute(&mut **tx).await.map_err(db_error)?;
    }
    for chunk in removed.chunks(ROWS_PER_STATEMENT) {
        let mut q =
            QueryBuilder::<Sqlite>::new("DELETE FROM message_tags WHERE (message_id, tag) IN (");
        q.push_values(chunk, |mut row, (id, tag)| {
            row.push_bind(*id).push_bind(tag.clone());
        });
        q.push(")");
        q.build().execute(&mut **tx).await.map_err(db_error)?;
    }
    Ok(())
}
