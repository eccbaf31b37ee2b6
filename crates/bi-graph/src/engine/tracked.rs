//! The periodic mode's written-line log: a pass costs what was written since the last
//! one, not the whole of both banks.
//!
//! **Writer side.** A partition marks each line it stores a value or a partial into: a
//! bit per line, in its own process's memory ([`Marks`]). Its node's pass takes the marks
//! of every group of [`GROUP_LINES`] lines, writes back the marked lines, fences, and then
//! stores its pass number into the partition's log word of each group it wrote back (one
//! word per group, in the region), writes those back and fences again ([`WriterLog`]).
//!
//! **Reader side.** A node's pass drops its copies of the log words of the groups it
//! reads lines of, fences, reads them, and drops the lines it reads of every group whose
//! word moved since it last looked ([`ReaderLog`]). So a value stored at time `t` is in
//! memory after the writer's first pass that took its mark, at most a period and a pass
//! after `t`, and no reader's copy of it is older than that reader's next pass: the same
//! bound as writing back and dropping everything each period.
//!
//! **Ordering.** The worker stores a value, then sets the line's bit with a release store
//! (a load, an or and a store: only the worker sets bits, so none is lost; a store that
//! races with the pass's swap sets again bits the pass just took, which costs a second
//! write-back). The pass takes a word of bits with an acquire swap: the values stored
//! before a bit it sees are visible to its write-back. A bit set after the swap is taken
//! by the next pass.
//!
//! # Trade-offs
//!
//! - A line is tracked per store, not per superstep: a partition that stores into a line
//!   in every period gets it written back in every period (PageRank stores each value
//!   once per superstep, so at most twice: once half-written).
//! - The log is per group of 64 lines: a reader drops all the lines it reads of a group
//!   of which one was written. A superstep writes its lines in runs, so this costs little.
//! - Every pass of a reader reads every log word of the groups it reads, written or not:
//!   a word per 64 lines, a 512th of the data.

use crate::engine::shared::SharedLayout;
use bi_core::mem::{MemError, MemView};
use bi_core::runtime::{Fault, Faults};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Lines per group: one word of marks, one word of log.
pub(crate) const GROUP_LINES: usize = 64;

/// The groups of an extent of `len` bytes of `line`-byte lines.
pub(crate) fn groups(len: usize, line: usize) -> usize {
    len.div_ceil(line).div_ceil(GROUP_LINES)
}

/// One extent a partition writes: the marks of its lines and where its log words start.
#[derive(Debug)]
struct Marked {
    offset: usize,
    len: usize,
    log: usize,
    bits: Vec<AtomicU64>,
}

/// The lines a partition stored into since its node's last pass.
#[derive(Debug)]
pub(crate) struct Marks {
    line: usize,
    extents: Vec<Marked>,
}

impl Marks {
    /// Marks, all clear, for what partition `p` writes that others read: `read`, the
    /// first bytes of each extent it logs (its values in bank 0, in bank 1, and its
    /// partials; a master no other partition reads need not be written back).
    pub fn new(layout: &SharedLayout, p: usize, read: [usize; 3]) -> Marks {
        let line = layout.line;
        let extents = layout
            .logged(p)
            .iter()
            .zip(read)
            .enumerate()
            .map(|(e, (x, len))| Marked {
                offset: x.offset,
                len: len.min(x.len),
                log: layout.log_word(p, e, 0),
                bits: (0..groups(len.min(x.len), line))
                    .map(|_| AtomicU64::new(0))
                    .collect(),
            })
            .collect();
        Marks { line, extents }
    }

    /// Marks the lines of the `words` words stored at word index `at` (stores outside
    /// the partition's extents are not tracked).
    #[inline]
    pub fn mark(&self, at: usize, words: usize) {
        let (first, last) = (at * 8, (at + words.max(1)) * 8 - 1);
        for e in &self.extents {
            if first >= e.offset && first < e.offset + e.len {
                let last = last.min(e.offset + e.len - 1);
                for l in (first - e.offset) / self.line..=(last - e.offset) / self.line {
                    let word = &e.bits[l / GROUP_LINES];
                    let bit = 1u64 << (l % GROUP_LINES);
                    // Release: the stores of the line before the bit (see the module docs).
                    word.store(word.load(Ordering::Relaxed) | bit, Ordering::Release);
                }
                return;
            }
        }
    }
}

/// A node's pass over what its partition wrote: write back the marked lines, then log
/// their groups.
#[derive(Debug)]
pub(crate) struct WriterLog {
    marks: std::sync::Arc<Marks>,
    passes: AtomicU64,
}

impl WriterLog {
    pub fn new(marks: std::sync::Arc<Marks>) -> WriterLog {
        WriterLog {
            marks,
            passes: AtomicU64::new(0),
        }
    }

    /// Writes back every line marked since the last call, fences, and stores this pass's
    /// number into the log word of each group written back (then writes those back and
    /// fences.
    pub fn write_back<V: MemView>(&self, view: &V) -> Result<(), MemError> {
        let line = self.marks.line;
        let mut logged = Vec::new();
        for e in &self.marks.extents {
            for (g, word) in e.bits.iter().enumerate() {
                let mut bits = word.swap(0, Ordering::Acquire);
                if bits == 0 {
                    continue;
                }
                while bits != 0 {
                    let start = bits.trailing_zeros() as usize;
                    let run = (bits >> start).trailing_ones() as usize;
                    let at = e.offset + (g * GROUP_LINES + start) * line;
                    view.writeback(at, run * line)?;
                    bits &= (!0u64).checked_shl((start + run) as u32).unwrap_or(0);
                }
                logged.push(e.log + 8 * g);
            }
        }
        if logged.is_empty() {
            return Ok(());
        }
        view.fence();
        let pass = self.passes.fetch_add(1, Ordering::Relaxed) + 1;
        for &at in &logged {
            view.store_u64(at, pass)?;
        }
        for &at in &logged {
            view.writeback(at, 8)?;
        }
        view.fence();
        Ok(())
    }
}

/// The lines a reader reads of one group of another partition's lines, and that group's
/// log word (none: lines no log covers, dropped at every pass).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Watch {
    pub log: Option<usize>,
    pub runs: Vec<(usize, usize)>,
}

/// A node's pass over what the others wrote: drop the lines it reads of the groups
/// logged since its last pass.
#[derive(Debug)]
pub(crate) struct ReaderLog {
    logs: Vec<(usize, usize)>,
    watches: Vec<Watch>,
    seen: Mutex<Vec<u64>>,
    faults: Faults,
}

impl ReaderLog {
    /// A reader of the lines of `watches`, whose log words lie in the lines `logs`.
    pub fn new(logs: Vec<(usize, usize)>, watches: Vec<Watch>, faults: Faults) -> ReaderLog {
        let seen = Mutex::new(vec![0; watches.len()]);
        ReaderLog {
            logs,
            watches,
            seen,
            faults,
        }
    }

    /// Drops the log's lines and fences, then drops the watched lines of every group
    /// whose log word moved since the last call, and fences. ([`Fault::WrittenLog`]: the
    /// log is read through the cache.)
    pub fn drop_written<V: MemView>(&self, view: &V) -> Result<(), MemError> {
        if !self.faults.has(Fault::WrittenLog) {
            for &(o, l) in &self.logs {
                view.invalidate(o, l)?;
            }
            view.fence();
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        for (w, s) in self.watches.iter().zip(seen.iter_mut()) {
            if let Some(at) = w.log {
                let pass = view.load_u64(at)?;
                if pass == *s {
                    continue;
                }
                *s = pass;
            }
            for &(o, l) in &w.runs {
                view.invalidate(o, l)?;
            }
        }
        view.fence();
        Ok(())
    }
}

/// The watches of a reader of the lines `runs` of other partitions (`p` itself excluded):
/// each run cut at the groups of the extents the partitions log, with the lines of no
/// logged extent in one watch of their own; and the runs of lines of their log words.
pub(crate) fn watches(
    layout: &SharedLayout,
    p: usize,
    runs: &[(usize, usize)],
) -> (Vec<(usize, usize)>, Vec<Watch>) {
    let line = layout.line;
    let extents: Vec<(usize, usize, crate::engine::shared::Extent)> = (0..layout.logs.len())
        .filter(|&q| q != p)
        .flat_map(|q| {
            layout
                .logged(q)
                .into_iter()
                .enumerate()
                .map(move |(e, x)| (q, e, x))
        })
        .collect();
    let mut by_log: std::collections::BTreeMap<Option<usize>, Vec<usize>> = Default::default();
    for &(o, l) in runs {
        for at in (o..o + l).step_by(line) {
            let log = extents
                .iter()
                .find(|(_, _, x)| at >= x.offset && at < x.offset + x.len)
                .map(|&(q, e, x)| layout.log_word(q, e, (at - x.offset) / line / GROUP_LINES));
            by_log.entry(log).or_default().push(at);
        }
    }
    let logs = layout.runs(by_log.keys().flatten().copied().collect());
    let watches = by_log
        .into_iter()
        .map(|(log, lines)| Watch {
            log,
            runs: layout.runs(lines),
        })
        .collect();
    (logs, watches)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bi_core::mem::{Emulator, EmulatorConfig};
    use bi_core::runtime::RuntimeConfig;
    use std::sync::Arc;

    const LINE: usize = 64;
    /// Where node 0's two groups of lines start, and its log.
    const DATA: usize = 4096;
    const LOG: usize = 256;

    /// Node 0 writes 128 lines (two groups) and logs them; node 1 reads them all.
    fn pair(faults: Faults) -> (Emulator, Arc<Marks>, WriterLog, ReaderLog) {
        let emu = Emulator::new(EmulatorConfig::new(64 << 10, 2));
        let marks = Arc::new(Marks {
            line: LINE,
            extents: vec![Marked {
                offset: DATA,
                len: 2 * GROUP_LINES * LINE,
                log: LOG,
                bits: (0..2).map(|_| AtomicU64::new(0)).collect(),
            }],
        });
        let watches = (0..2)
            .map(|g| Watch {
                log: Some(LOG + 8 * g),
                runs: vec![(DATA + g * GROUP_LINES * LINE, GROUP_LINES * LINE)],
            })
            .collect();
        let reader = ReaderLog::new(vec![(LOG, LINE)], watches, faults);
        (emu, marks.clone(), WriterLog::new(marks), reader)
    }

    /// Rounds of: node 0 stores the round's number into a line of the first group and
    /// marks it, node 0 passes, node 1 passes and reads the line. Node 1 cached every
    /// line (and the log) before the first round. Returns the reads that found an older
    /// round, and node 1's emulated node.
    fn rounds(faults: Faults) -> (usize, bi_core::mem::EmulatedNode) {
        let (emu, marks, writer, reader) = pair(faults);
        let (w, r) = (emu.node(0), emu.node(1));
        reader.drop_written(&r).unwrap();
        for line in 0..2 * GROUP_LINES {
            r.load_u64(DATA + line * LINE).unwrap();
        }
        let mut stale = 0;
        for round in 1..=6u64 {
            let at = DATA + (round as usize % 3) * LINE;
            w.store_u64(at, round).unwrap();
            marks.mark(at / 8, 1);
            writer.write_back(&w).unwrap();
            reader.drop_written(&r).unwrap();
            stale += usize::from(r.load_u64(at).unwrap() != round);
        }
        (stale, r)
    }

    /// What is written before the writer's pass is read fresh after the reader's next,
    /// and a reader's pass drops the lines of the group written, not the other group's.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "hundreds of emulated lines; the emulator runs under Miri elsewhere"
    )]
    fn a_line_written_before_a_pass_is_read_fresh_after_the_next_and_only_its_group_is_dropped() {
        let (stale, r) = rounds(Faults::default());
        assert_eq!(stale, 0);
        let misses = r.stats().misses;
        for line in GROUP_LINES..2 * GROUP_LINES {
            r.load_u64(DATA + line * LINE).unwrap();
        }
        assert_eq!(
            r.stats().misses,
            misses,
            "the group no one wrote stayed cached"
        );
        r.load_u64(DATA + 10 * LINE).unwrap();
        assert_eq!(
            r.stats().misses,
            misses + 1,
            "the written group was dropped"
        );
    }

    /// Negative control: a reader that reads the log through its cache keeps its first
    /// look at it and never drops a line written after.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "hundreds of emulated lines; the emulator runs under Miri elsewhere"
    )]
    fn a_log_read_through_the_cache_leaves_every_later_write_unseen() {
        let faults = RuntimeConfig::default().fault(Fault::WrittenLog).faults();
        let (stale, _) = rounds(faults);
        assert_eq!(stale, 6);
    }

    /// Marks of stores at the edges: a slot that ends at a line's end marks that line
    /// alone, one that runs past its extent's end marks the extent's last line only, a
    /// line marked twice stays marked, and a store into the second extent is marked there.
    #[test]
    fn marks_at_the_edges_of_lines_and_extents() {
        let marks = Marks {
            line: LINE,
            extents: [(DATA, 128), (DATA + 256 * LINE, 64)]
                .iter()
                .map(|&(offset, lines)| Marked {
                    offset,
                    len: lines * LINE,
                    log: LOG,
                    bits: (0..groups(lines * LINE, LINE))
                        .map(|_| AtomicU64::new(0))
                        .collect(),
                })
                .collect(),
        };
        let bits = |e: usize| -> Vec<u64> {
            marks.extents[e]
                .bits
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect()
        };
        marks.mark(DATA / 8, LINE / 8); // line 0 exactly
        assert_eq!(bits(0), vec![0b1, 0]);
        marks.mark(DATA / 8, 1); // again: still marked
        assert_eq!(bits(0), vec![0b1, 0]);
        marks.mark((DATA + 128 * LINE) / 8 - 1, 2); // the last word, and one past the end
        assert_eq!(bits(0), vec![0b1, 1 << 63]);
        marks.mark((DATA + 256 * LINE + 3 * LINE) / 8, 1); // line 3 of the second extent
        assert_eq!((bits(0), bits(1)), (vec![0b1, 1 << 63], vec![0b1000]));
    }

    /// Every marked line reaches memory, runs apart in one group and lines of the second
    /// group alike: another node that drops its copies reads what was stored.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "hundreds of emulated lines; the emulator runs under Miri elsewhere"
    )]
    fn every_marked_line_reaches_memory() {
        let (emu, marks, writer, _) = pair(Faults::default());
        let (w, r) = (emu.node(0), emu.node(1));
        let lines = [0, 2, 3, 40, GROUP_LINES + 1, 2 * GROUP_LINES - 1];
        for (k, &l) in lines.iter().enumerate() {
            let at = DATA + l * LINE;
            w.store_u64(at, 100 + k as u64).unwrap();
            marks.mark(at / 8, 1);
        }
        writer.write_back(&w).unwrap();
        for (k, &l) in lines.iter().enumerate() {
            let at = DATA + l * LINE;
            r.invalidate(at, 8).unwrap();
            r.fence();
            assert_eq!(r.load_u64(at).unwrap(), 100 + k as u64, "line {l}");
        }
    }

    /// A mark covers every line a stored slot touches, and nothing outside the extents.
    #[test]
    fn marks_cover_the_lines_a_slot_touches() {
        let (emu, marks, writer, _) = pair(Faults::default());
        let w = emu.node(0);
        let stored = [
            DATA + LINE - 8,
            DATA + LINE,
            DATA + 200 * LINE,
            DATA + GROUP_LINES * LINE,
        ];
        for at in stored {
            w.store_u64(at, 7).unwrap();
        }
        marks.mark(stored[0] / 8, 2); // the last word of line 0 and the first of 1
        marks.mark(stored[2] / 8, 1); // outside: not tracked
        marks.mark(stored[3] / 8, 1); // line 0 of group 1
        let taken: Vec<u64> = marks.extents[0]
            .bits
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        assert_eq!(taken, vec![0b11, 0b1]);
        writer.write_back(&w).unwrap();
        assert_eq!(w.stats().lines_written_back, 3 + 1); // the lines, then the log line
        assert!(
            marks.extents[0]
                .bits
                .iter()
                .all(|b| b.load(Ordering::Relaxed) == 0)
        );
        assert_eq!(
            (w.load_u64(LOG).unwrap(), w.load_u64(LOG + 8).unwrap()),
            (1, 1)
        );
    }

    #[test]
    fn groups_round_up_to_whole_lines_and_groups() {
        assert_eq!(groups(0, 64), 0);
        assert_eq!(groups(1, 64), 1);
        assert_eq!(groups(64 * 64, 64), 1);
        assert_eq!(groups(64 * 64 + 1, 64), 2);
    }
    /// A reader's watches put each line it reads of another partition under the log word
    /// of that line's own group, in the extent it lies in (bank 0's values, bank 1's,
    /// the partials), and a line of no logged extent under none. Checked on a layout
    /// made by hand, with lines deep inside their groups so that a group number off by
    /// the line's place in it, or by the extent's offset, shows.
    #[test]
    fn each_line_is_watched_under_its_own_groups_log_word() {
        use crate::engine::shared::{Extent, SharedLayout};
        let extent = |offset, len| Extent { offset, len };
        let group = GROUP_LINES * LINE;
        let layout = SharedLayout {
            line: LINE,
            value_meta: false,
            partial_meta: false,
            value_stride: 1,
            partial_stride: 1,
            segments: vec![],
            // Partition 0: three groups of values, two of partials; partition 1 reads.
            values: vec![extent(1 << 20, 3 * group), extent(1 << 21, group)],
            bank_shift: 1 << 22,
            partials: vec![extent(1 << 23, 2 * group), extent(1 << 24, group)],
            aggregates: vec![],
            logs: vec![extent(4096, 512), extent(8192, 512)],
            reports: vec![],
            meeting: Extent::default(),
            mirrors: vec![],
            channels: vec![],
            end: 1 << 25,
        };
        // (line read, the log word it must be watched under): partition 0's log holds
        // bank 0's three groups, then bank 1's three, then the partials' two.
        let cases = [
            ((1 << 20) + 2 * group + 5 * LINE, Some(4096 + 8 * 2)),
            ((1 << 20) + group + 63 * LINE, Some(4096 + 8)),
            (
                (1 << 20) + (1 << 22) + 2 * group + 9 * LINE,
                Some(4096 + 8 * 5),
            ),
            ((1 << 23) + group + 17 * LINE, Some(4096 + 8 * 7)),
            ((1 << 23) + 3 * LINE, Some(4096 + 8 * 6)),
            (1 << 19, None),
            ((1 << 20) + 3 * group, None), // just past the values, before bank 1
        ];
        let runs: Vec<(usize, usize)> = cases.iter().map(|&(at, _)| (at, LINE)).collect();
        let (logs, watches) = watches(&layout, 1, &runs);
        for (at, expected) in cases {
            let watch = watches
                .iter()
                .find(|w| w.runs.iter().any(|&(o, l)| (o..o + l).contains(&at)))
                .unwrap_or_else(|| panic!("line {at} is not watched: {watches:?}"));
            assert_eq!(watch.log, expected, "line {at}");
        }
        // The reader reads the lines of exactly those log words.
        let words: Vec<usize> = cases.iter().filter_map(|&(_, w)| w).collect();
        assert_eq!(logs, layout.runs(words));
    }
}
