//! Writes: read (`$seen`), flagged (`$flagged`), tags (other keywords) and moves
//! (`mailboxIds`) as `Email/set` patches, at most `maxObjectsInSet` a call, each call followed
//! in the same request by an `Email/get` of what it wrote: methods of one request run in
//! order (RFC 8620 §3.3), so that read-back sees the write.
//!
//! - Preconditions: `Email/changes` since the email state the index was synced at (the
//!   batch's `synced`): only emails changed since are read again; one that already shows
//!   the request is `unchanged`, one that shows something else is `stale_state` and left
//!   alone. Without a usable state every target is read again. `ifInState` is not used: it
//!   is account-wide and would refuse a whole batch for one stranger's change.
//! - Keyword patches set `true` or remove with `null` (Cyrus and Fastmail refuse `false`).
//!   A tag holding `/` or `~` goes as the email's whole `keywords` object instead of a
//!   JSON-pointer patch: Cyrus 3.6 stores an escaped `~1` literally.
//! - A request whose answer is lost leaves its emails `outcome_unknown`; a rerun's
//!   preconditions find what landed.

use std::collections::{BTreeMap, HashSet};

use crate::client::Client;
use crate::convert::{self, Held};
use crate::labels::Labels;
use crate::wire::{Call, ChangesResponse, Email, GetResponse, PatchObject, SetResponse, nth};
use mailbroker_core::{
    Error, FlagOp, ItemResult, Outcome, RemoteId, Result, Version, WriteBatch, WriteTarget,
};

/// A result with the state the server showed.
trait Observed {
    fn observed(self, observed: (Version, mailbroker_core::MessageFlags)) -> Self;
}

impl Observed for ItemResult {
    fn observed(mut self, observed: (Version, mailbroker_core::MessageFlags)) -> ItemResult {
        self.observed = Some(observed);
        self
    }
}

/// Properties a precondition or a read-back reads.
pub(crate) const STATE: [&str; 3] = ["id", "keywords", "mailboxIds"];

/// An `Email/get` of `ids`' state (`STATE`).
pub(crate) fn read_state<'a>(ids: impl IntoIterator<Item = &'a str>) -> Call {
    Call::email_get(ids, &STATE)
}

/// The mailbox ids a batch names: its own and its move target's, and with tags as
/// mailboxes, every label's.
struct Places<'a> {
    from: Option<String>,
    to: Option<(String, String)>,
    labels: Option<&'a Labels>,
}

impl<'a> Places<'a> {
    fn of(batch: &WriteBatch, labels: Option<&'a Labels>) -> Result<Places<'a>> {
        let id = |name: &str| batch.folders.get(name).cloned();
        let to = match &batch.move_to {
            Some(target) => Some((
                target.clone(),
                id(target).ok_or_else(|| {
                    Error::not_found(format!("jmap: no mailbox {target:?} in the index"))
                        .with_next_step("sync the account, then try again")
                })?,
            )),
            None => None,
        };
        Ok(Places {
            from: id(&batch.mailbox),
            to,
            labels,
        })
    }

    /// What the server holds, in our terms: with tags as mailboxes, the tags are its
    /// label mailboxes, not its keywords.
    fn held(&self, mut held: Held) -> Held {
        if let Some(labels) = self.labels {
            held.flags.tags = labels.tags_of(&held.mailboxes);
        }
        held
    }

    /// Where an email in `mailboxes` is indexed now, when that is not the batch's mailbox
    /// (a label removed from the email it was indexed in).
    fn moved(&self, batch: &WriteBatch, mailboxes: &HashSet<String>) -> Option<String> {
        let labels = self.labels?;
        let place = convert::place_among(mailboxes.iter().filter_map(|id| labels.get(id)))?;
        (place.path != batch.mailbox).then(|| place.path.clone())
    }

    /// Whether `now` shows the request done: the operation, and the email in the target.
    fn done(&self, op: &FlagOp, now: &Held) -> bool {
        op.holds_in(&now.flags)
            && self.to.as_ref().is_none_or(|(_, to)| {
                now.mailboxes.contains(to)
                    && self
                        .from
                        .as_ref()
                        .is_none_or(|f| !now.mailboxes.contains(f))
            })
    }
}

/// Applies one batch: preconditions, `Email/set` with its read-back, each email's result.
pub async fn apply(
    client: &mut Client,
    batch: &WriteBatch,
    labels: Option<&Labels>,
) -> Result<Vec<ItemResult>> {
    let places = Places::of(batch, labels)?;
    let (mut results, to_write) = preconditions(client, batch, &places).await?;
    for chunk in to_write.chunks(client.limits.max_objects_in_set) {
        results.extend(write_chunk(client, batch, &places, chunk).await);
    }
    Ok(results)
}

/// The targets to write, and the results of those already settled: changed since the sync
/// (`stale_state`, or `unchanged` where the request already shows), or gone.
async fn preconditions<'a>(
    client: &mut Client,
    batch: &'a WriteBatch,
    places: &Places<'_>,
) -> Result<(Vec<ItemResult>, Vec<&'a WriteTarget>)> {
    let changed = match changed_since(client, batch.synced.as_str()).await? {
        Some(changed) => changed,
        None => batch
            .targets
            .iter()
            .map(|t| t.id.as_str().to_string())
            .collect(),
    };
    let suspects: Vec<&WriteTarget> = batch
        .targets
        .iter()
        .filter(|t| changed.contains(t.id.as_str()))
        .collect();
    let ids: Vec<RemoteId> = suspects.iter().map(|t| t.id.clone()).collect();
    let now = read(client, &ids, places).await?;
    let mut results = Vec::new();
    let mut to_write = Vec::new();
    for target in &batch.targets {
        if !changed.contains(target.id.as_str()) {
            to_write.push(target);
            continue;
        }
        let Some((state, now)) = now.get(target.id.as_str()) else {
            results.push(
                ItemResult::new(target.id.clone(), Outcome::Stale)
                    .with_error(Error::stale_state("the email is gone from the server")),
            );
            continue;
        };
        let as_indexed = now.flags.read == target.flags.read
            && now.flags.flagged == target.flags.flagged
            && same_tags(&now.flags.tags, &target.flags.tags)
            && places
                .from
                .as_ref()
                .is_none_or(|f| now.mailboxes.contains(f));
        let observed = (Version::new(state), now.flags.clone());
        if places.done(&batch.op, now) {
            results.push(ItemResult::new(target.id.clone(), Outcome::Unchanged).observed(observed));
        } else if as_indexed {
            to_write.push(target);
        } else {
            results.push(
                ItemResult::new(target.id.clone(), Outcome::Stale)
                    .observed(observed)
                    .with_error(Error::stale_state(
                        "changed on the server since the last sync",
                    )),
            );
        }
    }
    Ok((results, to_write))
}

/// The ids of emails changed (or destroyed) since `state`; `None` when that cannot be told
/// (no state, or one the server can no longer calculate changes from).
async fn changed_since(client: &mut Client, state: &str) -> Result<Option<HashSet<String>>> {
    if state.is_empty() {
        return Ok(None);
    }
    let mut changed = HashSet::new();
    let mut since = state.to_string();
    loop {
        let call = Call::EmailChanges {
            since_state: since,
            max_changes: client.limits.max_objects_in_get,
        };
        let answers = client.call(vec![call]).await?;
        let changes: ChangesResponse = match nth(&answers, 0, "Email/changes") {
            Ok(changes) => changes,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        for ids in [changes.created, changes.updated, changes.destroyed] {
            changed.extend(ids);
        }
        if !changes.has_more_changes {
            return Ok(Some(changed));
        }
        since = changes.new_state;
    }
}

/// What the server holds now of `ids`, with the email state it was read at.
async fn read(
    client: &mut Client,
    ids: &[RemoteId],
    places: &Places<'_>,
) -> Result<BTreeMap<String, (String, Held)>> {
    let mut out = BTreeMap::new();
    for chunk in ids.chunks(client.limits.max_objects_in_get) {
        let answers = client
            .call(vec![read_state(chunk.iter().map(RemoteId::as_str))])
            .await?;
        collect(&nth(&answers, 0, "Email/get")?, &mut out, places);
    }
    Ok(out)
}

fn collect(
    got: &GetResponse<Email>,
    out: &mut BTreeMap<String, (String, Held)>,
    places: &Places<'_>,
) {
    for (id, held) in convert::held(got) {
        out.insert(id, (got.state.clone(), places.held(held)));
    }
}

/// Writes one chunk and reads it back in the same request; each email's result.
async fn write_chunk(
    client: &mut Client,
    batch: &WriteBatch,
    places: &Places<'_>,
    chunk: &[&WriteTarget],
) -> Vec<ItemResult> {
    let update = chunk
        .iter()
        .map(|t| (t.id.as_str().to_string(), patch(&batch.op, places, t)))
        .collect();
    let ids = chunk.iter().map(|t| t.id.as_str());
    let sent = client
        .call(vec![Call::EmailUpdate(update), read_state(ids)])
        .await;
    let answers = match sent {
        Ok(answers) => answers,
        Err(e) => {
            let e = Error::outcome_unknown(format!("jmap Email/set: {}", e.message()));
            return unknown(chunk, &e);
        }
    };
    let set: SetResponse = match nth(&answers, 0, "Email/set") {
        Ok(set) => set,
        Err(e) => {
            let e = Error::provider_write_failed(e.message().to_string());
            return chunk
                .iter()
                .map(|t| ItemResult::new(t.id.clone(), Outcome::Failed).with_error(e.clone()))
                .collect();
        }
    };
    let mut now = BTreeMap::new();
    if let Ok(got) = nth(&answers, 1, "Email/get") {
        collect(&got, &mut now, places);
    }
    chunk
        .iter()
        .map(|t| result_of(t, &set, &now, batch, places))
        .collect()
}

fn unknown(chunk: &[&WriteTarget], e: &Error) -> Vec<ItemResult> {
    chunk
        .iter()
        .map(|t| ItemResult::new(t.id.clone(), Outcome::Unknown).with_error(e.clone()))
        .collect()
}

/// One email's result: refused by the server, or applied as its read-back shows.
fn result_of(
    target: &WriteTarget,
    set: &SetResponse,
    now: &BTreeMap<String, (String, Held)>,
    batch: &WriteBatch,
    places: &Places<'_>,
) -> ItemResult {
    let id = target.id.as_str();
    if let Some(refused) = set.not_updated.get(id) {
        let kind = &refused.kind;
        let why = refused.description.as_deref().unwrap_or_default();
        return ItemResult::new(target.id.clone(), Outcome::Failed).with_error(
            Error::provider_write_failed(format!("jmap Email/set refused it: {kind} {why}")),
        );
    }
    let Some((state, after)) = now.get(id) else {
        return ItemResult::new(target.id.clone(), Outcome::Unknown).with_error(
            Error::outcome_unknown("jmap: the email could not be read back after the write"),
        );
    };
    let observed = (Version::new(state), after.flags.clone());
    if !places.done(&batch.op, after) {
        return ItemResult::new(target.id.clone(), Outcome::Failed)
            .observed(observed)
            .with_error(Error::verification_failed(
                "jmap: the read-back does not show the write",
            ));
    }
    let mut result = ItemResult::new(target.id.clone(), Outcome::Applied).observed(observed);
    let moved = places.to.as_ref().map(|(name, _)| name.clone());
    if let Some(name) = moved.or_else(|| places.moved(batch, &after.mailboxes)) {
        result.moved_to = Some((name, target.id.clone()));
    }
    result
}

/// The `Email/set` patch for one email.
fn patch(op: &FlagOp, places: &Places<'_>, target: &WriteTarget) -> PatchObject {
    let mut p = PatchObject::default();
    if let Some((_, to)) = &places.to {
        if let Some(from) = &places.from {
            p.mailbox(from, false);
        }
        p.mailbox(to, true);
    }
    // With tags as mailboxes, only read and flagged remain keywords.
    let keywords = match places.labels {
        Some(labels) => {
            let now = indexed_mailboxes(places, labels, target);
            let labels = labels.after(&now, &op.add_tags, &op.remove_tags);
            labels.add.iter().for_each(|id| p.mailbox(id, true));
            labels.remove.iter().for_each(|id| p.mailbox(id, false));
            FlagOp {
                read: op.read,
                flagged: op.flagged,
                ..FlagOp::default()
            }
        }
        None => op.clone(),
    };
    keyword_patch(&keywords, target, &mut p);
    p
}

/// The mailboxes the index has an email in: its place and its labels.
fn indexed_mailboxes(
    places: &Places<'_>,
    labels: &Labels,
    target: &WriteTarget,
) -> HashSet<String> {
    let tags = target.flags.tags.iter();
    let ids = tags.filter_map(|t| labels.id_of(t).ok().flatten().map(str::to_string));
    places.from.iter().cloned().chain(ids).collect()
}

/// Keyword patches for `op`: each keyword set `true` or removed with `null`, or the whole
/// `keywords` object where a tag holds `/` or `~`.
fn keyword_patch(op: &FlagOp, target: &WriteTarget, p: &mut PatchObject) {
    let awkward = |t: &String| t.contains('/') || t.contains('~');
    if op.add_tags.iter().chain(&op.remove_tags).any(awkward) {
        // The whole object, as the index knows it with the change applied.
        let mut keywords: Vec<String> = target.flags.raw.clone();
        let mut set = |k: &str, on: bool| match on {
            true if !keywords.iter().any(|x| x == k) => keywords.push(k.to_string()),
            true => {}
            false => keywords.retain(|x| !x.eq_ignore_ascii_case(k)),
        };
        op.read.inspect(|r| set("$seen", *r));
        op.flagged.inspect(|f| set("$flagged", *f));
        op.add_tags.iter().for_each(|t| set(t, true));
        op.remove_tags.iter().for_each(|t| set(t, false));
        p.keywords(&keywords);
    } else {
        op.read.inspect(|r| p.keyword("$seen", *r));
        op.flagged.inspect(|f| p.keyword("$flagged", *f));
        op.add_tags.iter().for_each(|t| p.keyword(t, true));
        op.remove_tags.iter().for_each(|t| p.keyword(t, false));
    }
}

fn same_tags(a: &[String], b: &[String]) -> bool {
    let fold = |t: &[String]| -> HashSet<String> { t.iter().map(|x| x.to_lowercase()).collect() };
    fold(a) == fold(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_patch_sets_true_and_removes_with_null() {
        let op = FlagOp {
            read: Some(true),
            flagged: Some(false),
            add_tags: vec!["Work".into()],
            remove_tags: vec![],
        };
        let places = Places {
            from: Some("in".into()),
            to: Some(("Archive".into(), "ar".into())),
            labels: None,
        };
        let target = WriteTarget {
            id: RemoteId::new("e1"),
            version: Version::default(),
            message_id: None,
            size: None,
            flags: Default::default(),
        };
        assert_eq!(
            serde_json::to_value(patch(&op, &places, &target)).unwrap(),
            json!({ "keywords/$seen": true, "keywords/$flagged": null, "keywords/Work": true,
                "mailboxIds/in": null, "mailboxIds/ar": true })
        );
    }

    #[test]
    fn a_tag_with_a_slash_goes_as_the_whole_keywords_object() {
        let op = FlagOp {
            add_tags: vec!["work/clients".into()],
            ..FlagOp::default()
        };
        let places = Places {
            from: None,
            to: None,
            labels: None,
        };
        let mut target = WriteTarget {
            id: RemoteId::new("e1"),
            version: Version::default(),
            message_id: None,
            size: None,
            flags: Default::default(),
        };
        target.flags.raw = vec!["$seen".into()];
        assert_eq!(
            serde_json::to_value(patch(&op, &places, &target)).unwrap(),
            json!({ "keywords": { "$seen": true, "work/clients": true } })
        );
    }
}
