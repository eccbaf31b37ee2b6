//! A model of code that uses bi, as a user writes one: a map insert on one node races a
//! lookup on another, each node runs one quiescence pass, and loom explores every
//! interleaving (up to two preemptions) of the two nodes' memory operations over caches
//! that are not coherent. Copy it to check your own code (see
//! `bi::core::runtime::testing` for the machine and the builder).
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p bi --test loom_map --release --target-dir target/loom -- --nocapture
//! ```
#![cfg(loom)]

use bi::collections::map::BiHashMap;
use bi::core::runtime::RuntimeConfig;
use bi::core::runtime::testing::{Setup, model_builder};
use loom::sync::Arc;
use loom::thread;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

#[test]
fn one_insert_races_one_lookup_with_a_pass_per_node() {
    static ITERATIONS: AtomicUsize = AtomicUsize::new(0);
    let start = Instant::now();
    model_builder().check(|| {
        ITERATIONS.fetch_add(1, Ordering::Relaxed);
        let s = Arc::new(Setup::model(RuntimeConfig::default()));
        let map = BiHashMap::<u64, u64>::at(s.slot(0));
        let mut w = map.write_handle(s.writer(0)).unwrap();
        let r = map.read_handle(&s.nodes[1]).unwrap();
        let s2 = s.clone();
        let writer = thread::spawn(move || {
            w.insert(1, 10).unwrap();
            s2.nodes[0].quiesce().unwrap();
        });
        // Before the insert, or after it: nothing else.
        let got = r.get(&1).unwrap();
        assert!(got.is_none() || got == Some(10), "read {got:?}");
        s.nodes[1].quiesce().unwrap();
        writer.join().unwrap();
        // A pass of the reader's node after the insert returned: it is seen.
        s.nodes[1].quiesce().unwrap();
        assert_eq!(r.get(&1).unwrap(), Some(10));
    });
    eprintln!(
        "insert against lookup, a pass per node: {} interleavings in {:.1?}",
        ITERATIONS.load(Ordering::Relaxed),
        start.elapsed()
    );
}
