//! Staged deletion manifests: staging, listing, and the per-batch checkpoint of execution.
//!
//! Architecture Invariant: a checkpoint is one transaction: the items' statuses, the journal
//! items of the run's change, and the index rows (moved to trash, or copied to
//! `deleted_messages` and removed) all commit together, or none does. A run killed at any
//! moment resumes from the last checkpoint.

use super::sql::{Sql, text_column};
use mailbroker_core::{AccountId, DeleteMode, Error, RemoteId, Summary};
use serde::{Deserialize, Serialize};

use super::batches::record_items;
use super::journal::{JournalItem, update_index};
use super::{Backend, ROWS_PER_STATEMENT, Store, db_error, now_secs};
use crate::MessageRef;

/// Where a manifest stands. Stored as its lowercase name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ManifestStatus {
    /// Staged: waiting for a person's `delete-staged`.
    Pending,
    /// A run started and has not settled (a killed run resumes from its last checkpoint).
    Executing,
    Done,
    /// A run ended with items still pending or failed.
    Failed,
    Cancelled,
}

text_column!(ManifestStatus {
    Pending = "pending",
    Executing = "executing",
    Done = "done",
    Failed = "failed",
    Cancelled = "cancelled",
});

impl ManifestStatus {
    /// Whether a run has anything to do: staged, or a run that did not finish.
    pub fn runnable(self) -> bool {
        matches!(
            self,
            ManifestStatus::Pending | ManifestStatus::Executing | ManifestStatus::Failed
        )
    }
}

impl std::fmt::Display for ManifestStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A manifest's items by status, and the skipped ones by why (`moved`: no longer where they
/// were staged). A count of none is left out of the JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemCounts {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pending: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub done: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub moved: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl std::fmt::Display for ItemCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let counts = [
            ("pending", self.pending),
            ("done", self.done),
            ("skipped", self.skipped),
            ("failed", self.failed),
            ("moved", self.moved),
        ];
        let shown: Vec<String> = counts
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(what, n)| format!("{what} {n}"))
            .collect();
        f.write_str(&shown.join(", "))
    }
}

/// Where one message of a manifest stands. Stored as its lowercase name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemStatus {
    Pending,
    Done,
    /// Changed elsewhere since it was staged (stale): left alone.
    Skipped,
    Failed,
}

impl std::fmt::Display for ItemStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

text_column!(ItemStatus {
    Pending = "pending",
    Done = "done",
    Skipped = "skipped",
    Failed = "failed",
});

#[derive(Debug, Clone)]
pub struct ManifestItem {
    pub message_id: i64,
    pub account: AccountId,
    pub mailbox: String,
    /// The provider's id of the message when it was staged: what is deleted, and only if
    /// the server still has this message under it.
    pub remote_id: RemoteId,
    pub status: ItemStatus,
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Manifest {
    pub id: i64,
    pub created_at: i64,
    pub origin: String,
    pub selection: crate::Chosen,
    pub mode: DeleteMode,
    pub summary: Summary,
    pub status: ManifestStatus,
    pub updated_at: i64,
    pub executed_at: Option<i64>,
    /// Item counts by status.
    pub counts: ItemCounts,
    pub items: Vec<ManifestItem>,
}

type ManifestRow = (
    i64,
    i64,
    String,
    String,
    String,
    String,
    ManifestStatus,
    i64,
    Option<i64>,
);

/// One item's outcome in a checkpoint.
pub struct ItemOutcome {
    pub message_id: i64,
    pub status: ItemStatus,
    pub error: Option<String>,
    /// Why it was left alone (`moved` since it was staged), for the counts.
    pub reason: Option<&'static str>,
    /// Deleted for good: the index row moves to `deleted_messages`.
    pub purged: bool,
}

/// A selection's summary, over the messages whose ids are the JSON array `?1`: how many, their
/// size, their date range (RFC 3339), the ten most frequent senders, and counts per account
/// and mailbox. What a person is shown before a write or deletion runs, and what a manifest
/// records.
const SUMMARY_SQL: &str = "WITH sel AS (
      SELECT m.id, m.from_addr, m.size, m.date, b.account_id, b.name
      FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
      WHERE m.id IN (SELECT CAST(value AS BIGINT) FROM json_each($1)))
    SELECT json_object(
    'count', (SELECT count(*) FROM sel),
    'bytes', (SELECT coalesce(sum(size), 0) FROM sel),
    'first_date', (SELECT strftime('%Y-%m-%dT%H:%M:%SZ', min(date), 'unixepoch') FROM sel),
    'last_date', (SELECT strftime('%Y-%m-%dT%H:%M:%SZ', max(date), 'unixepoch') FROM sel),
    'top_senders', (SELECT json_group_array(json_object('from', f, 'messages', n)) FROM
        (SELECT from_addr AS f, count(*) AS n FROM sel GROUP BY from_addr
         ORDER BY n DESC, f LIMIT 10)),
    'accounts', (SELECT json_group_object(a, n) FROM
        (SELECT account_id AS a, count(*) AS n FROM sel GROUP BY account_id)),
    'mailboxes', (SELECT json_group_object(b, n) FROM
        (SELECT account_id || '/' || name AS b, count(*) AS n FROM sel
         GROUP BY account_id, name)))";

/// `SUMMARY_SQL` in PostgreSQL's words: its JSON functions, its dates, senders ordered by
/// byte as SQLite orders them, and empty lists and maps where it gives NULL.
const SUMMARY_SQL_PG: &str = "WITH sel AS (
      SELECT m.id, m.from_addr, m.size, m.date, b.account_id, b.name
      FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
      WHERE m.id IN (SELECT CAST(value AS BIGINT) FROM json_each($1)))
    SELECT CAST(json_build_object(
    'count', (SELECT count(*) FROM sel),
    'bytes', (SELECT CAST(coalesce(sum(size), 0) AS BIGINT) FROM sel),
    'first_date', (SELECT to_char(to_timestamp(min(date)) AT TIME ZONE 'UTC',
        'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM sel),
    'last_date', (SELECT to_char(to_timestamp(max(date)) AT TIME ZONE 'UTC',
        'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM sel),
    'top_senders', (SELECT coalesce(json_agg(json_build_object('from', f, 'messages', n)
        ORDER BY n DESC, f COLLATE \"C\"), '[]') FROM
        (SELECT from_addr AS f, count(*) AS n FROM sel GROUP BY from_addr
         ORDER BY n DESC, from_addr COLLATE \"C\" LIMIT 10) AS senders),
    'accounts', (SELECT coalesce(json_object_agg(a, n ORDER BY a), '{}') FROM
        (SELECT account_id AS a, count(*) AS n FROM sel GROUP BY account_id) AS accounts),
    'mailboxes', (SELECT coalesce(json_object_agg(b, n ORDER BY b), '{}') FROM
        (SELECT account_id || '/' || name AS b, count(*) AS n FROM sel
         GROUP BY account_id, name) AS mailboxes)) AS text)";

/// A manifest's counts by status, and its skipped items' by why.
const COUNTS_SQL: &str = "SELECT json_patch(
       (SELECT coalesce(json_group_object(status, n), '{}') FROM
         (SELECT status, count(*) AS n FROM manifest_items WHERE manifest_id = $1
          GROUP BY status)),
       (SELECT coalesce(json_group_object(reason, n), '{}') FROM
         (SELECT reason, count(*) AS n FROM manifest_items
          WHERE manifest_id = $1 AND reason IS NOT NULL GROUP BY reason)))";

/// `COUNTS_SQL` in PostgreSQL's words.
const COUNTS_SQL_PG: &str = "SELECT CAST(
       CAST(coalesce((SELECT json_object_agg(status, n) FROM
         (SELECT status, count(*) AS n FROM manifest_items WHERE manifest_id = $1
          GROUP BY status) AS by_status), '{}') AS jsonb)
       || CAST(coalesce((SELECT json_object_agg(reason, n) FROM
         (SELECT reason, count(*) AS n FROM manifest_items
          WHERE manifest_id = $1 AND reason IS NOT NULL GROUP BY reason) AS by_reason), '{}')
          AS jsonb) AS text)";

/// Appends `id, id, …)` to a statement that ends in `IN (`.
fn push_list(q: &mut Sql, ids: &[i64]) {
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(*id);
    }
    q.push(")");
}

impl Store {
    /// Records a manifest of `refs`; nothing else changes, here or on any server.
    pub async fn stage_manifest(
        &self,
        origin: &str,
        selection: &crate::Chosen,
        mode: DeleteMode,
        refs: &[MessageRef],
    ) -> Result<Manifest, Error> {
        let mut tx = self.write_tx().await?;
        let now = now_secs();
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO manifests (created_at, origin, selection, mode, summary, status, updated_at)
             VALUES ($1, $2, $3, $4, '{}', 'pending', $5) RETURNING id",
        )
        .bind(now)
        .bind(origin)
        .bind(serde_json::to_string(selection).map_err(|e| Error::internal(e.to_string()))?)
        .bind(mode.as_str())
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error)?;
        for chunk in refs.chunks(ROWS_PER_STATEMENT) {
            let mut q = Sql::new(
                Backend::of(&tx),
                "INSERT INTO manifest_items (manifest_id, message_id, account_id, mailbox,
                   remote_id, status) ",
            );
            q.push_values(chunk, |mut row, r| {
                row.push_bind(id)
                    .push_bind(r.id)
                    .push_bind(r.account.as_str().to_string())
                    .push_bind(r.mailbox.clone())
                    .push_bind(r.remote_id.as_str().to_owned())
                    .push_bind(ItemStatus::Pending);
            });
            q.build().execute(&mut *tx).await.map_err(db_error)?;
        }
        let ids: Vec<i64> = refs.iter().map(|r| r.id).collect();
        let summary: String = sqlx::query_scalar(self.backend().pick(SUMMARY_SQL, SUMMARY_SQL_PG))
            .bind(serde_json::to_string(&ids).map_err(|e| Error::internal(e.to_string()))?)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
        sqlx::query("UPDATE manifests SET summary = $1 WHERE id = $2")
            .bind(&summary)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        self.manifest(id, false).await
    }

    /// The summary of the messages with these ids (see `SUMMARY_SQL`), as a person is shown a
    /// selection before a write or deletion runs.
    pub async fn selection_summary(&self, ids: &[i64]) -> Result<Summary, Error> {
        let ids = serde_json::to_string(ids).map_err(|e| Error::internal(e.to_string()))?;
        let summary: String = sqlx::query_scalar(self.backend().pick(SUMMARY_SQL, SUMMARY_SQL_PG))
            .bind(ids)
            .fetch_one(self.pool())
            .await
            .map_err(db_error)?;
        serde_json::from_str(&summary).map_err(|e| Error::internal(format!("summary: {e}")))
    }

    /// Manifests, newest first; `statuses` empty means all.
    /// The dates (seconds since the epoch) of a manifest's messages still in the index, for
    /// a chart of them by month.
    pub async fn manifest_dates(&self, id: i64) -> Result<Vec<i64>, Error> {
        sqlx::query_scalar(
            "SELECT m.date FROM manifest_items i JOIN messages m ON m.id = i.message_id
             WHERE i.manifest_id = $1 AND m.date IS NOT NULL",
        )
        .bind(id)
        .fetch_all(self.pool())
        .await
        .map_err(db_error)
    }

    pub async fn manifests(
        &self,
        statuses: &[ManifestStatus],
        limit: u32,
    ) -> Result<Vec<Manifest>, Error> {
        // Filtered before the limit, so old pending manifests are not hidden by newer ones.
        let mut q = Sql::new(self.backend(), "SELECT id FROM manifests");
        if !statuses.is_empty() {
            q.push(" WHERE status IN (");
            let mut list = q.separated(", ");
            for status in statuses {
                list.push_bind(*status);
            }
            q.push(")");
        }
        q.push(" ORDER BY id DESC LIMIT ")
            .push_bind(i64::from(limit));
        let ids: Vec<i64> = q
            .build_query_scalar()
            .fetch_all(self.pool())
            .await
            .map_err(db_error)?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            out.push(self.manifest(id, false).await?);
        }
        Ok(out)
    }

    pub async fn manifest(&self, id: i64, with_items: bool) -> Result<Manifest, Error> {
        let row: Option<ManifestRow> = sqlx::query_as(
            "SELECT id, created_at, origin, selection, mode, summary, status, updated_at,
               executed_at FROM manifests WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)?;
        let Some((
            id,
            created_at,
            origin,
            selection,
            mode,
            summary,
            status,
            updated_at,
            executed_at,
        )) = row
        else {
            return Err(Error::not_found(format!("no deletion manifest {id}"))
                .with_next_step("run: mailbroker delete-staged"));
        };
        // By status, and the skipped ones by why: `moved` since staging.
        let counts: String = sqlx::query_scalar(self.backend().pick(COUNTS_SQL, COUNTS_SQL_PG))
            .bind(id)
            .fetch_one(self.pool())
            .await
            .map_err(db_error)?;
        let items = if with_items {
            self.manifest_items(id, None).await?
        } else {
            Vec::new()
        };
        let bad = |e: serde_json::Error| Error::internal(format!("manifest {id}: bad json: {e}"));
        Ok(Manifest {
            id,
            created_at,
            origin,
            selection: serde_json::from_str(&selection).map_err(bad)?,
            mode: if mode == "permanent" {
                DeleteMode::Permanent
            } else {
                DeleteMode::Trash
            },
            summary: serde_json::from_value(dated(serde_json::from_str(&summary).map_err(bad)?))
                .map_err(bad)?,
            status,
            updated_at,
            executed_at,
            counts: serde_json::from_str(&counts).map_err(bad)?,
            items,
        })
    }

    /// A manifest's items, all or those with one status.
    pub async fn manifest_items(
        &self,
        id: i64,
        status: Option<ItemStatus>,
    ) -> Result<Vec<ManifestItem>, Error> {
        type Row = (i64, String, String, String, ItemStatus, Option<String>);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT message_id, account_id, mailbox, remote_id, status, error
             FROM manifest_items WHERE manifest_id = $1 AND ($2 IS NULL OR status = $2)
             ORDER BY account_id, mailbox, message_id",
        )
        .bind(id)
        .bind(status)
        .fetch_all(self.pool())
        .await
        .map_err(db_error)?;
        rows.into_iter()
            .map(|(message_id, account, mailbox, remote_id, status, error)| {
                Ok(ManifestItem {
                    message_id,
                    account: account.parse()?,
                    mailbox,
                    remote_id: RemoteId::new(remote_id),
                    status,
                    error,
                })
            })
            .collect()
    }

    pub async fn set_manifest_status(&self, id: i64, status: ManifestStatus) -> Result<(), Error> {
        let executed = (status == ManifestStatus::Executing).then(now_secs);
        sqlx::query(
            "UPDATE manifests SET status = $1, updated_at = $2,
               executed_at = coalesce(executed_at, $3) WHERE id = $4",
        )
        .bind(status)
        .bind(now_secs())
        .bind(executed)
        .bind(id)
        .execute(self.pool())
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// One executed batch, committed as a whole (see the module's invariant), only while the
    /// account is still the run's (`fence`): one that lost it records nothing, and its items
    /// stay pending for the next run to check on the server.
    pub async fn checkpoint(
        &self,
        (manifest_id, change_id): (i64, i64),
        outcomes: &[ItemOutcome],
        journal: &[JournalItem],
        fence: &super::Fence,
    ) -> Result<(), Error> {
        let mut tx = super::Fence::begin(Some(fence), self).await?;
        let backend = Backend::of(&tx);
        record_items(&mut tx, change_id, journal, false).await?;
        update_index(&mut tx, journal).await?;
        let now = now_secs();
        // Set-based: one statement per 500 purged rows and per (status, error) group.
        let purged: Vec<i64> = outcomes
            .iter()
            .filter(|o| o.purged)
            .map(|o| o.message_id)
            .collect();
        for chunk in purged.chunks(ROWS_PER_STATEMENT) {
            let mut copy = Sql::new(
                backend,
                "INSERT INTO deleted_messages (id, account_id, mailbox, remote_id,
                   message_id, from_addr, subject, date, size, deleted_at, manifest_id)
                 SELECT m.id, b.account_id, b.name, m.remote_id, m.message_id,
                   m.from_addr, m.subject, m.date, m.size, ",
            );
            copy.push_bind(now).push(", ").push_bind(manifest_id);
            copy.push(" FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id WHERE m.id IN (");
            push_list(&mut copy, chunk);
            copy.push(
                " ON CONFLICT (id) DO UPDATE SET account_id = excluded.account_id,
                   mailbox = excluded.mailbox, remote_id = excluded.remote_id,
                   message_id = excluded.message_id, from_addr = excluded.from_addr,
                   subject = excluded.subject, date = excluded.date, size = excluded.size,
                   deleted_at = excluded.deleted_at, manifest_id = excluded.manifest_id",
            );
            copy.build().execute(&mut *tx).await.map_err(db_error)?;
            let mut delete = Sql::new(backend, "DELETE FROM messages WHERE id IN (");
            push_list(&mut delete, chunk);
            delete.build().execute(&mut *tx).await.map_err(db_error)?;
        }
        type Group<'a> = (ItemStatus, Option<&'a str>, Option<&'static str>);
        let mut groups: std::collections::BTreeMap<Group, Vec<i64>> =
            std::collections::BTreeMap::new();
        for o in outcomes {
            groups
                .entry((o.status, o.error.as_deref(), o.reason))
                .or_default()
                .push(o.message_id);
        }
        for ((status, error, reason), ids) in groups {
            for chunk in ids.chunks(ROWS_PER_STATEMENT) {
                let mut q = Sql::new(backend, "UPDATE manifest_items SET status = ");
                q.push_bind(status).push(", error = ").push_bind(error);
                q.push(", reason = ").push_bind(reason);
                q.push(" WHERE manifest_id = ").push_bind(manifest_id);
                q.push(" AND message_id IN (");
                push_list(&mut q, chunk);
                q.build().execute(&mut *tx).await.map_err(db_error)?;
            }
        }
        sqlx::query("UPDATE manifests SET updated_at = $1 WHERE id = $2")
            .bind(now)
            .bind(manifest_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }
}

/// A stored summary with its dates in RFC 3339: manifests staged before the summary said so
/// hold seconds since the epoch.
fn dated(mut summary: serde_json::Value) -> serde_json::Value {
    for key in ["first_date", "last_date"] {
        if let Some(secs) = summary[key].as_i64() {
            summary[key] = mail_parser::DateTime::from_timestamp(secs)
                .to_rfc3339()
                .into();
        }
    }
    summary
}
