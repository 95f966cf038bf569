//! Sync: the mailbox list by `Mailbox/get` every time (one call beside the changes, in the
//! same request), then either every email (`Email/query` pages with `Email/get` by back
//! reference, one request a page) or only what `Email/changes` lists since the account's
//! stored email state. A state the server can no longer calculate changes from
//! (`cannotCalculateChanges`) means a full sync.
//!
//! Ids are account-wide and survive a move, so an email is put in place with
//! `mailbroker_core::place` (a moved one keeps its index row), and a destroyed one is gone
//! from whichever mailbox held it. Every page is applied before the checkpoint that follows
//! it, so nothing read before a checkpoint is applied after it.

use std::collections::BTreeMap;

use crate::client::Client;
use crate::convert::{self, EMAIL_PROPERTIES, Mailbox};
use crate::labels::{Labels, TagMode};
use crate::wire::{
    Call, ChangesResponse, Email, GetResponse, Ids, MailboxObject, QueryResponse, ResultReference,
    nth,
};
use mailbroker_core::{
    MailboxCursor, MailboxSyncReport, RemoteId, Result, Seen, SyncMode, SyncRequest, SyncSink,
};

/// Reports by mailbox path.
type Reports = BTreeMap<String, MailboxSyncReport>;

/// What a sync read: its reports, the email state to store, and the mailboxes with the
/// state they were read at.
pub struct Synced {
    pub reports: Vec<MailboxSyncReport>,
    pub state: String,
    pub labels: Labels,
    pub mailbox_state: String,
}

/// Brings the index up to date from `since` (the account's email state at the last sync),
/// with tags read as `tags` says.
pub async fn sync(
    client: &mut Client,
    request: &SyncRequest,
    since: Option<&str>,
    tags: TagMode,
    sink: &mut dyn SyncSink,
) -> Result<Synced> {
    let since = since.filter(|_| !request.full);
    let mut calls = vec![Call::MailboxGet];
    if let Some(state) = since {
        calls.push(changes_since(state, client));
    }
    let answers = client.call(calls).await?;
    let list: GetResponse<MailboxObject> = nth(&answers, 0, "Mailbox/get")?;
    let mailbox_state = list.state;
    let boxes = convert::mailboxes(&list.list);
    let infos = boxes.iter().map(Mailbox::info).collect();
    sink.apply(Seen::Mailboxes(infos)).await?;
    let labels = Labels::new(boxes);
    let read = Reading {
        labels: &labels,
        tags,
    };
    let changes = answers.get(1).map(|a| a.read("Email/changes"));
    let (mut reports, state) = match changes {
        Some(Ok(first)) => incremental(client, &read, first, sink).await?,
        // The stored state is too old for the server: start over.
        Some(Err(e)) if e.is_not_found() => full(client, &read, sink, true).await?,
        Some(Err(e)) => return Err(e),
        None => full(client, &read, sink, false).await?,
    };
    for m in labels.boxes().values() {
        let cursor = MailboxCursor::new(&state);
        sink.apply(Seen::Done {
            mailbox: m.path.clone(),
            cursor,
        })
        .await?;
        reports
            .entry(m.path.clone())
            .or_insert_with(|| MailboxSyncReport::new(&m.path, SyncMode::Unchanged));
    }
    sink.apply(Seen::AccountCursor(state.clone())).await?;
    Ok(Synced {
        reports: reports.into_values().collect(),
        state,
        labels,
        mailbox_state,
    })
}

/// The mailboxes, and what a tag is, for reading emails.
struct Reading<'a> {
    labels: &'a Labels,
    tags: TagMode,
}

fn changes_since(since: &str, client: &Client) -> Call {
    Call::EmailChanges {
        since_state: since.to_string(),
        max_changes: client.limits.max_objects_in_get,
    }
}

/// Every email, page by page; `voided` when a stored state was refused.
async fn full(
    client: &mut Client,
    read: &Reading<'_>,
    sink: &mut dyn SyncSink,
    voided: bool,
) -> Result<(Reports, String)> {
    let mut reports = Reports::new();
    for m in read.labels.boxes().values() {
        let mut report = MailboxSyncReport::new(&m.path, SyncMode::Full);
        report.cursor_voided = voided;
        reports.insert(m.path.clone(), report);
        sink.apply(Seen::Voided {
            mailbox: m.path.clone(),
        })
        .await?;
    }
    let page = client.limits.max_objects_in_get;
    let mut state: Option<String> = None;
    let mut position = 0;
    loop {
        let query = Call::EmailQuery {
            position,
            limit: page,
        };
        let reference = ResultReference {
            result_of: "0".into(),
            name: "Email/query".into(),
            path: "/ids".into(),
        };
        let get = Call::EmailGet {
            ids: Ids::Of(reference),
            properties: &EMAIL_PROPERTIES,
        };
        let answers = client.call(vec![query, get]).await?;
        let ids = nth::<QueryResponse>(&answers, 0, "Email/query")?.ids.len();
        let got: GetResponse<Email> = nth(&answers, 1, "Email/get")?;
        // Changes from the first page's state on are read by the next sync: a change made
        // while paging is read twice at worst.
        let at = state.get_or_insert_with(|| got.state.clone()).clone();
        put_in_place(&got, &at, read, sink, &mut reports, true).await?;
        sink.checkpoint().await?;
        if ids < page {
            break;
        }
        position += ids;
    }
    Ok((reports, state.unwrap_or_default()))
}

/// What changed since the stored state: created and updated emails read and put in place,
/// destroyed ones removed, until the server has no more changes.
async fn incremental(
    client: &mut Client,
    read: &Reading<'_>,
    mut changes: ChangesResponse,
    sink: &mut dyn SyncSink,
) -> Result<(Reports, String)> {
    let boxes = read.labels.boxes();
    let mut reports: Reports = boxes
        .values()
        .map(|m| {
            (
                m.path.clone(),
                MailboxSyncReport::new(&m.path, SyncMode::Delta),
            )
        })
        .collect();
    let mut any = false;
    loop {
        let state = changes.new_state.clone();
        for (ids, added) in [(&changes.created, true), (&changes.updated, false)] {
            for chunk in ids.chunks(client.limits.max_objects_in_get) {
                any = true;
                let get = Call::email_get(chunk, &EMAIL_PROPERTIES);
                let answers = client.call(vec![get]).await?;
                let got: GetResponse<Email> = nth(&answers, 0, "Email/get")?;
                put_in_place(&got, &state, read, sink, &mut reports, added).await?;
            }
        }
        let gone: Vec<RemoteId> = changes.destroyed.iter().map(RemoteId::new).collect();
        if !gone.is_empty() {
            any = true;
            for m in boxes.values() {
                let removed = sink
                    .apply(Seen::Gone {
                        mailbox: m.path.clone(),
                        ids: gone.clone(),
                    })
                    .await?;
                if let Some(r) = reports.get_mut(&m.path) {
                    r.removed += removed;
                }
            }
        }
        sink.checkpoint().await?;
        if !changes.has_more_changes {
            if !any {
                reports
                    .values_mut()
                    .for_each(|r| r.mode = SyncMode::Unchanged);
            }
            return Ok((reports, state));
        }
        let answers = client.call(vec![changes_since(&state, client)]).await?;
        changes = nth(&answers, 0, "Email/changes")?;
    }
}

/// Puts the emails of an `Email/get` answer in their places, counting each in its
/// mailbox's report as added or changed.
async fn put_in_place(
    got: &GetResponse<Email>,
    state: &str,
    read: &Reading<'_>,
    sink: &mut dyn SyncSink,
    reports: &mut Reports,
    added: bool,
) -> Result<()> {
    let mut by_place: BTreeMap<&str, Vec<mailbroker_core::MessageMeta>> = BTreeMap::new();
    for email in &got.list {
        let Some(place) = convert::place_of(email, read.labels.boxes()) else {
            continue;
        };
        let mut meta = convert::meta_of(email, state);
        if read.tags == TagMode::Mailboxes {
            meta.flags.tags = read.labels.tags_of(email.mailboxes());
        }
        by_place.entry(&place.path).or_default().push(meta);
    }
    for (place, metas) in by_place {
        if let Some(r) = reports.get_mut(place) {
            match added {
                true => r.added += metas.len() as u64,
                false => r.changed += metas.len() as u64,
            }
        }
        mailbroker_core::place(sink, place, metas).await?;
    }
    if !got.not_found.is_empty() {
        tracing::debug!(not_found = ?got.not_found, "jmap: emails gone while reading");
    }
    Ok(())
}
