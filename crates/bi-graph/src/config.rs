//! How a program is run: the mode, the partitioner, the memory backend, and what a run
//! reports.

use std::path::PathBuf;
use std::process::Child;
use std::sync::Arc;
use std::time::Duration;

/// How replicas learn their master's value.
///
/// ```
/// use bi_graph::{wcc, EdgeList, EngineConfig, Mode};
///
/// let g = EdgeList { ids: (0..5).collect(), edges: vec![(1, 0), (3, 2), (4, 3)], weights: None };
/// for mode in [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic] {
///     let config = EngineConfig { mode, ..EngineConfig::default() };
///     assert_eq!(wcc(&g, &config)?.values, [0, 0, 2, 2, 2]); // the same answer in every mode
/// }
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Replicas hold copies; masters send updates over channels (message passing).
    Stock,
    /// Replicas reference their master; quiescence runs in the barrier (no stale data).
    BiOnDemand,
    /// Replicas reference their master; quiescence runs in the background (bounded
    /// staleness across supersteps).
    BiPeriodic,
}

/// How edges are assigned to partitions (a vertex cut).
///
/// ```
/// use bi_graph::{wcc, EdgeList, EngineConfig, Partitioner};
///
/// let g = EdgeList { ids: (0..5).collect(), edges: vec![(1, 0), (3, 2), (4, 3)], weights: None };
/// for partitioner in [Partitioner::Random, Partitioner::Oblivious, Partitioner::Grid, Partitioner::ByTarget] {
///     let config = EngineConfig { partitioner, nodes: 4, ..EngineConfig::default() };
///     assert_eq!(wcc(&g, &config)?.values, [0, 0, 2, 2, 2]);
/// }
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Partitioner {
    /// Each edge to a partition chosen by a seeded hash.
    Random,
    /// PowerGraph's oblivious greedy placement.
    Oblivious,
    /// Partitions on a grid; an edge goes to the intersection of its endpoints' row and
    /// column.
    Grid,
    /// Each vertex's master on a hashed partition, each edge with its target's master (an
    /// edge cut over in-edges): programs gathering over in-edges send no partials.
    ByTarget,
}

impl Partitioner {
    /// Whether the cut places an edge by its endpoints alone, so that partitions can read
    /// a graph in shares ([`GraphShare`](crate::GraphShare)): all but the oblivious cut,
    /// which places an edge after every edge before it.
    pub fn reads_shares(self) -> bool {
        self != Partitioner::Oblivious
    }
}

/// Which memory the partitions share.
///
/// ```
/// use bi_graph::engine::{run_detailed, RunOptions};
/// use bi_graph::{Backend, EdgeList, EngineConfig, Wcc};
///
/// let g = EdgeList { ids: (0..5).collect(), edges: vec![(1, 0), (3, 2), (4, 3)], weights: None };
/// let config = EngineConfig { backend: Backend::Emulated { seed: 3 }, ..EngineConfig::default() };
/// let detailed = run_detailed(&Wcc, &g, &config, &RunOptions::default())?;
/// let oracle = detailed.emulator.expect("the emulated backend reports its counters");
/// assert_eq!((oracle.reuse_hazards, oracle.lost_writes), (0, 0));
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The machine's memory, with real cache write-back and invalidation instructions.
    Hardware,
    /// The non-coherence emulator, seeded (for tests and small graphs).
    Emulated {
        /// Seed of the emulator's random events.
        seed: u64,
    },
}

/// Long phases report their progress here (the CLI draws progress bars).
///
/// ```
/// use bi_graph::{wcc, EdgeList, EngineConfig, Observer};
/// use std::sync::{Arc, Mutex};
///
/// #[derive(Default)]
/// struct Phases(Mutex<Vec<String>>);
/// impl Observer for Phases {
///     fn start(&self, phase: &str, _total: u64) {
///         self.0.lock().unwrap().push(phase.to_owned());
///     }
///     fn advance(&self, _n: u64) {}
///     fn finish(&self) {}
/// }
/// let g = EdgeList { ids: (0..5).collect(), edges: vec![(1, 0), (3, 2), (4, 3)], weights: None };
/// let phases = Arc::new(Phases::default());
/// let config = EngineConfig { observer: Some(phases.clone()), ..EngineConfig::default() };
/// wcc(&g, &config)?;
/// assert!(!phases.0.lock().unwrap().is_empty()); // the run reported its phases
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
pub trait Observer: Send + Sync {
    /// A phase starts with `total` steps (0 when unknown).
    fn start(&self, phase: &str, total: u64);
    /// `n` more steps are done.
    fn advance(&self, n: u64);
    /// The phase is over.
    fn finish(&self);
}

/// Parameters of one run of a vertex program.
///
/// ```
/// use bi_graph::{wcc, EdgeList, EngineConfig, Mode};
///
/// let config = EngineConfig { nodes: 3, mode: Mode::Stock, seed: 7, ..EngineConfig::default() };
/// assert_eq!(config.max_iterations, 20);
/// let g = EdgeList { ids: (0..5).collect(), edges: vec![(1, 0), (3, 2), (4, 3)], weights: None };
/// assert_eq!(wcc(&g, &config)?.values, [0, 0, 2, 2, 2]);
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
#[derive(Clone)]
pub struct EngineConfig {
    /// Partitions, one per node (thread).
    pub nodes: usize,
    /// Edge placement.
    pub partitioner: Partitioner,
    /// How replicas see masters.
    pub mode: Mode,
    /// Which memory.
    pub backend: Backend,
    /// Seed of partitioning and of anything random.
    pub seed: u64,
    /// Upper bound on supersteps (PageRank: exactly this many when no tolerance is set).
    pub max_iterations: usize,
    /// Stop when the L1 change between supersteps falls below this (PageRank).
    pub tolerance: Option<f64>,
    /// Where progress goes.
    pub observer: Option<Arc<dyn Observer>>,
    /// Threads of this process, or processes over a region file.
    pub placement: Placement,
    /// In [`Mode::BiPeriodic`], stamp every value slot with the superstep that wrote it
    /// and measure how stale the values and partials read were
    /// ([`RunStats::max_staleness`]). A diagnostic, off by default: it costs a word per
    /// value slot (twice the lines of PageRank's values) and a load per edge gathered.
    pub measure_staleness: bool,
    /// Called first on each partition's thread (or process), with the partition's index,
    /// before it touches its data: where to pin it to a node's CPUs or set its memory
    /// policy.
    ///
    /// ```
    /// use bi_graph::{wcc, EdgeList, EngineConfig};
    /// use std::sync::{Arc, Mutex};
    ///
    /// let started = Arc::new(Mutex::new(Vec::new()));
    /// let seen = started.clone();
    /// let config = EngineConfig {
    ///     nodes: 3,
    ///     on_partition_start: Some(Arc::new(move |p| seen.lock().unwrap().push(p))),
    ///     ..EngineConfig::default()
    /// };
    /// let g = EdgeList { ids: (0..4).collect(), edges: vec![(0, 1), (2, 3)], weights: None };
    /// wcc(&g, &config)?;
    /// let mut started = started.lock().unwrap().clone();
    /// started.sort();
    /// assert_eq!(started, [0, 1, 2]);
    /// # Ok::<(), bi_graph::GraphError>(())
    /// ```
    pub on_partition_start: Option<Arc<dyn Fn(usize) + Send + Sync>>,
}

impl std::fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineConfig")
            .field("nodes", &self.nodes)
            .field("partitioner", &self.partitioner)
            .field("mode", &self.mode)
            .field("backend", &self.backend)
            .field("seed", &self.seed)
            .field("max_iterations", &self.max_iterations)
            .field("tolerance", &self.tolerance)
            .field("placement", &self.placement)
            .field("measure_staleness", &self.measure_staleness)
            .finish_non_exhaustive()
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            nodes: 2,
            partitioner: Partitioner::Random,
            mode: Mode::BiOnDemand,
            backend: Backend::Hardware,
            seed: 0,
            max_iterations: 20,
            tolerance: None,
            observer: None,
            placement: Placement::Threads,
            measure_staleness: false,
            on_partition_start: None,
        }
    }
}

/// Where a run's partitions execute.
///
/// With [`Placement::Processes`], this process creates a region file, starts one process
/// per partition (with the caller's `spawn`, typically this program again with the same
/// arguments) and collects the values they leave in it. Each of those processes loads
/// the same graph and makes the same run with [`Placement::Partition`]: its partition's
/// vertex data, partials and barrier line are in the region, its edges in its own
/// memory. With the emulated backend each process is one emulated node over the file.
///
/// Or each process reads only its share of an edge list
/// ([`GraphShare`](crate::GraphShare), over a
/// [`FileGroup`](crate::engine::file_group::FileGroup) in
/// [`PartitionOf::exchange`]) and runs it with [`Placement::Partition`]; the launcher
/// ([`launch_shares`](crate::engine::launch_shares)) only starts and watches them, and
/// partition 0 creates the region and returns every value.
///
/// ```no_run
/// use bi_graph::{EngineConfig, Launch, Placement, PartitionOf};
/// use std::process::Command;
/// use std::sync::Arc;
///
/// // In the launcher: this program again, told which partition it is.
/// let launch = Launch {
///     region: "/dev/shm/run.bi".into(),
///     spawn: Arc::new(|partition| {
///         Command::new(std::env::current_exe()?)
///             .env("PARTITION", partition.to_string())
///             .spawn()
///     }),
/// };
/// let launcher = EngineConfig { placement: Placement::Processes(launch), ..EngineConfig::default() };
/// // In partition 1's process:
/// let partition = PartitionOf { region: "/dev/shm/run.bi".into(), partition: 1, exchange: None };
/// let worker = EngineConfig { placement: Placement::Partition(partition), ..EngineConfig::default() };
/// ```
#[derive(Clone, Debug, Default)]
pub enum Placement {
    /// Every partition on a thread of this process, over an anonymous region.
    #[default]
    Threads,
    /// One process per partition over a region file, launched from here; the run's
    /// values are collected here.
    Processes(Launch),
    /// This process is one partition of a run launched elsewhere: the run returns this
    /// partition's measurements and no values.
    Partition(PartitionOf),
    /// This process is one MPI rank of the world communicator, and one partition (the
    /// rank's): the stock mode with MPI as its transport. Rank 0 returns the values, the
    /// others none; every rank returns the run's measurements. The caller initialises
    /// MPI (`mpi::initialize()`) and runs one rank per partition.
    #[cfg(feature = "mpi")]
    Mpi,
    /// This process is one MPI rank and one partition of a run spanning pools of memory:
    /// ranks `k * ranks_per_pool ..` share pool `k`'s region file (Bounded Incoherence
    /// inside the pool, the on-demand mode), and values cross between pools over MPI,
    /// each master's value once per pool and superstep. Rank 0 returns the values.
    #[cfg(feature = "mpi")]
    MpiPools(MpiPools),
}

/// The pools of a two-level run over MPI ([`Placement::MpiPools`]).
#[cfg(feature = "mpi")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpiPools {
    /// Consecutive ranks that share one pool's memory.
    pub ranks_per_pool: usize,
    /// Pool `k`'s region file is this path with `.k` appended; its first rank creates it
    /// (it must not exist) and removes it after the run.
    pub region: PathBuf,
}

/// How a launcher starts the partitions' processes ([`Placement::Processes`]).
#[derive(Clone)]
pub struct Launch {
    /// The region file to create (it must not exist; the caller removes it after the
    /// run, with the emulator's `.history` file beside it).
    pub region: PathBuf,
    /// Starts the process of partition `p`, which runs with
    /// `Placement::Partition(PartitionOf { region, partition: p })`.
    pub spawn: Arc<dyn Fn(usize) -> std::io::Result<Child> + Send + Sync>,
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// Which partition of which launched run this process is ([`Placement::Partition`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionOf {
    /// The launcher's region file. For a graph read in shares, partition 0 creates it
    /// (it must not exist) and removes it after the run.
    pub region: PathBuf,
    /// This process's partition.
    pub partition: usize,
    /// For a graph read in shares ([`GraphShare`](crate::GraphShare)), the directory the
    /// partitions exchange through ([`launch_shares`](crate::engine::launch_shares)
    /// makes it, [`FileGroup`](crate::engine::file_group::FileGroup) reads and writes
    /// it); `None` when every partition's process loads the whole graph.
    pub exchange: Option<PathBuf>,
}

/// What a run measured.
///
/// ```
/// use bi_graph::{wcc, EdgeList, EngineConfig};
///
/// let g = EdgeList { ids: (0..5).collect(), edges: vec![(1, 0), (3, 2), (4, 3)], weights: None };
/// let stats = wcc(&g, &EngineConfig::default())?.stats;
/// assert!(stats.iterations >= 1);
/// assert!(stats.replication_factor >= 1.0); // each vertex is on at least one partition
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    /// Supersteps executed.
    pub iterations: usize,
    /// Wall time of the supersteps (not loading or partitioning).
    pub compute_time: Duration,
    /// `compute_time / iterations`.
    pub time_per_iteration: Duration,
    /// Average number of partitions holding a vertex (master + replicas).
    pub replication_factor: f64,
    /// Cache lines written back by all nodes.
    pub lines_written_back: u64,
    /// Cache lines invalidated by all nodes.
    pub lines_invalidated: u64,
    /// Messages sent between partitions (stock mode; 0 in the BI modes).
    pub messages_sent: u64,
    /// Largest staleness a replica observed, in supersteps (`bi-periodic` with
    /// [`EngineConfig::measure_staleness`]; 0 otherwise).
    pub max_staleness: u64,
    /// Edges read by gathers, over all partitions and supersteps: the edge count times
    /// the supersteps for PageRank; for WCC and SSSP, which gather only where a
    /// neighbour changed, about the edges of the frontiers.
    pub edges_gathered: u64,
    /// Where a superstep's time goes, per superstep and averaged over the partitions.
    pub phases: Phases,
}

/// Where a superstep's time goes: the phases of the loop a partition runs, per superstep,
/// averaged over the partitions (see [`RunStats::phases`]). The first four add up to the
/// superstep; the last three are the parts of the two exchanges spent on quiescence and
/// waiting, so they are inside `partials` and `values`.
///
/// ```
/// use bi_graph::{pagerank, EdgeList, EngineConfig, Mode};
///
/// let g = EdgeList { ids: (0..4).collect(), edges: vec![(0, 1), (1, 2), (2, 3), (3, 0)], weights: None };
/// let config = EngineConfig { nodes: 2, mode: Mode::BiOnDemand, ..EngineConfig::default() };
/// let p = pagerank(&g, &config)?.stats.phases;
/// assert!(p.gather_apply > std::time::Duration::ZERO);
/// assert!(p.write_back + p.wait + p.invalidate <= p.partials + p.values);
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Phases {
    /// Signalling: visiting the scatter edges of the vertices that changed.
    pub scatter: Duration,
    /// Folding every local vertex's gather edges, and applying the masters no replica
    /// feeds.
    pub gather_apply: Duration,
    /// Handing the replicas' partial sums to their masters and applying those masters
    /// (vertex cuts whose replicas feed).
    pub partials: Duration,
    /// Handing the new values and the aggregates to every partition.
    pub values: Duration,
    /// Of the two exchanges: writing back the lines this partition wrote.
    pub write_back: Duration,
    /// Of the two exchanges: waiting for the other partitions at the barrier.
    pub wait: Duration,
    /// Of the two exchanges: dropping the lines of others it will read, and the fences.
    pub invalidate: Duration,
}

impl Phases {
    /// The seven phases as nanoseconds, in field order (what a partition reports).
    pub(crate) fn to_nanos(self) -> [u64; 7] {
        [
            self.scatter,
            self.gather_apply,
            self.partials,
            self.values,
            self.write_back,
            self.wait,
            self.invalidate,
        ]
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// The inverse of [`to_nanos`](Self::to_nanos).
    pub(crate) fn from_nanos(w: [u64; 7]) -> Phases {
        let d = w.map(Duration::from_nanos);
        Phases {
            scatter: d[0],
            gather_apply: d[1],
            partials: d[2],
            values: d[3],
            write_back: d[4],
            wait: d[5],
            invalidate: d[6],
        }
    }

    /// Each phase divided by `n` (from a total over `n` supersteps or partitions).
    pub(crate) fn per(self, n: u32) -> Phases {
        Phases::from_nanos(self.to_nanos().map(|x| x / u64::from(n.max(1))))
    }
}

impl std::ops::AddAssign for Phases {
    fn add_assign(&mut self, other: Phases) {
        let (a, b) = (self.to_nanos(), other.to_nanos());
        *self = Phases::from_nanos(std::array::from_fn(|k| a[k].saturating_add(b[k])));
    }
}
