//! mailbroker's surfaces: the command line (`cli`), the MCP server (`mcp`) and `serve`, and
//! how they print (`output`, `logging`). The work is the engine's (`mailbroker-engine`): a
//! surface parses what was asked, calls the engine, and shapes the answer. The store, the
//! query language and the engine are re-exported under the names the surfaces use.

pub mod approvals;
pub mod cli;
pub mod console;
pub mod logging;
pub mod mcp;
pub mod oauth;
pub mod output;
pub mod serve;

pub use mailbroker_engine::{
    accounts, attachments, change, fallback, freshness, listing, read, registry, rules, scope,
    sessions, sync,
};
pub use mailbroker_query as search;
pub use mailbroker_store as store;
pub use mailbroker_store::{home, keyring, sealed, util};

pub use mailbroker_core::{Error, Result};
