//! The write side of the domain: a `Patch` as the user states it, the per-mailbox `WriteBatch`
//! a provider executes, and what came of each message.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Error, MailboxCursor, MailboxName, MessageFlags, RemoteId, Result, Version};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeleteMode {
    Trash,
    Permanent,
}

impl DeleteMode {
    pub fn as_str(self) -> &'static str {
        match self {
            DeleteMode::Trash => "trash",
            DeleteMode::Permanent => "permanent",
        }
    }
}

/// A change request with patch semantics: a field left out is unchanged (SPEC §2).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Patch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flagged: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add_tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove_tags: Vec<String>,
    /// A mailbox name or a role (`inbox`, `archive`, `junk`, `trash`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub move_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete: Option<DeleteMode>,
}

impl Patch {
    /// Checks what can be checked without an account: at least one field, no tag both added
    /// and removed, and no direct deletion.
    pub fn validate(&self) -> Result<()> {
        let empty = self.read.is_none()
            && self.flagged.is_none()
            && self.add_tags.is_empty()
            && self.remove_tags.is_empty()
            && self.move_to.is_none()
            && self.delete.is_none();
        if empty {
            return Err(Error::validation("the patch changes nothing").with_next_step(
                "give at least one of --read/--unread, --flag/--unflag, --add-tag, --remove-tag, --move-to",
            ));
        }
        if let Some(tag) = self
            .add_tags
            .iter()
            .find(|t| self.remove_tags.iter().any(|r| r.eq_ignore_ascii_case(t)))
        {
            return Err(Error::validation(format!(
                "tag {tag:?} is both added and removed"
            )));
        }
        let others = self.read.is_some()
            || self.flagged.is_some()
            || !self.add_tags.is_empty()
            || !self.remove_tags.is_empty()
            || self.move_to.is_some();
        if self.delete.is_some() && others {
            return Err(Error::validation(
                "delete stages the messages for deletion and cannot be combined with other changes",
            )
            .with_next_step("send the deletion as its own request"));
        }
        Ok(())
    }
}

/// The flag part of a change that is the same for every message of a batch. `None`/empty
/// fields are left alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FlagOp {
    pub read: Option<bool>,
    pub flagged: Option<bool>,
    pub add_tags: Vec<String>,
    pub remove_tags: Vec<String>,
}

impl FlagOp {
    pub fn is_empty(&self) -> bool {
        self.read.is_none()
            && self.flagged.is_none()
            && self.add_tags.is_empty()
            && self.remove_tags.is_empty()
    }

    /// Whether `flags` shows this operation done.
    pub fn holds_in(&self, flags: &MessageFlags) -> bool {
        let has = |t: &String| flags.tags.iter().any(|x| x.eq_ignore_ascii_case(t));
        self.read.is_none_or(|r| flags.read == r)
            && self.flagged.is_none_or(|f| flags.flagged == f)
            && self.add_tags.iter().all(has)
            && !self.remove_tags.iter().any(has)
    }

    /// `tags` with this operation applied, by the same case-blind rule as `holds_in`: removed
    /// tags go, added ones not yet there go last, as servers list a new keyword.
    pub fn tags_after(&self, tags: &[String]) -> Vec<String> {
        let mut out: Vec<String> = tags
            .iter()
            .filter(|t| !self.remove_tags.iter().any(|r| r.eq_ignore_ascii_case(t)))
            .cloned()
            .collect();
        for tag in &self.add_tags {
            if !out.iter().any(|t| t.eq_ignore_ascii_case(tag)) {
                out.push(tag.clone());
            }
        }
        out
    }
}

/// One message to change, with the version and state the index last saw for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteTarget {
    pub id: RemoteId,
    pub version: Version,
    /// The Message-ID header, by which a message that left its mailbox can be found where
    /// it went (a move whose answer was lost).
    #[serde(default)]
    pub message_id: Option<String>,
    /// Its size in bytes as indexed, which a move keeps: with the Message-ID, what tells it
    /// from another message that carries the same Message-ID (senders choose them).
    #[serde(default)]
    pub size: Option<u64>,
    /// The indexed state, raw values included: a provider whose read-back reports only what
    /// changed (Gmail's history) builds the state after from it.
    pub flags: MessageFlags,
}

/// Messages of one mailbox that get the same operation: one provider round of commands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteBatch {
    /// Their mailbox; empty for a batch that spans the account's mailboxes (a provider that
    /// groups `Grouping::Whole`, when nothing moves).
    pub mailbox: MailboxName,
    /// The mailbox's cursor when a sync last caught the index up with it (empty when
    /// unknown). A server that has changed nothing since has every target as indexed.
    pub synced: MailboxCursor,
    pub op: FlagOp,
    /// Target mailbox name (already resolved from a role), applied after the flags.
    pub move_to: Option<String>,
    /// The move target's cursor when a sync last caught the index up with it (empty when
    /// unknown): what was there then is indexed already, so it cannot be a message this
    /// batch moves (a move whose answer was lost is looked for there).
    #[serde(default)]
    pub move_synced: MailboxCursor,
    pub targets: Vec<WriteTarget>,
    /// The provider's ids (`MailboxInfo::remote`) of the mailboxes the batch names (its own,
    /// the move target), where the index has them.
    #[serde(default)]
    pub folders: BTreeMap<MailboxName, String>,
}

/// How a provider (or the core) says a staged message was left alone because it is no
/// longer where it was staged: a `stale_state` error's message starts with this.
pub const MOVED_SINCE_STAGED: &str = "moved since it was staged";

/// Messages of one mailbox to delete in one provider round (a staged manifest's batch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteBatch {
    pub mailbox: MailboxName,
    pub mode: DeleteMode,
    /// The account's trash mailbox (resolved from its role), where trash mode moves to.
    pub trash: Option<String>,
    /// The staged messages, with the state the index last saw (default when the index no
    /// longer has one).
    pub targets: Vec<WriteTarget>,
    /// The provider's ids of the mailboxes the batch names (its own, the trash), where the
    /// index has them.
    #[serde(default)]
    pub folders: BTreeMap<MailboxName, String>,
}

impl DeleteBatch {
    pub fn ids(&self) -> Vec<RemoteId> {
        self.targets.iter().map(|t| t.id.clone()).collect()
    }
}

/// What came of one message of a change, as reports and the journal say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Applied,
    Unchanged,
    Stale,
    Failed,
    Unknown,
}

impl Outcome {
    pub const ALL: [Outcome; 5] = [
        Outcome::Applied,
        Outcome::Unchanged,
        Outcome::Stale,
        Outcome::Failed,
        Outcome::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Unchanged => "unchanged",
            Outcome::Stale => "stale",
            Outcome::Failed => "failed",
            Outcome::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

/// What happened to one message of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemResult {
    pub id: RemoteId,
    pub outcome: Outcome,
    /// The server's state as read back (after the write, or the newer state that made it stale).
    pub observed: Option<(Version, MessageFlags)>,
    /// Where the message is now, when it moved, and its id there.
    pub moved_to: Option<(MailboxName, RemoteId)>,
    pub error: Option<Error>,
    /// The route that carried it when it was not the account's own (`applescript`, for a
    /// fallback to Mail.app): the report and the journal say so.
    pub route: Option<String>,
}

impl ItemResult {
    pub fn new(id: RemoteId, outcome: Outcome) -> ItemResult {
        ItemResult {
            id,
            outcome,
            observed: None,
            moved_to: None,
            error: None,
            route: None,
        }
    }

    #[must_use]
    pub fn with_error(mut self, error: Error) -> ItemResult {
        self.error = Some(error);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_validation() {
        assert_eq!(
            Patch::default().validate().unwrap_err().error_type(),
            "validation_error"
        );
        let both = Patch {
            add_tags: vec!["Work".into()],
            remove_tags: vec!["work".into()],
            ..Patch::default()
        };
        assert_eq!(
            both.validate().unwrap_err().error_type(),
            "validation_error"
        );
        let delete = Patch {
            delete: Some(DeleteMode::Trash),
            ..Patch::default()
        };
        delete.validate().unwrap();
        let mixed = Patch {
            read: Some(true),
            ..delete
        };
        assert_eq!(
            mixed.validate().unwrap_err().error_type(),
            "validation_error"
        );
        let ok = Patch {
            read: Some(true),
            ..Patch::default()
        };
        ok.validate().unwrap();
    }

    /// The read-back check and the state a write is expected to leave agree: for every
    /// operation over a small universe of tags (case variants included) and every starting
    /// set, the tags after the operation pass `holds_in`, and the tags it leaves alone stay.
    #[test]
    fn the_expected_state_passes_the_read_back_check() {
        let universe = ["A", "a", "B", "$C"];
        let subsets = |n: usize| -> Vec<Vec<String>> {
            (0..1u32 << n)
                .map(|bits| {
                    (0..n)
                        .filter(|i| bits & (1 << i) != 0)
                        .map(|i| universe[i].to_string())
                        .collect()
                })
                .collect()
        };
        let all = subsets(universe.len());
        let disjoint = |a: &[String], b: &[String]| {
            !a.iter()
                .any(|x| b.iter().any(|y| y.eq_ignore_ascii_case(x)))
        };
        for add in &all {
            for remove in all.iter().filter(|r| disjoint(add, r)) {
                let op = FlagOp {
                    read: Some(true),
                    flagged: None,
                    add_tags: add.clone(),
                    remove_tags: remove.clone(),
                };
                for tags in &all {
                    let after = op.tags_after(tags);
                    let flags = MessageFlags {
                        read: true,
                        flagged: false,
                        tags: after.clone(),
                        raw: Vec::new(),
                    };
                    assert!(op.holds_in(&flags), "{op:?} on {tags:?} gave {after:?}");
                    for kept in tags.iter().filter(|t| disjoint(&[(*t).clone()], remove)) {
                        assert!(after.contains(kept), "{op:?} lost {kept} from {tags:?}");
                    }
                    let unread = MessageFlags {
                        read: false,
                        ..flags
                    };
                    assert!(!op.holds_in(&unread), "read is part of the check");
                }
            }
        }
    }

    #[test]
    fn outcomes_read_back_as_written() {
        for o in Outcome::ALL {
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
            let json = serde_json::to_value(o).unwrap_or_default();
            assert_eq!(json.as_str(), Some(o.as_str()));
        }
        assert_eq!(Outcome::parse("Applied"), None);
    }

    #[test]
    fn flag_op_holds() {
        let flags = MessageFlags {
            read: true,
            flagged: false,
            tags: vec!["$Triage".into()],
            raw: vec![],
        };
        let op = FlagOp {
            read: Some(true),
            add_tags: vec!["$triage".into()],
            remove_tags: vec!["Done".into()],
            ..FlagOp::default()
        };
        assert!(op.holds_in(&flags));
        let op = FlagOp {
            flagged: Some(true),
            ..FlagOp::default()
        };
        assert!(!op.holds_in(&flags));
    }
}
