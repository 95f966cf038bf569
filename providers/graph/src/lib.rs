//! mailbroker's Microsoft Graph adapter: mail folders and messages over Graph v1.0
//! (`client`), in our terms (`convert`), synced by delta links (`sync`).
//!
//! Ids are Graph's immutable ids (every request asks for them), so a message keeps its id,
//! and its index row, when it moves. Accounts are set up by the device code flow
//! (`oauth`, `adapter`). Writes go in `$batch` calls with the changeKey's entity tag as
//! precondition and a read-back (`write`, `verify`); staged deletions run there too; a
//! message is read by its MIME source (`$value`).

mod adapter;
pub mod client;
pub mod convert;
pub mod oauth;
mod sync;
mod verify;
mod write;

pub use adapter::{Graph, setup};
pub use oauth::show_code;

use async_trait::async_trait;
use mailbroker_core::{
    Capabilities, DeleteBatch, DeleteMode, Error, ItemResult, MailboxInfo, MailboxSyncReport,
    Provider, RemoteId, Result, SyncRequest, SyncSink, WriteBatch,
};
use serde_json::json;

/// A session with one Graph mailbox. Nothing is sent until it is used.
pub struct GraphProvider {
    client: client::Client,
    capabilities: Capabilities,
    /// The folder tree, read once per session when a write needs a folder's id.
    folders: Option<Vec<convert::Folder>>,
    /// Master category names known to exist, read once per session.
    categories: Option<Vec<String>>,
    /// Whether the account granted `MailboxSettings.ReadWrite`, which reads and adds the
    /// mailbox's category list. Without it a tag is written all the same: Outlook shows a
    /// category missing from the list, only without a colour.
    master_list: bool,
}

impl GraphProvider {
    /// A session with a fixed access token.
    pub fn new(base: &str, token: String, account: &str) -> Result<GraphProvider> {
        Ok(GraphProvider::with(client::Client::new(
            base, token, account,
        )?))
    }

    /// A session for a signed-in account: a token Graph refuses is renewed and stored.
    pub fn signed_in(base: &str, renewal: client::Renewal, account: &str) -> Result<GraphProvider> {
        Ok(GraphProvider::with(client::Client::signed_in(
            base, renewal, account,
        )?))
    }

    /// Whether the session may read and add to the mailbox's category list (the account
    /// granted `MailboxSettings.ReadWrite`).
    pub fn with_category_list(mut self, granted: bool) -> GraphProvider {
        self.master_list = granted;
        self
    }

    fn with(client: client::Client) -> GraphProvider {
        GraphProvider {
            client,
            capabilities: Capabilities::default(),
            folders: None,
            categories: None,
            master_list: false,
        }
    }

    /// The folder id at `path`: as the index knows it (`known`, filled by the last sync), or
    /// else from the folder tree, listed once per session.
    async fn folder_id(
        &mut self,
        path: &str,
        known: &std::collections::BTreeMap<String, String>,
    ) -> Result<String> {
        if let Some(id) = known.get(path) {
            return Ok(id.clone());
        }
        if self.folders.is_none() {
            self.folders = Some(sync::folders(&self.client).await?);
        }
        self.folders
            .iter()
            .flatten()
            .find(|f| f.path == path)
            .map(|f| f.id.clone())
            .ok_or_else(|| {
                Error::not_found(format!("no folder {path:?} in this mailbox"))
                    .with_next_step("run: mailbroker sync, then list the mailboxes")
            })
    }

    /// Adds the categories among `tags` that the mailbox's category list lacks, once each,
    /// so a new tag shows in Outlook with a colour. Only where the account granted the list
    /// (`master_list`), and never in the write's way: the tag is the message's, and a list
    /// that cannot be read or added to leaves it without a colour, nothing more.
    async fn ensure_categories(&mut self, tags: &[String]) {
        if tags.is_empty() || !self.master_list {
            return;
        }
        if let Err(e) = self.add_to_list(tags).await {
            tracing::debug!(error = %e, "graph: the category list was not updated");
        }
    }

    async fn add_to_list(&mut self, tags: &[String]) -> Result<()> {
        if self.categories.is_none() {
            self.categories = Some(self.master_categories().await?);
        }
        for tag in tags {
            // Exchange compares category names case-blind, beyond ASCII too.
            let folded = tag.to_lowercase();
            let known = |names: &[String]| names.iter().any(|c| c.to_lowercase() == folded);
            if self.categories.as_deref().is_some_and(known) {
                continue;
            }
            let body = json!({ "displayName": tag, "color": "preset0" });
            if let Err(e) = self.client.post("me/outlook/masterCategories", &body).await {
                // Made by an earlier run whose answer was lost, or by another client since
                // the list was read (409): it exists, which is all that was wanted.
                let names = self.master_categories().await?;
                if !known(&names) {
                    return Err(e);
                }
            }
            self.categories
                .get_or_insert_with(Vec::new)
                .push(tag.clone());
        }
        Ok(())
    }

    async fn master_categories(&self) -> Result<Vec<String>> {
        let listed = self.client.get("me/outlook/masterCategories").await?;
        Ok(listed["value"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["displayName"].as_str().map(str::to_string))
            .collect())
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

    async fn apply(&mut self, batch: &WriteBatch) -> Result<Vec<ItemResult>> {
        let to = match &batch.move_to {
            Some(path) => Some((self.folder_id(path, &batch.folders).await?, path.clone())),
            None => None,
        };
        self.ensure_categories(&batch.op.add_tags).await;
        let goal = write::Goal {
            op: &batch.op,
            to: to.as_ref().map(|(id, path)| (id.as_str(), path.as_str())),
        };
        write::apply(&self.client, batch, &goal).await
    }

    fn commands_sent(&self) -> u64 {
        self.client.requests_sent()
    }

    /// Each message's MIME source (`GET /me/messages/{id}/$value`), parsed by the caller as
    /// any other provider's; one that is gone is left out.
    async fn fetch_sources(
        &mut self,
        _mailbox: &str,
        ids: &[RemoteId],
    ) -> Result<Vec<(RemoteId, Vec<u8>)>> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let path = format!("me/messages/{}/$value", write::segment(id));
            if let Some(bytes) = self.client.get_bytes(&path).await? {
                out.push((id.clone(), bytes));
            }
        }
        Ok(out)
    }

    async fn delete(&mut self, batch: &DeleteBatch) -> Result<Vec<ItemResult>> {
        let trash = match (batch.mode, &batch.trash) {
            (DeleteMode::Trash, Some(path)) => Some((
                self.folder_id(path, &batch.folders).await?,
                path.to_string(),
            )),
            (DeleteMode::Trash, None) => {
                return Err(Error::not_found("this account has no Deleted Items folder")
                    .with_next_step("run: mailbroker sync, or use permanent mode"));
            }
            (DeleteMode::Permanent, _) => None,
        };
        let source = self.folder_id(&batch.mailbox, &batch.folders).await?;
        let place = write::Deletion {
            source: &source,
            trash: trash
                .as_ref()
                .map(|(id, path)| (id.as_str(), path.as_str())),
        };
        write::delete(&self.client, batch, &place).await
    }
}
