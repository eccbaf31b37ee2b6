//! The non-coherence emulator: several node caches over one memory, and an oracle.
//!
//! # Why
//!
//! Code written for memory that nodes share without coherence has bugs that an ordinary,
//! coherent machine hides: forget an invalidate and you still read fresh data, forget a
//! write-back and the other thread still sees your store. The emulator brings those
//! failures back. Each node gets a private software cache; a copy in it stays as it was
//! until the node itself writes it back or drops it, or the "hardware" (seeded random
//! events) evicts or prefetches it. Stale reads, stores reaching memory out of order,
//! lost updates on shared lines, prefetches that undo an invalidate: all happen here, on
//! any laptop, reproducibly from a seed.
//!
//! Making failures *happen* is half of it; a test also has to *see* them, and a stale
//! value usually looks perfectly plausible. So memory carries an oracle: every line has a
//! version, the time of its last write-back, and an incarnation the heap bumps on reuse.
//! Each load is judged against it and [`NodeStats`] counts stale reads (with their
//! staleness), reads of reused memory, and lost updates, so a test can assert "zero" for
//! a correct protocol and "more than zero" for a deliberately broken one.
//!
//! # How
//!
//! - [`Emulator`] is the machine: backing memory, the oracle, the true clock, and one
//!   line cache per node behind one mutex per node.
//! - [`EmulatedNode`] is a node's [`MemView`]: a cheap handle that all threads of the node
//!   share. A load or store ticks the virtual clock, draws this operation's random events,
//!   and goes through the node's cache; a write-back or eviction that reaches memory then
//!   tells the *other* nodes' caches that their copies of the line are now out of date
//!   (taking their locks one at a time, never two at once, and never while holding its
//!   own), which is how staleness gets dated from the moment memory moved on.
//! - Memory is only touched through [`Backing`]'s atomic words and caches hold plain bytes
//!   under their lock, so Miri can run the whole emulator and the locks and atomics come
//!   from the crate's std/loom switch.
//!
//! ```
//! use bi_core::mem::{Emulator, EmulatorConfig, MemView};
//!
//! let emu = Emulator::new(EmulatorConfig::new(4096, 2));
//! let (a, b) = (emu.node(0), emu.node(1));
//! assert_eq!(b.load::<u64>(0).unwrap(), 0); // b caches the line
//! a.store(0, &7u64).unwrap();
//! a.writeback(0, 8).unwrap();
//! a.fence();
//! assert_eq!(b.load::<u64>(0).unwrap(), 0); // stale
//! assert_eq!(b.stats().stale_reads, 1);
//! b.invalidate(0, 8).unwrap();
//! b.fence();
//! assert_eq!(b.load::<u64>(0).unwrap(), 7);
//! ```

mod clock;
mod config;
mod node_cache;
mod oracle;
mod stats;

pub use clock::host_ns;
pub use config::{ClockSource, EmulatorConfig, EmulatorError};
pub use stats::NodeStats;

use super::{Backing, MemError, MemView, check_range};
use crate::line::LineSize;
use crate::primitive::plain::Mutex;
use crate::primitive::sync::atomic::{Ordering, fence};
use bytemuck::Pod;
use clock::Clock;
use node_cache::{Ctx, Mark, NodeCache};
use oracle::Oracle;
use std::fmt;
use std::ops::DerefMut;
use std::sync::{Arc, PoisonError};

/// An emulated machine of non-coherent nodes over one shared memory.
///
/// A cheap handle: clones share the same machine.
///
/// ```
/// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
///
/// let emu = Emulator::new(EmulatorConfig::new(4096, 2).cache_lines(4));
/// let a = emu.node(0);
/// a.store(0, &1u64).unwrap();
/// assert_eq!(emu.peek::<u64>(0).unwrap(), 0); // still only in a's cache
/// a.evict(0).unwrap(); // the hardware may do this at any moment
/// assert_eq!(emu.peek::<u64>(0).unwrap(), 1);
/// assert_eq!(emu.total_stats().dirty_evictions, 1);
/// ```
#[derive(Clone)]
pub struct Emulator {
    inner: Arc<Machine>,
}

struct Machine {
    cfg: EmulatorConfig,
    line: LineSize,
    size: usize,
    oracle: Oracle,
    clock: Clock,
    nodes: Box<[NodeState]>,
    /// Under loom, held for every emulated operation: the one point loom switches
    /// threads at (see `primitive::plain`).
    #[cfg(loom)]
    step: crate::primitive::sync::Mutex<()>,
}

struct NodeState {
    cache: Mutex<NodeCache>,
    skew: i64,
}

impl Machine {
    #[inline]
    fn cache(&self, node: usize) -> impl DerefMut<Target = NodeCache> + '_ {
        self.nodes[node]
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells every node but `writer` that memory moved past their copies of `marks`' lines.
    /// Called with no cache lock held; takes one lock at a time.
    fn publish_marks(&self, writer: usize, marks: &[Mark]) {
        for node in (0..self.nodes.len()).filter(|&n| n != writer) {
            self.cache(node).mark_stale(marks);
        }
    }

    /// Runs `op` on `node`'s locked cache as one operation (one clock tick), then
    /// publishes the write-backs it caused.
    #[inline]
    fn with_cache<R>(&self, node: usize, op: impl FnOnce(&mut NodeCache, &mut Ctx<'_>) -> R) -> R {
        let mut cx = Ctx {
            oracle: &self.oracle,
            clock: &self.clock,
            marks: Vec::new(),
        };
        #[cfg(loom)]
        let _step = self.step.lock().unwrap_or_else(PoisonError::into_inner);
        let r = {
            let mut cache = self.cache(node);
            self.clock.tick(node);
            op(&mut cache, &mut cx)
        };
        if !cx.marks.is_empty() {
            self.publish_marks(node, &cx.marks);
        }
        r
    }
}

impl fmt::Debug for Emulator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Emulator")
            .field("config", &self.inner.cfg)
            .finish_non_exhaustive()
    }
}

impl Emulator {
    /// Builds the machine over fresh zeroed memory.
    ///
    /// # Panics
    ///
    /// If the configuration is invalid (see [`EmulatorConfig::validate`]) or the memory
    /// cannot be allocated; [`Emulator::try_new`] returns those as errors instead.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// assert_eq!((emu.size(), emu.nodes()), (4096, 2));
    /// ```
    pub fn new(cfg: EmulatorConfig) -> Emulator {
        match Emulator::try_new(cfg) {
            Ok(emu) => emu,
            Err(e) => panic!("invalid emulator configuration: {e}"),
        }
    }

    /// Builds the machine over fresh zeroed memory, or explains why the configuration is
    /// unusable.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, EmulatorError};
    ///
    /// let err = Emulator::try_new(EmulatorConfig::new(100, 2)).unwrap_err();
    /// assert_eq!(err, EmulatorError::BadSize { size: 100, line: 64 });
    /// ```
    pub fn try_new(cfg: EmulatorConfig) -> Result<Emulator, EmulatorError> {
        cfg.validate()?;
        let backing = Backing::anonymous(cfg.size).map_err(EmulatorError::Memory)?;
        Emulator::over(Arc::new(backing), cfg)
    }

    /// Builds the machine over existing memory (for instance a region's), whose size must
    /// equal the configuration's. Whatever the memory holds is what the first fills see.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bi_core::mem::{Backing, Emulator, EmulatorConfig, MemView};
    ///
    /// let mem = Arc::new(Backing::anonymous(4096).unwrap());
    /// mem.store_bytes(8, &5u64.to_ne_bytes()).unwrap();
    /// let emu = Emulator::over(mem.clone(), EmulatorConfig::new(4096, 1)).unwrap();
    /// assert_eq!(emu.node(0).load::<u64>(8).unwrap(), 5);
    /// assert!(Emulator::over(mem, EmulatorConfig::new(8192, 1)).is_err());
    /// ```
    pub fn over(backing: Arc<Backing>, cfg: EmulatorConfig) -> Result<Emulator, EmulatorError> {
        Emulator::check_backing(&backing, &cfg)?;
        let oracle = Oracle::new(backing, cfg.line).map_err(EmulatorError::Memory)?;
        Ok(Emulator::build(oracle, cfg))
    }

    /// Builds the machine over existing memory, as [`over`](Self::over), keeping the
    /// oracle's per-line history in `history` (at least
    /// [`history_bytes`](Self::history_bytes) long, zeroed before its first use) instead
    /// of in this process. Several processes that each emulate some nodes of one region,
    /// with `backing` and `history` mapped from the same two files, then date each
    /// other's write-backs: a copy one process holds is counted stale once another
    /// process's write-back reaches memory. Each process's caches stay its own (the
    /// nodes it does not run are simply never used), and its counts are its own.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bi_core::mem::{Backing, Emulator, EmulatorConfig, MemView};
    ///
    /// let cfg = EmulatorConfig::new(4096, 2);
    /// let (mem, history) = (Arc::new(Backing::anonymous(4096).unwrap()),
    ///     Arc::new(Backing::anonymous(Emulator::history_bytes(&cfg)).unwrap()));
    /// // Two "processes", each with its own caches, over the same memory and history.
    /// let p = Emulator::over_shared(mem.clone(), history.clone(), cfg.clone()).unwrap();
    /// let q = Emulator::over_shared(mem, history, cfg).unwrap();
    /// let _: u64 = q.node(1).load(0).unwrap(); // q's node 1 caches the line
    /// p.node(0).store(0, &5u64).unwrap();
    /// p.node(0).writeback(0, 8).unwrap();
    /// p.node(0).fence();
    /// assert_eq!(q.node(1).load::<u64>(0).unwrap(), 0); // stale, and counted so
    /// assert_eq!(q.stats(1).stale_reads, 1);
    /// ```
    pub fn over_shared(
        backing: Arc<Backing>,
        history: Arc<Backing>,
        cfg: EmulatorConfig,
    ) -> Result<Emulator, EmulatorError> {
        Emulator::check_backing(&backing, &cfg)?;
        let needed = Emulator::history_bytes(&cfg);
        if history.size() < needed {
            return Err(EmulatorError::BackingSize {
                backing: history.size(),
                config: needed,
            });
        }
        Ok(Emulator::build(
            Oracle::with_meta(backing, cfg.line, history),
            cfg,
        ))
    }

    /// Bytes of per-line history the oracle of a machine of `cfg` keeps (see
    /// [`over_shared`](Self::over_shared)): 24 per memory line, plus its lock words.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// assert!(Emulator::history_bytes(&EmulatorConfig::new(1 << 20, 2)) >= 24 * (1 << 14));
    /// ```
    pub fn history_bytes(cfg: &EmulatorConfig) -> usize {
        Oracle::meta_bytes(cfg.size, cfg.line)
    }

    fn check_backing(backing: &Backing, cfg: &EmulatorConfig) -> Result<(), EmulatorError> {
        cfg.validate()?;
        if backing.size() != cfg.size {
            return Err(EmulatorError::BackingSize {
                backing: backing.size(),
                config: cfg.size,
            });
        }
        Ok(())
    }

    fn build(oracle: Oracle, cfg: EmulatorConfig) -> Emulator {
        let skews = clock::skews(cfg.seed, cfg.nodes, cfg.clock_skew);
        let nodes = skews
            .into_iter()
            .enumerate()
            .map(|(i, skew)| NodeState {
                cache: Mutex::new(NodeCache::new(&cfg, i)),
                skew,
            })
            .collect();
        let machine = Machine {
            line: cfg.line,
            size: cfg.size,
            oracle,
            clock: Clock::new(cfg.clock, cfg.nodes),
            nodes,
            cfg,
            #[cfg(loom)]
            step: crate::primitive::sync::Mutex::new(()),
        };
        Emulator {
            inner: Arc::new(machine),
        }
    }

    /// The view of node `node`.
    ///
    /// # Panics
    ///
    /// If `node >= self.nodes()`; [`Emulator::try_node`] returns an error instead.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let a = emu.node(0);
    /// a.store(0, &1u64).unwrap();
    /// assert!(emu.node(0).is_dirty(0)); // another handle on the same node and cache
    /// assert!(!emu.node(1).is_cached(0));
    /// ```
    pub fn node(&self, node: usize) -> EmulatedNode {
        match self.try_node(node) {
            Ok(n) => n,
            Err(e) => panic!("{e}"),
        }
    }

    /// The view of node `node`, or [`EmulatorError::NoSuchNode`].
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// assert_eq!(emu.try_node(1).unwrap().id(), 1);
    /// assert!(emu.try_node(2).is_err());
    /// ```
    pub fn try_node(&self, node: usize) -> Result<EmulatedNode, EmulatorError> {
        if node < self.inner.nodes.len() {
            Ok(EmulatedNode {
                machine: self.inner.clone(),
                id: node,
            })
        } else {
            Err(EmulatorError::NoSuchNode {
                node,
                nodes: self.inner.nodes.len(),
            })
        }
    }

    /// Number of nodes.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// assert_eq!(Emulator::new(EmulatorConfig::new(4096, 3)).nodes(), 3);
    /// ```
    pub fn nodes(&self) -> usize {
        self.inner.nodes.len()
    }

    /// Size of the shared memory in bytes.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// assert_eq!(Emulator::new(EmulatorConfig::new(1 << 16, 1)).size(), 1 << 16);
    /// ```
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// The line size.
    ///
    /// ```
    /// use bi_core::line::LineSize;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// assert_eq!(Emulator::new(EmulatorConfig::new(4096, 1)).line_size(), LineSize::X86);
    /// ```
    pub fn line_size(&self) -> LineSize {
        self.inner.line
    }

    /// The configuration the machine was built from.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let cfg = EmulatorConfig::new(4096, 2).seed(9);
    /// let emu = Emulator::new(cfg.clone());
    /// assert_eq!(emu.config(), &cfg);
    /// assert_eq!(emu.config().seed_value(), 9);
    /// ```
    pub fn config(&self) -> &EmulatorConfig {
        &self.inner.cfg
    }

    /// The backing memory (what every node would see after invalidating everything).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// emu.node(0).store_to_memory(8, &5u64).unwrap();
    /// let mut b = [0u8; 8];
    /// emu.backing().load_bytes(8, &mut b).unwrap();
    /// assert_eq!(u64::from_ne_bytes(b), 5);
    /// ```
    pub fn backing(&self) -> &Arc<Backing> {
        self.inner.oracle.backing()
    }

    /// Reads a `T` straight from memory, bypassing every cache (the oracle's view; not a
    /// node operation, so it neither ticks the clock nor counts).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// emu.node(0).store(16, &3u32).unwrap();
    /// assert_eq!(emu.peek::<u32>(16).unwrap(), 0);
    /// assert!(emu.peek::<u32>(4094).is_err());
    /// ```
    pub fn peek<T: Pod>(&self, offset: usize) -> Result<T, MemError> {
        let mut v = T::zeroed();
        self.backing()
            .load_bytes(offset, bytemuck::bytes_of_mut(&mut v))?;
        Ok(v)
    }

    /// The true time (the oracle's clock, without any node's skew).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// assert_eq!(emu.now(), 0);
    /// emu.node(0).load::<u64>(0).unwrap(); // every operation ticks once
    /// assert_eq!(emu.now(), 1);
    /// ```
    pub fn now(&self) -> u64 {
        self.inner.clock.now()
    }

    /// Moves the true clock (and so every node's local clock) forward by `dt`.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// emu.advance(100);
    /// assert_eq!(emu.now(), 100);
    /// ```
    pub fn advance(&self, dt: u64) {
        self.inner.clock.advance(dt);
    }

    /// Reports that the heap reused the memory `offset .. offset + len`: every line it
    /// touches starts a new incarnation, and a later load that returns a copy filled
    /// before this call counts as a reuse hazard.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let a = emu.node(0);
    /// a.load::<u64>(0).unwrap();
    /// emu.bump_incarnation(0, 64).unwrap();
    /// assert_eq!(emu.incarnation(0).unwrap(), 1);
    /// a.load::<u64>(0).unwrap(); // a still holds the old incarnation's copy
    /// assert_eq!(a.stats().reuse_hazards, 1);
    /// ```
    pub fn bump_incarnation(&self, offset: usize, len: usize) -> Result<(), MemError> {
        self.inner.oracle.bump_incarnation(offset, len)
    }

    /// The current incarnation of the line holding `offset`.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// assert_eq!(emu.incarnation(100).unwrap(), 0);
    /// emu.bump_incarnation(64, 64).unwrap();
    /// assert_eq!((emu.incarnation(100).unwrap(), emu.incarnation(0).unwrap()), (1, 0));
    /// assert!(emu.incarnation(4096).is_err());
    /// ```
    pub fn incarnation(&self, offset: usize) -> Result<u64, MemError> {
        check_range(offset, 1, self.inner.size)?;
        Ok(self
            .inner
            .oracle
            .incarnation(self.inner.line.line_of(offset)))
    }

    /// How many write-backs have reached the line holding `offset`.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let a = emu.node(0);
    /// assert_eq!(emu.version(0).unwrap(), 0);
    /// a.store_to_memory(0, &1u64).unwrap();
    /// a.store_to_memory(8, &2u64).unwrap(); // the same line
    /// assert_eq!(emu.version(0).unwrap(), 2);
    /// ```
    pub fn version(&self, offset: usize) -> Result<u64, MemError> {
        check_range(offset, 1, self.inner.size)?;
        Ok(self.inner.oracle.version(self.inner.line.line_of(offset)))
    }

    /// Node `node`'s counters.
    ///
    /// # Panics
    ///
    /// If `node >= self.nodes()`.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// emu.node(1).load::<u64>(0).unwrap();
    /// emu.node(1).load::<u64>(8).unwrap();
    /// assert_eq!((emu.stats(1).misses, emu.stats(1).hits), (1, 1));
    /// assert_eq!(emu.stats(0).loads, 0);
    /// ```
    pub fn stats(&self, node: usize) -> NodeStats {
        self.node(node).stats()
    }

    /// All nodes' counters added up (`max_staleness` is the maximum over nodes).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// emu.node(0).load::<u64>(0).unwrap();
    /// emu.node(1).store(0, &1u64).unwrap();
    /// let total = emu.total_stats();
    /// assert_eq!((total.loads, total.stores), (1, 1));
    /// ```
    pub fn total_stats(&self) -> NodeStats {
        let mut total = NodeStats::default();
        for node in 0..self.nodes() {
            total += self.inner.cache(node).stats;
        }
        total
    }

    /// Zeroes every node's counters (caches and memory are left as they are).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// emu.node(0).load::<u64>(0).unwrap();
    /// emu.reset_stats();
    /// assert_eq!(emu.total_stats().loads, 0);
    /// assert!(emu.node(0).is_cached(0)); // the cache is left as it was
    /// ```
    pub fn reset_stats(&self) {
        for node in 0..self.nodes() {
            self.inner.cache(node).reset_stats();
        }
    }
}

/// One node of an [`Emulator`]: its [`MemView`], plus hooks to play the hardware.
///
/// Cheap to clone; every clone (on any thread) is the same node and shares its cache.
/// Besides the view's operations it offers the events real hardware performs on its own,
/// so a test can script them: [`prefetch`](EmulatedNode::prefetch) and
/// [`evict`](EmulatedNode::evict).
///
/// Every operation (load, store, write-back, invalidate, flush, fence, prefetch, evict)
/// advances the virtual clock by one.
///
/// ```
/// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
///
/// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
/// let (a, b) = (emu.node(0), emu.node(1));
/// a.store(100, &[1u8, 2, 3]).unwrap();
/// a.flush(100, 3).unwrap();
/// a.fence();
/// assert_eq!(b.load::<[u8; 3]>(100).unwrap(), [1, 2, 3]);
/// ```
#[derive(Clone)]
pub struct EmulatedNode {
    machine: Arc<Machine>,
    id: usize,
}

impl fmt::Debug for EmulatedNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmulatedNode")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl EmulatedNode {
    /// This node's index.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 3));
    /// assert_eq!(emu.node(2).id(), 2);
    /// ```
    pub fn id(&self) -> usize {
        self.id
    }

    /// A snapshot of this node's counters.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let a = emu.node(0);
    /// a.store(0, &1u64).unwrap();
    /// a.writeback(0, 8).unwrap();
    /// assert_eq!((a.stats().stores, a.stats().lines_written_back), (1, 1));
    /// ```
    pub fn stats(&self) -> NodeStats {
        self.machine.cache(self.id).stats
    }

    /// This node's clock: true time plus the node's fixed skew (clamped at zero). Code
    /// under test should read this, never the oracle's [`Emulator::now`].
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2).clock_skew(5).seed(1));
    /// emu.advance(1000);
    /// for n in 0..2 {
    ///     let node = emu.node(n);
    ///     assert!(node.local_time().abs_diff(emu.now()) <= 5);
    ///     assert_eq!(node.local_time(), (1000 + node.clock_skew()) as u64);
    /// }
    /// ```
    pub fn local_time(&self) -> u64 {
        clock::local(self.machine.clock.now(), self.clock_skew())
    }

    /// How far this node's clock is ahead of true time (negative: behind).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 4).clock_skew(50).seed(3));
    /// assert!((0..4).all(|n| emu.node(n).clock_skew().abs() <= 50));
    /// assert_eq!(Emulator::new(EmulatorConfig::new(4096, 1)).node(0).clock_skew(), 0);
    /// ```
    pub fn clock_skew(&self) -> i64 {
        self.machine.nodes[self.id].skew
    }

    /// Whether the line holding `offset` is in this node's cache (false out of bounds).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let a = Emulator::new(EmulatorConfig::new(4096, 1)).node(0);
    /// assert!(!a.is_cached(70));
    /// a.load::<u8>(70).unwrap();
    /// assert!(a.is_cached(64) && a.is_cached(127)); // the whole line
    /// assert!(!a.is_cached(1 << 20)); // out of bounds
    /// ```
    pub fn is_cached(&self, offset: usize) -> bool {
        offset < self.machine.size
            && self
                .machine
                .cache(self.id)
                .holds(self.machine.line.line_of(offset))
    }

    /// Whether the line holding `offset` is in this node's cache and dirty.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let a = Emulator::new(EmulatorConfig::new(4096, 1)).node(0);
    /// a.load::<u8>(0).unwrap();
    /// assert!(!a.is_dirty(0));
    /// a.store(0, &1u8).unwrap();
    /// assert!(a.is_dirty(0));
    /// ```
    pub fn is_dirty(&self, offset: usize) -> bool {
        offset < self.machine.size
            && self
                .machine
                .cache(self.id)
                .is_dirty(self.machine.line.line_of(offset))
    }

    /// Fills the line holding `offset` now, if it is not cached, as a hardware prefetcher
    /// may at any moment (even right after the program invalidated it).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let a = emu.node(0);
    /// a.prefetch(200).unwrap();
    /// assert!(a.is_cached(192));
    /// a.load::<u8>(200).unwrap();
    /// assert_eq!((a.stats().hits, a.stats().prefetches), (1, 1));
    /// ```
    pub fn prefetch(&self, offset: usize) -> Result<(), MemError> {
        check_range(offset, 1, self.machine.size)?;
        let line = self.machine.line.line_of(offset);
        self.machine
            .with_cache(self.id, |c, cx| c.prefetch_line(line, cx));
        Ok(())
    }

    /// The node's host dies: its cache is lost, and nothing it had not written back ever
    /// reaches memory. Returns how many dirty lines were lost. (A process that starts
    /// afterwards for this node sees memory only.)
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let a = emu.node(0);
    /// a.store(0, &7u64).unwrap();
    /// a.store(64, &8u64).unwrap();
    /// a.writeback(64, 8).unwrap();
    /// assert_eq!(a.crash(), 1); // the line at 0 was dirty
    /// assert_eq!((a.load::<u64>(0).unwrap(), a.load::<u64>(64).unwrap()), (0, 8));
    /// ```
    pub fn crash(&self) -> usize {
        self.machine.with_cache(self.id, |c, _| c.lose_everything())
    }

    /// Evicts the line holding `offset` now, if cached, writing it back first if dirty,
    /// as the hardware may at any moment.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let a = emu.node(0);
    /// a.store(0, &6u64).unwrap();
    /// a.evict(0).unwrap(); // as hardware may do, unasked
    /// assert!(!a.is_cached(0));
    /// assert_eq!(emu.peek::<u64>(0).unwrap(), 6); // written back first
    /// ```
    pub fn evict(&self, offset: usize) -> Result<(), MemError> {
        check_range(offset, 1, self.machine.size)?;
        let line = self.machine.line.line_of(offset);
        self.machine
            .with_cache(self.id, |c, cx| c.evict_line(line, cx));
        Ok(())
    }
}

impl MemView for EmulatedNode {
    fn size(&self) -> usize {
        self.machine.size
    }

    fn prefetch(&self, offset: usize) -> Result<(), MemError> {
        EmulatedNode::prefetch(self, offset)
    }

    fn line_size(&self) -> LineSize {
        self.machine.line
    }

    #[inline]
    fn load<T: Pod>(&self, offset: usize) -> Result<T, MemError> {
        check_range(offset, size_of::<T>(), self.machine.size)?;
        let mut value = T::zeroed();
        self.machine.with_cache(self.id, |c, cx| {
            c.events(cx);
            c.load(offset, bytemuck::bytes_of_mut(&mut value), cx);
        });
        Ok(value)
    }

    /// Under the node cache's lock, which every access of this node takes: atomic among
    /// this node's users, as a processor's exchange is among one host's processes.
    fn compare_exchange_u64(&self, offset: usize, current: u64, new: u64) -> Result<u64, MemError> {
        check_range(offset, 8, self.machine.size)?;
        if !offset.is_multiple_of(8) {
            return Err(MemError::Misaligned { offset });
        }
        Ok(self.machine.with_cache(self.id, |c, cx| {
            c.events(cx);
            let mut found = [0u8; 8];
            c.load(offset, &mut found, cx);
            let found = u64::from_ne_bytes(found);
            if found == current {
                c.store(offset, &new.to_ne_bytes(), cx);
            }
            found
        }))
    }

    #[inline]
    fn store<T: Pod>(&self, offset: usize, value: &T) -> Result<(), MemError> {
        check_range(offset, size_of::<T>(), self.machine.size)?;
        self.machine.with_cache(self.id, |c, cx| {
            c.events(cx);
            c.store(offset, bytemuck::bytes_of(value), cx);
        });
        Ok(())
    }

    fn writeback(&self, offset: usize, len: usize) -> Result<(), MemError> {
        check_range(offset, len, self.machine.size)?;
        self.machine
            .with_cache(self.id, |c, cx| c.write_back(offset, len, cx));
        Ok(())
    }

    fn invalidate(&self, offset: usize, len: usize) -> Result<(), MemError> {
        check_range(offset, len, self.machine.size)?;
        self.machine
            .with_cache(self.id, |c, cx| c.invalidate(offset, len, cx));
        Ok(())
    }

    fn flush(&self, offset: usize, len: usize) -> Result<(), MemError> {
        check_range(offset, len, self.machine.size)?;
        self.machine.with_cache(self.id, |c, cx| {
            c.write_back(offset, len, cx);
            c.invalidate(offset, len, cx);
        });
        Ok(())
    }

    fn fence(&self) {
        fence(Ordering::SeqCst);
        self.machine.with_cache(self.id, |c, cx| c.fence(cx));
    }

    /// Evicts this node's own copies of the range (writing back dirty ones), then bumps
    /// the range's incarnation. This node is about to write the new object over what it
    /// holds of the old one; an eviction is something the hardware may do at any moment,
    /// and it makes every later fill of the range, here or elsewhere, one of the new
    /// incarnation, while the copies other nodes still hold stay old and count as reuse
    /// hazards when read. (Without it, this node's own copy of a line it is rewriting
    /// would keep the old incarnation until written back, and the writer reading back a
    /// node it has just written would count as a hazard.)
    fn note_reuse(&self, offset: usize, len: usize) -> Result<(), MemError> {
        check_range(offset, len, self.machine.size)?;
        self.machine.with_cache(self.id, |c, cx| {
            for line in self.machine.line.lines(offset, len) {
                c.evict_line(line, cx);
            }
        });
        self.machine.oracle.bump_incarnation(offset, len)
    }

    /// Writes back every dirty line of node `node`'s cache and lands it (as a write-back
    /// and a fence there would).
    fn write_back_node(&self, node: usize) -> Result<(), MemError> {
        if node >= self.machine.nodes.len() {
            return Err(MemError::Unsupported {
                what: "writing back the cache of a node the emulator does not have",
            });
        }
        let size = self.machine.size;
        self.machine.with_cache(node, |c, cx| {
            c.write_back(0, size, cx);
            c.fence(cx);
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_send_sync_and_cheap() {
        fn check<T: Clone + Send + Sync>() {}
        check::<Emulator>();
        check::<EmulatedNode>();
    }

    #[test]
    #[should_panic(expected = "node 3 does not exist")]
    fn node_out_of_range_panics_with_a_message() {
        Emulator::new(EmulatorConfig::new(4096, 2)).node(3);
    }

    #[test]
    #[should_panic(expected = "invalid emulator configuration")]
    fn new_panics_on_a_bad_configuration() {
        Emulator::new(EmulatorConfig::new(4096, 0));
    }

    #[test]
    fn write_back_marks_other_nodes_stale_at_that_moment() {
        let emu = Emulator::new(EmulatorConfig::new(4096, 3));
        let (a, b, c) = (emu.node(0), emu.node(1), emu.node(2));
        b.load::<u64>(0).unwrap(); // t1
        c.load::<u64>(0).unwrap(); // t2
        a.store(0, &1u64).unwrap(); // t3
        a.writeback(0, 8).unwrap(); // t4: memory moves past b's and c's copies
        emu.advance(10); // t14
        b.load::<u64>(0).unwrap(); // t15
        assert_eq!(b.stats().max_staleness, 11);
        assert_eq!(c.stats().stale_reads, 0);
        assert_eq!(a.stats().stale_reads, 0);
        assert_eq!(emu.version(0).unwrap(), 1);
    }
}
