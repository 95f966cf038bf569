//! What the journal records of a change: its intent before anything is sent, and its
//! results after the read-back.

use super::*;

/// The journal entry of a change before anything is sent: every message to change is
/// `unknown` until its result replaces it, its `after` the state the change asks for where
/// that is known before the server answers (a flag change; a move's new UID is not).
pub(super) fn intent_record(
    request: (String, Recorded),
    plan: &[String],
    intents: &[Intent],
) -> ChangeRecord {
    let items: Vec<JournalItem> = intents
        .iter()
        .filter(|i| i.changes_something())
        .map(|i| {
            let unknown = ItemResult::new(i.row.remote_id.clone(), Outcome::Unknown);
            // Its text is the store's to say on reading (`store::UNRECORDED`): 10,000 copies
            // of it made the intent's commit, which the first write waits for, a third slower.
            JournalItem {
                error_type: Some(Error::outcome_unknown("").error_type().to_string()),
                ..journal_item(i, unknown)
            }
        })
        .collect();
    let mut counts = ChangeReport::default();
    counts.tally.add_n(Outcome::Unknown, items.len() as u64);
    change_record(
        request,
        plan.to_vec(),
        &counts,
        items,
        ChangeStatus::Executing,
    )
}

/// The state a change asks for, for its `unknown` items (which a later read-back settles,
/// `store::settle`): as `intended_state`, and for a move the target mailbox, whose new id
/// only the server gives (left empty).
fn asked_state(intent: &Intent) -> MessageState {
    let row = &intent.row;
    let mut state = MessageState {
        read: intent.op.read.unwrap_or(row.read),
        flagged: intent.op.flagged.unwrap_or(row.flagged),
        tags: intent.op.tags_after(&row.tags),
        ..state_of(row)
    };
    if let Some(target) = &intent.move_to {
        state.mailbox = target.clone();
        state.remote_id = mailbroker_core::RemoteId::new("");
    }
    state
}

/// The state a flag change asks for (tags in the order the read-back reports them when the
/// new ones sort last); None for a move, whose new UID only the server gives.
pub(super) fn intended_state(intent: &Intent) -> Option<MessageState> {
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

/// Whether every message of a batch read back applied, exactly as its intent says
/// (`intended_state`), by the account's own route: its journal lines then need only their
/// outcome set.
pub(super) fn as_intended<'a>(
    batch: impl IntoIterator<Item = (&'a Intent, &'a JournalItem)>,
) -> bool {
    batch.into_iter().all(|(intent, item)| {
        !intent.changes_something()
            || (item.outcome == Outcome::Applied
                && item.error_type.is_none()
                && item.after.is_some()
                && item.after == intended_state(intent)
                && item.route.is_none())
    })
}

/// A change could not be journaled before anything was sent.
pub(super) fn not_sent(e: Error) -> Error {
    e.context("nothing was sent: this change could not be journaled")
}

/// A change was sent but its results could not be recorded (the index went away, its
/// disk filled, the account's lease was lost): its intent stays, every message it did not
/// record says `unknown`, and so does the error, with the change's id and what to fix.
pub(super) fn unrecorded(e: Error, change_id: i64) -> Error {
    let step = e.next_step().unwrap_or("fix the index").to_string();
    Error::outcome_unknown(format!(
        "change {change_id} was sent, but its results could not be recorded ({}): its \
         messages may have changed, and say unknown",
        e.message()
    ))
    .with_next_step(format!(
        "{step}; then repeat the request: it re-reads the server and sends nothing twice"
    ))
}

/// A change's request as the journal records it: how its messages were chosen, what was
/// asked of them, and the change it undoes.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub selection: mailbroker_store::Chosen,
    pub asked: Asked,
    pub undo_of: Option<i64>,
}

/// A change as the journal records it: the request, its plan and counts, a line a message.
pub(super) fn change_record(
    (origin, recorded): (String, Recorded),
    plan: Vec<String>,
    counts: &ChangeReport,
    items: Vec<JournalItem>,
    status: ChangeStatus,
) -> ChangeRecord {
    ChangeRecord {
        id: 0,
        created_at: 0,
        origin,
        selection: recorded.selection,
        patch: recorded.asked,
        plan,
        undo_of: recorded.undo_of,
        undone_by: None,
        tally: counts.tally,
        status,
        items,
    }
}

/// The result of a message no batch reported: it needed nothing, or its provider left it
/// out.
pub(super) fn unchanged(intent: &Intent) -> ItemResult {
    ItemResult::new(intent.row.remote_id.clone(), Outcome::Unchanged)
}

/// What the change's report needs of a result (`tally`): its outcome, error and route.
pub(super) fn reported(result: &ItemResult) -> ItemResult {
    ItemResult {
        error: result.error.clone(),
        route: result.route.clone(),
        ..ItemResult::new(result.id.clone(), result.outcome)
    }
}

/// Counts each message's outcome into the report, with its failure and route.
pub(super) fn tally(report: &mut ChangeReport, intents: &[Intent], results: &[Option<ItemResult>]) {
    for (intent, result) in intents.iter().zip(results) {
        match result {
            Some(result) => report.tell(intent.row.id, &intent.row.account, result),
            None => report.tally.add(Outcome::Unchanged),
        }
    }
}

pub(super) fn journal_item(intent: &Intent, result: ItemResult) -> JournalItem {
    let outcome = result.outcome;
    let before = state_of(&intent.row);
    // An unknown item keeps what was asked, for a later read-back to settle it.
    let asked =
        (outcome == Outcome::Unknown && result.observed.is_none()).then(|| asked_state(intent));
    let after = result.observed.as_ref().map(|(_, flags)| {
        let (mailbox, remote_id) = result
            .moved_to
            .clone()
            .unwrap_or((before.mailbox.clone(), before.remote_id.clone()));
        MessageState {
            mailbox,
            remote_id,
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
        after: after.or(asked),
        observed: result.observed,
        route: result.route,
    }
}
