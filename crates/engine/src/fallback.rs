//! The fallback route an account opted into (`account set ID --fallback applescript`): when
//! its own route cannot be opened because the server is unavailable or refuses the
//! credentials, the change goes through the fallback instead, and every message it carried
//! says so (`ItemResult::route`, then the report and the journal).
//!
//! Architecture Invariant: a fallback is used only for an account whose record names one;
//! only the two failures above switch to it; and it carries writes and deletions only: a
//! sync or a read answers the server route's own error, since the fallback's ids are not the
//! account's.

use async_trait::async_trait;
use mailbroker_core::{
    Capabilities, Connector, DeleteBatch, Error, ItemResult, MailboxInfo, MailboxSyncReport,
    Provider, ProviderKind, RemoteId, Result, SyncRequest, SyncSink, WriteBatch,
};

use mailbroker_store::Fallback;

/// The providers that can stand in for another's account, with how to open such a session.
type Opener = fn(&serde_json::Value) -> Result<Box<dyn Provider>>;
static FALLBACKS: [(ProviderKind, Opener); 1] =
    [(ProviderKind::Applescript, mailbroker_applescript::fallback)];

/// How to open `provider` as a fallback; `unsupported` for one that cannot be.
pub fn opener(provider: ProviderKind) -> Result<Opener> {
    FALLBACKS
        .iter()
        .find(|(kind, _)| *kind == provider)
        .map(|(_, open)| *open)
        .ok_or_else(|| {
            Error::validation(format!("{} cannot be a fallback route", provider.as_str()))
                .with_next_step("use --fallback applescript")
        })
}

/// The errors of the account's own route that the fallback answers.
fn falls_back(e: &Error) -> bool {
    matches!(e.error_type(), "provider_unavailable" | "auth_required")
}

/// The account's own connector (or why it could not be made), with its fallback.
pub struct WithFallback {
    pub primary: Result<Box<dyn Connector>>,
    pub fallback: Fallback,
    pub account: String,
}

#[async_trait]
impl Connector for WithFallback {
    async fn connect(self: Box<Self>) -> Result<Box<dyn Provider>> {
        let failed = match self.primary {
            Ok(connector) => match connector.connect().await {
                Ok(provider) => return Ok(provider),
                Err(e) => e,
            },
            Err(e) => e,
        };
        if !falls_back(&failed) {
            return Err(failed);
        }
        let route = self.fallback.provider.as_str();
        let inner = opener(self.fallback.provider)
            .and_then(|open| open(&self.fallback.settings))
            .map_err(|e| {
                failed.clone().context(format!(
                    "the {route} fallback could not run either ({})",
                    e.message()
                ))
            })?;
        tracing::warn!(
            account = self.account,
            route,
            "the account's own route is unavailable ({}); using its fallback",
            failed.message()
        );
        Ok(Box::new(Routed {
            inner,
            route,
            server: failed,
        }))
    }
}

/// A fallback session: writes and deletions through `inner`, each result marked with its
/// route; anything else answers the server route's error.
struct Routed {
    inner: Box<dyn Provider>,
    route: &'static str,
    server: Error,
}

impl Routed {
    fn marked(&self, items: Vec<ItemResult>) -> Vec<ItemResult> {
        items
            .into_iter()
            .map(|item| ItemResult {
                route: Some(self.route.to_string()),
                ..item
            })
            .collect()
    }

    fn server_only(&self, what: &str) -> Error {
        self.server.clone().context(format!(
            "{what} needs the account's own route; the {} fallback carries only changes",
            self.route
        ))
    }
}

#[async_trait]
impl Provider for Routed {
    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }

    async fn list_mailboxes(&mut self) -> Result<Vec<MailboxInfo>> {
        Err(self.server_only("listing mailboxes"))
    }

    async fn sync(
        &mut self,
        _request: &SyncRequest,
        _sink: &mut dyn SyncSink,
    ) -> Result<Vec<MailboxSyncReport>> {
        Err(self.server_only("a sync"))
    }

    async fn apply(&mut self, batch: &WriteBatch) -> Result<Vec<ItemResult>> {
        let items = self.inner.apply(batch).await?;
        Ok(self.marked(items))
    }

    async fn delete(&mut self, batch: &DeleteBatch) -> Result<Vec<ItemResult>> {
        let items = self.inner.delete(batch).await?;
        Ok(self.marked(items))
    }

    async fn fetch_sources(
        &mut self,
        _mailbox: &str,
        _ids: &[RemoteId],
    ) -> Result<Vec<(RemoteId, Vec<u8>)>> {
        Err(self.server_only("reading a message"))
    }

    fn commands_sent(&self) -> u64 {
        self.inner.commands_sent()
    }

    async fn close(&mut self) {
        self.inner.close().await;
    }
}
