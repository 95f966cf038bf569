//! mailbroker's engine: what the surfaces (the command line, MCP, `serve`) call to read and
//! change mail. Every change to mail goes through one pipeline, `change::request`: resolve,
//! plan, check preconditions, confirm through the surface's `Confirmation`, run in batches
//! under each account's lease, verify by read-back, journal. Syncs go through `sync`, the
//! providers are found in `registry`, and what a surface lists (`listing`) and reads of a
//! message (`read`) are here too, so no surface queries the index or a provider directly.
//!
//! Not a surface: it prints nothing and parses no command line.

pub mod accounts;
pub mod attachments;
pub mod change;
pub mod fallback;
pub mod freshness;
pub mod listing;
pub mod read;
pub mod registry;
pub mod rules;
pub mod scope;
pub mod sessions;
pub mod sync;
