//! The write pipeline (SPEC §3), shared by every surface: resolve → plan → (dry run) →
//! execute per account under its lock → verify (inside the adapter) → journal + index update.
//!
//! Architecture Invariant: nothing is sent before the change's intent is journaled, and the
//! index only ever commits what the server read back, in the same transaction as the
//! journal entry that explains it.

use std::collections::{BTreeMap, HashMap};

use mailbroker_core::{
    Error, FlagOp, ItemResult, MessageFlags, Outcome, Patch, Result, WriteBatch, WriteTarget,
};
use serde::Serialize;

use crate::home::Home;
use crate::registry;
use crate::sessions::Sessions;
use crate::store::{ChangeRecord, DONE, EXECUTING, JournalItem, MessageRef, MessageState, Store};

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
    /// The messages the change applied to, in order.
    #[serde(skip)]
    pub applied_ids: Vec<i64>,
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
    /// Why this write needs a person's confirmation before it runs, if it does ("moves 3
    /// message(s) to trash", to follow "it" or "this write"): it moves mail
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
            return Some(format!("moves {} message(s) to {role}", self.planned));
        }
        (self.planned > confirm_above).then(|| {
            format!(
                "changes {} messages (more than {confirm_above})",
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
            let parsed = crate::search::parse_selection(q, crate::store::now_secs())?;
            let rows = store.search_refs(&parsed).await?;
            tracing::debug!(rows = rows.len(), "selection resolved");
            Ok((serde_json::json!({ "query": q }), rows))
        }
        (false, None) => {
            // Once, here: a message named twice is still one message to change.
            let mut seen = std::collections::HashSet::new();
            let ids: Vec<i64> = ids.iter().copied().filter(|id| seen.insert(*id)).collect();
            let rows = store.message_refs(&ids).await?;
            Ok((serde_json::json!({ "ids": ids }), rows))
        }
        _ => Err(
            Error::validation("give either message ids or a query, not both")
                .with_next_step("find ids with search, or pass only the query"),
        ),
    }
}

/// Refuses tags to add that the selected accounts do not know (no message carries them, no
/// earlier change added them, the provider lists no such label): a typo should not silently
/// create a label. A caller that means to create tags skips this check.
pub async fn require_known_tags(store: &Store, rows: &[MessageRef], patch: &Patch) -> Result<()> {
    let accounts: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r.account.as_str()).collect();
    for account in accounts {
        let record = store.account(&account.parse()?).await?;
        for tag in &patch.add_tags {
            if !store.tag_known(account, tag).await? && !registry::tag_exists(&record, tag) {
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
                let new = !store.tag_known(account, tag).await?;
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
        Some(q) => Some(crate::search::parse_selection(q, crate::store::now_secs())?),
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
        if !it.changes_something() {
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
        message_id: row.message_id.clone(),
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
///
/// Architecture Invariant: nothing is sent to a server until the change's intent (its row
/// and an `unknown` item per message to change) is committed to the journal. Its results
/// replace the intent in one transaction with the index update. If that fails (a full
/// disk), the intent stays and says `outcome_unknown` for what was sent, and the next
/// request re-reads the server before it writes, as after a lost answer.
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
    let mut plan = Vec::new();
    for (key, _, batch) in &groups {
        let record = store.account(&key.0.parse()?).await?;
        plan.extend(registry::plan(&record, batch));
    }
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "write: planned");
    let mut report = ChangeReport {
        dry_run,
        plan,
        planned: intents.iter().filter(|i| i.changes_something()).count() as u64,
        ..ChangeReport::default()
    };
    if dry_run || report.planned == 0 {
        report.unchanged = intents.len() as u64 - report.planned;
        // A session opened ahead for a request that needs nothing goes unused.
        let mut sessions = sessions;
        report.commands = sessions.close_unused().await;
        report.local_ms = started.elapsed().as_millis() as u64;
        return Ok(report);
    }
    let request = (origin.to_string(), selection, patch, undo_of);
    // Journaled while the accounts connect; awaited before the first write is sent.
    let intent = intent_record(request.clone(), &report.plan, &intents);
    let recording = {
        let store = store.clone();
        tokio::spawn(async move { store.record_intent(&intent).await })
    };
    let mut results: Vec<Option<ItemResult>> = vec![None; intents.len()];
    let provider_started = std::time::Instant::now();
    let ran = run_batches(sessions, store, &groups, &intents, &mut results, recording).await;
    let (commands, change_id) = ran?;
    report.commands = commands;
    report.provider_ms = provider_started.elapsed().as_millis() as u64;
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        "write: provider done"
    );
    let items = tally(&mut report, &intents, results);
    let intended = as_intended(&intents, &items);
    let change = change_record(request, report.plan.clone(), &report, items, DONE);
    let recorded = store.finish_change(change_id, &change, intended).await;
    recorded.map_err(|e| unrecorded(e, change_id))?;
    report.change_id = Some(change_id);
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        "write: journal and index committed"
    );
    report.local_ms = (started.elapsed().as_millis() as u64).saturating_sub(report.provider_ms);
    Ok(report)
}

impl Intent {
    /// Whether anything is to be sent for this message.
    fn changes_something(&self) -> bool {
        !self.op.is_empty() || self.move_to.is_some()
    }
}

/// What the journal says of a message whose write was sent (or about to be) and whose
/// result is not recorded.
const UNRECORDED: &str =
    "the result of this write was not recorded; the next request re-reads the server first";

/// The journal entry of a change before anything is sent: every message to change is
/// `unknown` until its result replaces it, its `after` the state the change asks for where
/// that is known before the server answers (a flag change; a move's new UID is not).
fn intent_record(request: Request, plan: &[String], intents: &[Intent]) -> ChangeRecord {
    let items: Vec<JournalItem> = intents
        .iter()
        .filter(|i| i.changes_something())
        .map(|i| {
            let unknown = ItemResult::new(i.row.uid, Outcome::Unknown)
                .with_error(Error::outcome_unknown(UNRECORDED));
            JournalItem {
                after: intended_state(i),
                ..journal_item(i, unknown)
            }
        })
        .collect();
    let counts = ChangeReport {
        failed: items.len() as u64,
        ..ChangeReport::default()
    };
    change_record(request, plan.to_vec(), &counts, items, EXECUTING)
}

/// The state a flag change asks for (tags in the order the read-back reports them when the
/// new ones sort last); None for a move, whose new UID only the server gives.
fn intended_state(intent: &Intent) -> Option<MessageState> {
    if intent.move_to.is_some() || intent.op.is_empty() {
        return None;
    }
    let row = &intent.row;
    Some(MessageState {
        read: intent.op.read.unwrap_or(row.read),
        flagged: intent.op.flagged.unwrap_or(row.flagged),
        tags: intent.op.tags_after(&row.tags),
        ..state_of(row)
    })
}

/// Whether every message the change planned read back applied, exactly as its intent says
/// (`intended_state`): the journal's items then need only their outcome set.
fn as_intended(intents: &[Intent], items: &[JournalItem]) -> bool {
    intents.iter().zip(items).all(|(intent, item)| {
        !intent.changes_something()
            || (item.outcome == "applied"
                && item.error_type.is_none()
                && item.after.is_some()
                && item.after == intended_state(intent))
    })
}

/// A change could not be journaled before anything was sent.
fn not_sent(e: Error) -> Error {
    e.context("nothing was sent: this change could not be journaled")
}

/// A change was sent but its results could not be recorded: its intent stays.
fn unrecorded(e: Error, change_id: i64) -> Error {
    let step = e.next_step().unwrap_or("fix the index").to_string();
    e.context(format!(
        "the change was sent, but its results could not be recorded (change {change_id} \
         says outcome_unknown)"
    ))
    .with_next_step(format!(
        "{step}; then repeat the request: it re-reads the server and sends nothing twice"
    ))
}

/// A change's request as the journal records it: origin, selection, patch, and the change
/// it undoes.
type Request = (String, serde_json::Value, serde_json::Value, Option<i64>);

/// A change as the journal records it: the request, its plan and counts, a line a message.
fn change_record(
    request: Request,
    plan: Vec<String>,
    counts: &ChangeReport,
    items: Vec<JournalItem>,
    status: &str,
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
        undone_by: None,
        applied: counts.applied as i64,
        unchanged: counts.unchanged as i64,
        stale: counts.stale as i64,
        failed: counts.failed as i64,
        status: status.to_string(),
        items,
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
            Outcome::Applied => {
                report.applied += 1;
                report.applied_ids.push(intent.row.id);
            }
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
/// Every account is locked and connected, and the change's intent journaled (`intent`),
/// before the first batch is sent. An account that cannot be reached, or an intent that
/// cannot be journaled, fails the change with nothing sent to any account. Returns the
/// commands sent and the change's id.
async fn run_batches(
    mut sessions: Sessions,
    store: &Store,
    groups: &[(BatchKey, Vec<usize>, WriteBatch)],
    intents: &[Intent],
    results: &mut [Option<ItemResult>],
    intent: tokio::task::JoinHandle<Result<i64>>,
) -> Result<(u64, i64)> {
    let mut by_account: BTreeMap<&str, Vec<(&Vec<usize>, &WriteBatch)>> = BTreeMap::new();
    for (key, members, batch) in groups {
        by_account
            .entry(key.0.as_str())
            .or_default()
            .push((members, batch));
    }
    let mut open = Vec::with_capacity(by_account.len());
    let mut unreachable = None;
    for (account, batches) in by_account {
        match sessions.take(account).await {
            Ok(session) => open.push((session, batches)),
            Err(e) => {
                unreachable = Some(e);
                break;
            }
        }
    }
    let mut commands = sessions.close_unused().await;
    let recorded = match intent.await {
        Ok(recorded) => recorded,
        Err(e) => Err(Error::internal(format!("journaling the change: {e}"))),
    };
    let change_id = match (unreachable, recorded) {
        (None, Ok(id)) => id,
        (unreachable, recorded) => {
            for (mut session, _) in open {
                session.provider.close().await;
            }
            return Err(match (unreachable, recorded) {
                (Some(e), Ok(id)) => {
                    // Nothing was sent: the intent says nothing true.
                    store.discard_change(id).await?;
                    e
                }
                (Some(e), Err(_)) => e,
                (None, Err(e)) => not_sent(e),
                (None, Ok(_)) => Error::internal("unreachable: the change was journaled"),
            });
        }
    };
    for (mut session, batches) in open {
        let provider = &mut session.provider;
        let mut broken: Option<Error> = None;
        for (members, batch) in batches {
            let outcome = match &broken {
                Some(e) => Err(Error::provider_unavailable(format!(
                    "not attempted after an earlier failure: {}",
                    e.message()
                ))),
                None => provider.apply(batch).await,
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
                    let outcome = if e.is_unknown_outcome() {
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
    Ok((commands, change_id))
}
