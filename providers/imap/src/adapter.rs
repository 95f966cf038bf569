//! The IMAP adapter's offline half: setup, tag rules, the plan, the connector and the doctor.

use async_trait::async_trait;
use mailbroker_core::{
    AccountInfo, Adapter, Connector, DeleteBatch, DeleteMode, DoctorReport, Error, MailboxInfo,
    NewAccount, Operation, Provider, ProviderKind, Result, Secrets, WriteBatch,
};

use crate::connect::{ImapConfig, ImapSettings};
use crate::session::ImapProvider;

const SECRET_KIND: &str = "password";

/// Connects, detects what the server can do, lists its mailboxes: an account to store.
pub async fn setup(config: &ImapConfig, email: Option<String>) -> Result<NewAccount> {
    let mut imap = ImapProvider::connect(config).await?;
    let discovered: Result<Vec<MailboxInfo>> = async {
        imap.detect_custom_tags().await?;
        imap.list_mailboxes().await
    }
    .await;
    let capabilities = imap.capabilities().clone();
    imap.close().await;
    let mailboxes = discovered?;
    let settings = serde_json::to_value(config.settings())
        .map_err(|e| Error::internal(format!("imap settings: {e}")))?;
    Ok(NewAccount {
        provider: ProviderKind::Imap,
        email,
        settings,
        capabilities,
        cursor: None,
        secret: Some((SECRET_KIND.to_string(), config.password.clone())),
        mailboxes,
    })
}

pub struct Imap;

struct Connect(Box<ImapConfig>, String);

#[async_trait]
impl Connector for Connect {
    async fn connect(self: Box<Self>) -> Result<Box<dyn Provider>> {
        let provider = ImapProvider::connect(&self.0)
            .await
            .map_err(|e| e.context(format!("account {}", self.1)))?;
        Ok(Box::new(provider))
    }
}

#[async_trait]
impl Adapter for Imap {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Imap
    }

    fn validate_tag(&self, account: &AccountInfo<'_>, tag: &str, new: bool) -> Result<()> {
        crate::write::validate_tag(account.capabilities, tag, new)
    }

    fn rule_text(
        &self,
        _account: &AccountInfo<'_>,
        rule: &mailbroker_core::Rule,
        mailboxes: &[(String, Option<mailbroker_core::Role>)],
    ) -> Result<String> {
        mailbroker_managesieve::account::text(rule, mailboxes)
    }

    fn check(&self, account: &AccountInfo<'_>, op: Operation) -> Result<()> {
        let caps = account.capabilities;
        match op {
            Operation::Move | Operation::Delete(DeleteMode::Trash)
                if !caps.has("MOVE") && !caps.has("UIDPLUS") =>
            {
                Err(
                Error::unsupported(format!(
                    "account {}: the server has neither MOVE nor UIDPLUS, so a move could expunge other messages",
                    account.id
                ))
                .with_next_step(
                    "move or delete these messages in another mail client: this server cannot move exactly them (it would need MOVE or UIDPLUS)",
                ))
            }
            Operation::Delete(DeleteMode::Permanent) if !caps.has("UIDPLUS") => Err(
                Error::unsupported(format!(
                    "account {}: the server lacks UIDPLUS, so deleting for good would need a bare EXPUNGE, which can remove other messages",
                    account.id
                ))
                .with_next_step(match caps.has("MOVE") {
                    true => "stage the deletion in trash mode instead (without --permanent)",
                    // Trash mode needs MOVE or UIDPLUS too: nothing here can delete exactly them.
                    false => "delete these messages in another mail client: this server can neither expunge nor move exactly them (it has neither UIDPLUS nor MOVE)",
                }),
            ),
            _ => Ok(()),
        }
    }

    fn plan(&self, account: &AccountInfo<'_>, batch: &WriteBatch) -> Vec<String> {
        crate::write::plan(account.capabilities, batch)
    }

    fn plan_delete(&self, account: &AccountInfo<'_>, batch: &DeleteBatch) -> Vec<String> {
        crate::delete::plan_delete(account.capabilities, batch)
    }

    async fn connector(
        &self,
        account: &AccountInfo<'_>,
        secrets: &dyn Secrets,
    ) -> Result<Box<dyn Connector>> {
        let settings: ImapSettings = account.settings()?;
        let password = secrets.get(SECRET_KIND).await?;
        let config = ImapConfig::from_settings(settings, password)?;
        Ok(Box::new(Connect(Box::new(config), account.id.to_string())))
    }

    async fn doctor(
        &self,
        account: &AccountInfo<'_>,
        secrets: &dyn Secrets,
    ) -> Result<DoctorReport> {
        let settings: ImapSettings = account.settings()?;
        let mut imap = self.connector(account, secrets).await?.connect().await?;
        let listed = imap.list_mailboxes().await;
        let extensions = imap.capabilities().extensions.clone();
        imap.close().await;
        let mailboxes = listed?.len();
        Ok(DoctorReport {
            summary: format!(
                "{}: login ok at {}:{}, {mailboxes} mailboxes, extensions: {}",
                account.id,
                settings.host,
                settings.port,
                extensions.join(" ")
            ),
            details: serde_json::json!({
                "account": account.id,
                "host": settings.host,
                "port": settings.port,
                "mailboxes": mailboxes,
                "extensions": extensions,
            }),
        })
    }
}
