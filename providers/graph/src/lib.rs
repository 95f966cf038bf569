//! mailbroker's Microsoft Graph adapter: mail folders and messages over Graph v1.0
//! (`client`), in our terms (`convert`), synced by delta links (`sync`).
//!
//! Ids are Graph's immutable ids (every request asks for them), so a message keeps its id,
//! and its index row, when it moves. Accounts are set up by the device code flow
//! (`oauth`, `adapter`). Not built yet: writes in `$batch` calls and staged deletion, which
//! the adapter refuses up front.

mod adapter;
pub mod client;
pub mod convert;
pub mod oauth;
mod sync;

pub use adapter::{Graph, setup, show_code};

use async_trait::async_trait;
use mailbroker_core::{
    Capabilities, MailboxInfo, MailboxSyncReport, Provider, Result, SyncRequest, SyncSink,
};

/// A session with one Graph mailbox. Nothing is sent until it is used.
pub struct GraphProvider {
    client: client::Client,
    capabilities: Capabilities,
}

impl GraphProvider {
    pub fn new(base: &str, token: String, account: &str) -> Result<GraphProvider> {
        Ok(GraphProvider {
            client: client::Client::new(base, token, account)?,
            capabilities: Capabilities::default(),
        })
    }
}

#[async_trait]
impl Provider for GraphProvider {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn list_mailboxes(&mut self) -> Result<Vec<MailboxInfo>> {
        let folders = sync::folders(&self.client).await?;
        Ok(folders.iter().map(convert::Folder::info).collect())
    }

    async fn sync(
        &mut self,
        request: &SyncRequest,
        sink: &mut dyn SyncSink,
    ) -> Result<Vec<MailboxSyncReport>> {
        sync::sync(&self.client, request, sink).await
    }
}
