//! Waiting politely: spin briefly, then yield, and give up at a deadline.
//!
//! Both ends poll memory that another node writes; there is nothing to block on. A
//! short spin catches the common case (the other side is already working on it) at the
//! cost of a few hundred cycles; after that, yielding leaves the core to the other side
//! when both share one. A server with nothing to do then naps, briefly while it was
//! busy lately ([`Idle`]).

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

/// How a serving loop waits while no request comes: after a short spin and a few
/// hundred microseconds of yielding, it sleeps in naps of [`nap`](Self::nap) for
/// [`warm`](Self::warm) since its last request, then in naps that double up to
/// [`longest_nap`](Self::longest_nap).
///
/// A client of the server's own host that finds no answer after a few polls rings the
/// area's doorbell ([`MemView::wait_doorbell`](bi_core::mem::MemView::wait_doorbell)),
/// which ends the nap at once; a client on another host (no coherence, no shared
/// kernel) cannot, and waits for the nap to end. So a request waits for an idle server
/// about the kernel's wake-up on the same host, half a nap plus the wake-up from
/// another host while warm, and up to `longest_nap` after a long quiet time.
///
/// What idling costs: each nap is a timer wake-up and a poll of every client. On the
/// 2-core KVM guest measured (AMD EPYC), where a timer wake-up alone costs some 15 us of
/// the thread's time, the defaults (10 us naps for 100 ms, then doubling up to 1 ms)
/// kept the serving thread busy about 50-80% of a core while warm and about 1.5% once
/// cold; a remote insert one every 2 ms took 17-23 us at the median, 55-70 us at
/// p99. Longer naps cost less and answer other hosts later: 50 us naps cost about a
/// quarter of a core warm there, for a median of about 35 us.
///
/// ```
/// use bi_collections::delegate::Idle;
/// use std::time::Duration;
///
/// let idle = Idle::default();
/// assert_eq!(idle.nap, Duration::from_micros(10));
/// assert!(idle.longest_nap >= idle.nap);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Idle {
    /// The nap while warm (and the first nap once cold).
    pub nap: Duration,
    /// How long after its last request a server stays warm.
    pub warm: Duration,
    /// The longest nap once cold: the longest a request waits for an idle server.
    pub longest_nap: Duration,
}

impl Default for Idle {
    fn default() -> Self {
        Idle {
            nap: Duration::from_micros(10),
            warm: Duration::from_millis(100),
            longest_nap: Duration::from_millis(1),
        }
    }
}

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
    /// with no work: it must not keep a core busy), and how.
    idle: Option<Idle>,
    /// The next nap once cold.
    nap: Duration,
    /// Until when naps stay short (`Some(None)`: for ever), set by the first nap after
    /// progress.
    warm_until: Option<Option<Instant>>,
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
            idle: None,
            nap: Duration::ZERO,
            warm_until: None,
        }
    }

    /// No deadline, and sleeps as `idle` says once a thousand yields found nothing.
    pub(super) fn idle(idle: Idle) -> Backoff {
        Backoff {
            idle: Some(idle),
            nap: idle.nap,
            ..Backoff::unbounded()
        }
    }

    /// Starts spinning short again (after progress).
    pub(super) fn reset(&mut self) {
        self.step = 0;
        self.warm_until = None;
        if let Some(idle) = self.idle {
            self.nap = idle.nap;
        }
    }

    /// Whether the next [`wait`](Self::wait) spins (it yields or sleeps once this is
    /// over).
    pub(super) fn spinning(&self) -> bool {
        self.step < SPIN_STEPS
    }

    /// Waits a little longer than last time; `false` once the deadline has passed.
    pub(super) fn wait(&mut self) -> bool {
        self.wait_napping(std::thread::sleep)
    }

    /// [`wait`](Self::wait), taking its naps with `nap` (which may end early: a
    /// doorbell).
    pub(super) fn wait_napping(&mut self, nap: impl FnOnce(Duration)) -> bool {
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
        if let Some(idle) = self.idle.filter(|_| self.step >= SPIN_STEPS + YIELD_STEPS) {
            let now = Instant::now();
            let warm_until = *self
                .warm_until
                .get_or_insert_with(|| now.checked_add(idle.warm));
            if warm_until.is_none_or(|until| now < until) {
                nap(idle.nap);
            } else {
                nap(self.nap);
                self.nap = (self.nap * 2).min(idle.longest_nap.max(idle.nap));
            }
        } else {
            self.step = self.step.saturating_add(1);
            std::thread::yield_now();
        }
        true
    }
}
