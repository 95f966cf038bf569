//! Staged deletion (SPEC §5): an assistant or a person stages a manifest; only a person runs
//! it with `mailbroker delete-staged`. Execution goes batch by batch through the provider
//! trait, checkpointing after each batch, so a run killed at any moment resumes where it
//! stopped: nothing lost, nothing deleted twice.

use std::collections::{BTreeMap, HashMap};

use mailbroker_core::{
    AccountId, DeleteBatch, DeleteMode, Error, ErrorFields, ItemResult, MOVED_SINCE_STAGED,
    MessageFlags, Operation, Outcome, RemoteId, Result, Version, WriteTarget,
};
use serde::Serialize;

use crate::home::Home;
use crate::store::{
    ChangeRecord, ItemOutcome, ItemStatus, JournalItem, Manifest, ManifestItem, ManifestStatus,
    MessageRef, MessageState, Store,
};

/// The most messages one manifest may hold (SPEC §5).
pub const MAX_MESSAGES: usize = 100_000;
/// Messages per provider batch (and per checkpoint).
pub const DEFAULT_BATCH: usize = 1000;

/// Records a manifest of `rows`; changes nothing on any server or in the index.
pub async fn stage(
    store: &Store,
    origin: &str,
    selection: &serde_json::Value,
    rows: &[MessageRef],
    mode: DeleteMode,
    limit: usize,
) -> Result<Manifest> {
    check_size(rows.len(), limit)?;
    // A deletion its accounts cannot carry out is refused now, not when a person runs it.
    let accounts: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r.account.as_str()).collect();
    for account in accounts {
        let record = store.account(&account.parse()?).await?;
        record
            .adapter()?
            .check(&record.info(), Operation::Delete(mode))?;
    }
    store.stage_manifest(origin, selection, mode, rows).await
}

/// Refuses an empty selection or one over `limit` (capped at `MAX_MESSAGES`).
pub fn check_size(count: usize, limit: usize) -> Result<()> {
    let limit = limit.min(MAX_MESSAGES);
    if count == 0 {
        return Err(Error::not_found("no message matches; nothing to stage")
            .with_next_step("check the query with: mailbroker search QUERY"));
    }
    if count > limit {
        return Err(Error::limit_exceeded(format!(
            "{count} messages match, more than one manifest may hold ({limit}); nothing was staged"
        ))
        .with_next_step(
            "narrow the query, e.g. with before:, in: or account:, and stage in parts",
        ));
    }
    Ok(())
}

/// (account, mailbox)
type Place = (String, String);

/// Pending items per account, then per mailbox, in batches.
type Batches = BTreeMap<String, Vec<(Place, Vec<ManifestItem>)>>;

fn batches(items: Vec<ManifestItem>, size: usize) -> Batches {
    let mut places: BTreeMap<Place, Vec<ManifestItem>> = BTreeMap::new();
    for item in items {
        let place = (item.account.clone(), item.mailbox.clone());
        places.entry(place).or_default().push(item);
    }
    let mut out = Batches::new();
    for (place, items) in places {
        for chunk in items.chunks(size.max(1)) {
            out.entry(place.0.clone())
                .or_default()
                .push((place.clone(), chunk.to_vec()));
        }
    }
    out
}

async fn trash_of(store: &Store, account: &str) -> Option<String> {
    store
        .resolve_mailbox(account, "trash")
        .await
        .ok()
        .filter(|(_, role)| role.as_deref() == Some("trash"))
        .map(|(name, _)| name)
}

/// The index rows of these items that the index still has, by message id.
async fn indexed_rows(store: &Store, items: &[ManifestItem]) -> Result<HashMap<i64, MessageRef>> {
    let ids: Vec<i64> = items.iter().map(|i| i.message_id).collect();
    let rows = store.existing_refs(&ids).await?;
    Ok(rows.into_iter().map(|r| (r.id, r)).collect())
}

/// A provider batch of these items, each with the state the index last saw (`indexed`).
fn batch_of(
    place: &Place,
    items: &[ManifestItem],
    indexed: &HashMap<i64, MessageRef>,
    mode: DeleteMode,
    trash: Option<String>,
) -> DeleteBatch {
    // What is deleted is the message as staged (its id then), with the index's state.
    let targets = items
        .iter()
        .map(|i| match indexed.get(&i.message_id) {
            Some(row) => WriteTarget {
                id: i.remote_id.clone(),
                ..super::update::target_of(row)
            },
            None => WriteTarget {
                id: i.remote_id.clone(),
                version: Version::default(),
                message_id: None,
                size: None,
                flags: MessageFlags::default(),
            },
        })
        .collect();
    DeleteBatch {
        folders: Default::default(),
        mailbox: place.1.clone(),
        mode,
        trash,
        targets,
    }
}

/// The exact plan of the pending items, per provider; nothing is sent.
pub async fn plan(store: &Store, id: i64, batch_size: usize) -> Result<Vec<String>> {
    let manifest = store.manifest(id, false).await?;
    let pending = store.manifest_items(id, Some(ItemStatus::Pending)).await?;
    plan_of(store, manifest.mode, &batches(pending, batch_size)).await
}

/// The plan of `groups`, from the manifest's items alone: what is sent depends on their ids,
/// not on the index's state of them, which the run reads once per batch as it goes.
async fn plan_of(store: &Store, mode: DeleteMode, groups: &Batches) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    let unread = HashMap::new();
    for (account, groups) in groups {
        let record = store.account(&account.parse()?).await?;
        let trash = trash_of(store, account).await;
        for (place, items) in groups {
            let batch = batch_of(place, items, &unread, mode, trash.clone());
            lines.extend(record.adapter()?.plan_delete(&record.info(), &batch));
        }
    }
    Ok(lines)
}

#[derive(Debug, Serialize)]
pub struct RunReport {
    pub manifest_id: i64,
    pub change_id: Option<i64>,
    pub status: ManifestStatus,
    /// Item counts by status after the run.
    pub counts: serde_json::Value,
    pub failures: Vec<BatchFailure>,
    /// Protocol commands sent by this run, login and logout included.
    pub commands: u64,
    /// Messages a fallback route carried (the account's own was unavailable), by route.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub routes: std::collections::BTreeMap<String, Vec<i64>>,
}

/// A batch the provider refused as a whole: where, and its error's SPEC §10 fields.
#[derive(Debug, Clone, Serialize)]
pub struct BatchFailure {
    pub account: String,
    pub mailbox: String,
    #[serde(flatten)]
    pub error: ErrorFields,
}

impl std::fmt::Display for BatchFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e = &self.error;
        write!(
            f,
            "{} {:?}: error[{}]: {}",
            self.account, self.mailbox, e.error_type, e.error
        )?;
        match &e.next_step {
            Some(step) => write!(f, " (next: {step})"),
            None => Ok(()),
        }
    }
}

/// Cancels a manifest that has not finished; its remaining items will never run.
pub async fn cancel(store: &Store, id: i64) -> Result<Manifest> {
    let manifest = store.manifest(id, false).await?;
    if matches!(
        manifest.status,
        ManifestStatus::Done | ManifestStatus::Cancelled
    ) {
        return Err(Error::validation(format!(
            "manifest {id} is {} and cannot be cancelled",
            manifest.status
        )));
    }
    store
        .set_manifest_status(id, ManifestStatus::Cancelled)
        .await?;
    store.manifest(id, false).await
}

/// Runs (or resumes) a manifest. `progress` gets (items finished, items in the manifest).
pub async fn execute(
    home: &Home,
    store: &Store,
    id: i64,
    batch_size: usize,
    mut progress: impl FnMut(u64, u64),
) -> Result<RunReport> {
    let manifest = store.manifest(id, false).await?;
    match manifest.status {
        ManifestStatus::Cancelled => {
            return Err(
                Error::validation(format!("manifest {id} was cancelled; nothing runs"))
                    .with_next_step("stage the deletion again if it is still wanted"),
            );
        }
        ManifestStatus::Done => return report(store, id, None, Vec::new(), 0).await,
        _ => {}
    }
    let pending = store.manifest_items(id, Some(ItemStatus::Pending)).await?;
    let total = manifest.summary["count"]
        .as_u64()
        .unwrap_or(pending.len() as u64);
    let mut finished = total.saturating_sub(pending.len() as u64);
    progress(finished, total);
    let groups = batches(pending, batch_size);
    store
        .set_manifest_status(id, ManifestStatus::Executing)
        .await?;
    let change_id = store
        .open_change(&ChangeRecord {
            id: 0,
            created_at: 0,
            origin: "cli".into(),
            selection: serde_json::json!({ "manifest": id }),
            patch: serde_json::json!({ "delete": manifest.mode.as_str() }),
            plan: plan_of(store, manifest.mode, &groups).await?,
            undo_of: None,
            undone_by: None,
            applied: 0,
            unchanged: 0,
            stale: 0,
            failed: 0,
            // The manifest is this run's intent: its items stay pending until a batch's
            // checkpoint records them, and a pending item is re-checked on the server.
            status: crate::store::ChangeStatus::Done,
            items: Vec::new(),
        })
        .await?;
    let mut run = Run {
        store,
        manifest_id: id,
        change_id,
        mode: manifest.mode,
        failures: Vec::new(),
        commands: 0,
    };
    for (account, groups) in groups {
        run.account(home, &account, groups, |n| {
            finished += n;
            progress(finished, total);
        })
        .await?;
    }
    let (failures, commands) = (run.failures, run.commands);
    report(store, id, Some(change_id), failures, commands).await
}

/// One run of a manifest: where results go, and what it gathered.
struct Run<'a> {
    store: &'a Store,
    manifest_id: i64,
    change_id: i64,
    mode: DeleteMode,
    failures: Vec<BatchFailure>,
    commands: u64,
}

impl Run<'_> {
    /// One account's batches under its lock, on one connection. The first batch that fails
    /// ends the account's work: nothing more is sent on a connection in an unknown state.
    async fn account(
        &mut self,
        home: &Home,
        account: &str,
        groups: Vec<(Place, Vec<ManifestItem>)>,
        mut advanced: impl FnMut(u64),
    ) -> Result<()> {
        let account_id: AccountId = account.parse()?;
        // A staged message is deleted only if it is still what and where it was staged:
        // the index is brought up to date first (another client's moves and changes), and
        // each batch is checked against it (`recheck`); the provider checks again on the
        // server. A sync that cannot run leaves that to the provider.
        if let Err(e) =
            crate::sync::sync_account(home, self.store, &account_id, false, |_| {}).await
        {
            tracing::debug!(error = %e, "delete: not synced first; the provider checks alone");
        }
        let mut session = crate::sessions::open(home, self.store, &account_id).await?;
        let provider = &mut session.provider;
        let trash = trash_of(self.store, account).await;
        for (place, items) in groups {
            // The rows as indexed before the batch: its targets' state, and its journal's
            // "before" once the batch is done.
            let indexed = indexed_rows(self.store, &items).await?;
            let (items, settled) = recheck(items, &indexed, self.mode, trash.as_deref());
            if !settled.is_empty() {
                let (left, results): (Vec<ManifestItem>, Vec<ItemResult>) =
                    settled.into_iter().unzip();
                self.checkpoint(&left, &indexed, results).await?;
                advanced(left.len() as u64);
            }
            if items.is_empty() {
                continue;
            }
            let mut batch = batch_of(&place, &items, &indexed, self.mode, trash.clone());
            let named: Vec<&str> = std::iter::once(place.1.as_str())
                .chain(trash.as_deref())
                .collect();
            batch.folders = self.store.folder_ids(account, &named).await?;
            let started = std::time::Instant::now();
            let outcome = provider.delete(&batch).await;
            tracing::debug!(
                ms = started.elapsed().as_millis() as u64,
                n = items.len(),
                "delete: batch sent"
            );
            match outcome {
                Ok(results) => {
                    self.checkpoint(&items, &indexed, results).await?;
                    advanced(items.len() as u64);
                }
                Err(e) => {
                    self.failures.push(BatchFailure {
                        account: account.to_string(),
                        mailbox: place.1.clone(),
                        error: ErrorFields::from(&e),
                    });
                    // Nothing of the batch is known to have been sent. When the account needs
                    // fixing, the server asks to retry later, or the outcome is unknown, the
                    // items stay pending for the next run; otherwise they failed.
                    let retry = e.needs_account_fix() || e.is_retryable() || e.is_unknown_outcome();
                    if !retry {
                        let failed: Vec<ItemResult> = items
                            .iter()
                            .map(|i| {
                                ItemResult::new(i.remote_id.clone(), Outcome::Failed)
                                    .with_error(e.clone())
                            })
                            .collect();
                        self.checkpoint(&items, &indexed, failed).await?;
                    }
                    break;
                }
            }
        }
        provider.close().await;
        self.commands += provider.commands_sent();
        Ok(())
    }
}

/// Splits a batch's items by what the index (just synced) says of them: those still where
/// and what they were when staged, to send; and those settled without sending anything,
/// with their results. A message gone from the account is done (already deleted), as is one
/// already in the trash for a trash run (an earlier run's move); one elsewhere was moved
/// since it was staged: it is left alone (`stale_state`), never deleted from where it went.
fn recheck(
    items: Vec<ManifestItem>,
    indexed: &HashMap<i64, MessageRef>,
    mode: DeleteMode,
    trash: Option<&str>,
) -> (Vec<ManifestItem>, Vec<(ManifestItem, ItemResult)>) {
    let mut send = Vec::with_capacity(items.len());
    let mut settled = Vec::new();
    for item in items {
        let result = |outcome| ItemResult::new(item.remote_id.clone(), outcome);
        let verdict = match indexed.get(&item.message_id) {
            None => Some(result(Outcome::Unchanged)),
            Some(row) if row.mailbox != item.mailbox => Some(
                match mode == DeleteMode::Trash && trash == Some(row.mailbox.as_str()) {
                    true => result(Outcome::Unchanged),
                    false => result(Outcome::Stale).with_error(
                        Error::stale_state(format!(
                            "{MOVED_SINCE_STAGED} (now in {:?}); left alone",
                            row.mailbox
                        ))
                        .with_next_step("stage it again where it is now, if it is still to go"),
                    ),
                },
            ),
            // Still where it was staged: the provider checks again on the server.
            Some(_) => None,
        };
        match verdict {
            Some(r) => settled.push((item, r)),
            None => send.push(item),
        }
    }
    (send, settled)
}

/// Settles the manifest's status from its items and reports.
async fn report(
    store: &Store,
    id: i64,
    change_id: Option<i64>,
    failures: Vec<BatchFailure>,
    commands: u64,
) -> Result<RunReport> {
    let manifest = store.manifest(id, false).await?;
    let count = |s: &str| manifest.counts[s].as_u64().unwrap_or(0);
    let status = if count("pending") > 0 || count("failed") > 0 {
        ManifestStatus::Failed
    } else {
        ManifestStatus::Done
    };
    if manifest.status != status {
        store.set_manifest_status(id, status).await?;
    }
    let routes = match change_id {
        Some(change) => store.change_routes(change).await?,
        None => Default::default(),
    };
    Ok(RunReport {
        manifest_id: id,
        change_id,
        status,
        counts: manifest.counts,
        failures,
        commands,
        routes,
    })
}

/// One item's status and journal line from what the server did with it. `indexed` is its
/// index row, when it still has one.
fn record_of(
    item: &ManifestItem,
    result: ItemResult,
    mode: DeleteMode,
    indexed: Option<&MessageRef>,
) -> (ItemOutcome, JournalItem) {
    let before = indexed.map_or_else(
        || MessageState {
            mailbox: item.mailbox.clone(),
            remote_id: item.remote_id.clone(),
            read: false,
            flagged: false,
            tags: Vec::new(),
        },
        super::update::state_of,
    );
    let outcome = result.outcome;
    // What may have happened, or failed for the account's sake (a token, a rate limit),
    // stays pending: the next run checks it again on the server.
    let again = result
        .error
        .as_ref()
        .is_some_and(|e| e.needs_account_fix() || e.is_retryable());
    let status = match outcome {
        Outcome::Applied | Outcome::Unchanged => ItemStatus::Done,
        Outcome::Stale => ItemStatus::Skipped,
        Outcome::Unknown => ItemStatus::Pending,
        Outcome::Failed if again => ItemStatus::Pending,
        Outcome::Failed => ItemStatus::Failed,
    };
    let reason = result
        .error
        .as_ref()
        .filter(|e| e.message().starts_with(MOVED_SINCE_STAGED))
        .map(|_| "moved");
    let after = result.moved_to.as_ref().map(|(mailbox, remote_id)| {
        let flags = result.observed.as_ref().map(|(_, f)| f);
        MessageState {
            mailbox: mailbox.clone(),
            remote_id: remote_id.clone(),
            read: flags.is_some_and(|f| f.read),
            flagged: flags.is_some_and(|f| f.flagged),
            tags: flags.map(|f| f.tags.clone()).unwrap_or_default(),
        }
    });
    let error = result.error.as_ref().map(|e| e.message().to_string());
    let route = result.route.clone();
    let record = ItemOutcome {
        message_id: item.message_id,
        status,
        error: error.clone(),
        reason,
        // Deleted for good: its index row keeps only its metadata, in `deleted_messages`.
        purged: status == ItemStatus::Done && mode == DeleteMode::Permanent && indexed.is_some(),
    };
    let line = JournalItem {
        message_id: item.message_id,
        account: item.account.clone(),
        outcome,
        error_type: result.error.as_ref().map(|e| e.error_type().to_string()),
        error,
        before,
        // Only a row still in the index can be moved in it.
        observed: result.observed.clone().filter(|_| indexed.is_some()),
        after,
        route,
    };
    (record, line)
}

impl Run<'_> {
    /// Records one batch's results: item statuses, journal lines and the index, together.
    async fn checkpoint(
        &self,
        items: &[ManifestItem],
        indexed: &HashMap<i64, MessageRef>,
        results: Vec<ItemResult>,
    ) -> Result<()> {
        let (store, mode) = (self.store, self.mode);
        let mut by_id: HashMap<RemoteId, ItemResult> =
            results.into_iter().map(|r| (r.id.clone(), r)).collect();
        let mut outcomes = Vec::with_capacity(items.len());
        let mut journal = Vec::with_capacity(items.len());
        for item in items {
            let result = by_id.remove(&item.remote_id).unwrap_or_else(|| {
                ItemResult::new(item.remote_id.clone(), Outcome::Failed).with_error(
                    Error::verification_failed("the server's answer did not mention this message"),
                )
            });
            let (outcome, line) = record_of(item, result, mode, indexed.get(&item.message_id));
            outcomes.push(outcome);
            journal.push(line);
        }
        store
            .checkpoint(self.manifest_id, self.change_id, &outcomes, &journal)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_holds_at_most_100000_messages() {
        check_size(MAX_MESSAGES, MAX_MESSAGES).unwrap();
        let over = check_size(MAX_MESSAGES + 1, MAX_MESSAGES).unwrap_err();
        assert_eq!(over.error_type(), "limit_exceeded");
        assert!(over.next_step().is_some());
        // A caller's lower limit applies; a higher one is capped.
        assert!(check_size(3, 2).is_err());
        assert!(check_size(MAX_MESSAGES + 1, usize::MAX).is_err());
        assert_eq!(check_size(0, 10).unwrap_err().error_type(), "not_found");
    }
}
