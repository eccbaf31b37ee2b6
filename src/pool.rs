//! A pool: one call to map a region and run this process as one of its nodes.
//!
//! [`Pool::open_or_create`] opens the region file or creates it if there is none (an
//! existing region is never truncated; on a DAX or CXL character device, or a block
//! device, the region takes the device's size and is made only if the device holds
//! none); [`Pool::open`] opens only a pool that exists. Either claims a node of it for this process (the first node no
//! live process runs, or the one [`PoolConfig::node`] names), starts the node's
//! background quiescence pass, and stops it when the pool is dropped. Structures are then
//! found by name and type: [`Pool::map_writer`] / [`Pool::map_reader`] and the same for
//! trees. A structure's memory comes from the region's heap in extents granted to the
//! structure as it grows ([`bi_alloc::extents`]), not from a share fixed per node: the
//! only writer of a pool can use all of it, and whichever node writes a structure next
//! takes over exactly its memory. A node runs one writer at a time, so a process holds
//! one writer handle per pool.
//!
//! ```
//! use bi::{Pool, PoolConfig};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("orders.bi");
//! // The writer process: two statements of setup.
//! let writer_pool = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
//! let mut orders = writer_pool.map_writer::<u64, u64>("orders").unwrap();
//! orders.insert(1, 100).unwrap();
//!
//! // A reader process (here the same one, as another node): two statements as well.
//! let reader_pool = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
//! let orders_read = reader_pool.map_reader::<u64, u64>("orders").unwrap();
//! assert_eq!(orders_read.get(&1).unwrap(), Some(100));
//! assert_ne!(writer_pool.node(), reader_pool.node());
//! ```

use crate::error::{Error, PoolError, structure};
use bi_alloc::{AllocError, Extents, NodeHeap};
use bi_collections::Stored;
use bi_collections::delegate::{ClientConfig, Idle};
use bi_collections::map::{BiHashMap, MapConfig, MapReadHandle, MapWriteHandle};
use bi_collections::tree::{BiTree, TreeReadHandle, TreeWriteHandle};
use bi_core::mem::{EmulatedNode, EmulatorConfig, Hardware, MemView, NodeStats};
use bi_core::region::{Region, RegionConfig};
use bi_core::runtime::{
    Background, BiError, Clock, DEFAULT_PASS_PERIOD, EmulatedClock, NodeRuntime, RuntimeConfig,
    TickClock,
};
use std::fmt;
use std::hash::Hash;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How [`Pool::open`] opens and joins a pool.
///
/// ```
/// use bi::core::region::RegionConfig;
/// use bi::{Pool, PoolConfig};
///
/// let dir = tempfile::tempdir().unwrap();
/// let config = PoolConfig {
///     region: RegionConfig::new(4 << 20).with_nodes(2), // used only to create the file
///     node: Some(1),
///     ..PoolConfig::default()
/// };
/// let pool = Pool::open_or_create(dir.path().join("small.bi"), config).unwrap();
/// assert_eq!(pool.node(), 1);
/// assert_eq!(pool.region().layout().config().nodes(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// The region to create if the file does not exist (ignored when it does).
    pub region: RegionConfig,
    /// The node to run; `None` claims the first node no live process runs.
    pub node: Option<usize>,
    /// Join this node, which another process of this host runs, as a reader only,
    /// instead of running a node ([`bi_core::runtime::share`]): the runner's pass covers
    /// this process's readers. Overrides `node`.
    pub join: Option<usize>,
    /// The runtime's parameters (leases, skew bound). A pool always runs with
    /// [`RuntimeConfig::extents_only`]: its structures live in granted extents.
    pub runtime: RuntimeConfig,
    /// How often the background pass runs.
    pub pass_period: Duration,
    /// How a writer's serving thread waits while no other process writes (by default
    /// 15 us naps for 100 ms after a request, then up to 1 ms: see [`Idle`] for the
    /// latency and the CPU it costs).
    pub serving: Idle,
    /// How long a write from a process that does not hold the writer role waits for the
    /// writer (for room in its channel, then for the acknowledgement) before it fails
    /// with [`DelegationError::Timeout`](bi_collections::delegate::DelegationError::Timeout).
    pub write_timeout: Duration,
}

impl Default for PoolConfig {
    /// A 64 MiB region of 8 nodes with 512 reader records each (one per reading thread:
    /// a pass reads them all, about a nanosecond each) when one must be created, the first
    /// free node, the runtime's defaults, a pass every millisecond, [`Idle::default`]
    /// serving and a one-second write timeout.
    fn default() -> Self {
        PoolConfig {
            region: RegionConfig::new(64 << 20)
                .with_nodes(8)
                .with_readers_per_node(512)
                .with_log_ring_entries(1 << 14),
            node: None,
            join: None,
            runtime: RuntimeConfig::default(),
            pass_period: DEFAULT_PASS_PERIOD,
            serving: Idle::default(),
            write_timeout: ClientConfig::default().timeout_value(),
        }
    }
}

impl PoolConfig {
    /// The default configuration with a region of `bytes` bytes: every other parameter
    /// of the pool's region (8 nodes, 512 readers per node, 16,384-entry log rings) stays.
    /// Prefer it to a [`RegionConfig::new`] of that size, whose parameters suit small test
    /// regions (its 1,024-entry log rings let a busy writer wait for room every few
    /// hundred writes).
    ///
    /// ```
    /// use bi::PoolConfig;
    ///
    /// let config = PoolConfig::with_size(1 << 30);
    /// assert_eq!(config.region.size(), 1 << 30);
    /// assert_eq!(config.region.log_ring_entries(), PoolConfig::default().region.log_ring_entries());
    /// ```
    pub fn with_size(bytes: usize) -> PoolConfig {
        let default = PoolConfig::default();
        PoolConfig {
            region: default.region.with_size(bytes),
            ..default
        }
    }
}

/// A region mapped by this process and one of its nodes run by it, with the node's
/// background pass; dropping it stops the pass and gives the node up.
///
/// ```
/// use bi::{Pool, PoolConfig};
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("pool.bi");
/// let pool = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
/// let mut prices = pool.tree_writer::<u32, u64>("prices").unwrap();
/// prices.insert(3, 300).unwrap();
/// let node = pool.node();
/// drop(prices);
/// drop(pool); // the pass stops and the node is given up: it can be claimed again
/// let config = PoolConfig { node: Some(node), ..PoolConfig::default() };
/// let again = Pool::open_or_create(&path, config).unwrap();
/// assert_eq!(again.tree_reader::<u32, u64>("prices").unwrap().get(&3).unwrap(), Some(300));
/// ```
pub struct Pool<M: MemView = Hardware> {
    // Dropped in this order: the pass stops before the runtime gives the node up.
    // (None for a process that joined its node: the runner passes.)
    /// The writes of the shared handles open in this process (weak: the handles own
    /// them, and stop a serving thread before the pool can go).
    open: OpenWrites,
    /// How this process serves and sends writes ([`PoolConfig::serving`] and
    /// [`PoolConfig::write_timeout`]).
    writing: Writing,
    background: Option<Background>,
    rt: NodeRuntime<M>,
    region: Region,
}

impl<M: MemView + 'static> fmt::Debug for Pool<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("path", &self.region.path())
            .field("node", &self.rt.node())
            .field("passes", &self.passes().0)
            .field("joined", &self.rt.is_joined())
            .finish_non_exhaustive()
    }
}

/// How long a claim must stand before the pool trusts it: another process that claimed
/// the same free node at the same moment has written its claim by then, and one of the
/// two sees the other's.
const CLAIM_SETTLE: Duration = Duration::from_millis(5);

impl Pool<Hardware> {
    /// Opens the pool at `path`, which must exist (a region file, or a device holding
    /// one), and runs one of its nodes in this process: what a process that reads or
    /// writes a pool another one made does, so that a wrong path is an error
    /// ([`ErrorKind::NotFound`](crate::ErrorKind::NotFound)) rather than a new, empty pool.
    /// [`open_or_create`](Self::open_or_create) makes it if it is missing.
    ///
    /// Errors, by [`kind`](crate::Error::kind): [`NotFound`](crate::ErrorKind::NotFound)
    /// for a missing file, [`Corrupt`](crate::ErrorKind::Corrupt) for a file that is not a
    /// valid region (nothing is written to it; the cause is [`PoolError::Region`]),
    /// [`Busy`](crate::ErrorKind::Busy) when every node is run by a live process
    /// ([`PoolError::NoFreeNode`]) or `config.node` is ([`BiError::NodeTaken`]),
    /// [`Other`](crate::ErrorKind::Other) with [`BiError::NodeNotRunning`] /
    /// [`BiError::NodeOnAnotherHost`] when the node `config.join` names cannot be joined,
    /// [`Io`](crate::ErrorKind::Io) when the file system refuses.
    ///
    /// ```
    /// use bi::{ErrorKind, Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("orders.bi");
    /// let err = Pool::open(&path, PoolConfig::default()).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::NotFound);
    /// assert!(!path.exists()); // nothing made
    /// let _made = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let _opened = Pool::open(&path, PoolConfig::default()).unwrap(); // another node
    /// ```
    ///
    /// Joining: a second process of a host that already runs a node reads through it
    /// (it writes nothing, runs no pass):
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("orders.bi");
    /// let runner = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let mut orders = runner.map_writer::<u64, u64>("orders").unwrap();
    /// orders.insert(7, 70).unwrap();
    ///
    /// // Another process of this host (here: the same one) joins the runner's node.
    /// let joined = Pool::open(&path, PoolConfig { join: Some(runner.node()), ..PoolConfig::default() })
    ///     .unwrap();
    /// assert_eq!(joined.node(), runner.node());
    /// assert_eq!(joined.map_reader::<u64, u64>("orders").unwrap().get(&7).unwrap(), Some(70));
    /// assert!(joined.map_writer::<u64, u64>("orders").is_err()); // reads only
    /// ```
    pub fn open(path: impl AsRef<Path>, config: PoolConfig) -> Result<Pool, Error> {
        Ok(Pool::open_with(
            path.as_ref(),
            config,
            false,
            |region, _| Ok((region.hardware(), Arc::new(TickClock::new()))),
        )?)
    }

    /// [`open`](Self::open), making the pool from `config.region` if there is no file
    /// at `path` (a device that holds no region yet is made one, as large as the
    /// device). If several processes make it at the same moment, one makes it and the
    /// others open that one.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("orders.bi");
    /// let pool = Pool::open_or_create(&path, PoolConfig::with_size(16 << 20)).unwrap();
    /// assert_eq!(pool.region().layout().config().size(), 16 << 20);
    /// ```
    pub fn open_or_create(path: impl AsRef<Path>, config: PoolConfig) -> Result<Pool, Error> {
        Ok(Pool::open_with(
            path.as_ref(),
            config,
            true,
            |region, _| Ok((region.hardware(), Arc::new(TickClock::new()))),
        )?)
    }
}

impl Pool<EmulatedNode> {
    /// Opens (or makes) the region at `path` as [`Pool::open_or_create`] does, but runs the node over a
    /// non-coherence emulator instead of the hardware: the node's cache is private to
    /// this process, memory is the region file's, and the emulator's oracle keeps each
    /// line's history in a file beside the region ([`Region::emulated`]), so several
    /// processes that open the same region this way see each other's writes only through
    /// write-backs and invalidations, as nodes without coherence would, and the stale
    /// reads, reuse hazards and lost writes among them are counted
    /// ([`emulator_stats`](Self::emulator_stats)). `configure` sets the machine's seed
    /// and event rates ([`Emulation`](crate::Emulation) reads them from the environment).
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("orders.bi");
    /// let hostile = |c: bi::core::mem::EmulatorConfig| c.seed(3).eviction_rate(0.01);
    /// let writer = Pool::open_emulated(&path, PoolConfig::default(), hostile).unwrap();
    /// writer.map_writer::<u64, u64>("orders").unwrap().insert(1, 10).unwrap();
    /// let reader = Pool::open_emulated(&path, PoolConfig::default(), hostile).unwrap();
    /// assert_eq!(reader.map_reader::<u64, u64>("orders").unwrap().get(&1).unwrap(), Some(10));
    /// assert_eq!(reader.emulator_stats().lost_writes, 0);
    /// ```
    pub fn open_emulated(
        path: impl AsRef<Path>,
        config: PoolConfig,
        configure: impl Fn(EmulatorConfig) -> EmulatorConfig,
    ) -> Result<Pool<EmulatedNode>, Error> {
        // A machine whose node clocks are skewed: each node keeps its emulated clock, and
        // the pool allows for two of them differing by twice the bound.
        let skew = configure(EmulatorConfig::new(1 << 16, 1)).clock_skew_bound();
        let mut config = config;
        if skew > 0 {
            let at_least = skew.saturating_mul(2).max(config.runtime.skew_bound());
            config.runtime = config.runtime.skew(at_least);
        }
        Ok(Pool::open_with(
            path.as_ref(),
            config,
            true,
            |region, node| {
                let view = region.emulated(node, &configure)?;
                let clock: Arc<dyn Clock> = match skew {
                    0 => Arc::new(TickClock::new()),
                    _ => Arc::new(EmulatedClock::new(view.clone())),
                };
                Ok((view, clock))
            },
        )?)
    }

    /// What the emulator's oracle counted for this process's node so far: loads, stale
    /// reads and their age, reuse hazards, lost writes, write-backs, invalidations.
    pub fn emulator_stats(&self) -> NodeStats {
        self.rt.view().stats()
    }
}

impl<M: MemView + 'static> Pool<M> {
    /// Maps the region and runs a node of it over the view and the clock `view` gives for
    /// it.
    fn open_with(
        path: &Path,
        config: PoolConfig,
        create: bool,
        view: impl Fn(&Region, usize) -> Result<(M, Arc<dyn Clock>), PoolError>,
    ) -> Result<Pool<M>, PoolError> {
        let region = match create {
            true => Region::open_or_create(path, config.region)?,
            false => Region::open(path)?,
        };
        let layout = *region.layout();
        // Every structure of a pool lives in extents granted to it: passes and first
        // readers drop those, not the whole heap (opening a large pool costs what is used).
        let mut config = config;
        config.runtime = config.runtime.extents_only(true);
        let writing = Writing::of(&config);
        if let Some(n) = config.join {
            let (node_view, clock) = view(&region, n)?;
            let rt = NodeRuntime::join(node_view, layout, n, config.runtime, clock)?;
            return Ok(Pool {
                open: OpenWrites::default(),
                writing,
                background: None,
                rt,
                region,
            });
        }
        let nodes = layout.config().nodes() as usize;
        let candidates: Vec<usize> = match config.node {
            Some(n) => vec![n],
            None => (0..nodes).collect(),
        };
        for n in candidates {
            let (node_view, clock) = view(&region, n)?;
            let rt = match NodeRuntime::new(node_view, layout, n, config.runtime.clone(), clock) {
                Ok(rt) => rt,
                Err(BiError::NodeTaken { .. }) if config.node.is_none() => continue,
                Err(e) => return Err(e.into()),
            };
            std::thread::sleep(CLAIM_SETTLE);
            if !rt.holds_claim()? {
                if config.node.is_some() {
                    return Err(BiError::NodeTaken { node: n }.into());
                }
                continue;
            }
            let background = Some(rt.start_background(config.pass_period));
            return Ok(Pool {
                open: OpenWrites::default(),
                writing,
                background,
                rt,
                region,
            });
        }
        Err(PoolError::NoFreeNode { nodes })
    }

    /// The node this process runs.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let a = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let b = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// assert_eq!((a.node(), b.node()), (0, 1)); // the first nodes no live process runs
    /// ```
    pub fn node(&self) -> usize {
        self.rt.node()
    }

    /// The writes of this process's shared handles, by structure name.
    pub(crate) fn open_writes(&self) -> &OpenWrites {
        &self.open
    }

    /// How this process serves and sends writes.
    pub(crate) fn writing(&self) -> Writing {
        self.writing
    }

    /// What the pool holds now: every node and its passes, every structure and its
    /// writer, the heap's grants ([`PoolReport`](crate::inspect::PoolReport), the same
    /// report [`PoolReport::read`](crate::inspect::PoolReport::read) gives from outside).
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::open_or_create(dir.path().join("pool.bi"), PoolConfig::default()).unwrap();
    /// let _m = pool.map::<u64, u64>("m").unwrap(); // held: its writer role with it
    /// let stats = pool.stats().unwrap();
    /// assert!(stats.nodes[pool.node()].live);
    /// assert!(stats.structures.iter().any(|s| s.name == "m" && s.writer_live));
    /// ```
    pub fn stats(&self) -> Result<crate::inspect::PoolReport, Error> {
        crate::inspect::PoolReport::of(&self.region, self.rt.view())
    }

    /// The region.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let pool = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// assert_eq!(pool.region().path(), Some(path.as_path()));
    /// assert_eq!(pool.region().layout().config().nodes(), 8);
    /// ```
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// The node's runtime (for raw reads and writes, and statistics).
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let pool = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// assert_eq!(pool.runtime().node(), pool.node());
    /// assert!(!pool.runtime().is_joined());
    /// ```
    pub fn runtime(&self) -> &NodeRuntime<M> {
        &self.rt
    }

    /// Background passes run so far, and whether the pass stopped because another process
    /// took this node over.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let pool = Pool::open_or_create(&path, PoolConfig::default()).unwrap(); // a pass every millisecond
    /// let start = std::time::Instant::now();
    /// while pool.passes().0 == 0 && start.elapsed().as_secs() < 5 {
    ///     std::thread::sleep(std::time::Duration::from_millis(1));
    /// }
    /// let (passes, taken) = pool.passes();
    /// assert!(passes > 0);
    /// assert!(!taken);
    /// ```
    pub fn passes(&self) -> (u64, bool) {
        match &self.background {
            Some(b) => (b.passes(), b.node_taken()),
            None => (0, false),
        }
    }

    /// The longest time from the start of one background pass to the end of the next so
    /// far: about the pass period when the pass thread runs on time (what bounds a line
    /// written back just after a pass began). A read is stale by at most this
    /// (plus the skew allowance): a machine too loaded to run the pass on time makes
    /// reads staler, and this tells by how much.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    /// use std::time::Duration;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::open_or_create(dir.path().join("pool.bi"), PoolConfig::default()).unwrap();
    /// while pool.passes().0 < 3 {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// assert!(pool.longest_pass_gap() >= Duration::from_micros(500));
    /// ```
    pub fn longest_pass_gap(&self) -> Duration {
        self.background
            .as_ref()
            .map_or(Duration::ZERO, Background::longest_span)
    }

    /// The longest gap between background passes, as
    /// [`longest_pass_gap`](Self::longest_pass_gap) measures it, among the passes that
    /// ended since this was last called; each call starts a new window. A monitor that
    /// asks now and then learns how stale reads could be lately, which a stop of the
    /// process long ago (a debugger, a paused machine) does not inflate.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    /// use std::time::Duration;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::open_or_create(dir.path().join("pool.bi"), PoolConfig::default()).unwrap();
    /// while pool.passes().0 < 3 {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// let lately = pool.take_longest_pass_gap();
    /// assert!(lately > Duration::ZERO && lately <= pool.longest_pass_gap());
    /// ```
    pub fn take_longest_pass_gap(&self) -> Duration {
        self.background
            .as_ref()
            .map_or(Duration::ZERO, Background::take_longest_span)
    }

    /// The node's writer, over a heap of the extents of the structure at `slot`.
    fn writer_for(&self, slot: usize) -> Result<bi_core::runtime::Writer<M, NodeHeap>, PoolError> {
        writer_in(&self.rt, slot)
    }

    /// The map named `name` (made if missing), as its writer: a live writer elsewhere is
    /// an error; a map whose writer died is adopted ([`BiHashMap::take_writer`]).
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let pool = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let mut stock = pool.map_writer::<u64, u32>("stock").unwrap();
    /// assert_eq!(stock.insert(17, 4).unwrap(), None);
    /// // One writer per structure: another node's second writer is refused.
    /// let other = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// assert!(other.map_writer::<u64, u32>("stock").is_err());
    /// ```
    pub fn map_writer<K: Stored + Eq + Hash, V: Stored>(
        &self,
        name: &str,
    ) -> Result<MapWriteHandle<K, V, M, NodeHeap>, Error> {
        self.map_writer_with(name, MapConfig::default())
            .map_err(|e| Error::from(e).about(|| structure::<K, V>("map", name)))
    }

    /// [`map_writer`](Self::map_writer), sizing the table as `config` says.
    pub(crate) fn map_writer_with<K: Stored + Eq + Hash, V: Stored>(
        &self,
        name: &str,
        config: MapConfig,
    ) -> Result<MapWriteHandle<K, V, M, NodeHeap>, PoolError> {
        let map = BiHashMap::<K, V>::named(&self.region, &self.rt, name)?;
        Ok(map.take_writer_with(&self.rt, self.writer_for(map.slot())?, config)?)
    }

    /// A reader of the map named `name` (made, empty, if missing), for the calling
    /// thread.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let pool = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let stock = pool.map_reader::<u64, u32>("stock").unwrap(); // made, empty
    /// assert_eq!(stock.get(&17).unwrap(), None);
    /// // The name is bound to its key and value types.
    /// assert!(pool.map_reader::<u64, u64>("stock").is_err());
    /// ```
    pub fn map_reader<K: Stored + Eq + Hash, V: Stored>(
        &self,
        name: &str,
    ) -> Result<MapReadHandle<K, V, M>, Error> {
        let about = |e: PoolError| Error::from(e).about(|| structure::<K, V>("map", name));
        let map =
            BiHashMap::<K, V>::named(&self.region, &self.rt, name).map_err(|e| about(e.into()))?;
        map.read_handle(&self.rt).map_err(|e| about(e.into()))
    }

    /// The tree named `name` (made if missing), as its writer ([`BiTree::take_writer`]).
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let pool = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let mut events = pool.tree_writer::<u64, u64>("events").unwrap();
    /// for t in [30, 10, 20] {
    ///     events.insert(t, t * 2).unwrap();
    /// }
    /// assert_eq!(events.range(15..).unwrap(), vec![(20, 40), (30, 60)]);
    /// ```
    pub fn tree_writer<K: Stored + Ord, V: Stored>(
        &self,
        name: &str,
    ) -> Result<TreeWriteHandle<K, V, M, NodeHeap>, Error> {
        let take = || -> Result<_, PoolError> {
            let tree = BiTree::<K, V>::named(&self.region, &self.rt, name)?;
            Ok(tree.take_writer(&self.rt, self.writer_for(tree.slot())?)?)
        };
        take().map_err(|e| Error::from(e).about(|| structure::<K, V>("tree", name)))
    }

    /// A reader of the tree named `name` (made, empty, if missing), for the calling
    /// thread.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let writer = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// writer.tree_writer::<u64, u64>("events").unwrap().insert(1, 2).unwrap();
    /// let reader = Pool::open_or_create(&path, PoolConfig::default()).unwrap(); // another node
    /// let events = reader.tree_reader::<u64, u64>("events").unwrap();
    /// assert_eq!(events.get(&1).unwrap(), Some(2));
    /// ```
    pub fn tree_reader<K: Stored + Ord, V: Stored>(
        &self,
        name: &str,
    ) -> Result<TreeReadHandle<K, V, M>, Error> {
        let about = |e: PoolError| Error::from(e).about(|| structure::<K, V>("tree", name));
        let tree =
            BiTree::<K, V>::named(&self.region, &self.rt, name).map_err(|e| about(e.into()))?;
        tree.read_handle(&self.rt).map_err(|e| about(e.into()))
    }
}

/// The writer of `rt`'s node for the structure whose slot is `slot`, over the heap of
/// the extents granted to it.
pub(crate) fn writer_in<M: MemView + 'static>(
    rt: &NodeRuntime<M>,
    slot: usize,
) -> Result<bi_core::runtime::Writer<M, NodeHeap>, PoolError> {
    if rt.is_joined() {
        let node = rt.node();
        return Err(BiError::NotRunner { node }.into());
    }
    let extents = Extents::new(rt.clone(), slot as u64).map_err(AllocError::Heap)?;
    let heap = extents.heap().map_err(AllocError::Heap)?;
    match rt.writer(heap) {
        Err(BiError::WriterTaken { .. }) => Err(PoolError::WriterTaken),
        r => Ok(r?),
    }
}

/// How a process serves the other processes' writes and sends its own: the pool's
/// [`PoolConfig::serving`](crate::PoolConfig::serving) and
/// [`PoolConfig::write_timeout`](crate::PoolConfig::write_timeout).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Writing {
    pub(crate) serving: Idle,
    pub(crate) timeout: Duration,
}

impl Writing {
    pub(crate) fn of(config: &crate::PoolConfig) -> Writing {
        Writing {
            serving: config.serving,
            timeout: config.write_timeout,
        }
    }
}

/// The writes of every structure this process has a shared handle of, by name, so that
/// its handles share one writer or one client (two clients of one node on one channel
/// would corrupt it).
pub(crate) type OpenWrites =
    std::sync::Mutex<Vec<(String, std::sync::Weak<dyn std::any::Any + Send + Sync>)>>;
