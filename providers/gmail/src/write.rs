//! Writes on Gmail: a batch becomes label ids to add and remove, sent as `batchModify` calls of
//! at most 1,000 ids. Preconditions come from one `history.list` since the index's history id
//! (only the messages it names are re-read); verification is one `history.list` since the
//! history id just before the write, replayed over each message's indexed labels.

use std::collections::{BTreeSet, HashMap, HashSet};

use mailbroker_core::{
    Capabilities, DeleteBatch, DeleteMode, Error, FlagOp, ItemResult, Outcome, RemoteId, Result,
    WriteBatch, WriteTarget,
};

use crate::GmailProvider;
use crate::api::{self, MAX_BATCH};
use crate::convert::{self, Cursor};
use crate::oauth::SCOPE_FULL;

/// Label ids to add and remove, the same for every message of a batch.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Delta {
    pub add: Vec<String>,
    pub remove: Vec<String>,
}

/// A message about to be written: its id and the labels it has now.
struct Target {
    remote: RemoteId,
    id: String,
    labels: BTreeSet<String>,
}

impl Target {
    fn of(t: &WriteTarget) -> Target {
        Target {
            remote: t.id.clone(),
            id: t.id.as_str().to_string(),
            labels: t.flags.raw.iter().cloned().collect(),
        }
    }
}

/// The label change a flag operation and a move mean. `tag_id` names a tag's label; a tag
/// without one (`None`) is left out: no message can carry a label Gmail does not have.
pub fn delta_of(
    op: &FlagOp,
    from: &str,
    move_to: Option<&str>,
    tag_id: impl Fn(&str) -> Option<String>,
) -> Result<Delta> {
    let mut d = Delta::default();
    let mut put = |add: bool, label: String| match add {
        true => d.add.push(label),
        false => d.remove.push(label),
    };
    if let Some(read) = op.read {
        put(!read, "UNREAD".into());
    }
    if let Some(flagged) = op.flagged {
        put(flagged, "STARRED".into());
    }
    for (add, tags) in [(true, &op.add_tags), (false, &op.remove_tags)] {
        for tag in tags {
            if let Some(id) = tag_id(tag) {
                put(add, id);
            }
        }
    }
    if let Some(to) = move_to {
        let place = |name: &str| {
            convert::place_label(name).ok_or_else(|| {
                Error::not_found(format!("Gmail has no mailbox {name:?}"))
                    .with_next_step("move to a role: inbox, archive, junk or trash")
            })
        };
        let (source, target) = (place(from)?, place(to)?);
        if matches!(source, Some("SENT" | "DRAFT")) {
            return Err(Error::unsupported(format!(
                "Gmail cannot move messages out of {from}: its label cannot be removed"
            )));
        }
        if let Some(l) = source {
            put(false, l.into());
        }
        if let Some(l) = target {
            put(true, l.into());
        }
    }
    Ok(d)
}

/// What a batch will send, for dry runs and the journal: label ids where the account cursor
/// knows them, else the tag's name marked new.
pub fn plan(cursor: &Cursor, batch: &WriteBatch) -> Vec<String> {
    let label = |tag: &str| {
        Some(
            cursor
                .label_id(tag)
                .map_or_else(|| format!("{tag} (new label)"), str::to_string),
        )
    };
    let change = match delta_of(&batch.op, &batch.mailbox, batch.move_to.as_deref(), label) {
        Ok(d) => format!("add {:?} remove {:?}", d.add, d.remove),
        Err(e) => format!("refused: {}", e.message()),
    };
    let calls = batch.targets.len().div_ceil(MAX_BATCH);
    // A batch that moves nothing carries the account's messages of every mailbox.
    let place = match batch.mailbox.as_str() {
        "" => "all mailboxes",
        mailbox => mailbox,
    };
    vec![
        format!("gmail {place}: history.list since the indexed history id (precondition)"),
        format!(
            "gmail {place}: batchModify ×{calls} ({} ids, ≤ {MAX_BATCH} each) {change}",
            batch.targets.len()
        ),
        format!("gmail {place}: history.list since the pre-write history id (verify)"),
    ]
}

pub fn plan_delete(caps: &Capabilities, batch: &DeleteBatch) -> Vec<String> {
    let n = batch.targets.len();
    let calls = n.div_ceil(MAX_BATCH);
    let send = match batch.mode {
        DeleteMode::Trash => format!("batchModify ×{calls} ({n} ids) add [\"TRASH\"]"),
        DeleteMode::Permanent if caps.has(SCOPE_FULL) => {
            format!("batchDelete ×{calls} ({n} ids)")
        }
        DeleteMode::Permanent => {
            "refused: permanent deletion needs the https://mail.google.com/ scope".to_string()
        }
    };
    vec![
        format!("gmail {}: history.list (identity check)", batch.mailbox),
        format!("gmail {}: {send}", batch.mailbox),
        format!("gmail {}: history.list (verify)", batch.mailbox),
    ]
}

/// What verification found for one message: its labels after replaying history over the
/// indexed ones, the last record that touched it, and whether it was deleted.
struct Seen {
    labels: BTreeSet<String>,
    last: u64,
    deleted: bool,
}

fn replay(records: &[api::History], targets: &[Target]) -> HashMap<String, Seen> {
    let labels: HashMap<&str, &BTreeSet<String>> =
        targets.iter().map(|t| (t.id.as_str(), &t.labels)).collect();
    let mut seen: HashMap<String, Seen> = HashMap::new();
    for h in records {
        let record = h.id;
        let changes = h
            .labels_added
            .iter()
            .map(|c| (&c.id, Some((true, &c.label_ids))))
            .chain(
                h.labels_removed
                    .iter()
                    .map(|c| (&c.id, Some((false, &c.label_ids)))),
            )
            .chain(h.messages_deleted.iter().map(|id| (id, None)));
        for (id, change) in changes {
            let Some(start) = labels.get(id.as_str()) else {
                continue;
            };
            let s = seen.entry(id.clone()).or_insert_with(|| Seen {
                labels: (*start).clone(),
                last: 0,
                deleted: false,
            });
            s.last = record;
            match change {
                Some((true, list)) => s.labels.extend(list.iter().cloned()),
                Some((false, list)) => list.iter().for_each(|l| {
                    s.labels.remove(l);
                }),
                None => s.deleted = true,
            }
        }
    }
    seen
}

/// How a write's calls went: ids whose answer was lost, and the first target not sent
/// (with why) when a call failed outright.
struct Sent {
    unknown: HashSet<String>,
    stopped: Option<(usize, Error)>,
}

impl GmailProvider {
    /// The label id for a tag: from the cached map, then a fresh label list, then created
    /// (`create`). `None`: Gmail has no such label.
    async fn tag_label(&mut self, tag: &str, create: bool) -> Result<Option<String>> {
        if let Some(id) = self.cursor.label_id(tag) {
            return Ok(Some(id.to_string()));
        }
        let labels = api::labels(&self.client).await?;
        self.cursor.set_labels(&labels);
        if let Some(id) = self.cursor.label_id(tag) {
            return Ok(Some(id.to_string()));
        }
        if !create {
            return Ok(None);
        }
        let label = api::create_label(&self.client, tag).await?;
        self.cursor.labels.insert(label.id.clone(), label.name);
        Ok(Some(label.id))
    }

    /// A label the account's cached map does not know (created by an earlier write, whose
    /// map was not kept, or by another client since the last sync) would be read back as no
    /// tag at all: the map is read again once and the states read back are taken anew.
    async fn tags_with_new_labels(&mut self, results: &mut [ItemResult]) -> Result<()> {
        let unknown = results
            .iter()
            .filter_map(|r| r.observed.as_ref())
            .any(|(_, flags)| flags.raw.iter().any(|l| !self.cursor.knows(l)));
        if !unknown {
            return Ok(());
        }
        let labels = api::labels(&self.client).await?;
        self.cursor.set_labels(&labels);
        for (_, flags) in results.iter_mut().filter_map(|r| r.observed.as_mut()) {
            *flags = self.cursor.flags_of(&flags.raw);
        }
        Ok(())
    }

    async fn delta(&mut self, batch: &WriteBatch) -> Result<Delta> {
        // Tags are looked up (and created) before anything is read or sent.
        let mut ids: HashMap<String, Option<String>> = HashMap::new();
        for (tags, create) in [(&batch.op.add_tags, true), (&batch.op.remove_tags, false)] {
            for tag in tags {
                let id = self.tag_label(tag, create).await?;
                ids.insert(tag.to_lowercase(), id);
            }
        }
        let lookup = |tag: &str| ids.get(&tag.to_lowercase()).cloned().flatten();
        delta_of(&batch.op, &batch.mailbox, batch.move_to.as_deref(), lookup)
    }

    pub(crate) async fn apply_batch(&mut self, batch: &WriteBatch) -> Result<Vec<ItemResult>> {
        let delta = self.delta(batch).await?;
        let mut targets: Vec<Target> = batch.targets.iter().map(Target::of).collect();
        let seen: HashMap<String, u64> = targets
            .iter()
            .zip(&batch.targets)
            .map(|(t, w)| (t.id.clone(), convert::history_of(&w.version)))
            .collect();
        let since = match convert::cursor_history(&batch.synced) {
            0 => seen.values().copied().min().unwrap_or(0),
            synced => synced,
        };
        let modseqs = seen;
        let (mut results, pre_write) = self
            .preconditions(&mut targets, &modseqs, since, batch)
            .await?;
        let sent = self.send(&targets, |ids| {
            let client = self.client.clone();
            let delta = delta.clone();
            async move { api::batch_modify(&client, &ids, &delta.add, &delta.remove).await }
        });
        let sent = sent.await?;
        let place = batch.move_to.as_deref();
        let holds = |seen: &Seen| {
            let flags = self
                .cursor
                .flags_of(&seen.labels.iter().cloned().collect::<Vec<_>>());
            batch.op.holds_in(&flags)
                && place.is_none_or(|p| convert::place_of(seen.labels.iter()) == p)
        };
        results.extend(self.verify(&targets, pre_write, sent, holds).await);
        self.tags_with_new_labels(&mut results).await?;
        for r in &mut results {
            if let (Outcome::Applied, Some(to)) = (r.outcome, place) {
                r.moved_to = Some((to.to_string(), r.id.clone()));
            }
        }
        Ok(results)
    }

    /// One history.list since `since`: targets it names are re-read, and those Gmail changed
    /// since the index saw them are left out as stale (or unchanged, when they already show
    /// the request). Returns their results and the history id to verify from.
    async fn preconditions(
        &mut self,
        targets: &mut Vec<Target>,
        modseqs: &HashMap<String, u64>,
        since: u64,
        batch: &WriteBatch,
    ) -> Result<(Vec<ItemResult>, u64)> {
        let (suspects, pre_write) = self.changed_since(since, targets, modseqs).await?;
        let mut results = Vec::new();
        let mut keep = Vec::with_capacity(targets.len());
        for mut t in std::mem::take(targets) {
            if !suspects.contains(&t.id) {
                keep.push(t);
                continue;
            }
            let current = match api::metadata(&self.client, &t.id).await {
                Ok(m) => m,
                Err(e) if e.is_not_found() => {
                    let gone = Error::not_found("the message is gone from Gmail")
                        .with_next_step("run: mailbroker sync");
                    results
                        .push(ItemResult::new(t.remote.clone(), Outcome::Failed).with_error(gone));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let history = current.history_id;
            if history <= modseqs.get(&t.id).copied().unwrap_or(0) {
                t.labels = current.label_ids.into_iter().collect();
                keep.push(t);
                continue;
            }
            let flags = self.cursor.flags_of(&current.label_ids);
            let place = convert::place_of(current.label_ids.iter());
            let done =
                batch.op.holds_in(&flags) && batch.move_to.as_deref().is_none_or(|m| m == place);
            let mut r = ItemResult::new(t.remote.clone(), Outcome::Unchanged);
            if !done {
                r = ItemResult::new(t.remote.clone(), Outcome::Stale).with_error(
                    Error::stale_state("changed on Gmail since it was indexed; left alone")
                        .with_next_step("run: mailbroker sync, then repeat the request"),
                );
            }
            r.observed = Some((convert::version(history), flags));
            results.push(r);
        }
        *targets = keep;
        Ok((results, pre_write))
    }

    /// The targets history says changed after the index last saw them (each target's own
    /// history id, so the index's own verified writes do not count), or all of them when
    /// history that old is gone; and the mailbox's history id now.
    async fn changed_since(
        &self,
        since: u64,
        targets: &[Target],
        modseqs: &HashMap<String, u64>,
    ) -> Result<(HashSet<String>, u64)> {
        let (records, now) = api::history_or_now(&self.client, since).await?;
        let Some(records) = records else {
            return Ok((targets.iter().map(|t| t.id.clone()).collect(), now));
        };
        let last = api::last_change(&records);
        let seen = |t: &Target| modseqs.get(&t.id).copied().unwrap_or(0);
        let changed = targets
            .iter()
            .filter(|t| last.get(&t.id).is_some_and(|at| *at > seen(t)))
            .map(|t| t.id.clone())
            .collect();
        Ok((changed, now))
    }

    /// Sends `call` for the targets in chunks of ≤ 1,000 ids. A failure before anything was
    /// sent is the batch's error; later, the rest is reported failed (see `Sent`).
    async fn send<F, Fut>(&self, targets: &[Target], call: F) -> Result<Sent>
    where
        F: Fn(Vec<String>) -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        let mut sent = Sent {
            unknown: HashSet::new(),
            stopped: None,
        };
        for (n, chunk) in targets.chunks(MAX_BATCH).enumerate() {
            let ids: Vec<String> = chunk.iter().map(|t| t.id.clone()).collect();
            match call(ids.clone()).await {
                Ok(()) => {}
                Err(e) if e.is_unknown_outcome() => sent.unknown.extend(ids),
                Err(e) if n == 0 => return Err(e),
                Err(e) => {
                    sent.stopped = Some((n * MAX_BATCH, e));
                    break;
                }
            }
        }
        Ok(sent)
    }

    /// One history.list since `pre_write`, replayed over each sent target's labels: `holds`
    /// says whether the result is what was asked. A target whose call got no answer and that
    /// history does not show changed is `Unknown`: never resent from here.
    async fn verify(
        &self,
        targets: &[Target],
        pre_write: u64,
        sent: Sent,
        holds: impl Fn(&Seen) -> bool,
    ) -> Vec<ItemResult> {
        let stop = sent.stopped.as_ref().map_or(targets.len(), |(n, _)| *n);
        let (written, unsent) = targets.split_at(stop);
        let mut results: Vec<ItemResult> = unsent
            .iter()
            .filter_map(|t| {
                let e = sent.stopped.as_ref()?.1.clone();
                Some(ItemResult::new(t.remote.clone(), Outcome::Failed).with_error(e))
            })
            .collect();
        if written.is_empty() {
            return results;
        }
        let seen = match api::history_since(&self.client, pre_write).await {
            Ok(h) => replay(&h.records, written),
            Err(e) => {
                let e = Error::outcome_unknown(format!(
                    "the write was sent but could not be verified: {e}"
                ))
                .with_next_step("run: mailbroker sync, then check the messages");
                results.extend(written.iter().map(|t| {
                    ItemResult::new(t.remote.clone(), Outcome::Unknown).with_error(e.clone())
                }));
                return results;
            }
        };
        for t in written {
            let r = match seen.get(&t.id) {
                Some(s) if holds(s) => {
                    let raw: Vec<String> = s.labels.iter().cloned().collect();
                    let mut r = ItemResult::new(t.remote.clone(), Outcome::Applied);
                    r.observed = (!s.deleted)
                        .then(|| (convert::version(s.last), self.cursor.flags_of(&raw)));
                    r
                }
                Some(s) if s.deleted => ItemResult::new(t.remote.clone(), Outcome::Failed)
                    .with_error(Error::not_found(
                        "the message was deleted on Gmail meanwhile",
                    )),
                None if sent.unknown.contains(&t.id) => ItemResult::new(
                    t.remote.clone(),
                    Outcome::Unknown,
                )
                .with_error(
                    Error::outcome_unknown(
                        "the write's answer was lost and Gmail's history does not show it applied",
                    )
                    .with_next_step(
                        "run the request again: mailbroker re-reads the messages before writing",
                    ),
                ),
                _ => ItemResult::new(t.remote.clone(), Outcome::Failed).with_error(
                    Error::verification_failed(
                        "Gmail's history does not show the change on this message",
                    ),
                ),
            };
            results.push(r);
        }
        results
    }

    pub(crate) async fn delete_batch(&mut self, batch: &DeleteBatch) -> Result<Vec<ItemResult>> {
        if batch.mode == DeleteMode::Permanent
            && !self.client.scopes().await.iter().any(|s| s == SCOPE_FULL)
        {
            return Err(Error::insufficient_scope(
                "permanent deletion on Gmail needs the https://mail.google.com/ scope",
            )
            .with_next_step(format!(
                "run: mailbroker account upgrade-scope {}",
                self.account
            )));
        }
        let mut targets: Vec<Target> = batch.targets.iter().map(Target::of).collect();
        // Identity check: a message history shows deleted is already done.
        let since = self.cursor.history_id;
        let (records, pre_write) = api::history_or_now(&self.client, since).await?;
        let (deleted, _) = api::touched(records.as_deref().unwrap_or_default());
        let (gone, keep): (Vec<Target>, Vec<Target>) =
            targets.into_iter().partition(|t| deleted.contains(&t.id));
        targets = keep;
        let mut results: Vec<ItemResult> = gone
            .iter()
            .map(|t| ItemResult::new(t.remote.clone(), Outcome::Unchanged))
            .collect();
        let client = self.client.clone();
        let (sent, trash) = match batch.mode {
            DeleteMode::Trash => {
                let add = vec!["TRASH".to_string()];
                let sent = self.send(&targets, |ids| {
                    let (client, add) = (client.clone(), add.clone());
                    async move { api::batch_modify(&client, &ids, &add, &[]).await }
                });
                (sent.await?, true)
            }
            DeleteMode::Permanent => {
                let sent = self.send(&targets, |ids| {
                    let client = client.clone();
                    async move { api::batch_delete(&client, &ids).await }
                });
                (sent.await?, false)
            }
        };
        let holds = |s: &Seen| match trash {
            true => s.labels.contains("TRASH"),
            false => s.deleted,
        };
        let mut verified = self.verify(&targets, pre_write, sent, holds).await;
        for r in &mut verified {
            if trash && r.outcome == Outcome::Applied {
                r.moved_to = Some(("TRASH".to_string(), r.id.clone()));
            }
        }
        results.extend(verified);
        Ok(results)
    }
}
