//! Per-node counters: what each node's cache did, and which hazards the oracle saw.
//!
//! A hazard that is merely possible cannot be asserted on; a count can. Each node keeps
//! plain counters inside its locked cache state (no atomics on the hot path), and a test
//! reads a snapshot with [`EmulatedNode::stats`](super::EmulatedNode::stats) or
//! [`Emulator::total_stats`](super::Emulator::total_stats).

use std::fmt;
use std::ops::AddAssign;

/// A snapshot of one node's counters (or, from
/// [`Emulator::total_stats`](super::Emulator::total_stats), of all nodes together).
///
/// Loads and stores count operations; hits and misses count the lines those operations
/// touched (an access spanning two lines is one load and two hits, misses or a mix).
///
/// ```
/// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
///
/// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
/// let a = emu.node(0);
/// a.load::<u64>(0).unwrap();
/// a.load::<u64>(8).unwrap();
/// let s = a.stats();
/// assert_eq!((s.loads, s.misses, s.hits), (2, 1, 1));
/// assert_eq!(s.stale_reads, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeStats {
    /// Load operations.
    pub loads: u64,
    /// Store operations.
    pub stores: u64,
    /// Lines found in the cache by loads and stores.
    pub hits: u64,
    /// Lines that loads and stores had to fill from memory.
    pub misses: u64,
    /// Loads that returned at least one byte from a copy older than memory.
    pub stale_reads: u64,
    /// The longest time, in clock units, that a copy returned by a load had been out of
    /// date, among copies of the memory's current incarnation (one of an older
    /// incarnation is a [reuse hazard](Self::reuse_hazards), whatever its age).
    pub max_staleness: u64,
    /// The byte offset of the line whose copy was that stale, to tell which part of a
    /// region a late invalidation left behind.
    pub stalest_line: Option<usize>,
    /// Loads that returned at least one byte from a copy filled before the memory was
    /// reused (an older incarnation).
    pub reuse_hazards: u64,
    /// Dirty lines written back over a newer write-back by another node while carrying
    /// bytes of the older copy: the other node's bytes in that line were lost. A line
    /// this node stored whole since it was filled carries no stale byte; its write-back
    /// replaces the other node's as a coherent machine's later store would, and is not
    /// counted (a flag protocol's claims, written as whole lines, overwrite by design).
    pub lost_writes: u64,
    /// The byte offset of the line of the last lost write-back counted in
    /// [`lost_writes`](Self::lost_writes), to tell which part of a region lost it.
    pub last_lost_line: Option<usize>,
    /// Dirty lines copied to memory, for any reason (write-back, invalidate, eviction).
    pub lines_written_back: u64,
    /// Lines dropped by `invalidate` or `flush`.
    pub lines_invalidated: u64,
    /// Lines evicted without the program asking: capacity, random events and the
    /// explicit `evict` hook.
    pub evictions: u64,
    /// Evictions of dirty lines, each of which wrote the line back.
    pub dirty_evictions: u64,
    /// Lines filled by prefetch (adjacent, random, or the explicit `prefetch` hook).
    pub prefetches: u64,
    /// Fences.
    pub fences: u64,
    /// Write-backs that reached memory before the fence that was to complete them, in
    /// an order the program did not choose (with
    /// [`late_writebacks`](super::EmulatorConfig::late_writebacks) only).
    pub early_landings: u64,
}

impl AddAssign for NodeStats {
    /// Adds counters; `max_staleness` takes the maximum (and `stalest_line` the line
    /// of that maximum), `last_lost_line` the added one's if it has one.
    fn add_assign(&mut self, o: NodeStats) {
        if o.max_staleness > self.max_staleness {
            self.stalest_line = o.stalest_line;
        }
        self.loads += o.loads;
        self.stores += o.stores;
        self.hits += o.hits;
        self.misses += o.misses;
        self.stale_reads += o.stale_reads;
        self.max_staleness = self.max_staleness.max(o.max_staleness);
        self.reuse_hazards += o.reuse_hazards;
        self.lost_writes += o.lost_writes;
        self.last_lost_line = o.last_lost_line.or(self.last_lost_line);
        self.lines_written_back += o.lines_written_back;
        self.lines_invalidated += o.lines_invalidated;
        self.evictions += o.evictions;
        self.dirty_evictions += o.dirty_evictions;
        self.prefetches += o.prefetches;
        self.fences += o.fences;
        self.early_landings += o.early_landings;
    }
}

impl fmt::Display for NodeStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "loads {} stores {} hits {} misses {} stale {} (max {}) reuse {} lost {} \
             written back {} invalidated {} evicted {} (dirty {}) prefetched {} fences {} \
             landed early {}",
            self.loads,
            self.stores,
            self.hits,
            self.misses,
            self.stale_reads,
            self.max_staleness,
            self.reuse_hazards,
            self.lost_writes,
            self.lines_written_back,
            self.lines_invalidated,
            self.evictions,
            self.dirty_evictions,
            self.prefetches,
            self.fences,
            self.early_landings
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_counts_and_maxes_staleness() {
        let mut a = NodeStats {
            loads: 2,
            max_staleness: 5,
            stalest_line: Some(64),
            ..NodeStats::default()
        };
        a += NodeStats {
            loads: 3,
            max_staleness: 4,
            stalest_line: Some(128),
            fences: 1,
            ..NodeStats::default()
        };
        assert_eq!((a.loads, a.max_staleness, a.fences), (5, 5, 1));
        assert_eq!(a.stalest_line, Some(64), "the line of the larger staleness");
        a += NodeStats {
            max_staleness: 9,
            stalest_line: Some(192),
            ..NodeStats::default()
        };
        assert_eq!((a.max_staleness, a.stalest_line), (9, Some(192)));
        assert!(a.to_string().contains("loads 5"));
    }
}
