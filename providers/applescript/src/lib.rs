//! The route of last resort: macOS Mail.app, driven by `osascript`.
//!
//! Used for an account that exists only in Mail.app (`account add applescript`), or, for an
//! account that opted in (`account set ID --fallback applescript`), when its server route
//! fails with `provider_unavailable` or `auth_required`. It changes read and flagged status
//! and moves messages (junk and trash included), deletes to the trash and saves drafts; tags
//! and permanent deletion are `unsupported`, with a sentence that says why. Every change is verified by
//! reading the message back.
//!
//! - `script.rs`: the scripts, made by pure functions (every outside value one escaped
//!   literal);
//! - `runner.rs`: `osascript` with the script on stdin, one at a time, AppleEvent errors in our
//!   vocabulary;
//! - `mail.rs`: the session (`Provider`); `sync.rs`: metadata sync by count and newest date;
//! - `adapter.rs`: the `Adapter`, `setup`, and `fallback` for another provider's account.
//!
//! # How it is built
//!
//! The route of last resort: macOS Mail.app driven by `osascript`, for an account that exists only in Mail.app (`account add applescript`) and as the fallback an account can opt into.
//! It changes read and flagged status and mailboxes (junk and trash included) and deletes to the trash; tags and permanent deletion are refused by `check` before anything is planned, with the reason.
//! It reads a message's source (`source of m`) and saves drafts (`drafts.rs`): Mail's own `reply` to the original, so Mail threads it, or a new outgoing message, given mailbroker's recipients, subject and body, then `save`, never `send`; the draft is the one message with its subject that was not in Drafts before, and an undo deletes it only while it is that message (Mail saves an edited draft anew).
//!
//! - `script.rs`: every script is made by a pure function: a first line naming it (`-- mailbroker apply`), one `set params to {…}` record holding every value from outside, fixed handlers, a constant body that reads only `params`.
//!   Messages are found by Mail's `id`, then by Message-ID, in separate `whose` clauses (a message found by id whose Message-ID differs is not touched; a Message-ID several messages of the mailbox share finds none: `stale_state` where the change would start, `outcome_unknown` where a move's read-back looks in the target); mailboxes by walking the list of names along their path (scripts name and answer a mailbox as that list, so a name holding a slash stays one name; `mail.rs` turns it into our path with `mailbroker_core::path`); junk by `junk mailbox of account` with name fallbacks.
//!   Each script runs Mail's commands under `with timeout of N seconds` and answers JSON.
//! - `runner.rs`: `osascript` (`$MAILBROKER_OSASCRIPT` if set) with the script on stdin, killed a little after the script's own timeout; AppleEvent errors become ours (-600/-609 Mail not running → `provider_unavailable`; -1712 timeout and any unexplained failure of a write → `outcome_unknown`; -1728 → `not_found`; -1743 automation not allowed → `auth_required`); no `osascript` → `unsupported`, saying it needs macOS.
//! - `mail.rs`: the session: ≤ 50 messages per script, each message read back (status and mailbox) after the change; a move or deletion Mail reports done but whose message is not where it was sent is `verification_failed`.
//!   On an AppleScript account `RemoteId` is Mail's id (a moved message gets Mail's new one) and `Version` is the status (`r1f0`: Mail keeps no change counter); as a fallback the ids are the other provider's, unknown to Mail: messages are found by Message-ID only, and a moved message keeps the index's id until the account's own sync settles it by Message-ID.
//! - `sync.rs`: metadata only; a mailbox's cursor is its message count and newest arrival: unchanged → skipped, else listed again in pages of 500 with progress, and what the index has beyond the listing removed.
//! - `adapter.rs`: the `Adapter`, `setup` (no secret: Mail keeps the credentials, so `NewAccount::secret` is optional), and `fallback`, the session opened on another account's behalf.
//!
//! Architecture Invariant: a value from outside reaches a script only through `script::literal`, inside the `params` record; `providers/applescript/tests/script.rs` checks, with an AppleScript tokenizer and generated hostile names, that scripts made with any name have exactly the code of scripts made with a plain one.
//! One script runs at a time per process (Mail serves Apple events from one queue).
//!
//! The fallback is `crates/engine/src/fallback.rs`: an account whose record names one (`accounts.fallback`, set by `account set`) gets a connector that tries its own route first and opens the fallback only when that fails with `provider_unavailable` or `auth_required`.
//! The fallback session carries writes and deletions only (a sync or a read answers the server's error, since Mail's ids are not the account's) and marks every result with its route (`ItemResult::route`), which the report (`routes`) and the journal (`change_items.route`) keep.
//! Tested against a fake `osascript` (`testkit/src/bin/fake-osascript.rs`: it reads each generated script from stdin, recognises it by its first line, reads its `params` with the tokenizer, and does to a Mail.app kept as JSON what Mail would, faults included).

mod adapter;
mod drafts;
mod mail;
pub mod runner;
pub mod script;
mod sync;

pub use adapter::{AppleScript, MailSettings, fallback, setup};
pub use mail::{Ids, MailApp};
