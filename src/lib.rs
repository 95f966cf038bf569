//! mailbroker: a local index of mail accounts and a safe, verified way to change mail on the
//! server, for a person (CLI) and an assistant (MCP).
//!
//! This crate is the core and its surfaces: the store, the query language, sync orchestration
//! and the CLI. Providers live in their own crates under `providers/`; this crate reaches them
//! only through `mailbroker_core::Provider` and the registry.

pub mod accounts;
pub mod change;
pub mod cli;
pub mod fallback;
pub mod freshness;
pub mod home;
pub mod keyring;
pub mod logging;
pub mod mcp;
pub mod output;
pub mod read;
pub mod registry;
pub mod scope;
pub mod sealed;
pub mod search;
pub mod serve;
pub mod sessions;
pub mod store;
pub mod sync;
pub mod util;

pub use mailbroker_core::{Error, Result};
