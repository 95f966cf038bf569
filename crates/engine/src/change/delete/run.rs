//! Running a manifest (`Operation::Run`): each account locked and logged in once, on one
//! session that syncs it first and then sends its batches through the shared executor
//! (`change::batches`). Each batch is re-checked against the index before it is sent and
//! checkpointed after (item statuses, journal lines and the index in one transaction, while
//! the account's lease is still the run's); the run reports a `ChangeReport`.

use std::collections::HashMap;

use mailbroker_core::{
    AccountId, DeleteMode, Error, ItemResult, MOVED_SINCE_STAGED, Outcome, Provider, RemoteId,
    Result,
};

use super::{Pending, Place, Progress, batch_of, in_batches, trash_of};
use crate::change::batches::{Batches, failed_as_batch, run_account};
use crate::change::update::{ChangeReport, Known, Records, records_of, rows_of};
use crate::registry::AccountAdapter;
use crate::sessions::Sessions;
use mailbroker_store::{
    ChangeRecord, Fence, ItemOutcome, ItemStatus, JournalItem, Mailboxes, Manifest, ManifestItem,
    ManifestStatus, MessageRef, MessageState, Store,
};

/// A manifest ready to run, read once: its pending items in batches, the rows of their
/// accounts (which their sessions open with), each account's trash, and the plan.
pub struct Ready {
    pub manifest: Manifest,
    /// What the run sends, from the manifest's items alone: what is sent depends on their
    /// ids, not on the index's state of them, which the run reads once per batch as it goes.
    pub plan: Vec<String>,
    /// The accounts of its pending items whose person has not allowed permanent deletions
    /// to run unattended (`account set ID --unattended-deletions`).
    pub attended: Vec<AccountId>,
    groups: Pending,
    records: Records,
}

/// Reads what running manifest `id` needs; a cancelled manifest is refused.
pub async fn resolve(store: &Store, id: i64, batch_size: usize) -> Result<Ready> {
    let manifest = store.manifest(id, false).await?;
    let pending = match manifest.status {
        ManifestStatus::Cancelled => {
            return Err(
                Error::validation(format!("manifest {id} was cancelled; nothing runs"))
                    .with_next_step("stage the deletion again if it is still wanted"),
            );
        }
        ManifestStatus::Done => Vec::new(),
        _ => store.manifest_items(id, Some(ItemStatus::Pending)).await?,
    };
    let groups = in_batches(pending, batch_size);
    let records = records_of(store, groups.keys().cloned().collect()).await?;
    let mut plan = Vec::new();
    for (account, groups) in &groups {
        let Some(Known { record, mailboxes }) = records.get(account) else {
            continue;
        };
        let trash = trash_of(mailboxes);
        for (place, items) in groups {
            let batch = batch_of(place, items, &HashMap::new(), manifest.mode, trash.clone());
            plan.extend(record.adapter()?.plan_delete(&record.info(), &batch));
        }
    }
    let attended = records
        .iter()
        .filter(|(_, k)| k.record.unattended_deletions_since.is_none())
        .map(|(account, _)| account.clone())
        .collect();
    Ok(Ready {
        manifest,
        plan,
        attended,
        groups,
        records,
    })
}

impl Ready {
    /// The items still to run.
    pub fn pending(&self) -> u64 {
        let groups = self.groups.values().flatten();
        groups.map(|(_, items)| items.len() as u64).sum()
    }

    /// What running it does, in words ("deletes 3 message(s) of manifest 7 for good").
    pub fn reason(&self) -> String {
        let (n, id) = (self.pending(), self.manifest.id);
        match self.manifest.mode {
            DeleteMode::Trash => format!("moves {n} message(s) of manifest {id} to the trash"),
            DeleteMode::Permanent => format!("deletes {n} message(s) of manifest {id} for good"),
        }
    }
}

/// Runs (or resumes) a manifest for `origin` (who ran it, as the journal records it);
/// returns its report and the manifest as the run left it.
pub async fn execute(
    store: &Store,
    ready: Ready,
    progress: Progress,
    origin: &str,
) -> Result<(ChangeReport, Manifest)> {
    let started = std::time::Instant::now();
    let pending = ready.pending();
    let Ready {
        manifest,
        plan,
        groups,
        records,
        ..
    } = ready;
    let id = manifest.id;
    let mut report = ChangeReport {
        plan,
        planned: pending,
        ..ChangeReport::default()
    };
    if pending == 0 {
        return settle(store, id, report).await;
    }
    let total = manifest.summary.count.max(pending);
    store
        .set_manifest_status(id, ManifestStatus::Executing)
        .await?;
    let change_id = store
        .open_change(&intent(&manifest, &report.plan, origin))
        .await?;
    report.change_id = Some(change_id);
    let mut run = Run {
        store,
        ids: (id, change_id),
        mode: manifest.mode,
        report,
        finished: total.saturating_sub(pending),
        total,
        progress,
    };
    run.progress.tell(run.finished, total);
    let mut sessions = Sessions::new(store).knowing(rows_of(&records));
    for (account, groups) in groups {
        run.account(&mut sessions, &account, groups)
            .await
            .map_err(|e| stopped(e, id))?;
    }
    store.close_change(change_id, &[]).await?;
    let mut report = run.report;
    report.local_ms = (started.elapsed().as_millis() as u64).saturating_sub(report.provider_ms);
    settle(store, id, report).await
}

/// The journal's record of a run: the manifest is its intent. Its items stay pending until
/// a batch's checkpoint records them, and a pending item is re-checked on the server.
fn intent(manifest: &Manifest, plan: &[String], origin: &str) -> ChangeRecord {
    ChangeRecord {
        id: 0,
        created_at: 0,
        origin: origin.into(),
        selection: mailbroker_store::Chosen::Manifest {
            manifest: manifest.id,
        },
        patch: mailbroker_store::Asked::Deletion {
            delete: manifest.mode,
        },
        plan: plan.to_vec(),
        undo_of: None,
        undone_by: None,
        tally: Default::default(),
        status: mailbroker_store::ChangeStatus::Executing,
        items: Vec::new(),
    }
}

/// A run that stopped before its end (the index could not record a batch, the account was
/// taken over): what was not recorded stays pending, and the next run checks it again.
fn stopped(e: Error, id: i64) -> Error {
    if e.next_step().is_some() {
        return e;
    }
    e.with_next_step(format!(
        "run it again: mailbroker delete-staged {id} (its unrecorded messages are checked on \
         the server first)"
    ))
}

/// One run of a manifest: where results go, and what it gathered.
struct Run<'a> {
    store: &'a Store,
    /// (manifest, change)
    ids: (i64, i64),
    mode: DeleteMode,
    report: ChangeReport,
    finished: u64,
    total: u64,
    progress: Progress,
}

impl Run<'_> {
    /// One account's batches on its one session (its lease and login), after a sync on it.
    async fn account(
        &mut self,
        sessions: &mut Sessions,
        account: &AccountId,
        groups: Vec<(Place, Vec<ManifestItem>)>,
    ) -> Result<()> {
        let mut session = match sessions.take(account).await {
            Ok(session) => session,
            Err(e) => {
                // Nothing was sent to this account: its items stay pending for the next run.
                groups
                    .iter()
                    .for_each(|(_, items)| self.not_sent(items, &e));
                return Ok(());
            }
        };
        // A staged message is deleted only if it is still what and where it was staged:
        // the index is brought up to date first (another client's moves and changes), and
        // each batch is checked against it (`recheck`); the provider checks again on the
        // server. A sync that cannot run leaves that to the provider.
        if let Err(e) = crate::sync::sync_on(self.store, account, &mut session).await {
            tracing::debug!(error = %e, "delete: not synced first; the provider checks alone");
        }
        // Read once, after the sync that may have changed them: the trash and folder ids
        // every batch of this account is sent with.
        let mailboxes = self.store.mailboxes_of(account).await?;
        let store = self.store;
        let mut deletions = Deletions {
            fence: session.fence(),
            run: self,
            account,
            trash: trash_of(&mailboxes),
            mailboxes,
            indexed: HashMap::new(),
            sending: Vec::new(),
        };
        let follow = crate::change::Follow::default();
        let ran = run_account(&mut session, store, &groups, &mut deletions, &follow).await;
        self.report.commands += session.close().await;
        ran
    }

    /// Reports `items` as not sent (or, if the connection dropped while it was, unknown);
    /// they stay pending in the manifest.
    fn not_sent(&mut self, items: &[ManifestItem], e: &Error) {
        let results = failed_as_batch(items.iter().map(|i| &i.remote_id), e);
        for (item, result) in items.iter().zip(&results) {
            self.report.tell(item.message_id, &item.account, result);
        }
    }

    fn advanced(&mut self, n: usize) {
        self.finished += n as u64;
        self.progress.tell(self.finished, self.total);
    }
}

/// One account's part of a run.
struct Deletions<'r, 'a> {
    run: &'r mut Run<'a>,
    account: &'r AccountId,
    fence: Fence,
    mailboxes: Mailboxes,
    trash: Option<String>,
    /// The batch's rows as indexed before it: its targets' state, and its journal's
    /// "before" once it is done.
    indexed: HashMap<i64, MessageRef>,
    /// The batch's items still to send once `recheck` settled the others.
    sending: Vec<ManifestItem>,
}

/// The index rows of these items that the index still has, by message id.
async fn indexed_rows(store: &Store, items: &[ManifestItem]) -> Result<HashMap<i64, MessageRef>> {
    let ids: Vec<i64> = items.iter().map(|i| i.message_id).collect();
    let rows = store.existing_refs(&ids).await?;
    Ok(rows.into_iter().map(|r| (r.id, r)).collect())
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
            self.checkpoint(&left, results).await?;
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
        batch.folders = self.mailboxes.folder_ids(&named);
        let started = std::time::Instant::now();
        let sent = provider.delete(&batch).await;
        let ms = started.elapsed().as_millis() as u64;
        self.run.report.provider_ms += ms;
        tracing::debug!(ms, n = self.sending.len(), "delete: batch sent");
        sent
    }

    async fn record(&mut self, _: &Self::Batch, sent: Result<Vec<ItemResult>>) -> Result<()> {
        let items = std::mem::take(&mut self.sending);
        let e = match sent {
            Ok(results) => return self.checkpoint(&items, results).await,
            Err(e) => e,
        };
        // When the account needs fixing, the server asks to retry later, or the batch may
        // have reached the server before its answer was lost, the items stay pending for the
        // next run (which checks them on the server first); otherwise they failed.
        if e.needs_account_fix() || e.is_retryable() || e.is_unknown_outcome() {
            self.run.not_sent(&items, &e);
            return Ok(());
        }
        let failed = failed_as_batch(items.iter().map(|i| &i.remote_id), &e);
        self.checkpoint(&items, failed).await
    }

    /// A batch after a failed one is not sent: it stays pending for the next run.
    async fn skipped(&mut self, (_, items): &Self::Batch, cause: &Error) -> Result<()> {
        let e = Error::provider_unavailable(format!(
            "not attempted after an earlier failure: {}",
            cause.message()
        ));
        self.run.not_sent(items, &e);
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

/// Settles the manifest's status from its items: done when none is pending or failed.
async fn settle(store: &Store, id: i64, report: ChangeReport) -> Result<(ChangeReport, Manifest)> {
    let mut manifest = store.manifest(id, false).await?;
    let status = match manifest.counts.pending > 0 || manifest.counts.failed > 0 {
        true => ManifestStatus::Failed,
        false => ManifestStatus::Done,
    };
    if manifest.status != status {
        store.set_manifest_status(id, status).await?;
        manifest.status = status;
    }
    Ok((report, manifest))
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

impl Deletions<'_, '_> {
    /// Records one batch's results (item statuses, journal lines and the index, together,
    /// while the account is still the run's) and reports them.
    async fn checkpoint(&mut self, items: &[ManifestItem], results: Vec<ItemResult>) -> Result<()> {
        let mode = self.run.mode;
        let mut by_id: HashMap<RemoteId, ItemResult> =
            results.into_iter().map(|r| (r.id.clone(), r)).collect();
        let mut outcomes = Vec::with_capacity(items.len());
        let mut journal = Vec::with_capacity(items.len());
        let mut told = Vec::with_capacity(items.len());
        for item in items {
            let result = by_id.remove(&item.remote_id).unwrap_or_else(|| {
                ItemResult::new(item.remote_id.clone(), Outcome::Failed).with_error(
                    Error::verification_failed("the server's answer did not mention this message"),
                )
            });
            told.push(ItemResult {
                error: result.error.clone(),
                route: result.route.clone(),
                ..ItemResult::new(item.remote_id.clone(), result.outcome)
            });
            let (outcome, line) = record_of(item, result, mode, self.indexed.get(&item.message_id));
            outcomes.push(outcome);
            journal.push(line);
        }
        let store = self.run.store;
        store
            .checkpoint(self.run.ids, &outcomes, &journal, &self.fence)
            .await?;
        for (item, result) in items.iter().zip(&told) {
            self.run.report.tell(item.message_id, self.account, result);
        }
        self.run.advanced(items.len());
        Ok(())
    }
}
