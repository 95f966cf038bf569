//! The seam between the core and a mail service.
//!
//! Architecture Invariant: adapters never touch SQLite. What an adapter sees goes to a
//! `SyncSink` as a stream of typed events (`Seen`), which the core applies to its store; what
//! the adapter needs from earlier syncs comes in a `SyncRequest`. That keeps every provider
//! testable against testkit's in-memory index and lets the store change without touching an
//! adapter.
//!
//! The trait is deliberately small. Sync is the one thing every provider does the same way from
//! the core's side ("bring this account's index up to date"), even though the wire routes differ
//! completely (IMAP per mailbox with modseqs, Gmail one history id per account, Graph delta
//! links per folder). Writes are one method, `apply` (one batch of messages in one mailbox, with
//! preconditions and read-back), whose default is `unsupported`, so a fallback provider
//! (AppleScript) implements only what it can. What needs no connection (tag rules, the plan)
//! is a plain function of each adapter crate, reached through the registry.
//!
//! We use `dyn Provider` (boxed, via `async_trait`) rather than an enum: the set of adapters
//! grows by registry line, and the cost of one virtual call per network round trip is nothing.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::MessageText;
use crate::WriteBatch;
use crate::{Capabilities, MailboxCursor, MailboxInfo, MailboxName, MessageFlags, MessageMeta};
use crate::{DeleteBatch, Error, ItemResult, RemoteId, Result, SyncMode, Version};
use crate::{Draft, FetchedPart, PlacedDraft, Rule, RulesBefore, ServerRule};

/// What the core asks of one sync.
#[derive(Debug, Clone, Default)]
pub struct SyncRequest {
    /// Refetch everything, ignoring stored cursors.
    pub full: bool,
    /// The cursor of every mailbox the index knows, by name.
    pub known: Vec<(MailboxName, MailboxCursor)>,
}

/// What an adapter saw on the server, in the order it saw it. The core's applier (the
/// store's sink, or testkit's in-memory index) turns each into the index.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// The server's current mailbox list; mailboxes the index has but the list lacks are gone.
    Mailboxes(Vec<MailboxInfo>),
    /// What the index holds of the mailbox is void (a first sync, ids the server voided, a
    /// cursor it refused, `--full`): its messages are forgotten, and its cursor stays cleared
    /// until `Done`, so an interrupted sync resumes by refetching, never by trusting it.
    Voided { mailbox: MailboxName },
    /// Messages not in the index yet (or replacing the indexed copy with the same id).
    Arrived {
        mailbox: MailboxName,
        messages: Vec<MessageMeta>,
    },
    /// New flag state of messages the index already has.
    FlagsChanged {
        mailbox: MailboxName,
        changes: Vec<(RemoteId, Version, MessageFlags)>,
    },
    /// These messages are gone from the server.
    Gone {
        mailbox: MailboxName,
        ids: Vec<RemoteId>,
    },
    /// The text of messages whose headers are indexed: full-text search finds them from now.
    TextFilled {
        mailbox: MailboxName,
        texts: Vec<MessageText>,
    },
    /// The mailbox is consistent with the server up to `cursor`.
    Done {
        mailbox: MailboxName,
        cursor: MailboxCursor,
    },
    /// An account-wide cursor (opaque to the core: a history id, delta links, a label map)
    /// that every later session receives back when it connects.
    AccountCursor(String),
}

/// Receives what a sync learns (`apply`, in the order the adapter learns it) and answers
/// what the adapter asks of the index. Implementations batch and commit; an adapter may
/// apply any event many times per mailbox.
#[async_trait]
pub trait SyncSink: Send {
    /// Applies what the adapter saw. Returns how many messages really changed where that is
    /// counted (flags that differed from the index's, rows removed), else 0.
    async fn apply(&mut self, seen: Seen) -> Result<u64>;
    /// The ids the index holds in `mailbox` that `present` (a complete list from the
    /// server) lacks: gone from the server, to settle with `settle_moves`.
    async fn indexed_except(
        &mut self,
        mailbox: &str,
        present: Vec<RemoteId>,
    ) -> Result<Vec<RemoteId>>;
    /// Which of these Message-IDs the index holds in another mailbox of the account: a new
    /// message with one of them may have been moved there by another client.
    async fn known_elsewhere(
        &mut self,
        mailbox: &str,
        message_ids: Vec<String>,
    ) -> Result<std::collections::HashSet<String>>;
    /// Settles moves, for every provider alike: each arrival that is a message the index
    /// holds in another mailbox of the account (`Arrival::same` says how it is recognised)
    /// moves there in place, keeping its local id and full-text entry, with the arrival's
    /// id, version and flags. The departures (ids gone from each mailbox) no arrival
    /// explains are removed. The arrivals nothing explains come back as `unmatched`: new
    /// here, to be fetched in full, or, by a provider that has them in full already,
    /// applied as `Seen::Arrived`.
    async fn settle_moves(
        &mut self,
        departures: Vec<(MailboxName, Vec<RemoteId>)>,
        arrivals: Vec<(MailboxName, Vec<Arrival>)>,
    ) -> Result<Vec<Settled>>;
    /// Every id the index holds for this account, in any mailbox (providers whose ids are
    /// account-wide use it to resume an interrupted first sync).
    async fn indexed_ids(&mut self) -> Result<Vec<RemoteId>>;
    /// The ids of `mailbox` whose headers are indexed and whose text is still to come
    /// (`MessageMeta::text_pending`), in the order they were indexed.
    async fn text_pending(&mut self, mailbox: &str) -> Result<Vec<RemoteId>>;
    /// A point between two batches where everything read from the server so far has been
    /// handed to the sink: a write waiting for the account may run here, and what the adapter
    /// reads after it sees the write's result. Adapters call it after each batch they apply;
    /// nothing read before it may be applied after it, or the sync would undo the write in
    /// the index. Cursors stored later may be older than such a write: the next sync then
    /// reads its changes again, which is harmless.
    async fn checkpoint(&mut self) -> Result<()> {
        Ok(())
    }
    /// Called as messages are fetched, for progress display.
    fn progress(&mut self, _fetched: u64, _total_hint: u64) {}
    /// Called as message text is filled in after the headers, for progress display.
    fn text_progress(&mut self, _filled: u64, _total: u64) {}
}

/// Messages of a provider whose ids survive a move (`SameMessage::Id`), each now in
/// `mailbox`: those the index holds in another mailbox are settled as moved there, then every
/// one is applied as arrived (new, or replacing the indexed copy, which keeps its local id).
pub async fn place(
    sink: &mut dyn SyncSink,
    mailbox: &str,
    messages: Vec<MessageMeta>,
) -> Result<()> {
    let arrivals = messages.iter().map(Arrival::by_id).collect();
    sink.settle_moves(Vec::new(), vec![(mailbox.to_string(), arrivals)])
        .await?;
    sink.apply(Seen::Arrived {
        mailbox: mailbox.to_string(),
        messages,
    })
    .await?;
    Ok(())
}

/// The applier's side of `Seen`: an index that applies each kind of event on its own (the
/// store's sink, testkit's in-memory index). `apply_seen` routes an event to its method, so
/// every applier routes alike; adapters see only `SyncSink::apply`.
#[async_trait]
pub trait ApplyEach: Send {
    async fn mailboxes(&mut self, list: &[MailboxInfo]) -> Result<()>;
    async fn reset_mailbox(&mut self, mailbox: &str) -> Result<()>;
    async fn upsert_messages(&mut self, mailbox: &str, messages: Vec<MessageMeta>) -> Result<()>;
    /// Returns how many really differed from the index.
    async fn update_flags(
        &mut self,
        mailbox: &str,
        changes: Vec<(RemoteId, Version, MessageFlags)>,
    ) -> Result<u64>;
    /// Returns how many rows went.
    async fn remove_messages(&mut self, mailbox: &str, ids: Vec<RemoteId>) -> Result<u64>;
    async fn fill_text(&mut self, mailbox: &str, texts: Vec<MessageText>) -> Result<()>;
    async fn mailbox_done(&mut self, mailbox: &str, cursor: MailboxCursor) -> Result<()>;
    async fn account_cursor(&mut self, cursor: &str) -> Result<()>;

    /// Applies `seen` by its method (`SyncSink::apply` of an applier).
    async fn apply_seen(&mut self, seen: Seen) -> Result<u64> {
        let none = |r: Result<()>| r.map(|()| 0);
        match seen {
            Seen::Mailboxes(list) => none(self.mailboxes(&list).await),
            Seen::Voided { mailbox } => none(self.reset_mailbox(&mailbox).await),
            Seen::Arrived { mailbox, messages } => {
                none(self.upsert_messages(&mailbox, messages).await)
            }
            Seen::FlagsChanged { mailbox, changes } => self.update_flags(&mailbox, changes).await,
            Seen::Gone { mailbox, ids } => self.remove_messages(&mailbox, ids).await,
            Seen::TextFilled { mailbox, texts } => none(self.fill_text(&mailbox, texts).await),
            Seen::Done { mailbox, cursor } => none(self.mailbox_done(&mailbox, cursor).await),
            Seen::AccountCursor(cursor) => none(self.account_cursor(&cursor).await),
        }
    }
}

/// A message found in a mailbox that may be one the index holds elsewhere (moved there by
/// another client or by a sync's own order of reading).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    pub id: RemoteId,
    pub version: Version,
    pub flags: MessageFlags,
    pub same: SameMessage,
}

impl Arrival {
    /// An arrival of a provider whose ids survive a move, from its metadata.
    pub fn by_id(meta: &MessageMeta) -> Arrival {
        Arrival {
            id: meta.id.clone(),
            version: meta.version.clone(),
            flags: meta.flags.clone(),
            same: SameMessage::Id,
        }
    }
}

/// How the index recognises a message that moved between two mailboxes of its account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SameMessage {
    /// Its id does not change with a move (Gmail, Graph): the row with the same id in
    /// another mailbox is this message.
    Id,
    /// Its id changes with a move (IMAP): a row that left another mailbox in the same
    /// settlement is this message when they alone share the Message-ID and size (a
    /// move keeps the size; senders choose Message-IDs, so twins stay apart).
    Content {
        message_id: String,
        /// Its size in bytes, where the provider reads it.
        size: Option<u64>,
    },
}

/// What `SyncSink::settle_moves` did to one mailbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    pub mailbox: MailboxName,
    /// Rows removed: gone from the server and found nowhere else.
    pub removed: u64,
    /// Rows that moved here from another mailbox.
    pub moved_in: u64,
    /// Arrivals nothing explains: new messages (to fetch in full, where they are not yet).
    pub unmatched: Vec<RemoteId>,
}

/// What happened to one mailbox during a sync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailboxSyncReport {
    pub mailbox: MailboxName,
    pub mode: SyncMode,
    pub added: u64,
    pub changed: u64,
    pub removed: u64,
    /// True when the server voided what the index held of the mailbox (its ids, as an
    /// IMAP UIDVALIDITY change does, or its cursor, as Graph's refused delta link does) and
    /// the mailbox was refetched. Reported under its first name, `uidvalidity_reset`, which
    /// scripts read.
    #[serde(rename = "uidvalidity_reset")]
    pub cursor_voided: bool,
    /// Messages whose text was filled in after their headers (this sync's or an earlier,
    /// interrupted one's).
    #[serde(default)]
    pub text_filled: u64,
    /// Why this mailbox could not be synced (the others were); it is retried next time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl MailboxSyncReport {
    /// A report of nothing done yet, for `mailbox` by `mode`.
    pub fn new(mailbox: &str, mode: SyncMode) -> MailboxSyncReport {
        MailboxSyncReport {
            mailbox: mailbox.to_string(),
            mode,
            added: 0,
            changed: 0,
            removed: 0,
            cursor_voided: false,
            text_filled: 0,
            error: None,
        }
    }
}

/// How a `Provider::watch` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    /// The server announced a change (a new message, an expunge, changed flags).
    Changed,
    /// Nothing was announced before the timeout.
    Quiet,
    /// The caller asked to stop.
    Stopped,
}

fn no_rules() -> Error {
    Error::unsupported("mailbroker cannot keep rules on this account's server yet").with_next_step(
        "make the rule in the provider's own settings, or use an IMAP account with ManageSieve",
    )
}

fn no_drafts() -> Error {
    Error::unsupported("mailbroker cannot save drafts on this account's server")
        .with_next_step("write the reply in the mail client")
}

/// A connected session with one account's mail service.
#[async_trait]
pub trait Provider: Send {
    /// What the server can do (re-detected on every connection).
    fn capabilities(&self) -> &Capabilities;

    /// The mailboxes on the server, with their roles.
    async fn list_mailboxes(&mut self) -> Result<Vec<MailboxInfo>>;

    /// Brings the index up to date through `sink`, incrementally where the cursors allow.
    async fn sync(
        &mut self,
        request: &SyncRequest,
        sink: &mut dyn SyncSink,
    ) -> Result<Vec<MailboxSyncReport>>;

    /// Executes one batch with preconditions and read-back verification, reporting each
    /// message. An error means nothing of the batch is known to have been sent, or, as
    /// `outcome_unknown`, that it was sent and its answer lost.
    async fn apply(&mut self, _batch: &WriteBatch) -> Result<Vec<ItemResult>> {
        Err(Error::unsupported("this provider cannot change messages"))
    }

    /// Deletes one batch of a staged manifest, re-checking each message's identity first.
    /// Per message: `Applied` (deleted; `moved_to` where trash mode put it), `Unchanged`
    /// (already gone: counts as done), `Stale` (identity changed: skipped, with the reason),
    /// `Failed`/`Unknown`. An error means nothing of the batch is known to have been sent.
    async fn delete(&mut self, _batch: &DeleteBatch) -> Result<Vec<ItemResult>> {
        Err(Error::unsupported("this provider cannot delete messages"))
    }

    /// The full source (RFC 5322 bytes) of these messages of one mailbox, for reading them.
    /// A message that is gone is simply absent from the answer.
    async fn fetch_sources(
        &mut self,
        _mailbox: &str,
        _ids: &[RemoteId],
    ) -> Result<Vec<(RemoteId, Vec<u8>)>> {
        Err(Error::unsupported(
            "this provider cannot read message bodies",
        ))
    }

    /// One part of a message (`part`, an IMAP section number such as `2` or `1.2`), so a
    /// large attachment is read without the rest of its message; `None` where the provider
    /// reads whole messages only (the caller then reads the source), or when the message or
    /// part is not there. `listed` is the message's attachments as last listed from its
    /// source (empty when never), for a provider whose attachments carry no section number.
    async fn fetch_part(
        &mut self,
        _mailbox: &str,
        _id: &RemoteId,
        _part: &str,
        _listed: &[crate::Attachment],
    ) -> Result<Option<FetchedPart>> {
        Ok(None)
    }

    /// Waits on this session until the server announces a change in `mailbox` (IMAP IDLE), for
    /// at most `timeout`, or until `stop` completes; then leaves the session ready for other
    /// commands (a sync on the same connection). `unsupported` where the server cannot
    /// announce changes: the caller polls instead.
    async fn watch(
        &mut self,
        _mailbox: &str,
        _timeout: std::time::Duration,
        _stop: std::pin::Pin<&mut (dyn std::future::Future<Output = ()> + Send)>,
    ) -> Result<Watched> {
        Err(Error::unsupported(
            "this provider cannot announce changes; poll it",
        ))
    }

    /// The account's server-side rules: mailbroker's and the person's own. `ours` are the
    /// rules mailbroker installed, for a provider whose rules carry no mark of their own (a
    /// Gmail filter has no name): a rule on the server is mailbroker's when it is exactly one
    /// of them.
    async fn rules(&mut self, _ours: &[Rule]) -> Result<Vec<ServerRule>> {
        Err(no_rules())
    }

    /// Makes `rules` the whole of mailbroker's rules on the server in place of `ours` (the
    /// person's own stay as they are), read back; what was there before, for an undo.
    async fn put_rules(&mut self, _ours: &[Rule], _rules: &[Rule]) -> Result<RulesBefore> {
        Err(no_rules())
    }

    /// Puts the server's rules back as `before` says they were; what it replaced, so that
    /// this too can be undone.
    async fn restore_rules(&mut self, _before: &RulesBefore) -> Result<RulesBefore> {
        Err(no_rules())
    }

    /// Saves `draft` (`source`, its RFC 5322 bytes) among the account's drafts (`drafts`, the
    /// mailbox of that role, where the index knows one), read back; never sends it.
    async fn create_draft(
        &mut self,
        _draft: &Draft,
        _source: &[u8],
        _drafts: Option<&MailboxInfo>,
    ) -> Result<PlacedDraft> {
        Err(no_drafts())
    }

    /// Deletes a draft mailbroker saved if it is still as saved; `draft_changed` (a
    /// `stale_state`) if it was edited, sent or deleted since.
    async fn remove_draft(&mut self, _placed: &PlacedDraft) -> Result<()> {
        Err(no_drafts())
    }

    /// Protocol commands sent on this session so far (for benchmarks and diagnostics).
    fn commands_sent(&self) -> u64 {
        0
    }

    /// Ends the session politely; errors here lose nothing.
    async fn close(&mut self) {}
}
