//! The synchronous GAS engine: partitions as nodes sharing one memory without coherence.
//!
//! # The model
//!
//! A [`VertexProgram`] is written in PowerGraph's gather-apply-scatter shape. The engine
//! runs it in bulk-synchronous supersteps: every vertex gathers over its edges, its master
//! applies, changed vertices scatter signals; supersteps are separated by barriers. The graph
//! is cut by vertex ([`VertexCut`]): each partition owns a share of the edges, and a vertex
//! whose edges span several partitions has a master on one of them and a replica on each
//! of the others. Each partition stands for one node (a socket, a host on a CXL pool) and
//! runs on a thread of its own over one shared [`Region`], or in a process of its own
//! over a region file ([`Placement`]), through the machine's memory
//! ([`Backend::Hardware`]) or emulated non-coherent caches ([`Backend::Emulated`]).
//!
//! # Why references instead of messages
//!
//! Replicas need their master's value (to gather over their local edges) and masters
//! need their replicas' partial sums. PowerGraph moves both as messages. On memory that
//! every node can load from, that is wasted work: a message is a copy written to a ring,
//! written back, fenced, polled, invalidated and copied again, in short bursts that
//! cannot pipeline cache operations. So in the BI modes a replica holds a *reference* to
//! its master's value slot (a word offset in the region) and reads it in place, and a
//! replica's partial is stored in its own partition's lines, where the master reads it.
//! Every line still has exactly one writer (each partition's arrays are line-padded),
//! so nothing is ever written remotely; the only question is when a reader's cached
//! copy of someone else's line is refreshed. That is what the modes decide.
//!
//! # The three modes
//!
//! - [`Mode::Stock`]: the message-passing baseline. Replicas keep private copies;
//!   replicas send partials to masters and masters send new values to every replica over
//!   SPSC channels in shared memory, one per ordered pair of partitions
//!   (`messages_sent` counts them).
//! - [`Mode::BiOnDemand`]: quiescence in the barrier. Before each barrier a writer writes
//!   back the lines it wrote and fences once; after it, a reader invalidates exactly the
//!   remote lines it is about to read (precomputed, coalesced runs) and fences once. No
//!   reader ever sees data from an earlier superstep: results equal the stock mode's bit
//!   for bit, because both fold partials in the same (increasing partition) order.
//! - [`Mode::BiPeriodic`]: quiescence in the background. A per-node pass, every
//!   [`RunOptions::quiescence_period`], writes back the lines its partition stored into
//!   since the last pass and logs them, and drops the remote lines it reads that the
//!   others logged since its own last pass (`tracked.rs`: a pass costs what was written,
//!   not both banks); barriers do no cache work. A replica may therefore read a master's
//!   value (or a master a replica's partial) from an earlier superstep: *bounded
//!   staleness*. With [`EngineConfig::measure_staleness`](crate::EngineConfig::measure_staleness)
//!   every value slot carries the superstep that wrote it, so the engine measures what it
//!   read (`max_staleness`, in supersteps). Iterative fixed-point
//!   algorithms such as PageRank converge regardless; to make sure a run does not stop
//!   on stale evidence, the superstep that would end it is repeated with quiescence in
//!   the barrier (and, for signalling programs, with every vertex applied), and the run
//!   stops only if that fresh superstep agrees. Aggregates are always exchanged fresh.
//!
//! # Two banks of values
//!
//! Every value slot exists twice: superstep `t` reads the values of bank `t % 2` and
//! writes its new values into the other bank, and the banks swap at the superstep's
//! barrier (so do the aggregate lines). A master whose replicas feed it nothing (every
//! master on a cut that keeps a vertex's gather edges beside it, [`Partitioner::ByTarget`])
//! therefore applies as soon as its own gather is done, in the same pass, and a superstep
//! has one barrier; with one bank it would overwrite a value that later gathers of the
//! same superstep still read ([`Fault::ValueBanks`] is that negative control). Masters
//! that replicas feed still wait for the partials' exchange, a second barrier.
//!
//! In the code, each partition's loop (`worker.rs`) is the GAS loop and nothing else;
//! how values cross partitions is one trait with an implementation for messages and one
//! for shared slots (`exchange/`), and the periodic mode's quiescence is the bi-core
//! runtime's background pass with the partition's written-line log as its invalidation
//! policy (`quiescence.rs`, `tracked.rs`).
//!
//! # Costs
//!
//! Per partition: a CSR of its local edges in each direction the program needs, with
//! gather columns rewritten to the word index of the neighbour's value slot, so the
//! inner loop is one indexed load per edge with no hashing and no allocation; a few
//! `u32`s per local vertex. Cache operations are issued per range and fenced once per
//! batch.
//!
//! Programs that are [`always_active`](VertexProgram::always_active) (PageRank) gather
//! over every edge every superstep. Signalling programs (WCC, SSSP) do work proportional
//! to the frontier: a partition gathers again only the local vertices with a neighbour
//! that changed in the previous superstep (found by walking the changed vertices' edges,
//! as scatter does); every other partial is still exact, being a function of unchanged
//! values, and is put again as it was. Signals decide which masters apply and when a run
//! has reached its fixed point. In the periodic mode reads may be stale, so a change can
//! go unseen: there every vertex gathers every superstep. What stays per superstep is a
//! pass over the local vertices' flags and the exchange of every feeding replica's
//! partial and every master's value.
//!
//! [`VertexCut`]: crate::VertexCut
//! [`Partitioner::ByTarget`]: crate::Partitioner::ByTarget
//! [`Fault::ValueBanks`]: bi_core::runtime::Fault::ValueBanks
//! [`Region`]: bi_core::region::Region
//! [`Placement`]: crate::Placement
//! [`Backend::Hardware`]: crate::Backend::Hardware
//! [`Backend::Emulated`]: crate::Backend::Emulated
//! [`Mode::Stock`]: crate::Mode::Stock
//! [`Mode::BiOnDemand`]: crate::Mode::BiOnDemand
//! [`Mode::BiPeriodic`]: crate::Mode::BiPeriodic

mod barrier;
mod exchange;
pub mod file_group;
mod memory;
#[cfg(feature = "mpi")]
mod mpi;
mod plan;
mod pools;
mod prepare;
mod processes;
mod program;
mod quiescence;
mod report;
mod results;
pub mod share;
mod shared;
mod threads;
mod tracked;
mod worker;

pub use barrier::{Aborted, RegionBarrier};
#[cfg(feature = "mpi")]
pub use mpi::run_share;
pub use processes::{exchange_dir, launch_shares, remove_region};
pub use program::{EdgeDirection, VertexInfo, VertexProgram};

use crate::config::{EngineConfig, PartitionOf, Placement, RunStats};
use crate::edge_list::EdgeList;
use crate::error::GraphError;
use bi_core::mem::NodeStats;
use bi_core::runtime::Faults;
use prepare::Prepared;
use std::time::Duration;

/// Results of a run: one value per vertex (by dense index) and what was measured.
///
/// ```
/// use bi_graph::{run, EdgeList, EngineConfig, Wcc};
///
/// let g = EdgeList { ids: (0..5).collect(), edges: vec![(1, 0), (3, 2), (4, 3)], weights: None };
/// let config = EngineConfig { max_iterations: 10, ..EngineConfig::default() };
/// let result = run(&Wcc, &g, &config)?;
/// assert_eq!(result.values.len(), g.num_vertices()); // one value per dense index
/// assert_eq!(result.values[4], 2);
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Run<T> {
    /// Final value of each vertex, indexed by dense vertex index.
    pub values: Vec<T>,
    /// Measurements.
    pub stats: RunStats,
}

/// A run with the emulator's oracle counters (when the backend is emulated).
///
/// ```
/// use bi_graph::{run_detailed, Backend, EdgeList, EngineConfig, RunOptions, Wcc};
///
/// let g = EdgeList { ids: (0..5).collect(), edges: vec![(1, 0), (3, 2), (4, 3)], weights: None };
/// let hw = EngineConfig { max_iterations: 10, ..EngineConfig::default() };
/// assert!(run_detailed(&Wcc, &g, &hw, &RunOptions::default())?.emulator.is_none());
/// let emu = EngineConfig { backend: Backend::Emulated { seed: 1 }, ..hw };
/// let d = run_detailed(&Wcc, &g, &emu, &RunOptions::default())?;
/// assert_eq!(d.run.values, [0, 0, 2, 2, 2]);
/// assert_eq!(d.emulator.unwrap().lost_writes, 0);
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct DetailedRun<T> {
    /// The run.
    pub run: Run<T>,
    /// Totals over all emulated nodes: stale reads, reuse hazards, lost writes, ...
    pub emulator: Option<NodeStats>,
}

/// Engine knobs beyond [`EngineConfig`].
///
/// ```
/// use bi_graph::{run_detailed, EdgeList, EngineConfig, RunOptions, Wcc};
///
/// let g = EdgeList { ids: (0..5).collect(), edges: vec![(1, 0), (3, 2), (4, 3)], weights: None };
/// let config = EngineConfig { max_iterations: 10, ..EngineConfig::default() };
/// let bad = RunOptions { channel_capacity: 1000, ..RunOptions::default() };
/// assert!(run_detailed(&Wcc, &g, &config, &bad).is_err()); // not a power of two
/// let small = RunOptions { channel_capacity: 64, ..RunOptions::default() };
/// assert_eq!(run_detailed(&Wcc, &g, &config, &small)?.run.values, [0, 0, 2, 2, 2]);
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RunOptions {
    /// Period of the background quiescence pass in [`Mode::BiPeriodic`](crate::Mode::BiPeriodic).
    pub quiescence_period: Duration,
    /// Entries per stock-mode channel (a power of two).
    pub channel_capacity: usize,
    /// Emulator: probability of a random eviction at each access.
    pub eviction_rate: f64,
    /// Emulator: probability of an adjacent and of a random prefetch at each access.
    pub prefetch_rate: f64,
    /// Emulator: lines per node cache.
    pub cache_lines: usize,
    /// Mechanisms switched off, to show they are needed (none unless bi-core's `faults`
    /// feature is on and a test asks): with [`Fault::GraphBarrier`], readers skip the
    /// invalidations that quiescence performs in the barrier (writers still write back),
    /// and under the emulator the oracle counts the stale reads that the on-demand mode
    /// otherwise prevents; with [`Fault::FrontierMarks`], WCC and SSSP do not re-gather
    /// the vertices whose neighbours changed.
    ///
    /// [`Fault::GraphBarrier`]: bi_core::runtime::Fault::GraphBarrier
    /// [`Fault::FrontierMarks`]: bi_core::runtime::Fault::FrontierMarks
    pub faults: Faults,
    /// With partitions as threads, the shared region in this file or device (created
    /// afresh, replacing what it held: a DAX or CXL device, or a file on a NUMA node's
    /// memory) instead of anonymous memory.
    pub region_file: Option<std::path::PathBuf>,
}

impl Default for RunOptions {
    /// 5 ms quiescence period, 4096-entry channels, and a mildly adversarial emulator
    /// (1% evictions and prefetches, 512-line caches).
    ///
    /// The paper's evaluation used 1 ms, for supersteps lasting seconds. A pass writes
    /// back and invalidates every shared line of its node, so with supersteps of tens of
    /// milliseconds (a scale-18 graph here) 1 ms passes cost more than the supersteps;
    /// 5 ms keeps the pass a small fraction of a superstep and the staleness to about one
    /// superstep.
    fn default() -> Self {
        RunOptions {
            quiescence_period: Duration::from_millis(5),
            channel_capacity: 4096,
            eviction_rate: 0.01,
            prefetch_rate: 0.01,
            cache_lines: 512,
            faults: Faults::default(),
            region_file: None,
        }
    }
}

/// A graph the programs ([`pagerank`](crate::pagerank), [`wcc`](crate::wcc),
/// [`sssp`](crate::sssp)) run on: a whole [`EdgeList`], or this partition's
/// [`GraphShare`](share::GraphShare) of one read in shares (each MPI rank its own).
pub trait Graph {
    /// Vertices of the whole graph.
    fn num_vertices(&self) -> usize;
    /// Every vertex's out-degree in the whole graph.
    fn out_degrees(&self) -> std::borrow::Cow<'_, [u32]>;
    /// The weights of the edges this process holds, when the graph has weights.
    fn weights(&self) -> Option<&[f64]>;
    /// Runs `program` on the graph (as [`run`]); a share's run returns the values on
    /// partition 0 only.
    ///
    /// # Errors
    ///
    /// As [`run`]; a share runs only with one process per partition: MPI ranks
    /// (`Placement::Mpi` or `Placement::MpiPools`, the `mpi` feature) or processes
    /// exchanging through a directory (`Placement::Partition` with
    /// [`PartitionOf::exchange`]).
    fn run_program<P: VertexProgram>(
        &self,
        program: &P,
        config: &EngineConfig,
    ) -> Result<Run<P::Data>, GraphError>;
}

impl Graph for EdgeList {
    fn num_vertices(&self) -> usize {
        EdgeList::num_vertices(self)
    }
    fn out_degrees(&self) -> std::borrow::Cow<'_, [u32]> {
        let mut d = vec![0u32; EdgeList::num_vertices(self)];
        for &(u, _) in &self.edges {
            if let Some(x) = d.get_mut(u as usize) {
                *x = x.saturating_add(1);
            }
        }
        d.into()
    }
    fn weights(&self) -> Option<&[f64]> {
        self.weights.as_deref()
    }
    fn run_program<P: VertexProgram>(
        &self,
        program: &P,
        config: &EngineConfig,
    ) -> Result<Run<P::Data>, GraphError> {
        run(program, self, config)
    }
}

impl Graph for share::GraphShare {
    fn num_vertices(&self) -> usize {
        share::GraphShare::num_vertices(self)
    }
    fn out_degrees(&self) -> std::borrow::Cow<'_, [u32]> {
        share::GraphShare::out_degrees(self).into()
    }
    fn weights(&self) -> Option<&[f64]> {
        share::GraphShare::weights(self)
    }
    fn run_program<P: VertexProgram>(
        &self,
        program: &P,
        config: &EngineConfig,
    ) -> Result<Run<P::Data>, GraphError> {
        match &config.placement {
            #[cfg(feature = "mpi")]
            Placement::Mpi => Ok(mpi::run_share(program, self, config)?.run),
            #[cfg(feature = "mpi")]
            Placement::MpiPools(pools) => {
                Ok(mpi::run_pools_share(program, self, config, pools)?.run)
            }
            Placement::Partition(
                of @ PartitionOf {
                    exchange: Some(exchange),
                    ..
                },
            ) => {
                let options = RunOptions::default();
                Ok(processes::serve_share(program, self, config, &options, of, exchange)?.run)
            }
            _ => Err(GraphError::InvalidArgument {
                reason: "a graph read in shares runs with one process per partition: \
                         MPI ranks (Placement::Mpi, feature `mpi`) or launched processes \
                         (Placement::Partition with an exchange directory)"
                    .into(),
            }),
        }
    }
}

/// Runs `program` on `graph` with default [`RunOptions`].
///
/// See [`VertexProgram`] for an example.
///
/// ```
/// use bi_graph::{run, EdgeList, EngineConfig, Wcc};
///
/// let g = EdgeList { ids: (0..5).collect(), edges: vec![(1, 0), (3, 2), (4, 3)], weights: None };
/// let config = EngineConfig { max_iterations: 10, ..EngineConfig::default() };
/// assert_eq!(run(&Wcc, &g, &config)?.values, [0, 0, 2, 2, 2]);
/// let none = EngineConfig { nodes: 0, ..config };
/// assert!(run(&Wcc, &g, &none).is_err());
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
pub fn run<P: VertexProgram>(
    program: &P,
    graph: &EdgeList,
    config: &EngineConfig,
) -> Result<Run<P::Data>, GraphError> {
    Ok(run_detailed(program, graph, config, &RunOptions::default())?.run)
}

/// Runs `program` on `graph`, with explicit options, and reports the emulator's counters.
///
/// ```
/// use bi_graph::{run_detailed, Backend, EdgeList, EngineConfig, Mode, RunOptions, Wcc};
///
/// let g = EdgeList { ids: (0..5).collect(), edges: vec![(1, 0), (3, 2), (4, 3)], weights: None };
/// let config = EngineConfig {
///     backend: Backend::Emulated { seed: 5 },
///     mode: Mode::BiOnDemand,
///     max_iterations: 10,
///     ..EngineConfig::default()
/// };
/// let d = run_detailed(&Wcc, &g, &config, &RunOptions::default())?;
/// assert_eq!(d.run.values, [0, 0, 2, 2, 2]);
/// assert_eq!(d.emulator.unwrap().reuse_hazards, 0);
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
pub fn run_detailed<P: VertexProgram>(
    program: &P,
    graph: &EdgeList,
    config: &EngineConfig,
    options: &RunOptions,
) -> Result<DetailedRun<P::Data>, GraphError> {
    let prepared = Prepared::new(program, graph, config, options)?;
    match &config.placement {
        Placement::Threads => threads::run(&prepared, program, config, options),
        Placement::Processes(launch) => processes::launch::<P>(&prepared, launch),
        Placement::Partition(of) => processes::serve(&prepared, program, config, options, of),
        #[cfg(feature = "mpi")]
        Placement::Mpi => mpi::run(&prepared, program, config),
        #[cfg(feature = "mpi")]
        Placement::MpiPools(pools) => mpi::run_pools(&prepared, program, config, pools),
    }
}
