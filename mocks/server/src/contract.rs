//! The wire contract: what a client sent that the provider's published schema does not
//! document. A mock refuses such a request as the provider would, and also records it here;
//! when the mock is dropped at the end of a test, anything recorded fails that test, so a
//! client that swallowed the refusal (a fallback, a retry that dropped the property) is
//! still caught. Over the whole suite, every request every adapter sent to a mock is so
//! checked against the schema, not against a list kept by hand.

use std::sync::{Arc, Mutex};

/// What one mock saw that its schema lacks; checked when the last handle is dropped.
#[derive(Clone, Default)]
pub struct WireLog(Arc<Mutex<Log>>);

#[derive(Default)]
struct Log {
    undocumented: Vec<String>,
    /// A test that sends undocumented requests on purpose (to see them refused) says so.
    expected: bool,
}

impl WireLog {
    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records one undocumented thing a request carried: `"PATCH me/messages/{id}: body
    /// property 'x' is not in microsoft.graph.message"`.
    pub fn undocumented(&self, what: String) {
        self.log().undocumented.push(what);
    }

    /// Everything recorded so far.
    pub fn seen(&self) -> Vec<String> {
        self.log().undocumented.clone()
    }

    /// This mock's test sends undocumented requests on purpose; dropping it does not fail.
    pub fn expect_undocumented(&self) {
        self.log().expected = true;
    }

    /// Fails (panics) when something undocumented was recorded and not expected. Called
    /// when a mock is dropped; a test already failing is left to its own message.
    pub fn check(&self) {
        let log = self.log();
        if log.expected || log.undocumented.is_empty() || std::thread::panicking() {
            return;
        }
        let mut seen = log.undocumented.clone();
        seen.dedup();
        drop(log);
        panic!(
            "the client sent what the provider's published schema does not document:\n  {}",
            seen.join("\n  ")
        );
    }
}
