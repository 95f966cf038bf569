//! Changing messages over IMAP: preconditions (UIDVALIDITY, CONDSTORE modseqs), STORE over
//! compressed UID sets, MOVE with COPYUID, and verification by read-back.
//!
//! Preconditions without one STORE per message: the index knows each message's modseq from
//! its last sync. After SELECT (which reports the mailbox's HIGHESTMODSEQ `h`), one
//! `UID FETCH … (CHANGEDSINCE <lowest indexed modseq>)` finds every target that changed since
//! it was indexed (its modseq is above its own indexed one): those are stale and left out. The
//! STORE then carries `UNCHANGEDSINCE h`, so a change by another client after the SELECT makes
//! the server skip that message (MODIFIED), which the read-back then reports as stale.
//! When `h` still equals the mailbox's modseq at the last sync, nothing changed since the
//! index was current, and the precondition read is skipped.

use std::collections::{HashMap, HashSet};

use mailbroker_core::ItemResult as CoreResult;
use mailbroker_core::{Capabilities, Error, FlagOp, MessageFlags, Outcome, Result, WriteBatch};

use crate::ids::Uid;
use crate::item::{Batch, ItemResult};
use crate::moves::NotMoved;
use crate::session::{self, ImapProvider};
use crate::uidset;

/// Characters RFC 3501 forbids in an atom (a keyword is an atom), besides controls and space.
const ATOM_SPECIALS: &[char] = &['(', ')', '{', '%', '*', '"', '\\', ']'];
/// Dovecot's keyword limit; used when the server does not advertise one.
const DEFAULT_MAX_TAG_LEN: u32 = 50;

/// Checks a tag before anything is sent: IMAP atom syntax, the length limit, and (for a tag no
/// indexed message carries yet) whether the server accepts new keywords at all.
pub fn validate_tag(caps: &Capabilities, tag: &str, new: bool) -> Result<()> {
    validate_keyword(tag, caps.max_tag_len)?;
    if new && !caps.custom_tags {
        return Err(Error::unsupported(format!(
            "this server does not accept new keywords (no \\* in PERMANENTFLAGS), so tag {tag:?} cannot be created"
        ))
        .with_next_step(
            "leave the tag out: this server keeps only read, flagged and its other system flags",
        ));
    }
    Ok(())
}

fn validate_keyword(tag: &str, max_len: Option<u32>) -> Result<()> {
    let max = max_len.unwrap_or(DEFAULT_MAX_TAG_LEN) as usize;
    if tag.is_empty() {
        return Err(Error::validation("a tag cannot be empty"));
    }
    if let Some(c) = tag
        .chars()
        .find(|c| !c.is_ascii() || c.is_ascii_control() || *c == ' ' || ATOM_SPECIALS.contains(c))
    {
        return Err(Error::validation(format!(
            "tag {tag:?} contains {c:?}, which an IMAP keyword cannot hold"
        ))
        .with_next_step("use letters, digits and $-_./ only"));
    }
    if tag.len() > max {
        return Err(Error::validation(format!(
            "tag {tag:?} is {} characters; this server accepts at most {max}",
            tag.len()
        )));
    }
    Ok(())
}

/// The raw flags a `FlagOp` adds and removes on IMAP.
fn store_lists(op: &FlagOp) -> (Vec<String>, Vec<String>) {
    let mut add = Vec::new();
    let mut remove = Vec::new();
    for (set, flag) in [(op.read, "\\Seen"), (op.flagged, "\\Flagged")] {
        match set {
            Some(true) => add.push(flag.to_string()),
            Some(false) => remove.push(flag.to_string()),
            None => {}
        }
    }
    add.extend(op.add_tags.iter().cloned());
    remove.extend(op.remove_tags.iter().cloned());
    (add, remove)
}

/// The commands `apply` sends for `batch` on a server with `caps`, one line each.
pub fn plan(caps: &Capabilities, batch: &WriteBatch) -> Vec<String> {
    {
        let condstore = if caps.has("CONDSTORE") {
            " (UNCHANGEDSINCE <highestmodseq at select>)"
        } else {
            ""
        };
        let uids = Batch::of(batch).uids();
        let mut lines = Vec::new();
        let (add, remove) = store_lists(&batch.op);
        for (sign, list) in [("+", add), ("-", remove)] {
            if list.is_empty() {
                continue;
            }
            for set in uidset::chunks(&uids, 200) {
                lines.push(format!(
                    "imap {}: UID STORE {set}{condstore} {sign}FLAGS.SILENT ({})",
                    batch.mailbox,
                    list.join(" ")
                ));
            }
        }
        if let Some(target) = &batch.move_to {
            let verb = if caps.has("MOVE") {
                "UID MOVE"
            } else {
                "UID COPY + \\Deleted + UID EXPUNGE"
            };
            for set in uidset::chunks(&uids, 200) {
                lines.push(format!("imap {}: {verb} {set} {target:?}", batch.mailbox));
            }
        }
        lines
    }
}

impl ImapProvider {
    pub(crate) async fn apply_batch(&mut self, batch: &WriteBatch) -> Result<Vec<CoreResult>> {
        let batch = Batch::of(batch);
        let results = self.apply_imap(&batch).await?;
        Ok(batch.finish(results))
    }

    async fn apply_imap(&mut self, batch: &Batch<'_>) -> Result<Vec<ItemResult>> {
        if batch.targets.is_empty() {
            return Ok(Vec::new());
        }
        if batch.move_to.is_some() && !self.caps.has("MOVE") && !self.caps.has("UIDPLUS") {
            return Err(Error::unsupported(
                "this server has neither MOVE nor UIDPLUS, so a move could expunge other messages",
            ));
        }
        let condstore = self.caps.has("CONDSTORE");
        let selected = self.select(batch.mailbox, condstore).await?;
        tracing::debug!("imap: selected");
        if selected.uid_validity != Some(batch.uidvalidity) {
            let err = Error::stale_state(format!(
                "mailbox {:?} was recreated on the server (new UIDVALIDITY)",
                batch.mailbox
            ))
            .with_next_step("run: mailbroker sync, then retry");
            return Ok(batch
                .targets
                .iter()
                .map(|t| ItemResult::new(t.uid, Outcome::Stale).with_error(err.clone()))
                .collect());
        }
        let highest = selected.highest_modseq.unwrap_or(0);
        // Unchanged since the last sync: the index is current, so the precondition read would
        // find nothing and is skipped.
        let current = highest != 0 && highest == batch.synced_modseq;
        // Results stay in vectors: for 10,000 messages, passing them through hash maps cost
        // more than classifying them.
        let mut results = if condstore && !current {
            self.changed_since_indexed(batch).await?
        } else {
            Vec::new()
        };
        let settled: HashSet<Uid> = results.iter().map(|r| r.uid).collect();
        let mut live: Vec<Uid> = batch.uids();
        live.retain(|u| !settled.contains(u));
        // Targets of a move that left the mailbox since they were indexed are looked for
        // where the move would take them. Where the mailbox is as the last sync left it on
        // a QRESYNC server (an expunge changes its HIGHESTMODSEQ), none has left.
        let mut gone = Vec::new();
        if batch.move_to.is_some() && !live.is_empty() && !(current && self.caps.has("QRESYNC")) {
            let present = self.present(&live).await?;
            (live, gone) = live
                .into_iter()
                .partition(|u| present.binary_search(u).is_ok());
        }
        if !batch.op.is_empty() && !live.is_empty() {
            let unchanged_since = condstore.then_some(highest);
            let stored = self.store_and_verify(batch, &live, unchanged_since).await?;
            live = stored
                .iter()
                .filter(|r| r.outcome == Outcome::Applied)
                .map(|r| r.uid)
                .collect();
            for result in stored {
                // Vanished between the check above and the STORE.
                let vanished = result.outcome == Outcome::Stale && result.observed.is_none();
                if batch.move_to.is_some() && vanished {
                    gone.push(result.uid);
                } else {
                    results.push(result);
                }
            }
        }
        if let Some(target) = batch.move_to
            && !(live.is_empty() && gone.is_empty())
        {
            self.move_targets(batch, target, (&live, &gone), &mut results)
                .await?;
        }
        // Stable, and nearly free on the runs of UIDs already in order.
        results.sort_by_key(|r| r.uid);
        Ok(results)
    }

    /// Moves the `live` targets to `target` and reads them back there; those not moved, and
    /// those `gone` from the mailbox before the move, are looked for in the target by
    /// Message-ID.
    async fn move_targets(
        &mut self,
        batch: &Batch<'_>,
        target: &str,
        (live, gone): (&[Uid], &[Uid]),
        results: &mut Vec<ItemResult>,
    ) -> Result<()> {
        let (validity, not_moved) = self.move_and_verify(live, target, results).await?;
        // With UIDPLUS a UID the move names no new place for was gone before it ran;
        // without it the move names none at all, and moved them.
        let ours = !self.caps.has("UIDPLUS");
        let identities: HashMap<Uid, (Option<&str>, Option<u64>)> = batch
            .targets
            .iter()
            .map(|t| (t.uid, (t.message_id, t.size)))
            .collect();
        let identity = |uid: Uid| identities.get(&uid).copied().unwrap_or((None, None));
        let not_moved: Vec<NotMoved> = gone
            .iter()
            .map(|u| (*u, Outcome::Unchanged))
            .chain(not_moved.iter().map(|u| match ours {
                true => (*u, Outcome::Applied),
                false => (*u, Outcome::Unchanged),
            }))
            .map(|(uid, if_found)| NotMoved {
                uid,
                message_id: identity(uid).0,
                size: identity(uid).1,
                if_found,
            })
            .collect();
        // What the target held when it was last synced is indexed: none of it is ours.
        let ours_from = match batch.move_synced {
            (known, uidnext) if known == validity => uidnext,
            _ => 0,
        };
        self.settle_not_moved(
            batch.mailbox,
            (target, validity, ours_from),
            &not_moved,
            results,
        )
        .await
        .map_err(|e| unknown_if_lost(e, live))
    }

    /// Targets that changed on the server since they were indexed (the precondition read).
    /// One that already shows what was asked (an earlier run whose answer was lost) needs
    /// nothing; the others are stale and left alone.
    async fn changed_since_indexed(&mut self, batch: &Batch<'_>) -> Result<Vec<ItemResult>> {
        let min = batch.targets.iter().map(|t| t.modseq).min().unwrap_or(0);
        let indexed: HashMap<Uid, u64> = batch.targets.iter().map(|t| (t.uid, t.modseq)).collect();
        let mut results = Vec::new();
        for (uid, modseq, flags) in self.read_changed(min).await? {
            if indexed.get(&uid).is_none_or(|m| modseq <= *m) {
                continue;
            }
            let result = if batch.move_to.is_none() && batch.op.holds_in(&flags) {
                ItemResult {
                    observed: Some((modseq, flags)),
                    ..ItemResult::new(uid, Outcome::Unchanged)
                }
            } else {
                stale(uid, modseq, flags)
            };
            results.push(result);
        }
        Ok(results)
    }

    /// Stores the batch's flags on `live` and classifies each message from the read-back,
    /// in the order of `live`.
    async fn store_and_verify(
        &mut self,
        batch: &Batch<'_>,
        live: &[Uid],
        unchanged_since: Option<u64>,
    ) -> Result<Vec<ItemResult>> {
        // The STOREs go out back to back: they touch disjoint UID sets, so the server may run
        // them in any order (RFC 3501 §5.5), and the batch pays one round trip for all of
        // them. The read-back must wait for their answers: a FETCH of flags sent while a
        // STORE of those flags runs is ambiguous, and Dovecot answers it with the old state.
        let stores = store_commands(live, batch.op, unchanged_since);
        self.pipeline(&stores, |_, _| {})
            .await
            .map_err(|e| unknown_if_lost(e, live))?;
        tracing::debug!(commands = stores.len(), "imap: stored");
        // With CONDSTORE one FETCH of what changed since the SELECT reads back every message
        // we wrote, however scattered; the few that did not change are then looked up by UID
        // to tell a failed write from a vanished message.
        let verified = match unchanged_since {
            Some(highest) => self.read_changed(highest).await,
            None => self.read_flags(live).await,
        }
        .map_err(|e| unknown_if_lost(e, live))?;
        tracing::debug!(messages = verified.len(), "imap: read back");
        // By UID (the server's order already), looked up by binary search; each message's
        // read-back state later moves into its result: no copy of its flags.
        let mut verified: Vec<(Uid, Option<(u64, MessageFlags)>)> = verified
            .into_iter()
            .map(|(u, m, f)| (u, Some((m, f))))
            .collect();
        verified.sort_by_key(|(u, _)| *u);
        if unchanged_since.is_some() {
            let quiet: Vec<Uid> = live
                .iter()
                .copied()
                .filter(|u| verified.binary_search_by_key(u, |(v, _)| *v).is_err())
                .collect();
            if !quiet.is_empty() {
                let rest = self
                    .read_flags(&quiet)
                    .await
                    .map_err(|e| unknown_if_lost(e, live))?;
                verified.extend(rest.into_iter().map(|(u, m, f)| (u, Some((m, f)))));
                verified.sort_by_key(|(u, _)| *u);
            }
        }
        let mut results = Vec::with_capacity(live.len());
        for uid in live {
            let found = verified
                .binary_search_by_key(uid, |(u, _)| *u)
                .ok()
                .and_then(|i| verified[i].1.take());
            let result = match found {
                Some((modseq, flags)) if batch.op.holds_in(&flags) => ItemResult {
                    observed: Some((modseq, flags)),
                    ..ItemResult::new(*uid, Outcome::Applied)
                },
                // Changed by someone else after our SELECT: the server refused (MODIFIED).
                Some((modseq, flags)) if unchanged_since.is_some_and(|h| modseq > h) => {
                    stale(*uid, modseq, flags)
                }
                Some((modseq, flags)) => ItemResult {
                    observed: Some((modseq, flags)),
                    ..ItemResult::new(*uid, Outcome::Failed).with_error(Error::verification_failed(
                        format!(
                            "uid {uid} in {:?} does not show the change after the write",
                            batch.mailbox
                        ),
                    ))
                },
                None => ItemResult::new(*uid, Outcome::Stale).with_error(Error::stale_state(
                    format!("uid {uid} is no longer in {:?}", batch.mailbox),
                )),
            };
            results.push(result);
        }
        Ok(results)
    }

    /// Every message of the selected mailbox whose modseq is above `modseq`: one command,
    /// whatever the UIDs.
    async fn read_changed(&mut self, modseq: u64) -> Result<Vec<(Uid, u64, MessageFlags)>> {
        let mut out = Vec::new();
        let command = format!("UID FETCH 1:* (UID FLAGS MODSEQ) (CHANGEDSINCE {modseq})");
        self.fetch_flags(&command, &mut out, &mut Vec::new())
            .await?;
        Ok(out)
    }

    /// The flags of `uids`: `UID FETCH <uids> (UID FLAGS [MODSEQ])`, one command per
    /// line-sized set, all in one round trip.
    pub(crate) async fn read_flags(
        &mut self,
        uids: &[Uid],
    ) -> Result<Vec<(Uid, u64, MessageFlags)>> {
        let items = if self.caps.has("CONDSTORE") {
            "(UID FLAGS MODSEQ)"
        } else {
            "(UID FLAGS)"
        };
        let commands: Vec<String> = uidset::chunks(uids, items.len() + 16)
            .into_iter()
            .map(|set| format!("UID FETCH {set} {items}"))
            .collect();
        let mut out = Vec::new();
        self.pipeline(&commands, |_, resp| {
            session::collect_flags(resp, &mut out, &mut Vec::new())
        })
        .await?;
        Ok(out)
    }
}

/// `UID STORE` commands for `op` over `uids`, split so no line exceeds the length limit.
fn store_commands(uids: &[Uid], op: &FlagOp, unchanged_since: Option<u64>) -> Vec<String> {
    let modifier = unchanged_since
        .map(|m| format!("(UNCHANGEDSINCE {m}) "))
        .unwrap_or_default();
    let (add, remove) = store_lists(op);
    let mut out = Vec::new();
    for (sign, list) in [("+", add), ("-", remove)] {
        if list.is_empty() {
            continue;
        }
        let query = format!("{modifier}{sign}FLAGS.SILENT ({})", list.join(" "));
        for set in uidset::chunks(uids, query.len() + 32) {
            out.push(format!("UID STORE {set} {query}"));
        }
    }
    out
}

fn stale(uid: Uid, modseq: u64, flags: MessageFlags) -> ItemResult {
    ItemResult {
        observed: Some((modseq, flags)),
        ..ItemResult::new(uid, Outcome::Stale).with_error(Error::stale_state(format!(
            "uid {uid} changed on the server since it was indexed; left alone"
        )))
    }
}

/// A connection lost after a write was sent: the caller must re-read before anything else.
pub(crate) fn unknown_if_lost(e: Error, uids: &[Uid]) -> Error {
    match e {
        Error::ProviderUnavailable(d) => Error::outcome_unknown(format!(
            "{} (write to {} messages may or may not have happened)",
            d.message,
            uids.len()
        ))
        .with_next_step("run: mailbroker sync, then repeat the request; nothing is resent blindly"),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyword_rules() {
        validate_keyword("$Triage", None).unwrap();
        validate_keyword("Work.2026", None).unwrap();
        for bad in [
            "",
            "two words",
            "a(b",
            "x\r\n",
            "quote\"",
            "back\\slash",
            "ü",
        ] {
            assert_eq!(
                validate_keyword(bad, None).unwrap_err().error_type(),
                "validation_error",
                "{bad:?}"
            );
        }
        assert!(validate_keyword(&"x".repeat(51), None).is_err());
        assert!(validate_keyword(&"x".repeat(60), Some(100)).is_ok());
    }

    #[test]
    fn new_keywords_need_permanentflags_star() {
        let mut caps = Capabilities::default();
        assert_eq!(
            validate_tag(&caps, "Fresh", true).unwrap_err().error_type(),
            "unsupported"
        );
        // A keyword already in use can still be set or removed.
        validate_tag(&caps, "Known", false).unwrap();
        caps.custom_tags = true;
        validate_tag(&caps, "Fresh", true).unwrap();
    }
}
