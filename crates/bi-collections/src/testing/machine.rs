//! Checks on the emulated machine as a whole: reuse hazards and legal failures.

use super::{History, Violation};
use crate::{CollectionError, Op};
use bi_alloc::NodeHeap;
use bi_core::mem::EmulatedNode;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, RuntimeConfig, Writer};
use std::collections::BTreeMap;
use std::fmt::Debug;

/// A small emulated machine described by a few bytes (what a fuzzer chooses): event
/// rates, clock skew and the size of node 0's heap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hardware {
    /// Emulator seed.
    pub seed: u64,
    /// Eviction rate, scaled to 0..0.2.
    pub eviction: u8,
    /// Adjacent-line prefetch rate: `(b % 4) * 0.1`.
    pub adjacent_prefetch: u8,
    /// Random prefetch rate: `(b % 4) * 0.02`.
    pub random_prefetch: u8,
    /// Per-node clock skew bound in ticks: `b % 32` (the runtime is told twice that).
    pub skew: u8,
    /// Node 0's heap: `2 + b % 16` KiB, small enough to be exhausted.
    pub heap_kib: u8,
    /// Late write-backs, landing early at a rate of `(b % 4) * 0.05` (0: a write-back
    /// lands when asked; see `EmulatorConfig::late_writebacks`).
    pub late_writebacks: u8,
}

impl Hardware {
    /// The emulator's per-node clock skew bound, in ticks.
    pub fn skew_ticks(&self) -> u64 {
        u64::from(self.skew % 32)
    }

    /// Whether the machine prefetches at all (without prefetch, reuse hazards must be 0).
    pub fn prefetches(&self) -> bool {
        !self.adjacent_prefetch.is_multiple_of(4) || !self.random_prefetch.is_multiple_of(4)
    }

    /// The machine (`nodes` nodes, 256 KiB, 256-line caches, leases too long to expire)
    /// and a heap over the start of node 0's arena.
    ///
    /// # Panics
    ///
    /// On impossible parameters (a test fixture).
    pub fn build(&self, nodes: usize) -> (Setup, NodeHeap) {
        let eviction = f64::from(self.eviction) / 255.0 * 0.2;
        let adjacent = f64::from(self.adjacent_prefetch % 4) * 0.1;
        let random = f64::from(self.random_prefetch % 4) * 0.02;
        let late = f64::from(self.late_writebacks % 4) * 0.05;
        let skew = self.skew_ticks();
        let s = Setup::with(
            RegionConfig::new(1 << 18).with_nodes(nodes as u32),
            |c| {
                c.seed(self.seed)
                    .eviction_rate(eviction)
                    .adjacent_prefetch_rate(adjacent)
                    .random_prefetch_rate(random)
                    .late_writebacks(late)
                    .clock_skew(skew)
                    .cache_lines(256)
            },
            RuntimeConfig::default()
                .node_lease(1 << 40)
                .reader_lease(1 << 40)
                .skew(2 * skew),
        );
        let arena = s.arena(0);
        let len = ((2 + usize::from(self.heap_kib % 16)) * 1024).min(arena.len());
        let heap = NodeHeap::new(
            arena.start..arena.start + len,
            s.region.layout().line_size(),
        )
        .expect("heap over node 0's arena");
        (s, heap)
    }
}

/// After a failed write: the error must be a legal one, and `actual` (the writer's
/// contents) the model after a prefix of `ops` (nothing, for a single operation: pass an
/// empty `ops`). Records in `h` what was published.
pub fn check_failed_write<K: Ord + Clone + Debug, V: Eq + Clone + Debug>(
    h: &mut History<K, V>,
    ops: &[Op<K, V>],
    actual: &BTreeMap<K, V>,
    e: &CollectionError,
) -> Result<(), Violation> {
    if !is_resource_exhaustion(e) {
        return Err(Violation::new(format!("unexpected error: {e}")));
    }
    let n = h.matching_prefix(ops, actual).ok_or_else(|| {
        Violation::new(format!("after {e}, the contents are no prefix of {ops:?}"))
    })?;
    if n > 0 {
        h.publish_ops(&ops[..n]);
    }
    Ok(())
}

/// Every load of an older incarnation of a reused block (counted by the emulator's
/// oracle) must have been rejected by a reader's generation check: the oracle's count may
/// not exceed the readers' rejected loads. With `no_prefetch` (the machine ran without
/// prefetch), the grace period alone keeps such lines out of every cache: the count must
/// be zero.
pub fn check_reuse_hazards(s: &Setup, no_prefetch: bool) -> Result<(), Violation> {
    let hazards = s.emu.total_stats().reuse_hazards;
    let rejected: u64 = s.nodes.iter().map(|n| n.mismatches()).sum();
    if hazards > rejected {
        return Err(Violation::new(format!(
            "{hazards} loads of reused blocks' old incarnations, only {rejected} rejected"
        )));
    }
    if no_prefetch && hazards > 0 {
        return Err(Violation::new(format!(
            "{hazards} loads of reused blocks' old incarnations without prefetch"
        )));
    }
    Ok(())
}

/// Whether `e` is a documented, legal failure of a write on a small machine: the heap is
/// exhausted or a log ring is full. The structure then stays as last published.
pub fn is_resource_exhaustion(e: &CollectionError) -> bool {
    matches!(
        e,
        CollectionError::Runtime(BiError::Heap(_) | BiError::LogFull { .. })
    )
}

/// Node 0's writer over a [`NodeHeap`] of `bytes` at the start of node 0's arena: a heap
/// small enough that tests run it out of room.
///
/// # Panics
///
/// If `bytes` is not a whole number of lines or exceeds the arena, or node 0's writer
/// cannot be made.
///
/// ```
/// use bi_collections::testing::small_heap_writer;
/// use bi_core::heap::Heap;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// let w = small_heap_writer(&s, 16 * 1024);
/// assert_eq!(w.heap().stats().live, 0);
/// ```
pub fn small_heap_writer(s: &Setup, bytes: usize) -> Writer<EmulatedNode, NodeHeap> {
    let start = s.arena(0).start;
    let heap = NodeHeap::new(start..start + bytes, s.region.layout().line_size()).unwrap();
    s.nodes[0].writer(heap).unwrap()
}

/// Writes `bad` over the bytes at `offset` of the emulated memory: the adoption
/// `adopt(1)` (node 1's) must be refused as corrupt and leave the word in `slot` (the
/// structure's root) as it was; with the bytes restored, returns `adopt(0)`, node 0's
/// adoption, for the caller to check whole.
#[cfg(test)]
pub(crate) fn refused_while_corrupt<W>(
    s: &Setup,
    slot: usize,
    offset: usize,
    bad: &[u8],
    what: &str,
    adopt: impl Fn(usize) -> Result<W, CollectionError>,
) -> W {
    let mut good = vec![0u8; bad.len()];
    s.emu.backing().load_bytes(offset, &mut good).unwrap();
    let root: u64 = s.emu.peek(slot).unwrap();
    s.emu.backing().store_bytes(offset, bad).unwrap();
    match adopt(1) {
        Err(CollectionError::Corrupt { .. }) => {}
        Err(e) => panic!("{what}: {e}"),
        Ok(_) => panic!("{what}: adopted"),
    }
    assert_eq!(s.emu.peek::<u64>(slot).unwrap(), root, "{what}");
    s.emu.backing().store_bytes(offset, &good).unwrap();
    adopt(0).unwrap_or_else(|e| panic!("{what}, restored: {e}"))
}
