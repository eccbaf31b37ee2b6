//! Node clocks in ticks.
//!
//! Every node keeps time in *ticks* (a monotonic `u64`). Readers stamp their sections with
//! the node's clock, passes stamp their start and end, writers stamp what they retire, and
//! the grace rule compares stamps taken on different nodes, allowing for the configured
//! skew bound `D` (the largest difference between any two node clocks read at the same
//! instant).
//!
//! Two readings exist because they cost very different amounts:
//!
//! - [`Clock::now`] is what a reader's `enter` reads: it must be one relaxed load (reading
//!   the TSC or `Instant` costs tens of nanoseconds, more than a whole read section). It
//!   may lag behind true time, never run ahead of it; a lagging enter stamp makes a
//!   reader look *older*, which only delays reclamation.
//! - [`Clock::refresh`] is what passes and writers read when a stamp must not lag: the
//!   start and end of a pass and the moment a retirement became visible. It also moves the
//!   coarse value forward so later cheap reads see it.

use crate::mem::EmulatedNode;
use crate::primitive::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A node's monotonic clock in ticks.
///
/// ```
/// use bi_core::runtime::{Clock, TickClock};
///
/// let c = TickClock::new();
/// let a = c.refresh();
/// assert!(c.now() >= a);
/// assert!(c.refresh() >= a);
/// ```
pub trait Clock: Send + Sync {
    /// The cheap reading: may lag behind true time, never runs ahead, never goes back.
    ///
    /// ```
    /// use bi_core::runtime::{Clock, TickClock};
    ///
    /// let c = TickClock::new();
    /// let a = c.now();
    /// std::thread::sleep(std::time::Duration::from_millis(1));
    /// assert_eq!(c.now(), a); // cheap: lags until the next refresh
    /// assert!(c.refresh() > a);
    /// ```
    fn now(&self) -> u64;

    /// A precise reading that also advances what [`now`](Clock::now) returns. The default
    /// is `now` (for clocks that are always precise).
    ///
    /// ```
    /// use bi_core::runtime::{Clock, TickClock};
    ///
    /// let c = TickClock::new();
    /// let t = c.refresh();
    /// assert!(c.now() >= t); // later cheap readings see it
    /// ```
    fn refresh(&self) -> u64 {
        self.now()
    }

    /// The word a coarse clock keeps its reading in, if it has one: readers then load it
    /// directly instead of calling [`now`](Clock::now) through the trait object, which
    /// keeps an indirect call off the read path. The default is `None`.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    /// use bi_core::runtime::{Clock, EmulatedClock, TickClock};
    /// use std::sync::atomic::Ordering;
    ///
    /// let c = TickClock::new();
    /// let word = c.coarse_word().unwrap();
    /// assert_eq!(word.load(Ordering::Acquire), c.now());
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// assert!(EmulatedClock::new(emu.node(0)).coarse_word().is_none());
    /// ```
    fn coarse_word(&self) -> Option<Arc<AtomicU64>> {
        None
    }
}

/// A coarse real clock: nanoseconds of the system's monotonic clock, cached in one atomic
/// word that [`refresh`](Clock::refresh) (called by every pass, so by the background thread
/// once per period) moves forward.
///
/// All runtimes of one host read the same system clock, so their skew is zero; across
/// hosts configure `D` from how well their clocks agree.
///
/// ```
/// use bi_core::runtime::{Clock, TickClock};
///
/// let c = TickClock::new();
/// let a = c.refresh();
/// let b = c.refresh();
/// assert!(b >= a && a > 0); // nanoseconds of the monotonic clock
/// ```
#[derive(Debug, Default)]
pub struct TickClock {
    cached: Arc<AtomicU64>,
}

impl TickClock {
    /// A clock initialised to the current time.
    ///
    /// ```
    /// use bi_core::runtime::{Clock, TickClock};
    ///
    /// let c = TickClock::new();
    /// assert!(c.now() > 0); // already read once
    /// ```
    pub fn new() -> TickClock {
        let c = TickClock {
            cached: Arc::new(AtomicU64::new(0)),
        };
        c.refresh();
        c
    }
}

impl Clock for TickClock {
    #[inline]
    fn now(&self) -> u64 {
        // Acquire: a reader's loads after reading a stamp newer than a pass's end are
        // ordered after that pass's (fenced) invalidations, also on weakly ordered CPUs.
        self.cached.load(Ordering::Acquire)
    }

    fn refresh(&self) -> u64 {
        let t = crate::mem::host_ns();
        let prev = self.cached.fetch_max(t, Ordering::AcqRel);
        prev.max(t)
    }

    fn coarse_word(&self) -> Option<Arc<AtomicU64>> {
        Some(Arc::clone(&self.cached))
    }
}

/// The emulator's per-node clock: true virtual time plus the node's skew, so tests get
/// skew and determinism.
///
/// ```
/// use bi_core::mem::{Emulator, EmulatorConfig};
/// use bi_core::runtime::{Clock, EmulatedClock};
///
/// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
/// let c = EmulatedClock::new(emu.node(0));
/// emu.advance(50);
/// assert_eq!(c.now(), 50);
/// ```
#[derive(Clone, Debug)]
pub struct EmulatedClock {
    node: EmulatedNode,
}

impl EmulatedClock {
    /// The clock of `node`.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    /// use bi_core::runtime::{Clock, EmulatedClock};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let (a, b) = (EmulatedClock::new(emu.node(0)), EmulatedClock::new(emu.node(1)));
    /// emu.advance(10);
    /// assert_eq!((a.now(), b.now()), (10, 10)); // no skew configured
    /// ```
    pub fn new(node: EmulatedNode) -> EmulatedClock {
        EmulatedClock { node }
    }
}

impl Clock for EmulatedClock {
    fn now(&self) -> u64 {
        self.node.local_time()
    }
}
