//! Memory stays bounded under steady updates.
//!
//! A writer that keeps replacing objects frees (after each grace period) about as much as
//! it allocates. This test drives a [`NodeHeap`] through a long run of such cycles with a
//! bounded working set of mixed sizes and checks that it never runs out of memory and that
//! the arena's footprint (the most of it ever cut into slots or runs) stays under a stated
//! bound and all but stops growing once the run is warm.
//!
//! The working set: 32 small or medium objects (1 to 16 lines, every class up to 16 lines)
//! and 2 large ones (65 to 128 lines, exact runs). At most 32 x 16 + 2 x 128 = 768 lines
//! are live at any time; the arena has 2048 lines (128 KiB with 64-byte lines).

use bi_alloc::NodeHeap;
use bi_core::heap::{Block, Heap};
use bi_core::line::LineSize;

const LINE: usize = 64;
const ARENA_LINES: usize = 2048;
const SMALL: usize = 32;
const LARGE: usize = 2;
/// Live lines can never exceed this (32 slots of at most 16 lines, 2 runs of at most 128).
const MAX_LIVE_LINES: usize = SMALL * 16 + LARGE * 128;

/// xorshift64*: a fixed, dependency-free sequence.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Mostly small objects: 70% up to 4 lines, the rest up to 16 lines.
    fn small_bytes(&mut self) -> usize {
        if self.below(10) < 7 {
            1 + self.below(4 * LINE)
        } else {
            1 + self.below(16 * LINE)
        }
    }

    fn large_bytes(&mut self) -> usize {
        64 * LINE + 1 + self.below(64 * LINE)
    }
}

#[test]
fn steady_alloc_free_cycles_stay_bounded() {
    let cycles: usize = if cfg!(miri) { 1_500 } else { 1_000_000 };
    let mut heap = NodeHeap::new(0..ARENA_LINES * LINE, LineSize::X86).unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut small: Vec<Block> = (0..SMALL)
        .map(|_| heap.alloc(rng.small_bytes()).unwrap())
        .collect();
    let mut large: Vec<Block> = (0..LARGE)
        .map(|_| heap.alloc(rng.large_bytes()).unwrap())
        .collect();

    let warm = cycles / 10;
    let mut footprint_when_warm = 0;
    for cycle in 0..cycles {
        // One large replacement per 16 cycles, small ones otherwise.
        let (pool, bytes) = if cycle % 16 == 0 {
            (&mut large, rng.large_bytes())
        } else {
            (&mut small, rng.small_bytes())
        };
        let i = rng.below(pool.len());
        heap.free(pool[i]).unwrap();
        pool[i] = heap
            .alloc(bytes)
            .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        if cycle + 1 == warm {
            footprint_when_warm = heap.node_stats().footprint_peak;
        }
    }

    let s = heap.node_stats();
    assert_eq!(s.heap.allocations, (cycles + SMALL + LARGE) as u64);
    assert_eq!(s.heap.frees, cycles as u64);
    assert!(s.heap.peak <= MAX_LIVE_LINES * LINE);
    // Stated bound: the footprint never exceeds twice the largest possible live set.
    let bound = 2 * MAX_LIVE_LINES * LINE;
    assert!(
        s.footprint_peak <= bound,
        "footprint peak {} exceeds bound {bound}",
        s.footprint_peak
    );
    if !cfg!(miri) {
        // Warm after a tenth of the run: the other nine tenths cut almost nothing new
        // (under 5% more), they reuse what is there.
        assert!(
            (s.footprint_peak - footprint_when_warm) * 20 < footprint_when_warm,
            "footprint grew from {footprint_when_warm} to {} after warm-up",
            s.footprint_peak
        );
        assert!(s.heap.reuses >= cycles as u64 * 99 / 100);
    }
    println!(
        "cycles {cycles}: live peak {} B, footprint peak {} B ({footprint_when_warm} B when \
         warm; bound {bound} B, arena {} B), reuses {}, large free runs {}",
        s.heap.peak,
        s.footprint_peak,
        ARENA_LINES * LINE,
        s.heap.reuses,
        s.large.free_runs
    );
    for c in s.classes.iter().filter(|c| c.reserved > 0) {
        println!(
            "  class {:>2} lines: reserved {:>3} slots, live {:>2}, allocations {}",
            c.lines, c.reserved, c.live, c.allocations
        );
    }
}
