//! Sync: every folder by its delta link. A folder without one (first sync, `--full`, a link
//! Graph voided with 410) is listed in full; otherwise its delta lists what changed and, as
//! `@removed`, what left. Ids are immutable and account-wide, so a message that moved is
//! placed in its new folder keeping its index row (`mailbroker_core::place`, which settles
//! it as moved by its id); removals
//! wait until every folder's arrivals are placed, so a move's two halves, in whichever
//! order the folders come, end as one moved row.
//!
//! A write waiting for the account runs at a checkpoint (`SyncSink::checkpoint`) after a
//! delta page, but only while no removal waits: ids are account-wide, so a write (an undo
//! moving a message back) could put a row where a removal read before it would then take it.

use mailbroker_core::Seen;
use std::collections::HashMap;

use mailbroker_core::{
    Error, MailboxCursor, MailboxSyncReport, RemoteId, Result, SyncMode, SyncRequest, SyncSink,
    path,
};
use serde_json::Value;

use crate::client::{Client, Inner, Page};
use crate::convert::{self, Folder};

/// What the index keeps of a message: the delta's `$select`, every name a property of
/// Graph v1.0's `message`.
const SELECT: &str = "id,subject,from,toRecipients,ccRecipients,receivedDateTime,isRead,flag,\
categories,parentFolderId,changeKey,internetMessageId,hasAttachments,bodyPreview,conversationId";
/// Messages per delta page.
pub const PAGE: usize = 200;

/// Every mail folder, child folders included, with its path and role.
pub async fn folders(client: &Client) -> Result<Vec<Folder>> {
    // The well-known folders' ids, in one `$batch`: a mailbox without one of them (an
    // archive never made) answers 404 there and has no such role.
    let lookups: Vec<Inner> = convert::WELL_KNOWN
        .iter()
        .map(|name| Inner {
            method: "GET",
            url: format!("me/mailFolders/{name}"),
            body: None,
            if_match: None,
        })
        .collect();
    let mut roles = HashMap::new();
    for (name, a) in convert::WELL_KNOWN
        .iter()
        .zip(crate::write::send_all(client, &lookups).await)
    {
        match (a.status, a.body["id"].as_str(), convert::role_of(name)) {
            (200, Some(id), Some(role)) => {
                roles.insert(id.to_string(), role);
            }
            (200 | 404, ..) => {}
            _ => return Err(a.error_of()),
        }
    }
    let mut out = Vec::new();
    let mut queue: Vec<(String, Option<String>)> = vec![("me/mailFolders?$top=100".into(), None)];
    while let Some((url, parent)) = queue.pop() {
        let mut next = Some(url);
        while let Some(url) = next.take() {
            let page = client.get(&url).await?;
            for f in page["value"].as_array().into_iter().flatten() {
                let (Some(id), Some(name)) = (f["id"].as_str(), f["displayName"].as_str()) else {
                    continue;
                };
                // A name may hold the separator itself: escaped, it can never make one
                // folder's path another's.
                let path = path::child_path(parent.as_deref(), name);
                if f["childFolderCount"].as_u64().unwrap_or(0) > 0 {
                    let children = format!("me/mailFolders/{id}/childFolders?$top=100");
                    queue.push((children, Some(path.clone())));
                }
                out.push(Folder {
                    id: id.to_string(),
                    role: roles.get(id).copied(),
                    path,
                });
            }
            next = page["@odata.nextLink"].as_str().map(str::to_string);
        }
    }
    Ok(out)
}

fn first_delta(folder: &Folder) -> String {
    format!(
        "me/mailFolders/{}/messages/delta?$select={SELECT}&$expand={}",
        folder.id,
        convert::list_headers_expand()
    )
}

pub async fn sync(
    client: &Client,
    request: &SyncRequest,
    sink: &mut dyn SyncSink,
) -> Result<Vec<MailboxSyncReport>> {
    let folders = folders(client).await?;
    let infos: Vec<_> = folders.iter().map(Folder::info).collect();
    sink.apply(Seen::Mailboxes(infos)).await?;
    let known: HashMap<&str, &MailboxCursor> = request
        .known
        .iter()
        .filter(|(_, c)| c.is_known() && !request.full)
        .map(|(name, c)| (name.as_str(), c))
        .collect();
    let mut reports = Vec::with_capacity(folders.len());
    let mut departures: Vec<(usize, Vec<RemoteId>)> = Vec::new();
    let mut links = Vec::with_capacity(folders.len());
    for folder in &folders {
        let cursor = known
            .get(folder.path.as_str())
            .map(|c| c.as_str().to_string());
        let waiting = departures.iter().any(|(_, gone)| !gone.is_empty());
        let (report, gone, link) = sync_folder(client, folder, cursor, waiting, sink).await?;
        departures.push((reports.len(), gone));
        reports.push(report);
        links.push(link);
    }
    for (i, gone) in departures {
        if !gone.is_empty() {
            reports[i].removed += sink
                .apply(Seen::Gone {
                    mailbox: reports[i].mailbox.to_string(),
                    ids: gone,
                })
                .await?;
        }
    }
    for (report, link) in reports.iter().zip(links) {
        sink.apply(Seen::Done {
            mailbox: report.mailbox.to_string(),
            cursor: convert::cursor(&link),
        })
        .await?;
    }
    Ok(reports)
}

/// One folder's delta run from `cursor` (its stored link), or in full: its report, the ids
/// that left it, and the delta link it ended with. Checkpoints follow its pages while no
/// removal waits (`removals_waiting`: earlier folders').
async fn sync_folder(
    client: &Client,
    folder: &Folder,
    cursor: Option<String>,
    removals_waiting: bool,
    sink: &mut dyn SyncSink,
) -> Result<(MailboxSyncReport, Vec<RemoteId>, String)> {
    let name = folder.path.as_str();
    let mut report = MailboxSyncReport::new(name, SyncMode::Delta);
    let mut url = match cursor {
        Some(link) => link,
        None => {
            report.mode = SyncMode::Full;
            sink.apply(Seen::Voided {
                mailbox: name.to_string(),
            })
            .await?;
            first_delta(folder)
        }
    };
    let mut gone = Vec::new();
    loop {
        let page = match client.get_page(&url, Some(PAGE)).await? {
            Page::Items(page) => page,
            Page::Gone if report.mode == SyncMode::Full => {
                return Err(Error::provider_unavailable(format!(
                    "graph voided the first delta of {name:?}"
                )));
            }
            Page::Gone => {
                tracing::info!(
                    mailbox = name,
                    "graph: delta link void (410); syncing in full"
                );
                report.mode = SyncMode::Full;
                report.cursor_voided = true;
                sink.apply(Seen::Voided {
                    mailbox: name.to_string(),
                })
                .await?;
                gone.clear();
                url = first_delta(folder);
                continue;
            }
        };
        let (present, left) = split(&page);
        let n = present.len() as u64;
        match report.mode {
            SyncMode::Full => report.added += n,
            _ => report.changed += n,
        }
        if !present.is_empty() {
            mailbroker_core::place(sink, name, present).await?;
        }
        gone.extend(left);
        if !removals_waiting && gone.is_empty() {
            sink.checkpoint().await?;
        }
        match (
            page["@odata.nextLink"].as_str(),
            page["@odata.deltaLink"].as_str(),
        ) {
            (Some(next), _) => url = next.to_string(),
            (None, Some(link)) => {
                if report.mode == SyncMode::Delta && report.changed == 0 && gone.is_empty() {
                    report.mode = SyncMode::Unchanged;
                }
                return Ok((report, gone, link.to_string()));
            }
            (None, None) => {
                return Err(Error::provider_unavailable(format!(
                    "graph: a delta page of {name:?} had neither a next nor a delta link"
                )));
            }
        }
    }
}

/// A delta page's messages, and the ids it says left.
fn split(page: &Value) -> (Vec<mailbroker_core::MessageMeta>, Vec<RemoteId>) {
    let mut present = Vec::new();
    let mut left = Vec::new();
    for item in page["value"].as_array().into_iter().flatten() {
        match (item.get("@removed"), item["id"].as_str()) {
            (Some(_), Some(id)) => left.push(convert::remote(id)),
            _ => present.extend(convert::meta_of(item)),
        }
    }
    (present, left)
}
