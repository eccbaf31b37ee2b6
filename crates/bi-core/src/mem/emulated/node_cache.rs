//! One node's private line cache: the place where copies go stale.
//!
//! Everything the emulator models happens between a node's copy of a line and memory: a
//! copy is filled on a miss, modified by stores, and goes back to memory only when the
//! program writes it back or invalidates it, or when the cache needs the room (so a store
//! can reach memory at a moment, and in an order, the program did not choose). Between
//! those moments, other nodes' write-backs do not touch the copy at all, which is exactly
//! what makes it stale.
//!
//! The cache is set-associative, like the hardware it stands for: line `n` may live only
//! in set `n % sets`, in any of its `ways` slots, so a load that hits is a short scan of
//! one set rather than a hash lookup. Line bytes sit in one flat array indexed by slot.
//! All of a node's threads share one cache behind one lock (a node is a coherence domain),
//! so this type is plain single-threaded data; the lock lives in the caller.
//!
//! Seeded random events (random evictions, adjacent and random prefetches, eviction
//! victims) are drawn from the node's own generator, so a single-threaded program replays
//! identically for a given seed. When every event rate is zero no random number is drawn on
//! a hit.

use super::clock::Clock;
use super::config::EmulatorConfig;
use super::oracle::Oracle;
use super::stats::NodeStats;
use crate::line::LineSize;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;

/// A slot that holds no line.
const EMPTY: usize = usize::MAX;
/// `stale_since` of a copy not yet known to be stale.
const NOT_STALE: u64 = u64::MAX;

/// A write-back that reached memory and that other nodes' copies must learn about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Mark {
    pub(super) line: usize,
    pub(super) version: u64,
    pub(super) at: u64,
}

/// What one operation works with besides the cache: memory, time, and the write-backs it
/// caused so far.
pub(super) struct Ctx<'a> {
    pub(super) oracle: &'a Oracle,
    pub(super) clock: &'a Clock,
    pub(super) marks: Vec<Mark>,
}

impl Ctx<'_> {
    /// The current true time (read only when needed: summing the clock is not free).
    fn now(&self) -> u64 {
        self.clock.now()
    }
}

/// Bookkeeping for one slot; its bytes live in `NodeCache::data`.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// The memory line held, or `EMPTY`.
    tag: usize,
    dirty: bool,
    /// Every byte of the line was stored since the copy was filled or last written back,
    /// so its write-back carries nothing of an older version: it overwrites newer memory
    /// as a coherent machine's last store would, and that is no lost write-back.
    whole: bool,
    /// Memory's version when this copy was filled or last written back.
    version: u64,
    /// Memory's incarnation at the same moment.
    incarnation: u64,
    /// When memory first moved past `version`, once known.
    stale_since: u64,
    /// Its write-back has started and not landed (late write-backs only).
    pending: bool,
}

const FREE: Slot = Slot {
    tag: EMPTY,
    dirty: false,
    whole: false,
    version: 0,
    incarnation: 0,
    stale_since: NOT_STALE,
    pending: false,
};

#[derive(Clone, Copy, Debug)]
struct Rates {
    evict: f64,
    adjacent: f64,
    random: f64,
    /// Of a pending write-back landing early; zero: write-backs land when asked.
    land: f64,
}

/// A node's cache, its event generator and its counters.
#[derive(Debug)]
pub(super) struct NodeCache {
    line: LineSize,
    sets: usize,
    ways: usize,
    slots: Box<[Slot]>,
    data: Box<[u8]>,
    rng: SmallRng,
    events: bool,
    rates: Rates,
    /// Lines recently dropped by invalidate, newest last: random prefetch candidates.
    recent: VecDeque<usize>,
    recent_cap: usize,
    /// Lines whose write-back has started but not landed (late write-backs only).
    pending: Vec<usize>,
    pub(super) stats: NodeStats,
}

impl NodeCache {
    /// An empty cache for node `node`, shaped by a validated `cfg`.
    pub(super) fn new(cfg: &EmulatorConfig, node: usize) -> NodeCache {
        let slots = cfg.sets * cfg.ways;
        let stream = (node as u64)
            .wrapping_add(1)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        NodeCache {
            line: cfg.line,
            sets: cfg.sets,
            ways: cfg.ways,
            slots: vec![FREE; slots].into_boxed_slice(),
            data: vec![0; slots * cfg.line.get()].into_boxed_slice(),
            rng: SmallRng::seed_from_u64(cfg.seed ^ stream),
            events: cfg.has_events(),
            rates: Rates {
                evict: cfg.eviction_rate,
                adjacent: cfg.adjacent_prefetch_rate,
                random: cfg.random_prefetch_rate,
                land: cfg.early_landing_rate,
            },
            recent: VecDeque::with_capacity(cfg.recent_invalidations),
            recent_cap: cfg.recent_invalidations,
            pending: Vec::new(),
            stats: NodeStats::default(),
        }
    }

    #[inline]
    fn set_start(&self, line: usize) -> usize {
        let set = if self.sets.is_power_of_two() {
            line & (self.sets - 1)
        } else {
            line % self.sets
        };
        set * self.ways
    }

    /// The slot holding `line`, if cached.
    #[inline]
    fn find(&self, line: usize) -> Option<usize> {
        let start = self.set_start(line);
        (start..start + self.ways).find(|&i| self.slots[i].tag == line)
    }

    #[inline]
    fn bytes(&self, slot: usize) -> &[u8] {
        let ls = self.line.get();
        &self.data[slot * ls..(slot + 1) * ls]
    }

    /// Whether `line` is cached (for tests and the node handle).
    pub(super) fn holds(&self, line: usize) -> bool {
        self.find(line).is_some()
    }

    /// Whether `line` is cached and dirty.
    pub(super) fn is_dirty(&self, line: usize) -> bool {
        self.find(line).is_some_and(|i| self.slots[i].dirty)
    }

    /// Copies a dirty slot to memory and keeps it, clean.
    fn write_back_slot(&mut self, slot: usize, cx: &mut Ctx<'_>) {
        let s = self.slots[slot];
        if s.tag == EMPTY || !s.dirty {
            return;
        }
        let ls = self.line.get();
        let now = cx.now();
        let w = cx.oracle.write_back(
            s.tag,
            &self.data[slot * ls..(slot + 1) * ls],
            s.version,
            now,
        );
        self.slots[slot] = Slot {
            tag: s.tag,
            dirty: false,
            whole: false,
            version: w.version,
            incarnation: w.incarnation,
            stale_since: NOT_STALE,
            pending: false,
        };
        self.stats.lines_written_back += 1;
        if w.lost_update && !s.whole {
            self.stats.lost_writes += 1;
            self.stats.last_lost_line = Some(s.tag * ls);
        }
        cx.marks.push(Mark {
            line: s.tag,
            version: w.version,
            at: now,
        });
    }

    /// Evicts a slot the program did not ask to drop (writing it back if dirty).
    fn evict_slot(&mut self, slot: usize, cx: &mut Ctx<'_>) {
        if self.slots[slot].tag == EMPTY {
            return;
        }
        if self.slots[slot].dirty {
            self.write_back_slot(slot, cx);
            self.stats.dirty_evictions += 1;
        }
        self.stats.evictions += 1;
        self.slots[slot] = FREE;
    }

    /// Fills `line` (not cached) into a free or evicted slot of its set.
    fn install(&mut self, line: usize, cx: &mut Ctx<'_>) -> usize {
        let start = self.set_start(line);
        let slot = match (start..start + self.ways).find(|&i| self.slots[i].tag == EMPTY) {
            Some(free) => free,
            None => {
                let victim = start + self.rng.random_range(0..self.ways);
                self.evict_slot(victim, cx);
                victim
            }
        };
        let ls = self.line.get();
        let snap = cx
            .oracle
            .fill(line, &mut self.data[slot * ls..(slot + 1) * ls]);
        self.slots[slot] = Slot {
            tag: line,
            dirty: false,
            whole: false,
            version: snap.version,
            incarnation: snap.incarnation,
            stale_since: NOT_STALE,
            pending: false,
        };
        slot
    }

    /// The slot holding `line`, filling it on a miss (and perhaps prefetching the next).
    #[inline]
    fn ensure(&mut self, line: usize, cx: &mut Ctx<'_>) -> usize {
        if let Some(slot) = self.find(line) {
            self.stats.hits += 1;
            return slot;
        }
        self.stats.misses += 1;
        // Prefetch first, so that filling the neighbour can never evict the demanded line.
        if self.rates.adjacent > 0.0 && self.rng.random_bool(self.rates.adjacent) {
            self.prefetch_line(line + 1, cx);
        }
        self.install(line, cx)
    }

    /// Fills `line` if it exists and is not cached, as a prefetcher would.
    pub(super) fn prefetch_line(&mut self, line: usize, cx: &mut Ctx<'_>) {
        if line < cx.oracle.lines() && self.find(line).is_none() {
            self.install(line, cx);
            self.stats.prefetches += 1;
        }
    }

    /// Evicts `line` if cached, as the hardware may at any time.
    pub(super) fn evict_line(&mut self, line: usize, cx: &mut Ctx<'_>) {
        if let Some(slot) = self.find(line) {
            self.evict_slot(slot, cx);
        }
    }

    /// Draws this operation's random events.
    #[inline]
    pub(super) fn events(&mut self, cx: &mut Ctx<'_>) {
        if !self.events {
            return;
        }
        if self.rates.evict > 0.0 && self.rng.random_bool(self.rates.evict) {
            let slot = self.rng.random_range(0..self.slots.len());
            self.evict_slot(slot, cx);
        }
        if self.rates.random > 0.0
            && !self.recent.is_empty()
            && self.rng.random_bool(self.rates.random)
        {
            let pick = self.rng.random_range(0..self.recent.len());
            if let Some(line) = self.recent.remove(pick) {
                self.prefetch_line(line, cx);
            }
        }
        if self.rates.land > 0.0
            && !self.pending.is_empty()
            && self.rng.random_bool(self.rates.land)
        {
            let pick = self.rng.random_range(0..self.pending.len());
            self.land(pick, cx);
            self.stats.early_landings += 1;
        }
    }

    /// Completes pending write-back `index` (if its line is still pending: an eviction
    /// or invalidation since has already written it back).
    fn land(&mut self, index: usize, cx: &mut Ctx<'_>) {
        let line = self.pending.swap_remove(index);
        if let Some(slot) = self.find(line).filter(|&slot| self.slots[slot].pending) {
            self.write_back_slot(slot, cx);
        }
    }

    /// A fence: every pending write-back lands, in an order drawn at random.
    pub(super) fn fence(&mut self, cx: &mut Ctx<'_>) {
        self.stats.fences += 1;
        while !self.pending.is_empty() {
            let pick = self.rng.random_range(0..self.pending.len());
            self.land(pick, cx);
        }
    }

    /// Judges the copy in `slot` (holding `line`) against memory: is it stale, and is it
    /// from an older incarnation? A stale copy of the current incarnation counts its
    /// staleness; one of an older incarnation does not: no pass is due to drop it (the
    /// new incarnation's lines are logged nowhere), so its age says nothing of the
    /// passes, and what must hold of it is that the read it made was rejected
    /// ([`reuse_hazards`](super::NodeStats::reuse_hazards)).
    #[inline]
    fn judge(&mut self, slot: usize, line: usize, cx: &Ctx<'_>) -> (bool, bool) {
        let s = &mut self.slots[slot];
        let stale = s.version < cx.oracle.version(line);
        let reused = s.incarnation < cx.oracle.incarnation(line);
        if stale && !reused {
            if s.stale_since == NOT_STALE {
                // The write-back that outdated this copy has not marked it yet (it is in
                // flight on another thread): date it by memory's last write-back.
                s.stale_since = cx.oracle.written_at(line);
            }
            let staleness = cx.now().saturating_sub(s.stale_since);
            if staleness > self.stats.max_staleness {
                self.stats.max_staleness = staleness;
                self.stats.stalest_line = Some(line * self.line.get());
            }
        }
        (stale, reused)
    }

    /// Where byte `offset` sits in its line, and whether `len` bytes from there stay in it.
    #[inline]
    fn within_line(&self, offset: usize, len: usize) -> (usize, bool) {
        let at = offset - self.line.align_down(offset);
        (at, len != 0 && at + len <= self.line.get())
    }

    /// Reads `dst.len()` bytes at `offset` (in bounds) through the cache, judging each
    /// line against the oracle.
    #[inline]
    pub(super) fn load(&mut self, offset: usize, dst: &mut [u8], cx: &mut Ctx<'_>) {
        self.stats.loads += 1;
        let ls = self.line.get();
        let (at, one_line) = self.within_line(offset, dst.len());
        let (stale, reused) = if one_line {
            // The common case, kept short: one line, a copy of known length.
            let line = self.line.line_of(offset);
            let slot = self.ensure(line, cx);
            let verdict = self.judge(slot, line, cx);
            let start = slot * ls + at;
            dst.copy_from_slice(&self.data[start..start + dst.len()]);
            verdict
        } else {
            let (mut stale, mut reused) = (false, false);
            let mut done = 0;
            for line in self.line.lines(offset, dst.len()) {
                let slot = self.ensure(line, cx);
                let (s, r) = self.judge(slot, line, cx);
                (stale, reused) = (stale | s, reused | r);
                let at = offset + done - line * ls;
                let take = (ls - at).min(dst.len() - done);
                dst[done..done + take].copy_from_slice(&self.bytes(slot)[at..at + take]);
                done += take;
            }
            (stale, reused)
        };
        self.stats.stale_reads += u64::from(stale);
        self.stats.reuse_hazards += u64::from(reused);
    }

    /// Writes `src` at `offset` (in bounds) into the cache, filling lines on a miss.
    #[inline]
    pub(super) fn store(&mut self, offset: usize, src: &[u8], cx: &mut Ctx<'_>) {
        self.stats.stores += 1;
        let ls = self.line.get();
        let (at, one_line) = self.within_line(offset, src.len());
        if one_line {
            let slot = self.ensure(self.line.line_of(offset), cx);
            let s = &mut self.slots[slot];
            s.dirty = true;
            s.whole |= src.len() == ls;
            let start = slot * ls + at;
            self.data[start..start + src.len()].copy_from_slice(src);
            return;
        }
        let mut done = 0;
        for line in self.line.lines(offset, src.len()) {
            let slot = self.ensure(line, cx);
            let at = offset + done - line * ls;
            let take = (ls - at).min(src.len() - done);
            let s = &mut self.slots[slot];
            s.dirty = true;
            s.whole |= take == ls;
            self.data[slot * ls + at..slot * ls + at + take]
                .copy_from_slice(&src[done..done + take]);
            done += take;
        }
    }

    /// Applies `f` to every slot holding a line of `offset .. offset + len`, found by
    /// whichever is shorter: the range's lines (in address order) or the whole cache (in
    /// slot order).
    fn for_each_in(
        &mut self,
        offset: usize,
        len: usize,
        cx: &mut Ctx<'_>,
        mut f: impl FnMut(&mut NodeCache, usize, &mut Ctx<'_>),
    ) {
        let lines = self.line.lines(offset, len);
        if lines.len() <= self.slots.len() {
            for line in lines {
                if let Some(slot) = self.find(line) {
                    f(self, slot, cx);
                }
            }
        } else {
            for slot in 0..self.slots.len() {
                if lines.contains(&self.slots[slot].tag) {
                    f(self, slot, cx);
                }
            }
        }
    }

    /// Writes back the dirty lines of a range, keeping them: at once, or, with late
    /// write-backs, by the next fence.
    pub(super) fn write_back(&mut self, offset: usize, len: usize, cx: &mut Ctx<'_>) {
        if self.rates.land > 0.0 {
            self.for_each_in(offset, len, cx, |c, slot, _| {
                let s = &mut c.slots[slot];
                if s.dirty && !s.pending {
                    s.pending = true;
                    c.pending.push(s.tag);
                }
            });
            return;
        }
        self.for_each_in(offset, len, cx, |c, slot, cx| c.write_back_slot(slot, cx));
    }

    /// Writes back the dirty lines of a range, then drops every line of it.
    pub(super) fn invalidate(&mut self, offset: usize, len: usize, cx: &mut Ctx<'_>) {
        self.for_each_in(offset, len, cx, |c, slot, cx| {
            let line = c.slots[slot].tag;
            c.write_back_slot(slot, cx);
            c.slots[slot] = FREE;
            c.stats.lines_invalidated += 1;
            if c.recent_cap > 0 {
                if c.recent.len() == c.recent_cap {
                    c.recent.pop_front();
                }
                c.recent.push_back(line);
            }
        });
    }

    /// The host dies: every line is dropped, and the dirty ones never reach memory.
    /// Returns how many dirty lines were lost.
    pub(super) fn lose_everything(&mut self) -> usize {
        let mut lost = 0;
        self.pending.clear();
        for slot in &mut self.slots {
            lost += usize::from(slot.tag != EMPTY && slot.dirty);
            *slot = FREE;
        }
        lost
    }

    /// Records that memory moved past older copies of the marked lines.
    pub(super) fn mark_stale(&mut self, marks: &[Mark]) {
        for m in marks {
            if let Some(slot) = self.find(m.line) {
                let s = &mut self.slots[slot];
                if s.version < m.version && s.stale_since == NOT_STALE {
                    s.stale_since = m.at;
                }
            }
        }
    }

    /// Zeroes the counters.
    pub(super) fn reset_stats(&mut self) {
        self.stats = NodeStats::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Backing;
    use crate::mem::emulated::config::ClockSource;
    use std::sync::Arc;

    struct Rig {
        oracle: Oracle,
        clock: Clock,
    }

    impl Rig {
        fn new(cfg: &EmulatorConfig) -> Rig {
            let backing = Arc::new(Backing::anonymous(cfg.size).unwrap());
            Rig {
                oracle: Oracle::new(backing, cfg.line).unwrap(),
                clock: Clock::new(ClockSource::Virtual, 1),
            }
        }

        /// Runs `op` at time `at` and returns the write-backs it caused.
        fn at(&self, at: u64, op: impl FnOnce(&mut Ctx<'_>)) -> Vec<Mark> {
            self.clock.advance(at - self.clock.now());
            let mut cx = Ctx {
                oracle: &self.oracle,
                clock: &self.clock,
                marks: Vec::new(),
            };
            op(&mut cx);
            cx.marks
        }
    }

    #[test]
    fn full_set_evicts_and_writes_back_dirty_victim() {
        let cfg = EmulatorConfig::new(1024, 2).cache_geometry(1, 2);
        let (rig, mut a) = (Rig::new(&cfg), NodeCache::new(&cfg, 0));
        assert!(rig.at(1, |cx| a.store(0, &[1], cx)).is_empty());
        assert!(rig.at(2, |cx| a.store(64, &[2], cx)).is_empty());
        // A third line: one of the first two must go.
        let marks = rig.at(3, |cx| a.store(128, &[3], cx));
        assert_eq!(a.stats.evictions, 1);
        assert_eq!(a.stats.dirty_evictions, 1);
        assert_eq!(marks.len(), 1);
        assert_eq!(marks[0].at, 3);
        assert!(!a.holds(marks[0].line) && a.holds(2) && a.is_dirty(2));
    }

    #[test]
    fn mark_stale_dates_the_first_write_back_only() {
        // In the third line: its byte offset is not its index.
        const AT: usize = 130;
        let cfg = EmulatorConfig::new(1024, 2);
        let rig = Rig::new(&cfg);
        let (mut a, mut b) = (NodeCache::new(&cfg, 0), NodeCache::new(&cfg, 1));
        let mut out = [0u8; 1];
        rig.at(1, |cx| b.load(AT, &mut out, cx));
        rig.at(2, |cx| a.store(AT, &[5], cx));
        b.mark_stale(&rig.at(3, |cx| a.write_back(AT, 1, cx)));
        rig.at(4, |cx| a.store(AT, &[6], cx));
        b.mark_stale(&rig.at(7, |cx| a.write_back(AT, 1, cx)));
        rig.at(10, |cx| b.load(AT, &mut out, cx));
        assert_eq!(out, [0]);
        assert_eq!((b.stats.stale_reads, b.stats.max_staleness), (1, 7));
        assert_eq!(b.stats.stalest_line, Some(128), "the line's byte offset");
    }

    #[test]
    fn only_a_write_back_carrying_stale_bytes_is_a_lost_write() {
        let cfg = EmulatorConfig::new(1024, 3);
        let rig = Rig::new(&cfg);
        let mut n: Vec<NodeCache> = (0..3).map(|i| NodeCache::new(&cfg, i)).collect();
        let mut out = [0u8; 1];
        // Every node copies lines 0, 1 and 2 at version 0.
        for c in &mut n {
            rig.at(1, |cx| (0..3).for_each(|l| c.load(l * 64, &mut out, cx)));
        }
        // Node 0 moves memory past all three copies.
        rig.at(2, |cx| n[0].store(0, &[9; 192], cx));
        rig.at(3, |cx| n[0].write_back(0, 192, cx));
        // Node 1 replaces line 0 whole: its stale bytes are all overwritten, so its
        // write-back is a coherent machine's last store, not a lost write.
        rig.at(4, |cx| n[1].store(0, &[1; 64], cx));
        rig.at(5, |cx| n[1].store(8, &[2; 8], cx));
        rig.at(6, |cx| n[1].write_back(0, 64, cx));
        assert_eq!(n[1].stats.lost_writes, 0);
        // Node 2 writes 64 bytes across lines 1 and 2, whole in neither: both write-backs
        // carry stale bytes of version 0.
        rig.at(7, |cx| n[2].store(96, &[3; 64], cx));
        rig.at(8, |cx| n[2].write_back(64, 128, cx));
        assert_eq!(n[2].stats.lost_writes, 2);
        // A whole store counts only until the write-back: the next partial store over a
        // copy gone stale again loses a write.
        rig.at(9, |cx| n[0].store(0, &[4; 64], cx));
        rig.at(10, |cx| n[0].write_back(0, 64, cx));
        rig.at(11, |cx| n[1].store(0, &[5], cx));
        rig.at(12, |cx| n[1].write_back(0, 64, cx));
        assert_eq!(n[1].stats.lost_writes, 1);
    }

    #[test]
    fn large_ranges_scan_the_cache_instead_of_the_range() {
        let cfg = EmulatorConfig::new(1 << 16, 1).cache_lines(2);
        let (rig, mut a) = (Rig::new(&cfg), NodeCache::new(&cfg, 0));
        rig.at(1, |cx| a.store(640, &[1], cx));
        rig.at(2, |cx| a.invalidate(0, 1 << 16, cx));
        assert_eq!(
            (a.stats.lines_invalidated, a.stats.lines_written_back),
            (1, 1)
        );
        assert_eq!(a.recent.iter().copied().collect::<Vec<_>>(), vec![10]);
    }
}
