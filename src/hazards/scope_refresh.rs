//! Updates skipped before a first declaration: a node whose readers never declared a
//! structure skips the writers' notices about it, so the lines it cached from the
//! structure stay in its cache through the updates; when one of its readers then declares
//! the structure, those lines must go.
//!
//! The schedule: node 0's writer publishes a structure's first version under the
//! structure's scope; node 1, which declared nothing, reads it (its cache now holds the
//! slot and the object); the writer publishes newer versions, retiring each old one;
//! node 1 passes (skipping every notice); then a reader of node 1 declares the
//! structure's scope and reads it. Broken ([`Fault::ScopeRefresh`]): the first
//! declaration drops nothing, and the reader gets the version node 1 cached before the
//! updates. BI: the first declaration drops every line the node caches of the heap and
//! the root directory. Counted: reads after the declaration that did not return the
//! newest version.

use super::{Hazard, two_runtimes};
use bi_core::heap::BumpHeap;
use bi_core::mem::EmulatedNode;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{Fault, RuntimeConfig, Scope, Writer};
use std::ops::Range;

pub(super) const HAZARD: Hazard = Hazard {
    name: "stale_first_declaration",
    fault: Fault::ScopeRefresh,
    counts: "reads after a first declaration that returned a version older than the newest",
    run,
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let s = two_runtimes(config, seed, |c| c);
    let mut w = s.writer(0);
    let slot = s.slot(0);
    let scope = Scope::of_slot(slot);
    publish_versions(&s, &mut w, slot, scope, 1..2);
    // A node's first pass drops its whole cache, and drops it again once the readers
    // then inside have left: both happen before node 1 caches version 1.
    for _ in 0..2 {
        s.nodes[1].quiesce().expect("pass");
    }
    let reader = s.nodes[1].reader().expect("reader slot");
    let cached = reader.enter().load::<u64>(slot).expect("read").map(|v| *v);
    debug_assert_eq!(cached, Some(1));
    let newest = 2 + seed % 8;
    publish_versions(&s, &mut w, slot, scope, 2..newest + 1);
    for _ in 0..3 {
        s.nodes[1].quiesce().expect("pass");
    }
    reader.use_scope(scope).expect("declare");
    let read = reader.enter().load::<u64>(slot).expect("read").map(|v| *v);
    u64::from(read != Some(newest))
}

/// Node 0's writer publishes `versions` of the structure in `slot`, retiring each old
/// one, and node 0 passes.
fn publish_versions(
    s: &Setup,
    w: &mut Writer<EmulatedNode, BumpHeap>,
    slot: usize,
    scope: Scope,
    versions: Range<u64>,
) {
    w.set_scope(scope).expect("scope");
    for version in versions {
        let b = w.alloc(version).expect("heap");
        let old = w.publish(slot, b).expect("publish");
        if !old.is_null() {
            w.retire(old).expect("retire");
        }
    }
    s.nodes[0].quiesce().expect("pass");
}
