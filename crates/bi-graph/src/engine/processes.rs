//! Partitions as processes over a region file ([`Placement::Processes`]).
//!
//! The launcher creates the region file, initialises the stock mode's channels, starts
//! one process per partition and watches them. Each partition's process makes the same
//! preparation (it depends only on the program, the graph and the configuration), maps
//! the file, runs its partition with the [`RegionBarrier`], and leaves its masters'
//! values and a report of what it measured in its own lines, written back. The launcher
//! reads them once every process has exited.
//!
//! When a partition's process dies, the launcher marks the run aborted in its own line
//! of the barrier; every other partition sees it at its next barrier (or while it waits
//! for messages) and stops. When the launcher dies, the partitions see that they were
//! adopted and stop too.
//!
//! [`Placement::Processes`]: crate::Placement::Processes

use super::barrier::{Barrier, RegionBarrier};
#[cfg(not(loom))]
use super::exchange::slots::Direct;
use super::exchange::slots::{Access, Viewed};
use super::memory::{Counted, LineCounters, LineTotals, decode, encode};
use super::prepare::{Prepared, machine};
use super::program::VertexProgram;
use super::quiescence::Passes;
use super::report::{ABORTED, DONE, FAILED, REPORT_WORDS, Report};
use super::worker::PartitionResult;
use super::{DetailedRun, Run, RunOptions};
use crate::config::{Backend, EngineConfig, Launch, Mode, PartitionOf};
use crate::error::GraphError;
use bi_core::mem::{EmulatedNode, MemError, MemView, NodeStats};
use bi_core::region::Region;
use std::process::{Child, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the others get to stop on their own once one partition failed.
const GRACE: Duration = Duration::from_secs(10);

fn mem(e: MemError) -> GraphError {
    GraphError::Runtime(e.into())
}

/// Kills and reaps whatever partition processes are still running when dropped.
struct Children(Vec<Option<Child>>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in self.0.iter_mut().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "exited".to_owned(),
    }
}

/// The launcher: creates the region, starts every partition's process, waits for them
/// and collects the values.
pub(crate) fn launch<P: VertexProgram>(
    prepared: &Prepared,
    launch: &Launch,
) -> Result<DetailedRun<P::Data>, GraphError> {
    let parts = prepared.parts();
    let region = Region::create(&launch.region, prepared.region)?;
    let view = region.hardware();
    if prepared.mode == Mode::Stock {
        prepared.init_channels(|_| view.clone())?;
    }
    view.fence();
    let meeting = prepared.layout.meeting.offset;
    let mut children = Children(Vec::with_capacity(parts));
    for p in 0..parts {
        match (launch.spawn)(p) {
            Ok(child) => children.0.push(Some(child)),
            Err(source) => {
                RegionBarrier::abort_all(&view, meeting, parts);
                return Err(GraphError::Spawn {
                    partition: p,
                    source,
                });
            }
        }
    }
    // Watch: the first process to fail aborts the run for the others.
    let mut exits: Vec<Option<ExitStatus>> = vec![None; parts];
    let mut failed_at: Option<Instant> = None;
    while exits.iter().any(Option::is_none) {
        for (p, slot) in children.0.iter_mut().enumerate() {
            let Some(child) = slot else { continue };
            let status = child.try_wait().map_err(|source| GraphError::Spawn {
                partition: p,
                source,
            })?;
            if let Some(status) = status {
                exits[p] = Some(status);
                *slot = None;
                if !status.success() && failed_at.is_none() {
                    RegionBarrier::abort_all(&view, meeting, parts);
                    failed_at = Some(Instant::now());
                }
            }
        }
        if failed_at.is_some_and(|t| t.elapsed() > GRACE) {
            break; // the rest are killed as `children` drops
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(children);

    let reports: Vec<Report> = (0..parts)
        .map(|p| {
            let e = prepared.layout.reports[p];
            let mut w = [0u64; REPORT_WORDS];
            view.invalidate(e.offset, e.len).map_err(mem)?;
            view.fence();
            for (k, x) in w.iter_mut().enumerate() {
                *x = view.load_u64(e.offset + k * 8).map_err(mem)?;
            }
            Ok(Report::from_words(&w))
        })
        .collect::<Result<_, GraphError>>()?;
    // The failure to report: a partition's own error first, then a process that died
    // without reporting, rather than the partitions that stopped because of them.
    let failure = |p: usize| -> Option<(u8, String)> {
        let exit = exits[p].map_or("was stopped".to_owned(), describe);
        match reports[p].status {
            DONE if exits[p].is_some_and(|s| s.success()) => None,
            FAILED => Some((
                0,
                format!("failed ({exit}; its error is on its standard error)"),
            )),
            ABORTED => Some((
                2,
                format!("stopped because another partition failed ({exit})"),
            )),
            _ => Some((1, format!("{exit} before finishing"))),
        }
    };
    if let Some((partition, (_, reason))) = (0..parts)
        .filter_map(|p| failure(p).map(|f| (p, f)))
        .min_by_key(|(_, (rank, _))| *rank)
    {
        return Err(GraphError::PartitionFailed { partition, reason });
    }

    let mut values = vec![bytemuck::Zeroable::zeroed(); prepared.in_degree.len()];
    let mut lines = LineTotals::default();
    let mut emulator: Option<NodeStats> = None;
    let mut outcomes = Vec::with_capacity(parts);
    for (p, report) in reports.into_iter().enumerate() {
        let plan = &prepared.plans[p];
        let e = prepared.layout.values[p];
        view.invalidate(e.offset, e.len).map_err(mem)?;
        view.fence();
        for (i, &l) in plan.masters.iter().enumerate() {
            let at = prepared.layout.value_word(p, i);
            let mut w = [0u64; 2];
            for (k, x) in w.iter_mut().enumerate().take(prepared.words[0]) {
                *x = view.load_u64((at + k) * 8).map_err(mem)?;
            }
            values[plan.globals[l as usize] as usize] = decode::<P::Data>(&w);
        }
        lines.written_back += report.lines.written_back;
        lines.invalidated += report.lines.invalidated;
        if let Some(s) = report.emulator {
            *emulator.get_or_insert_with(NodeStats::default) += s;
        }
        outcomes.push(report.outcome);
    }
    let (_, stats) = prepared.collect(outcomes, lines);
    Ok(DetailedRun {
        run: Run { values, stats },
        emulator,
    })
}

/// One partition's process: runs partition `of.partition` of the launched run and
/// leaves its values and report in the region.
pub(crate) fn serve<P: VertexProgram>(
    prepared: &Prepared,
    program: &P,
    config: &EngineConfig,
    options: &RunOptions,
    of: &PartitionOf,
) -> Result<DetailedRun<P::Data>, GraphError> {
    let parts = prepared.parts();
    let p = of.partition;
    if p >= parts {
        return Err(GraphError::InvalidArgument {
            reason: format!("partition {p} of a run with {parts} partitions"),
        });
    }
    let region = Region::open(&of.region)?;
    let layout = *region.layout();
    if layout.size() as u64 != prepared.region.size() || layout.config().nodes() as usize != parts {
        return Err(GraphError::Layout {
            reason: format!(
                "{} was laid out for another run (another graph, program or configuration)",
                of.region.display()
            ),
        });
    }
    match config.backend {
        Backend::Hardware => {
            #[cfg(loom)]
            let access = Viewed;
            #[cfg(not(loom))]
            let access = Direct(region.backing().words());
            serve_on(
                prepared,
                program,
                config,
                options,
                &region,
                p,
                region.hardware(),
                access,
                |_| None,
            )
        }
        Backend::Emulated { seed } => {
            let view = region.emulated(p, |c| machine(c, seed, options))?;
            let stats = |v: &EmulatedNode| Some(v.stats());
            serve_on(
                prepared, program, config, options, &region, p, view, Viewed, stats,
            )
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn serve_on<P, V, R>(
    prepared: &Prepared,
    program: &P,
    config: &EngineConfig,
    options: &RunOptions,
    region: &Region,
    p: usize,
    view: V,
    access: R,
    emulator: impl Fn(&V) -> Option<NodeStats>,
) -> Result<DetailedRun<P::Data>, GraphError>
where
    P: VertexProgram,
    V: MemView + 'static,
    R: Access<Counted<V>>,
{
    let parts = prepared.parts();
    let counters = Arc::new(LineCounters::default());
    let counted = || Counted::new(view.clone(), counters.clone());
    let barrier = RegionBarrier::new(view.clone(), prepared.layout.meeting.offset, parts, p)
        .with_faults(prepared.faults);
    let mut passes = Passes::new();
    let result = (|| {
        if prepared.mode == Mode::BiPeriodic && parts > 1 {
            let period = options.quiescence_period;
            let (layout, marks) = (*region.layout(), prepared.marks[p].clone());
            let plan = &prepared.sync[p];
            passes.start(counted(), layout, p, plan, marks, prepared.faults, period)?;
        }
        let ctx = prepared.ctx(program, config);
        prepared.run_partition(&ctx, p, counted(), access, &barrier, options)
    })();
    let stopped = passes.stop();
    let result = result.and_then(|o| stopped.map(|()| o));
    let status = match &result {
        Ok(_) => DONE,
        Err(GraphError::Aborted) => ABORTED,
        Err(_) => FAILED,
    };
    if status != DONE {
        barrier.abort();
    }
    // The masters' values (in their slots, data words only) and the report, written back.
    let values = prepared.layout.values[p];
    if let Ok(outcome) = &result {
        for (i, (_, d)) in outcome.masters.iter().enumerate() {
            let at = prepared.layout.value_word(p, i);
            for (k, &x) in encode(d).iter().enumerate().take(prepared.words[0]) {
                view.store_u64((at + k) * 8, x).map_err(mem)?;
            }
        }
    }
    let outcome = result.as_ref().map_or_else(
        |_| PartitionResult::default(),
        PartitionResult::measurements,
    );
    let report = Report {
        status,
        outcome,
        lines: counters.totals(),
        emulator: emulator(&view),
    };
    let e = prepared.layout.reports[p];
    for (k, &x) in report.words().iter().enumerate() {
        view.store_u64(e.offset + k * 8, x).map_err(mem)?;
    }
    view.writeback(values.offset, values.len).map_err(mem)?;
    view.writeback(e.offset, e.len).map_err(mem)?;
    view.fence();
    let outcome = result?;
    let (_, stats) = prepared.collect(vec![outcome.measurements()], counters.totals());
    Ok(DetailedRun {
        run: Run {
            values: Vec::new(),
            stats,
        },
        emulator: emulator(&view),
    })
}
