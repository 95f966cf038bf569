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
use std::time::Duration;

use mailbroker_core::{Error, FlagOp, ItemResult, MessageFlags, Outcome, Result, WriteBatch};
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
/// How long, in all, a batch waits on Retry-Afters before it reports what is still refused.
const MAX_WAIT: Duration = Duration::from_secs(300);

/// Sends `requests` in `$batch` calls of at most 20, `IN_FLIGHT` at a time; inner 429s and
/// 503s are sent again after the longest Retry-After among them, and only those, until
/// `MAX_WAIT` is spent. Every call sent is waited for, even after one fails: its writes may
/// have landed, and only then is the first failure reported.
pub async fn send_all(client: &Client, requests: &[Inner]) -> Result<Vec<InnerAnswer>> {
    use futures::StreamExt;
    let mut answers: Vec<Option<InnerAnswer>> = vec![None; requests.len()];
    let mut pending: Vec<usize> = (0..requests.len()).collect();
    let mut waited = Duration::ZERO;
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
        let mut again = Vec::new();
        let mut wait = Duration::ZERO;
        for (chunk, answered) in calls {
            for (i, answer) in chunk.iter().zip(answered?) {
                let after = Duration::from_secs(answer.retry_after.unwrap_or(1));
                let busy = matches!(answer.status, 429 | 503);
                if busy && waited + wait.max(after) <= MAX_WAIT {
                    wait = wait.max(after);
                    again.push(*i);
                }
                answers[*i] = Some(answer);
            }
        }
        if !again.is_empty() {
            tokio::time::sleep(wait).await;
            waited += wait;
        }
        pending = again;
    }
    Ok(answers
        .into_iter()
        .map(|a| {
            a.unwrap_or(InnerAnswer {
                status: 0,
                body: Value::Null,
                retry_after: None,
            })
        })
        .collect())
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

/// The request, as `holds` says, and where it should end: (target folder id and path).
pub struct Goal<'a> {
    pub op: &'a FlagOp,
    pub to: Option<(&'a str, &'a str)>,
}

impl Goal<'_> {
    fn holds(&self, flags: &MessageFlags, folder: &str) -> bool {
        self.op.holds_in(flags) && self.to.is_none_or(|(id, _)| id == folder)
    }

    /// What a message read back in `answer` comes to: applied (or unchanged, when nothing was
    /// sent for it) if it shows the request, else `otherwise`.
    fn judge(
        &self,
        t: &WriteTarget,
        answer: &InnerAnswer,
        sent: bool,
        otherwise: Outcome,
    ) -> ItemResult {
        if answer.status == 404 {
            return ItemResult::new(t.id.clone(), Outcome::Failed).with_error(
                Error::not_found("the message is gone from the mailbox")
                    .with_next_step("run: mailbroker sync"),
            );
        }
        if answer.status != 200 {
            let e = error_of(answer.status, &answer.body, answer.retry_after, "");
            return ItemResult::new(t.id.clone(), Outcome::Failed).with_error(e);
        }
        let (version, flags, folder) = state_of(&answer.body);
        let mut r = match (self.holds(&flags, &folder), sent) {
            (true, true) => ItemResult::new(t.id.clone(), Outcome::Applied),
            (true, false) => ItemResult::new(t.id.clone(), Outcome::Unchanged),
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

/// Runs one batch: preconditions, the writes, the read-back.
pub async fn apply(
    client: &Client,
    batch: &WriteBatch,
    goal: &Goal<'_>,
) -> Result<Vec<ItemResult>> {
    let mut done: HashMap<RemoteId, ItemResult> = HashMap::new();
    let mut written: Vec<&WriteTarget> = Vec::new();
    let mut live: Vec<&WriteTarget> = batch.targets.iter().collect();
    let link = verify::before_write(client, batch).await;
    if !batch.op.is_empty() {
        let patches: Vec<Inner> = live
            .iter()
            .map(|t| Inner {
                method: "PATCH",
                url: format!("me/messages/{}", segment(&t.id)),
                body: Some(patch_body(&batch.op, &t.flags)),
                if_match: t.version.is_known().then(|| t.version.as_str().to_string()),
            })
            .collect();
        let answers = send_all(client, &patches).await?;
        let mut conflicts = Vec::new();
        let mut next = Vec::new();
        for (t, a) in live.iter().zip(&answers) {
            match a.status {
                200 => {
                    written.push(t);
                    next.push(*t);
                }
                412 => conflicts.push(*t),
                _ => {
                    done.insert(t.id.clone(), goal.judge(t, a, true, Outcome::Failed));
                }
            }
        }
        // Changed since indexed: the request may already show (an earlier run whose answer
        // was lost); otherwise the message is left alone.
        for (t, a) in conflicts.iter().zip(read_all(client, &conflicts).await?) {
            done.insert(t.id.clone(), goal.judge(t, &a, false, Outcome::Stale));
        }
        live = next;
    }
    if let Some((folder, _)) = goal.to {
        if batch.op.is_empty() {
            // No PATCH carried a precondition: the changeKeys are read first.
            let answers = read_all(client, &live).await?;
            let mut next = Vec::new();
            for (t, a) in live.iter().zip(&answers) {
                let current = state_of(&a.body);
                if a.status == 200 && current.0 == t.version {
                    next.push(*t);
                } else {
                    done.insert(t.id.clone(), goal.judge(t, a, false, Outcome::Stale));
                }
            }
            live = next;
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
        for (t, a) in live.iter().zip(send_all(client, &moves).await?) {
            match a.status {
                201 | 200 => {
                    if !written.iter().any(|w| w.id == t.id) {
                        written.push(t);
                    }
                }
                _ => {
                    done.insert(t.id.clone(), goal.judge(t, &a, true, Outcome::Failed));
                }
            }
        }
    }
    let read = verify::read_back(client, link.as_deref(), &written).await?;
    for (t, a) in written.iter().zip(read) {
        done.entry(t.id.clone())
            .or_insert_with(|| goal.judge(t, &a, true, Outcome::Failed));
    }
    Ok(in_order(&batch.targets, done))
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

/// A staged message the server did not find (404: already gone, which is done) or refused.
fn not_there(t: &WriteTarget, a: &InnerAnswer) -> ItemResult {
    match a.status {
        404 => ItemResult::new(t.id.clone(), Outcome::Unchanged),
        s => ItemResult::new(t.id.clone(), Outcome::Failed).with_error(error_of(
            s,
            &a.body,
            a.retry_after,
            "",
        )),
    }
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

/// Deletes one batch of a staged manifest: each message is looked up first (one already
/// gone counts as done), then moved to Deleted Items (trash mode; its id stays, so the run
/// undoes) or deleted for good (`permanentDelete`), then checked: in the trash folder, or
/// gone. `trash` is the trash folder's (id, path).
pub async fn delete(
    client: &Client,
    batch: &mailbroker_core::DeleteBatch,
    trash: Option<(&str, &str)>,
) -> Result<Vec<ItemResult>> {
    let targets: Vec<&WriteTarget> = batch.targets.iter().collect();
    let mut done: HashMap<RemoteId, ItemResult> = HashMap::new();
    let mut live = Vec::new();
    for (t, a) in targets.iter().zip(read_all(client, &targets).await?) {
        match a.status {
            200 => live.push(*t),
            _ => {
                done.insert(t.id.clone(), not_there(t, &a));
            }
        }
    }
    let calls: Vec<Inner> = live
        .iter()
        .map(|t| match trash {
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
    for (t, a) in live.iter().zip(send_all(client, &calls).await?) {
        match a.status {
            200..=299 => sent.push(*t),
            // Gone meanwhile: what was asked.
            _ => {
                done.insert(t.id.clone(), not_there(t, &a));
            }
        }
    }
    for (t, a) in sent.iter().zip(read_all(client, &sent).await?) {
        let (version, flags, folder) = state_of(&a.body);
        let result = match (trash, a.status) {
            (None, 404) => ItemResult::new(t.id.clone(), Outcome::Applied),
            (Some((id, path)), 200) if folder == id => {
                let mut r = ItemResult::new(t.id.clone(), Outcome::Applied);
                r.moved_to = Some((path.to_string(), t.id.clone()));
                r.observed = Some((version, flags));
                r
            }
            _ => ItemResult::new(t.id.clone(), Outcome::Failed).with_error(
                Error::verification_failed(
                    "the message is not where the deletion should have put it",
                ),
            ),
        };
        done.insert(t.id.clone(), result);
    }
    Ok(in_order(&batch.targets, done))
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
