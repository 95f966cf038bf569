//! Account services shared by the CLI and (later) MCP: add, list, show, remove.

use mailbroker_core::{AccountId, Error, MailboxInfo, Provider, ProviderKind, Result};
use mailbroker_imap::{ImapConfig, ImapProvider};
use serde::Serialize;

use crate::store::{AccountRecord, MailboxRecord, Store, now_secs};

/// Connects to an IMAP server, detects what it can do, lists its mailboxes and stores it all.
/// Nothing is stored unless every step succeeded.
pub async fn add_imap(
    store: &Store,
    id: AccountId,
    email: Option<String>,
    config: ImapConfig,
) -> Result<AccountView> {
    if store.account(&id).await.is_ok() {
        return Err(Error::validation(format!("account {id} already exists"))
            .with_next_step(format!("run: mailbroker account remove {id}")));
    }
    let mut imap = ImapProvider::connect(&config).await?;
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
    let record = AccountRecord {
        id,
        provider: ProviderKind::Imap,
        email,
        settings,
        capabilities,
        created_at: now_secs(),
        last_sync_at: None,
        sync_cursor: None,
    };
    store
        .add_account(&record, ("password", &config.password), &mailboxes)
        .await?;
    show(store, &record.id).await
}

/// An account as the CLI prints it: never its secrets.
#[derive(Debug, Serialize)]
pub struct AccountView {
    #[serde(flatten)]
    pub account: AccountRecord,
    /// Where its secret rests: `keyring` (the OS keyring) or `index` (the 0600 index).
    pub secret_store: Option<&'static str>,
    pub mailboxes: Vec<MailboxRecord>,
}

pub async fn show(store: &Store, id: &AccountId) -> Result<AccountView> {
    let account = store.account(id).await?;
    let mailboxes = store.mailboxes(id).await?;
    let secret_store = store.secret_store(id).await?.map(|s| s.as_str());
    Ok(AccountView {
        account,
        secret_store,
        mailboxes,
    })
}

pub async fn list(store: &Store) -> Result<Vec<AccountRecord>> {
    store.accounts().await
}

pub async fn remove(store: &Store, id: &AccountId) -> Result<()> {
    store.remove_account(id).await
}
