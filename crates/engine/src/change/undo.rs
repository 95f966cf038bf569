//! `undo`: the inverse of a journaled change, run through the same write pipeline.

use std::collections::HashMap;

use mailbroker_core::{Error, FlagOp, Outcome, Result};

use super::update::{Failure, Intent, Recorded, ResolvedRequest, state_of};
use mailbroker_store::{Asked, Chosen, JournalItem, MessageRef, MessageState, Store};

/// Whether `resolve` can find something to revert in `change`, as far as its journal entry
/// alone tells: it applied something, it is not undone (a redo, an undo undone in turn, makes
/// it undoable again, which this does not follow), and it did not delete for good (a trash
/// run is moved back).
pub fn undoable(change: &mailbroker_store::ChangeRecord) -> bool {
    change.tally.get(Outcome::Applied) > 0
        && change.undone_by.is_none()
        && !change.patch.is_permanent_deletion()
}

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
    // A deletion changed only where each message is: its undo moves them back and leaves
    // their flags and tags as they are now.
    let deletion = change.patch.is_deletion();
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
        let (op, move_to) = match deletion {
            true => (FlagOp::default(), Some(item.before.mailbox.clone())),
            false => inverse(&item.before, after),
        };
        intents.push(Intent {
            row: row.clone(),
            op,
            move_to,
        });
    }
    let stale = stale
        .into_iter()
        .map(|id| {
            let e = Error::stale_state(format!(
                "message {id} changed after change {change_id}; left alone"
            ));
            Failure::of(id, Outcome::Stale, &e)
        })
        .collect();
    let request = Recorded {
        selection: Chosen::UndoOf { undo_of: change_id },
        asked: Asked::Undo { undo_of: change_id },
        undo_of: Some(change_id),
    };
    let records = Default::default();
    let mut resolved = super::update::plan(store, request, (records, None), intents, stale).await?;
    resolved.set_move_role(resolved.targets_role());
    Ok(resolved)
}

/// What takes a message from `after` back to `before`: the flags that differ, the tags one
/// has and the other lacks (compared case-blind, as servers and `FlagOp::holds_in` do), and
/// the mailbox it left.
fn inverse(before: &MessageState, after: &MessageState) -> (FlagOp, Option<String>) {
    let lacks = |tags: &[String], t: &String| !tags.iter().any(|x| x.eq_ignore_ascii_case(t));
    let op = FlagOp {
        read: (before.read != after.read).then_some(before.read),
        flagged: (before.flagged != after.flagged).then_some(before.flagged),
        add_tags: before
            .tags
            .iter()
            .filter(|t| lacks(&after.tags, t))
            .cloned()
            .collect(),
        remove_tags: after
            .tags
            .iter()
            .filter(|t| lacks(&before.tags, t))
            .cloned()
            .collect(),
    };
    let move_to = (before.mailbox != after.mailbox).then(|| before.mailbox.clone());
    (op, move_to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailbroker_core::{MessageFlags, RemoteId};
    use proptest::prelude::*;

    fn state(mailbox: &str, read: bool, flagged: bool, tags: &[&str]) -> MessageState {
        MessageState {
            mailbox: mailbox.into(),
            remote_id: RemoteId::new("1:1"),
            read,
            flagged,
            tags: tags.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn the_inverse_of_a_tag_and_archive_puts_everything_back() {
        let before = state("INBOX", false, false, &["Work", "$Seen-Later"]);
        let after = state("Archive", true, false, &["work", "Social"]);
        let (op, move_to) = inverse(&before, &after);
        assert_eq!(op.read, Some(false));
        assert_eq!(op.flagged, None, "unchanged flags stay out of the undo");
        assert_eq!(op.add_tags, vec!["$Seen-Later".to_string()]);
        assert_eq!(
            op.remove_tags,
            vec!["Social".to_string()],
            "Work/work is one tag"
        );
        assert_eq!(move_to.as_deref(), Some("INBOX"));
        let (op, move_to) = inverse(&before, &before);
        assert!(
            op.is_empty() && move_to.is_none(),
            "nothing changed, nothing to undo"
        );
    }

    fn states() -> impl Strategy<Value = MessageState> {
        let tag = prop::sample::select(vec!["A", "a", "B", "$Work", "Done"]);
        (
            prop::sample::select(vec!["INBOX", "Archive"]),
            any::<bool>(),
            any::<bool>(),
            prop::collection::vec(tag, 0..4),
        )
            .prop_map(|(m, r, f, tags)| {
                let mut seen: Vec<&str> = Vec::new();
                for t in tags {
                    if !seen.iter().any(|s| s.eq_ignore_ascii_case(t)) {
                        seen.push(t);
                    }
                }
                state(m, r, f, &seen)
            })
    }

    proptest! {
        /// Applied to `after`, the inverse yields `before`'s flags and tag set, and the
        /// read-back check (`holds_in`) accepts `before` as its result.
        #[test]
        fn the_inverse_restores_the_state_before(before in states(), after in states()) {
            let (op, move_to) = inverse(&before, &after);
            let tags = op.tags_after(&after.tags);
            let back = MessageFlags {
                read: op.read.unwrap_or(after.read),
                flagged: op.flagged.unwrap_or(after.flagged),
                tags: tags.clone(),
                raw: Vec::new(),
            };
            prop_assert_eq!(back.read, before.read);
            prop_assert_eq!(back.flagged, before.flagged);
            let lower = |t: &[String]| {
                let mut v: Vec<String> = t.iter().map(|x| x.to_lowercase()).collect();
                v.sort();
                v
            };
            prop_assert_eq!(lower(&tags), lower(&before.tags));
            prop_assert!(op.holds_in(&back));
            prop_assert_eq!(move_to.is_some(), before.mailbox != after.mailbox);
        }
    }

    use mailbroker_store::{ChangeRecord, ChangeStatus};
    use serde_json::json;

    fn change(patch: serde_json::Value, applied: i64, undone_by: Option<i64>) -> ChangeRecord {
        let patch = serde_json::from_value(patch).expect("a journal patch");
        ChangeRecord {
            id: 1,
            created_at: 0,
            origin: "cli".into(),
            selection: Chosen::Ids { ids: vec![1] },
            patch,
            plan: Vec::new(),
            undo_of: None,
            undone_by,
            tally: {
                let mut t = mailbroker_core::Tally::default();
                t.set(mailbroker_core::Outcome::Applied, applied as u64);
                t
            },
            status: ChangeStatus::Done,
            items: Vec::new(),
        }
    }

    #[test]
    fn a_trash_run_is_undoable_and_a_permanent_one_is_not() {
        assert!(undoable(&change(json!({ "flagged": true }), 1, None)));
        assert!(undoable(&change(json!({ "delete": "trash" }), 3, None)));
        assert!(!undoable(&change(
            json!({ "delete": "permanent" }),
            3,
            None
        )));
        assert!(!undoable(&change(json!({ "flagged": true }), 0, None)));
        assert!(!undoable(&change(json!({ "flagged": true }), 1, Some(2))));
    }
}
