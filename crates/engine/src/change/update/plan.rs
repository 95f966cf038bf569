//! Planning a change: what each message still needs (`Intent`), and the provider
//! batches they group into.

use super::*;

pub(super) fn has_tag(row: &MessageRef, tag: &str) -> bool {
    row.tags.iter().any(|t| t.eq_ignore_ascii_case(tag))
}

/// What `patch` still has to do to `row`: only the parts that would change something.
/// `targets` maps an account to the mailbox `patch.move_to` names there.
pub(super) fn intent_of(
    row: MessageRef,
    patch: &Patch,
    targets: &HashMap<AccountId, String>,
) -> Intent {
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

/// What the messages of one provider batch share. `mailbox` is empty for a batch across an
/// account's mailboxes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct BatchKey {
    pub account: AccountId,
    pub mailbox: String,
    pub op: FlagOp,
    pub move_to: Option<String>,
}

/// A provider batch, built once, and the intents (by index) it carries.
pub(super) struct Group {
    pub account: AccountId,
    pub members: Vec<usize>,
    pub batch: WriteBatch,
}

/// Groups intents into provider batches: same account, mailbox, operation and target. The
/// operation is what each message still needs, or, for an account in `whole` (its adapter
/// groups `Grouping::Whole`), the request's whole operation for every message that needs
/// anything, in one batch across its mailboxes where nothing moves (an empty mailbox).
pub(super) fn batches(
    intents: &[Intent],
    whole: &HashMap<AccountId, FlagOp>,
) -> BTreeMap<BatchKey, Vec<usize>> {
    let mut out: BTreeMap<BatchKey, Vec<usize>> = BTreeMap::new();
    for (i, it) in intents.iter().enumerate() {
        if !it.changes_something() {
            continue;
        }
        let whole_op = whole.get(&it.row.account);
        let mailbox = match (whole_op, &it.move_to) {
            (Some(_), None) => String::new(),
            _ => it.row.mailbox.clone(),
        };
        let key = BatchKey {
            account: it.row.account.clone(),
            mailbox,
            op: whole_op.unwrap_or(&it.op).clone(),
            move_to: it.move_to.clone(),
        };
        out.entry(key).or_default().push(i);
    }
    out
}

/// What a provider needs of an indexed message to write it.
pub(crate) fn target_of(row: &MessageRef) -> WriteTarget {
    WriteTarget {
        id: row.remote_id.clone(),
        version: row.version.clone(),
        message_id: row.message_id.clone(),
        size: Some(row.size),
        flags: MessageFlags {
            read: row.read,
            flagged: row.flagged,
            tags: row.tags.clone(),
            raw: row.raw.clone(),
        },
    }
}

/// The batch of `members`; `synced` is their mailbox's cursor as the last sync left it, and
/// `move_synced` their move target's.
pub(super) fn batch_of(
    key: BatchKey,
    intents: &[Intent],
    members: &[usize],
    (synced, move_synced): (MailboxCursor, MailboxCursor),
) -> WriteBatch {
    WriteBatch {
        mailbox: key.mailbox,
        synced,
        op: key.op,
        move_to: key.move_to,
        move_synced,
        folders: Default::default(),
        targets: members
            .iter()
            .map(|i| target_of(&intents[*i].row))
            .collect(),
    }
}

impl Intent {
    /// Whether anything is to be sent for this message.
    pub(super) fn changes_something(&self) -> bool {
        !self.op.is_empty() || self.move_to.is_some()
    }
}
