//! Open files: a node holds one IMAP connection (its IDLE) for every account it watches and
//! another for each sync it runs, and a node that takes the others' accounts over holds them
//! all. Its soft limit is raised to its hard limit at start; where even that cannot hold every
//! account of the index, the node refuses to start and says how to raise it, rather than
//! failing account by account later. Accounts added while it runs are watched only as far as
//! the limit holds them; the rest are left unwatched, and the node says so and how to raise it.

use mailbroker_core::{Error, Result};

use crate::store::Store;

/// Open files an account may take at once: its IDLE connection and a sync's.
const PER_ACCOUNT: u64 = 2;
/// Open files a node needs besides: listener, database pool, logs, certificates.
const SPARE: u64 = 256;

/// Raises the soft limit on open files to the hard one; the soft limit now.
fn raise() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return u64::MAX;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    limit.rlim_cur
}

/// Whether this node may hold every account of the index, after raising its limit; the
/// number of accounts it may watch.
pub async fn check(store: &Store) -> Result<usize> {
    let accounts = store.accounts().await?.len() as u64;
    let limit = raise();
    match accounts * PER_ACCOUNT + SPARE <= limit {
        true => Ok(fits(limit)),
        false => Err(too_many(accounts, limit, "a node may come to watch all")),
    }
}

/// How many accounts `limit` open files hold.
fn fits(limit: u64) -> usize {
    usize::try_from(limit.saturating_sub(SPARE) / PER_ACCOUNT).unwrap_or(usize::MAX)
}

/// Why a node watches only `fits` of the `accounts` it was given, and what to do.
pub fn unwatched(accounts: usize, fits: usize) -> Error {
    let limit = fits as u64 * PER_ACCOUNT + SPARE;
    too_many(accounts as u64, limit, "this node was given")
}

fn too_many(accounts: u64, limit: u64, given: &str) -> Error {
    let needs = accounts * PER_ACCOUNT + SPARE;
    Error::limit_exceeded(format!(
        "{given} {accounts} accounts of this index, which takes about {needs} open files; \
         this process may open {limit}"
    ))
    .with_next_step(format!(
        "raise the limit (ulimit -n {needs} in its shell, or LimitNOFILE={needs} in its \
         service unit) and start it again"
    ))
}
