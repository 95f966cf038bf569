//! Running a manifest: each account synced first, then its batches through the shared
//! executor (`change::batches`), each re-checked against the index before it is sent and
//! checkpointed after (item statuses, journal lines and the index in one transaction).

use std::collections::HashMap;

use mailbroker_core::{
    AccountId, DeleteMode, Error, ErrorFields, ItemResult, MOVED_SINCE_STAGED, Outcome, Provider,
    RemoteId, Result,
};

use super::{BatchFailure, Place, RunReport, batch_of, in_batches, plan_of, trash_of};
use crate::change::batches::{Batches, run_account};
use mailbroker_store::{
    ChangeRecord, ItemOutcome, ItemStatus, JournalItem, ManifestItem, ManifestStatus, MessageRef,
    MessageState, Store,
};

/// The index rows of these items that the index still has, by message id.
async fn indexed_rows(store: &Store, items: &[ManifestItem]) -> Result<HashMap<i64, MessageRef>> {
    let ids: Vec<i64> = items.iter().map(|i| i.message_id).collect();
    let rows = store.existing_refs(&ids).await?;
    Ok(rows.into_iter().map(|r| (r.id, r)).collect())
}

/// Runs (or resumes) a manifest. `progress` gets (items finished, items in the manifest).
pub async fn execute(
    store: &Store,
    id: i64,
    batch_size: usize,
    mut progress: impl FnMut(u64, u64) + Send,
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
    let groups = in_batches(pending, batch_size);
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
            tally: Default::default(),
            // The manifest is this run's intent: its items stay pending until a batch's
            // checkpoint records them, and a pending item is re-checked on the server.
            status: mailbroker_store::ChangeStatus::Executing,
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
    let mut advanced = |n| {
        finished += n;
        progress(finished, total);
    };
    for (account, groups) in groups {
        run.account(&account, groups, &mut advanced).await?;
    }
    store.close_change(change_id, &[]).await?;
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
    /// One account's batches under its lock, on one connection, after a sync.
    async fn account(
        &mut self,
        account: &AccountId,
        groups: Vec<(Place, Vec<ManifestItem>)>,
        advanced: &mut (dyn FnMut(u64) + Send),
    ) -> Result<()> {
        // A staged message is deleted only if it is still what and where it was staged:
        // the index is brought up to date first (another client's moves and changes), and
        // each batch is checked against it (`recheck`); the provider checks again on the
        // server. A sync that cannot run leaves that to the provider.
        if let Err(e) = crate::sync::sync_account(self.store, account, false, |_| {}).await {
            tracing::debug!(error = %e, "delete: not synced first; the provider checks alone");
        }
        let mut session = crate::sessions::open(self.store, account).await?;
        let store = self.store;
        let mut deletions = Deletions {
            trash: trash_of(self.store, account).await,
            run: self,
            account,
            indexed: HashMap::new(),
            sending: Vec::new(),
            advanced,
        };
        let ran = run_account(&mut session, store, &groups, &mut deletions).await;
        self.commands += session.close().await;
        ran
    }
}

/// One account's part of a run.
struct Deletions<'r, 'a> {
    run: &'r mut Run<'a>,
    account: &'r AccountId,
    trash: Option<String>,
    /// The batch's rows as indexed before it: its targets' state, and its journal's
    /// "before" once it is done.
    indexed: HashMap<i64, MessageRef>,
    /// The batch's items still to send once `recheck` settled the others.
    sending: Vec<ManifestItem>,
    advanced: &'r mut (dyn FnMut(u64) + Send),
}

#[async_trait::async_trait]
impl Batches for Deletions<'_, '_> {
    type Batch = (Place, Vec<ManifestItem>);

    /// Settles what the index already answers (`recheck`); the rest is left to send.
    async fn prepare(&mut self, (_, items): &Self::Batch) -> Result<bool> {
        self.indexed = indexed_rows(self.run.store, items).await?;
        let (mode, trash) = (self.run.mode, self.trash.as_deref());
        let (send, settled) = recheck(items.clone(), &self.indexed, mode, trash);
        if !settled.is_empty() {
            let (left, results): (Vec<ManifestItem>, Vec<ItemResult>) = settled.into_iter().unzip();
            self.run.checkpoint(&left, &self.indexed, results).await?;
            (self.advanced)(left.len() as u64);
        }
        self.sending = send;
        Ok(!self.sending.is_empty())
    }

    async fn send(
        &mut self,
        provider: &mut dyn Provider,
        (place, _): &Self::Batch,
    ) -> Result<Vec<ItemResult>> {
        let (mode, trash) = (self.run.mode, self.trash.clone());
        let mut batch = batch_of(place, &self.sending, &self.indexed, mode, trash);
        let named: Vec<&str> = std::iter::once(place.1.as_str())
            .chain(self.trash.as_deref())
            .collect();
        batch.folders = self.run.store.folder_ids(self.account, &named).await?;
        let started = std::time::Instant::now();
        let sent = provider.delete(&batch).await;
        tracing::debug!(
            ms = started.elapsed().as_millis() as u64,
            n = self.sending.len(),
            "delete: batch sent"
        );
        sent
    }

    async fn record(
        &mut self,
        (place, _): &Self::Batch,
        sent: Result<Vec<ItemResult>>,
    ) -> Result<()> {
        let items = std::mem::take(&mut self.sending);
        let e = match sent {
            Ok(results) => {
                self.run.checkpoint(&items, &self.indexed, results).await?;
                (self.advanced)(items.len() as u64);
                return Ok(());
            }
            Err(e) => e,
        };
        self.run.failures.push(BatchFailure {
            account: self.account.to_string(),
            mailbox: place.1.clone(),
            error: ErrorFields::from(&e),
        });
        // Nothing of the batch is known to have been sent. When the account needs fixing,
        // the server asks to retry later, or the outcome is unknown, the items stay pending
        // for the next run; otherwise they failed.
        if e.needs_account_fix() || e.is_retryable() || e.is_unknown_outcome() {
            return Ok(());
        }
        let failed: Vec<ItemResult> = items
            .iter()
            .map(|i| ItemResult::new(i.remote_id.clone(), Outcome::Failed).with_error(e.clone()))
            .collect();
        self.run.checkpoint(&items, &self.indexed, failed).await
    }

    /// A batch after a failed one stays pending for the next run.
    async fn skipped(&mut self, _: &Self::Batch, _: &Error) -> Result<()> {
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
        crate::change::update::state_of,
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
