//! Partitions as MPI ranks ([`Placement::Mpi`]): the stock mode with MPI as its message
//! transport, the baseline PowerGraph measured.
//!
//! Every rank is one partition (`nodes` must equal the communicator's size), loads the
//! same graph and makes the same preparation. A superstep's messages to every other rank
//! travel in one `MPI_Alltoallv` per phase; the values and every rank's report are
//! gathered on rank 0, which alone returns values. A rank that fails aborts the job
//! (`MPI_Abort`), so no rank waits forever in a collective.
//!
//! [`Placement::Mpi`]: crate::Placement::Mpi

use super::barrier::RegionBarrier;
use super::exchange::messages::Transport;
use super::exchange::pooled::PooledSlots;
#[cfg(not(loom))]
use super::exchange::slots::Direct;
#[cfg(loom)]
use super::exchange::slots::Viewed;
use super::exchange::{Expected, Messages};
use super::memory::words_of;
use super::memory::{Counted, LineCounters, LineTotals};
use super::plan::Needs;
use super::prepare::{Prepared, check_sizes};
use super::program::VertexProgram;
use super::report::REPORT_WORDS;
use super::results::{Whole, master_words, report_words, run_from_reports, values_from_words};
use super::share::{Collective, GraphShare};
use super::shared::Msg;
use super::shared::stride as value_stride;
use super::worker::Ctx;
use super::worker::{PartitionResult, Worker};
use super::{DetailedRun, RunOptions};
use crate::config::{EngineConfig, Mode, MpiPools};
use crate::error::GraphError;
use bi_core::region::Region;
use bi_core::runtime::Faults;
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::{CommunicatorCollectives, Root};
use std::sync::Arc;

/// Messages between ranks, all of a phase in one all-to-all.
struct MpiTransport<'a> {
    world: &'a SimpleCommunicator,
}

/// Counts and displacements, in `u64`s, of one rank's part per peer.
fn partition(counts: impl Iterator<Item = usize>) -> Result<(Vec<i32>, Vec<i32>), GraphError> {
    let too_large = || GraphError::TooLarge {
        reason: "a superstep's messages to one rank exceed MPI's 32-bit counts".into(),
    };
    let mut sizes = Vec::new();
    let mut displs = Vec::new();
    let mut at = 0i32;
    for n in counts {
        let words = i32::try_from(n * 4).map_err(|_| too_large())?;
        sizes.push(words);
        displs.push(at);
        at = at.checked_add(words).ok_or_else(too_large)?;
    }
    Ok((sizes, displs))
}

impl Transport for MpiTransport<'_> {
    fn exchange(
        &mut self,
        out: &[Vec<Msg>],
        inbox: &mut [Vec<Msg>],
        expect: &[usize],
    ) -> Result<(), GraphError> {
        let send: Vec<u64> = out.iter().flatten().flatten().copied().collect();
        let (send_counts, send_displs) = partition(out.iter().map(Vec::len))?;
        let (recv_counts, recv_displs) = partition(expect.iter().copied())?;
        let mut recv = vec![0u64; expect.iter().sum::<usize>() * 4];
        self.world.all_to_all_varcount_into(
            &Partition::new(&send[..], send_counts, send_displs),
            &mut PartitionMut::new(&mut recv[..], recv_counts, &recv_displs[..]),
        );
        let mut words = recv.chunks_exact(4);
        for (q, &n) in expect.iter().enumerate() {
            inbox[q].extend(words.by_ref().take(n).map(|w| [w[0], w[1], w[2], w[3]]));
        }
        Ok(())
    }
}

/// Runs this rank's partition; rank 0 returns every value, the others none.
pub(crate) fn run<P: VertexProgram>(
    prepared: &Prepared,
    program: &P,
    config: &EngineConfig,
) -> Result<DetailedRun<P::Data>, GraphError> {
    let world = world(prepared)?;
    let rank = world.rank() as usize;
    if prepared.mode != Mode::Stock {
        return Err(GraphError::InvalidArgument {
            reason: "over MPI the stock mode runs (the BI modes need shared memory)".into(),
        });
    }
    let ctx = prepared.ctx(program, config);
    let plan = prepared.plan(rank)?;
    let exchange = Messages::new(
        rank,
        plan,
        Expected::from_shapes(&prepared.shapes, rank),
        prepared.layout.value_slots(),
        MpiTransport { world: &world },
        prepared.words[0],
    );
    let outcome = or_abort(&world, rank, Worker::new(&ctx, rank, plan, exchange).run());
    gather(
        prepared.whole(),
        &world,
        rank,
        outcome,
        LineTotals::default(),
    )
}

/// Runs this rank's partition of a graph read in shares ([`GraphShare::read`] over the
/// world communicator) in the stock mode; rank 0 returns every value, the others none.
///
/// # Errors
///
/// [`GraphError::InvalidArgument`] when MPI is not initialised, the share was read by a
/// different number of ranks or by another rank, or the mode is not the stock mode; an
/// error of a rank's loop aborts the job, as [`Placement::Mpi`](crate::Placement::Mpi)
/// does.
pub fn run_share<P: VertexProgram>(
    program: &P,
    share: &GraphShare,
    config: &EngineConfig,
) -> Result<DetailedRun<P::Data>, GraphError> {
    check_sizes::<P>()?;
    let world = share_world(share)?;
    let rank = world.rank() as usize;
    if config.mode != Mode::Stock {
        return Err(GraphError::InvalidArgument {
            reason: "over MPI the stock mode runs (the BI modes need shared memory)".into(),
        });
    }
    let (plan, feeds) = share.plan(Needs::of(program), &world)?;
    let vertices = share.vertices(&feeds);
    let expected = Expected::counting(share.parts(), rank, |q| {
        (vertices.feeders(q, rank), vertices.replicated(q, rank))
    });
    let ctx = Ctx {
        program,
        parts: share.parts(),
        in_degree: share.in_degrees(),
        out_degree: share.out_degrees(),
        stale_reads: false,
        measure_staleness: false,
        max_iterations: config.max_iterations,
        observer: config.observer.as_deref(),
        on_partition_start: config.on_partition_start.as_deref(),
        partials: feeds.iter().any(|&f| f != 0),
        faults: Faults::default(),
    };
    drop(feeds);
    // Stock copies carry a meta word where scatter reads the "changed" flags.
    let scatters = !program.always_active();
    let dw = words_of::<P::Data>();
    let slots = (value_stride(dw, scatters), scatters);
    let exchange = Messages::new(
        rank,
        &plan,
        expected,
        slots,
        MpiTransport { world: &world },
        dw,
    );
    let outcome = or_abort(&world, rank, Worker::new(&ctx, rank, &plan, exchange).run());
    let whole = Whole {
        data_words: dw,
        parts: share.parts(),
        vertices: share.num_vertices(),
        replication_factor: share.replication_factor(),
    };
    gather(whole, &world, rank, outcome, LineTotals::default())
}

impl Collective for SimpleCommunicator {
    fn partition(&self) -> usize {
        self.rank() as usize
    }

    fn partitions(&self) -> usize {
        self.size() as usize
    }

    fn all_gather(&self, mine: &[u64]) -> Result<Vec<u64>, GraphError> {
        let count = count(mine.len())?;
        let mut counts = vec![0i32; self.partitions()];
        self.all_gather_into(&count, &mut counts[..]);
        let displs = displacements(&counts)?;
        let mut all = vec![0u64; counts.iter().map(|&c| c as usize).sum()];
        self.all_gather_varcount_into(
            mine,
            &mut PartitionMut::new(&mut all[..], &counts[..], &displs[..]),
        );
        Ok(all)
    }

    fn all_to_all(&self, out: Vec<Vec<u64>>) -> Result<Vec<u64>, GraphError> {
        let send_counts = out
            .iter()
            .map(|o| count(o.len()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut recv_counts = vec![0i32; send_counts.len()];
        self.all_to_all_into(&send_counts[..], &mut recv_counts[..]);
        let send_displs = displacements(&send_counts)?;
        let recv_displs = displacements(&recv_counts)?;
        let send: Vec<u64> = out.concat();
        drop(out);
        let mut recv = vec![0u64; recv_counts.iter().map(|&c| c as usize).sum()];
        self.all_to_all_varcount_into(
            &Partition::new(&send[..], send_counts, send_displs),
            &mut PartitionMut::new(&mut recv[..], recv_counts, &recv_displs[..]),
        );
        Ok(recv)
    }

    fn or_all(&self, words: &mut [u64]) -> Result<(), GraphError> {
        let mine = words.to_vec();
        self.all_reduce_into(&mine[..], words, SystemOperation::bitwise_or());
        Ok(())
    }

    fn sum_all(&self, counts: &mut [u32]) -> Result<(), GraphError> {
        let mine = counts.to_vec();
        self.all_reduce_into(&mine[..], counts, SystemOperation::sum());
        Ok(())
    }
}

/// `n` words as an MPI count.
fn count(n: usize) -> Result<i32, GraphError> {
    i32::try_from(n).map_err(|_| GraphError::TooLarge {
        reason: "one rank's part of an exchange exceeds MPI's 32-bit counts".into(),
    })
}

/// Where each of `counts` starts when they are laid one after the other.
fn displacements(counts: &[i32]) -> Result<Vec<i32>, GraphError> {
    let mut at = 0i32;
    counts
        .iter()
        .map(|&c| {
            let d = at;
            at = at.checked_add(c).ok_or_else(|| GraphError::TooLarge {
                reason: "an exchange exceeds MPI's 32-bit counts".into(),
            })?;
            Ok(d)
        })
        .collect()
}

/// The value of `result`, or the job aborted (every rank stops) after the error.
fn or_abort<T>(world: &SimpleCommunicator, rank: usize, result: Result<T, GraphError>) -> T {
    match result {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: rank {rank}: {e}");
            world.abort(1)
        }
    }
}

/// The two-level mode: this rank's partition over its pool's region, messages to the
/// other pools over MPI.
pub(crate) fn run_pools<P: VertexProgram>(
    prepared: &Prepared,
    program: &P,
    config: &EngineConfig,
    placement: &MpiPools,
) -> Result<DetailedRun<P::Data>, GraphError> {
    let world = world(prepared)?;
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let Some(pools) = prepared.pools.as_ref() else {
        return Err(GraphError::Layout {
            reason: "a two-level run was prepared without pools".into(),
        });
    };
    if prepared.mode != Mode::BiOnDemand {
        return Err(GraphError::InvalidArgument {
            reason: "across pools the bi-on-demand mode runs (and the stock mode over MPI alone)"
                .into(),
        });
    }
    let leader = pools.of(rank) * pools.size;
    let members = pools.size.min(size - leader);
    let mut path = placement.region.clone().into_os_string();
    path.push(format!(".{}", pools.of(rank)));
    let path = std::path::PathBuf::from(path);
    // The pool's first rank makes its region; the others map it once it exists.
    let made = (rank == leader).then(|| Region::create(&path, prepared.region));
    let made = made.map(|r| or_abort(&world, rank, r.map_err(GraphError::from)));
    world.barrier();
    let region = match made {
        Some(region) => region,
        None => or_abort(&world, rank, Region::open(&path).map_err(GraphError::from)),
    };
    let counters = Arc::new(LineCounters::default());
    let view = Counted::new(region.hardware(), counters.clone());
    let barrier = RegionBarrier::new(
        region.hardware(),
        prepared.layout.meeting.offset,
        members,
        rank - leader,
    )
    .with_faults(prepared.faults);
    #[cfg(loom)]
    let access = Viewed;
    #[cfg(not(loom))]
    let access = Direct(region.backing().words());
    let exchange = PooledSlots::new(
        rank,
        prepared.plan(rank)?,
        &prepared.shapes,
        &prepared.layout,
        pools,
        &barrier,
        prepared.faults,
        MpiTransport { world: &world },
        view,
        access,
        prepared.words,
    );
    let ctx = prepared.ctx(program, config);
    let plan = prepared.plan(rank)?;
    let outcome = or_abort(&world, rank, Worker::new(&ctx, rank, plan, exchange).run());
    world.barrier();
    if rank == leader {
        let _ = std::fs::remove_file(&path);
    }
    gather(prepared.whole(), &world, rank, outcome, counters.totals())
}

/// The world communicator of the ranks that read `share` and its siblings, one rank per
/// partition, this rank the share's.
fn share_world(share: &GraphShare) -> Result<SimpleCommunicator, GraphError> {
    let world = world_of(share.parts())?;
    let rank = world.rank() as usize;
    if rank != share.part() {
        return Err(GraphError::InvalidArgument {
            reason: format!("rank {rank} was given partition {}'s share", share.part()),
        });
    }
    Ok(world)
}

/// Runs this rank's partition of a graph read in shares across pools
/// ([`run_pools`]): the ranks lay out every pool's region from the shapes of each
/// other's plans and the vertex tables.
pub(crate) fn run_pools_share<P: VertexProgram>(
    program: &P,
    share: &GraphShare,
    config: &EngineConfig,
    placement: &MpiPools,
) -> Result<DetailedRun<P::Data>, GraphError> {
    let world = share_world(share)?;
    let prepared = Prepared::of_share(program, share, &world, config, &RunOptions::default())?;
    run_pools(&prepared, program, config, placement)
}

/// The world communicator, one rank per partition.
fn world(prepared: &Prepared) -> Result<SimpleCommunicator, GraphError> {
    world_of(prepared.parts())
}

/// The world communicator, checked to have `parts` ranks.
fn world_of(parts: usize) -> Result<SimpleCommunicator, GraphError> {
    if !mpi::environment::is_initialized() {
        return Err(GraphError::InvalidArgument {
            reason: "MPI is not initialized (call mpi::initialize() first)".into(),
        });
    }
    let world = SimpleCommunicator::world();
    let size = world.size() as usize;
    if size != parts {
        return Err(GraphError::InvalidArgument {
            reason: format!("{parts} partitions over {size} MPI ranks: run one rank per partition"),
        });
    }
    Ok(world)
}

/// Every rank's report everywhere, and every master's value on rank 0.
fn gather<D: bytemuck::Pod>(
    whole: Whole,
    world: &SimpleCommunicator,
    rank: usize,
    outcome: PartitionResult<D>,
    lines: LineTotals,
) -> Result<DetailedRun<D>, GraphError> {
    let mine = master_words(&outcome, whole.data_words);
    let report = report_words(&outcome, lines);
    let mut reports = vec![0u64; REPORT_WORDS * whole.parts];
    world.all_gather_into(&report[..], &mut reports[..]);
    let count = count(mine.len())?;
    let mut counts = vec![0i32; whole.parts];
    world.all_gather_into(&count, &mut counts[..]);
    let root = world.process_at_rank(0);
    let mut values = Vec::new();
    if rank == 0 {
        let displs = displacements(&counts)?;
        let total = counts.iter().map(|&c| c as usize).sum();
        let mut all = vec![0u64; total];
        root.gather_varcount_into_root(
            &mine[..],
            &mut PartitionMut::new(&mut all[..], &counts[..], &displs[..]),
        );
        values = values_from_words(whole, [&all[..]])?;
    } else {
        root.gather_varcount_into(&mine[..]);
    }
    run_from_reports(whole, &reports, values)
}
