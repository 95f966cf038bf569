//! mailbroker's Microsoft Graph adapter: mail folders and messages over Graph v1.0
//! (`client`), in our terms (`convert`), synced by delta links (`sync`).
//!
//! Ids are Graph's immutable ids (every request asks for them), so a message keeps its id,
//! and its index row, when it moves. Accounts are set up by the device code flow
//! (`oauth`, `adapter`). Writes go in `$batch` calls with the changeKey's entity tag as
//! precondition and a read-back (`write`, `verify`); staged deletions run there too; a
//! message is read by its MIME source (`$value`).
//!
//! # How it is built
//!
//! The Microsoft Graph adapter: accounts are added (`account add graph`: the device code flow, or `--browser` for the authorization code flow with PKCE), synced by delta, searched and written (read, flagged, categories, moves), and staged deletions run (trash: a move to Deleted Items; permanent: `permanentDelete`).
//! Every endpoint comes from a base URL, so the same code runs against Graph and `mocks/graph`.
//!
//! - `client.rs`: a small typed client over reqwest for exactly the endpoints used; every request asks for immutable ids (`Prefer: IdType="ImmutableId"`), so a message keeps its id, and its index row, when it moves; Graph's error envelope becomes our errors by status (401 `auth_required`, 403 `insufficient_scope`, 412 `stale_state`, 429 `rate_limited` with its Retry-After, 503 `provider_unavailable`); a void delta link (410) is a value, not an error.
//!   Error texts never carry a URL (a delta link holds a token).
//!   Any request may be throttled, a `$batch` envelope too: a 429 or 503 waits its Retry-After and is sent again (`Client::send`), against one budget per session (five minutes of waiting, `Client::may_wait`), which the `$batch` requests refused inside a call share.
//!   `get_bytes` reads a message's MIME source (`$value`) for `fetch_sources`.
//!   A signed-in client (`Renewal`) renews a token Graph refuses (401) once and sends the request again: Graph applied nothing it refused that way.
//!   The renewal is single-flight (the caller holding the lock refreshes; the others find a token newer than the one refused and just retry), and the rotated refresh token is stored through `Secrets::shared` before it is used, since Microsoft's refresh tokens rotate.
//! - `convert.rs`: folders as mailboxes named by path (`Inbox/Receipts`; a `/` or `\` inside a folder's own name escaped by `mailbroker_core::path`, so a top-level `Inbox/Receipts` is `Inbox\/Receipts` and never the child of Inbox), roles from the well-known folders (`inbox`, `archive`, `junkemail` → junk, `deleteditems` → trash, `sentitems`, `drafts`); messages as index rows: categories are tags and raw values, `flagStatus == flagged` is flagged, the immutable id is the `RemoteId`, the changeKey the `Version`, a folder's delta link its `MailboxCursor`.
//! - `oauth.rs`: the device code flow (RFC 8628) through the `oauth2` crate: the verification URL and user code go to the person on stderr, the client polls as the server says (`authorization_pending`, `slow_down` adding 5 s to the interval), and a declined, expired or revoked grant is `auth_required` with the next step; `--browser` runs the authorization code flow with PKCE instead; refresh.
//!   A refusal whose AADSTS code means missing consent (65001, 65004, 70011, or `invalid_scope`) is `insufficient_scope`, with the administrator's consent as the next step; a device grant refused with AADSTS7000218 (the registration's "Allow public client flows" is off) is `validation_error` naming that switch (docs/setup-microsoft.md).
//!   `providers/oauth` (crate `mailbroker-oauth`) holds what Gmail and Graph share: `oauth2` over our reqwest, the `Tokens` an account keeps (registered as secrets, hidden from `Debug`), how a refused grant reads, and `browser.rs`, the loopback authorization code flow (RFC 8252) both adapters run.
//! - `adapter.rs`: `setup` (sign-in, `me` for the address, the folder tree), the connector (an expired token refreshed and stored first, through `mailbroker_oauth::access_token`; a session's client renews one Graph refuses later), `login`, `doctor`, category rules (not empty, ≤ 255 characters, no comma or control character; a new one neither begins nor ends with a space nor holds a bidi control), and no `check` refusals: a Graph account can do every operation.
//!   Scopes: `Mail.ReadWrite` does every mail operation, tags included (a message's `categories` take any name); `MailboxSettings.ReadWrite` (asked for, not required: an account signed in without it keeps working, and the doctor lists it as missing) lets a session add a new category to the mailbox's master list, so Outlook shows it with a colour (`GraphProvider::with_category_list`; never in a write's way).
//! - `write.rs`: one request per message in `$batch` calls of ≤ 20, four calls in flight (the requests Graph runs at once per mailbox); an inner 429 or 503 is sent again after its Retry-After, alone, while the session's budget lasts; every request is answered by its own answer (`send_all`): a call that failed as a whole (its answer lost, the token refused) marks only its own requests, so a message another call wrote is read back and reported as the server has it (`Sent`: a write answered, refused, or lost; a write that may have landed but cannot be read back is `outcome_unknown`, never `failed`); a PATCH carries only what changes, categories as the indexed list with the change applied (a PATCH replaces the list, so the others stay); a move is `POST …/move` to the folder's id, keeping the immutable id; every written message is read back and is `applied` only if the server shows the request.
//! - `verify.rs`: the read-back, by whichever costs fewer requests: `$batch` GETs of `isRead,flag,categories,parentFolderId,changeKey` (one call per 20), or the folder's delta from a link taken just before the write (one page per 200 changes).
//!   The delta is used only for a batch that stays in its folder, needs at least four GET calls, and whose folder changed little since the last sync (the walk from the stored link to the pre-write one gives up at half the GETs' cost); a written message the delta does not show is read by GET, so the delta only saves requests and never alone decides that a write failed.
//!   For 10,000 edits: 51 requests instead of 500 (BENCHMARKS.md).
//!   Precondition: `If-Match` with the message's entity tag on the PATCH (its `@odata.etag`, `W/"<changeKey>"`, made from the indexed changeKey); a 412 is re-read, and is `unchanged` when the message already shows the request, else `stale_state`; a move alone re-reads the changeKeys first.
//!   Why If-Match: Graph answers a message PATCH whose changeKey is out of date with 412 `ErrorIrresolvableConflict` ("the change key passed in the request does not match the current change key for the item"), as reported against Graph v1.0 in msgraph-sdk-dotnet issue 1201 and davmail issue 491; and Graph has been reported to answer 200 to a PATCH it did not apply (microsoft-graph-docs issue 21616), which is why the read-back, not the PATCH's answer, decides.
//!   A `$batch` carrying writes whose answer is lost (the connection dropped after it was sent) leaves its messages to the read-back: nothing more is sent for them, and one that shows only part of the request is `outcome_unknown`; only a connection never made is `provider_unavailable`.
//!   A staged deletion's batch looks each message up first (one gone counts as done; one no longer in the folder it was staged in is left alone, `stale_state` "moved since it was staged"), then moves it to the trash folder or deletes it for good, then reads it back (in the trash, or gone).
//!   Where the category list is granted, it is read once per session and a missing category is added before the write (names compared case-blind beyond ASCII, as Exchange does; a 409 means it exists).
//! - `sync.rs`: only Graph v1.0's documented properties (the mock refuses any other, from Microsoft's published types); a message's list from its `List-Id` and `List-Unsubscribe` headers, the `PS_INTERNET_HEADERS` extended properties the delta expands by id (`convert::list_headers_expand`); folders (the six well-known ones looked up for their ids in one `$batch`, then the tree), then every folder by its delta link, or in full without one (first sync, `--full`, a 410); arrivals go through `mailbroker_core::place`, removals wait until every folder's arrivals are placed, so a move seen from both folders ends as one moved row whichever folder comes first.
//!   Tested against the mock through testkit's in-memory index (`tests/sync.rs`): 5,000 messages in nested folders, the exact changes another client made, a moved message keeping its row, a voided link.
//!
//! Graph needed no change to the core, the store or the pipeline for account setup and sync: a crate, a line in the engine's `registry.rs`, and its `account add` arguments (`src/cli/add.rs`).
//! Seam changes that came with it, each so the next provider needs none:
//! - `Operation::Flags`, so an adapter can refuse a read or flag change up front as it can a move, a tag or a deletion;
//! - `Adapter::grouping`, so the planner asks the provider how intents group into calls (Gmail: the request's whole delta, across mailboxes where nothing moves; IMAP and Graph: by what each message still needs, per mailbox: an IMAP STORE acts on one selected mailbox, and Graph verifies a batch by its folder's delta);
//! - `Secrets::shared`, an owned handle a session keeps, because a refresh token rotated in the middle of a session must be stored before the next command needs it;
//! - `Consent::browser`, the person's choice of a browser where a provider's default sign-in is a device code.
//!
//! AppleScript added, beside its crate and registry line: `NewAccount::secret` became optional (Mail.app keeps its own credentials), and `ItemResult::route` says which route carried a message when a fallback did; the pipeline stores what the results say and does not know which routes exist.
//! The fallback itself is `crates/engine/src/fallback.rs`, a table of providers that can stand in for another's account.

mod adapter;
pub mod client;
pub mod convert;
mod drafts;
pub mod oauth;
mod parts;
pub mod rules;
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

    async fn create_draft(
        &mut self,
        draft: &mailbroker_core::Draft,
        _source: &[u8],
        drafts: Option<&MailboxInfo>,
    ) -> Result<mailbroker_core::PlacedDraft> {
        drafts::create(&self.client, draft, drafts).await
    }

    async fn remove_draft(&mut self, placed: &mailbroker_core::PlacedDraft) -> Result<()> {
        drafts::remove(&self.client, placed).await
    }

    async fn rules(
        &mut self,
        ours: &[mailbroker_core::Rule],
    ) -> Result<Vec<mailbroker_core::ServerRule>> {
        self.inbox_rules(ours).await
    }

    async fn put_rules(
        &mut self,
        ours: &[mailbroker_core::Rule],
        rules: &[mailbroker_core::Rule],
    ) -> Result<mailbroker_core::RulesBefore> {
        self.put_inbox_rules(ours, rules).await
    }

    async fn restore_rules(
        &mut self,
        before: &mailbroker_core::RulesBefore,
    ) -> Result<mailbroker_core::RulesBefore> {
        self.restore_inbox_rules(before).await
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

    async fn fetch_part(
        &mut self,
        _mailbox: &str,
        id: &RemoteId,
        part: &str,
        listed: &[mailbroker_core::Attachment],
    ) -> Result<Option<mailbroker_core::FetchedPart>> {
        parts::fetch(&self.client, id, part, listed).await
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
