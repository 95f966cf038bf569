//! Following a change while it runs, for a caller that hands it back as a task (MCP's Tasks
//! extension): how many messages it plans and has settled, the journal's change id once its
//! intent is recorded, and a stop the caller asked for, honoured before the next batch is
//! sent. A stop never cuts a batch: what was sent is recorded as it came back, and what was
//! not sent is recorded as not sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use mailbroker_core::Error;

#[derive(Debug, Default)]
struct State {
    planned: AtomicU64,
    settled: AtomicU64,
    change: AtomicI64,
    stop: AtomicBool,
}

/// A change's progress, shared between the change and whoever follows it.
#[derive(Debug, Clone, Default)]
pub struct Follow {
    state: Arc<State>,
    /// A change planning more messages than this runs detached: `request` answers
    /// `Outcome::Running` at once.
    pub detach_above: Option<u64>,
}

impl Follow {
    /// Followed, and detached when it plans more than `above` messages.
    pub fn detached_above(above: u64) -> Follow {
        Follow {
            detach_above: Some(above),
            ..Follow::default()
        }
    }

    /// Asks the change to stop before its next batch.
    pub fn stop(&self) {
        self.state.stop.store(true, Ordering::SeqCst);
    }

    pub fn stopping(&self) -> bool {
        self.state.stop.load(Ordering::SeqCst)
    }

    /// Messages the change plans to change.
    pub fn planned(&self) -> u64 {
        self.state.planned.load(Ordering::SeqCst)
    }

    /// Messages whose outcome is recorded so far.
    pub fn settled(&self) -> u64 {
        self.state.settled.load(Ordering::SeqCst)
    }

    /// The journal's change, once its intent is recorded.
    pub fn change_id(&self) -> Option<i64> {
        Some(self.state.change.load(Ordering::SeqCst)).filter(|id| *id > 0)
    }

    /// How many units of work it plans (messages, or accounts for a sync).
    pub fn plan(&self, units: u64) {
        self.state.planned.store(units, Ordering::SeqCst);
    }

    /// `units` more are done.
    pub fn settle(&self, units: u64) {
        self.state.settled.fetch_add(units, Ordering::SeqCst);
    }

    pub(crate) fn journaled(&self, change: i64) {
        self.state.change.store(change, Ordering::SeqCst);
    }

    /// Why the batches after a stop were not sent.
    pub(crate) fn stopped() -> Error {
        Error::provider_unavailable("not sent: the change was stopped (its task cancelled)")
    }
}
