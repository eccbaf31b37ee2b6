//! Waiting politely: spin briefly, then yield, and give up at a deadline.
//!
//! Both ends poll memory that another node writes; there is nothing to block on. A
//! short spin catches the common case (the other side is already working on it) at the
//! cost of a few hundred cycles; after that, yielding leaves the core to the other side
//! when both share one.

use std::time::{Duration, Instant};

/// Spins below this step, yields from it on.
const SPIN_STEPS: u32 = 32;
/// The longest gap between two polls while spinning, in spin-loop hints (a hint costs
/// from a few to about forty nanoseconds, by processor). The gap doubles from one hint
/// up to this: polling memory is what the waiter is for, and a gap that kept doubling
/// would leave an answer that landed unseen for microseconds.
const LONGEST_SPIN: u32 = 4;
/// Yields before an idle waiter starts sleeping (a few hundred microseconds).
const YIELD_STEPS: u32 = 1000;
/// The shortest and the longest sleep of an idle waiter.
const FIRST_NAP: Duration = Duration::from_micros(20);
const LONGEST_NAP: Duration = Duration::from_millis(1);

/// An exponential back-off with an optional deadline.
///
/// The clock is read only once spinning is over: a wait that ends while spinning (a
/// round trip to a busy server) costs no clock read; the deadline counts from the first
/// yield, a few hundred cycles after the wait began.
#[derive(Debug)]
pub(super) struct Backoff {
    step: u32,
    /// The timeout, until the first wait past the spin turns it into `deadline`.
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    /// Whether the waiter sleeps once spinning and yielding found nothing (a server
    /// with no work: it must not keep a core busy), and for how long next.
    naps: Option<Duration>,
}

impl Backoff {
    /// A back-off that gives up `timeout` from now.
    pub(super) fn with_timeout(timeout: Duration) -> Backoff {
        Backoff {
            timeout: Some(timeout),
            ..Backoff::unbounded()
        }
    }

    /// A back-off that never gives up.
    pub(super) fn unbounded() -> Backoff {
        Backoff {
            step: 0,
            timeout: None,
            deadline: None,
            naps: None,
        }
    }

    /// No deadline, and sleeps (from 20 microseconds, doubling up to a millisecond) once
    /// a thousand yields found nothing: a request after a long idle time waits up to a
    /// millisecond, one in a busy stretch is seen within the spin.
    pub(super) fn idle() -> Backoff {
        Backoff {
            naps: Some(FIRST_NAP),
            ..Backoff::unbounded()
        }
    }

    /// Starts spinning short again (after progress).
    pub(super) fn reset(&mut self) {
        self.step = 0;
        if self.naps.is_some() {
            self.naps = Some(FIRST_NAP);
        }
    }

    /// Whether the next [`wait`](Self::wait) spins (it yields or sleeps once this is
    /// over).
    pub(super) fn spinning(&self) -> bool {
        self.step < SPIN_STEPS
    }

    /// Waits a little longer than last time; `false` once the deadline has passed.
    pub(super) fn wait(&mut self) -> bool {
        if self.step < SPIN_STEPS {
            for _ in 0..(1u32 << self.step.min(LONGEST_SPIN.ilog2())) {
                std::hint::spin_loop();
            }
            self.step += 1;
            return true;
        }
        if let Some(timeout) = self.timeout.take() {
            // A timeout too large for the clock means no deadline.
            self.deadline = Instant::now().checked_add(timeout);
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return false;
        }
        if let Some(nap) = self.naps.filter(|_| self.step >= SPIN_STEPS + YIELD_STEPS) {
            std::thread::sleep(nap);
            self.naps = Some((nap * 2).min(LONGEST_NAP));
        } else {
            self.step = self.step.saturating_add(1);
            std::thread::yield_now();
        }
        true
    }
}
