//! What a partition measured, as words another process reads: a partition that is a
//! process leaves its report in the region, an MPI rank sends it.

use super::memory::LineTotals;
use super::worker::PartitionResult;
use crate::config::Phases;
use bi_core::mem::NodeStats;
use std::time::Duration;

/// Words of a report.
pub(crate) const REPORT_WORDS: usize = 32;

/// A report's first word: how the partition ended.
pub(crate) const DONE: u64 = 0xB1_D0E5;
pub(crate) const FAILED: u64 = 0xB1_FA11;
pub(crate) const ABORTED: u64 = 0xB1_AB07;

/// The emulator's counters as report words, and back.
fn stats_words(s: &NodeStats) -> [u64; 15] {
    [
        s.loads,
        s.stores,
        s.hits,
        s.misses,
        s.stale_reads,
        s.max_staleness,
        s.reuse_hazards,
        s.lost_writes,
        s.lines_written_back,
        s.lines_invalidated,
        s.evictions,
        s.dirty_evictions,
        s.prefetches,
        s.fences,
        s.early_landings,
    ]
}

fn stats_of(w: &[u64]) -> NodeStats {
    let mut s = NodeStats::default();
    let fields = [
        &mut s.loads,
        &mut s.stores,
        &mut s.hits,
        &mut s.misses,
        &mut s.stale_reads,
        &mut s.max_staleness,
        &mut s.reuse_hazards,
        &mut s.lost_writes,
        &mut s.lines_written_back,
        &mut s.lines_invalidated,
        &mut s.evictions,
        &mut s.dirty_evictions,
        &mut s.prefetches,
        &mut s.fences,
        &mut s.early_landings,
    ];
    for (field, &x) in fields.into_iter().zip(w) {
        *field = x;
    }
    s
}

/// A partition's report: `[status, iterations, compute ns, messages, max staleness,
/// edges gathered, lines written back, lines invalidated, emulated, emulator counters..]`.
pub(crate) struct Report {
    pub status: u64,
    pub outcome: PartitionResult<()>,
    pub lines: LineTotals,
    pub emulator: Option<NodeStats>,
}

impl Report {
    pub fn words(&self) -> [u64; REPORT_WORDS] {
        let o = &self.outcome;
        let mut w = [0u64; REPORT_WORDS];
        w[..9].copy_from_slice(&[
            self.status,
            o.iterations as u64,
            u64::try_from(o.compute_time.as_nanos()).unwrap_or(u64::MAX),
            o.messages,
            o.max_staleness,
            o.edges_gathered,
            self.lines.written_back,
            self.lines.invalidated,
            u64::from(self.emulator.is_some()),
        ]);
        if let Some(s) = &self.emulator {
            w[9..24].copy_from_slice(&stats_words(s));
        }
        w[24..31].copy_from_slice(&o.phases.to_nanos());
        w
    }

    pub fn from_words(w: &[u64; REPORT_WORDS]) -> Report {
        Report {
            status: w[0],
            outcome: PartitionResult {
                masters: Vec::new(),
                iterations: usize::try_from(w[1]).unwrap_or(usize::MAX),
                compute_time: Duration::from_nanos(w[2]),
                messages: w[3],
                max_staleness: w[4],
                edges_gathered: w[5],
                phases: Phases::from_nanos(std::array::from_fn(|k| w[24 + k])),
            },
            lines: LineTotals {
                written_back: w[6],
                invalidated: w[7],
            },
            emulator: (w[8] == 1).then(|| stats_of(&w[9..24])),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every measurement a partition reports survives the words another process reads:
    /// each field a different value, so a field written into another's word shows.
    #[test]
    fn a_report_reads_back_from_its_words() {
        let emulator = NodeStats {
            loads: 101,
            early_landings: 115,
            ..NodeStats::default()
        };
        let report = Report {
            status: DONE,
            outcome: PartitionResult {
                masters: Vec::new(),
                iterations: 2,
                compute_time: Duration::from_nanos(3),
                messages: 4,
                max_staleness: 5,
                edges_gathered: 6,
                phases: Phases::from_nanos([11, 12, 13, 14, 15, 16, 17]),
            },
            lines: LineTotals {
                written_back: 7,
                invalidated: 8,
            },
            emulator: Some(emulator),
        };
        let back = Report::from_words(&report.words());
        assert_eq!(back.status, DONE);
        let (o, b) = (&report.outcome, &back.outcome);
        assert_eq!(
            (
                b.iterations,
                b.compute_time,
                b.messages,
                b.max_staleness,
                b.edges_gathered
            ),
            (
                o.iterations,
                o.compute_time,
                o.messages,
                o.max_staleness,
                o.edges_gathered
            )
        );
        assert_eq!(b.phases, o.phases);
        assert_eq!((back.lines.written_back, back.lines.invalidated), (7, 8));
        let stats = back.emulator.expect("the emulator's counts");
        assert_eq!((stats.loads, stats.early_landings), (101, 115));
    }
}
