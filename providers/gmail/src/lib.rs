//! mailbroker's Gmail adapter: account setup (`oauth`), the API calls (`api`, over `client`),
//! labels in our terms (`convert`), sync by history id (`sync`) and label writes with
//! history-based preconditions and verification (`write`).
//!
//! # How it is built
//!
//! The Gmail adapter.
//! Every endpoint (API base, auth, token) comes from the account's settings, so the same code runs against Google and `mocks/gmail`.
//!
//! - `oauth.rs`: authorization code + PKCE S256 through the `oauth2` crate over our reqwest, a one-shot loopback redirect listener on 127.0.0.1, optionally the final URL pasted on stdin, refresh.
//!   `ClientFile` reads the JSON Google's console downloads (`installed`, or `web`); the client secret is kept in the account's tokens (Google's token endpoint requires it for a Desktop client, at the exchange and every refresh).
//!   `refused` puts Google's token answers in our terms: a missing or wrong secret or unknown client is `validation_error` saying how to pass the client file (signing in again would fail the same way); a dead refresh token is `auth_required` with `run: mailbroker account login ID` and the 7-day expiry of an app in Testing.
//! - `client.rs`: the session: the generated `google-gmail1` hub over rustls (aws-lc-rs, web PKI roots), a `GetToken` cell holding the current access token, a `Delegate` that records a failure's status and Retry-After, and `Client::call`, the one retry rule: the per-user quota as a token bucket (`--quota`, 250 units/s by default), refresh once on 401 (single-flight: a caller whose token was already replaced just retries), 429/rate-limit 403 retried with backoff and jitter honouring Retry-After, reads also retried on 5xx and transport errors, writes never (`outcome_unknown`).
//! - `api.rs`: the calls we make, with their quota costs, and Google's optional-everywhere models turned into ours at the edge (`Label`, `Profile`, `Message`, `History`).
//! - `convert.rs`: Gmail in our terms.
//!   A message is one index row in the mailbox its labels put it in (`place_of`: TRASH, SPAM, INBOX, DRAFT, SENT, else All Mail with role archive); user labels are tags; UNREAD/STARRED are read/flagged; all label ids are the raw flags; the message id is the row's `RemoteId` as Gmail spells it, and the history id is both a message's `Version` and every mailbox's cursor.
//!   The account cursor (`Cursor`: history id and user labels by id) is what `Seen::AccountCursor` stores and every session gets back, so a write resolves tag names without a `labels.list`.
//! - `sync.rs`: no cursor or `--full`: profile (history id first), `messages.list` (500 a page, spam and trash included), `messages.get format=metadata` under the quota, at most 16 at a time, as many as `window.rs` allows (additive increase, multiplicative decrease: a rate limit halves the window once for the requests already in flight, each window's worth of clean answers gives a slot back), the account cursor first marked with the history id the first sync began at (`Cursor::unfinished`), so a killed first sync resumes: it fetches only what is not indexed yet and what `history.list` since that start says changed, and removes what is gone (404 there: start over); otherwise `history.list` since the stored history id and a metadata GET of only the messages it names, put in place with `mailbroker_core::place` (a message whose labels moved it is settled as moved, by its id, and keeps its local id).
//!   History too old (404) → full sync.
//! - `write.rs`: a batch becomes label ids to add and remove (tags looked up, created when missing); preconditions: one `history.list` since the mailbox's synced history id, and only the targets it shows changed after their own indexed history id are re-read (newer → `stale_state`, or unchanged when they already show the request); `messages.batchModify` in calls of ≤ 1,000 ids; verification: one `history.list` since the history id before the write, replayed over each message's indexed labels (`WriteTarget::flags.raw`).
//!   A lost answer is `Unknown` unless history shows the change.
//!   Deletion: trash adds TRASH (the same verification), permanent is `messages.batchDelete` after a scope check (`insufficient_scope` with the upgrade step).
//!   A state read back with a label id the cached map knows neither as a tag nor as a system label (created by an earlier write, whose map is not stored, or by another client since the last sync) makes the adapter read the label list once more and take those states anew, so no tag is read back as missing.
//!
//! Architecture Invariant: one history record can touch many messages (Gmail's `History` resource says so, and the mock makes one record per API call), so verification costs one `history.list` page per 500 records, not per message.
//!
//! Architecture Invariant: tokens live only in the account's `oauth` secret; `Tokens`' `Debug` hides them and nothing prints them (the Gmail test fails if stdout or stderr carries one).

mod adapter;
pub mod api;
pub mod client;
pub mod convert;
mod drafts;
pub mod filters;
pub mod oauth;
mod parts;
mod rules;
mod sync;
mod window;
mod write;

use std::sync::Arc;

use async_trait::async_trait;
use mailbroker_core::{
    Capabilities, DeleteBatch, Error, ItemResult, MailboxInfo, MailboxSyncReport, Provider,
    RemoteId, Result, RulesBefore, ServerRule, SyncRequest, SyncSink, WriteBatch,
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

    async fn fetch_part(
        &mut self,
        _mailbox: &str,
        id: &RemoteId,
        part: &str,
        _listed: &[mailbroker_core::Attachment],
    ) -> Result<Option<mailbroker_core::FetchedPart>> {
        parts::fetch(&self.client, id, part).await
    }

    fn commands_sent(&self) -> u64 {
        self.client.requests()
    }

    async fn create_draft(
        &mut self,
        draft: &mailbroker_core::Draft,
        source: &[u8],
        drafts: Option<&MailboxInfo>,
    ) -> Result<mailbroker_core::PlacedDraft> {
        drafts::create(&self.client, draft, source, drafts).await
    }

    async fn remove_draft(&mut self, placed: &mailbroker_core::PlacedDraft) -> Result<()> {
        drafts::remove(&self.client, placed).await
    }

    async fn rules(&mut self, ours: &[mailbroker_core::Rule]) -> Result<Vec<ServerRule>> {
        self.filters(ours).await
    }

    async fn put_rules(
        &mut self,
        ours: &[mailbroker_core::Rule],
        rules: &[mailbroker_core::Rule],
    ) -> Result<RulesBefore> {
        self.put_filters(ours, rules).await
    }

    async fn restore_rules(&mut self, before: &RulesBefore) -> Result<RulesBefore> {
        self.restore_filters(before).await
    }
}
