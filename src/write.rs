//! The write pipeline (SPEC §3), shared by every surface: resolve → plan → (dry run) →
//! execute per account under its lock → verify (inside the adapter) → journal + index update.
//!
//! Architecture Invariant: the index only ever commits what the server read back, in the
//! same transaction as the journal entry that explains it. Rows written earlier from what the
//! server accepted (`Accepted`) commit only if the read-back equals them exactly.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mailbroker_core::{
    Accepted, Error, FlagOp, ItemResult, MessageFlags, OnAccepted, Outcome, Patch, Result,
    WriteBatch, WriteTarget,
};
use serde::Serialize;

use crate::home::Home;
use crate::registry;
use crate::sessions::Sessions;
use crate::store::{ChangeRecord, JournalItem, MessageRef, MessageState, PendingChange, Store};

/// What one message should get: a flag operation and/or a move.
#[derive(Debug, Clone)]
pub struct Intent {
    pub row: MessageRef,
    pub op: FlagOp,
    pub move_to: Option<String>,
}

/// The result of a change request, as the CLI and MCP report it.
#[derive(Debug, Default, Serialize)]
pub struct ChangeReport {
    /// The journal id; absent for a dry run or when nothing needed changing.
    pub change_id: Option<i64>,
    pub dry_run: bool,
    pub plan: Vec<String>,
    /// Messages that needed a change (in a dry run: would be changed).
    pub planned: u64,
    pub applied: u64,
    pub unchanged: u64,
    pub stale: u64,
    pub failed: u64,
    pub failures: Vec<Failure>,
    /// Protocol commands sent (0 when nothing needed changing).
    pub commands: u64,
    /// Time spent with the provider (connect, preconditions, write, verify).
    pub provider_ms: u64,
    /// Time spent locally: planning, journaling and the index update.
    pub local_ms: u64,
    /// The role of the move target, when it has one (`junk`/`trash` need confirmation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub move_role: Option<String>,
}

/// Messages one write may touch before a person must confirm it (SPEC §6).
pub const DEFAULT_CONFIRM_ABOVE: u64 = 25;

impl ChangeReport {
    /// Why this write needs a person's confirmation before it runs, if it does: it moves mail
    /// to junk or trash, or changes more than `confirm_above` messages (SPEC §6).
    pub fn confirmation_reason(&self, confirm_above: u64) -> Option<String> {
        if self.planned == 0 {
            return None;
        }
        if let Some(role) = self
            .move_role
            .as_deref()
            .filter(|r| matches!(*r, "junk" | "trash"))
        {
            return Some(format!("it moves {} message(s) to {role}", self.planned));
        }
        (self.planned > confirm_above).then(|| {
            format!(
                "it changes {} messages (more than {confirm_above})",
                self.planned
            )
        })
    }
}

#[derive(Debug, Serialize)]
pub struct Failure {
    pub id: i64,
    pub outcome: Outcome,
    pub error_type: String,
    pub error: String,
}

fn has_tag(row: &MessageRef, tag: &str) -> bool {
    row.tags.iter().any(|t| t.eq_ignore_ascii_case(tag))
}

pub(crate) fn state_of(row: &MessageRef) -> MessageState {
    MessageState {
        mailbox: row.mailbox.clone(),
        uidvalidity: row.uidvalidity,
        uid: row.uid,
        read: row.read,
        flagged: row.flagged,
        tags: row.tags.clone(),
    }
}

/// What `patch` still has to do to `row`: only the parts that would change something.
/// `targets` maps an account to the mailbox `patch.move_to` names there.
fn intent_of(row: MessageRef, patch: &Patch, targets: &HashMap<String, String>) -> Intent {
    let op = FlagOp {
        read: patch.read.filter(|r| *r != row.read),
        flagged: patch.flagged.filter(|f| *f != row.flagged),
        add_tags: patch
            .add_tags
            .iter()
            .filter(|t| !has_tag(&row, t))
            .cloned()
            .collect(),
        remove_tags: row
            .tags
            .iter()
            .filter(|t| patch.remove_tags.iter().any(|r| r.eq_ignore_ascii_case(t)))
            .cloned()
            .collect(),
    };
    let move_to = targets
        .get(&row.account)
        .filter(|name| **name != row.mailbox)
        .cloned();
    Intent { row, op, move_to }
}

/// The messages a request names: explicit ids, or every match of a query. Returns the
/// selection as the journal records it, and the write targets.
pub async fn resolve_selection(
    store: &Store,
    ids: &[i64],
    query: Option<&str>,
) -> Result<(serde_json::Value, Vec<MessageRef>)> {
    match (ids.is_empty(), query) {
        (true, Some(q)) => {
            let parsed = crate::search::parse(q, crate::store::now_secs())?;
            let rows = store.search_refs(&parsed).await?;
            tracing::debug!(rows = rows.len(), "selection resolved");
            Ok((serde_json::json!({ "query": q }), rows))
        }
        (false, None) => Ok((
            serde_json::json!({ "ids": ids }),
            store.message_refs(ids).await?,
        )),
        _ => Err(
            Error::validation("give either message ids or a query, not both")
                .with_next_step("find ids with search, or pass only the query"),
        ),
    }
}

/// Refuses tags to add that no message of the selected accounts carries yet: a typo should
/// not silently create a label. A caller that means to create tags skips this check.
pub async fn require_known_tags(store: &Store, rows: &[MessageRef], patch: &Patch) -> Result<()> {
    let accounts: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r.account.as_str()).collect();
    for account in accounts {
        let record = store.account(&account.parse()?).await?;
        for tag in &patch.add_tags {
            if !store.tag_in_use(account, tag).await? && !registry::tag_exists(&record, tag) {
                return Err(Error::not_found(format!(
                    "account {account} has no tag {tag:?} yet"
                ))
                .with_next_step(
                    "check the spelling with list_mailboxes, or pass create_missing_tags: true to create it",
                ));
            }
        }
    }
    Ok(())
}

/// What a patch means for each account it touches, checked before anything is sent: the
/// mailbox its move target names there, by account, and that target's role.
type MoveTargets = (HashMap<String, String>, Option<String>);

/// Checks `patch` against the rules of each of `accounts` (tags against its provider's rules,
/// the move target resolved from a name or a role). Nothing is sent to a server here.
async fn check_request<'a>(
    store: &Store,
    accounts: impl IntoIterator<Item = &'a str>,
    patch: &Patch,
) -> Result<MoveTargets> {
    patch.validate()?;
    if patch.delete.is_some() {
        return Err(Error::validation(
            "a deletion is staged as a manifest, never executed as an update",
        )
        .with_next_step("run: mailbroker stage-delete QUERY"));
    }
    let mut targets = HashMap::new();
    let mut move_role = None;
    for account in accounts {
        let record = store.account(&account.parse()?).await?;
        for tag in &patch.add_tags {
            // Whether the tag is new only matters where the provider limits new tags.
            if registry::validate_tag(&record, tag, true).is_err() {
                let new = !store.tag_in_use(account, tag).await?;
                registry::validate_tag(&record, tag, new)?;
            }
        }
        for tag in &patch.remove_tags {
            registry::validate_tag(&record, tag, false)?;
        }
        if let Some(target) = &patch.move_to {
            let (name, role) = store.resolve_mailbox(account, target).await?;
            move_role = move_role.or(role);
            targets.insert(account.to_string(), name);
        }
    }
    Ok((targets, move_role))
}

/// Checks an update that will run without asking anyone, then starts opening its sessions
/// while the caller reads its targets (see `sessions`). A request refused here reached no
/// server.
pub async fn open_ahead(
    home: &Home,
    store: &Store,
    ids: &[i64],
    query: Option<&str>,
    patch: &Patch,
) -> Result<Sessions> {
    let query = match query {
        Some(q) => Some(crate::search::parse(q, crate::store::now_secs())?),
        None => None,
    };
    let places = store.selection_places(ids, query.as_ref()).await?;
    let accounts: std::collections::BTreeSet<&str> =
        places.iter().map(|(a, _)| a.as_str()).collect();
    check_request(store, accounts, patch).await?;
    Sessions::open_ahead(home, store, &places).await
}

/// Resolves and plans an update with patch semantics, then executes it unless `dry_run`,
/// on `sessions`.
pub async fn update(
    sessions: Sessions,
    store: &Store,
    origin: &str,
    selection: serde_json::Value,
    rows: Vec<MessageRef>,
    patch: &Patch,
    dry_run: bool,
) -> Result<ChangeReport> {
    let started = std::time::Instant::now();
    let accounts: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r.account.as_str()).collect();
    let (targets, move_role) = check_request(store, accounts, patch).await?;
    let intents: Vec<Intent> = rows
        .into_iter()
        .map(|row| intent_of(row, patch, &targets))
        .collect();
    let patch_json = serde_json::to_value(patch).map_err(|e| Error::internal(e.to_string()))?;
    let resolve = started.elapsed();
    tracing::debug!(
        ms = resolve.as_millis() as u64,
        messages = intents.len(),
        "write: intents resolved"
    );
    let mut report = execute(
        sessions, store, origin, selection, patch_json, None, intents, dry_run,
    )
    .await?;
    report.local_ms += resolve.as_millis() as u64;
    report.move_role = move_role;
    Ok(report)
}

type BatchKey = (String, String, u32, FlagOp, Option<String>);

/// Groups intents into provider batches: same account, mailbox, operation and target.
fn batches(intents: &[Intent]) -> BTreeMap<BatchKey, Vec<usize>> {
    let mut out: BTreeMap<BatchKey, Vec<usize>> = BTreeMap::new();
    for (i, it) in intents.iter().enumerate() {
        if it.op.is_empty() && it.move_to.is_none() {
            continue;
        }
        let key = (
            it.row.account.clone(),
            it.row.mailbox.clone(),
            it.row.uidvalidity,
            it.op.clone(),
            it.move_to.clone(),
        );
        out.entry(key).or_default().push(i);
    }
    out
}

/// What a provider needs of an indexed message to write it.
pub(crate) fn target_of(row: &MessageRef) -> WriteTarget {
    WriteTarget {
        uid: row.uid,
        modseq: row.modseq,
        flags: MessageFlags {
            read: row.read,
            flagged: row.flagged,
            tags: row.tags.clone(),
            raw: row.raw.clone(),
        },
    }
}

fn batch_of(key: &BatchKey, intents: &[Intent], members: &[usize]) -> WriteBatch {
    WriteBatch {
        mailbox: key.1.clone(),
        uidvalidity: key.2,
        // One mailbox per batch, so every member carries the same value.
        synced_modseq: members
            .first()
            .map_or(0, |i| intents[*i].row.mailbox_modseq),
        op: key.3.clone(),
        move_to: key.4.clone(),
        targets: members
            .iter()
            .map(|i| target_of(&intents[*i].row))
            .collect(),
    }
}

/// Plans, executes and journals a set of intents (an update or an undo).
#[allow(clippy::too_many_arguments)]
pub async fn execute(
    sessions: Sessions,
    store: &Store,
    origin: &str,
    selection: serde_json::Value,
    patch: serde_json::Value,
    undo_of: Option<i64>,
    intents: Vec<Intent>,
    dry_run: bool,
) -> Result<ChangeReport> {
    let started = std::time::Instant::now();
    // Each batch is built once: for the plan, then to send.
    let groups: Vec<(BatchKey, Vec<usize>, WriteBatch)> = batches(&intents)
        .into_iter()
        .map(|(key, members)| {
            let batch = batch_of(&key, &intents, &members);
            (key, members, batch)
        })
        .collect();
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        batches = groups.len(),
        "write: batched"
    );
    let mut plan = Vec::new();
    for (key, _, batch) in &groups {
        let record = store.account(&key.0.parse()?).await?;
        plan.extend(registry::plan(&record, batch));
    }
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "write: planned");
    let mut report = ChangeReport {
        dry_run,
        plan,
        planned: intents
            .iter()
            .filter(|i| !i.op.is_empty() || i.move_to.is_some())
            .count() as u64,
        ..ChangeReport::default()
    };
    if dry_run {
        report.unchanged = intents.len() as u64 - report.planned;
        report.local_ms = started.elapsed().as_millis() as u64;
        return Ok(report);
    }
    let mut results: Vec<Option<ItemResult>> = vec![None; intents.len()];
    let provider_started = std::time::Instant::now();
    let checkpoint = store.checkpoint_in_background();
    let intents: Arc<[Intent]> = intents.into();
    // Written ahead only for a change of one batch without a move: the open transaction
    // holds the index's write lock while the server works, so other processes' writes wait
    // for one batch at most (well inside their busy timeout); and a move's new UIDs only
    // come from the server.
    let request = (origin.to_string(), selection, patch, undo_of);
    let (go, index_free) = tokio::sync::oneshot::channel();
    let (tell, accepted) = tokio::sync::oneshot::channel();
    let ahead =
        (report.planned > 0 && groups.len() == 1 && groups.iter().all(|g| g.2.move_to.is_none()))
            .then(|| {
                write_ahead(
                    store,
                    request.clone(),
                    &report.plan,
                    &intents,
                    index_free,
                    accepted,
                )
            });
    let on_accepted: Option<OnAccepted> = ahead.is_some().then(|| {
        Box::new(move |states| {
            let _ = tell.send(states);
        }) as OnAccepted
    });
    let free = || {
        let _ = go.send(());
    };
    let commands = run_batches(sessions, &groups, &intents, &mut results, free, on_accepted).await;
    if commands.is_err()
        && let Some(task) = &ahead
    {
        // Dropping the transaction written ahead rolls it back.
        task.abort();
    }
    report.commands = commands?;
    let ahead = match ahead {
        Some(task) => task.await.ok().flatten(),
        None => None,
    };
    // Finished long before the server answers; waited for so the journal's commit below
    // does not race it for the disk.
    let _ = checkpoint.await;
    report.provider_ms = provider_started.elapsed().as_millis() as u64;
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        "write: provider done"
    );
    release(groups);
    report.change_id = journal(store, &mut report, request, &intents, results, ahead).await?;
    release(intents);
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        "write: journal and index committed"
    );
    report.local_ms = (started.elapsed().as_millis() as u64).saturating_sub(report.provider_ms);
    Ok(report)
}

/// Set by a process that ends right after its one command (the CLI, not the MCP server).
static ENDS_AFTER_COMMAND: AtomicBool = AtomicBool::new(false);

/// Declares that this process ends right after its one command. A large change's structures
/// are then left for the system to take back at exit instead of being freed allocation by
/// allocation, as clang does with its own (`-disable-free`): for 10,000 messages, hundreds of
/// thousands of small allocations, whose freeing took about 10 ms of the person's wait after
/// the read-back. Freeing them on another thread instead competed with the index's close
/// for the two cores of a small machine.
pub fn ends_after_command() {
    ENDS_AFTER_COMMAND.store(true, Ordering::Relaxed);
}

/// Frees `value`, or leaves it to the process's exit (see `ends_after_command`).
fn release<T>(value: T) {
    if ENDS_AFTER_COMMAND.load(Ordering::Relaxed) {
        std::mem::forget(value);
    }
}

/// Journals the change from its results, with the index update, in one transaction: the
/// one written ahead when the read-back matches it, else a new one. None when nothing was
/// observed to change (no journal entry then).
async fn journal(
    store: &Store,
    report: &mut ChangeReport,
    request: Request,
    intents: &[Intent],
    mut results: Vec<Option<ItemResult>>,
    ahead: Option<(ChangeRecord, PendingChange)>,
) -> Result<Option<i64>> {
    if let Some((mut expected, pending)) = ahead {
        if take_read_back(&mut expected, &mut results, pending.index_written_ahead()) {
            (report.applied, report.unchanged) =
                (expected.applied as u64, expected.unchanged as u64);
            release(results);
            let id = pending.commit(&expected).await;
            release(expected);
            return id.map(Some);
        }
        tracing::debug!("journal: read-back differs from what was written ahead");
        pending.rollback().await?;
    }
    let items = tally(report, intents, results);
    if items
        .iter()
        .all(|i| i.outcome == "unchanged" && i.observed.is_none())
    {
        return Ok(None);
    }
    let change = change_record(request, report.plan.clone(), report, items);
    tracing::debug!("write: journal built");
    let id = store.record_change(&change).await;
    release(change);
    id.map(Some)
}

/// Whether every message read back exactly as `expected` (the entry written ahead) says:
/// applied without error where it was planned, in place, with the intended flags and tags
/// in their order; untouched where it was not. With `index_ahead` (the index rows were
/// written from the server's answer to the write), each read-back must also equal the
/// observed state written, modseq and raw flags included. If so, each observed state (with
/// the modseq and raw flags only the server knows) moves into `expected`, which is then the
/// entry the read-back would have produced, without building that entry a second time.
fn take_read_back(
    expected: &mut ChangeRecord,
    results: &mut [Option<ItemResult>],
    index_ahead: bool,
) -> bool {
    let as_written = |item: &JournalItem, result: &Option<ItemResult>| match result {
        None => item.outcome == "unchanged" && item.after.is_none(),
        Some(r) => {
            r.outcome == Outcome::Applied
                && item.outcome == "applied"
                && r.error.is_none()
                && r.moved_to.is_none()
                && (!index_ahead || item.observed == r.observed)
                && match (&item.after, &r.observed) {
                    (Some(after), Some((_, flags))) => shows(flags, after),
                    _ => false,
                }
        }
    };
    let matches = expected.items.len() == results.len()
        && expected
            .items
            .iter()
            .zip(results.iter())
            .all(|(i, r)| as_written(i, r));
    if matches {
        for (item, result) in expected.items.iter_mut().zip(results.iter_mut()) {
            if let Some(r) = result.take() {
                item.observed = r.observed;
            }
        }
    }
    matches
}

/// Whether `flags` are what the journal's after-state says, tags in their order.
fn shows(flags: &MessageFlags, after: &MessageState) -> bool {
    (flags.read, flags.flagged, &flags.tags) == (after.read, after.flagged, &after.tags)
}

/// A change's request as the journal records it: origin, selection, patch, and the change
/// it undoes.
type Request = (String, serde_json::Value, serde_json::Value, Option<i64>);

/// Builds the journal entry as it will read if every message takes the change, on another
/// thread, and writes it once `index_free` fires (see `run_batches`), while the server
/// works; it commits only if the read-back says exactly that (`take_read_back`). None when
/// nothing was written ahead (no connection, or a database error): the change is then
/// journaled from the read-back alone.
///
/// When the provider tells what the server accepted (`accepted`) and that is every planned
/// message in its intended state, the index rows are written from it too, while the
/// read-back runs; the commit then requires the read-back to equal them exactly.
fn write_ahead(
    store: &Store,
    request: Request,
    plan: &[String],
    intents: &Arc<[Intent]>,
    index_free: tokio::sync::oneshot::Receiver<()>,
    accepted: tokio::sync::oneshot::Receiver<Accepted>,
) -> tokio::task::JoinHandle<Option<(ChangeRecord, PendingChange)>> {
    let (store, plan, intents) = (store.clone(), plan.to_vec(), intents.clone());
    tokio::spawn(async move {
        // Built while the accounts connect; written once connecting leaves the index alone.
        let mut expected = expected_change(request, plan, &intents);
        index_free.await.ok()?;
        let mut pending = store.begin_change(&expected).await.ok()?;
        tracing::debug!("journal: written ahead");
        // The sender is dropped unused when the provider cannot tell.
        if let Ok(states) = accepted.await
            && observe_accepted(&mut expected, states)
        {
            pending.update_index(&expected).await.ok()?;
        }
        Some((expected, pending))
    })
}

/// Sets each planned item's observed state to what the server accepted for it, if the
/// server accepted every planned message in exactly its intended state; else changes
/// nothing and says so (the read-back will not match either).
fn observe_accepted(expected: &mut ChangeRecord, mut states: Accepted) -> bool {
    states.sort_unstable_by_key(|(uid, _, _)| *uid);
    let mut found = Vec::with_capacity(states.len());
    for (n, item) in expected.items.iter().enumerate() {
        let Some(after) = &item.after else { continue };
        let Ok(i) = states.binary_search_by_key(&item.before.uid, |(uid, _, _)| *uid) else {
            return false;
        };
        if !shows(&states[i].2, after) {
            return false;
        }
        found.push((n, i));
    }
    for (n, i) in found {
        let (_, modseq, flags) = &mut states[i];
        expected.items[n].observed = Some((*modseq, std::mem::take(flags)));
    }
    true
}

/// The change as it will be journaled if every planned message shows exactly its intended
/// flags after the write (server-side details such as modseq are not part of the entry).
fn expected_change(request: Request, plan: Vec<String>, intents: &[Intent]) -> ChangeRecord {
    let results = intents
        .iter()
        .map(|i| {
            (!i.op.is_empty()).then(|| ItemResult {
                observed: Some((0, intended_flags(&i.row, &i.op))),
                ..ItemResult::new(i.row.uid, Outcome::Applied)
            })
        })
        .collect();
    let mut counts = ChangeReport::default();
    let items = tally(&mut counts, intents, results);
    change_record(request, plan, &counts, items)
}

/// A change as the journal records it: the request, its plan and counts, a line a message.
fn change_record(
    request: Request,
    plan: Vec<String>,
    counts: &ChangeReport,
    items: Vec<JournalItem>,
) -> ChangeRecord {
    let (origin, selection, patch, undo_of) = request;
    ChangeRecord {
        id: 0,
        created_at: 0,
        origin,
        selection,
        patch,
        plan,
        undo_of,
        applied: counts.applied as i64,
        unchanged: counts.unchanged as i64,
        stale: counts.stale as i64,
        failed: counts.failed as i64,
        items,
    }
}

/// `row`'s flags with `op` applied (raw values are the server's to report).
fn intended_flags(row: &MessageRef, op: &FlagOp) -> MessageFlags {
    MessageFlags {
        read: op.read.unwrap_or(row.read),
        flagged: op.flagged.unwrap_or(row.flagged),
        tags: op.tags_after(&row.tags),
        raw: Vec::new(),
    }
}

/// Counts each message's outcome into the report and turns it into its journal line.
fn tally(
    report: &mut ChangeReport,
    intents: &[Intent],
    results: Vec<Option<ItemResult>>,
) -> Vec<JournalItem> {
    let mut items = Vec::with_capacity(intents.len());
    for (intent, result) in intents.iter().zip(results) {
        let result = result.unwrap_or_else(|| ItemResult::new(intent.row.uid, Outcome::Unchanged));
        match result.outcome {
            Outcome::Applied => report.applied += 1,
            Outcome::Unchanged => report.unchanged += 1,
            Outcome::Stale => report.stale += 1,
            Outcome::Failed | Outcome::Unknown => report.failed += 1,
        }
        if let Some(e) = &result.error {
            report.failures.push(Failure {
                id: intent.row.id,
                outcome: result.outcome,
                error_type: e.error_type().to_string(),
                error: e.message().to_string(),
            });
        }
        items.push(journal_item(intent, result));
    }
    items
}

fn journal_item(intent: &Intent, result: ItemResult) -> JournalItem {
    let outcome = serde_json::to_value(result.outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let before = state_of(&intent.row);
    let after = result.observed.as_ref().map(|(_, flags)| {
        let (mailbox, uidvalidity, uid) = result.moved_to.clone().unwrap_or((
            before.mailbox.clone(),
            before.uidvalidity,
            before.uid,
        ));
        MessageState {
            mailbox,
            uidvalidity,
            uid,
            read: flags.read,
            flagged: flags.flagged,
            tags: flags.tags.clone(),
        }
    });
    JournalItem {
        message_id: intent.row.id,
        account: intent.row.account.clone(),
        outcome,
        error_type: result.error.as_ref().map(|e| e.error_type().to_string()),
        error: result.error.as_ref().map(|e| e.message().to_string()),
        before,
        after,
        observed: result.observed,
    }
}

/// Runs every batch, account by account, each account under its lock. A batch that fails
/// marks its messages (unknown outcome when the connection dropped mid-write) and ends that
/// account's work: nothing more is sent on a connection whose state is unknown.
///
/// Every account is locked and connected before the first batch runs, so an account that
/// cannot be reached fails the change before anything is sent to any account. `index_free`
/// is called once connecting no longer writes to the index (a refreshed OAuth token): a
/// journal entry written ahead holds the index's write lock. With every session opened
/// ahead that is at once, so the entry is written during the login and select round trips.
async fn run_batches(
    mut sessions: Sessions,
    groups: &[(BatchKey, Vec<usize>, WriteBatch)],
    intents: &[Intent],
    results: &mut [Option<ItemResult>],
    index_free: impl FnOnce(),
    mut accepted: Option<OnAccepted>,
) -> Result<u64> {
    let mut commands = 0;
    let mut by_account: BTreeMap<&str, Vec<(&Vec<usize>, &WriteBatch)>> = BTreeMap::new();
    for (key, members, batch) in groups {
        by_account
            .entry(key.0.as_str())
            .or_default()
            .push((members, batch));
    }
    let mut index_free = Some(index_free);
    if by_account.keys().all(|a| sessions.opened_ahead(a))
        && let Some(free) = index_free.take()
    {
        free();
    }
    let mut open = Vec::with_capacity(by_account.len());
    for (account, batches) in by_account {
        open.push((sessions.take(account).await?, batches));
    }
    commands += sessions.close_unused().await;
    if let Some(free) = index_free.take() {
        free();
    }
    for (mut session, batches) in open {
        let provider = &mut session.provider;
        let mut broken: Option<Error> = None;
        for (members, batch) in batches {
            let outcome = match &broken {
                Some(e) => Err(Error::provider_unavailable(format!(
                    "not attempted after an earlier failure: {}",
                    e.message()
                ))),
                None => provider.apply(batch, accepted.take()).await,
            };
            match outcome {
                Ok(items) => {
                    let by_uid: HashMap<mailbroker_core::Uid, usize> =
                        members.iter().map(|i| (intents[*i].row.uid, *i)).collect();
                    for item in items {
                        if let Some(i) = by_uid.get(&item.uid) {
                            results[*i] = Some(item);
                        }
                    }
                }
                Err(e) => {
                    let outcome = if e.error_type() == "outcome_unknown" {
                        Outcome::Unknown
                    } else {
                        Outcome::Failed
                    };
                    for i in members {
                        results[*i] = Some(
                            ItemResult::new(intents[*i].row.uid, outcome).with_error(e.clone()),
                        );
                    }
                    broken.get_or_insert(e);
                }
            }
        }
        provider.close().await;
        commands += provider.commands_sent();
    }
    Ok(commands)
}
