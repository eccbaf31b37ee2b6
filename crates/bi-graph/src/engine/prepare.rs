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
use super::plan::{self, Needs, PartPlan};
use super::pools::Pools;
use super::program::VertexProgram;
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

/// Everything about a run that every partition agrees on before it starts.
pub(crate) struct Prepared {
    pub cut: VertexCut,
    pub plans: Vec<PartPlan>,
    pub in_degree: Vec<u32>,
    pub out_degree: Vec<u32>,
    pub layout: SharedLayout,
    pub sync: Vec<SyncPlan>,
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
    /// Each partition's marks of the lines it stored into (periodic mode; else none).
    pub marks: Vec<Arc<Marks>>,
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

impl Prepared {
    pub fn new<P: VertexProgram>(
        program: &P,
        graph: &EdgeList,
        config: &EngineConfig,
        options: &RunOptions,
    ) -> Result<Prepared, GraphError> {
        check_sizes::<P>()?;
        if !options.channel_capacity.is_power_of_two() {
            return Err(GraphError::InvalidArgument {
                reason: "channel capacity must be a power of two".into(),
            });
        }
        let parts = config.nodes;
        let cut = VertexCut::new(graph, parts, config.partitioner, config.seed)?;
        let scatters = !program.always_active();
        let needs = Needs::of(program);
        let plans = plan::build(graph, &cut, needs);
        let n = graph.num_vertices();
        let mut in_degree = vec![0u32; n];
        let mut out_degree = vec![0u32; n];
        for &(u, v) in &graph.edges {
            out_degree[u as usize] = out_degree[u as usize].saturating_add(1);
            in_degree[v as usize] = in_degree[v as usize].saturating_add(1);
        }

        let pools = pool_size(config)
            .map(|size| Pools::new(&plans, size))
            .transpose()?;
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
            let mirrors = pools.as_ref().map_or(&[][..], |p| &p.mirrors[..]);
            let layout = SharedLayout::new::<P::Data, P::Gather>(
                heap, line, &plans, metas, stock, capacity, mirrors,
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
        let sync = sync_plans(&layout, &plans);
        let marks = match config.mode {
            Mode::BiPeriodic => (0..parts)
                .map(|p| {
                    let own = &sync[p];
                    let read = [own.own_values[0].1, own.own_values[1].1, own.own_partials.1];
                    Arc::new(Marks::new(&layout, p, read))
                })
                .collect(),
            _ => Vec::new(),
        };
        Ok(Prepared {
            cut,
            plans,
            in_degree,
            out_degree,
            layout,
            sync,
            region: base_cfg.with_size(size),
            pools,
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
        self.plans.len()
    }

    /// What every partition's loop shares.
    pub fn ctx<'a, P: VertexProgram>(
        &'a self,
        program: &'a P,
        config: &'a EngineConfig,
    ) -> Ctx<'a, P> {
        Ctx {
            program,
            parts: self.plans.len(),
            in_degree: &self.in_degree,
            out_degree: &self.out_degree,
            stale_reads: self.mode == Mode::BiPeriodic,
            measure_staleness: self.mode == Mode::BiPeriodic && config.measure_staleness,
            max_iterations: config.max_iterations,
            observer: config.observer.as_deref(),
            on_partition_start: config.on_partition_start.as_deref(),
            partials: self.plans.iter().any(|plan| plan.feeds.contains(&true)),
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
        if self.mode == Mode::Stock {
            let channels = Channels::new(p, &self.layout, &view, barrier)?;
            let exchange = Messages::new(
                p,
                &self.plans[p],
                Expected::from_plans(&self.plans, p),
                self.layout.value_slots(),
                channels,
                self.words[0],
            );
            Worker::new(ctx, p, &self.plans[p], exchange).run()
        } else {
            let exchange = SharedSlots::new(
                p,
                &self.plans,
                &self.layout,
                &self.sync,
                barrier,
                options.faults,
                view,
                access,
                self.words,
                self.marks.get(p).map(|m| &**m),
            );
            Worker::new(ctx, p, &self.plans[p], exchange).run()
        }
    }

    /// The values by vertex and the run's measurements, from every partition's outcome.
    pub fn collect<D: bytemuck::Pod>(
        &self,
        outcomes: Vec<PartitionResult<D>>,
        lines: LineTotals,
    ) -> (Vec<D>, RunStats) {
        let (n, replication) = (self.in_degree.len(), self.cut.replication_factor());
        collect(n, replication, outcomes, lines)
    }
}

/// The values of `n` vertices and the run's measurements, from every partition's
/// outcome.
pub(crate) fn collect<D: bytemuck::Pod>(
    n: usize,
    replication_factor: f64,
    outcomes: Vec<PartitionResult<D>>,
    lines: LineTotals,
) -> (Vec<D>, RunStats) {
    let mut values = vec![D::zeroed(); n];
    let mut stats = RunStats {
        replication_factor,
        lines_written_back: lines.written_back,
        lines_invalidated: lines.invalidated,
        ..RunStats::default()
    };
    let partitions = outcomes.len() as u32;
    for o in outcomes {
        stats.phases += o.phases;
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
    stats.phases = stats.phases.per(partitions).per(stats.iterations as u32);
    (values, stats)
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

/// Which lines each partition publishes and which it must drop to see the others.
fn sync_plans(layout: &SharedLayout, plans: &[plan::PartPlan]) -> Vec<SyncPlan> {
    let ext = |e: shared::Extent| (e.offset, e.len);
    let aggregate_line = |p: usize, bank: usize| {
        (
            layout.aggregates[p].offset + bank * layout.line,
            layout.line,
        )
    };
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
            let remote_partials: Vec<(usize, usize)> = (0..plans.len())
                .filter(|&q| q != p)
                .map(|q| layout.segment_range(q, p, plans[q].feeders_of(p)))
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
                    (0..plans.len())
                        .filter(|&q| q != p)
                        .map(|q| aggregate_line(q, b))
                        .collect()
                }),
                remote_logs,
                watches,
            }
        })
        .collect()
}
