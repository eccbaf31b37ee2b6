//! Resolution failure: a key inserted (and written back) before a lookup starts is not
//! found, because the lookup walks a stale cached copy of the structure.
//!
//! Readers never invalidate on the hit path: a lookup walks whatever its node's cache
//! holds, which may be a version up to one staleness bound old. A hit is therefore fine,
//! but a miss may only mean "not yet seen here". The schedule: node 0's writer inserts
//! keys one at a time into the shipped [`BiHashMap`] (one row, its fresh read
//! [`get_fresh`](bi_collections::map::MapRef::get_fresh)) or [`BiTree`] (the other, its
//! [`get_fresh`](bi_collections::tree::TreeRef::get_fresh));
//! after each insertion node 1's reader, which runs no pass, looks up every key inserted
//! so far, so its cache holds the bucket lines or the root slot of an earlier version.
//! Broken ([`Fault::LazyMap`], [`Fault::LazyTree`]): the lookup trusts its cached path on
//! a miss and reports the key absent. BI: on a miss the lookup reads the entry points again
//! from memory and searches once more (lazy invalidation), so a key published before the
//! lookup began is always found. Counted: lookups of keys inserted before the lookup began
//! that reported the key absent.

use super::{Hazard, hostile, two_runtimes};
use bi_collections::CollectionError;
use bi_collections::map::BiHashMap;
use bi_collections::tree::BiTree;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{Fault, RuntimeConfig};

pub(super) const MAP: Hazard = Hazard {
    name: "resolution_failure_map",
    fault: Fault::LazyMap,
    counts: "map lookups of keys inserted before the lookup that reported absent",
    run: |config, seed| {
        let s = setup(config, seed);
        let map = BiHashMap::<u64, u64>::at(s.slot(0));
        let mut w = map.write_handle(s.writer(0)).expect("map");
        let r = map.read_handle(&s.nodes[1]).expect("reader slot");
        missed_lookups(
            seed,
            |k| w.insert(k, k).map(drop),
            |k| r.enter().get_fresh(&k),
        )
    },
};

pub(super) const TREE: Hazard = Hazard {
    name: "resolution_failure_tree",
    fault: Fault::LazyTree,
    counts: "tree lookups of keys inserted before the lookup that reported absent",
    run: |config, seed| {
        let s = setup(config, seed);
        let tree = BiTree::<u64, u64>::at(s.slot(0));
        let mut w = tree.write_handle(s.writer(0)).expect("tree");
        let r = tree.read_handle(&s.nodes[1]).expect("reader slot");
        missed_lookups(
            seed,
            |k| w.insert(k, k).map(drop),
            |k| r.enter().get_fresh(&k),
        )
    },
};

/// Keys inserted per run.
const KEYS: u64 = 32;

fn setup(config: RuntimeConfig, seed: u64) -> Setup {
    two_runtimes(config, seed, hostile)
}

/// Inserts `KEYS` keys (an order that depends on `seed`) and, after each, looks up every
/// key inserted so far; returns the lookups that found nothing.
fn missed_lookups(
    seed: u64,
    mut insert: impl FnMut(u64) -> Result<(), CollectionError>,
    get: impl Fn(u64) -> Result<Option<u64>, CollectionError>,
) -> u64 {
    let key = |i: u64| (i * 37 + seed * 11) % 1024 + 1;
    let mut missed = 0;
    for i in 0..KEYS {
        insert(key(i)).expect("insert");
        for j in 0..=i {
            missed += u64::from(get(key(j)).expect("lookup").is_none());
        }
    }
    missed
}
