//! The pool lock under the loom model checker, over the emulator.
//!
//! Built only with `RUSTFLAGS="--cfg loom"`. Two nodes on the smallest machine (no random
//! hardware events, leases that never run out) each take the lock once and, inside,
//! read a counter from memory, add one and write it back. Loom explores the
//! interleavings of the two lock protocols (every emulated cache operation is a loom
//! operation); in every one, the sections do not overlap and neither increment is lost.
//! With the lock's write-backs switched off (the `LockWriteback` fault), loom finds an
//! interleaving where both nodes are inside.
//!
//! With one preemption the model is some 750 interleavings (under a second); with two,
//! about 217,000 (a minute and a half in release mode on a 2-vCPU guest), also clean.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=1 \
//!     cargo test -p bi-core --test loom_lock --release --target-dir target/loom -- --nocapture
//! ```
#![cfg(loom)]

use bi_core::mem::MemView;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{Fault, RuntimeConfig};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
use std::time::{Duration, Instant};

fn setup(runtime: RuntimeConfig) -> Setup {
    Setup::smallest(runtime.node_lease(1 << 40).reader_lease(1 << 40))
}

fn section(s: &Setup, node: usize, inside: &AtomicUsize) {
    let rt = &s.nodes[node];
    let _guard = rt.lock(Duration::from_secs(3600)).unwrap();
    assert_eq!(
        inside.fetch_add(1, Ordering::Relaxed),
        0,
        "two nodes inside"
    );
    let (view, at) = (rt.view(), s.slot(0));
    view.invalidate(at, 8).unwrap();
    view.fence();
    let n: u64 = view.load(at).unwrap();
    view.store(at, &(n + 1)).unwrap();
    view.writeback(at, 8).unwrap();
    view.fence();
    inside.fetch_sub(1, Ordering::Relaxed);
}

fn model(runtime: RuntimeConfig) -> usize {
    static ITERATIONS: StdAtomicUsize = StdAtomicUsize::new(0);
    ITERATIONS.store(0, StdOrdering::Relaxed);
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(1);
    }
    builder.max_branches = 100_000;
    builder.check(move || {
        ITERATIONS.fetch_add(1, StdOrdering::Relaxed);
        let s = Arc::new(setup(runtime.clone()));
        let inside = Arc::new(AtomicUsize::new(0));
        let (s1, inside1) = (s.clone(), inside.clone());
        let other = thread::spawn(move || section(&s1, 1, &inside1));
        section(&s, 0, &inside);
        other.join().unwrap();
        let view = s.nodes[0].view();
        view.invalidate(s.slot(0), 8).unwrap();
        view.fence();
        assert_eq!(
            view.load::<u64>(s.slot(0)).unwrap(),
            2,
            "an increment was lost"
        );
    });
    ITERATIONS.load(StdOrdering::Relaxed)
}

#[test]
fn two_nodes_take_the_lock_one_at_a_time() {
    let start = Instant::now();
    let n = model(RuntimeConfig::default());
    eprintln!("pool lock: {n} interleavings in {:.1?}", start.elapsed());
    assert!(n > 10, "the model explored only {n} interleavings");
}

/// Negative control: the shipped lock with its record write-backs switched off lets
/// both nodes in, and loom finds an interleaving that shows it.
#[test]
#[should_panic]
fn without_its_write_backs_the_lock_fails_the_model() {
    model(RuntimeConfig::default().fault(Fault::LockWriteback));
}
