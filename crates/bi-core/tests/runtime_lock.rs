//! The pool lock (`runtime::lock`): mutual exclusion between nodes whose caches are not
//! coherent, under adversarial emulated hardware, with leases for nodes that die holding
//! it.
//!
//! Miri skips these (threads spinning on real time; the lock has no `unsafe` code): loom
//! checks the lock's interleavings instead (`loom_lock`).

use bi_core::mem::{Emulator, MemView};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, RuntimeConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const NODES: usize = 3;
const ROUNDS: usize = 25;

fn machine(seed: u64, runtime: RuntimeConfig) -> Setup {
    Setup::with(
        RegionConfig::new(1 << 18).with_nodes(NODES as u32),
        |c| {
            c.seed(seed)
                .cache_lines(64)
                .eviction_rate(0.01)
                .adjacent_prefetch_rate(0.2)
                .random_prefetch_rate(0.05)
        },
        runtime,
    )
}

fn patient() -> RuntimeConfig {
    RuntimeConfig::default()
        .node_lease(u64::MAX / 4)
        .reader_lease(u64::MAX / 4)
}

/// What went wrong in one run: sections that overlapped another (seen through a
/// coherent counter the lock does not know about) and increments of a counter in shared
/// memory that were lost (each section reads it from memory, adds one, writes it back).
#[derive(Debug, Default, PartialEq, Eq)]
struct Violations {
    overlaps: usize,
    lost: u64,
    timeouts: usize,
}

/// `threads` threads per node take the lock `ROUNDS` times each.
fn contend(s: &Setup, timeout: Duration, threads: usize) -> Violations {
    let counter = s.slot(0);
    let inside = AtomicUsize::new(0);
    let overlaps = AtomicUsize::new(0);
    let (timeouts, entered) = (AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|scope| {
        for rt in s
            .nodes
            .iter()
            .flat_map(|rt| std::iter::repeat_n(rt, threads))
        {
            let (inside, overlaps) = (&inside, &overlaps);
            let (timeouts, entered) = (&timeouts, &entered);
            scope.spawn(move || {
                let view = rt.view();
                for _ in 0..ROUNDS {
                    let guard = match rt.lock(timeout) {
                        Ok(g) => g,
                        Err(BiError::LockTimeout { .. }) => {
                            timeouts.fetch_add(1, Ordering::SeqCst);
                            continue;
                        }
                        Err(e) => panic!("lock: {e}"),
                    };
                    entered.fetch_add(1, Ordering::SeqCst);
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    view.invalidate(counter, 8).unwrap();
                    view.fence();
                    let n: u64 = view.load(counter).unwrap();
                    std::thread::yield_now();
                    view.store(counter, &(n + 1)).unwrap();
                    view.writeback(counter, 8).unwrap();
                    view.fence();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    drop(guard);
                }
            });
        }
    });
    let view = s.nodes[0].view();
    view.invalidate(counter, 8).unwrap();
    view.fence();
    let n: u64 = view.load(counter).unwrap();
    Violations {
        overlaps: overlaps.into_inner(),
        lost: entered.into_inner() as u64 - n,
        timeouts: timeouts.into_inner(),
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn threads_of_one_process_take_the_lock_one_at_a_time() {
    // Two threads per node: a node has one lock record, which two threads taking the
    // bakery at once would both write.
    let v = contend(&machine(9, patient()), Duration::from_secs(60), 2);
    assert_eq!(v, Violations::default());
}

#[test]
#[cfg_attr(miri, ignore)]
fn only_one_node_holds_the_lock_under_adversarial_hardware() {
    for seed in bi_kit::seeds(4, 4) {
        let v = contend(&machine(seed, patient()), Duration::from_secs(60), 1);
        assert_eq!(v, Violations::default(), "seed {seed}");
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_dead_holder_is_passed_over_after_its_lease() {
    // Long enough that the waits below (some thousand emulated ticks) stay within it.
    let lease = 1_000_000;
    let s = machine(
        7,
        RuntimeConfig::default()
            .node_lease(lease)
            .reader_lease(lease),
    );
    // Node 0 takes the lock and dies holding it (its guard never runs).
    std::mem::forget(s.nodes[0].lock(Duration::from_secs(1)).unwrap());
    match s.nodes[1].lock(Duration::from_millis(20)) {
        Err(BiError::LockTimeout { node: 1, holder: 0 }) => {}
        other => panic!("expected a timeout behind node 0, got {other:?}"),
    }
    advance(&s.emu, 2 * lease);
    let guard = s.nodes[1].lock(Duration::from_millis(20)).unwrap();
    guard.check().unwrap();
    // And the guard says when its own lease no longer covers it.
    advance(&s.emu, lease);
    assert!(matches!(
        guard.check(),
        Err(BiError::LockLeaseLost { node: 1 })
    ));
}

fn advance(emu: &Emulator, ticks: u64) {
    emu.advance(ticks);
}
