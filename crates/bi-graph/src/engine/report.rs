//! What a partition measured, as words another process reads: a partition that is a
//! process leaves its report in the region, an MPI rank sends it.

use super::memory::LineTotals;
use super::worker::PartitionResult;
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
            },
            lines: LineTotals {
                written_back: w[6],
                invalidated: w[7],
            },
            emulator: (w[8] == 1).then(|| stats_of(&w[9..24])),
        }
    }
}
