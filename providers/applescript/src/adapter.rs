//! The AppleScript adapter's offline half: setup, what the route can and cannot do (said
//! before anything is planned), the plan, the connector, the doctor; and the fallback session
//! for another provider's account.

use async_trait::async_trait;
use mailbroker_core::{
    AccountInfo, Adapter, Capabilities, Connector, DeleteBatch, DeleteMode, DoctorReport, Error,
    NewAccount, Operation, Provider, ProviderKind, Ready, Result, Secrets, WriteBatch,
};
use serde::{Deserialize, Serialize};

use crate::mail::{Ids, MailApp, PER_SCRIPT};
use crate::runner::Runner;

/// What an AppleScript account (or fallback) stores: the account's name in Mail.app. Mail
/// keeps the credentials; mailbroker keeps none.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MailSettings {
    pub mail_account: String,
}

pub fn no_tags() -> Error {
    Error::unsupported(
        "the AppleScript route cannot change tags: Mail.app's scripting has no labels or keywords, only read, flagged and the mailbox",
    )
    .with_next_step("change tags through the account's server route (IMAP, Gmail or Graph)")
}

pub fn no_permanent() -> Error {
    Error::unsupported(
        "the AppleScript route never deletes for good: Mail.app's scripting cannot show that a message is gone from the server, so only trash mode runs there",
    )
    .with_next_step("stage the deletion in trash mode, or run it through the account's server route")
}

/// Reads the Mail.app account's mailboxes: an account to store (no secret).
pub async fn setup(mail_account: &str, email: Option<String>) -> Result<NewAccount> {
    let mut mail = MailApp::new(Runner::locate()?, mail_account, Ids::Mail);
    let mailboxes = mail.list_mailboxes().await?;
    Ok(NewAccount {
        provider: ProviderKind::Applescript,
        email,
        settings: serde_json::to_value(MailSettings {
            mail_account: mail_account.to_string(),
        })
        .map_err(|e| Error::internal(e.to_string()))?,
        capabilities: Capabilities::default(),
        cursor: None,
        secret: None,
        mailboxes,
    })
}

/// A session with Mail.app's copy of another provider's account, for the writes its own
/// route cannot carry now; messages are found there by Message-ID.
pub fn fallback(settings: &serde_json::Value) -> Result<Box<dyn Provider>> {
    let settings: MailSettings = serde_json::from_value(settings.clone())
        .map_err(|e| Error::internal(format!("fallback settings: {e}")))?;
    let runner = Runner::locate()?;
    Ok(Box::new(MailApp::new(
        runner,
        &settings.mail_account,
        Ids::Foreign,
    )))
}

pub struct AppleScript;

#[async_trait]
impl Adapter for AppleScript {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Applescript
    }

    fn validate_tag(&self, _account: &AccountInfo<'_>, _tag: &str, _new: bool) -> Result<()> {
        Err(no_tags())
    }

    fn check(&self, _account: &AccountInfo<'_>, op: Operation) -> Result<()> {
        match op {
            Operation::Tags => Err(no_tags()),
            Operation::Delete(DeleteMode::Permanent) => Err(no_permanent()),
            _ => Ok(()),
        }
    }

    fn plan(&self, account: &AccountInfo<'_>, batch: &WriteBatch) -> Vec<String> {
        plan_lines(
            &mail_account(account),
            &batch.mailbox,
            batch.targets.len(),
            &describe(batch),
        )
    }

    fn plan_delete(&self, account: &AccountInfo<'_>, batch: &DeleteBatch) -> Vec<String> {
        plan_lines(
            &mail_account(account),
            &batch.mailbox,
            batch.targets.len(),
            "delete (to the trash)",
        )
    }

    async fn connector(
        &self,
        account: &AccountInfo<'_>,
        _secrets: &dyn Secrets,
    ) -> Result<Box<dyn Connector>> {
        let mail: MailSettings = account.settings()?;
        let runner = Runner::locate()?;
        Ok(Box::new(Ready(Box::new(MailApp::new(
            runner,
            &mail.mail_account,
            Ids::Mail,
        )))))
    }

    async fn doctor(
        &self,
        account: &AccountInfo<'_>,
        _secrets: &dyn Secrets,
    ) -> Result<DoctorReport> {
        let mail: MailSettings = account.settings()?;
        let mut app = MailApp::new(Runner::locate()?, &mail.mail_account, Ids::Mail);
        let mailboxes = app.list_mailboxes().await?;
        Ok(DoctorReport {
            summary: format!(
                "{}: Mail.app answers for account {:?} ({} mailboxes); this route changes read, flagged and mailboxes only",
                account.id,
                mail.mail_account,
                mailboxes.len()
            ),
            details: serde_json::json!({
                "account": account.id,
                "mail_account": mail.mail_account,
                "mailboxes": mailboxes.len(),
                "route": "applescript",
            }),
        })
    }
}

/// The Mail.app account a plan names (empty in the plan of an account whose settings do not
/// read: its connector says why).
fn mail_account(account: &AccountInfo<'_>) -> String {
    account
        .settings::<MailSettings>()
        .map_or_else(|_| String::new(), |m| m.mail_account)
}

fn describe(batch: &WriteBatch) -> String {
    let mut parts = Vec::new();
    if let Some(read) = batch.op.read {
        parts.push(format!("set read status to {read}"));
    }
    if let Some(flagged) = batch.op.flagged {
        parts.push(format!("set flagged status to {flagged}"));
    }
    if let Some(to) = &batch.move_to {
        parts.push(format!("set mailbox to {to:?}"));
    }
    parts.join(", ")
}

/// The plan of a batch: what each script does, how many scripts, and the read-back.
pub fn plan_lines(account: &str, mailbox: &str, n: usize, what: &str) -> Vec<String> {
    vec![format!(
        "osascript (Mail.app account {account:?}) {mailbox}: {what} ×{n}, then read each back, in {} script(s) of ≤ {PER_SCRIPT}",
        n.div_ceil(PER_SCRIPT)
    )]
}
