//! A batch and its results in IMAP's numbers, translated from and to the core's opaque ids at
//! the crate's edge (`Batch::of`, `ItemResult::into_core`), so the write and delete code
//! reasons in UIDs and modseqs.

use mailbroker_core::{DeleteBatch, Error, FlagOp, MessageFlags, Outcome, WriteBatch};
use mailbroker_core::{ItemResult as CoreResult, WriteTarget};

use crate::ids::{self, Cursor, Uid, UidValidity};

/// One message to change or delete, in the batch's mailbox.
pub(crate) struct Target<'a> {
    pub uid: Uid,
    pub modseq: u64,
    pub message_id: Option<&'a str>,
    /// RFC822.SIZE as indexed, which a move keeps.
    pub size: Option<u64>,
}

/// A `WriteBatch` (or the mailbox half of a `DeleteBatch`) read as IMAP sees it.
pub(crate) struct Batch<'a> {
    pub mailbox: &'a str,
    pub uidvalidity: UidValidity,
    /// HIGHESTMODSEQ when a sync last caught the index up with the mailbox (0: unknown).
    pub synced_modseq: u64,
    /// The move target's UIDVALIDITY and UIDNEXT when a sync last caught the index up with
    /// it (zeros: unknown): the messages below that UID were there, indexed, before.
    pub move_synced: (UidValidity, Uid),
    pub op: &'a FlagOp,
    pub move_to: Option<&'a str>,
    pub targets: Vec<Target<'a>>,
    /// Targets whose ids name no message of this mailbox now: they were indexed under an
    /// earlier UIDVALIDITY (or by another adapter), so they are stale.
    pub foreign: Vec<CoreResult>,
}

static NO_OP: FlagOp = FlagOp {
    read: None,
    flagged: None,
    add_tags: Vec::new(),
    remove_tags: Vec::new(),
};

impl<'a> Batch<'a> {
    pub(crate) fn of(batch: &'a WriteBatch) -> Batch<'a> {
        let synced = Cursor::read(&batch.synced);
        let mut out = Batch::new(&batch.mailbox, &batch.targets);
        out.synced_modseq = match synced.uidvalidity == out.uidvalidity {
            true => synced.highestmodseq,
            false => 0,
        };
        out.op = &batch.op;
        out.move_to = batch.move_to.as_deref();
        let target = Cursor::read(&batch.move_synced);
        out.move_synced = (target.uidvalidity, target.uidnext);
        out
    }

    pub(crate) fn of_delete(batch: &'a DeleteBatch) -> Batch<'a> {
        Batch::new(&batch.mailbox, &batch.targets)
    }

    /// The batch's UIDVALIDITY is its first target's: the core groups a mailbox's messages
    /// into one batch, and any indexed under another one are reported stale.
    fn new(mailbox: &'a str, targets: &'a [WriteTarget]) -> Batch<'a> {
        let uidvalidity = targets
            .iter()
            .find_map(|t| ids::parse(&t.id))
            .map_or(0, |(v, _)| v);
        let mut out = Batch {
            mailbox,
            uidvalidity,
            synced_modseq: 0,
            move_synced: (0, 0),
            op: &NO_OP,
            move_to: None,
            targets: Vec::with_capacity(targets.len()),
            foreign: Vec::new(),
        };
        for t in targets {
            match ids::uid_in(&t.id, uidvalidity) {
                Some(uid) => out.targets.push(Target {
                    uid,
                    modseq: ids::modseq(&t.version),
                    message_id: t.message_id.as_deref(),
                    size: t.size,
                }),
                None => out.foreign.push(
                    CoreResult::new(t.id.clone(), Outcome::Stale).with_error(
                        Error::stale_state(format!(
                            "message {} was indexed under an earlier UIDVALIDITY of {mailbox:?}",
                            t.id
                        ))
                        .with_next_step("run: mailbroker sync, then retry"),
                    ),
                ),
            }
        }
        out
    }

    pub(crate) fn uids(&self) -> Vec<Uid> {
        self.targets.iter().map(|t| t.uid).collect()
    }

    /// The results in the core's terms, the foreign targets' included.
    pub(crate) fn finish(self, results: Vec<ItemResult>) -> Vec<CoreResult> {
        let uidvalidity = self.uidvalidity;
        let mut out = self.foreign;
        out.extend(results.into_iter().map(|r| r.into_core(uidvalidity)));
        out
    }
}

/// What happened to one message, in UIDs: `mailbroker_core::ItemResult` before the ids are
/// made opaque.
#[derive(Debug, Clone)]
pub(crate) struct ItemResult {
    pub uid: Uid,
    pub outcome: Outcome,
    pub observed: Option<(u64, MessageFlags)>,
    /// Where it is now, when it moved: (mailbox, uidvalidity, uid).
    pub moved_to: Option<(String, UidValidity, Uid)>,
    pub error: Option<Error>,
}

impl ItemResult {
    pub(crate) fn new(uid: Uid, outcome: Outcome) -> ItemResult {
        ItemResult {
            uid,
            outcome,
            observed: None,
            moved_to: None,
            error: None,
        }
    }

    #[must_use]
    pub(crate) fn with_error(mut self, error: Error) -> ItemResult {
        self.error = Some(error);
        self
    }

    fn into_core(self, uidvalidity: UidValidity) -> CoreResult {
        CoreResult {
            id: ids::remote(uidvalidity, self.uid),
            outcome: self.outcome,
            observed: self.observed.map(|(m, f)| (ids::version(m), f)),
            moved_to: self
                .moved_to
                .map(|(mailbox, v, uid)| (mailbox, ids::remote(v, uid))),
            error: self.error,
            route: None,
        }
    }
}
