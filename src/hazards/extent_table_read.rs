//! A pool's node that drops only the granted extents must know which are granted: a
//! pool's whole-heap invalidations (a first pass, a lapsed lease, an overflowed log, a
//! first declaration) drop the root directory and the extents the extent table marks
//! granted, not every line of a heap that may be terabytes of CXL memory
//! ([`RuntimeConfig::extents_only`]).
//!
//! The schedule: node 1 runs its first passes while every extent is free (they read the
//! extent table, which stays in its cache); node 0's writer is then granted an extent
//! and publishes a line there under its structure's scope; node 1, which declared
//! nothing, reads the line; the writer rewrites it in place, version after version;
//! node 1 passes (skipping every notice of the undeclared structure); then a reader of
//! node 1 declares the structure and reads the line. Broken ([`Fault::ExtentTableRead`]):
//! the declaration's invalidation reads the table through the cache, where the extent
//! is still free, and keeps the line. BI: it reads the table from memory and drops the
//! line. Counted: reads after the declaration that did not return the newest version.

use super::{Hazard, two_runtimes};
use bi_alloc::Extents;
use bi_core::runtime::{Fault, Fetch, RuntimeConfig, Scope, Via};

pub(super) const HAZARD: Hazard = Hazard {
    name: "granted_extent_read_from_cache",
    fault: Fault::ExtentTableRead,
    counts: "reads after a first declaration that returned a version older than the newest",
    run,
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let s = two_runtimes(config.extents_only(true), seed, |c| c);
    let slot = s.slot(0);
    let scope = Scope::of_slot(slot);
    // The first pass drops the whole cache, the next drops it again: node 1 reads the
    // table each time, every extent free.
    for _ in 0..2 {
        s.nodes[1].quiesce().expect("pass");
    }
    let extents = Extents::new(s.nodes[0].clone(), slot as u64).expect("extents");
    let mut w = s.nodes[0]
        .writer(extents.heap().expect("heap"))
        .expect("writer");
    w.set_scope(scope).expect("scope");
    let lines = w.alloc_lines(&[1u64]).expect("granted memory");
    w.publish_lines(slot, lines).expect("publish");
    s.nodes[0].quiesce().expect("pass");
    let reader = s.nodes[1].reader().expect("reader slot");
    let read = || {
        let g = reader.enter();
        let line = g.line(lines, 0).expect("line");
        g.fetch_via(Via::Cached, line, |v| *v).expect("read")
    };
    let cached = read(); // node 1 caches the line
    debug_assert_eq!(cached, Fetch::Value(1));
    let newest = 2 + seed % 8;
    for version in 2..=newest {
        w.rewrite_lines(&[(lines, 0, version)]).expect("rewrite");
    }
    s.nodes[0].quiesce().expect("pass");
    for _ in 0..3 {
        s.nodes[1].quiesce().expect("pass");
    }
    reader.use_scope(scope).expect("declare");
    u64::from(read() != Fetch::Value(newest))
}
