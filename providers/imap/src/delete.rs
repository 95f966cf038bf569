//! Executing a staged deletion over IMAP: trash moves to the `\Trash` mailbox (COPYUID kept
//! for undo); permanent sets `\Deleted` and expunges exactly those UIDs with `UID EXPUNGE`.
//!
//! Architecture Invariant: never a bare EXPUNGE. It would also remove messages another client
//! flagged `\Deleted` and meant to keep until it expunged them itself. Permanent deletion is
//! refused without UIDPLUS.
//!
//! Gmail over IMAP (X-GM-EXT-1) only archives on `\Deleted` + EXPUNGE, so there the message is
//! moved to `[Gmail]/Trash` (the trash role) first and, for permanent mode, expunged there.

use std::collections::HashSet;

use mailbroker_core::ItemResult as CoreResult;
use mailbroker_core::{Capabilities, DeleteBatch, DeleteMode, Error, Outcome, Result};

use crate::ids::Uid;
use crate::item::{Batch, ItemResult};

use crate::session::ImapProvider;
use crate::uidset;
use crate::write::unknown_if_lost;

/// The commands `delete` sends for `batch`, one line each (for `--dry-run`).
pub fn plan_delete(caps: &Capabilities, batch: &DeleteBatch) -> Vec<String> {
    let trash = batch.trash.as_deref().unwrap_or("(no trash mailbox)");
    let gmail = caps.has("X-GM-EXT-1");
    let mut lines = Vec::new();
    for set in uidset::chunks(&Batch::of_delete(batch).uids(), 200) {
        let check = format!(
            "imap {}: UID FETCH {set} (UID FLAGS) (identity check)",
            batch.mailbox
        );
        lines.push(check);
        match (batch.mode, gmail) {
            (DeleteMode::Trash, _) => {
                lines.push(format!("imap {}: UID MOVE {set} {trash:?}", batch.mailbox));
            }
            (DeleteMode::Permanent, false) => {
                lines.push(format!(
                    "imap {}: UID STORE {set} +FLAGS.SILENT (\\Deleted); UID EXPUNGE {set}",
                    batch.mailbox
                ));
            }
            (DeleteMode::Permanent, true) => lines.push(format!(
                "imap {}: UID MOVE {set} {trash:?}; then in {trash:?}: \\Deleted + UID EXPUNGE of the new UIDs",
                batch.mailbox
            )),
        }
    }
    lines
}

impl ImapProvider {
    pub(crate) async fn delete_batch(&mut self, batch: &DeleteBatch) -> Result<Vec<CoreResult>> {
        let staged = Batch::of_delete(batch);
        let results = match staged.targets.is_empty() {
            true => Vec::new(),
            false => self.delete_imap(batch, &staged).await?,
        };
        Ok(staged.finish(results))
    }

    async fn delete_imap(
        &mut self,
        batch: &DeleteBatch,
        staged: &Batch<'_>,
    ) -> Result<Vec<ItemResult>> {
        let gmail = self.caps.has("X-GM-EXT-1");
        let needs_trash = batch.mode == DeleteMode::Trash || gmail;
        if batch.mode == DeleteMode::Permanent && !self.caps.has("UIDPLUS") {
            return Err(Error::unsupported(
                "this server lacks UIDPLUS: deleting for good would need a bare EXPUNGE, which can remove other messages",
            ));
        }
        let trash = match (&batch.trash, needs_trash) {
            (Some(t), true) => Some(t.clone()),
            (None, true) => {
                return Err(
                    Error::not_found("this account has no trash mailbox").with_next_step(
                        "run: mailbroker account show ACCOUNT, or use permanent mode",
                    ),
                );
            }
            (_, false) => None,
        };
        let uids = staged.uids();
        let selected = self.select(&batch.mailbox, false).await?;
        if selected.uid_validity != Some(staged.uidvalidity) {
            let reason = Error::stale_state(format!(
                "mailbox {:?} was recreated on the server (new UIDVALIDITY): these are not the staged messages",
                batch.mailbox
            ));
            return Ok(uids
                .iter()
                .map(|u| ItemResult::new(*u, Outcome::Stale).with_error(reason.clone()))
                .collect());
        }
        // Identity check: a staged UID that is no longer there is already gone (done).
        let present: HashSet<Uid> = self
            .read_flags(&uids)
            .await?
            .into_iter()
            .map(|(u, _, _)| u)
            .collect();
        let live: Vec<Uid> = uids
            .iter()
            .copied()
            .filter(|u| present.contains(u))
            .collect();
        let mut results: Vec<ItemResult> = uids
            .iter()
            .filter(|u| !present.contains(u))
            .map(|u| ItemResult::new(*u, Outcome::Unchanged))
            .collect();
        if !live.is_empty() {
            match (trash, batch.mode) {
                (Some(trash), DeleteMode::Trash) => {
                    let (_, gone) = self.move_and_verify(&live, &trash, &mut results).await?;
                    results.extend(already_gone(&gone));
                }
                (Some(trash), DeleteMode::Permanent) => {
                    let (_, gone) = self.move_and_verify(&live, &trash, &mut results).await?;
                    results.extend(already_gone(&gone));
                    let landed: Vec<Uid> = results
                        .iter()
                        .filter_map(|r| r.moved_to.as_ref().map(|(_, _, n)| *n))
                        .collect();
                    self.expunge_exactly(&landed)
                        .await
                        .map_err(|e| unknown_if_lost(e, &live))?;
                    results.iter_mut().for_each(|r| r.moved_to = None);
                }
                (None, _) => {
                    let gone = self.expunge_and_verify(&live, &batch.mailbox).await?;
                    results.extend(gone);
                }
            }
        }
        results.sort_by_key(|r| r.uid);
        Ok(results)
    }

    /// Expunges exactly `live` from the selected `mailbox` and checks they are gone.
    async fn expunge_and_verify(&mut self, live: &[Uid], mailbox: &str) -> Result<Vec<ItemResult>> {
        self.expunge_exactly(live)
            .await
            .map_err(|e| unknown_if_lost(e, live))?;
        let left: HashSet<Uid> = self
            .read_flags(live)
            .await
            .map_err(|e| unknown_if_lost(e, live))?
            .into_iter()
            .map(|(u, _, _)| u)
            .collect();
        Ok(live
            .iter()
            .map(|uid| {
                if left.contains(uid) {
                    ItemResult::new(*uid, Outcome::Failed).with_error(Error::verification_failed(
                        format!("uid {uid} is still in {mailbox:?} after UID EXPUNGE"),
                    ))
                } else {
                    ItemResult::new(*uid, Outcome::Applied)
                }
            })
            .collect())
    }

    /// `\Deleted` then `UID EXPUNGE` of exactly `uids` in the selected mailbox.
    async fn expunge_exactly(&mut self, uids: &[Uid]) -> Result<()> {
        for set in uidset::chunks(uids, 48) {
            self.command_codes(&format!("UID STORE {set} +FLAGS.SILENT (\\Deleted)"))
                .await?;
            self.command_codes(&format!("UID EXPUNGE {set}")).await?;
        }
        Ok(())
    }
}

/// Staged messages that left their mailbox before the move to trash reached them: already
/// gone, which counts as done.
fn already_gone(uids: &[Uid]) -> impl Iterator<Item = ItemResult> + '_ {
    uids.iter().map(|u| ItemResult::new(*u, Outcome::Unchanged))
}
