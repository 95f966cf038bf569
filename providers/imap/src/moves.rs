//! Moving messages: `UID MOVE` (or COPY + `\Deleted` + `UID EXPUNGE` of exactly those UIDs),
//! the new UIDs from COPYUID, the read-back where they landed, and what became of a message
//! that did not move with the others.
//!
//! A target can leave its mailbox before our MOVE reaches it: another client expunged or
//! moved it, or our own earlier MOVE landed but its answer was lost. Dovecot then either
//! moves the rest and names no new UID for it, or refuses the whole command with
//! `NO [EXPUNGEISSUED]` when the session had still seen it; the rest is then moved again.
//! Such a message is looked for in the target by its Message-ID: found there, it is where
//! the request wanted it (unchanged); found nowhere, another client took it (stale).
//!
//! Senders choose Message-IDs, so two different messages can share one. A message found by
//! its Message-ID must also have its indexed size (a move keeps it), and be the only such
//! candidate: two that fit it (or two targets that share one) cannot be told apart, and the
//! outcome is `outcome_unknown`, with nothing written and no index row moved.

use std::collections::{HashMap, HashSet};

use async_imap::imap_proto::rfc4315::UidSetMember;
use async_imap::imap_proto::{MailboxDatum, Response, ResponseCode};
use mailbroker_core::{Error, MessageFlags, Outcome, Result};

use crate::ids::{Uid, UidValidity};
use crate::item::ItemResult;

use crate::session::ImapProvider;
use crate::uidset;
use crate::write::unknown_if_lost;

/// The response text of a command Dovecot refused because messages it names were expunged
/// by another session (RFC 5530); imap-proto does not parse this code, so it stays in the
/// text.
const EXPUNGE_ISSUED: &str = "[EXPUNGEISSUED]";
/// How often a move refused for `EXPUNGEISSUED` is tried again with what is still there.
const MOVE_ATTEMPTS: usize = 3;
/// Message-IDs per `UID SEARCH`: about 40 bytes each keeps a command line under 4,000.
const IDS_PER_SEARCH: usize = 80;

type CopyUid = (u32, Vec<UidSetMember>, Vec<UidSetMember>);

/// Where a message that did not move was found by its identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// The one message that is it.
    One(Uid),
    /// This many messages fit it, or it shares its identity with another target: none can
    /// be taken for it.
    Several(usize),
}

/// The candidate that is `item`: same Message-ID and, where both are known, same size; and
/// no other target shares that identity.
fn matching(
    item: &NotMoved<'_>,
    items: &[NotMoved<'_>],
    candidates: &[(Uid, String, Option<u64>)],
) -> Option<Found> {
    let id = item.message_id?;
    let fits = |size: Option<u64>| item.size.is_none() || size.is_none() || size == item.size;
    let twins = items
        .iter()
        .filter(|o| o.message_id == Some(id) && (o.size == item.size || o.size.is_none()))
        .count();
    let fitting: Vec<Uid> = candidates
        .iter()
        .filter(|(_, found, size)| found == id && fits(*size))
        .map(|(uid, ..)| *uid)
        .collect();
    match (fitting.as_slice(), twins) {
        ([], _) => None,
        ([one], 1) => Some(Found::One(*one)),
        (all, _) => Some(Found::Several(all.len().max(twins))),
    }
}

/// A target of a move that did not move with the others, and what it counts as if it is
/// found in the move's target.
pub(crate) struct NotMoved<'a> {
    pub uid: Uid,
    pub message_id: Option<&'a str>,
    /// Its size as indexed, where known.
    pub size: Option<u64>,
    /// `Unchanged` when it left its mailbox before our move (it is where it was asked to
    /// be); `Applied` when our move took it but the server named no new UID (no UIDPLUS).
    pub if_found: Outcome,
}

impl ImapProvider {
    /// Moves `live` to `target`, selects `target` and reads them back where they landed:
    /// that verifies the move and gives the index their new UIDs and modseqs. Returns the
    /// target's UIDVALIDITY and the UIDs that did not move (gone from the source meanwhile;
    /// on a server without UIDPLUS, whose MOVE names no new UIDs, every one). `target` stays
    /// selected.
    pub(crate) async fn move_and_verify(
        &mut self,
        live: &[Uid],
        target: &str,
        results: &mut Vec<ItemResult>,
    ) -> Result<(UidValidity, Vec<Uid>)> {
        let moved = match live.is_empty() {
            true => HashMap::new(),
            false => self
                .move_uids(live, target)
                .await
                .map_err(|e| unknown_if_lost(e, live))?,
        };
        let condstore = self.caps.has("CONDSTORE");
        let selected = self
            .select(target, condstore)
            .await
            .map_err(|e| unknown_if_lost(e, live))?;
        let validity = selected.uid_validity.unwrap_or(0);
        let new_uids: Vec<Uid> = moved.values().map(|(_, u)| *u).collect();
        let landed: HashMap<Uid, (u64, MessageFlags)> = self
            .read_flags(&new_uids)
            .await
            .map_err(|e| unknown_if_lost(e, live))?
            .into_iter()
            .map(|(u, m, f)| (u, (m, f)))
            .collect();
        let mut at: HashMap<Uid, usize> = results
            .iter()
            .enumerate()
            .map(|(i, r)| (r.uid, i))
            .collect();
        let mut not_moved = Vec::new();
        for uid in live {
            let Some((validity, new_uid)) = moved.get(uid) else {
                not_moved.push(*uid);
                continue;
            };
            let i = *at.entry(*uid).or_insert_with(|| {
                results.push(ItemResult::new(*uid, Outcome::Applied));
                results.len() - 1
            });
            let entry = &mut results[i];
            match landed.get(new_uid) {
                Some((modseq, flags)) => {
                    entry.moved_to = Some((target.to_string(), *validity, *new_uid));
                    entry.observed = Some((*modseq, flags.clone()));
                }
                None => {
                    entry.outcome = Outcome::Failed;
                    entry.error = Some(Error::verification_failed(format!(
                        "uid {uid} was not found in {target:?} after the move"
                    )));
                }
            }
        }
        Ok((validity, not_moved))
    }

    /// Accounts for messages that did not move with the others (see `NotMoved`), looking
    /// for each in `target` (selected, UIDVALIDITY `validity`) by its Message-ID, among the
    /// UIDs from `ours_from` on (those below were indexed there before this write).
    pub(crate) async fn settle_not_moved(
        &mut self,
        source: &str,
        (target, validity, ours_from): (&str, UidValidity, Uid),
        not_moved: &[NotMoved<'_>],
        results: &mut Vec<ItemResult>,
    ) -> Result<()> {
        if not_moved.is_empty() {
            return Ok(());
        }
        let taken: HashSet<Uid> = results
            .iter()
            .filter_map(|r| r.moved_to.as_ref().map(|(_, _, u)| *u))
            .collect();
        let found = self
            .find_by_message_id(not_moved, &taken, ours_from)
            .await?;
        let found_uids: Vec<Uid> = found
            .values()
            .filter_map(|f| match f {
                Found::One(uid) => Some(*uid),
                Found::Several(_) => None,
            })
            .collect();
        let landed: HashMap<Uid, (u64, MessageFlags)> = self
            .read_flags(&found_uids)
            .await?
            .into_iter()
            .map(|(u, m, f)| (u, (m, f)))
            .collect();
        for item in not_moved {
            let there =
                match found.get(&item.uid) {
                    Some(Found::One(new)) => landed.get(new).map(|seen| (*new, seen.clone())),
                    Some(Found::Several(n)) => {
                        results.retain(|r| r.uid != item.uid);
                        results.push(ItemResult::new(item.uid, Outcome::Unknown).with_error(
                        Error::outcome_unknown(format!(
                            "uid {} is not in {source:?}, and {n} messages in {target:?} share \
                             its Message-ID and size: which one it is cannot be told; nothing \
                             was changed",
                            item.uid
                        ))
                        .with_next_step("run: mailbroker sync, then look at them"),
                    ));
                        continue;
                    }
                    None => None,
                };
            results.retain(|r| r.uid != item.uid);
            results.push(match (there, item.if_found) {
                (Some((new_uid, observed)), outcome) => ItemResult {
                    moved_to: Some((target.to_string(), validity, new_uid)),
                    observed: Some(observed),
                    ..ItemResult::new(item.uid, outcome)
                },
                (None, Outcome::Applied) => ItemResult::new(item.uid, Outcome::Failed).with_error(
                    Error::verification_failed(format!(
                        "uid {} was not found in {target:?} after the move",
                        item.uid
                    )),
                ),
                (None, _) => ItemResult::new(item.uid, Outcome::Stale).with_error(
                    Error::stale_state(format!(
                        "uid {} is no longer in {source:?}: another client moved or deleted it; left alone",
                        item.uid
                    ))
                    .with_next_step("run: mailbroker sync"),
                ),
            });
        }
        Ok(())
    }

    /// What became of each message in the selected mailbox, found by its Message-ID and
    /// size (see the module's note on shared Message-IDs); a UID in `taken` (a message this
    /// batch moved there) is never claimed. The searches are sent one after the other: a
    /// SEARCH answer names no command, so pipelined searches would be ambiguous (RFC 3501
    /// §5.5), and Dovecot does answer them out of step. Each asks for many ids at once
    /// (`OR`); a FETCH of the matches' Message-ID and size then tells which is which.
    async fn find_by_message_id(
        &mut self,
        items: &[NotMoved<'_>],
        taken: &HashSet<Uid>,
        ours_from: Uid,
    ) -> Result<HashMap<Uid, Found>> {
        let searchable: Vec<(&NotMoved, String)> = items
            .iter()
            .filter_map(|i| Some((i, search_string(i.message_id?)?)))
            .collect();
        let mut hits: Vec<Uid> = Vec::new();
        for chunk in searchable.chunks(IDS_PER_SEARCH) {
            let keys: Vec<String> = chunk
                .iter()
                .map(|(_, id)| format!("HEADER Message-ID {id}"))
                .collect();
            let either = "OR ".repeat(keys.len() - 1);
            let command = format!("UID SEARCH {either}{}", keys.join(" "));
            self.command(&command, |resp| {
                if let Response::MailboxData(MailboxDatum::Search(uids)) = resp {
                    hits.extend(uids.iter().map(|u| Uid::from(*u)));
                }
            })
            .await?;
        }
        hits.retain(|u| !taken.contains(u) && *u >= ours_from);
        let candidates = self.identities(&hits).await?;
        Ok(searchable
            .iter()
            .filter_map(|(item, _)| Some((item.uid, matching(item, items, &candidates)?)))
            .collect())
    }

    /// The Message-ID and size of each of `uids` in the selected mailbox, read as the sync
    /// reads them.
    async fn identities(&mut self, uids: &[Uid]) -> Result<Vec<(Uid, String, Option<u64>)>> {
        let mut out = Vec::new();
        for set in uidset::chunks(uids, 64) {
            let seen = self.glimpse(&set).await?;
            out.extend(
                seen.into_iter()
                    .filter_map(|(uid, _, _, id, size)| Some((uid, id?, size))),
            );
        }
        Ok(out)
    }

    /// Moves `uids` of the selected mailbox to `target`; returns each moved UID's new place
    /// from COPYUID. A command refused for `EXPUNGEISSUED` (another session expunged some of
    /// them; the server then moved none) is sent again for those still there.
    pub(crate) async fn move_uids(
        &mut self,
        uids: &[Uid],
        target: &str,
    ) -> Result<HashMap<Uid, (UidValidity, Uid)>> {
        let quoted = crate::convert::quoted_name(target);
        let mut moved = HashMap::new();
        let mut pending = uids.to_vec();
        for attempt in 1..=MOVE_ATTEMPTS {
            match self.move_once(&pending, &quoted, &mut moved).await {
                Ok(()) => break,
                Err(e) if attempt < MOVE_ATTEMPTS && e.message().contains(EXPUNGE_ISSUED) => {
                    pending.retain(|u| !moved.contains_key(u));
                    pending = self.present(&pending).await?;
                    tracing::debug!(left = pending.len(), "imap: move refused, expunge issued");
                    if pending.is_empty() {
                        break;
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(moved)
    }

    async fn move_once(
        &mut self,
        uids: &[Uid],
        quoted: &str,
        moved: &mut HashMap<Uid, (UidValidity, Uid)>,
    ) -> Result<()> {
        for set in uidset::chunks(uids, quoted.len() + 32) {
            if self.caps.has("MOVE") {
                let codes = self
                    .command_codes(&format!("UID MOVE {set} {quoted}"))
                    .await?;
                collect_copyuid(&codes, moved);
            } else {
                // UIDPLUS fallback: expunge exactly these UIDs, never a bare EXPUNGE.
                let codes = self
                    .command_codes(&format!("UID COPY {set} {quoted}"))
                    .await?;
                collect_copyuid(&codes, moved);
                self.command_codes(&format!("UID STORE {set} +FLAGS.SILENT (\\Deleted)"))
                    .await?;
                self.command_codes(&format!("UID EXPUNGE {set}")).await?;
            }
        }
        Ok(())
    }

    /// Which of `uids` the selected mailbox still holds (`UID SEARCH UID <set>`), sorted.
    pub(crate) async fn present(&mut self, uids: &[Uid]) -> Result<Vec<Uid>> {
        let mut out = Vec::with_capacity(uids.len());
        for set in uidset::chunks(uids, 32) {
            out.extend(self.uid_list(&set).await?);
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Sends one command and collects the COPYUID codes of its untagged and tagged answers
    /// (async-imap's own calls drop the tagged response code).
    pub(crate) async fn command_codes(&mut self, command: &str) -> Result<Vec<CopyUid>> {
        let mut codes = Vec::new();
        self.command(command, |resp| {
            if let Response::Data { outcome, .. } | Response::Done { outcome, .. } = resp
                && let Some(ResponseCode::CopyUid(v, from, to)) = &outcome.code
            {
                codes.push((*v, from.clone(), to.clone()));
            }
        })
        .await?;
        Ok(codes)
    }
}

/// A Message-ID as an IMAP quoted string for SEARCH, or None when it cannot be one (a
/// control character or non-ASCII: such a message is not looked for).
fn search_string(message_id: &str) -> Option<String> {
    if message_id.is_empty() || !message_id.chars().all(|c| c.is_ascii() && !c.is_control()) {
        return None;
    }
    Some(format!(
        "\"{}\"",
        message_id.replace('\\', "\\\\").replace('"', "\\\"")
    ))
}

fn expand(set: &[UidSetMember]) -> Vec<Uid> {
    set.iter()
        .flat_map(|m| match m {
            UidSetMember::Uid(u) => Uid::from(*u)..=Uid::from(*u),
            UidSetMember::UidRange(r) => Uid::from(*r.start())..=Uid::from(*r.end()),
        })
        .collect()
}

fn collect_copyuid(codes: &[CopyUid], into: &mut HashMap<Uid, (UidValidity, Uid)>) {
    for (validity, from, to) in codes {
        for (src, dst) in expand(from).into_iter().zip(expand(to)) {
            into.insert(src, (*validity, dst));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_are_quoted_for_search_or_left_out() {
        assert_eq!(
            search_string("<m1@example.test>").as_deref(),
            Some("\"<m1@example.test>\"")
        );
        assert_eq!(
            search_string(r#"<a"b\c@x>"#).as_deref(),
            Some(r#""<a\"b\\c@x>""#)
        );
        assert_eq!(search_string("<a\r\nb@x>"), None);
        assert_eq!(search_string("<ü@x>"), None);
        assert_eq!(search_string(""), None);
    }
}
