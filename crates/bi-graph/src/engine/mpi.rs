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
use super::exchange::Messages;
use super::exchange::messages::Transport;
use super::exchange::pooled::PooledSlots;
#[cfg(not(loom))]
use super::exchange::slots::Direct;
#[cfg(loom)]
use super::exchange::slots::Viewed;
use super::memory::{Counted, LineCounters, LineTotals, decode, encode};
use super::prepare::Prepared;
use super::program::VertexProgram;
use super::report::{DONE, REPORT_WORDS, Report};
use super::shared::Msg;
use super::worker::{PartitionResult, Worker};
use super::{DetailedRun, Run};
use crate::config::{EngineConfig, Mode, MpiPools};
use crate::error::GraphError;
use bi_core::region::Region;
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
    let exchange = Messages::new(
        rank,
        &prepared.plans,
        &prepared.layout,
        MpiTransport { world: &world },
        prepared.words[0],
    );
    let outcome = or_abort(&world, rank, Worker::new(&ctx, rank, exchange).run());
    gather(prepared, &world, rank, outcome, LineTotals::default())
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
        &prepared.plans,
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
    let outcome = or_abort(&world, rank, Worker::new(&ctx, rank, exchange).run());
    world.barrier();
    if rank == leader {
        let _ = std::fs::remove_file(&path);
    }
    gather(prepared, &world, rank, outcome, counters.totals())
}

/// The world communicator, one rank per partition.
fn world(prepared: &Prepared) -> Result<SimpleCommunicator, GraphError> {
    if !mpi::environment::is_initialized() {
        return Err(GraphError::InvalidArgument {
            reason: "MPI is not initialized (call mpi::initialize() first)".into(),
        });
    }
    let world = SimpleCommunicator::world();
    let size = world.size() as usize;
    if size != prepared.parts() {
        return Err(GraphError::InvalidArgument {
            reason: format!(
                "{} partitions over {size} MPI ranks: run one rank per partition",
                prepared.parts()
            ),
        });
    }
    Ok(world)
}

/// Every rank's report everywhere, and every master's value on rank 0.
fn gather<D: bytemuck::Pod>(
    prepared: &Prepared,
    world: &SimpleCommunicator,
    rank: usize,
    outcome: PartitionResult<D>,
    lines: LineTotals,
) -> Result<DetailedRun<D>, GraphError> {
    let dw = prepared.words[0];
    let mut mine: Vec<u64> = Vec::with_capacity(outcome.masters.len() * (1 + dw));
    for (v, d) in &outcome.masters {
        mine.push(u64::from(*v));
        mine.extend_from_slice(&encode(d)[..dw]);
    }
    let report = Report {
        status: DONE,
        outcome: outcome.measurements(),
        lines,
        emulator: None,
    };
    let mut reports = vec![0u64; REPORT_WORDS * prepared.parts()];
    world.all_gather_into(&report.words()[..], &mut reports[..]);
    let count = i32::try_from(mine.len()).map_err(|_| GraphError::TooLarge {
        reason: "one rank's values exceed MPI's 32-bit counts".into(),
    })?;
    let mut counts = vec![0i32; prepared.parts()];
    world.all_gather_into(&count, &mut counts[..]);
    let root = world.process_at_rank(0);
    let mut values = Vec::new();
    if rank == 0 {
        let displs: Vec<i32> = counts
            .iter()
            .scan(0i32, |at, &c| {
                let d = *at;
                *at = at.saturating_add(c);
                Some(d)
            })
            .collect();
        let total = counts.iter().map(|&c| c as usize).sum();
        let mut all = vec![0u64; total];
        root.gather_varcount_into_root(
            &mine[..],
            &mut PartitionMut::new(&mut all[..], &counts[..], &displs[..]),
        );
        values = vec![D::zeroed(); prepared.in_degree.len()];
        for entry in all.chunks_exact(1 + dw) {
            let mut w = [0u64; 2];
            w[..dw].copy_from_slice(&entry[1..]);
            let slot = usize::try_from(entry[0])
                .ok()
                .and_then(|v| values.get_mut(v))
                .ok_or_else(|| GraphError::Exchange {
                    what: "a rank's value names no vertex",
                })?;
            *slot = decode(&w);
        }
    } else {
        root.gather_varcount_into(&mine[..]);
    }
    let mut lines = LineTotals::default();
    let mut outcomes = Vec::with_capacity(prepared.parts());
    for w in reports.chunks_exact(REPORT_WORDS) {
        let w: &[u64; REPORT_WORDS] = w.try_into().expect("chunks of REPORT_WORDS");
        let report = Report::from_words(w);
        lines.written_back += report.lines.written_back;
        lines.invalidated += report.lines.invalidated;
        outcomes.push(report.outcome);
    }
    let (_, stats) = prepared.collect(outcomes, lines);
    Ok(DetailedRun {
        run: Run { values, stats },
        emulator: None,
    })
}
