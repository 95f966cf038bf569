//! The route of last resort: macOS Mail.app, driven by `osascript`.
//!
//! Used for an account that exists only in Mail.app (`account add applescript`), or, for an
//! account that opted in (`account set ID --fallback applescript`), when its server route
//! fails with `provider_unavailable` or `auth_required`. It changes read and flagged status
//! and moves messages (junk and trash included) and deletes to the trash; tags and permanent
//! deletion are `unsupported`, with a sentence that says why. Every change is verified by
//! reading the message back.
//!
//! - `script.rs`: the scripts, made by pure functions (every outside value one escaped
//!   literal);
//! - `runner.rs`: `osascript` with the script on stdin, one at a time, AppleEvent errors in our
//!   vocabulary;
//! - `mail.rs`: the session (`Provider`); `sync.rs`: metadata sync by count and newest date;
//! - `adapter.rs`: the `Adapter`, `setup`, and `fallback` for another provider's account.

mod adapter;
mod mail;
pub mod runner;
pub mod script;
mod sync;

pub use adapter::{AppleScript, MailSettings, fallback, setup};
pub use mail::{Ids, MailApp};
