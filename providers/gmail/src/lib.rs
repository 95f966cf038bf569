//! mailbroker's Gmail adapter: account setup (`oauth`), the API calls (`api`, over `client`),
//! labels in our terms (`convert`), sync by history id (`sync`) and label writes with
//! history-based preconditions and verification (`write`).

mod adapter;
pub mod api;
pub mod client;
pub mod convert;
pub mod oauth;
mod sync;
mod window;
mod write;

use std::sync::Arc;

use async_trait::async_trait;
use mailbroker_core::{
    Capabilities, DeleteBatch, Error, ItemResult, MailboxInfo, MailboxSyncReport, Provider,
    RemoteId, Result, SyncRequest, SyncSink, WriteBatch,
};

pub use adapter::{Gmail, setup};

/// Gmail's longest label name.
pub const MAX_LABEL_LEN: u32 = 225;

/// Checks a tag as a Gmail label name (nothing sent): not empty, not too long, no control
/// characters, and not one of the system labels, which the patch's other fields express.
pub fn validate_tag(tag: &str) -> Result<()> {
    let system = [
        "INBOX",
        "SPAM",
        "TRASH",
        "UNREAD",
        "STARRED",
        "IMPORTANT",
        "SENT",
        "DRAFT",
        "CHAT",
    ];
    let problem = if tag.trim().is_empty() {
        Some("is empty")
    } else if tag.chars().count() > MAX_LABEL_LEN as usize {
        Some("is longer than Gmail's 225 characters")
    } else if tag.chars().any(char::is_control) {
        Some("contains a control character")
    } else if system.iter().any(|s| s.eq_ignore_ascii_case(tag)) {
        Some("is a Gmail system label; use read, flagged or move_to")
    } else {
        None
    };
    match problem {
        Some(p) => Err(Error::validation(format!("tag {tag:?} {p}"))),
        None => Ok(()),
    }
}

/// A session with one Gmail account. Nothing is sent until it is used.
pub struct GmailProvider {
    client: Arc<client::Client>,
    cursor: convert::Cursor,
    capabilities: Capabilities,
    account: String,
}

impl GmailProvider {
    /// `cursor` is what the last sync left (history id and the user labels).
    pub fn new(
        settings: oauth::OAuthSettings,
        tokens: oauth::Tokens,
        cursor: Option<&str>,
        capabilities: Capabilities,
        account: &str,
    ) -> Result<GmailProvider> {
        Ok(GmailProvider {
            client: client::Client::new(settings, tokens, account)?,
            cursor: convert::Cursor::parse(cursor),
            capabilities,
            account: account.to_string(),
        })
    }
}

#[async_trait]
impl Provider for GmailProvider {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn list_mailboxes(&mut self) -> Result<Vec<MailboxInfo>> {
        Ok(convert::mailboxes())
    }

    async fn sync(
        &mut self,
        request: &SyncRequest,
        sink: &mut dyn SyncSink,
    ) -> Result<Vec<MailboxSyncReport>> {
        sync::sync(&self.client, &mut self.cursor, request, sink).await
    }

    async fn apply(&mut self, batch: &WriteBatch) -> Result<Vec<ItemResult>> {
        self.apply_batch(batch).await
    }

    async fn delete(&mut self, batch: &DeleteBatch) -> Result<Vec<ItemResult>> {
        self.delete_batch(batch).await
    }

    async fn fetch_sources(
        &mut self,
        _mailbox: &str,
        ids: &[RemoteId],
    ) -> Result<Vec<(RemoteId, Vec<u8>)>> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let m = match api::raw(&self.client, id.as_str()).await {
                Ok(m) => m,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            };
            let bytes = m.raw.ok_or_else(|| {
                Error::provider_unavailable("Gmail sent no source for the message")
            })?;
            out.push((id.clone(), bytes));
        }
        Ok(out)
    }

    fn commands_sent(&self) -> u64 {
        self.client.requests()
    }
}
