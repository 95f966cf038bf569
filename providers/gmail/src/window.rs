//! How many reads a sync keeps in flight: additive increase, multiplicative decrease, as TCP
//! does. A rate limit halves the window, once for all the requests that were already in
//! flight when it came back; every window's worth of answers without one gives a slot back,
//! up to the most. A burst of 429s therefore slows the sync for a moment instead of for the
//! rest of it.

use std::sync::Mutex;

use tokio::sync::Notify;

pub struct Window {
    most: usize,
    state: Mutex<State>,
    freed: Notify,
}

struct State {
    width: usize,
    in_flight: usize,
    /// Answers without a rate limit since the window last changed.
    clean: usize,
    /// Bumped by every decrease: a request started before it does not decrease again.
    epoch: u64,
}

/// A slot in the window, held while one request is in flight.
pub struct Slot {
    epoch: u64,
}

impl Window {
    pub fn new(most: usize) -> Window {
        Window {
            most: most.max(1),
            state: Mutex::new(State {
                width: most.max(1),
                in_flight: 0,
                clean: 0,
                epoch: 0,
            }),
            freed: Notify::new(),
        }
    }

    /// Waits for a free slot.
    pub async fn acquire(&self) -> Slot {
        loop {
            let freed = self.freed.notified();
            if let Ok(mut s) = self.state.lock()
                && s.in_flight < s.width
            {
                s.in_flight += 1;
                return Slot { epoch: s.epoch };
            }
            freed.await;
        }
    }

    /// Gives `slot` back, saying whether its request met a rate limit.
    pub fn release(&self, slot: Slot, rate_limited: bool) {
        if let Ok(mut s) = self.state.lock() {
            s.in_flight = s.in_flight.saturating_sub(1);
            if rate_limited {
                if slot.epoch == s.epoch {
                    s.width = (s.width / 2).max(1);
                    s.epoch += 1;
                    s.clean = 0;
                }
            } else {
                s.clean += 1;
                if s.clean >= s.width && s.width < self.most {
                    s.width += 1;
                    s.clean = 0;
                }
            }
        }
        self.freed.notify_waiters();
    }

    /// The current width, for tests and logs.
    pub fn width(&self) -> usize {
        self.state.lock().map_or(1, |s| s.width)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn limits_halve_once_per_window_and_clean_answers_give_slots_back() {
        let window = Window::new(16);
        let slots: Vec<Slot> = futures::future::join_all((0..16).map(|_| window.acquire())).await;
        // All sixteen in flight come back rate limited: one halving, not sixteen.
        for slot in slots {
            window.release(slot, true);
        }
        assert_eq!(window.width(), 8);
        // A window's worth of clean answers at each width gives one slot back, up to 16.
        for _ in 0..200 {
            let slot = window.acquire().await;
            window.release(slot, false);
        }
        assert_eq!(window.width(), 16);
        let slot = window.acquire().await;
        window.release(slot, true);
        assert_eq!(window.width(), 8);
    }
}
