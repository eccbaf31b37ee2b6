//! A run's results, gathered from its partitions: every master's value by vertex and the
//! run's measurements, from each partition's outcome in this process, or from the words
//! partitions in other processes sent.

use super::memory::{LineTotals, decode, encode};
use super::report::{DONE, REPORT_WORDS, Report};
use super::worker::PartitionResult;
use super::{DetailedRun, Run};
use crate::config::RunStats;
use crate::error::GraphError;

/// What assembling a run's results needs to know of the whole run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Whole {
    /// Words of a vertex's data.
    pub data_words: usize,
    pub parts: usize,
    pub vertices: usize,
    pub replication_factor: f64,
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

/// A partition's report of a finished run, as words.
pub(crate) fn report_words<D>(outcome: &PartitionResult<D>, lines: LineTotals) -> Vec<u64> {
    let report = Report {
        status: DONE,
        outcome: outcome.measurements(),
        lines,
        emulator: None,
    };
    report.words().to_vec()
}

/// A partition's masters as words: each one's vertex, then its `data_words` words.
pub(crate) fn master_words<D: bytemuck::Pod>(
    outcome: &PartitionResult<D>,
    data_words: usize,
) -> Vec<u64> {
    let mut words = Vec::with_capacity(outcome.masters.len() * (1 + data_words));
    for (v, d) in &outcome.masters {
        words.push(u64::from(*v));
        words.extend_from_slice(&encode(d)[..data_words]);
    }
    words
}

/// Every vertex's value, from every partition's [`master_words`].
pub(crate) fn values_from_words<'w, D: bytemuck::Pod>(
    whole: Whole,
    masters: impl IntoIterator<Item = &'w [u64]>,
) -> Result<Vec<D>, GraphError> {
    let dw = whole.data_words;
    let mut values = vec![D::zeroed(); whole.vertices];
    for words in masters {
        if words.len() % (1 + dw) != 0 {
            return Err(GraphError::Exchange {
                what: "a partition's values are not whole entries",
            });
        }
        for entry in words.chunks_exact(1 + dw) {
            let mut w = [0u64; 2];
            w[..dw].copy_from_slice(&entry[1..]);
            let slot = usize::try_from(entry[0])
                .ok()
                .and_then(|v| values.get_mut(v))
                .ok_or(GraphError::Exchange {
                    what: "a partition's value names no vertex",
                })?;
            *slot = decode(&w);
        }
    }
    Ok(values)
}

/// The run's measurements, from every partition's [`report_words`], one after the
/// other, and `values` (every vertex's, or none where another process returns them).
pub(crate) fn run_from_reports<D: bytemuck::Pod>(
    whole: Whole,
    reports: &[u64],
    values: Vec<D>,
) -> Result<DetailedRun<D>, GraphError> {
    if reports.len() != REPORT_WORDS * whole.parts {
        return Err(GraphError::Exchange {
            what: "the partitions' reports do not add up",
        });
    }
    let mut lines = LineTotals::default();
    let mut outcomes = Vec::with_capacity(whole.parts);
    for w in reports.chunks_exact(REPORT_WORDS) {
        let mut words = [0u64; REPORT_WORDS];
        words.copy_from_slice(w);
        let report = Report::from_words(&words);
        lines.written_back += report.lines.written_back;
        lines.invalidated += report.lines.invalidated;
        outcomes.push(report.outcome);
    }
    let (_, stats) = collect::<()>(whole.vertices, whole.replication_factor, outcomes, lines);
    Ok(DetailedRun {
        run: Run { values, stats },
        emulator: None,
    })
}
