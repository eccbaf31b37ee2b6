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
                .ok_or_else(|| GraphError::Exchange {
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

#[cfg(test)]
mod tests {
    use super::*;

    const WHOLE: Whole = Whole {
        data_words: 1,
        parts: 2,
        vertices: 4,
        replication_factor: 1.5,
    };

    #[test]
    fn values_land_on_their_vertices_and_bad_entries_are_refused() {
        let values: Vec<u64> =
            values_from_words(WHOLE, [&[3, 30, 0, 10][..], &[2, 20][..]]).unwrap();
        assert_eq!(values, [10, 0, 20, 30]);
        for bad in [&[3, 30, 0][..], &[4, 1][..]] {
            assert!(matches!(
                values_from_words::<u64>(WHOLE, [bad]),
                Err(GraphError::Exchange { .. })
            ));
        }
    }

    #[test]
    fn the_reports_add_up_to_the_run() {
        let outcome = |iterations, messages, edges| PartitionResult::<u64> {
            iterations,
            messages,
            edges_gathered: edges,
            ..PartitionResult::default()
        };
        let lines = |written_back, invalidated| LineTotals {
            written_back,
            invalidated,
        };
        let mut reports = report_words(&outcome(5, 7, 11), lines(3, 4));
        reports.extend(report_words(&outcome(6, 2, 1), lines(5, 6)));
        let run = run_from_reports(WHOLE, &reports, vec![1u64, 2, 3, 4]).unwrap();
        let s = &run.run.stats;
        assert_eq!(run.run.values, [1, 2, 3, 4]);
        assert_eq!(s.iterations, 6);
        assert_eq!(s.messages_sent, 9);
        assert_eq!(s.edges_gathered, 12);
        assert_eq!((s.lines_written_back, s.lines_invalidated), (8, 10));
        assert_eq!(s.replication_factor, 1.5);
        assert!(run_from_reports::<u64>(WHOLE, &reports[1..], Vec::new()).is_err());
    }
}
