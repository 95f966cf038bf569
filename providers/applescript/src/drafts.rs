//! Drafts in Mail.app: Mail's own `reply` to the original (so Mail threads it) or a new
//! outgoing message, with the recipients, subject and body mailbroker made, saved and never
//! sent; found again as the one message that appeared in the drafts mailbox. An undo deletes
//! it only while it is that message: Mail saves an edited draft as a new message.

use mailbroker_core::{Draft, Error, MailboxInfo, PlacedDraft, RemoteId, Result, draft_changed};
use serde_json::Value;

use crate::mail::{Ids, MailApp, version_of};
use crate::runner::Kind;
use crate::script::{self, DraftScript, Target};

fn addresses(list: &[mailbroker_core::Recipient]) -> Vec<(&str, &str)> {
    (list.iter())
        .map(|r| (r.email.as_str(), r.name.as_deref().unwrap_or_default()))
        .collect()
}

/// Mail's `message id` has no angle brackets.
fn bare(message_id: &str) -> String {
    message_id
        .trim_start_matches('<')
        .trim_end_matches('>')
        .to_string()
}

impl MailApp {
    pub(crate) async fn save_draft(
        &mut self,
        draft: &Draft,
        drafts: Option<&MailboxInfo>,
    ) -> Result<PlacedDraft> {
        let drafts = drafts.ok_or_else(|| {
            Error::not_found("Mail.app shows no Drafts mailbox for this account")
                .with_next_step("write the reply in Mail.app")
        })?;
        let original = draft.reply_of.as_ref().map(|r| {
            let target = Target {
                mail_id: (self.ids() == Ids::Mail).then(|| r.id.as_str().to_string()),
                message_id: draft.in_reply_to.as_deref().map(bare),
            };
            (r.mailbox.as_str(), target)
        });
        let sender = (draft.from.as_ref())
            .map(|f| match &f.name {
                Some(name) => format!("{name} <{}>", f.email),
                None => f.email.clone(),
            })
            .unwrap_or_default();
        let request = DraftScript {
            drafts: &drafts.name,
            original,
            reply_all: draft.reply_of.as_ref().is_some_and(|r| r.all),
            to: addresses(&draft.to),
            cc: addresses(&draft.cc),
            subject: &draft.subject,
            body: &draft.body,
            sender: &sender,
        };
        let script = script::draft(self.account(), &request, self.runner().timeout_secs);
        let answer = self.runner().run(&script, Kind::Write).await?;
        placed(&answer, &drafts.name)
    }

    pub(crate) async fn remove_saved_draft(&mut self, placed: &PlacedDraft) -> Result<()> {
        let target = Target {
            mail_id: Some(placed.id.as_str().to_string()),
            message_id: Some(placed.message_id.clone()),
        };
        let timeout = self.runner().timeout_secs;
        let script = script::remove_draft(self.account(), &placed.mailbox, &target, timeout);
        let answer = self.runner().run(&script, Kind::Write).await?;
        if answer["found"].as_bool() != Some(true) {
            return Err(draft_changed(
                "it is not in the drafts mailbox as saved (Mail saves an edited draft anew)",
            ));
        }
        if answer["gone"].as_bool() != Some(true) {
            return Err(Error::verification_failed(
                "Mail.app deleted the draft, but it is still in the drafts mailbox",
            )
            .with_next_step("look in Mail.app's Drafts"));
        }
        Ok(())
    }
}

/// The draft Mail.app saved, from the script's answer.
fn placed(answer: &Value, drafts: &str) -> Result<PlacedDraft> {
    let (Some(1), Some(id)) = (answer["saved"].as_u64(), answer["mail_id"].as_str()) else {
        let seen = answer["saved"].as_u64().unwrap_or(0);
        return Err(Error::outcome_unknown(format!(
            "Mail.app was asked to save the draft, but {seen} new message(s) with its subject \
             appeared in {drafts}"
        ))
        .with_next_step("look in Mail.app's Drafts before writing it again"));
    };
    let read = answer["read"].as_bool().unwrap_or(false);
    let flagged = answer["flagged"].as_bool().unwrap_or(false);
    Ok(PlacedDraft {
        mailbox: drafts.into(),
        id: RemoteId::new(id),
        version: version_of(read, flagged),
        message_id: answer["message_id"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        handle: None,
    })
}
