//! Drafts on Gmail: `drafts.create` with the message uploaded whole and, for a reply, the
//! original's thread id (Gmail threads it when its References and subject agree, which the
//! core's draft does). An edit in Gmail gives the draft a new message id, so the message id
//! is the draft's version: an undo deletes the draft only while it is unchanged.

use mailbroker_core::{
    Draft, Error, MailboxInfo, PlacedDraft, RemoteId, Result, Version, draft_changed,
};

use crate::api;
use crate::client::Client;

pub async fn create(
    client: &Client,
    draft: &Draft,
    source: &[u8],
    drafts: Option<&MailboxInfo>,
) -> Result<PlacedDraft> {
    let thread = match &draft.reply_of {
        Some(of) => api::metadata(client, of.id.as_str()).await?.thread_id,
        None => None,
    };
    let made = api::create_draft(client, source, thread.clone()).await?;
    let (Some(id), Some(message)) = (made.id, made.message.and_then(|m| m.id)) else {
        return Err(
            Error::outcome_unknown("Gmail made the draft but did not say its id")
                .with_next_step("look in Gmail's Drafts before writing it again"),
        );
    };
    let saved = api::metadata(client, &message).await?;
    if !saved.label_ids.iter().any(|l| l == "DRAFT") {
        return Err(Error::verification_failed(
            "Gmail saved the draft without its DRAFT label",
        ));
    }
    if thread.is_some() && saved.thread_id != thread {
        return Err(Error::verification_failed(
            "Gmail put the reply in a thread of its own, not the original's",
        ));
    }
    Ok(PlacedDraft {
        mailbox: drafts.map_or_else(|| "DRAFT".to_string(), |d| d.name.clone()),
        id: RemoteId::new(message.clone()),
        version: Version::new(message),
        message_id: draft.message_id.clone(),
        handle: Some(id),
    })
}

pub async fn remove(client: &Client, placed: &PlacedDraft) -> Result<()> {
    let id = placed
        .handle
        .as_deref()
        .ok_or_else(|| Error::internal("a Gmail draft recorded without its draft id"))?;
    let now = match api::draft(client, id).await {
        Ok(now) => now,
        Err(e) if e.error_type() == "not_found" => {
            return Err(draft_changed("it is gone (sent or deleted)"));
        }
        Err(e) => return Err(e),
    };
    let message = now.message.and_then(|m| m.id);
    if message.as_deref() != Some(placed.version.as_str()) {
        return Err(draft_changed("it was edited after it was saved"));
    }
    api::delete_draft(client, id).await
}
