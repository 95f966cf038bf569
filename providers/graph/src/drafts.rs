//! Drafts on Outlook: a reply made by `createReply` (or `createReplyAll`), which Graph puts in
//! Drafts in the original's conversation with its threading headers, then given the draft's
//! own body, subject and recipients by a `PATCH`; a new message by `POST /me/messages`. Graph
//! writes the headers from these JSON fields, so nothing a value holds can add one. The
//! changeKey is the draft's version: an undo deletes it only while it is unchanged. Nothing
//! here sends (no `send`, `reply` or `sendMail`), and no `Mail.Send` is asked for.

use mailbroker_core::{
    Draft, Error, MailboxInfo, PlacedDraft, Recipient, RemoteId, Result, Version, draft_changed,
};
use serde_json::{Value, json};

use crate::client::Client;
use crate::write::segment;

fn recipients(list: &[Recipient]) -> Value {
    (list.iter())
        .map(|r| json!({ "emailAddress": { "name": r.name.clone().unwrap_or_default(), "address": r.email } }))
        .collect()
}

pub async fn create(
    client: &Client,
    draft: &Draft,
    drafts: Option<&MailboxInfo>,
) -> Result<PlacedDraft> {
    let fields = json!({
        "subject": draft.subject,
        "body": { "contentType": "text", "content": draft.body },
        "toRecipients": recipients(&draft.to),
        "ccRecipients": recipients(&draft.cc),
    });
    let made = match &draft.reply_of {
        Some(of) => {
            let verb = if of.all {
                "createReplyAll"
            } else {
                "createReply"
            };
            let path = format!("/me/messages/{}/{verb}", segment(&of.id));
            let made = client.post(&path, &json!({})).await?;
            let id = made["id"].as_str().unwrap_or_default();
            client
                .patch(
                    &format!("/me/messages/{}", segment(&RemoteId::new(id.to_string()))),
                    &fields,
                )
                .await?
        }
        None => client.post("/me/messages", &fields).await?,
    };
    let (Some(id), Some(key)) = (made["id"].as_str(), made["changeKey"].as_str()) else {
        return Err(
            Error::outcome_unknown("Outlook made the draft but did not say its id")
                .with_next_step("look in Outlook's Drafts before writing it again"),
        );
    };
    if made["isDraft"] != true {
        return Err(Error::verification_failed(
            "Outlook saved the draft as a message that is not a draft",
        ));
    }
    Ok(PlacedDraft {
        mailbox: drafts.map_or_else(|| "Drafts".to_string(), |d| d.name.clone()),
        id: RemoteId::new(id.to_string()),
        version: Version::new(key.to_string()),
        message_id: made["internetMessageId"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        handle: None,
    })
}

pub async fn remove(client: &Client, placed: &PlacedDraft) -> Result<()> {
    let path = format!("/me/messages/{}", segment(&placed.id));
    let now = match client
        .get(&format!("{path}?$select=changeKey,isDraft"))
        .await
    {
        Ok(now) => now,
        Err(e) if e.error_type() == "not_found" => {
            return Err(draft_changed("it is gone (sent or deleted)"));
        }
        Err(e) => return Err(e),
    };
    if now["isDraft"] != true || now["changeKey"].as_str() != Some(placed.version.as_str()) {
        return Err(draft_changed("it was changed after it was saved"));
    }
    client.delete(&path).await
}
