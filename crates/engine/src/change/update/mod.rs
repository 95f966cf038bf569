//! The write pipeline (SPEC §3), for updates and undos: resolve → plan → (dry run) →
//! execute per account under its lock → verify (inside the adapter) → journal + index update.
//!
//! Architecture Invariant: nothing is sent before the change's intent is journaled, and the
//! index only ever commits what the server read back, in the same transaction as the
//! journal entry that explains it.

use crate::registry::AccountAdapter;
use std::collections::{BTreeMap, HashMap};

use mailbroker_core::{
    AccountId, Error, FlagOp, ItemResult, MailboxCursor, MessageFlags, Operation, Outcome, Patch,
    Result, Role, Tally, WriteBatch, WriteTarget,
};
use serde::Serialize;

use crate::sessions::Sessions;
use mailbroker_store::{
    Asked, ChangeRecord, ChangeStatus, JournalItem, MessageRef, MessageState, Store,
};

mod journal;
mod plan;
mod request;
mod run;

pub(crate) use journal::Recorded;
use journal::*;
pub(crate) use plan::target_of;
use plan::*;
pub(crate) use request::plan;
pub(crate) use request::{CheckedRequest, ResolvedRequest};
use run::*;

/// What one message should get: a flag operation and/or a move.
#[derive(Debug, Clone)]
pub struct Intent {
    pub row: MessageRef,
    pub op: FlagOp,
    pub move_to: Option<String>,
}

/// The result of a change request, as the CLI and MCP report it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChangeReport {
    /// The journal id; absent for a dry run or when nothing needed changing.
    pub change_id: Option<i64>,
    pub dry_run: bool,
    pub plan: Vec<String>,
    /// Messages that needed a change (in a dry run: would be changed).
    pub planned: u64,
    /// How each message ended. `failed`: refused, not sent, or read back other than asked
    /// (`verification_failed`); `unknown`: sent and never answered, so it may have changed
    /// (a rerun re-reads it before sending anything again).
    #[serde(flatten)]
    pub tally: Tally,
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
    pub move_role: Option<Role>,
    /// Messages a route other than their account's own carried (a fallback), by route.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub routes: BTreeMap<String, Vec<i64>>,
    /// Why an account's messages could not be written when the person must act first (a
    /// login, a wider grant): the first such error, with its next step, at the top of the
    /// report as a command's own error would be.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<Blocked>,
    /// The draft a draft change saved (or, in a dry run, would save).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft: Option<super::draft::SavedDraft>,
}

/// The SPEC §10 fields of the error that stopped an account's part of a change.
#[derive(Debug, Clone, Serialize)]
pub struct Blocked {
    pub error: String,
    pub error_type: &'static str,
    pub next_step: Option<String>,
    /// The CLI's exit code for it.
    #[serde(skip)]
    pub exit_code: i32,
}

impl ChangeReport {
    /// SPEC §6's one meaning, on every surface: true only when every message is applied or
    /// unchanged (and no account was stopped before its messages were written).
    pub fn success(&self) -> bool {
        self.blocked.is_none() && self.tally.settled()
    }

    /// When not every message is applied or unchanged: the SPEC §10 fields that say so. The
    /// error that stopped an account, else the worst of its messages' outcomes (unknown, then
    /// failed, then stale); each message's own is in `failures`.
    pub fn shortfall(&self) -> Option<Blocked> {
        if let Some(b) = &self.blocked {
            return Some(b.clone());
        }
        let counts: Vec<String> = self
            .tally
            .counts()
            .map(|(o, n)| format!("{} {n}", o.as_str()))
            .collect();
        let counts = format!("not every message was changed: {}", counts.join(", "));
        let t = &self.tally;
        let (error_type, next_step) = if t.get(Outcome::Unknown) > 0 {
            (
                "outcome_unknown",
                "run the same change again: the messages without an answer are read back first, \
                 never sent blindly",
            )
        } else if t.get(Outcome::Failed) > 0 {
            // The first failed message's own type (a refusal, a read-back that disagreed).
            let first = self
                .failures
                .iter()
                .filter(|f| f.outcome == Outcome::Failed)
                .find_map(|f| Error::TYPES.iter().find(|t| **t == f.error_type))
                .copied();
            (
                first.unwrap_or("provider_write_failed"),
                "see each message's failure; run the same change again for the ones that failed",
            )
        } else if t.get(Outcome::Stale) > 0 {
            (
                "stale_state",
                "run: mailbroker sync, then the change again (the stale messages changed on the \
                 server since they were indexed, and were left alone)",
            )
        } else {
            return None;
        };
        Some(Blocked {
            error: counts,
            error_type,
            next_step: Some(next_step.to_string()),
            exit_code: 5,
        })
    }
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
        if let Some(role) = self.move_role.filter(|r| r.needs_confirmation()) {
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

/// A message that was not applied or unchanged: its outcome and its error's SPEC §10 fields.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub id: i64,
    pub outcome: Outcome,
    pub error_type: String,
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_step: Option<String>,
}

impl Failure {
    pub fn of(id: i64, outcome: Outcome, e: &Error) -> Failure {
        Failure {
            id,
            outcome,
            error_type: e.error_type().to_string(),
            error: e.message().to_string(),
            next_step: e.next_step().map(str::to_string),
        }
    }
}

impl ChangeReport {
    /// Counts message `id`'s result: its outcome, the route that carried it, its failure,
    /// and (the first time one does) the error that stops its account.
    pub(crate) fn tell(&mut self, id: i64, account: &AccountId, result: &ItemResult) {
        let outcome = result.outcome;
        self.tally.add(outcome);
        if outcome == Outcome::Applied {
            self.applied_ids.push(id);
        }
        if let Some(route) = &result.route {
            self.routes.entry(route.clone()).or_default().push(id);
        }
        if let Some(e) = &result.error {
            if e.needs_account_fix() && self.blocked.is_none() {
                self.blocked = Some(Blocked::of(e, account));
            }
            self.failures.push(Failure::of(id, outcome, e));
        }
    }
}

impl Blocked {
    /// The report's top-level error for `e`, which needs the person to fix `account`.
    fn of(e: &Error, account: &AccountId) -> Blocked {
        let step = e.next_step().map_or_else(
            || format!("run: mailbroker account login {account}"),
            str::to_string,
        );
        Blocked {
            error: format!("account {account}: {}", e.message()),
            error_type: e.error_type(),
            next_step: Some(step),
            exit_code: e.exit_code(),
        }
    }
}

pub(crate) fn state_of(row: &MessageRef) -> MessageState {
    MessageState {
        mailbox: row.mailbox.clone(),
        remote_id: row.remote_id.clone(),
        read: row.read,
        flagged: row.flagged,
        tags: row.tags.clone(),
    }
}

/// Refuses tags to add that the selected accounts do not know (no message carries them, no
/// earlier change added them, the provider lists no such label): a typo should not silently
/// create a label. A caller that means to create tags skips this check.
async fn require_known_tags(store: &Store, records: &Records, patch: &Patch) -> Result<()> {
    for (account, Known { record, .. }) in records {
        let adapter = record.adapter()?;
        for tag in &patch.add_tags {
            if !store.tag_known(account, tag).await? && !adapter.tag_exists(&record.info(), tag) {
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
type MoveTargets = (HashMap<AccountId, String>, Option<Role>);

/// What a request knows of an account it touches, read once: its row and its mailboxes.
pub(crate) struct Known {
    pub record: mailbroker_store::AccountRecord,
    pub mailboxes: mailbroker_store::Mailboxes,
}

/// The accounts a request touches, each read once, by account id.
pub(crate) type Records = BTreeMap<AccountId, Known>;

/// Reads the rows and mailboxes of `accounts`, once each.
pub(crate) async fn records_of(store: &Store, accounts: Vec<AccountId>) -> Result<Records> {
    let mut records = Records::new();
    for account in accounts {
        if let std::collections::btree_map::Entry::Vacant(slot) = records.entry(account) {
            let record = store.account(slot.key()).await?;
            let mailboxes = store.mailboxes_of(slot.key()).await?;
            slot.insert(Known { record, mailboxes });
        }
    }
    Ok(records)
}

/// The account rows of `records`, for the sessions that log in to them.
pub(crate) fn rows_of(records: &Records) -> BTreeMap<AccountId, mailbroker_store::AccountRecord> {
    records
        .iter()
        .map(|(account, known)| (account.clone(), known.record.clone()))
        .collect()
}

/// Checks `patch` against the rules of each account of `records` (tags against its
/// provider's rules, the move target resolved from a name or a role). Nothing is sent to a
/// server here.
async fn check_request(store: &Store, records: &Records, patch: &Patch) -> Result<MoveTargets> {
    patch.validate()?;
    if patch.delete.is_some() {
        return Err(Error::validation(
            "a deletion is staged as a manifest, never executed as an update",
        )
        .with_next_step("run: mailbroker stage-delete QUERY"));
    }
    let mut targets = HashMap::new();
    let mut move_role = None;
    for (account, Known { record, mailboxes }) in records {
        let (adapter, info) = (record.adapter()?, record.info());
        if patch.read.is_some() || patch.flagged.is_some() {
            adapter.check(&info, Operation::Flags)?;
        }
        if !patch.add_tags.is_empty() || !patch.remove_tags.is_empty() {
            adapter.check(&info, Operation::Tags)?;
        }
        for tag in &patch.add_tags {
            // Whether the tag is new only matters where the provider limits new tags.
            if adapter.validate_tag(&info, tag, true).is_err() {
                let new = !store.tag_known(account, tag).await?;
                adapter.validate_tag(&info, tag, new)?;
            }
        }
        for tag in &patch.remove_tags {
            adapter.validate_tag(&info, tag, false)?;
        }
        if let Some(target) = &patch.move_to {
            adapter.check(&info, Operation::Move)?;
            let (name, role) = mailboxes.resolve(target)?;
            move_role = move_role.or(role);
            targets.insert(account.clone(), name);
        }
    }
    Ok((targets, move_role))
}

/// Starts opening the sessions of a checked update that will run without asking anyone,
/// while the caller reads its targets (see `sessions`). A request refused by its check
/// reached no server.
pub(super) async fn open_ahead(store: &Store, request: &CheckedRequest) -> Result<Sessions> {
    Sessions::open_ahead(store, request.places(), &rows_of(request.records())).await
}

/// Executes and journals the batches of a resolved change (an update or an undo).
///
/// Architecture Invariant: nothing is sent to a server until the change's intent (its row
/// and an `unknown` item per message to change) is committed to the journal. Each batch's
/// results replace its part of the intent in one transaction with the index update, as the
/// batch comes back (`store::batches`). If that fails (a full disk), nothing more is sent,
/// the intent stays and says `outcome_unknown` for what was sent, and the next request
/// re-reads the server before it writes, as after a lost answer.
async fn execute(
    sessions: Sessions,
    store: &Store,
    request: (String, Recorded),
    plan: &[String],
    (intents, groups): (&[Intent], &[Group]),
    follow: &crate::change::Follow,
) -> Result<ChangeReport> {
    let started = std::time::Instant::now();
    let mut report = ChangeReport {
        plan: plan.to_vec(),
        planned: intents.iter().filter(|i| i.changes_something()).count() as u64,
        ..ChangeReport::default()
    };
    if report.planned == 0 {
        report.tally.set(Outcome::Unchanged, intents.len() as u64);
        // A session opened ahead for a request that needs nothing goes unused.
        let mut sessions = sessions;
        report.commands = sessions.close_unused().await;
        report.local_ms = started.elapsed().as_millis() as u64;
        return Ok(report);
    }
    // Journaled while the accounts connect; awaited before the first write is sent.
    let intent = intent_record(request.clone(), &report.plan, intents);
    let recording = {
        let store = store.clone();
        tokio::spawn(async move { store.record_intent(&intent).await })
    };
    let mut results: Vec<Option<ItemResult>> = vec![None; intents.len()];
    let provider_started = std::time::Instant::now();
    follow.plan(report.planned);
    let ran = run_batches(
        sessions,
        store,
        (groups, intents),
        &mut results,
        recording,
        follow,
    )
    .await;
    let (commands, change_id) = ran?;
    report.commands = commands;
    report.provider_ms = provider_started.elapsed().as_millis() as u64;
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        "write: provider done"
    );
    tally(&mut report, intents, &results);
    // The messages no batch carried needed nothing: their lines close the change.
    let rest: Vec<JournalItem> = intents
        .iter()
        .zip(&results)
        .filter(|(intent, _)| !intent.changes_something())
        .map(|(intent, result)| {
            journal_item(intent, result.clone().unwrap_or_else(|| unchanged(intent)))
        })
        .collect();
    let closed = store.close_change(change_id, &rest).await;
    closed.map_err(|e| unrecorded(e, change_id))?;
    report.change_id = Some(change_id);
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        "write: journal and index committed"
    );
    report.local_ms = (started.elapsed().as_millis() as u64).saturating_sub(report.provider_ms);
    Ok(report)
}
