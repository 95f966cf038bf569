//! `undo`: the inverse of a journaled change, run through the same write pipeline.

use std::collections::HashMap;

use mailbroker_core::{Error, FlagOp, Outcome, Result};

use crate::store::{JournalItem, MessageRef, Store};
use crate::write::{Failure, Intent, ResolvedRequest, state_of};

/// The inverse of a journaled change, for the messages whose current state still equals the
/// change's after-state; the others are reported `stale_state` and left alone. Run it with
/// the undo's own origin (`cli`, `mcp:<client>`), which the journal records.
pub async fn resolve(store: &Store, change_id: i64) -> Result<ResolvedRequest> {
    let change = store.change(change_id).await?;
    if let Some(by) = change.undone_by {
        // Undoing the undo (a redo) makes the change undoable again.
        if store.change(by).await?.undone_by.is_none() {
            return Err(Error::stale_state(format!(
                "change {change_id} was already undone by change {by}"
            ))
            .with_next_step(format!(
                "to redo it, run: mailbroker undo {by}; to see it, run: mailbroker changes {by}"
            )));
        }
    }
    let applied: Vec<&JournalItem> = change
        .items
        .iter()
        .filter(|i| i.outcome == Outcome::Applied)
        .collect();
    if applied.is_empty() {
        return Err(Error::not_found(format!(
            "change {change_id} applied nothing to undo"
        )));
    }
    // A message deleted for good since is no longer indexed; it cannot come back.
    let rows: HashMap<i64, MessageRef> = store
        .existing_refs(&applied.iter().map(|i| i.message_id).collect::<Vec<_>>())
        .await?
        .into_iter()
        .map(|r| (r.id, r))
        .collect();
    let mut intents = Vec::new();
    let mut stale = Vec::new();
    for item in applied {
        let (Some(after), Some(row)) = (&item.after, rows.get(&item.message_id)) else {
            continue;
        };
        if state_of(row) != *after {
            stale.push(row.id);
            continue;
        }
        let before = &item.before;
        let op = FlagOp {
            read: (before.read != after.read).then_some(before.read),
            flagged: (before.flagged != after.flagged).then_some(before.flagged),
            add_tags: before
                .tags
                .iter()
                .filter(|t| !after.tags.contains(t))
                .cloned()
                .collect(),
            remove_tags: after
                .tags
                .iter()
                .filter(|t| !before.tags.contains(t))
                .cloned()
                .collect(),
        };
        let move_to = (before.mailbox != after.mailbox).then(|| before.mailbox.clone());
        intents.push(Intent {
            row: row.clone(),
            op,
            move_to,
        });
    }
    let selection = serde_json::json!({ "undo_of": change_id });
    let patch = serde_json::json!({ "undo_of": change_id });
    let stale = stale
        .into_iter()
        .map(|id| Failure {
            id,
            outcome: Outcome::Stale,
            error_type: "stale_state".into(),
            error: format!("message {id} changed after change {change_id}; left alone"),
        })
        .collect();
    crate::write::plan(store, (selection, patch, Some(change_id)), intents, stale).await
}
