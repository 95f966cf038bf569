//! The change journal and the index update that goes with it, in one transaction.

use mailbroker_core::{
    AccountId, DeleteMode, Error, MessageFlags, Outcome, Patch, RemoteId, Tally, Version,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

use super::sql::{Sql, text_column};
use sqlx::{Any, Transaction};

use super::{Backend, ROWS_PER_STATEMENT, Store, db_error, now_secs};

/// What the journal says of a message whose write was sent (or about to be) and whose result
/// is not recorded: an intent's line, stored without text and said on reading.
pub const UNRECORDED: &str =
    "the result of this write was not recorded; the next request re-reads the server first";

/// A message's place and state, as the journal records it before and after a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageState {
    pub mailbox: String,
    /// The provider's id of the message in `mailbox`.
    pub remote_id: RemoteId,
    pub read: bool,
    pub flagged: bool,
    pub tags: Vec<String>,
}

/// One message's line in the journal, with what the index must now say about it.
#[derive(Debug, Clone)]
pub struct JournalItem {
    pub message_id: i64,
    pub account: AccountId,
    pub outcome: Outcome,
    pub error_type: Option<String>,
    pub error: Option<String>,
    pub before: MessageState,
    pub after: Option<MessageState>,
    /// The server's state as read back (version and flags), to write into the index.
    pub observed: Option<(Version, MessageFlags)>,
    /// The route that carried it when not the account's own (`applescript`).
    pub route: Option<String>,
}

/// How a change's or a manifest's messages were chosen, as its row keeps it (the `selection`
/// column, in the names a tool's arguments use): a query, ids, the change an undo reverts,
/// or the manifest a deletion's run carries out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Chosen {
    Query {
        query: String,
    },
    Ids {
        ids: Vec<i64>,
    },
    UndoOf {
        undo_of: i64,
    },
    Manifest {
        manifest: i64,
    },
    /// The rule manifest a change of server rules carries out.
    RuleManifest {
        rule_manifest: i64,
    },
}

/// What a change asked, as its journal row keeps it (the `patch` column, in the same JSON a
/// tool's arguments use): the undo of another change, the run of a staged deletion, or a
/// patch on the selected messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Asked {
    Undo {
        undo_of: i64,
    },
    Deletion {
        delete: DeleteMode,
    },
    /// A rule of the account's server installed or removed.
    Rules {
        rule: String,
        action: crate::RuleAction,
    },
    /// A draft saved (`{"draft": true}`); before `Patch`, which would take any object.
    Draft {
        draft: bool,
    },
    Patch(Patch),
}

impl Asked {
    /// Whether it deleted for good (which no undo brings back).
    pub fn is_permanent_deletion(&self) -> bool {
        matches!(
            self,
            Asked::Deletion {
                delete: DeleteMode::Permanent
            }
        )
    }

    /// Whether it was a staged deletion's run (whose undo moves the messages back and leaves
    /// their flags as they are now).
    pub fn is_deletion(&self) -> bool {
        matches!(self, Asked::Deletion { .. })
    }
}

/// A change's own row in `changes`, its JSON columns still text.
#[derive(sqlx::FromRow)]
struct ChangeRow {
    id: i64,
    created_at: i64,
    origin: String,
    selection: String,
    patch: String,
    plan: String,
    undo_of: Option<i64>,
    undone_by: Option<i64>,
    applied: i64,
    unchanged: i64,
    stale: i64,
    failed: i64,
    unknown: i64,
    status: ChangeStatus,
}

/// The error for change `id`'s journal JSON that does not parse.
fn bad_json(id: i64) -> impl Fn(serde_json::Error) -> Error + Copy {
    move |e| Error::internal(format!("change {id}: bad journal json: {e}"))
}

/// A change's own row, without its items.
fn change_of(r: ChangeRow) -> Result<ChangeRecord, Error> {
    let bad = bad_json(r.id);
    Ok(ChangeRecord {
        id: r.id,
        created_at: r.created_at,
        origin: r.origin,
        selection: serde_json::from_str(&r.selection).map_err(bad)?,
        patch: serde_json::from_str(&r.patch).map_err(bad)?,
        plan: serde_json::from_str(&r.plan).map_err(bad)?,
        undo_of: r.undo_of,
        undone_by: r.undone_by,
        tally: {
            let mut t = Tally::default();
            let count = |n: i64| u64::try_from(n).unwrap_or(0);
            t.set(Outcome::Applied, count(r.applied));
            t.set(Outcome::Unchanged, count(r.unchanged));
            t.set(Outcome::Stale, count(r.stale));
            t.set(Outcome::Failed, count(r.failed));
            t.set(Outcome::Unknown, count(r.unknown));
            t
        },
        status: r.status,
        items: Vec::new(),
    })
}

/// A change as recorded.
#[derive(Debug, Clone)]
pub struct ChangeRecord {
    pub id: i64,
    pub created_at: i64,
    pub origin: String,
    pub selection: Chosen,
    pub patch: Asked,
    pub plan: Vec<String>,
    pub undo_of: Option<i64>,
    /// The latest change that undid this one and applied something (read, never stored).
    pub undone_by: Option<i64>,
    /// How its messages ended; an `unknown` one (sent, never answered) becomes `applied`
    /// when a later read-back shows it as asked (`settle`).
    pub tally: Tally,
    /// `Executing` from the moment its intent is journaled (before anything is sent) until
    /// its results are recorded, then `Done`. An entry left executing could not record its
    /// results: its items say `unknown`.
    pub status: ChangeStatus,
    pub items: Vec<JournalItem>,
}

impl ChangeRecord {
    /// The intent of a change of one thing (a rule change, a draft), as journaled before
    /// anything is sent: executing, nothing tallied yet.
    pub fn intent(
        origin: &str,
        selection: Chosen,
        patch: Asked,
        plan: Vec<String>,
    ) -> ChangeRecord {
        ChangeRecord {
            id: 0,
            created_at: 0,
            origin: origin.to_string(),
            undo_of: match &selection {
                Chosen::UndoOf { undo_of } => Some(*undo_of),
                _ => None,
            },
            selection,
            patch,
            plan,
            undone_by: None,
            tally: Tally::default(),
            status: ChangeStatus::Executing,
            items: Vec::new(),
        }
    }
}

/// Where a change stands. Stored as its lowercase name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeStatus {
    /// Its intent is journaled (before anything is sent) and its results are not yet.
    Executing,
    /// Its results are recorded.
    Done,
    /// Its process ended (killed, or it lost its accounts) before every result was recorded:
    /// those stay `unknown` until a sync or a rerun reads them (`Store::interrupt_orphaned`).
    Interrupted,
}

text_column!(ChangeStatus {
    Executing = "executing",
    Done = "done",
    Interrupted = "interrupted",
});

fn json(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_string())
}

impl Store {
    /// Change `id`'s own row, or the latest `limit` rows, newest first; without items. One
    /// statement for both: the journal has a row per change, so finding one id by walking
    /// back from the newest stays short.
    async fn change_rows(&self, id: Option<i64>, limit: u32) -> Result<Vec<ChangeRecord>, Error> {
        self.change_rows_of(id, None, limit).await
    }

    /// The rows of `change_rows`, of those whose messages were chosen as `selection` only
    /// when it is given.
    async fn change_rows_of(
        &self,
        id: Option<i64>,
        selection: Option<&Chosen>,
        limit: u32,
    ) -> Result<Vec<ChangeRecord>, Error> {
        let rows: Vec<ChangeRow> = sqlx::query_as(
            "SELECT id, created_at, origin, selection, patch, plan, undo_of,
               (SELECT MAX(u.id) FROM changes u WHERE u.undo_of = c.id AND u.applied > 0)
                 AS undone_by,
               applied, unchanged, stale, failed, unknown, status
             FROM changes c WHERE ($1 IS NULL OR id = $1) AND ($3 IS NULL OR selection = $3)
             ORDER BY id DESC LIMIT $2",
        )
        .bind(id)
        .bind(i64::from(limit))
        .bind(selection.map(json))
        .fetch_all(self.pool())
        .await
        .map_err(db_error)?;
        rows.into_iter().map(change_of).collect()
    }

    /// Journals a change's intent, before anything of it is sent: its row (status
    /// `executing`) and its items, each as `change` gives it (`unknown` for every message to
    /// change), committed with a full sync so it survives a power loss. Returns the change id.
    pub async fn record_intent(&self, change: &ChangeRecord) -> Result<i64, Error> {
        let mut conn = self.pool().acquire().await.map_err(db_error)?;
        // PostgreSQL's commits are durable as they are (`synchronous_commit`).
        let sqlite = self.backend() == Backend::Sqlite;
        if sqlite {
            sqlx::query("PRAGMA synchronous = FULL")
                .execute(&mut *conn)
                .await
                .map_err(db_error)?;
        }
        let written = async {
            let mut tx = sqlx::Connection::begin(&mut *conn)
                .await
                .map_err(db_error)?;
            let id = insert_change(&mut tx, change).await?;
            insert_items(&mut tx, id, &change.items).await?;
            tx.commit().await.map_err(db_error)?;
            Ok::<i64, Error>(id)
        }
        .await;
        // The pool's other work keeps the cheaper setting: a crash loses nothing committed
        // in WAL mode, only a power loss could.
        if sqlite {
            let _ = sqlx::query("PRAGMA synchronous = NORMAL")
                .execute(&mut *conn)
                .await;
        }
        tracing::debug!("journal: intent recorded");
        written
    }

    /// Removes change `id` whose intent was journaled but of which nothing was sent (an
    /// account could not be reached).
    pub async fn discard_change(&self, id: i64) -> Result<(), Error> {
        sqlx::query("DELETE FROM changes WHERE id = $1 AND status = $2")
            .bind(id)
            .bind(ChangeStatus::Executing)
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// A change without items yet; a staged deletion's run adds them batch by batch.
    pub async fn open_change(&self, change: &ChangeRecord) -> Result<i64, Error> {
        let mut tx = self.write_tx().await?;
        let id = insert_change(&mut tx, change).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(id)
    }

    /// The runs of staged deletion `manifest` (a resumed one has several), newest first,
    /// without their items.
    pub async fn manifest_runs(&self, manifest: i64) -> Result<Vec<ChangeRecord>, Error> {
        self.interrupt_orphaned().await?;
        let chosen = Chosen::Manifest { manifest };
        self.change_rows_of(None, Some(&chosen), 100).await
    }

    /// The latest changes, newest first, without their items.
    pub async fn changes(&self, limit: u32) -> Result<Vec<ChangeRecord>, Error> {
        self.interrupt_orphaned().await?;
        self.change_rows(None, limit).await
    }

    /// Records the account lease holders change `id` writes under, by which it is later
    /// told whether its process still runs (`interrupt_orphaned`).
    pub async fn set_change_holders(&self, id: i64, holders: &[String]) -> Result<(), Error> {
        sqlx::query("UPDATE changes SET holders = $1 WHERE id = $2")
            .bind(json(&holders))
            .bind(id)
            .execute(self.pool())
            .await
            .map(drop)
            .map_err(db_error)
    }

    /// Marks `interrupted` every change still `executing` whose process no longer holds any
    /// of the leases it wrote under (killed, or stalled past them): nothing more will be
    /// recorded for it. Its unknown items are settled by a sync or a rerun (`settle`).
    pub async fn interrupt_orphaned(&self) -> Result<(), Error> {
        let executing: Vec<(i64, String)> = sqlx::query_as(
            "SELECT id, holders FROM changes WHERE status = $1 AND holders IS NOT NULL",
        )
        .bind(ChangeStatus::Executing)
        .fetch_all(self.pool())
        .await
        .map_err(db_error)?;
        for (id, holders) in executing {
            let holders: Vec<String> = serde_json::from_str(&holders).unwrap_or_default();
            if self.any_holds(&holders).await? {
                continue;
            }
            // One whose every item was settled meanwhile has said all it will: done.
            sqlx::query(
                "UPDATE changes SET status = CASE WHEN EXISTS (SELECT 1 FROM change_items
                     WHERE change_id = $1 AND outcome = 'unknown') THEN $2 ELSE $3 END
                 WHERE id = $1 AND status = $4",
            )
            .bind(id)
            .bind(ChangeStatus::Interrupted)
            .bind(ChangeStatus::Done)
            .bind(ChangeStatus::Executing)
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        }
        Ok(())
    }

    /// The messages of change `id` that a fallback route carried, by route.
    pub async fn change_routes(
        &self,
        id: i64,
    ) -> Result<std::collections::BTreeMap<String, Vec<i64>>, Error> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT route, message_id FROM change_items
             WHERE change_id = $1 AND route IS NOT NULL ORDER BY message_id",
        )
        .bind(id)
        .fetch_all(self.pool())
        .await
        .map_err(db_error)?;
        let mut out = std::collections::BTreeMap::<String, Vec<i64>>::new();
        for (route, message) in rows {
            out.entry(route).or_default().push(message);
        }
        Ok(out)
    }

    pub async fn change(&self, id: i64) -> Result<ChangeRecord, Error> {
        let Some(mut change) = self.change_rows(Some(id), 1).await?.pop() else {
            return Err(Error::not_found(format!("no change {id}"))
                .with_next_step("run: mailbroker changes"));
        };
        let bad = bad_json(id);
        let states: Vec<(i64, String)> =
            sqlx::query_as("SELECT id, state FROM change_states WHERE change_id = $1")
                .bind(id)
                .fetch_all(self.pool())
                .await
                .map_err(db_error)?;
        let states = states
            .into_iter()
            .map(|(n, state)| Ok((n, serde_json::from_str::<StoredState>(&state).map_err(bad)?)))
            .collect::<Result<HashMap<i64, StoredState>, Error>>()?;
        let state_at = |n: i64, remote_id: String| {
            states
                .get(&n)
                .map(|s| s.with_id(RemoteId::new(remote_id)))
                .ok_or_else(|| Error::internal(format!("change {id}: item without state {n}")))
        };
        type ItemRow = (
            i64,
            String,
            String,
            Option<String>,
            Option<String>,
            i64,
            String,
            Option<i64>,
            Option<String>,
            Option<String>,
        );
        let rows: Vec<ItemRow> = sqlx::query_as(
            "SELECT message_id, account_id, outcome, error_type, error, before_state,
               before_id, after_state, after_id, route
             FROM change_items WHERE change_id = $1 ORDER BY message_id",
        )
        .bind(id)
        .fetch_all(self.pool())
        .await
        .map_err(db_error)?;
        let mut items = Vec::with_capacity(rows.len());
        for (
            message_id,
            account,
            outcome,
            error_type,
            error,
            before,
            before_id,
            after,
            after_id,
            route,
        ) in rows
        {
            let after = match (after, after_id) {
                (Some(n), Some(remote_id)) => Some(state_at(n, remote_id)?),
                _ => None,
            };
            let outcome = Outcome::parse(&outcome).ok_or_else(|| {
                Error::internal(format!("change {id}: unknown outcome {outcome:?}"))
            })?;
            items.push(JournalItem {
                message_id,
                account: account.parse()?,
                error: error.or_else(|| (outcome == Outcome::Unknown).then(|| UNRECORDED.into())),
                outcome,
                error_type,
                before: state_at(before, before_id)?,
                after,
                observed: None,
                route,
            });
        }
        change.items = items;
        Ok(change)
    }

    /// Whether `tag` is the account's: a message carries it, or mailbroker added or removed
    /// it there before.
    pub async fn tag_known(&self, account: &AccountId, tag: &str) -> Result<bool, Error> {
        let found: super::sql::Bit = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM known_tags WHERE account_id = $1 AND tag = $2)
                 OR EXISTS (SELECT 1 FROM message_tags t JOIN messages m ON m.id = t.message_id
                   JOIN mailboxes b ON b.id = m.mailbox_id WHERE b.account_id = $1 AND t.tag = $2)",
        )
        .bind(account.as_str())
        .bind(tag)
        .fetch_one(self.pool())
        .await
        .map_err(db_error)?;
        Ok(found.into())
    }
}

/// The change's own row (its items follow with `insert_items`).
pub(crate) async fn insert_change(
    tx: &mut Transaction<'_, Any>,
    change: &ChangeRecord,
) -> Result<i64, Error> {
    sqlx::query_scalar(
        "INSERT INTO changes (created_at, origin, selection, patch, plan, undo_of, applied,
           unchanged, stale, failed, unknown, status)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         RETURNING id",
    )
    .bind(now_secs())
    .bind(&change.origin)
    .bind(json(&change.selection))
    .bind(json(&change.patch))
    .bind(json(&change.plan))
    .bind(change.undo_of)
    .bind(change.tally.get(Outcome::Applied) as i64)
    .bind(change.tally.get(Outcome::Unchanged) as i64)
    .bind(change.tally.get(Outcome::Stale) as i64)
    .bind(change.tally.get(Outcome::Failed) as i64)
    .bind(change.tally.get(Outcome::Unknown) as i64)
    .bind(change.status)
    .fetch_one(&mut **tx)
    .await
    .map_err(db_error)
}

pub(crate) async fn insert_items(
    tx: &mut Transaction<'_, Any>,
    id: i64,
    items: &[JournalItem],
) -> Result<(), Error> {
    let mut state_ids: HashMap<StateKey, i64> = HashMap::new();
    for item in items {
        for state in std::iter::once(&item.before).chain(&item.after) {
            if let std::collections::hash_map::Entry::Vacant(slot) = state_ids.entry(key(state)) {
                slot.insert(insert_message_state(tx, id, state).await?);
            }
        }
    }
    // One statement, the rows passed as one JSON array: binding ten values a row one by one
    // cost the driver more than SQLite's reading them from JSON.
    let rows: Vec<ItemValues> = items
        .iter()
        .map(|item| {
            let after = item.after.as_ref();
            (
                item.message_id,
                item.account.as_str(),
                item.outcome.as_str(),
                item.error_type.as_deref(),
                item.error.as_deref(),
                state_ids.get(&key(&item.before)).copied(),
                item.before.remote_id.as_str(),
                after.and_then(|a| state_ids.get(&key(a)).copied()),
                after.map(|a| a.remote_id.as_str()),
                item.route.as_deref(),
            )
        })
        .collect();
    let sql = Backend::of(tx).pick(INSERT_ITEMS, INSERT_ITEMS_PG);
    sqlx::query(sql)
        .bind(id)
        .bind(json(&rows))
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// A change's items from one JSON array of `ItemValues` rows (`$2`).
const INSERT_ITEMS: &str = "INSERT INTO change_items (change_id, message_id, account_id,
       outcome, error_type, error, before_state, before_id, after_state, after_id, route)
     SELECT $1, value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4,
       value ->> 5, value ->> 6, value ->> 7, value ->> 8, value ->> 9
     FROM json_each($2)";

/// `INSERT_ITEMS` in PostgreSQL's words: its JSON is read as text, the integers cast back.
const INSERT_ITEMS_PG: &str = "INSERT INTO change_items (change_id, message_id, account_id,
       outcome, error_type, error, before_state, before_id, after_state, after_id, route)
     SELECT $1, CAST(r ->> 0 AS BIGINT), r ->> 1, r ->> 2, r ->> 3, r ->> 4,
       CAST(r ->> 5 AS BIGINT), r ->> 6, CAST(r ->> 7 AS BIGINT), r ->> 8, r ->> 9
     FROM json_array_elements(CAST($2 AS json)) AS r";

/// A `change_items` row after its change id, as `insert_items` passes it.
type ItemValues<'a> = (
    i64,
    &'a str,
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    Option<i64>,
    &'a str,
    Option<i64>,
    Option<&'a str>,
    Option<&'a str>,
);

/// A journaled state without its id, as `change_states` holds it (shared by every message
/// of a change that ends the same way). Rows from before ids were opaque also carry a
/// `uidvalidity`, which is read into their ids and otherwise ignored.
#[derive(Serialize, Deserialize)]
pub(super) struct StoredState {
    pub(super) mailbox: String,
    pub(super) read: bool,
    pub(super) flagged: bool,
    pub(super) tags: Vec<String>,
}

impl StoredState {
    fn with_id(&self, remote_id: RemoteId) -> MessageState {
        MessageState {
            mailbox: self.mailbox.clone(),
            remote_id,
            read: self.read,
            flagged: self.flagged,
            tags: self.tags.clone(),
        }
    }
}

type StateKey<'a> = (&'a str, bool, bool, &'a [String]);

fn key(state: &MessageState) -> StateKey<'_> {
    (&state.mailbox, state.read, state.flagged, &state.tags)
}

/// The id of `state` in change `id`'s states, added if new. A staged deletion journals its
/// batches in separate transactions, so a state may already be there from an earlier batch.
async fn insert_message_state(
    tx: &mut Transaction<'_, Any>,
    id: i64,
    state: &MessageState,
) -> Result<i64, Error> {
    let stored = StoredState {
        mailbox: state.mailbox.clone(),
        read: state.read,
        flagged: state.flagged,
        tags: state.tags.clone(),
    };
    insert_state(tx, id, &stored).await
}

/// The id of `stored` in change `id`'s states, added if new.
pub(super) async fn insert_state(
    tx: &mut Transaction<'_, Any>,
    id: i64,
    stored: &StoredState,
) -> Result<i64, Error> {
    sqlx::query_scalar(
        "INSERT INTO change_states (change_id, state) VALUES ($1, $2)
         ON CONFLICT (change_id, state) DO UPDATE SET state = excluded.state RETURNING id",
    )
    .bind(id)
    .bind(json(stored))
    .fetch_one(&mut **tx)
    .await
    .map_err(db_error)
}

pub(crate) async fn update_index(
    tx: &mut Transaction<'_, Any>,
    items: &[JournalItem],
) -> Result<(), Error> {
    update_observed(tx, items).await?;
    update_tags(tx, items).await
}

/// The place and state rows of every observed message.
async fn update_observed(
    tx: &mut Transaction<'_, Any>,
    items: &[JournalItem],
) -> Result<(), Error> {
    let rows = observed_rows(tx, items).await?;
    // Only moved messages touch the wide messages row (and its (mailbox, remote id) index); every observed message gets its narrow state row rewritten.
    let moved: Vec<&ObservedRow> = rows.iter().filter(|r| r.moved).collect();
    update_places(tx, &moved).await?;
    update_states(tx, &rows).await
}

/// The tag rows of every observed message, from its tags before and as observed. Only
/// the tags that differ are touched: adding one tag to 10,000 messages is 10,000 inserts,
/// not a rewrite of every message's tag rows.
async fn update_tags(tx: &mut Transaction<'_, Any>, items: &[JournalItem]) -> Result<(), Error> {
    let mut added: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    let mut removed: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for item in items {
        if let Some((_, flags)) = &item.observed {
            let before = &item.before.tags;
            for tag in flags.tags.iter().filter(|t| !before.contains(t)) {
                added.entry(tag).or_default().push(item.message_id);
            }
            for tag in before.iter().filter(|t| !flags.tags.contains(t)) {
                removed.entry(tag).or_default().push(item.message_id);
            }
        }
    }
    // Both kinds stay known to the account, even once no message carries the tag.
    for (tag, ids) in added.iter().chain(&removed) {
        sqlx::query(
            "INSERT INTO known_tags (account_id, tag)
             SELECT DISTINCT b.account_id, $1 FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
             WHERE m.id IN (SELECT CAST(value AS BIGINT) FROM json_each($2))
             ON CONFLICT DO NOTHING",
        )
        .bind(*tag)
        .bind(json(ids))
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
    }
    // One statement per tag, its message ids passed as one JSON array.
    for (sql, changes) in [
        (
            "INSERT INTO message_tags (message_id, tag)
             SELECT CAST(value AS BIGINT), $1 FROM json_each($2) WHERE true
             ON CONFLICT DO NOTHING",
            added,
        ),
        (
            "DELETE FROM message_tags
             WHERE tag = $1 AND message_id IN (SELECT CAST(value AS BIGINT) FROM json_each($2))",
            removed,
        ),
    ] {
        for (tag, ids) in changes {
            sqlx::query(sql)
                .bind(tag)
                .bind(json(&ids))
                .execute(&mut **tx)
                .await
                .map_err(db_error)?;
        }
    }
    Ok(())
}

/// A message's new index row, from the server's read-back.
struct ObservedRow<'a> {
    id: i64,
    mailbox_id: i64,
    place: &'a MessageState,
    version: &'a Version,
    flags: &'a MessageFlags,
    moved: bool,
}

/// The observed items with the mailbox id of where they are now. An item whose mailbox is
/// no longer indexed is skipped: the next sync places it.
async fn observed_rows<'a>(
    tx: &mut Transaction<'_, Any>,
    items: &'a [JournalItem],
) -> Result<Vec<ObservedRow<'a>>, Error> {
    let mut mailbox_ids: HashMap<(&str, &str), i64> = HashMap::new();
    let mut rows = Vec::new();
    for item in items {
        let Some((version, flags)) = &item.observed else {
            continue;
        };
        let place = item.after.as_ref().unwrap_or(&item.before);
        let key = (item.account.as_str(), place.mailbox.as_str());
        let mailbox_id = match mailbox_ids.get(&key) {
            Some(id) => *id,
            None => {
                let found: Option<i64> = sqlx::query_scalar(
                    "SELECT id FROM mailboxes WHERE account_id = $1 AND name = $2",
                )
                .bind(key.0)
                .bind(key.1)
                .fetch_optional(&mut **tx)
                .await
                .map_err(db_error)?;
                let Some(id) = found else { continue };
                mailbox_ids.insert(key, id);
                id
            }
        };
        rows.push(ObservedRow {
            id: item.message_id,
            mailbox_id,
            place,
            version,
            flags,
            moved: place.mailbox != item.before.mailbox,
        });
    }
    Ok(rows)
}

/// Most messages of one change end in one of a few states (same new tag, same modseq from
/// one STORE): those are written with one statement per state, their ids as a JSON array,
/// which spares SQLite binding and parsing five values per message. Many distinct states
/// (each statement costs a round trip to the database thread) take the per-row path.
const MAX_GROUPED_STATES: usize = 64;

async fn update_states(
    tx: &mut Transaction<'_, Any>,
    rows: &[ObservedRow<'_>],
) -> Result<(), Error> {
    // Grouped by the state itself; each group's JSON is built once, below.
    type State<'a> = (&'a str, &'a [String], &'a [String], bool, bool);
    let mut groups: HashMap<State, Vec<i64>> = HashMap::new();
    for r in rows {
        let state = (
            r.version.as_str(),
            r.flags.raw.as_slice(),
            r.flags.tags.as_slice(),
            r.flags.read,
            r.flags.flagged,
        );
        groups.entry(state).or_default().push(r.id);
        if groups.len() > MAX_GROUPED_STATES {
            return update_each_state(tx, rows).await;
        }
    }
    for ((version, raw, tags, read, flagged), ids) in groups {
        let (raw, tags) = (json(&raw), json(&tags));
        sqlx::query(
            "UPDATE message_state SET version = $1, flags = $2, tags = $3, is_read = $4,
               is_flagged = $5 WHERE id IN (SELECT CAST(value AS BIGINT) FROM json_each($6))",
        )
        .bind(version)
        .bind(raw)
        .bind(tags)
        .bind(i64::from(read))
        .bind(i64::from(flagged))
        .bind(json(&ids))
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
    }
    Ok(())
}

/// The state of each row, one `UPDATE … FROM (VALUES …)` per 500 messages.
async fn update_each_state(
    tx: &mut Transaction<'_, Any>,
    rows: &[ObservedRow<'_>],
) -> Result<(), Error> {
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let mut q = Sql::new(
            Backend::of(tx),
            "UPDATE message_state SET version = v.column2, flags = v.column3, tags = v.column4,
               is_read = v.column5, is_flagged = v.column6 FROM (",
        );
        q.push_values(chunk, |mut row, r| {
            row.push_bind(r.id)
                .push_bind(r.version.as_str())
                .push_bind(json(&r.flags.raw))
                .push_bind(json(&r.flags.tags))
                .push_bind(i64::from(r.flags.read))
                .push_bind(i64::from(r.flags.flagged));
        });
        q.push(") AS v WHERE message_state.id = v.column1");
        q.build().execute(&mut **tx).await.map_err(db_error)?;
    }
    Ok(())
}

/// The new place (mailbox, remote id) of moved messages.
async fn update_places(
    tx: &mut Transaction<'_, Any>,
    rows: &[&ObservedRow<'_>],
) -> Result<(), Error> {
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let mut q = Sql::new(
            Backend::of(tx),
            "UPDATE messages SET mailbox_id = v.column2, remote_id = v.column3 FROM (",
        );
        q.push_values(chunk, |mut row, r| {
            row.push_bind(r.id)
                .push_bind(r.mailbox_id)
                .push_bind(r.place.remote_id.as_str());
        });
        q.push(") AS v WHERE messages.id = v.column1");
        q.build().execute(&mut **tx).await.map_err(db_error)?;
    }
    Ok(())
}
