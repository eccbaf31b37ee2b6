//! Where each partition's shared arrays lie in the region.
//!
//! Every array belongs to exactly one partition, which is its only writer, and starts on
//! a line boundary and is padded to whole lines: no line is ever written by two
//! partitions, so no write-back can clobber another partition's bytes.
//!
//! ```text
//! bank 0:           values[p]    per partition, one slot per master: data words | meta word
//!                   mirrors[p]   per partition, copies of masters in other pools (two-level)
//! bank 1:           the same arrays again, `bank_shift` bytes further
//! per partition p:  partials[p]  one slot per feeding replica: gather words | meta word,
//!                                grouped by master partition, in vertex order
//!                   aggregate[p] two lines, one per bank: aggregate words | changed count
//!                   log[p]       the periodic mode's written-line log: a pass number per
//!                                group of 64 lines of values[p] in bank 0, in bank 1,
//!                                then of partials[p] (`tracked`)
//!                   report[p]    what the partition measured (processes only)
//! meeting:          one line per partition, then the launcher's (processes only)
//! per ordered pair: channel p -> q (stock mode only)
//! ```
//!
//! A meta word is `stamp << 1 | flag` ([`Meta`](super::exchange::Meta)): the stamp is the
//! superstep that wrote the slot (values: 0 at initialisation, `t + 1` after the apply of
//! superstep `t`; partials: `t + 1` in superstep `t`, 0 = never written), the flag says
//! "changed" (values) or "signalled" (partials). The values of stamp `s` are in bank
//! `s % 2` ([`bank`](super::exchange::bank)): superstep `t` reads bank `t % 2` while its
//! masters write bank `(t + 1) % 2`, so a master applies as soon as its own gather is
//! done, without waiting for others to finish reading its old value. Meta words exist
//! only where someone reads them: PageRank in the stock and on-demand modes has 8-byte
//! value slots, eight to a line, like a plain array of ranks.

use super::barrier::RegionBarrier;
use super::memory::words_of;
use super::plan::PartShape;
use super::report::REPORT_WORDS;
use super::tracked;
use crate::error::GraphError;
use bi_core::channel::ChannelLayout;
use bi_core::line::LineSize;

/// A stock-mode message: `[index | flag << 32, meta, value word 0, value word 1]`.
pub(crate) type Msg = [u64; 4];

/// Byte ranges of one partition's arrays.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Extent {
    pub offset: usize,
    pub len: usize,
}

/// The placement of every shared array of a run.
#[derive(Debug)]
pub(crate) struct SharedLayout {
    pub line: usize,
    /// Whether value slots carry a meta word.
    pub value_meta: bool,
    /// Whether partial slots carry a meta word.
    pub partial_meta: bool,
    /// Words per value slot (data and meta, rounded up to a power of two).
    pub value_stride: usize,
    /// Words per partial slot.
    pub partial_stride: usize,
    /// `segments[q][m]`: first slot, in partition `q`'s partial array, of the replicas
    /// whose master is `m` (they follow in increasing vertex order, which is `m`'s master
    /// order, so a master reads each replica partition's segment front to back).
    pub segments: Vec<Vec<usize>>,
    /// Bank 0 of each partition's value slots.
    pub values: Vec<Extent>,
    /// Bytes from a value (or mirror) slot in bank 0 to the same slot in bank 1.
    pub bank_shift: usize,
    pub partials: Vec<Extent>,
    /// Two lines per partition: the aggregate of the values of bank 0, then of bank 1.
    pub aggregates: Vec<Extent>,
    /// Each partition's written-line log ([`log_word`](Self::log_word)).
    pub logs: Vec<Extent>,
    /// Where a partition that is a process leaves its measurements for the launcher.
    pub reports: Vec<Extent>,
    /// The barrier of partitions that are processes: one line per partition, then the
    /// launcher's.
    pub meeting: Extent,
    /// Per partition, value slots holding copies of masters in other pools, received
    /// once per pool and superstep (the two-level mode over MPI). Bank 0, like `values`.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))] // the two-level mode (feature `mpi`)
    pub mirrors: Vec<Extent>,
    /// `channels[p * parts + q]`: partition `p` sends to `q`.
    pub channels: Vec<Option<ChannelLayout<Msg>>>,
    /// Bytes needed from the first offset.
    pub end: usize,
}

pub(crate) fn stride(data_words: usize, meta: bool) -> usize {
    (data_words + usize::from(meta)).next_power_of_two()
}

/// Which meta words a run needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Metas {
    /// Value slots carry stamps and "changed" flags (scatter, staleness).
    pub values: bool,
    /// Partial slots carry stamps and signals.
    pub partials: bool,
}

impl SharedLayout {
    /// The shape of a value slot: its words, and whether its last word is a meta word.
    pub fn value_slots(&self) -> (usize, bool) {
        (self.value_stride, self.value_meta)
    }

    /// Lays out the arrays from `base` (line-aligned) on.
    /// `mirrors[p]` value slots are laid out for partition `p` besides its masters' (the
    /// two-level mode's copies of masters in other pools; empty otherwise).
    #[allow(clippy::too_many_arguments)]
    pub fn new<D, G>(
        base: usize,
        line: LineSize,
        shapes: &[PartShape],
        metas: Metas,
        channels: bool,
        capacity: usize,
        mirrors: &[usize],
    ) -> Result<SharedLayout, GraphError> {
        let l = line.get();
        let value_stride = stride(words_of::<D>(), metas.values);
        let partial_stride = stride(words_of::<G>(), metas.partials);
        let parts = shapes.len();
        let segments: Vec<Vec<usize>> = shapes
            .iter()
            .enumerate()
            .map(|(q, shape)| {
                let mut start = vec![0usize; parts];
                let mut at = 0;
                for (m, s) in start.iter_mut().enumerate() {
                    *s = at;
                    if m != q {
                        at += shape.feeders[m];
                    }
                }
                start
            })
            .collect();
        let mut at = base;
        let overflow = || GraphError::TooLarge {
            reason: "its shared arrays do not fit the address space".into(),
        };
        let mut take = |bytes: usize| -> Result<Extent, GraphError> {
            let len = bytes
                .checked_next_multiple_of(l)
                .ok_or_else(overflow)?
                .max(l);
            let e = Extent { offset: at, len };
            at = at.checked_add(len).ok_or_else(overflow)?;
            Ok(e)
        };
        let values: Vec<Extent> = shapes
            .iter()
            .map(|shape| take(shape.masters * value_stride * 8))
            .collect::<Result<_, _>>()?;
        let mirrors: Vec<Extent> = (0..parts)
            .map(|p| take(mirrors.get(p).copied().unwrap_or(0) * value_stride * 8))
            .collect::<Result<_, _>>()?;
        // Bank 1: the value and mirror arrays again, right after bank 0 (whole lines).
        let bank_shift = mirrors.last().map_or(0, |e| e.offset + e.len - base);
        take(bank_shift)?;
        let mut partials = Vec::new();
        let mut aggregates = Vec::new();
        let mut logs = Vec::new();
        for (p, shape) in shapes.iter().enumerate() {
            let feeding = take(shape.feeding() * partial_stride * 8)?;
            partials.push(feeding);
            aggregates.push(take(2 * l)?);
            let groups = 2 * tracked::groups(values[p].len, l) + tracked::groups(feeding.len, l);
            logs.push(take(groups * 8)?);
        }
        let reports = (0..parts)
            .map(|_| take(REPORT_WORDS * 8))
            .collect::<Result<_, _>>()?;
        let meeting = take(RegionBarrier::<()>::lines(parts) * l)?;
        let mut chans = vec![None; parts * parts];
        if channels {
            for p in 0..parts {
                for q in 0..parts {
                    if p != q {
                        let offset = take(0)?.offset;
                        let layout = ChannelLayout::<Msg>::new(offset, capacity, line)?;
                        // `take(0)` reserved one line; reserve the rest of the channel.
                        take(layout.len().saturating_sub(l))?;
                        chans[p * parts + q] = Some(layout);
                    }
                }
            }
        }
        if at > (u32::MAX as usize) * 8 {
            return Err(GraphError::TooLarge {
                reason: format!("{at} bytes of shared arrays exceed 32-bit word indices"),
            });
        }
        Ok(SharedLayout {
            line: l,
            value_meta: metas.values,
            partial_meta: metas.partials,
            value_stride,
            partial_stride,
            segments,
            values,
            bank_shift,
            partials,
            aggregates,
            logs,
            reports,
            meeting,
            mirrors,
            channels: chans,
            end: at,
        })
    }

    /// Partition `p`'s aggregate line of `bank`, as an offset and a length.
    pub fn aggregate_line(&self, p: usize, bank: usize) -> (usize, usize) {
        (self.aggregates[p].offset + bank * self.line, self.line)
    }

    /// The extents partition `p` writes and logs, in the order of its log: its values in
    /// bank 0, in bank 1, and its partials.
    pub fn logged(&self, p: usize) -> [Extent; 3] {
        let values = self.values[p];
        let shifted = Extent {
            offset: values.offset + self.bank_shift,
            ..values
        };
        [values, shifted, self.partials[p]]
    }

    /// The byte offset of partition `p`'s log word for group `g` of its extent `e` (in
    /// [`logged`](Self::logged)'s order).
    pub fn log_word(&self, p: usize, e: usize, g: usize) -> usize {
        let before: usize = self.logged(p)[..e]
            .iter()
            .map(|x| tracked::groups(x.len, self.line))
            .sum();
        self.logs[p].offset + 8 * (before + g)
    }

    /// Word index of master `i`'s value slot on partition `p`, in bank 0.
    #[inline]
    pub fn value_word(&self, p: usize, i: usize) -> usize {
        self.values[p].offset / 8 + i * self.value_stride
    }

    /// Word index of mirror slot `k` of partition `p`, in bank 0.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))] // the two-level mode (feature `mpi`)
    #[inline]
    pub fn mirror_word(&self, p: usize, k: usize) -> usize {
        self.mirrors[p].offset / 8 + k * self.value_stride
    }

    /// Word index of slot `k` of partition `p`'s partial array.
    #[inline]
    pub fn partial_word(&self, p: usize, k: usize) -> usize {
        self.partials[p].offset / 8 + k * self.partial_stride
    }

    /// Words from a value slot in bank 0 to the slot in `bank`.
    #[inline]
    pub fn bank_words(&self, bank: usize) -> usize {
        bank * self.bank_shift / 8
    }

    /// `ranges` of bank 0, moved to `bank`.
    pub fn in_bank(&self, ranges: &[(usize, usize)], bank: usize) -> Vec<(usize, usize)> {
        let shift = bank * self.bank_shift;
        ranges.iter().map(|&(o, l)| (o + shift, l)).collect()
    }

    /// Byte range of the segment of partition `q`'s partials read by master `m`.
    pub fn segment_range(&self, q: usize, m: usize, replicas: usize) -> (usize, usize) {
        let start = self.partial_word(q, self.segments[q][m]) * 8;
        let len = replicas * self.partial_stride * 8;
        let first = start - start % self.line;
        let end = (start + len).next_multiple_of(self.line);
        (first, if len == 0 { 0 } else { end - first })
    }

    /// Coalesced line ranges `(offset, len)` covering the given byte offsets.
    pub fn runs(&self, mut offsets: Vec<usize>) -> Vec<(usize, usize)> {
        let l = self.line;
        for o in &mut offsets {
            *o -= *o % l;
        }
        offsets.sort_unstable();
        offsets.dedup();
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for o in offsets {
            match runs.last_mut() {
                Some((start, len)) if *start + *len == o => *len += l,
                _ => runs.push((o, l)),
            }
        }
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_coalesce_lines() {
        let layout = SharedLayout {
            line: 64,
            value_meta: true,
            partial_meta: true,
            value_stride: 2,
            partial_stride: 2,
            segments: vec![],
            values: vec![],
            bank_shift: 0,
            partials: vec![],
            aggregates: vec![],
            logs: vec![],
            reports: vec![],
            meeting: Extent::default(),
            mirrors: vec![],
            channels: vec![],
            end: 0,
        };
        assert_eq!(
            layout.runs(vec![130, 64, 70, 256, 400]),
            vec![(64, 128), (256, 64), (384, 64)]
        );
        assert!(layout.runs(vec![]).is_empty());
    }
}
