//! What a run computes before it touches shared memory: the cut, each partition's plan,
//! the shared layout, and the lines each partition publishes and drops. It depends only
//! on the program, the graph and the configuration, so every process of a run computes
//! the same.

use super::RunOptions;
use super::barrier::Barrier;
use super::exchange::slots::Access;
use super::exchange::{Channels, Expected, Messages, SharedSlots};
use super::memory::LineTotals;
use super::memory::{MAX_VALUE_BYTES, words_of};
use super::plan::{self, Needs, PartPlan, PartShape};
use super::pools::Pools;
use super::program::VertexProgram;
use super::results::{Whole, collect};
use super::share::{Collective, GraphShare};
use super::shared::{self, SharedLayout};
use super::tracked::{self, Marks};
use super::worker::{Ctx, PartitionResult, SyncPlan, Worker};
use crate::config::{EngineConfig, Mode, RunStats};
use crate::edge_list::EdgeList;
use crate::error::GraphError;
use crate::partition::VertexCut;
use bi_core::line::LineSize;
use bi_core::mem::{EmulatorConfig, MemView};
use bi_core::region::{Layout, RegionConfig};
use bi_core::runtime::Faults;
use std::sync::Arc;

/// Everything about a run that every partition agrees on before it starts, and the
/// plans of the partitions this process runs: every partition's when it holds the whole
/// graph, its own alone when it read a share ([`Prepared::of_share`]).
pub(crate) struct Prepared {
    /// The average number of partitions a vertex lives on.
    pub replication_factor: f64,
    /// The plans held here: those of partitions `own..own + plans.len()`.
    plans: Vec<PartPlan>,
    own: usize,
    /// Every partition's shape.
    pub shapes: Vec<PartShape>,
    pub in_degree: Vec<u32>,
    pub out_degree: Vec<u32>,
    pub layout: SharedLayout,
    /// The lines each partition held here publishes and drops (as `plans`).
    sync: Vec<SyncPlan>,
    /// The region the arrays are laid out in (its size included).
    pub region: RegionConfig,
    /// Partitions grouped in pools of memory with MPI between them (two-level mode).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))] // the two-level mode (feature `mpi`)
    pub pools: Option<Pools>,
    pub mode: Mode,
    /// Words of the program's data, gather and aggregate values.
    pub words: [usize; 3],
    /// Mechanisms switched off ([`RunOptions::faults`]).
    pub faults: Faults,
    /// The marks of the lines each partition held here stores into (periodic mode;
    /// else none; as `plans`).
    marks: Vec<Arc<Marks>>,
}

pub(crate) fn check_sizes<P: VertexProgram>() -> Result<(), GraphError> {
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

fn check_options(options: &RunOptions) -> Result<(), GraphError> {
    if !options.channel_capacity.is_power_of_two() {
        return Err(GraphError::InvalidArgument {
            reason: "channel capacity must be a power of two".into(),
        });
    }
    Ok(())
}

/// The whole graph's in- and out-degrees.
fn degrees(graph: &EdgeList) -> (Vec<u32>, Vec<u32>) {
    let n = graph.num_vertices();
    let mut in_degree = vec![0u32; n];
    let mut out_degree = vec![0u32; n];
    for &(u, v) in &graph.edges {
        out_degree[u as usize] = out_degree[u as usize].saturating_add(1);
        in_degree[v as usize] = in_degree[v as usize].saturating_add(1);
    }
    (in_degree, out_degree)
}

/// What [`Prepared::from_plans`] takes of the graph: its tables and the plans held.
struct Held {
    own: usize,
    plans: Vec<PartPlan>,
    shapes: Vec<PartShape>,
    in_degree: Vec<u32>,
    out_degree: Vec<u32>,
    replication_factor: f64,
    pools: Option<Pools>,
}

impl Prepared {
    /// A run of `program` over the whole of `graph`, every partition's plan held here.
    pub fn new<P: VertexProgram>(
        program: &P,
        graph: &EdgeList,
        config: &EngineConfig,
        options: &RunOptions,
    ) -> Result<Prepared, GraphError> {
        check_sizes::<P>()?;
        check_options(options)?;
        let parts = config.nodes;
        let cut = VertexCut::new(graph, parts, config.partitioner, config.seed)?;
        let plans = plan::build(graph, &cut, Needs::of(program));
        let (in_degree, out_degree) = degrees(graph);
        let pools = pool_size(config)
            .map(|size| Pools::new(&plans, size))
            .transpose()?;
        let shapes = plans.iter().map(|plan| plan.shape(parts)).collect();
        let held = Held {
            own: 0,
            plans,
            shapes,
            in_degree,
            out_degree,
            replication_factor: cut.replication_factor(),
            pools,
        };
        Prepared::from_plans(program, held, config, options)
    }

    /// A run of `program` by the partition that read `share`, its plan alone held here:
    /// the partitions of `collective` gather their plans' shapes to lay out the region
    /// alike (each calls this once).
    pub fn of_share<P: VertexProgram>(
        program: &P,
        share: &GraphShare,
        collective: &dyn Collective,
        config: &EngineConfig,
        options: &RunOptions,
    ) -> Result<Prepared, GraphError> {
        check_sizes::<P>()?;
        check_options(options)?;
        let (part, parts) = (share.part(), share.parts());
        let (plan, feeds) = share.plan(Needs::of(program), collective)?;
        let pools = pool_size(config)
            .map(|size| Pools::of_share(part, &plan, share.vertices(&feeds), parts, size))
            .transpose()?;
        drop(feeds);
        let words = collective.all_gather(&plan.shape(parts).words())?;
        let shapes =
            PartShape::all_from_words(&words, parts).ok_or_else(|| GraphError::Exchange {
                what: "the partitions' plan shapes do not add up",
            })?;
        let held = Held {
            own: part,
            plans: vec![plan],
            shapes,
            in_degree: share.in_degrees().to_vec(),
            out_degree: share.out_degrees().to_vec(),
            replication_factor: share.replication_factor(),
            pools,
        };
        Prepared::from_plans(program, held, config, options)
    }

    /// Lays out the region from every partition's shape and plans what the partitions
    /// held here publish and drop.
    fn from_plans<P: VertexProgram>(
        program: &P,
        held: Held,
        config: &EngineConfig,
        options: &RunOptions,
    ) -> Result<Prepared, GraphError> {
        let parts = held.shapes.len();
        let scatters = !program.always_active();
        // The region: runtime tables (the periodic mode's passes use them) then our
        // arrays.
        let line = LineSize::X86;
        let base_cfg = RegionConfig::new(0)
            .with_nodes(parts as u32)
            .with_readers_per_node(1)
            .with_log_ring_entries(2)
            .with_root_entries(1);
        let min = base_cfg.min_size()?;
        let mut heap = Layout::compute(&base_cfg.with_size(min))?.heap().offset;
        let stock = config.mode == Mode::Stock;
        // Partials carry stamps in the periodic mode (one never written reads as 0, not as
        // a sum); values only where scatter reads their flags or staleness is measured.
        let periodic = config.mode == Mode::BiPeriodic;
        let metas = shared::Metas {
            values: scatters || (periodic && config.measure_staleness),
            partials: scatters || periodic,
        };
        // Channels for many partitions: keep their total near 64 MiB.
        let pairs = parts * parts.saturating_sub(1);
        let budget = (64usize << 20) / (size_of::<shared::Msg>() * pairs.max(1));
        let capacity = options
            .channel_capacity
            .min(1 << budget.max(16).ilog2())
            .max(16.min(options.channel_capacity));
        // The heap starts after the extent table, which grows with the region: lay the
        // arrays out again until the heap stays where they were laid out from (it only
        // moves up, and by less each time).
        let mut tries = 0;
        let (layout, size) = loop {
            let mirrors = held.pools.as_ref().map_or(&[][..], |p| &p.mirrors[..]);
            let layout = SharedLayout::new::<P::Data, P::Gather>(
                heap,
                line,
                &held.shapes,
                metas,
                stock,
                capacity,
                mirrors,
            )?;
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
        let sync: Vec<SyncPlan> = held
            .plans
            .iter()
            .enumerate()
            .map(|(i, plan)| sync_plan(&layout, held.own + i, plan, &held.shapes))
            .collect();
        let marks = match config.mode {
            Mode::BiPeriodic => sync
                .iter()
                .enumerate()
                .map(|(i, own)| {
                    let read = [own.own_values[0].1, own.own_values[1].1, own.own_partials.1];
                    Arc::new(Marks::new(&layout, held.own + i, read))
                })
                .collect(),
            _ => Vec::new(),
        };
        Ok(Prepared {
            replication_factor: held.replication_factor,
            plans: held.plans,
            own: held.own,
            shapes: held.shapes,
            in_degree: held.in_degree,
            out_degree: held.out_degree,
            layout,
            sync,
            region: base_cfg.with_size(size),
            pools: held.pools,
            mode: config.mode,
            words: [
                words_of::<P::Data>(),
                words_of::<P::Gather>(),
                words_of::<P::Aggregate>(),
            ],
            faults: options.faults,
            marks,
        })
    }

    pub fn parts(&self) -> usize {
        self.shapes.len()
    }

    /// The partitions whose plans are held here.
    pub fn held(&self) -> std::ops::Range<usize> {
        self.own..self.own + self.plans.len()
    }

    fn not_held(&self, p: usize) -> GraphError {
        GraphError::InvalidArgument {
            reason: format!(
                "partition {p}'s plan is not held by this process (it holds {:?})",
                self.held()
            ),
        }
    }

    /// Partition `p`'s plan, if it is held here.
    pub fn plan(&self, p: usize) -> Result<&PartPlan, GraphError> {
        p.checked_sub(self.own)
            .and_then(|i| self.plans.get(i))
            .ok_or_else(|| self.not_held(p))
    }

    /// The lines partition `p` publishes and drops, if its plan is held here.
    pub fn sync(&self, p: usize) -> Result<&SyncPlan, GraphError> {
        p.checked_sub(self.own)
            .and_then(|i| self.sync.get(i))
            .ok_or_else(|| self.not_held(p))
    }

    /// The marks of partition `p`'s stores (the periodic mode, its plan held here).
    pub fn marks(&self, p: usize) -> Option<&Arc<Marks>> {
        p.checked_sub(self.own).and_then(|i| self.marks.get(i))
    }

    /// What partition `p`'s background passes follow (the periodic mode): the lines it
    /// publishes and drops, and the marks of its stores.
    pub fn passes_of(&self, p: usize) -> Result<(&SyncPlan, Arc<Marks>), GraphError> {
        let marks = self.marks(p).cloned().ok_or_else(|| self.not_held(p))?;
        Ok((self.sync(p)?, marks))
    }

    /// What every partition's loop shares.
    pub fn ctx<'a, P: VertexProgram>(
        &'a self,
        program: &'a P,
        config: &'a EngineConfig,
    ) -> Ctx<'a, P> {
        Ctx {
            program,
            parts: self.parts(),
            in_degree: &self.in_degree,
            out_degree: &self.out_degree,
            stale_reads: self.mode == Mode::BiPeriodic,
            measure_staleness: self.mode == Mode::BiPeriodic && config.measure_staleness,
            max_iterations: config.max_iterations,
            observer: config.observer.as_deref(),
            on_partition_start: config.on_partition_start.as_deref(),
            partials: self.shapes.iter().any(|shape| shape.feeding() > 0),
            faults: self.faults,
        }
    }

    /// Initialises the stock mode's channels, each through its producer's view.
    pub fn init_channels<V: MemView>(
        &self,
        view_of: impl Fn(usize) -> V,
    ) -> Result<(), GraphError> {
        let parts = self.parts();
        for (i, c) in self.layout.channels.iter().enumerate() {
            if let Some(c) = c {
                c.init(&view_of(i / parts))?;
            }
        }
        Ok(())
    }

    /// Runs partition `p` to the end over `view`: messages in the stock mode, shared
    /// slots read and written with `access` otherwise.
    pub fn run_partition<P, V, R>(
        &self,
        ctx: &Ctx<'_, P>,
        p: usize,
        view: V,
        access: R,
        barrier: &dyn Barrier,
        options: &RunOptions,
    ) -> Result<PartitionResult<P::Data>, GraphError>
    where
        P: VertexProgram,
        V: MemView,
        R: Access<V>,
    {
        let plan = self.plan(p)?;
        if self.mode == Mode::Stock {
            let channels = Channels::new(p, &self.layout, &view, barrier)?;
            let exchange = Messages::new(
                p,
                plan,
                Expected::from_shapes(&self.shapes, p),
                self.layout.value_slots(),
                channels,
                self.words[0],
            );
            Worker::new(ctx, p, plan, exchange).run()
        } else {
            let exchange = SharedSlots::new(
                p,
                plan,
                &self.layout,
                self.sync(p)?,
                barrier,
                options.faults,
                view,
                access,
                self.words,
                self.marks(p).map(|m| &**m),
            );
            Worker::new(ctx, p, plan, exchange).run()
        }
    }

    /// The values by vertex and the run's measurements, from every partition's outcome.
    pub fn collect<D: bytemuck::Pod>(
        &self,
        outcomes: Vec<PartitionResult<D>>,
        lines: LineTotals,
    ) -> (Vec<D>, RunStats) {
        collect(
            self.in_degree.len(),
            self.replication_factor,
            outcomes,
            lines,
        )
    }

    /// What assembling the run's results needs to know of it.
    pub fn whole(&self) -> Whole {
        Whole {
            data_words: self.words[0],
            parts: self.parts(),
            vertices: self.in_degree.len(),
            replication_factor: self.replication_factor,
        }
    }
}

/// Ranks per pool when the run spans pools (two-level mode over MPI).
fn pool_size(config: &EngineConfig) -> Option<usize> {
    match &config.placement {
        #[cfg(feature = "mpi")]
        crate::config::Placement::MpiPools(pools) => Some(pools.ranks_per_pool),
        _ => None,
    }
}

/// The emulated machine of a run: `base` (memory size, nodes, line) with the options'
/// cache shape and event rates.
pub(crate) fn machine(base: EmulatorConfig, seed: u64, options: &RunOptions) -> EmulatorConfig {
    base.seed(seed)
        .cache_lines(options.cache_lines)
        .eviction_rate(options.eviction_rate)
        .adjacent_prefetch_rate(options.prefetch_rate)
        .random_prefetch_rate(options.prefetch_rate)
}

/// Which lines partition `p` (of `plan`) publishes and which it must drop to see the
/// others.
fn sync_plan(layout: &SharedLayout, p: usize, plan: &PartPlan, shapes: &[PartShape]) -> SyncPlan {
    let ext = |e: shared::Extent| (e.offset, e.len);
    let aggregate_line = |p: usize, bank: usize| layout.aggregate_line(p, bank);
    let parts = shapes.len();
    let remote_values = (0..plan.locals())
        .filter(|&l| usize::from(plan.master_of[l]) != p)
        .map(|l| {
            let m = usize::from(plan.master_of[l]);
            layout.value_word(m, plan.master_index[l] as usize) * 8
        })
        .collect();
    let remote_partials: Vec<(usize, usize)> = (0..parts)
        .filter(|&q| q != p)
        .map(|q| layout.segment_range(q, p, shapes[q].feeders[p]))
        .filter(|&(_, len)| len > 0)
        .collect();
    // Only the masters with replicas are read elsewhere: a prefix of the array.
    let read = plan.mirrored * layout.value_stride * 8;
    let values = layout.values[p];
    let own_values = [(
        values.offset,
        read.next_multiple_of(layout.line).min(values.len),
    )];
    let remote_values = layout.runs(remote_values);
    let read: Vec<(usize, usize)> = [0, 1]
        .iter()
        .flat_map(|&b| layout.in_bank(&remote_values, b))
        .chain(remote_partials.iter().copied())
        .collect();
    let (remote_logs, watches) = tracked::watches(layout, p, &read);
    SyncPlan {
        own_values: [0, 1].map(|b| layout.in_bank(&own_values, b)[0]),
        own_partials: ext(layout.partials[p]),
        own_aggregate: [0, 1].map(|b| aggregate_line(p, b)),
        remote_values: [0, 1].map(|b| layout.in_bank(&remote_values, b)),
        remote_partials,
        remote_aggregates: [0, 1].map(|b| {
            (0..parts)
                .filter(|&q| q != p)
                .map(|q| aggregate_line(q, b))
                .collect()
        }),
        remote_logs,
        watches,
    }
}
