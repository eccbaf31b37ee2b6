//! Partitions as threads of this process, over an anonymous region.

use super::barrier::{Barrier, PhaseBarrier};
#[cfg(not(loom))]
use super::exchange::slots::Direct;
use super::exchange::slots::Viewed;
use super::memory::{Counted, LineCounters};
use super::prepare::{Prepared, machine};
use super::program::VertexProgram;
use super::quiescence::Passes;
use super::worker::PartitionResult;
use super::{DetailedRun, Run, RunOptions};
use crate::config::{Backend, EngineConfig, Mode};
use crate::error::GraphError;
use bi_core::mem::{Emulator, EmulatorConfig};
use bi_core::region::Region;
use std::sync::{Arc, Mutex};

/// Runs every partition on a thread of its own, as nodes of one region.
pub(crate) fn run<P: VertexProgram>(
    prepared: &Prepared,
    program: &P,
    config: &EngineConfig,
    options: &RunOptions,
) -> Result<DetailedRun<P::Data>, GraphError> {
    let parts = prepared.parts();
    let region = Region::fresh(options.region_file.as_deref(), prepared.region)?;
    let size = region.layout().size();
    let counters = Arc::new(LineCounters::default());
    let emulator = match config.backend {
        Backend::Hardware => None,
        Backend::Emulated { seed } => Some(
            Emulator::over(
                region.backing().clone(),
                machine(EmulatorConfig::new(size, parts), seed, options)
                    .line_size(region.layout().line_size()),
            )
            .map_err(GraphError::Emulator)?,
        ),
    };
    // Each partition's view of the region: its emulated node, or the machine's memory.
    let emulated = |emu: &Emulator, p: usize| Counted::new(emu.node(p), counters.clone());
    let hardware = || Counted::new(region.hardware(), counters.clone());
    if prepared.mode == Mode::Stock {
        match &emulator {
            Some(emu) => prepared.init_channels(|p| emu.node(p))?,
            None => prepared.init_channels(|_| region.hardware())?,
        }
    }
    let mut passes = Passes::new();
    if prepared.mode == Mode::BiPeriodic && parts > 1 {
        let period = options.quiescence_period;
        let layout = *region.layout();
        for p in 0..parts {
            let (plan, marks) = prepared.passes_of(p)?;
            let faults = prepared.faults;
            match &emulator {
                Some(emu) => {
                    passes.start(emulated(emu, p), layout, p, plan, marks, faults, period)?
                }
                None => passes.start(hardware(), layout, p, plan, marks, faults, period)?,
            }
        }
    }
    let barrier = PhaseBarrier::new(parts);
    let ctx = prepared.ctx(program, config);
    if let Some(o) = &config.observer {
        o.start("supersteps", config.max_iterations as u64);
    }
    let run_one = |p: usize| {
        let barrier: &dyn Barrier = &barrier;
        match &emulator {
            Some(emu) => {
                prepared.run_partition(&ctx, p, emulated(emu, p), Viewed, barrier, options)
            }
            None => {
                // Under loom the backing's words are the model checker's atomics: the
                // engine then reads through the view only.
                #[cfg(loom)]
                let access = Viewed;
                #[cfg(not(loom))]
                let access = Direct(region.backing().words());
                prepared.run_partition(&ctx, p, hardware(), access, barrier, options)
            }
        }
    };
    let outcomes = run_all(parts, &barrier, run_one);
    if let Some(o) = &config.observer {
        o.finish();
    }
    let stopped = passes.stop();
    let outcomes = outcomes?;
    stopped?;
    let (values, stats) = prepared.collect(outcomes, counters.totals());
    Ok(DetailedRun {
        run: Run { values, stats },
        emulator: emulator.map(|e| e.total_stats()),
    })
}

/// Runs `run_one(p)` for every partition `p` on its own thread; the first failure is the
/// run's (the others fail only because it broke the barrier).
fn run_all<D, F>(
    parts: usize,
    barrier: &dyn Barrier,
    run_one: F,
) -> Result<Vec<PartitionResult<D>>, GraphError>
where
    D: Send,
    F: Fn(usize) -> Result<PartitionResult<D>, GraphError> + Sync,
{
    let first_failure: Mutex<Option<usize>> = Mutex::new(None);
    let run_one = &run_one;
    let outcomes = std::thread::scope(|s| {
        let workers: Vec<_> = (0..parts)
            .map(|p| {
                let first_failure = &first_failure;
                s.spawn(move || {
                    let r = run_one(p);
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
                    .unwrap_or_else(|_| Err(GraphError::PartitionPanicked { partition: p }))
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
