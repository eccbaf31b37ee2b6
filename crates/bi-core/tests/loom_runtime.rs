//! The runtime's grace period under the loom model checker, over the emulator.
//!
//! Built only with `RUSTFLAGS="--cfg loom"`, where the emulator's locks and atomics (its
//! per-node caches, the oracle, the backing words and the virtual clock) and the runtime's
//! own locks are loom's, so loom explores the interleavings of readers, passes and a
//! writer on two nodes whose caches are not coherent. The machine is the smallest the
//! runtime accepts (32-byte lines, one reader per node, eight-entry log rings, one root
//! entry, the minimal heap) and has no random hardware events: no prefetch, no random
//! eviction, no skew. With no prefetch every reuse hazard the oracle counts would be a
//! protocol failure, so the models assert there are none.
//!
//! One preemption, not two: a pass is a few dozen emulated operations, each several loom
//! operations, and with one preemption the two models already take 15 000 and 8 500
//! iterations (about 30 s and 20 s in release mode); two preemptions do not finish in
//! minutes. Every interleaving that needs at most one preemption is explored, on top of
//! loom's choices of values for relaxed loads.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=1 \
//!     cargo test -p bi-core --test loom_runtime --release --target-dir target/loom -- --nocapture
//! ```
#![cfg(loom)]

use bi_core::runtime::RuntimeConfig;
use bi_core::runtime::testing::Setup;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
use std::time::Instant;

/// The smallest machine: two nodes, one reader each, 32-byte lines.
fn setup() -> Setup {
    Setup::smallest(
        RuntimeConfig::default()
            .node_lease(1 << 40)
            .reader_lease(1 << 40),
    )
}

fn builder() -> loom::model::Builder {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(1);
    }
    // A pass is a few dozen emulated operations, each several loom operations.
    builder.max_branches = 100_000;
    builder
}

/// Loom iterations of one model, and those in which the old block was freed (std atomics,
/// not model state): they show the freeing branch is explored.
struct Counters {
    iterations: StdAtomicUsize,
    freed: StdAtomicUsize,
}

impl Counters {
    const fn new() -> Counters {
        Counters {
            iterations: StdAtomicUsize::new(0),
            freed: StdAtomicUsize::new(0),
        }
    }

    fn freed(&self) {
        self.freed.fetch_add(1, StdOrdering::Relaxed);
    }
}

fn run(name: &str, counters: &'static Counters, f: impl Fn() + Sync + Send + 'static) {
    let start = Instant::now();
    builder().check(move || {
        counters.iterations.fetch_add(1, StdOrdering::Relaxed);
        f();
    });
    eprintln!(
        "{name}: {} iterations ({} freeing the old block) in {:.1?}",
        counters.iterations.load(StdOrdering::Relaxed),
        counters.freed.load(StdOrdering::Relaxed),
        start.elapsed()
    );
}

/// Enter/exit against synchronize. Before the threads start, node 1 has read v1 (so its
/// cache holds the slot and v1's lines) and the writer on node 0 has replaced v1 by v2 and
/// retired v1. Then a reader section on node 1, which loads the slot (through its stale
/// cache: v1) and runs a pass of node 1 while inside and another after exiting, races
/// with the writer running node 0's second pass since the retirement and `reclaim`. Whenever `reclaim` frees
/// v1's block, the section that could use it is over; the writer then reuses the block at
/// once, so a reader still holding v1's lines would be a reuse hazard, which the oracle
/// would count. `synchronize` returns (it never waits) in every interleaving.
#[test]
fn reader_section_against_retire_and_reclaim() {
    static COUNTERS: Counters = Counters::new();
    run("enter/exit against synchronize", &COUNTERS, || {
        let s = Arc::new(setup());
        let mut w = s.writer(0);
        let v1 = w.alloc(1u64).unwrap();
        let l1 = v1.link();
        assert!(w.publish(s.slot(0), v1).unwrap().is_null());
        // First passes (whole-heap invalidation) before the model proper.
        s.quiesce_all().unwrap();
        let reader = s.nodes[1].reader().unwrap();
        assert_eq!(*reader.enter().load::<u64>(s.slot(0)).unwrap().unwrap(), 1);
        let v2 = w.alloc(2u64).unwrap();
        assert_eq!(w.publish(s.slot(0), v2).unwrap(), l1);
        w.retire(l1).unwrap();
        // Node 0's first pass after the retirement (it reads it); its second, which
        // drains it, races with the reader.
        s.nodes[0].quiesce().unwrap();
        // True (relaxed) while the reader may still use what it loaded: only the
        // runtime's own synchronisation orders it with the writer's check.
        let inside = Arc::new(AtomicBool::new(false));

        let r_inside = inside.clone();
        let rs = s.clone();
        let reader_thread = thread::spawn(move || {
            r_inside.store(true, Ordering::Relaxed);
            let g = reader.enter();
            let v = *g.load::<u64>(rs.slot(0)).unwrap().expect("published");
            // A pass while inside: it must keep v1 pending for this section.
            rs.nodes[1].quiesce().unwrap();
            assert!(v == 1 || v == 2, "read {v}");
            r_inside.store(false, Ordering::Relaxed);
            drop(g);
            rs.nodes[1].quiesce().unwrap();
        });

        s.nodes[0].quiesce().unwrap();
        let rep = w.reclaim().unwrap();
        assert!(rep.grace.lease_expired.is_empty());
        if rep.freed_blocks == 1 {
            COUNTERS.freed();
            assert!(
                !inside.load(Ordering::Relaxed),
                "v1 freed while a reader that may hold it is inside"
            );
            // Reuse it at once: a reader still holding v1's lines would now read another
            // incarnation, which the oracle counts.
            let v3 = w.alloc(3u64).unwrap();
            assert_eq!(v3.offset(), l1.offset());
            w.discard(v3).unwrap();
        }
        reader_thread.join().unwrap();
        let stats = s.emu.total_stats();
        assert_eq!((stats.lost_writes, stats.reuse_hazards), (0, 0));
    });
}

/// One publish/retire/reclaim cycle on two nodes. The writer on node 0 publishes v1 (and
/// both nodes pass) before the threads start. Then the writer publishes v2, retires v1
/// and calls `reclaim` (which must not free v1: no pass has drained it yet), while the reader on node 1 reads the slot in two sections with a pass
/// of node 1 between them; every value it reads is v1 or v2. After the join, passes of
/// both nodes and `reclaim` run (a bounded number of times) until v1's block is freed,
/// the writer reuses it for v3 and publishes it, and after a final round of passes the
/// reader reads v3. The oracle sees no reuse hazard at any point.
///
/// (A smaller cycle than "reclaim and reuse inside the threads": that one needs two
/// passes of each node after the retirement inside the model, which is several times
/// more interleavings than fit in a minute even with one preemption.)
#[test]
fn publish_retire_reclaim_cycle() {
    static COUNTERS: Counters = Counters::new();
    run("publish/retire/reclaim cycle", &COUNTERS, || {
        let s = Arc::new(setup());
        let mut w = s.writer(0);
        let v1 = w.alloc(1u64).unwrap();
        let l1 = v1.link();
        assert!(w.publish(s.slot(0), v1).unwrap().is_null());
        s.quiesce_all().unwrap();
        let reader = s.nodes[1].reader().unwrap();

        let rs = s.clone();
        let reader_thread = thread::spawn(move || {
            for i in 0..2 {
                if i > 0 {
                    rs.nodes[1].quiesce().unwrap();
                }
                let g = reader.enter();
                let v = *g.load::<u64>(rs.slot(0)).unwrap().expect("published");
                assert!(v == 1 || v == 2, "read {v}");
            }
            reader
        });

        let v2 = w.alloc(2u64).unwrap();
        assert_eq!(w.publish(s.slot(0), v2).unwrap(), l1);
        w.retire(l1).unwrap();
        let rep = w.reclaim().unwrap();
        assert_eq!(
            rep.freed_blocks, 0,
            "v1 freed before any node read its retirement"
        );
        assert!(rep.grace.lease_expired.is_empty());
        let reader = reader_thread.join().unwrap();
        assert_eq!(s.emu.total_stats().reuse_hazards, 0);

        let mut freed = false;
        for _ in 0..3 {
            s.quiesce_all().unwrap();
            if w.reclaim().unwrap().freed_blocks == 1 {
                freed = true;
                break;
            }
        }
        assert!(freed, "v1 is reclaimed within three rounds of passes");
        COUNTERS.freed();
        let v3 = w.alloc(3u64).unwrap();
        assert_eq!(v3.offset(), l1.offset(), "the freed block is reused");
        w.publish(s.slot(0), v3).unwrap();
        s.quiesce_all().unwrap();
        let g = reader.enter();
        assert_eq!(*g.load::<u64>(s.slot(0)).unwrap().unwrap(), 3);
        drop(g);
        let stats = s.emu.total_stats();
        assert_eq!((stats.lost_writes, stats.reuse_hazards), (0, 0));
    });
}
