//! mailbroker's JMAP adapter (RFC 8620, RFC 8621): one JMAP session (`client`), its mailboxes
//! and emails in our terms (`convert`), synced by `Email/changes` from the account's email
//! state (`sync`).
//!
//! Ids are the server's email ids: account-wide, and kept when an email moves, so a moved
//! email keeps its index row. The account-wide cursor is the email state the last sync
//! reached. Writes go as `Email/set` patches with preconditions from `Email/changes` and a
//! read-back in the same request (`write`); staged deletions move to the trash or destroy,
//! each email checked first and read back after (`delete`). Tags are keywords, or with
//! `--tags mailboxes` the label mailboxes an email is in (`labels`). `serve` waits on the
//! session's event source where the server pushes (`push`). Accounts are set up with
//! a password or a token (`adapter`).

mod adapter;
pub mod client;
pub mod convert;
mod delete;
pub mod labels;
mod push;
mod sync;
mod write;

use async_trait::async_trait;
use mailbroker_core::{
    Capabilities, DeleteBatch, ItemResult, MailboxInfo, MailboxSyncReport, Provider, RemoteId,
    Result, SyncRequest, SyncSink, Watched, WriteBatch,
};
use serde_json::json;

pub use adapter::{Jmap, JmapSettings, setup};
pub use client::{Auth, Client, Trust};
pub use labels::TagMode;

/// A session with one JMAP account.
pub struct JmapProvider {
    client: Client,
    capabilities: Capabilities,
    /// The email state the last sync reached (the account cursor), empty before the first.
    state: String,
    /// The mailbox state the last sync read the list at (what push compares with).
    mailbox_state: String,
    tags: TagMode,
    /// With tags as mailboxes: the mailbox list as last read, for writes.
    labels: Option<labels::Labels>,
}

impl JmapProvider {
    /// Opens the session at `url` (the session resource, or a server whose
    /// `/.well-known/jmap` leads to it), resuming from the account cursor `cursor`.
    pub async fn connect(url: &str, auth: Auth, cursor: Option<&str>) -> Result<JmapProvider> {
        JmapProvider::connect_with(url, auth, &Trust::default(), cursor).await
    }

    /// The same, trusting what `trust` names beside the public roots and the session's
    /// own origin.
    pub async fn connect_with(
        url: &str,
        auth: Auth,
        trust: &Trust,
        cursor: Option<&str>,
    ) -> Result<JmapProvider> {
        let client = Client::connect(url, auth, trust).await?;
        Ok(JmapProvider {
            client,
            capabilities: Capabilities {
                extensions: vec!["JMAP".into()],
                custom_tags: true,
                max_tag_len: None,
            },
            state: cursor.unwrap_or_default().to_string(),
            mailbox_state: String::new(),
            tags: TagMode::Keywords,
            labels: None,
        })
    }

    /// The same session with tags read and written as `tags` says.
    pub fn with_tags(mut self, tags: TagMode) -> JmapProvider {
        self.tags = tags;
        self
    }

    /// The email state the last sync reached (what the account cursor stores).
    pub fn state(&self) -> &str {
        &self.state
    }
}

#[async_trait]
impl Provider for JmapProvider {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn list_mailboxes(&mut self) -> Result<Vec<MailboxInfo>> {
        let answers = self
            .client
            .call(vec![("Mailbox/get", json!({ "ids": null }))])
            .await?;
        let list = client::method(&answers[0], "Mailbox/get")?;
        let list = list["list"].as_array().map_or(&[][..], Vec::as_slice);
        Ok(convert::mailboxes(list)
            .iter()
            .map(convert::Mailbox::info)
            .collect())
    }

    async fn sync(
        &mut self,
        request: &SyncRequest,
        sink: &mut dyn SyncSink,
    ) -> Result<Vec<MailboxSyncReport>> {
        let since = (!self.state.is_empty()).then(|| self.state.clone());
        let client = &mut self.client;
        let synced = sync::sync(client, request, since.as_deref(), self.tags, sink).await?;
        self.state = synced.state;
        self.mailbox_state = synced.mailbox_state;
        self.labels = (self.tags == TagMode::Mailboxes).then_some(synced.labels);
        Ok(synced.reports)
    }

    async fn apply(&mut self, batch: &WriteBatch) -> Result<Vec<ItemResult>> {
        if self.tags == TagMode::Keywords {
            return write::apply(&mut self.client, batch, None).await;
        }
        let labels = match self.labels.take() {
            Some(labels) => labels,
            None => labels::Labels::read(&mut self.client).await?,
        };
        let labels = self.labels.insert(labels);
        labels
            .create_missing(&mut self.client, &batch.op.add_tags)
            .await?;
        write::apply(&mut self.client, batch, Some(labels)).await
    }

    async fn delete(&mut self, batch: &DeleteBatch) -> Result<Vec<ItemResult>> {
        delete::delete(&mut self.client, batch).await
    }

    /// Each email's blob, downloaded whole; an email gone from the server is left out.
    async fn fetch_sources(
        &mut self,
        _mailbox: &str,
        ids: &[RemoteId],
    ) -> Result<Vec<(RemoteId, Vec<u8>)>> {
        let args = json!({ "ids": ids.iter().map(RemoteId::as_str).collect::<Vec<_>>(),
            "properties": ["id", "blobId"] });
        let answers = self.client.call(vec![("Email/get", args)]).await?;
        let got = client::method(&answers[0], "Email/get")?;
        let mut out = Vec::new();
        for email in got["list"].as_array().into_iter().flatten() {
            let (Some(id), Some(blob)) = (email["id"].as_str(), email["blobId"].as_str()) else {
                continue;
            };
            out.push((RemoteId::new(id), self.client.download(blob).await?));
        }
        Ok(out)
    }

    /// Waits on the session's event source (push) for a change since the last sync.
    async fn watch(
        &mut self,
        _mailbox: &str,
        timeout: std::time::Duration,
        stop: std::pin::Pin<&mut (dyn std::future::Future<Output = ()> + Send)>,
    ) -> Result<Watched> {
        let known = push::Known {
            email: self.state.clone(),
            mailbox: self.mailbox_state.clone(),
        };
        push::watch(&mut self.client, &known, timeout, stop).await
    }

    fn commands_sent(&self) -> u64 {
        self.client.sent()
    }
}
