//! Drafts over JMAP: the message uploaded as a blob and made an email by `Email/import` in
//! the drafts mailbox with `$draft` (and `$seen`: the person wrote it), read back by
//! `Email/get`; an undo destroys it only while its mailboxes and keywords are as saved (an
//! edit in a mail client makes a new email, so the old id is then gone).

use std::collections::BTreeMap;

use mailbroker_core::draft_changed;
use mailbroker_core::{Draft, Error, MailboxInfo, PlacedDraft, RemoteId, Result, Version};
use serde_json::json;

use crate::client::Client;
use crate::wire::{Call, Email, GetResponse, SetResponse, nth};

const HELD: &[&str] = &["id", "mailboxIds", "keywords", "messageId"];

/// Its version: the mailboxes and keywords it holds, which an edit or a move changes.
fn version(email: &Email) -> Version {
    let on = |m: &BTreeMap<String, bool>| -> Vec<String> {
        m.iter()
            .filter(|(_, v)| **v)
            .map(|(k, _)| k.clone())
            .collect()
    };
    let held = json!({ "mailboxIds": on(&email.mailbox_ids), "keywords": on(&email.keywords) });
    Version::new(held.to_string())
}

pub async fn create(
    client: &mut Client,
    draft: &Draft,
    source: &[u8],
    drafts: Option<&MailboxInfo>,
) -> Result<PlacedDraft> {
    let drafts = drafts.ok_or_else(|| {
        Error::not_found("the account has no mailbox with the drafts role")
            .with_next_step("run: mailbroker sync, then try again")
    })?;
    let folder = drafts.remote.clone().ok_or_else(|| {
        Error::not_found("jmap: the drafts mailbox has no id in the index")
            .with_next_step("run: mailbroker sync, then try again")
    })?;
    let blob = client.upload(source.to_vec()).await?;
    let import = json!({
        "blobId": blob,
        "mailboxIds": { folder.as_str(): true },
        "keywords": { "$draft": true, "$seen": true },
    });
    let call = Call::EmailImport(BTreeMap::from([("draft".to_string(), import)]));
    let answers = (client.call(vec![call]).await).map_err(|e| {
        Error::outcome_unknown(format!("jmap Email/import: {}", e.message()))
            .with_next_step("look in the Drafts mailbox before writing it again")
    })?;
    let imported: serde_json::Value = nth(&answers, 0, "Email/import")?;
    let Some(id) = imported["created"]["draft"]["id"].as_str() else {
        let why = &imported["notCreated"]["draft"]["type"];
        return Err(Error::provider_write_failed(format!(
            "jmap Email/import refused the draft: {why}"
        )));
    };
    let email = read(client, id).await?.ok_or_else(|| {
        Error::verification_failed("the draft was imported but is not there when read back")
    })?;
    let is_draft = email.keywords.get("$draft") == Some(&true);
    if !is_draft || email.mailbox_ids.get(&folder) != Some(&true) {
        return Err(Error::verification_failed(
            "the draft was saved without $draft or outside the drafts mailbox",
        ));
    }
    Ok(PlacedDraft {
        mailbox: drafts.name.clone(),
        id: RemoteId::new(id.to_string()),
        version: version(&email),
        message_id: draft.message_id.clone(),
        handle: None,
    })
}

async fn read(client: &mut Client, id: &str) -> Result<Option<Email>> {
    let answers = client.call(vec![Call::email_get([id], HELD)]).await?;
    let got: GetResponse<Email> = nth(&answers, 0, "Email/get")?;
    Ok(got.list.into_iter().next())
}

pub async fn remove(client: &mut Client, placed: &PlacedDraft) -> Result<()> {
    let Some(email) = read(client, placed.id.as_str()).await? else {
        return Err(draft_changed("it is gone (sent, deleted, or saved again)"));
    };
    if version(&email) != placed.version || !email.message_id.contains(&placed.message_id) {
        return Err(draft_changed("it was changed after it was saved"));
    }
    let destroy = Call::EmailDestroy(vec![placed.id.as_str().to_string()]);
    let answers = client.call(vec![destroy]).await?;
    let set: SetResponse = nth(&answers, 0, "Email/set")?;
    if let Some(e) = set.not_destroyed.values().next() {
        return Err(Error::provider_write_failed(format!(
            "jmap Email/set refused to destroy the draft: {}",
            e.kind
        )));
    }
    if read(client, placed.id.as_str()).await?.is_some() {
        return Err(Error::verification_failed(
            "the draft is still there after it was destroyed",
        ));
    }
    Ok(())
}
