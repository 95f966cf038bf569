//! Reading written messages back, by whichever costs fewer requests (BENCHMARKS.md, Graph):
//!
//! - `$batch` GETs of each message's state: one call per 20 messages, whatever else changed;
//! - the folder's delta from a link taken just before the write: one page per `PAGE` changes,
//!   plus the walk that takes the link from the one the last sync stored.
//!
//! The delta is chosen only where it is sure to be cheaper: a batch that stays in its folder
//! (a moved message leaves this folder's delta), large enough that the GETs take more than a
//! few calls, and whose folder changed little since the last sync (the walk to the pre-write
//! link gives up at half what the GETs would cost). A written message the delta does not
//! show is read back by GET, so the delta can only save requests, never decide alone that a
//! write failed.

use std::collections::{HashMap, HashSet};

use mailbroker_core::{Result, WriteBatch, WriteTarget};
use serde_json::Value;

use crate::client::{Client, Inner, InnerAnswer, Page};
use crate::sync::PAGE;
use crate::write::{MAX_BATCH, segment, send_all};

/// What a read-back reads.
pub const STATE: &str = "isRead,flag,categories,parentFolderId,changeKey";
/// The fewest read-back calls (of 20 GETs) for which the delta is tried.
const DELTA_FROM_CALLS: usize = 4;

/// The state of `targets` as the server has it now (`$batch` GETs, in their order); a read
/// that failed carries its error.
pub async fn read_all(client: &Client, targets: &[&WriteTarget]) -> Vec<InnerAnswer> {
    let reads: Vec<Inner> = targets
        .iter()
        .map(|t| Inner {
            method: "GET",
            url: format!("me/messages/{}?$select={STATE}", segment(&t.id)),
            body: None,
            if_match: None,
        })
        .collect();
    send_all(client, &reads).await
}

/// The folder's delta link as of now, walked from the one the last sync stored, when a
/// read-back by delta will cost fewer requests than by GETs; `None` otherwise.
pub async fn before_write(client: &Client, batch: &WriteBatch) -> Option<String> {
    let gets = batch.targets.len().div_ceil(MAX_BATCH);
    if batch.move_to.is_some() || gets < DELTA_FROM_CALLS || !batch.synced.is_known() {
        return None;
    }
    // A failed walk only means the GETs will do.
    walk(client, batch.synced.as_str(), gets / 2, |_| ())
        .await
        .ok()
        .flatten()
}

/// The state of `written` as the server has it now, in their order: from the folder's delta
/// after `link` where it lists them, by `$batch` GETs for the rest.
pub async fn read_back(
    client: &Client,
    link: Option<&str>,
    written: &[&WriteTarget],
) -> Vec<InnerAnswer> {
    let mut found: HashMap<String, InnerAnswer> = HashMap::new();
    if let Some(link) = link {
        let wanted: HashSet<&str> = written.iter().map(|t| t.id.as_str()).collect();
        // Beyond twice the pages the written messages fill, others' changes dominate: stop
        // and read the rest by GET.
        let budget = 2 * written.len().div_ceil(PAGE) + 1;
        // A walk cut short (a 429, a void link) leaves the rest to the GETs.
        let _ = walk(client, link, budget, |item| {
            let Some(id) = item["id"].as_str() else {
                return;
            };
            if item.get("@removed").is_none() && wanted.contains(id) {
                let answer = InnerAnswer::new(200, item.clone());
                found.insert(id.to_string(), answer);
            }
        })
        .await;
    }
    let missing: Vec<&WriteTarget> = written
        .iter()
        .filter(|t| !found.contains_key(t.id.as_str()))
        .copied()
        .collect();
    let mut read = read_all(client, &missing).await.into_iter();
    written
        .iter()
        .map(|t| match found.remove(t.id.as_str()) {
            Some(answer) => answer,
            None => read
                .next()
                .unwrap_or_else(|| InnerAnswer::new(0, Value::Null)),
        })
        .collect()
}

/// Walks a delta from `link` for at most `budget` pages, handing each item to `seen`: the
/// delta link it ends with, or `None` when the budget ran out or the link is void (410).
async fn walk(
    client: &Client,
    link: &str,
    budget: usize,
    mut seen: impl FnMut(&Value),
) -> Result<Option<String>> {
    let mut url = link.to_string();
    for _ in 0..budget {
        let Page::Items(page) = client.get_page(&url, Some(PAGE)).await? else {
            return Ok(None);
        };
        page["value"]
            .as_array()
            .into_iter()
            .flatten()
            .for_each(&mut seen);
        match (
            page["@odata.nextLink"].as_str(),
            page["@odata.deltaLink"].as_str(),
        ) {
            (Some(next), _) => url = next.to_string(),
            (None, Some(done)) => return Ok(Some(done.to_string())),
            (None, None) => return Ok(None),
        }
    }
    Ok(None)
}
