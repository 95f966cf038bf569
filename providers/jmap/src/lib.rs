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
//!
//! # How it is built
//!
//! The JMAP adapter (RFC 8620, RFC 8621) over reqwest and serde, tested against a real Cyrus 3.6: account setup, sync, writes, staged deletion and push.
//! - `wire.rs`: the wire as types, all pure: the session resource, each method call mailbroker sends (`Call`, with `PatchObject`s and result references), and the answers read into `GetResponse`, `ChangesResponse`, `QueryResponse`, `SetResponse`, `MailboxObject`, `Email` and `StateChange`; a method's error becomes ours in `Answer::read` (`cannotCalculateChanges` as `not_found`).
//! - `adapter.rs`: `setup` (the session, which checks the credentials, and the mailbox list), the connector (settings and the stored password or token), the doctor, tag rules (keywords: RFC 8621 §4.1.1, not starting with `$`; labels: a mailbox name that is not a place), plans; plain `http://` only to this machine, and a private CA (`--ca-file`) trusted beside the public roots.
//! - `client.rs`: the session resource (the URL itself, or its `/.well-known/jmap`), Basic or Bearer auth, the server's core limits, and `Client::call`, the one place a request of method calls meets the network (several calls in one round trip, as many requests as `maxCallsInRequest` needs, result references to an earlier request resolved there).
//! - `convert.rs`: mailboxes as unique display paths (`path.rs`) with their JMAP ids (`MailboxInfo::remote`) and roles; keywords as read (`$seen`), flagged (`$flagged`) and tags; an email's index row; the one place an email in several mailboxes is indexed in.
//! - `sync.rs`: `Mailbox/get` every sync, in the same request as `Email/changes` since the stored email state (the account cursor); without a state (or when the server cannot calculate changes from it) every email, by `Email/query` pages with `Email/get` by back reference, one request a page.
//!   Ids are account-wide and survive a move, so emails are put in place with `mailbroker_core::place`; a destroyed email is gone from whichever mailbox held it.
//! - `write.rs`: `apply`: preconditions from `Email/changes` since the batch's `synced` email state (only emails changed since are read again: `unchanged` where they already show the request, else `stale_state`; `ifInState` is never used, as it would refuse a whole batch for one stranger's change), then `Email/set` patches of at most `maxObjectsInSet` with an `Email/get` of the same emails in the same request, which runs after it and is the read-back.
//!   Keywords are set with `true` and removed with `null`; a tag holding `/` or `~` goes as the whole `keywords` object (Cyrus 3.6 stores an escaped `~1` literally).
//! - `push.rs`: `watch` on the session's event source (RFC 8620 §7.3): a `state` event whose email or mailbox state is not the one the last sync reached is a change (a stream may open with the current states); no event source, or one answering 204, is `unsupported`, and `serve` polls.
//! - `labels.rs`: tags as mailboxes (`TagMode::Mailboxes`, the account's `--tags mailboxes`): the mailboxes without a role are an email's tags, by path; writes add and remove `mailboxIds` entries for them, create a missing label (and its parents) with one `Mailbox/set`, and put an email a removal would leave in no mailbox in the archive.
//! - `delete.rs`: a manifest's batch: each email read first (gone is done, moved since is left alone as `stale_state`), then moved to the trash role's mailbox (its id stays, so the run undoes) or destroyed, with an `Email/get` read-back in the same request.

mod adapter;
pub mod client;
pub mod convert;
mod delete;
mod drafts;
pub mod labels;
mod parts;
mod push;
mod rules;
mod sync;
pub mod wire;
mod write;

use async_trait::async_trait;
use mailbroker_core::{
    Capabilities, DeleteBatch, ItemResult, MailboxInfo, MailboxSyncReport, Provider, RemoteId,
    Result, SyncRequest, SyncSink, Watched, WriteBatch,
};
use wire::{Call, Email, GetResponse, MailboxObject, nth};

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
    /// How to reach the account's rules (set by the connector).
    rules: Option<rules::Access>,
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
            rules: None,
        })
    }

    /// The same session with tags read and written as `tags` says.
    pub fn with_tags(mut self, tags: TagMode) -> JmapProvider {
        self.tags = tags;
        self
    }

    /// The same session, reaching the account's rules as `access` says.
    pub fn with_rules(mut self, access: rules::Access) -> JmapProvider {
        self.rules = Some(access);
        self
    }

    fn rules_access(&self) -> Result<&rules::Access> {
        self.rules.as_ref().ok_or_else(|| {
            mailbroker_core::Error::internal("a JMAP session opened without its settings")
        })
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
        let answers = self.client.call(vec![Call::MailboxGet]).await?;
        let list: GetResponse<MailboxObject> = nth(&answers, 0, "Mailbox/get")?;
        Ok(convert::mailboxes(&list.list)
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
        let get = Call::email_get(ids.iter().map(|id| id.as_str()), &["id", "blobId"]);
        let answers = self.client.call(vec![get]).await?;
        let got: GetResponse<Email> = nth(&answers, 0, "Email/get")?;
        let mut out = Vec::new();
        for email in got.list {
            let Some(blob) = email.blob_id else {
                continue;
            };
            out.push((RemoteId::new(email.id), self.client.download(&blob).await?));
        }
        Ok(out)
    }

    async fn fetch_part(
        &mut self,
        _mailbox: &str,
        id: &RemoteId,
        part: &str,
        _listed: &[mailbroker_core::Attachment],
    ) -> Result<Option<mailbroker_core::FetchedPart>> {
        parts::fetch(&mut self.client, id, part).await
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

    async fn create_draft(
        &mut self,
        draft: &mailbroker_core::Draft,
        source: &[u8],
        drafts: Option<&MailboxInfo>,
    ) -> Result<mailbroker_core::PlacedDraft> {
        drafts::create(&mut self.client, draft, source, drafts).await
    }

    async fn remove_draft(&mut self, placed: &mailbroker_core::PlacedDraft) -> Result<()> {
        drafts::remove(&mut self.client, placed).await
    }

    async fn rules(
        &mut self,
        _ours: &[mailbroker_core::Rule],
    ) -> Result<Vec<mailbroker_core::ServerRule>> {
        rules::read(self.rules_access()?).await
    }

    async fn put_rules(
        &mut self,
        _ours: &[mailbroker_core::Rule],
        rules: &[mailbroker_core::Rule],
    ) -> Result<mailbroker_core::RulesBefore> {
        let mailboxes = self.list_mailboxes().await?;
        let placed = mailbroker_managesieve::account::placed(rules, &mailboxes)?;
        rules::put(self.rules_access()?, &placed).await
    }

    async fn restore_rules(
        &mut self,
        before: &mailbroker_core::RulesBefore,
    ) -> Result<mailbroker_core::RulesBefore> {
        rules::restore(self.rules_access()?, before).await
    }
}
