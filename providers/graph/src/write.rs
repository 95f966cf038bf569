//! Writes on Graph: one request per message, grouped in `$batch` calls of at most 20.
//!
//! - Flags and categories: a PATCH carrying only what changes; categories are the message's
//!   indexed list with the change applied (a PATCH replaces the whole list, so categories the
//!   request does not name stay). The precondition is `If-Match` with the changeKey the index
//!   holds: a message changed since is refused (412) and re-read: it is `unchanged` when it
//!   already shows the request, else `stale`.
//! - A move: `POST …/move` to the target folder's id; with immutable ids the message keeps its
//!   id. Without a PATCH before it, its changeKey is re-read first, for the same rule.
//! - Verification: a read-back of every written message (`verify.rs`: the folder's delta or
//!   `$batch` GETs, whichever costs fewer requests): each is `applied` only if the server
//!   shows the request.
//!
//! `$batch` calls go four at a time. An inner 429 or 503 is sent again after its
//! Retry-After, alone (for up to `MAX_WAIT`); a `$batch` whose answer was lost makes the
//! whole batch `outcome_unknown`, never resent blindly.

use std::collections::HashMap;

use mailbroker_core::{
    Error, FlagOp, ItemResult, MOVED_SINCE_STAGED, MessageFlags, Outcome, Result, WriteBatch,
};
use mailbroker_core::{RemoteId, Version, WriteTarget};
use serde_json::{Map, Value, json};

use crate::client::{Client, Inner, InnerAnswer, error_of};
use crate::convert;
use crate::verify::{self, read_all};

/// Requests per `$batch` (Graph's limit).
pub const MAX_BATCH: usize = 20;
/// `$batch` calls in flight at once: as many as the requests Graph runs at once per mailbox
/// (four). What it refuses beyond that comes back 429 and is sent again after Retry-After.
const IN_FLIGHT: usize = 4;

/// Sends `requests` in `$batch` calls of at most 20, `IN_FLIGHT` at a time, and answers each
/// request by its own answer. Inner 429s and 503s are sent again after the longest
/// Retry-After among them, and only those, while the session's budget lasts
/// (`Client::may_wait`; a throttled envelope waits in `Client::send`); an inner 401 is sent
/// once more, with the token the next envelope renews. A call that fails as a whole (its
/// answer lost, the token refused) gives each of its requests that error: the others keep
/// their answers, since their writes landed.
pub async fn send_all(client: &Client, requests: &[Inner]) -> Vec<InnerAnswer> {
    use futures::StreamExt;
    let mut answers: Vec<Option<InnerAnswer>> = vec![None; requests.len()];
    let mut pending: Vec<usize> = (0..requests.len()).collect();
    let mut renewed: std::collections::HashSet<usize> = std::collections::HashSet::new();
    while !pending.is_empty() {
        let sends: Vec<_> = pending
            .chunks(MAX_BATCH)
            .map(|chunk| {
                let calls: Vec<Inner> = chunk.iter().map(|i| requests[*i].clone()).collect();
                let chunk = chunk.to_vec();
                async move { (chunk, client.batch(&calls).await) }
            })
            .collect();
        let calls = futures::stream::iter(sends)
            .buffered(IN_FLIGHT)
            .collect::<Vec<_>>()
            .await;
        let mut busy = Vec::new();
        let mut again = Vec::new();
        let mut asked = None;
        for (chunk, answered) in calls {
            let answered = match answered {
                Ok(list) => list,
                Err(e) => chunk
                    .iter()
                    .map(|_| InnerAnswer::failed(e.clone()))
                    .collect(),
            };
            for (i, answer) in chunk.iter().zip(answered) {
                match answer.status {
                    429 | 503 => {
                        asked = asked.max(answer.retry_after);
                        busy.push(*i);
                    }
                    401 if renewed.insert(*i) => again.push(*i),
                    _ => {}
                }
                answers[*i] = Some(answer);
            }
        }
        if !busy.is_empty()
            && let Some(wait) = client.may_wait(asked)
        {
            tokio::time::sleep(wait).await;
            again.extend(busy);
        }
        again.sort_unstable();
        pending = again;
    }
    answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| InnerAnswer::new(0, Value::Null)))
        .collect()
}

/// A message id as one URL path segment.
pub fn segment(id: &RemoteId) -> String {
    percent_encoding::utf8_percent_encode(id.as_str(), percent_encoding::NON_ALPHANUMERIC)
        .to_string()
}

/// The PATCH body of `op` for a message whose indexed flags are `indexed`.
pub fn patch_body(op: &FlagOp, indexed: &MessageFlags) -> Value {
    let mut body = Map::new();
    if let Some(read) = op.read {
        body.insert("isRead".into(), read.into());
    }
    if let Some(flagged) = op.flagged {
        let status = if flagged { "flagged" } else { "notFlagged" };
        body.insert("flag".into(), json!({ "flagStatus": status }));
    }
    if !op.add_tags.is_empty() || !op.remove_tags.is_empty() {
        body.insert("categories".into(), op.tags_after(&indexed.tags).into());
    }
    Value::Object(body)
}

/// A message's state as read back: (version, flags, folder id).
fn state_of(body: &Value) -> (Version, MessageFlags, String) {
    (
        Version::new(body["changeKey"].as_str().unwrap_or_default()),
        convert::flags_of(body),
        body["parentFolderId"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// What became of a write for one message, before its read-back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Nothing was written (a precondition refused it): a read shows what it is.
    Nothing,
    /// The server answered that it carried the write out.
    Written,
    /// The answer was lost: it may have been carried out.
    Lost,
}

impl Sent {
    /// How the server answered one write: carried out, maybe, or refused (`None`).
    fn of(answer: &InnerAnswer) -> Option<Sent> {
        match answer.status {
            200..=299 => Some(Sent::Written),
            _ if answer.lost() => Some(Sent::Lost),
            _ => None,
        }
    }
}

/// The request, as `holds` says, and where it should end: (target folder id and path).
pub struct Goal<'a> {
    pub op: &'a FlagOp,
    pub to: Option<(&'a str, &'a str)>,
}

impl Goal<'_> {
    fn holds(&self, flags: &MessageFlags, folder: &str) -> bool {
        self.op.holds_in(flags) && self.to.is_none_or(|(id, _)| id == folder)
    }

    /// A write the server refused: nothing of it was carried out.
    fn refused(&self, t: &WriteTarget, answer: &InnerAnswer) -> ItemResult {
        let e = match answer.status {
            404 => Error::not_found("the message is gone from the mailbox")
                .with_next_step("run: mailbroker sync"),
            _ => answer.error_of(),
        };
        ItemResult::new(t.id.clone(), Outcome::Failed).with_error(e)
    }

    /// What a message read back in `answer` comes to after `sent`: applied (or unchanged,
    /// when nothing was written) if it shows the request, else `otherwise`. Reported per
    /// message, never worse than the truth: a write the server may have carried out but that
    /// could not be read back, or whose answer was lost and whose read-back shows only part
    /// of the request, is `outcome_unknown`, never `failed`.
    fn judge(
        &self,
        t: &WriteTarget,
        answer: &InnerAnswer,
        sent: Sent,
        otherwise: Outcome,
    ) -> ItemResult {
        if answer.status != 200 || answer.error.is_some() {
            if sent == Sent::Nothing {
                return self.refused(t, answer);
            }
            let e = answer.error_of();
            return ItemResult::new(t.id.clone(), Outcome::Unknown).with_error(
                Error::outcome_unknown(format!("written, but not read back: {}", e.message()))
                    .with_next_step("run: mailbroker sync; the change then shows as it ended"),
            );
        }
        let (version, flags, folder) = state_of(&answer.body);
        let mut r = match (self.holds(&flags, &folder), sent) {
            (true, Sent::Nothing) => ItemResult::new(t.id.clone(), Outcome::Unchanged),
            (true, _) => ItemResult::new(t.id.clone(), Outcome::Applied),
            (false, Sent::Lost) => ItemResult::new(t.id.clone(), Outcome::Unknown).with_error(
                Error::outcome_unknown(
                    "the answer to its write was lost, and it shows only part of the request",
                )
                .with_next_step("run: mailbroker sync, then repeat the request"),
            ),
            (false, _) => ItemResult::new(t.id.clone(), otherwise).with_error(match otherwise {
                Outcome::Stale => {
                    Error::stale_state("changed in the mailbox since it was indexed; left alone")
                        .with_next_step("run: mailbroker sync, then repeat the request")
                }
                _ => Error::verification_failed(
                    "the server does not show the change after the write",
                ),
            }),
        };
        if let Some((id, path)) = self.to
            && folder == id
        {
            r.moved_to = Some((path.to_string(), t.id.clone()));
        }
        r.observed = Some((version, flags));
        r
    }
}

/// The `If-Match` of a message indexed at `version`: the entity tag its `@odata.etag` gives
/// (`W/"<changeKey>"`).
fn etag(version: &Version) -> Option<String> {
    version
        .is_known()
        .then(|| format!("W/\"{}\"", version.as_str()))
}

/// Runs one batch: preconditions, the writes, the read-back. Every message is reported by
/// its own answers: a call that failed takes none of the others with it.
pub async fn apply(
    client: &Client,
    batch: &WriteBatch,
    goal: &Goal<'_>,
) -> Result<Vec<ItemResult>> {
    let mut done: HashMap<RemoteId, ItemResult> = HashMap::new();
    // What was written, or may have been: read back at the end.
    let mut written: Vec<(&WriteTarget, Sent)> = Vec::new();
    let mut live: Vec<&WriteTarget> = batch.targets.iter().collect();
    let link = verify::before_write(client, batch).await;
    if !batch.op.is_empty() {
        let patches: Vec<Inner> = live
            .iter()
            .map(|t| Inner {
                method: "PATCH",
                url: format!("me/messages/{}", segment(&t.id)),
                body: Some(patch_body(&batch.op, &t.flags)),
                if_match: etag(&t.version),
            })
            .collect();
        let answers = send_all(client, &patches).await;
        let mut conflicts = Vec::new();
        let mut next = Vec::new();
        for (t, a) in live.iter().zip(&answers) {
            match (a.status, Sent::of(a)) {
                (412, _) => conflicts.push(*t),
                // Lost: nothing more is sent for it; the read-back tells.
                (_, Some(sent)) => {
                    written.push((t, sent));
                    if sent == Sent::Written {
                        next.push(*t);
                    }
                }
                (_, None) => {
                    done.insert(t.id.clone(), goal.refused(t, a));
                }
            }
        }
        // Changed since indexed: the request may already show (an earlier run whose answer
        // was lost); otherwise the message is left alone.
        for (t, a) in conflicts.iter().zip(read_all(client, &conflicts).await) {
            done.insert(
                t.id.clone(),
                goal.judge(t, &a, Sent::Nothing, Outcome::Stale),
            );
        }
        live = next;
    }
    if let Some((folder, _)) = goal.to {
        if batch.op.is_empty() {
            live = unchanged_since_indexed(client, goal, live, &mut done).await;
        }
        let moves: Vec<Inner> = live
            .iter()
            .map(|t| Inner {
                method: "POST",
                url: format!("me/messages/{}/move", segment(&t.id)),
                body: Some(json!({ "destinationId": folder })),
                if_match: None,
            })
            .collect();
        for (t, a) in live.iter().zip(send_all(client, &moves).await) {
            match Sent::of(&a) {
                Some(sent) => match written.iter_mut().find(|(w, _)| w.id == t.id) {
                    Some(entry) => entry.1 = sent,
                    None => written.push((t, sent)),
                },
                None => {
                    let mut refused = goal.refused(t, &a);
                    if written.iter().any(|(w, _)| w.id == t.id)
                        && let Some(e) = refused.error.take()
                    {
                        let what = "its flags were written, but its move was refused";
                        refused.error = Some(e.context(what));
                    }
                    written.retain(|(w, _)| w.id != t.id);
                    done.insert(t.id.clone(), refused);
                }
            }
        }
    }
    let targets: Vec<&WriteTarget> = written.iter().map(|(t, _)| *t).collect();
    let read = verify::read_back(client, link.as_deref(), &targets).await;
    for ((t, sent), a) in written.iter().zip(read) {
        done.entry(t.id.clone())
            .or_insert_with(|| goal.judge(t, &a, *sent, Outcome::Failed));
    }
    Ok(in_order(&batch.targets, done))
}

/// The targets of a move without a PATCH (which would have carried the precondition) whose
/// changeKey is still the indexed one; the others are judged as read.
async fn unchanged_since_indexed<'a>(
    client: &Client,
    goal: &Goal<'_>,
    live: Vec<&'a WriteTarget>,
    done: &mut HashMap<RemoteId, ItemResult>,
) -> Vec<&'a WriteTarget> {
    let answers = read_all(client, &live).await;
    let mut next = Vec::new();
    for (t, a) in live.into_iter().zip(&answers) {
        let current = state_of(&a.body);
        if a.status == 200 && a.error.is_none() && current.0 == t.version {
            next.push(t);
        } else {
            done.insert(
                t.id.clone(),
                goal.judge(t, a, Sent::Nothing, Outcome::Stale),
            );
        }
    }
    next
}

/// The requests `apply` sends for `batch`, one line each.
pub fn plan(batch: &WriteBatch) -> Vec<String> {
    let n = batch.targets.len();
    let calls = n.div_ceil(MAX_BATCH);
    let mut lines = Vec::new();
    if !batch.op.is_empty() {
        let body = patch_body(&batch.op, &MessageFlags::default());
        let fields: Vec<&str> = body
            .as_object()
            .map_or(Vec::new(), |o| o.keys().map(String::as_str).collect());
        lines.push(format!(
            "graph {}: PATCH ×{n} ({}) with If-Match changeKey, in $batch ×{calls}",
            batch.mailbox,
            fields.join(", ")
        ));
    } else if batch.move_to.is_some() {
        lines.push(format!(
            "graph {}: GET ×{n} (changeKeys) in $batch ×{calls}",
            batch.mailbox
        ));
    }
    if let Some(to) = &batch.move_to {
        lines.push(format!(
            "graph {}: move ×{n} to {to:?} in $batch ×{calls}",
            batch.mailbox
        ));
    }
    lines.push(format!(
        "graph {}: read-back GET ×{n} in $batch ×{calls}",
        batch.mailbox
    ));
    lines
}

/// Each target's result in the batch's order; one no answer mentioned has failed.
fn in_order(targets: &[WriteTarget], mut done: HashMap<RemoteId, ItemResult>) -> Vec<ItemResult> {
    targets
        .iter()
        .map(|t| {
            done.remove(&t.id).unwrap_or_else(|| {
                ItemResult::new(t.id.clone(), Outcome::Failed).with_error(
                    Error::verification_failed("the server's answers did not mention this message"),
                )
            })
        })
        .collect()
}

/// Where a staged deletion's batch comes from and goes: the folder it was staged in, and
/// the trash folder (trash mode), each as (id, path).
pub struct Deletion<'a> {
    pub source: &'a str,
    pub trash: Option<(&'a str, &'a str)>,
}

/// Deletes one batch of a staged manifest: each message is looked up first, and deleted
/// only if it is still where it was staged (in the batch's folder); one gone counts as
/// done. Then it is moved to Deleted Items (trash mode; its id
/// stays, so the run undoes) or deleted for good (`permanentDelete`), and checked: in the
/// trash folder, or gone. A look-up refused for the account's sake (a token, a rate limit)
/// sends nothing and fails the batch, so its messages stay pending.
pub async fn delete(
    client: &Client,
    batch: &mailbroker_core::DeleteBatch,
    place: &Deletion<'_>,
) -> Result<Vec<ItemResult>> {
    let targets: Vec<&WriteTarget> = batch.targets.iter().collect();
    let mut done: HashMap<RemoteId, ItemResult> = HashMap::new();
    let mut live = Vec::new();
    for (t, a) in targets.iter().zip(read_all(client, &targets).await) {
        if let Some(e) = &a.error {
            return Err(e.clone());
        }
        match (a.status, moved_since_staged(t, &a, place.source)) {
            (200, None) => live.push(*t),
            (200, Some(left)) => {
                done.insert(t.id.clone(), left);
            }
            (404, _) => {
                done.insert(
                    t.id.clone(),
                    ItemResult::new(t.id.clone(), Outcome::Unchanged),
                );
            }
            (status, _) => return Err(error_of(status, &a.body, a.retry_after, "")),
        }
    }
    let calls: Vec<Inner> = live
        .iter()
        .map(|t| match place.trash {
            Some((folder, _)) => Inner {
                method: "POST",
                url: format!("me/messages/{}/move", segment(&t.id)),
                body: Some(json!({ "destinationId": folder })),
                if_match: None,
            },
            None => Inner {
                method: "POST",
                url: format!("me/messages/{}/permanentDelete", segment(&t.id)),
                body: None,
                if_match: None,
            },
        })
        .collect();
    let mut sent = Vec::new();
    for (t, a) in live.iter().zip(send_all(client, &calls).await) {
        match (Sent::of(&a), a.status) {
            (Some(how), _) => sent.push((*t, how)),
            // Gone meanwhile: what was asked.
            (None, 404) => {
                done.insert(
                    t.id.clone(),
                    ItemResult::new(t.id.clone(), Outcome::Unchanged),
                );
            }
            (None, _) => {
                let e = a.error_of();
                done.insert(
                    t.id.clone(),
                    ItemResult::new(t.id.clone(), Outcome::Failed).with_error(e),
                );
            }
        }
    }
    let reads: Vec<&WriteTarget> = sent.iter().map(|(t, _)| *t).collect();
    for ((t, _), a) in sent.iter().zip(read_all(client, &reads).await) {
        done.insert(t.id.clone(), deleted(t, &a, place.trash));
    }
    Ok(in_order(&batch.targets, done))
}

/// Why a staged message read as `answer` is left alone: it is no longer in `source`, where
/// it was staged (its immutable id says it is the same message). `None`: it is still there.
fn moved_since_staged(t: &WriteTarget, answer: &InnerAnswer, source: &str) -> Option<ItemResult> {
    let (_, _, folder) = state_of(&answer.body);
    (folder != source).then(|| {
        ItemResult::new(t.id.clone(), Outcome::Stale).with_error(
            Error::stale_state(format!("{MOVED_SINCE_STAGED}; left alone"))
                .with_next_step("run: mailbroker sync, then stage it again where it is now"),
        )
    })
}

/// A deleted message as read back: in the trash folder (trash mode) or gone (permanent).
/// One that could not be read back is `outcome_unknown`: the deletion was sent.
fn deleted(t: &WriteTarget, a: &InnerAnswer, trash: Option<(&str, &str)>) -> ItemResult {
    let (version, flags, folder) = state_of(&a.body);
    match (trash, a.status) {
        (None, 404) => ItemResult::new(t.id.clone(), Outcome::Applied),
        (Some((id, path)), 200) if folder == id => {
            let mut r = ItemResult::new(t.id.clone(), Outcome::Applied);
            r.moved_to = Some((path.to_string(), t.id.clone()));
            r.observed = Some((version, flags));
            r
        }
        _ if a.error.is_some() || a.status != 200 && a.status != 404 => {
            ItemResult::new(t.id.clone(), Outcome::Unknown).with_error(
                Error::outcome_unknown(format!(
                    "the deletion was sent, but not read back: {}",
                    a.error_of().message()
                ))
                .with_next_step("run: mailbroker delete-staged again: it checks first"),
            )
        }
        _ => ItemResult::new(t.id.clone(), Outcome::Failed).with_error(Error::verification_failed(
            "the message is not where the deletion should have put it",
        )),
    }
}

/// The requests `delete` sends for `batch`, one line each.
pub fn plan_delete(batch: &mailbroker_core::DeleteBatch) -> Vec<String> {
    let n = batch.targets.len();
    let calls = n.div_ceil(MAX_BATCH);
    let what = match batch.mode {
        mailbroker_core::DeleteMode::Trash => format!(
            "move ×{n} to {:?}",
            batch.trash.as_deref().unwrap_or("(no trash folder)")
        ),
        mailbroker_core::DeleteMode::Permanent => format!("permanentDelete ×{n}"),
    };
    vec![
        format!(
            "graph {}: GET ×{n} (identity check) in $batch ×{calls}",
            batch.mailbox
        ),
        format!("graph {}: {what} in $batch ×{calls}", batch.mailbox),
        format!(
            "graph {}: read-back GET ×{n} in $batch ×{calls}",
            batch.mailbox
        ),
    ]
}
