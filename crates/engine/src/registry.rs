//! The one place that knows which adapter serves which provider: a table. Adding a provider
//! means a crate under `providers/` with an `Adapter`, a line in `ADAPTERS`, and its
//! `account add` arguments in the CLI (ARCHITECTURE.md, "Adding a provider").

use async_trait::async_trait;
use mailbroker_core::{
    AccountId, Adapter, Connector, Error, Provider, ProviderKind, Result, Secrets,
};

use mailbroker_store::{AccountRecord, Store};

static ADAPTERS: [&(dyn Adapter + 'static); 5] = [
    &mailbroker_imap::Imap,
    &mailbroker_gmail::Gmail,
    &mailbroker_graph::Graph,
    &mailbroker_applescript::AppleScript,
    &mailbroker_jmap::Jmap,
];

/// The adapter of an account's provider.
pub fn adapter(kind: ProviderKind) -> Result<&'static dyn Adapter> {
    ADAPTERS
        .iter()
        .copied()
        .find(|a| a.kind() == kind)
        .ok_or_else(|| {
            Error::unsupported(format!(
                "{} accounts are not supported by this version",
                kind.as_str()
            ))
        })
}

/// An account's adapter, found by its provider (the store's rows know no provider code).
pub trait AccountAdapter {
    fn adapter(&self) -> Result<&'static dyn Adapter>;
}

impl AccountAdapter for AccountRecord {
    fn adapter(&self) -> Result<&'static dyn Adapter> {
        adapter(self.provider).map_err(|e| e.context(format!("account {}", self.id)))
    }
}

/// One account's secrets in the store, as an adapter reads and refreshes them.
#[derive(Clone)]
pub struct StoreSecrets {
    pub store: Store,
    pub account: AccountId,
}

#[async_trait]
impl Secrets for StoreSecrets {
    async fn get(&self, kind: &str) -> Result<String> {
        self.store.secret(&self.account, kind).await
    }

    async fn set(&self, kind: &str, value: &str) -> Result<()> {
        self.store.set_secret(&self.account, kind, value).await
    }

    fn shared(&self) -> std::sync::Arc<dyn Secrets> {
        std::sync::Arc::new(self.clone())
    }
}

/// Opens a session with the account's server using its stored settings and secret.
pub async fn connect(store: &Store, account: &AccountRecord) -> Result<Box<dyn Provider>> {
    connector(store, account).await?.connect().await
}

/// What opening a session needs, read from the index (and a token refreshed): the network
/// work alone is left, to overlap the caller's.
pub async fn connector(store: &Store, account: &AccountRecord) -> Result<Box<dyn Connector>> {
    let secrets = StoreSecrets {
        store: store.clone(),
        account: account.id.clone(),
    };
    let primary = account
        .adapter()?
        .connector(&account.info(), &secrets)
        .await;
    match &account.fallback {
        None => primary,
        Some(fallback) => Ok(Box::new(crate::fallback::WithFallback {
            primary,
            fallback: fallback.clone(),
            account: account.id.to_string(),
        })),
    }
}
