//! Waiting politely: spin briefly, then yield, and give up at a deadline.
//!
//! Both ends poll memory that another node writes; there is nothing to block on. A
//! short spin catches the common case (the other side is already working on it) at the
//! cost of a few hundred cycles; after that, yielding leaves the core to the other side
//! when both share one.

use std::time::{Duration, Instant};

/// Spins below this step, yields from it on.
const SPIN_STEPS: u32 = 7;

/// An exponential back-off with an optional deadline.
#[derive(Debug)]
pub(super) struct Backoff {
    step: u32,
    deadline: Option<Instant>,
}

impl Backoff {
    /// A back-off that gives up `timeout` from now.
    pub(super) fn with_timeout(timeout: Duration) -> Backoff {
        Backoff {
            step: 0,
            // A timeout too large for the clock means no deadline.
            deadline: Instant::now().checked_add(timeout),
        }
    }

    /// A back-off that never gives up.
    pub(super) fn unbounded() -> Backoff {
        Backoff {
            step: 0,
            deadline: None,
        }
    }

    /// Starts spinning short again (after progress).
    pub(super) fn reset(&mut self) {
        self.step = 0;
    }

    /// Waits a little longer than last time; `false` once the deadline has passed.
    pub(super) fn wait(&mut self) -> bool {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return false;
        }
        if self.step < SPIN_STEPS {
            for _ in 0..1u32 << self.step {
                std::hint::spin_loop();
            }
            self.step += 1;
        } else {
            std::thread::yield_now();
        }
        true
    }
}
