//! Runtime parameters and quiescence policies.

use crate::mem::{MemError, MemView};
#[cfg(feature = "faults")]
use crate::runtime::fault::Fault;
use crate::runtime::fault::Faults;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// How a reader's "I am inside" store is ordered before its first load of shared data,
/// as seen by its node's quiescence pass.
///
/// ```
/// use bi_core::runtime::{ReaderOrdering, RuntimeConfig, testing::Setup};
///
/// assert_eq!(ReaderOrdering::default(), ReaderOrdering::Membarrier);
/// let c = RuntimeConfig::default().reader_ordering(ReaderOrdering::Fence);
/// assert_ne!(c, RuntimeConfig::default());
/// // Emulated runtimes always use the emulator's ordering.
/// assert_eq!(Setup::new(1, 0).nodes[0].reader_ordering(), ReaderOrdering::Emulated);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReaderOrdering {
    /// The pass issues `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` (as liburcu's memb
    /// flavour does), so readers need only a compiler fence. If the kernel refuses to
    /// register, the runtime falls back to [`ReaderOrdering::Fence`] and says so in
    /// [`NodeRuntime::reader_ordering`](crate::runtime::NodeRuntime::reader_ordering).
    #[default]
    Membarrier,
    /// Readers issue a `fence(SeqCst)` after storing their state (about 10 ns more per
    /// section). Works everywhere, including under Miri.
    Fence,
    /// Neither: for the emulator only, whose node caches sit behind a mutex that already
    /// orders a reader's store before the pass's load.
    Emulated,
}

/// What a quiescence pass invalidates besides the freed objects (which it always
/// handles).
///
/// "Accessed" is tracked per structure, not per line: a node's readers declare the
/// structures they read (the collections' read handles do), which keeps the read path
/// free of bookkeeping. An application that tracks its own working set line by line can
/// invalidate it with [`Policy::Callback`].
///
/// ```
/// use bi_core::runtime::{Policy, testing::Setup};
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
///
/// let s = Setup::new(2, 1);
/// let calls = Arc::new(AtomicUsize::new(0));
/// let c = calls.clone();
/// s.nodes[1].set_policy(Policy::Callback(Arc::new(move |_view| {
///     c.fetch_add(1, Ordering::Relaxed);
///     Ok(())
/// })));
/// s.nodes[1].quiesce().unwrap();
/// assert_eq!(calls.load(Ordering::Relaxed), 1); // once per pass
/// ```
pub enum Policy<V> {
    /// Invalidate what writers logged (slots, tracked objects and freed objects) for the
    /// structures this node's readers declared, and everything logged under
    /// [`Scope::ALL`](crate::runtime::Scope::ALL); skip the rest ([`scope`](crate::runtime::scope)). The
    /// default.
    Accessed,
    /// Invalidate everything writers logged in their modified and freed rings, whichever
    /// structure it belongs to.
    Modified,
    /// Invalidate the whole heap and the root directory every pass (no modified log
    /// needed for staleness; suits small structures).
    Everything,
    /// Call an application function that invalidates what the application manages
    /// (modified logs are still consumed but not acted on).
    Callback(InvalidateFn<V>),
}

/// An application's invalidation routine for [`Policy::Callback`].
pub(crate) type InvalidateFn<V> = Arc<dyn Fn(&V) -> Result<(), MemError> + Send + Sync>;

impl<V> Clone for Policy<V> {
    fn clone(&self) -> Self {
        match self {
            Policy::Accessed => Policy::Accessed,
            Policy::Modified => Policy::Modified,
            Policy::Everything => Policy::Everything,
            Policy::Callback(f) => Policy::Callback(f.clone()),
        }
    }
}

impl<V> fmt::Debug for Policy<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Accessed => f.write_str("Accessed"),
            Policy::Modified => f.write_str("Modified"),
            Policy::Everything => f.write_str("Everything"),
            Policy::Callback(_) => f.write_str("Callback(..)"),
        }
    }
}

// A derived `Default` would demand `V: Default`, which views are not.
#[allow(clippy::derivable_impls)]
impl<V: MemView> Default for Policy<V> {
    fn default() -> Self {
        Policy::Accessed
    }
}

/// Runtime parameters, in ticks of the node clocks.
///
/// ```
/// use bi_core::runtime::RuntimeConfig;
///
/// let c = RuntimeConfig::default().skew(10).node_lease(5_000).reader_lease(2_000);
/// assert_eq!(c.skew_bound(), 10);
/// assert!(c.validate().is_ok());
/// assert!(RuntimeConfig::default().node_lease(0).validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeConfig {
    pub(crate) skew: u64,
    pub(crate) node_lease: u64,
    pub(crate) reader_lease: u64,
    pub(crate) track_objects: bool,
    pub(crate) log_full_timeout: Duration,
    pub(crate) ordering: ReaderOrdering,
    pub(crate) extents_only: bool,
    pub(crate) faults: Faults,
}

impl Default for RuntimeConfig {
    /// `D` = 0 (one host), node lease 1 s and reader lease 1 s in nanosecond ticks, objects
    /// tracked, a 100 ms wait on a full log, membarrier ordering.
    fn default() -> Self {
        RuntimeConfig {
            skew: 0,
            node_lease: 1_000_000_000,
            reader_lease: 1_000_000_000,
            track_objects: true,
            log_full_timeout: Duration::from_millis(100),
            ordering: ReaderOrdering::Membarrier,
            extents_only: false,
            faults: Faults::default(),
        }
    }
}

impl RuntimeConfig {
    /// Sets `D`: the largest difference between two node clocks read at the same moment.
    /// (Under the emulator, whose `clock_skew(b)` offsets each node by up to `b` from true
    /// time, two nodes differ by up to `2 b`: use `D = 2 b`.)
    ///
    /// ```
    /// use bi_core::runtime::RuntimeConfig;
    ///
    /// // Emulated nodes offset by up to 50 ticks each: two of them differ by up to 100.
    /// let c = RuntimeConfig::default().skew(100);
    /// assert_eq!(c.skew_bound(), 100);
    /// assert!(RuntimeConfig::default().skew(1 << 62).validate().is_err());
    /// ```
    pub fn skew(mut self, ticks: u64) -> Self {
        self.skew = ticks;
        self
    }

    /// Sets the node lease: a node whose last pass ended longer ago than this is excluded
    /// from grace computations.
    ///
    /// ```
    /// use bi_core::runtime::RuntimeConfig;
    ///
    /// let c = RuntimeConfig::default().node_lease(2_000_000_000);
    /// assert_eq!(c.node_lease_ticks(), 2_000_000_000);
    /// assert!(RuntimeConfig::default().node_lease(0).validate().is_err());
    /// ```
    pub fn node_lease(mut self, ticks: u64) -> Self {
        self.node_lease = ticks;
        self
    }

    /// Sets the reader lease: a reader inside one section longer than this is excluded by
    /// its node's pass.
    ///
    /// ```
    /// use bi_core::runtime::RuntimeConfig;
    ///
    /// let c = RuntimeConfig::default().reader_lease(5_000);
    /// assert_eq!(c.reader_lease_ticks(), 5_000);
    /// assert!(c.validate().is_ok());
    /// ```
    pub fn reader_lease(mut self, ticks: u64) -> Self {
        self.reader_lease = ticks;
        self
    }

    /// Whether published objects are logged in the modified ring too (so that passes also
    /// drop stale lines of a reused block). Default true.
    ///
    /// ```
    /// use bi_core::runtime::{RuntimeConfig, testing::Setup};
    ///
    /// let config = RuntimeConfig::default().track_objects(false);
    /// let s = Setup::with(Default::default(), |c| c, config);
    /// let mut w = s.writer(0);
    /// let b = w.alloc(1u64).unwrap();
    /// w.publish(s.slot(0), b).unwrap();
    /// // Only the slot was logged, not the object.
    /// assert_eq!(w.ring_usage().0, 1);
    /// ```
    pub fn track_objects(mut self, on: bool) -> Self {
        self.track_objects = on;
        self
    }

    /// How long the blocking `publish`/`retire` wait for ring space.
    ///
    /// ```
    /// use bi_core::runtime::RuntimeConfig;
    /// use std::time::Duration;
    ///
    /// let c = RuntimeConfig::default().log_full_timeout(Duration::from_millis(5));
    /// assert_ne!(c, RuntimeConfig::default());
    /// assert!(c.validate().is_ok());
    /// ```
    pub fn log_full_timeout(mut self, d: Duration) -> Self {
        self.log_full_timeout = d;
        self
    }

    /// Whether every heap byte the structures use lies in an extent the region's extent
    /// table marks granted, as a pool's structures do (`bi::Pool` sets it). Then a
    /// whole-heap invalidation (a node's first pass, a lapsed lease, a log overflow, a
    /// first declaration of a structure) drops the root directory and the granted
    /// extents only, from a copy of the table read from memory, instead of every line of
    /// the heap: a node that opens a large pool touches only the memory in use. An extent
    /// is never given back, so one the table shows free was never written; a line of it
    /// that a prefetch left in a cache holds zeros, which no stamp matches. Off by
    /// default: heaps cut into arenas ([`testing::Setup`](crate::runtime::testing::Setup)) use
    /// memory the table does not record.
    ///
    /// ```
    /// use bi_core::runtime::RuntimeConfig;
    ///
    /// let c = RuntimeConfig::default().extents_only(true);
    /// assert_ne!(c, RuntimeConfig::default());
    /// assert!(c.validate().is_ok());
    /// ```
    pub fn extents_only(mut self, on: bool) -> Self {
        self.extents_only = on;
        self
    }

    /// Sets how readers are ordered against passes.
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig};
    /// use bi_core::runtime::{NodeRuntime, ReaderOrdering, RuntimeConfig, TickClock};
    /// use std::sync::Arc;
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 20)).unwrap();
    /// let config = RuntimeConfig::default().reader_ordering(ReaderOrdering::Fence);
    /// let rt = NodeRuntime::new(region.hardware(), *region.layout(), 0, config,
    ///     Arc::new(TickClock::new())).unwrap();
    /// assert_eq!(rt.reader_ordering(), ReaderOrdering::Fence);
    /// ```
    pub fn reader_ordering(mut self, o: ReaderOrdering) -> Self {
        self.ordering = o;
        self
    }

    /// Switches `fault` on: the runtime runs without that mechanism (for tests that show
    /// it is needed; feature `faults`).
    #[cfg(feature = "faults")]
    pub fn fault(mut self, fault: Fault) -> Self {
        self.faults = self.faults.with(fault);
        self
    }

    /// The mechanisms switched off (none unless built with the `faults` feature).
    ///
    /// ```
    /// use bi_core::runtime::{Fault, RuntimeConfig};
    ///
    /// let faults = RuntimeConfig::default().faults();
    /// assert!(!faults.has(Fault::NodeClaim)); // nothing is switched off by default
    /// ```
    pub fn faults(&self) -> Faults {
        self.faults
    }

    /// `D`.
    ///
    /// ```
    /// use bi_core::runtime::RuntimeConfig;
    ///
    /// assert_eq!(RuntimeConfig::default().skew_bound(), 0); // one host
    /// assert_eq!(RuntimeConfig::default().skew(7).skew_bound(), 7);
    /// ```
    pub fn skew_bound(&self) -> u64 {
        self.skew
    }

    /// The node lease.
    ///
    /// ```
    /// use bi_core::runtime::RuntimeConfig;
    ///
    /// assert_eq!(RuntimeConfig::default().node_lease_ticks(), 1_000_000_000); // 1 s in ns
    /// ```
    pub fn node_lease_ticks(&self) -> u64 {
        self.node_lease
    }

    /// The reader lease.
    ///
    /// ```
    /// use bi_core::runtime::RuntimeConfig;
    ///
    /// assert_eq!(RuntimeConfig::default().reader_lease_ticks(), 1_000_000_000); // 1 s in ns
    /// ```
    pub fn reader_lease_ticks(&self) -> u64 {
        self.reader_lease
    }

    /// Checks the values.
    ///
    /// ```
    /// use bi_core::runtime::{BiError, RuntimeConfig};
    ///
    /// assert!(RuntimeConfig::default().validate().is_ok());
    /// let bad = RuntimeConfig::default().reader_lease(0).validate();
    /// assert!(matches!(bad, Err(BiError::BadConfig { .. })));
    /// ```
    pub fn validate(&self) -> Result<(), crate::runtime::BiError> {
        if self.node_lease == 0 || self.reader_lease == 0 {
            return Err(crate::runtime::BiError::BadConfig {
                reason: "leases must be positive",
            });
        }
        if self.skew >= 1 << 62 || self.node_lease >= 1 << 62 || self.reader_lease >= 1 << 62 {
            return Err(crate::runtime::BiError::BadConfig {
                reason: "skew and leases must be below 2^62 ticks",
            });
        }
        Ok(())
    }
}
