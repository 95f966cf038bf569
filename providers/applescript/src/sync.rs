//! Sync from Mail.app: metadata only (subject, sender, date, read, flagged, mailbox), for the
//! index. Mail keeps no change log, so a mailbox's cursor is its message count and newest
//! arrival: when both are as stored, the mailbox is skipped; otherwise it is listed again in
//! pages (with progress, since Mail answers slowly) and compared with the index.

use mailbroker_core::Seen;
use mailbroker_core::{
    Error, MailboxCursor, MailboxSyncReport, MessageFlags, MessageMeta, Provider, RemoteId, Result,
    SyncMode, SyncRequest, SyncSink,
};
use serde_json::Value;

use crate::mail::{Ids, MailApp, version_of};

pub async fn sync(
    app: &mut MailApp,
    request: &SyncRequest,
    sink: &mut dyn SyncSink,
) -> Result<Vec<MailboxSyncReport>> {
    if app.ids() == Ids::Foreign {
        return Err(Error::unsupported(
            "the Mail.app fallback carries writes only: Mail's ids are not this account's, so the index syncs from the server",
        )
        .with_next_step("run: mailbroker sync once the server answers again"));
    }
    let infos = app.list_mailboxes().await?;
    sink.apply(Seen::Mailboxes(infos)).await?;
    let mut reports = Vec::new();
    for (path, count, newest) in app.counts().await? {
        let cursor =
            MailboxCursor::new(serde_json::json!({ "count": count, "newest": newest }).to_string());
        let known = request
            .known
            .iter()
            .find(|(name, c)| *name == path && c.is_known())
            .map(|(_, c)| c);
        if !request.full && known == Some(&cursor) {
            reports.push(MailboxSyncReport::new(&path, SyncMode::Unchanged));
            continue;
        }
        let mode = match (known, request.full) {
            (Some(_), false) => SyncMode::Scan,
            _ => SyncMode::Full,
        };
        let mut report = MailboxSyncReport::new(&path, mode);
        if mode == SyncMode::Full {
            sink.apply(Seen::Voided {
                mailbox: path.to_string(),
            })
            .await?;
        }
        let mut present = Vec::new();
        let mut first = 1;
        while first <= count {
            let (total, page) = app.page(&path, first).await?;
            let metas: Vec<MessageMeta> = page.iter().filter_map(meta_of).collect();
            present.extend(metas.iter().map(|m| m.id.clone()));
            sink.progress(present.len() as u64, total);
            let n = metas.len() as u64;
            match mode {
                SyncMode::Full => report.added += n,
                _ => report.changed += n,
            }
            if !metas.is_empty() {
                sink.apply(Seen::Arrived {
                    mailbox: path.to_string(),
                    messages: metas,
                })
                .await?;
            }
            first += crate::mail::PAGE;
            if page.is_empty() || first > total {
                break;
            }
        }
        let gone = sink.indexed_except(&path, present).await?;
        if !gone.is_empty() {
            report.removed += sink
                .apply(Seen::Gone {
                    mailbox: path.to_string(),
                    ids: gone,
                })
                .await?;
        }
        sink.apply(Seen::Done {
            mailbox: path.to_string(),
            cursor,
        })
        .await?;
        // Not between pages: the mailbox's list of present ids is read across them.
        sink.checkpoint().await?;
        reports.push(report);
    }
    Ok(reports)
}

/// A message as the messages script lists it, as an index row.
fn meta_of(m: &Value) -> Option<MessageMeta> {
    let id = m["mail_id"].as_str()?;
    let read = m["read"].as_bool().unwrap_or(false);
    let flagged = m["flagged"].as_bool().unwrap_or(false);
    Some(MessageMeta {
        id: RemoteId::new(id),
        version: version_of(read, flagged),
        flags: MessageFlags {
            read,
            flagged,
            ..MessageFlags::default()
        },
        message_id: m["message_id"].as_str().map(str::to_string),
        from: m["sender"].as_str().unwrap_or_default().to_string(),
        to: String::new(),
        cc: String::new(),
        subject: m["subject"].as_str().unwrap_or_default().to_string(),
        date: m["date"].as_i64(),
        size: 0,
        has_attachments: false,
        snippet: String::new(),
        body_prefix: String::new(),
        text_pending: false,
        auth_results: Vec::new(),
        thread: None,
        list: None,
    })
}
