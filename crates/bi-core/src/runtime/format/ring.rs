//! Log rings: how a writer tells every other node what to invalidate.
//!
//! Each writer node `w` owns two rings in the region ([`RingKind::Modified`] and
//! [`RingKind::Freed`]). Only `w` writes them: the entries, then (after writing them back
//! and fencing) the `tail`, a monotonic count of entries ever appended, alone on the
//! ring's first control line. Other nodes only read: each keeps, in its own process
//! memory, the index of the next entry it has not consumed yet.
//!
//! An entry is `{ offset | lines << 48, time | scope << 48 }`: the first byte and the
//! number of lines to invalidate, the low 48 bits of the writer's clock when it logged
//! them (for diagnostics: nothing depends on it), and the [`Scope`] of the structure they
//! belong to.
//!
//! Space: entry `i` may be overwritten only when every live node's last pass *started*
//! more than `D` ticks after entry `i` became visible in memory, because such a pass read
//! the tail after the entry was there and so consumed it. The writer keeps those
//! visibility times in its own memory. A full ring is back-pressure ([`BiError::LogFull`]),
//! never silent loss. A node that finds more than `capacity` unread entries (it was
//! excluded, and its entries were overwritten) cannot know what it missed and invalidates
//! the whole heap and root directory instead.

use crate::mem::MemView;
use crate::region::layout::RING_CONTROL_SLOTS;
use crate::region::{Layout, RingKind};
use crate::runtime::BiError;
use crate::runtime::object::MAX_OBJECT_LINES;
use crate::runtime::scope::Scope;
use bytemuck::{Pod, Zeroable};
use std::collections::VecDeque;

const OFFSET_MASK: u64 = (1 << 48) - 1;

/// One log entry as stored in a ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub(crate) struct LogEntry {
    /// Offset of the first byte in the low 48 bits, number of lines in the top 16.
    pub(crate) word: u64,
    /// The writer's clock when logged in the low 48 bits, the scope in the top 16.
    pub(crate) tag: u64,
}

impl LogEntry {
    /// An entry covering `lines` lines from `offset`, about `scope`.
    pub(crate) fn new(offset: usize, lines: usize, time: u64, scope: Scope) -> LogEntry {
        let lines = lines.min(MAX_OBJECT_LINES) as u64;
        LogEntry {
            word: (offset as u64 & OFFSET_MASK) | (lines << 48),
            tag: (time & OFFSET_MASK) | (u64::from(scope.raw()) << 48),
        }
    }

    /// The low 48 bits of the writer's clock when logged (no pass needs it: it tells a
    /// reader of the ring's memory when an entry was made).
    #[cfg(test)]
    pub(crate) fn time(&self) -> u64 {
        self.tag & OFFSET_MASK
    }

    /// The structure the lines belong to.
    pub(crate) fn scope(&self) -> Scope {
        Scope::from_raw((self.tag >> 48) as u16)
    }

    /// First byte.
    pub(crate) fn offset(&self) -> usize {
        (self.word & OFFSET_MASK) as usize
    }

    /// Lines covered.
    pub(crate) fn lines(&self) -> usize {
        (self.word >> 48) as usize
    }
}

/// Where one ring lives.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingGeom {
    pub(crate) tail_at: usize,
    entries_at: usize,
    pub(crate) capacity: u64,
    pub(crate) kind: RingKind,
}

impl RingGeom {
    pub(crate) fn new(layout: &Layout, node: usize, kind: RingKind) -> Result<RingGeom, BiError> {
        let s = layout
            .log_ring(node, kind)
            .ok_or_else(|| BiError::BadNode { node })?;
        // A validated layout's rings hold a power of two of entries: a sequence number's
        // place is its low bits.
        if !layout.config().log_ring_entries().is_power_of_two() {
            return Err(BiError::BadConfig {
                reason: "a log ring's entries must be a power of two",
            });
        }
        Ok(RingGeom {
            tail_at: s.offset,
            entries_at: s.offset + RING_CONTROL_SLOTS * layout.slot_size(),
            capacity: u64::from(layout.config().log_ring_entries()),
            kind,
        })
    }

    /// Where in the ring entry `seq` lives (`seq % capacity`, the capacity a power of
    /// two).
    #[inline(always)]
    fn place(&self, seq: u64) -> u64 {
        seq & (self.capacity - 1)
    }

    /// The byte offset of entry `seq`.
    pub(crate) fn entry_at(&self, seq: u64) -> usize {
        self.entries_at + self.place(seq) as usize * size_of::<LogEntry>()
    }

    /// Byte range holding entries `from .. to` (may wrap: returns up to two ranges).
    pub(crate) fn entry_ranges(&self, from: u64, to: u64) -> [(usize, usize); 2] {
        let n = to.saturating_sub(from).min(self.capacity);
        if n == 0 {
            return [(0, 0), (0, 0)];
        }
        let first = self.place(from);
        let e = size_of::<LogEntry>();
        let until_end = (self.capacity - first).min(n);
        [
            (self.entry_at(from), until_end as usize * e),
            (self.entries_at, (n - until_end) as usize * e),
        ]
    }
}

/// The writer's side of one ring.
#[derive(Debug)]
pub(crate) struct RingWriter {
    pub(crate) geom: RingGeom,
    tail: u64,
    /// Visibility times of entries not yet known to be consumed by every live node.
    inflight: VecDeque<u64>,
}

impl RingWriter {
    /// Takes over the ring, reading its tail from memory (so a restarted writer continues
    /// the count). Entries already there count as just written.
    pub(crate) fn open<V: MemView>(view: &V, geom: RingGeom, now: u64) -> Result<Self, BiError> {
        view.invalidate(geom.tail_at, 8)?;
        view.fence();
        let tail: u64 = view.load(geom.tail_at)?;
        let inflight = (0..tail.min(geom.capacity)).map(|_| now).collect();
        Ok(RingWriter {
            geom,
            tail,
            inflight,
        })
    }

    pub(crate) fn free(&self) -> u64 {
        self.geom.capacity - self.inflight.len() as u64
    }

    pub(crate) fn len(&self) -> usize {
        self.inflight.len()
    }

    /// The visibility time of the oldest entry not yet known to be consumed.
    pub(crate) fn oldest(&self) -> Option<u64> {
        self.inflight.front().copied()
    }

    /// Forgets entries every live node has consumed: those visible more than `skew` ticks
    /// before `min_start`, the earliest last-pass start among live nodes.
    pub(crate) fn release(&mut self, min_start: u64, skew: u64) {
        while let Some(&t) = self.inflight.front() {
            if t.saturating_add(skew) < min_start {
                self.inflight.pop_front();
            } else {
                break;
            }
        }
    }

    /// Makes room for `n` entries (at most the capacity) by forgetting the oldest entries
    /// in flight, whether or not every node has consumed them: the next appends overwrite
    /// them ([`Fault::LogBackPressure`](crate::runtime::Fault::LogBackPressure) only).
    pub(crate) fn overwrite_oldest(&mut self, n: usize) {
        let keep = (self.geom.capacity as usize).saturating_sub(n);
        while self.inflight.len() > keep {
            self.inflight.pop_front();
        }
    }

    /// Appends `entries` (the caller checked [`free`](Self::free)): writes them and
    /// writes them back *without* a fence, then [`commit`](Self::commit)s. Whatever the
    /// caller wrote back just before (the slot a publication stored, the FREED marks of
    /// a retirement) reaches memory under the same fence as the entries.
    pub(crate) fn append<V: MemView>(
        &mut self,
        view: &V,
        entries: &[LogEntry],
    ) -> Result<(), BiError> {
        debug_assert!(entries.len() as u64 <= self.free());
        for (k, e) in entries.iter().enumerate() {
            view.store(self.geom.entry_at(self.tail + k as u64), e)?;
        }
        let to = self.tail + entries.len() as u64;
        for (at, len) in self.geom.entry_ranges(self.tail, to) {
            view.writeback(at, len)?;
        }
        self.commit(view, to)?;
        // A hint: the lines the next append of as many entries stores into start on
        // their way into this node's cache (other nodes' passes dropped them when they
        // read the ring; on one machine, from this node's cache too).
        let line = view.line_size().get();
        for (at, len) in self.geom.entry_ranges(to, to + entries.len() as u64) {
            for line_at in (at - at % line..at + len).step_by(line) {
                let _ = view.prefetch(line_at);
            }
        }
        Ok(())
    }

    /// Fences (the entries, and what was written back with them, are in memory before
    /// the tail is stored: a store fence), then stores the tail `to`, writes it back and
    /// fences fully (the tail is in memory before the caller reads the clock to date the
    /// entries): a pass that reads the new tail finds every entry before it.
    fn commit<V: MemView>(&mut self, view: &V, to: u64) -> Result<(), BiError> {
        view.store_fence();
        view.store(self.geom.tail_at, &to)?;
        view.writeback(self.geom.tail_at, 8)?;
        view.fence();
        self.tail = to;
        Ok(())
    }

    /// Records when the last `n` appended entries became visible.
    pub(crate) fn visible(&mut self, n: usize, t: u64) {
        for _ in 0..n {
            self.inflight.push_back(t);
        }
    }
}

/// Reads entries `from .. to` of a ring into `out` (the caller invalidated and fenced).
pub(crate) fn read_entries<V: MemView>(
    view: &V,
    geom: &RingGeom,
    from: u64,
    to: u64,
    out: &mut Vec<LogEntry>,
) -> Result<(), BiError> {
    for seq in from..to {
        out.push(view.load(geom.entry_at(seq))?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::RegionConfig;

    #[test]
    fn an_entry_keeps_offset_lines_scope_and_the_low_48_bits_of_its_time() {
        let scope = Scope::of_slot(8192);
        let e = LogEntry::new(1 << 40, 3, (1 << 48) + 5, scope);
        assert_eq!(
            (e.offset(), e.lines(), e.time(), e.scope()),
            (1 << 40, 3, 5, scope)
        );
        let all = LogEntry::new(4096, 2, 77, Scope::ALL);
        assert_eq!(
            (all.offset(), all.lines(), all.time(), all.scope()),
            (4096, 2, 77, Scope::ALL)
        );
    }

    #[test]
    fn entries_pack_and_ranges_wrap() {
        let e = LogEntry::new(12345, 3, 9, Scope::ALL);
        assert_eq!(
            (e.offset(), e.lines(), e.time(), e.scope()),
            (12345, 3, 9, Scope::ALL)
        );
        let layout = Layout::compute(
            &RegionConfig::new(1 << 18)
                .with_nodes(2)
                .with_log_ring_entries(8),
        )
        .unwrap();
        let g = RingGeom::new(&layout, 1, RingKind::Freed).unwrap();
        let [a, b] = g.entry_ranges(6, 10);
        assert_eq!(a, (g.entry_at(6), 32));
        assert_eq!(b, (g.entry_at(8), 32));
        assert_eq!(g.entry_at(8), g.entry_at(0));
        // Wrapping unevenly, and not wrapping at all: the second range is what is left.
        let [a, b] = g.entry_ranges(5, 10);
        assert_eq!((a, b), ((g.entry_at(5), 48), (g.entry_at(0), 32)));
        let [a, b] = g.entry_ranges(1, 3);
        assert_eq!((a, b.1), ((g.entry_at(1), 32), 0));
        assert!(RingGeom::new(&layout, 2, RingKind::Freed).is_err());
    }

    /// An append starts the lines the next append of as many entries stores into on
    /// their way into the node's cache (the emulator counts the prefetches).
    #[test]
    fn an_append_prefetches_the_lines_of_the_next_one() {
        use crate::mem::{Emulator, EmulatorConfig};
        let config = RegionConfig::new(1 << 18).with_nodes(1);
        let layout = Layout::compute(&config).unwrap();
        let emu = Emulator::new(EmulatorConfig::new(layout.size(), 1));
        let view = emu.node(0);
        let geom = RingGeom::new(&layout, 0, RingKind::Freed).unwrap();
        let mut w = RingWriter {
            geom,
            tail: 0,
            inflight: VecDeque::new(),
        };
        // Seven entries (four to a line): the next seven, 7 .. 14, begin in the middle
        // of the second line, which the append wrote, and end in the fourth.
        let entries = [LogEntry::new(4096, 1, 1, Scope::ALL); 7];
        w.append(&view, &entries).unwrap();
        assert_eq!(emu.stats(0).prefetches, 2, "the third and fourth lines");
        assert!(view.is_cached(geom.entry_at(8)) && view.is_cached(geom.entry_at(12)));
        assert!(
            !view.is_cached(geom.entry_at(16)),
            "no further than the next append"
        );
        w.append(&view, &entries).unwrap();
        assert_eq!(emu.stats(0).prefetches, 4, "the lines of entries 16 .. 21");
    }

    #[test]
    fn an_entry_is_released_only_once_a_pass_started_more_than_the_skew_after_it() {
        let layout = Layout::compute(&RegionConfig::new(1 << 18).with_nodes(2)).unwrap();
        let geom = RingGeom::new(&layout, 0, RingKind::Modified).unwrap();
        let mut w = RingWriter {
            geom,
            tail: 0,
            inflight: VecDeque::new(),
        };
        w.visible(2, 100);
        w.visible(1, 150);
        let (skew, full) = (10, w.geom.capacity);
        assert_eq!(w.free(), full - 3);
        w.release(110, skew); // a pass that started exactly the skew after: not enough
        assert_eq!(w.len(), 3);
        w.release(111, skew);
        assert_eq!(w.len(), 1, "the two entries of tick 100 are consumed");
        w.release(u64::MAX, skew);
        assert_eq!(w.free(), full);
    }
}
