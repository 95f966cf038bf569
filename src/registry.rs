//! The one place that knows which adapter serves which provider. Adding a provider means a
//! crate under `providers/` and a line here (plus its `account add` arguments in the CLI).

use mailbroker_core::{DeleteBatch, Error, Provider, ProviderKind, Result, WriteBatch};

use crate::store::{AccountRecord, Store};

/// Opens a session with the account's server using its stored settings and secret.
pub async fn connect(store: &Store, account: &AccountRecord) -> Result<Box<dyn Provider>> {
    connector(store, account).await?.connect().await
}

/// What opening a session needs from the index, read: settings and secret (IMAP), or a
/// session ready to use (Gmail's needs no connection of its own; its token is read, and
/// refreshed if it has expired). Reading this first lets a session open ahead with its
/// network work alone left to overlap the caller's.
pub enum Connector {
    Imap(Box<mailbroker_imap::ImapConfig>, String),
    Ready(Box<dyn Provider>),
}

pub async fn connector(store: &Store, account: &AccountRecord) -> Result<Connector> {
    match account.provider {
        ProviderKind::Imap => {
            let settings = serde_json::from_value(account.settings.clone()).map_err(|e| {
                Error::internal(format!("account {}: bad imap settings: {e}", account.id))
            })?;
            let password = store.secret(&account.id, "password").await?;
            let config = mailbroker_imap::ImapConfig::from_settings(settings, password)?;
            Ok(Connector::Imap(Box::new(config), account.id.to_string()))
        }
        ProviderKind::Gmail => {
            let (settings, tokens) =
                crate::oauth_accounts::access_token(store, &account.id).await?;
            let provider = mailbroker_gmail::GmailProvider::new(
                settings,
                tokens,
                account.sync_cursor.as_deref(),
                account.capabilities.clone(),
                account.id.as_str(),
            )?;
            Ok(Connector::Ready(Box::new(provider)))
        }
        other => Err(Error::unsupported(format!(
            "account {}: {} accounts are not supported by this version",
            account.id,
            other.as_str()
        ))),
    }
}

impl Connector {
    /// Does the network part of opening the session.
    pub async fn connect(self) -> Result<Box<dyn Provider>> {
        match self {
            Connector::Imap(config, account) => {
                let provider = mailbroker_imap::ImapProvider::connect(&config)
                    .await
                    .map_err(|e| e.context(format!("account {account}")))?;
                Ok(Box::new(provider))
            }
            Connector::Ready(provider) => Ok(provider),
        }
    }
}

/// Checks a tag against the account's provider rules, from stored capabilities (nothing sent).
pub fn validate_tag(account: &AccountRecord, tag: &str, new: bool) -> Result<()> {
    match account.provider {
        ProviderKind::Imap => mailbroker_imap::validate_tag(&account.capabilities, tag, new),
        ProviderKind::Gmail => mailbroker_gmail::validate_tag(tag),
        _ => Ok(()),
    }
}

/// Whether the provider already has this tag though no indexed message carries it (a Gmail
/// label with no messages yet), from what the last sync stored; nothing is sent.
pub fn tag_exists(account: &AccountRecord, tag: &str) -> bool {
    match account.provider {
        ProviderKind::Gmail => {
            mailbroker_gmail::convert::Cursor::parse(account.sync_cursor.as_deref())
                .label_id(tag)
                .is_some()
        }
        _ => false,
    }
}

/// The commands a batch will send, for dry runs and the journal.
pub fn plan(account: &AccountRecord, batch: &WriteBatch) -> Vec<String> {
    match account.provider {
        ProviderKind::Imap => mailbroker_imap::plan(&account.capabilities, batch),
        ProviderKind::Gmail => {
            let cursor = mailbroker_gmail::convert::Cursor::parse(account.sync_cursor.as_deref());
            mailbroker_gmail::plan(&cursor, batch)
        }
        other => vec![format!(
            "{}: {} messages in {:?}",
            other.as_str(),
            batch.targets.len(),
            batch.mailbox
        )],
    }
}

/// The commands a staged deletion's batch will send, for `delete-staged ID --dry-run`.
pub fn plan_delete(account: &AccountRecord, batch: &DeleteBatch) -> Vec<String> {
    match account.provider {
        ProviderKind::Imap => mailbroker_imap::plan_delete(&account.capabilities, batch),
        ProviderKind::Gmail => mailbroker_gmail::plan_delete(&account.capabilities, batch),
        other => vec![format!(
            "{}: delete {} messages in {:?} ({:?})",
            other.as_str(),
            batch.targets.len(),
            batch.mailbox,
            batch.mode
        )],
    }
}
