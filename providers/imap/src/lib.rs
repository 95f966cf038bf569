//! The IMAP adapter: mailbroker's `Provider` over IMAP4rev1 and its extensions (CONDSTORE,
//! QRESYNC, MOVE, UIDPLUS, SPECIAL-USE), using async-imap over rustls.
//!
//! This crate speaks IMAP and nothing else: it does not know the store, the CLI or MCP. Its
//! oddities (UIDVALIDITY, modseqs, unsolicited responses) stay inside it; what leaves it is the
//! vocabulary of `mailbroker-core`.

mod adapter;
mod connect;
mod convert;
mod delete;
mod ids;
mod item;
mod moves;
pub mod presets;
mod read;
mod session;
mod sync;
mod uidset;
mod watch;
mod write;

pub use adapter::{Imap, setup};
pub use connect::{ImapConfig, ImapSettings, TlsMode};
pub use session::ImapProvider;
/// The FETCH items of a first sync (without the parentheses), for benchmarks to compare with.
pub use sync::{NEW_MESSAGE_ITEMS, TEXT_ITEMS};
