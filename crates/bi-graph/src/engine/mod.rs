//! The synchronous GAS engine: partitions as nodes sharing one memory without coherence.
//!
//! # The model
//!
//! A [`VertexProgram`] is written in PowerGraph's gather-apply-scatter shape. The engine
//! runs it in bulk-synchronous supersteps: every vertex gathers over its edges, its master
//! applies, changed vertices scatter signals; phases are separated by barriers. The graph
//! is cut by vertex ([`VertexCut`]): each partition owns a share of the edges, and a vertex
//! whose edges span several partitions has a master on one of them and a replica on each
//! of the others. Each partition runs on its own thread, standing for one node (a socket,
//! a host on a CXL pool), over one shared [`Region`], through the machine's memory
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
//!   [`RunOptions::quiescence_period`], writes back the node's own slots and invalidates
//!   the remote ones; barriers do no cache work. A replica may therefore read a master's
//!   value (or a master a replica's partial) from an earlier superstep: *bounded
//!   staleness*. Every value slot carries the superstep that wrote it, so the engine
//!   measures what it read (`max_staleness`, in supersteps). Iterative fixed-point
//!   algorithms such as PageRank converge regardless; to make sure a run does not stop
//!   on stale evidence, the superstep that would end it is repeated with quiescence in
//!   the barrier (and, for signalling programs, with every vertex applied), and the run
//!   stops only if that fresh superstep agrees. Aggregates (one line per partition) are
//!   always exchanged fresh.
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
//! pass over the local vertices' flags and the exchange of every replica's partial and
//! every master's value.
//!
//! [`VertexCut`]: crate::VertexCut
//! [`Region`]: bi_core::region::Region
//! [`Backend::Hardware`]: crate::Backend::Hardware
//! [`Backend::Emulated`]: crate::Backend::Emulated
//! [`Mode::Stock`]: crate::Mode::Stock
//! [`Mode::BiOnDemand`]: crate::Mode::BiOnDemand
//! [`Mode::BiPeriodic`]: crate::Mode::BiPeriodic

mod barrier;
mod exchange;
mod memory;
mod plan;
mod program;
mod shared;
mod worker;

pub use program::{EdgeDirection, VertexInfo, VertexProgram};

use crate::config::{Backend, EngineConfig, Mode, RunStats};
use crate::edge_list::EdgeList;
use crate::error::GraphError;
use crate::partition::VertexCut;
use barrier::{Barrier, PhaseBarrier};
use bi_core::line::LineSize;
use bi_core::mem::{Emulator, EmulatorConfig, MemView, NodeStats};
use bi_core::region::{Layout, Region, RegionConfig};
use bi_core::runtime::{Background, Clock, Faults, NodeRuntime, Policy, RuntimeConfig, TickClock};
#[cfg(not(loom))]
use exchange::slots::Direct;
use exchange::slots::Viewed;
use exchange::{Exchange, Messages, SharedSlots};
use memory::{Counted, LineCounters, MAX_VALUE_BYTES, words_of};
use plan::Needs;
use shared::SharedLayout;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use worker::{Ctx, Outcome, SyncPlan, Worker};

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
    /// Period of the background quiescence pass in [`Mode::BiPeriodic`].
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
    /// otherwise prevents.
    ///
    /// [`Fault::GraphBarrier`]: bi_core::runtime::Fault::GraphBarrier
    pub faults: Faults,
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

fn check_sizes<P: VertexProgram>() -> Result<(), GraphError> {
    let sizes = [
        size_of::<P::Data>(),
        size_of::<P::Gather>(),
        size_of::<P::Aggregate>(),
    ];
    if sizes.iter().any(|&s| s == 0 || s > MAX_VALUE_BYTES) {
        return Err(GraphError::InvalidArgument {
            reason: format!(
                "vertex data, gather and aggregate types must be 1 to {MAX_VALUE_BYTES} bytes"
            ),
        });
    }
    Ok(())
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
    check_sizes::<P>()?;
    if !options.channel_capacity.is_power_of_two() {
        return Err(GraphError::InvalidArgument {
            reason: "channel capacity must be a power of two".into(),
        });
    }
    let parts = config.nodes;
    let cut = VertexCut::new(graph, parts, config.partitioner, config.seed)?;
    let (gdir, sdir) = (program.gather_direction(), program.scatter_direction());
    let scatters = !program.always_active();
    // Signalling programs also walk their gather edges backwards, from a changed vertex
    // to the neighbours whose partial it puts out of date.
    let needs = Needs {
        incoming: gdir.incoming() || (scatters && (sdir.incoming() || gdir.outgoing())),
        outgoing: gdir.outgoing() || (scatters && (sdir.outgoing() || gdir.incoming())),
    };
    let plans = plan::build(graph, &cut, needs);
    let n = graph.num_vertices();
    let mut in_degree = vec![0u32; n];
    let mut out_degree = vec![0u32; n];
    for &(u, v) in &graph.edges {
        out_degree[u as usize] = out_degree[u as usize].saturating_add(1);
        in_degree[v as usize] = in_degree[v as usize].saturating_add(1);
    }

    // The region: runtime tables (unused here, but a valid region) then our arrays.
    let line = LineSize::X86;
    let base_cfg = RegionConfig::new(0)
        .with_nodes(parts as u32)
        .with_readers_per_node(1)
        .with_log_ring_entries(2)
        .with_root_entries(1);
    let min = base_cfg.min_size()?;
    let mut heap = Layout::compute(&base_cfg.with_size(min))?.heap().offset;
    let stock = config.mode == Mode::Stock;
    let metas = shared::Metas {
        values: scatters || config.mode == Mode::BiPeriodic,
        partials: scatters || config.mode == Mode::BiPeriodic,
    };
    // Channels for many partitions: keep their total near 64 MiB.
    let pairs = parts * parts.saturating_sub(1);
    let budget = (64usize << 20) / (size_of::<shared::Msg>() * pairs.max(1));
    let capacity = options
        .channel_capacity
        .min(1 << budget.max(16).ilog2())
        .max(16.min(options.channel_capacity));
    // The heap starts after the extent table, which grows with the region: lay the
    // arrays out again until the heap stays where they were laid out from (it only moves
    // up, and by less each time).
    let mut tries = 0;
    let (layout, size) = loop {
        let layout =
            SharedLayout::new::<P::Data, P::Gather>(heap, line, &plans, metas, stock, capacity)?;
        let size = layout.end.max(min).next_multiple_of(line.get());
        let at = Layout::compute(&base_cfg.with_size(size))?.heap().offset;
        if at == heap {
            break (layout, size);
        }
        tries += 1;
        if tries == 8 {
            return Err(GraphError::Layout {
                reason: "the region's heap offset does not settle".into(),
            });
        }
        heap = at;
    };
    let region = Region::anonymous(base_cfg.with_size(size))?;
    let sync = sync_plans(&layout, &plans);

    let counters = Arc::new(LineCounters::default());
    let emulator = match config.backend {
        Backend::Hardware => None,
        Backend::Emulated { seed } => Some(
            Emulator::over(
                region.backing().clone(),
                EmulatorConfig::new(size, parts)
                    .seed(seed)
                    .line_size(line)
                    .cache_lines(options.cache_lines)
                    .eviction_rate(options.eviction_rate)
                    .adjacent_prefetch_rate(options.prefetch_rate)
                    .random_prefetch_rate(options.prefetch_rate),
            )
            .map_err(GraphError::Emulator)?,
        ),
    };
    if stock {
        for (i, c) in layout.channels.iter().enumerate() {
            if let Some(c) = c {
                let producer = i / parts;
                match &emulator {
                    Some(emu) => c.init(&emu.node(producer))?,
                    None => c.init(&region.hardware())?,
                }
            }
        }
    }
    let barrier = PhaseBarrier::new(parts);
    let ctx = Ctx {
        program,
        plans: &plans,
        in_degree: &in_degree,
        out_degree: &out_degree,
        stale_reads: config.mode == Mode::BiPeriodic,
        max_iterations: config.max_iterations,
        observer: config.observer.as_deref(),
    };
    let words = [
        words_of::<P::Data>(),
        words_of::<P::Gather>(),
        words_of::<P::Aggregate>(),
    ];
    // One exchange per partition, over that partition's view of the region (counted).
    macro_rules! messages {
        ($view:expr) => {
            |p: usize| {
                Messages::new(
                    p,
                    &plans,
                    &layout,
                    &Counted::new($view(p), counters.clone()),
                    &barrier,
                    words[0],
                )
            }
        };
    }
    macro_rules! slots {
        ($view:expr, $loads:expr) => {
            |p: usize| {
                Ok(SharedSlots::new(
                    p,
                    &plans,
                    &layout,
                    &sync,
                    &barrier,
                    options.faults,
                    Counted::new($view(p), counters.clone()),
                    $loads,
                    words,
                ))
            }
        };
    }
    let hardware = |_| region.hardware();
    // The periodic mode's quiescence: each node's runtime passes, which write back the
    // node's own slots and drop the remote lines it reads.
    let passes = if config.mode == Mode::BiPeriodic && parts > 1 {
        let period = options.quiescence_period;
        Some(match &emulator {
            Some(emu) => Passes::start(&region, &sync, period, |p| {
                Counted::new(emu.node(p), counters.clone())
            })?,
            None => Passes::start(&region, &sync, period, |_| {
                Counted::new(region.hardware(), counters.clone())
            })?,
        })
    } else {
        None
    };
    if let Some(o) = &config.observer {
        o.start("supersteps", config.max_iterations as u64);
    }
    let outcomes = match (&emulator, stock) {
        (Some(emu), true) => run_all(&ctx, &barrier, messages!(|p| emu.node(p))),
        (None, true) => run_all(&ctx, &barrier, messages!(hardware)),
        (Some(emu), false) => run_all(&ctx, &barrier, slots!(|p| emu.node(p), Viewed)),
        // Under loom the backing's words are the model checker's atomics: the engine
        // then reads through the view only.
        #[cfg(loom)]
        (None, false) => run_all(&ctx, &barrier, slots!(hardware, Viewed)),
        #[cfg(not(loom))]
        (None, false) => {
            let words = region.backing().words();
            run_all(&ctx, &barrier, slots!(hardware, Direct(words)))
        }
    };
    if let Some(o) = &config.observer {
        o.finish();
    }
    let failed_passes = passes.map_or(0, Passes::stop);
    let outcomes = outcomes?;
    if failed_passes > 0 {
        return Err(GraphError::QuiescenceFailed {
            passes: failed_passes,
        });
    }

    let mut values = vec![bytemuck::Zeroable::zeroed(); n];
    let mut stats = RunStats {
        replication_factor: cut.replication_factor(),
        lines_written_back: counters.written_back.load(Ordering::Relaxed),
        lines_invalidated: counters.invalidated.load(Ordering::Relaxed),
        ..RunStats::default()
    };
    for o in outcomes {
        for (v, d) in o.masters {
            values[v as usize] = d;
        }
        stats.iterations = stats.iterations.max(o.iterations);
        stats.compute_time = stats.compute_time.max(o.compute_time);
        stats.messages_sent += o.messages;
        stats.max_staleness = stats.max_staleness.max(o.max_staleness);
        stats.edges_gathered += o.edges_gathered;
    }
    if stats.iterations > 0 {
        stats.time_per_iteration = stats.compute_time / stats.iterations as u32;
    }
    Ok(DetailedRun {
        run: Run { values, stats },
        emulator: emulator.map(|e| e.total_stats()),
    })
}

/// Which lines each partition publishes and which it must drop to see the others.
fn sync_plans(layout: &SharedLayout, plans: &[plan::PartPlan]) -> Vec<SyncPlan> {
    let ext = |e: shared::Extent| (e.offset, e.len);
    plans
        .iter()
        .enumerate()
        .map(|(p, plan)| {
            let remote_values = (0..plan.locals())
                .filter(|&l| usize::from(plan.master_of[l]) != p)
                .map(|l| {
                    let m = usize::from(plan.master_of[l]);
                    layout.value_word(m, plan.master_index[l] as usize) * 8
                })
                .collect();
            let remote_partials = (0..plans.len())
                .filter(|&q| q != p)
                .map(|q| layout.segment_range(q, p, plans[q].replicas_of(p)))
                .filter(|&(_, len)| len > 0)
                .collect();
            // Only the masters with replicas are read elsewhere: a prefix of the array.
            let read = plan.mirrored * layout.value_stride * 8;
            let values = layout.values[p];
            SyncPlan {
                own_values: (
                    values.offset,
                    read.next_multiple_of(layout.line).min(values.len),
                ),
                own_partials: ext(layout.partials[p]),
                own_aggregate: ext(layout.aggregates[p]),
                remote_values: layout.runs(remote_values),
                remote_partials,
                remote_aggregates: (0..plans.len())
                    .filter(|&q| q != p)
                    .map(|q| ext(layout.aggregates[q]))
                    .collect(),
            }
        })
        .collect()
}

/// Runs every partition on its own thread, over the exchange `exchange_of` makes.
fn run_all<'a, P, X, F>(
    ctx: &'a Ctx<'a, P>,
    barrier: &'a dyn Barrier,
    exchange_of: F,
) -> Result<Vec<Outcome<P::Data>>, GraphError>
where
    P: VertexProgram,
    X: Exchange + Send,
    F: Fn(usize) -> Result<X, GraphError> + Sync,
{
    let parts = ctx.plans.len();
    // The partition that failed first; the others fail only because it broke the barrier.
    let first_failure: Mutex<Option<usize>> = Mutex::new(None);
    let exchange_of = &exchange_of;
    let outcomes = std::thread::scope(|s| {
        let workers: Vec<_> = (0..parts)
            .map(|p| {
                let first_failure = &first_failure;
                s.spawn(move || {
                    let r = exchange_of(p).and_then(|x| Worker::new(ctx, p, x).run());
                    if r.is_err() {
                        let mut slot = first_failure.lock().unwrap_or_else(|e| e.into_inner());
                        if slot.is_none() && !barrier.is_aborted() {
                            *slot = Some(p);
                        }
                        drop(slot);
                        barrier.abort();
                    }
                    r
                })
            })
            .collect();
        workers
            .into_iter()
            .enumerate()
            .map(|(p, h)| {
                h.join()
                    .unwrap_or(Err(GraphError::PartitionPanicked { partition: p }))
            })
            .collect::<Vec<_>>()
    });
    let first = first_failure
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    let mut outcomes = outcomes;
    if let Some(p) = first
        && p < outcomes.len()
    {
        // Report the failure itself rather than its consequences elsewhere.
        outcomes.swap(0, p);
    }
    outcomes.into_iter().collect()
}

/// The periodic mode's background quiescence: one runtime per node over the run's
/// region, whose pass (every period) writes back the node's own value and partial slots
/// and invalidates the remote ones its partition reads.
struct Passes {
    nodes: Vec<Background>,
}

impl Passes {
    fn start<V: MemView + 'static>(
        region: &Region,
        sync: &[SyncPlan],
        period: Duration,
        view_of: impl Fn(usize) -> V,
    ) -> Result<Self, GraphError> {
        let clock: Arc<dyn Clock> = Arc::new(TickClock::new());
        let mut nodes = Vec::with_capacity(sync.len());
        for (p, plan) in sync.iter().enumerate() {
            let runtime = NodeRuntime::new(
                view_of(p),
                *region.layout(),
                p,
                RuntimeConfig::default(),
                clock.clone(),
            )?;
            let plan = plan.clone();
            runtime.set_policy(Policy::Callback(Arc::new(move |view: &V| {
                view.writeback(plan.own_values.0, plan.own_values.1)?;
                view.writeback(plan.own_partials.0, plan.own_partials.1)?;
                view.fence();
                for &(o, l) in plan.remote_values.iter().chain(&plan.remote_partials) {
                    view.invalidate(o, l)?;
                }
                Ok(())
            })));
            // The background thread keeps the node's runtime alive.
            nodes.push(runtime.start_background(period));
        }
        Ok(Passes { nodes })
    }

    /// Stops every node's passes; returns how many failed.
    fn stop(self) -> u64 {
        self.nodes.into_iter().map(Background::stop).sum()
    }
}
