//! The IMAP adapter: mailbroker's `Provider` over IMAP4rev1 and its extensions (CONDSTORE,
//! QRESYNC, MOVE, UIDPLUS, SPECIAL-USE), using async-imap over rustls.
//!
//! This crate speaks IMAP and nothing else: it does not know the store, the CLI or MCP. Its
//! oddities (UIDVALIDITY, modseqs, unsolicited responses) stay inside it; what leaves it is the
//! vocabulary of `mailbroker-core`.
//!
//! # How it is built
//!
//! The IMAP adapter over async-imap and rustls (aws-lc-rs provider only; ring must never be linked, see below).
//!
//! - `connect.rs`: TCP, TLS (implicit or STARTTLS; extra CA from `--ca-file`; no TLS only to a loopback host, or with the person's `--allow-plaintext`: `check_plaintext`), greeting, LOGIN, and the mapping of async-imap errors to ours.
//!   Every network step runs under a timeout and names its verb ("imap select timed out").
//! - `session.rs`: `ImapProvider`: capability detection (from the LOGIN answer when the server sends it; only extensions we use, minus `--disable-extension`), `ENABLE QRESYNC` (syncs only: writes do not need it), PERMANENTFLAGS `\*` (needs SELECT: EXAMINE reports none), LIST with LIST-STATUS (`RETURN (SPECIAL-USE STATUS …)`: a server asked for return options leaves out the SPECIAL-USE attributes unless they are asked for too).
//! - `sync.rs`: per-mailbox sync, cheapest route first: unchanged counters → nothing selected; no cursor/new UIDVALIDITY/`--full` → full fetch; QRESYNC → `CHANGEDSINCE … VANISHED`; CONDSTORE → `CHANGEDSINCE` + `UID SEARCH` for expunges; neither → all flags compared.
//!   New UIDs are fetched last because the expunge checks cover only UIDs below the old UIDNEXT.
//!   A mailbox the server refuses (a NO on its SELECT or STATUS: deleted meanwhile, a name it will not take) is reported with its `error` and skipped; the others are synced, and its cleared cursor makes the next sync retry it.
//!   A lost connection still ends the sync.
//!   Another client's move (a new UID here, an expunge there, in either listing order) is settled at the end: expunges wait, a new message whose Message-ID the account holds elsewhere is only glimpsed (flags, Message-ID), and `SyncSink::settle_moves` moves the matching row in place (same local id and full-text entry, nothing fetched again; a pair is made only where one departure and one arrival share the Message-ID and size, else the arrival is fetched as new) and removes the rest; such a mailbox's cursor is stored after that.
//!   Mail with a Message-ID the account does not hold is fetched at once.
//!   New messages come in two passes: headers (`NEW_MESSAGE_ITEMS`: flags, size, dates, the kept header fields, which Dovecot serves from its cache about as fast as ENVELOPE), so the index is usable by headers after the first; then, once every mailbox is settled, their text (`TEXT_ITEMS`: BODYSTRUCTURE for attachments, the content header fields and a 2 KB text prefix, which the server must read each message's file for) for the snippet and full-text search (`SyncSink::text_pending`, then `Seen::TextFilled`).
//!   A message whose text has not come yet is marked `text_pending` in the index; a sync cut short leaves the mark and the next one fills the text in.
//! - `write.rs`: `apply` for one batch: SELECT and a UIDVALIDITY check; a precondition FETCH of everything changed since the lowest indexed modseq (stale messages are left out; one whose server state already shows the request, e.g. after a lost answer, counts as unchanged), skipped when the HIGHESTMODSEQ at SELECT still equals the one the last sync recorded (in `WriteBatch::synced`, the mailbox's cursor); `UID STORE … (UNCHANGEDSINCE <highestmodseq at select>) ±FLAGS.SILENT` over compressed UID sets (`uidset.rs`, lines ≤ 4,000 bytes), pipelined; a verifying FETCH of what changed since that modseq; then the move (`moves.rs`).
//!   Results stay in vectors in UID order (read-back looked up by binary search): for 10,000 messages, hash maps cost more than the classification itself.
//!   Tag validation (atom syntax, length, PERMANENTFLAGS `\*`) and the plan text are free functions over `Capabilities`.
//! - `moves.rs`: `UID MOVE` (or COPY + `\Deleted` + `UID EXPUNGE` of exactly those UIDs with UIDPLUS, never a bare EXPUNGE), COPYUID for the new UIDs, and a read-back in the target.
//!   A target can leave its mailbox before the MOVE reaches it (another client expunged or moved it; our own earlier MOVE whose answer was lost): before moving, a `UID SEARCH UID <set>` finds those already gone (skipped where the mailbox is as the last sync left it on a QRESYNC server, since an expunge changes HIGHESTMODSEQ); a MOVE Dovecot refuses with `NO [EXPUNGEISSUED]` (it then moves none) is sent again for what is still there; and a target that did not move is looked for in the target mailbox by its Message-ID (`UID SEARCH` with ids OR-ed together, sent one at a time because SEARCH answers name no command and Dovecot answers pipelined ones out of step, then a FETCH of the matches' Message-ID): found, it is where the request wanted it (`unchanged`, its index row moved); found nowhere, another client took it (`stale_state`).
//!   Nothing of a batch fails for it.
//!   Senders choose Message-IDs, so the one found must also have the indexed size (a move keeps it), be at or above the UIDNEXT the target had at its last sync (`WriteBatch::move_synced`: what was there is indexed already), and be the only one that fits; two that fit are `outcome_unknown` and nothing is moved in the index.
//! - `delete.rs`: a manifest batch: SELECT + UIDVALIDITY check (a recreated mailbox skips the batch), an identity FETCH (a UID no longer there is already done), then trash: `UID MOVE` to the trash role with COPYUID and a read-back there; permanent: `\Deleted` + `UID EXPUNGE` of exactly those UIDs (refused without UIDPLUS, never a bare EXPUNGE) and a verifying FETCH; Gmail over IMAP (X-GM-EXT-1) moves to its trash first, because EXPUNGE only archives there.
//! - `presets.rs`: `--preset NAME`: providers reached over IMAP with an app password (host, port, TLS, and a note on what each needs and cannot do); the CLI lets explicit `--host`/`--port`/`--tls` override it.
//! - `ids.rs`: the IMAP numbers behind the core's opaque ids: `UIDVALIDITY:UID`, a modseq as the version, the cursor's counters as JSON.
//!   `item.rs` reads a `WriteBatch`/`DeleteBatch` as UIDs of one UIDVALIDITY (a target indexed under another is reported stale without a command) and turns results back into `RemoteId`s, so the write and delete code reasons in UIDs.
//! - `read.rs`: `UID FETCH … (UID BODY.PEEK[])` of a few messages for reading (never sets `\Seen`), after a UIDVALIDITY check.
//! - `session.rs::command`: sends one command and reads to its tagged answer, failing on NO/BAD and on a lost connection.
//!   `pipeline` sends several back to back and then reads every answer (one round trip for all): a split STORE, or a flag read over several UID sets.
//!   Never a STORE and the FETCH that verifies it: a FETCH of flags sent while a STORE of those flags runs is ambiguous (RFC 3501 §5.5), and Dovecot answers it with the state before the STORE.
//!   Writes and flag reads use it because async-imap's streams end quietly on both; a lost connection after a write was sent becomes `outcome_unknown`.
//! - `convert.rs`: IMAP values to ours: flags; roles (from SPECIAL-USE alone where the server has it, INBOX always; only without it from a well-known top-level name, never a nested one, each role once; `RoleSource` says which); mailbox names (`name_from_wire`: imap-proto returns a quoted string with its escapes, which are removed, then modified UTF-7 is decoded, a name that is not valid UTF-7 kept as sent; `name_to_wire`/`quoted_name` encode it again for every command that names a mailbox: a name is stored and shown as a person reads it); and a message row from `BODY[HEADER.FIELDS …]` + `BODY[TEXT]<0.2048>` parsed together by mail-parser (so the text prefix is decoded), attachments from BODYSTRUCTURE.
//!
//! Architecture Invariant: async-imap's `unsolicited_responses` channel holds 100 entries and silently drops the rest.
//! The adapter drains it after every command, and reads it while a LIST stream is running (LIST-STATUS answers arrive there).
//! VANISHED and COPYUID are read by `command`, which sees every response itself.
//!
//! Architecture Invariant: async-imap's FETCH streams end quietly on a lost connection or a NO.
//! The sync's message fetch is followed by a NOOP before the mailbox cursor is trusted; every other command goes through `command`, which fails instead.
//!
//! Architecture Invariant: every FETCH stream is consumed to its end before the next command, and bodies are only ever fetched as partials.
//!
//! Architecture Invariant: adapters never touch SQLite; what they learn goes through `SyncSink`.

mod adapter;
mod connect;
mod convert;
mod delete;
mod drafts;
mod ids;
mod item;
mod moves;
pub mod presets;
mod read;
pub mod rules;
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
