//! The domain of mailbroker that every provider adapter and the core share: the error
//! vocabulary, identifiers, message state and the `Provider` trait.
//!
//! This crate is not the store, not a CLI and not any one provider: it knows nothing of SQLite,
//! of IMAP or of JSON-RPC. Adapters depend on it; the `mailbroker` crate drives adapters through
//! it.

mod adapter;
mod auth;
mod draft;
mod error;
mod headers;
mod model;
mod part;
mod provider;
mod rule;
mod summary;
mod tally;
mod write;

pub mod endpoint;
pub mod path;
pub mod secrets;

pub use adapter::{
    AccountInfo, Adapter, Connector, Consent, DoctorReport, Grouping, NewAccount, Operation, Ready,
    Secrets, Upgrade,
};
pub use auth::{AuthVerdicts, Verdict, known_authserv_ids, verdicts};
pub use draft::{Draft, MAX_DRAFT_BODY, PlacedDraft, Recipient, ReplyOf, draft_changed};
pub use error::{Error, ErrorFields, Result};
pub use headers::{conversation_root, conversation_subject, list_of};
pub use model::{
    AccountId, Capabilities, Conversation, MailboxCursor, MailboxInfo, MailboxName, MessageFlags,
    MessageMeta, MessageText, ProviderKind, RemoteId, Role, RoleSource, SyncMode, Version,
    plausible_date,
};
pub use part::{Attachment, FetchedPart, section};
pub use provider::{
    ApplyEach, Arrival, MailboxSyncReport, Provider, SameMessage, Seen, Settled, SyncRequest,
    SyncSink, Watched, place,
};
pub use rule::{Condition, Rule, RulesBefore, ServerRule};
pub use summary::{Sender, Summary};
pub use tally::{NonzeroTally, Tally};
pub use write::{
    DeleteBatch, DeleteMode, FlagOp, ItemResult, MOVED_SINCE_STAGED, Outcome, Patch, WriteBatch,
    WriteTarget,
};
