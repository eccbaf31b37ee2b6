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
//! A graph read in shares ([`launch_shares`], [`serve_share`]) turns this around: no
//! process holds the whole graph, so the partitions lay the region out together,
//! through files of an exchange directory ([`FileGroup`]), from the shapes of each
//! other's plans; partition 0 creates the region, names its meeting lines in the
//! directory and gathers the values and reports. The launcher only starts and watches
//! the processes: when one fails it stops the others in an exchange (the directory's
//! abort file) and at the region's barrier (the meeting lines named there), and removes
//! what they left.
//!
//! [`Placement::Processes`]: crate::Placement::Processes

use super::barrier::{Barrier, RegionBarrier};
#[cfg(not(loom))]
use super::exchange::slots::Direct;
use super::exchange::slots::{Access, Viewed};
use super::file_group::FileGroup;
use super::memory::{Counted, LineCounters, LineTotals, decode, encode};
use super::prepare::{Prepared, machine};
use super::program::VertexProgram;
use super::quiescence::Passes;
use super::report::{ABORTED, DONE, FAILED, REPORT_WORDS, Report};
use super::results::{master_words, report_words, run_from_reports, values_from_words};
use super::share::{Collective, GraphShare};
use super::worker::PartitionResult;
use super::{DetailedRun, Run, RunOptions};
use crate::config::{Backend, EngineConfig, Launch, Mode, PartitionOf};
use crate::error::GraphError;
use bi_core::mem::{EmulatedNode, MemError, MemView, NodeStats};
use bi_core::region::Region;
use std::path::{Path, PathBuf};
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

/// Starts every partition's process and waits for them all to exit, calling `abort`
/// (once) as soon as one fails: the others are given [`GRACE`] to stop on their own and
/// are then killed. Returns each process's exit (`None` for one killed) and the first
/// partition seen to fail.
fn watch(
    launch: &Launch,
    parts: usize,
    mut abort: impl FnMut(),
) -> Result<(Vec<Option<ExitStatus>>, Option<usize>), GraphError> {
    let mut children = Children(Vec::with_capacity(parts));
    for p in 0..parts {
        match (launch.spawn)(p) {
            Ok(child) => children.0.push(Some(child)),
            Err(source) => {
                abort();
                return Err(GraphError::Spawn {
                    partition: p,
                    source,
                });
            }
        }
    }
    // The first process to fail aborts the run for the others.
    let mut exits: Vec<Option<ExitStatus>> = vec![None; parts];
    let mut failed: Option<(usize, Instant)> = None;
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
                if !status.success() && failed.is_none() {
                    abort();
                    failed = Some((p, Instant::now()));
                }
            }
        }
        if failed.is_some_and(|(_, t)| t.elapsed() > GRACE) {
            break; // the rest are killed as `children` drops
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok((exits, failed.map(|(p, _)| p)))
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
    let abort = || RegionBarrier::abort_all(&view, meeting, parts);
    let (exits, _) = watch(launch, parts, abort)?;

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
        let plan = prepared.plan(p)?;
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
    Ok(serve_region(prepared, program, config, options, of)?.measured(prepared))
}

/// What a partition's process ran: its outcome, the lines it wrote back and dropped, and
/// its emulated node's counters.
struct Served<D> {
    outcome: PartitionResult<D>,
    lines: LineTotals,
    emulator: Option<NodeStats>,
}

impl<D: bytemuck::Pod> Served<D> {
    /// What this partition measured, as the run it returns: no values (another process
    /// returns them).
    fn measured(self, prepared: &Prepared) -> DetailedRun<D> {
        let (_, stats) = prepared.collect(vec![self.outcome.measurements()], self.lines);
        DetailedRun {
            run: Run {
                values: Vec::new(),
                stats,
            },
            emulator: self.emulator,
        }
    }
}

/// Runs partition `of.partition` over the region file, which exists.
fn serve_region<P: VertexProgram>(
    prepared: &Prepared,
    program: &P,
    config: &EngineConfig,
    options: &RunOptions,
    of: &PartitionOf,
) -> Result<Served<P::Data>, GraphError> {
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
) -> Result<Served<P::Data>, GraphError>
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
            let layout = *region.layout();
            let (plan, marks) = prepared.passes_of(p)?;
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
    Ok(Served {
        outcome: result?,
        lines: counters.totals(),
        emulator: emulator(&view),
    })
}

/// The directory the partitions of a run reading shares exchange through, beside its
/// region files: `region` with `.exchange` appended.
pub fn exchange_dir(region: &Path) -> PathBuf {
    let mut dir = region.as_os_str().to_owned();
    dir.push(".exchange");
    PathBuf::from(dir)
}

/// The file in which partition 0 names a region it created and the offset of its
/// meeting lines, for the launcher to abort the run there and remove the region.
fn meeting_file(exchange: &Path, tag: &str) -> PathBuf {
    exchange.join(format!("{tag}.meeting"))
}

/// Writes a meeting file: the offset, then the region's path, one to a line.
fn name_meeting(file: &Path, region: &Path, offset: usize) -> Result<(), GraphError> {
    let io = |source| GraphError::Io {
        file: file.to_path_buf(),
        source,
    };
    let region = std::path::absolute(region).map_err(io)?;
    let mut tmp = file.as_os_str().to_owned();
    tmp.push(".part");
    let text = format!("{offset}\n{}", region.display());
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, file).map_err(io)
}

/// Calls `f` with the region and meeting offset of every meeting file in `exchange`.
fn for_each_meeting(exchange: &Path, mut f: impl FnMut(&Path, usize)) {
    let Ok(entries) = std::fs::read_dir(exchange) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "meeting") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if let Some((offset, region)) = text.split_once('\n')
            && let Ok(offset) = offset.parse()
        {
            f(Path::new(region), offset);
        }
    }
}

/// Aborts the run at the barrier of every region named in `exchange`.
fn abort_regions(exchange: &Path, parts: usize) {
    for_each_meeting(exchange, |region, offset| {
        if let Ok(region) = Region::open(region) {
            RegionBarrier::abort_all(&region.hardware(), offset, parts);
        }
    });
}

/// The tag of a run's exchanges: its mode and the region file's name, in the letters a
/// tag allows (runs of several modes follow one another over one region path, each
/// with exchanges of its own).
fn tag_of(region: &Path, mode: Mode) -> String {
    let name = region
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tag: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{mode:?}-{tag}")
}

/// One partition's process of a run whose partitions read the graph in shares
/// ([`GraphShare`]): the partitions lay the region out together (through files in
/// `exchange`), partition 0 creates it, each runs its partition, and partition 0
/// gathers every value and report, as the launcher does when it holds the graph.
pub(crate) fn serve_share<P: VertexProgram>(
    program: &P,
    share: &GraphShare,
    config: &EngineConfig,
    options: &RunOptions,
    of: &PartitionOf,
    exchange: &Path,
) -> Result<DetailedRun<P::Data>, GraphError> {
    let p = share.part();
    if of.partition != p || config.nodes != share.parts() {
        return Err(GraphError::InvalidArgument {
            reason: format!(
                "partition {} of {} was given partition {p}'s share of {}",
                of.partition,
                config.nodes,
                share.parts()
            ),
        });
    }
    let tag = tag_of(&of.region, config.mode);
    let group = FileGroup::join(exchange, &tag, p, share.parts())?;
    let prepared = Prepared::of_share(program, share, &group, config, options)?;
    let meeting = meeting_file(exchange, &tag);
    if p == 0 {
        let region = Region::create(&of.region, prepared.region)?;
        let view = region.hardware();
        if prepared.mode == Mode::Stock {
            prepared.init_channels(|_| view.clone())?;
        }
        view.fence();
        // Named before the others may start, so that a launcher that aborts finds it.
        name_meeting(&meeting, &of.region, prepared.layout.meeting.offset)?;
    }
    group.all_gather(&[])?; // the region exists
    let served = serve_region(&prepared, program, config, options, of);
    // Every partition reports, failed or not, so that partition 0 never waits for one
    // that will not.
    let (masters, report) = match &served {
        Ok(s) => (
            master_words(&s.outcome, prepared.words[0]),
            report_words(&s.outcome, s.lines),
        ),
        Err(_) => (Vec::new(), Vec::new()),
    };
    let gathered = group
        .gather(&report)
        .and_then(|r| Ok(r.zip(group.gather(&masters)?)));
    let served = served?;
    let Some((reports, masters)) = gathered? else {
        return Ok(served.measured(&prepared));
    };
    let _ = std::fs::remove_file(&meeting);
    remove_region(&of.region);
    if reports.iter().any(Vec::is_empty) {
        return Err(GraphError::Aborted);
    }
    let whole = prepared.whole();
    let values = values_from_words(whole, masters.iter().map(Vec::as_slice))?;
    let mut run = run_from_reports(whole, &reports.concat(), values)?;
    run.emulator = served.emulator;
    Ok(run)
}

/// Removes a region file and the emulator's history beside it.
pub fn remove_region(path: &Path) {
    let _ = std::fs::remove_file(path);
    let mut history = path.as_os_str().to_owned();
    history.push(".history");
    let _ = std::fs::remove_file(history);
}

/// Starts every partition's process of a run whose partitions read the graph in shares
/// and waits for them: creates the exchange directory beside `launch.region`
/// ([`exchange_dir`]), and when a partition fails, stops the others wherever they wait,
/// in an exchange or at a barrier of the region, and removes what they left.
///
/// Each process reads its share ([`GraphShare::read`] over a
/// [`FileGroup`] of that directory) and runs it with
/// [`Placement::Partition`](crate::Placement::Partition), the directory in
/// [`PartitionOf::exchange`]: partition 0 creates the region at `PartitionOf::region`,
/// returns every value and removes the region after the run.
///
/// # Errors
///
/// [`GraphError::Io`] when the exchange directory cannot be made (or exists: it is
/// never taken over), [`GraphError::Spawn`], and [`GraphError::PartitionFailed`] naming
/// the first partition whose process failed.
pub fn launch_shares(launch: &Launch, parts: usize) -> Result<(), GraphError> {
    let exchange = exchange_dir(&launch.region);
    std::fs::create_dir(&exchange).map_err(|source| GraphError::Io {
        file: exchange.clone(),
        source,
    })?;
    let watched = watch(launch, parts, || {
        let _ = FileGroup::abort(&exchange);
        abort_regions(&exchange, parts);
    });
    for_each_meeting(&exchange, |region, _| remove_region(region));
    let _ = std::fs::remove_dir_all(&exchange);
    let (exits, failed) = watched?;
    match failed {
        None => Ok(()),
        Some(partition) => Err(GraphError::PartitionFailed {
            partition,
            reason: match exits[partition] {
                Some(status) if status.code().is_some() => {
                    format!("{} (its error is on its standard error)", describe(status))
                }
                Some(status) => describe(status),
                None => "was stopped".to_owned(),
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Graph;
    use crate::input::GraphReader;
    use crate::{EngineConfig, Placement, Wcc};
    use std::io::Write;

    /// A share run as a partition's process must be that partition, of as many
    /// partitions as the share was read by.
    #[test]
    fn a_share_runs_only_as_its_own_partition() {
        let dir = tempfile::tempdir().unwrap();
        let graph = dir.path().join("g.txt");
        writeln!(std::fs::File::create(&graph).unwrap(), "1 2\n2 3").unwrap();
        let group = FileGroup::join(dir.path(), "read", 0, 1).unwrap();
        let share = GraphShare::read(
            &GraphReader::new(),
            &graph,
            crate::Partitioner::Random,
            1,
            &group,
        )
        .unwrap();
        let of = |partition| PartitionOf {
            region: dir.path().join("run.bi"),
            partition,
            exchange: Some(dir.path().to_path_buf()),
        };
        let config = |nodes, partition| EngineConfig {
            nodes,
            placement: Placement::Partition(of(partition)),
            ..EngineConfig::default()
        };
        for (nodes, partition) in [(1, 1), (2, 0)] {
            let refused = share.run_program(&Wcc, &config(nodes, partition));
            assert!(
                matches!(refused, Err(GraphError::InvalidArgument { .. })),
                "{nodes} {partition}: {refused:?}"
            );
        }
        let run = crate::wcc(&share, &config(1, 0)).unwrap();
        assert_eq!(run.values, [0, 0, 0]);
        assert!(
            !dir.path().join("run.bi").exists(),
            "partition 0 removes it"
        );
    }
}
