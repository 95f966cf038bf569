//! mailbroker's engine: what the surfaces (the command line, MCP, `serve`) call to read and
//! change mail. Every change to mail goes through one pipeline, `change::request`: resolve,
//! plan, check preconditions, confirm through the surface's `Confirmation`, run in batches
//! under each account's lease, verify by read-back, journal. Syncs go through `sync`, the
//! providers are found in `registry`, and the reads a surface shows (`read`) are here too,
//! so no surface speaks to the store's rows or to a provider directly.
//!
//! Not a surface: it prints nothing and parses no command line.

pub mod accounts;
pub mod change;
pub mod fallback;
pub mod freshness;
pub mod read;
pub mod registry;
pub mod scope;
pub mod sessions;
pub mod sync;
