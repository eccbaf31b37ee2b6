//! A miss answered from a cached tag line: a map's lookup reads its bucket's tag line
//! first and reports the key absent when no tag matches, and the tag line sits in the
//! node's cache like any line. A fresh lookup ([`get_fresh`](bi_collections::map::MapRef::get_fresh))
//! promises to find a key whose insertion was published before it began: the tag line is
//! on the key's path, so it must come from memory as well.
//!
//! The schedule: the writer fills a map of eight buckets; node 1 passes, then looks a
//! key of the map's space up that is absent (with a fresh lookup: its node now caches
//! the key's tag line as memory has it, without the key); the writer inserts the key and
//! node 1, with no pass in between, looks it up fresh again. Broken
//! ([`Fault::TagPath`]): the second lookup re-reads the root slot and the bucket line
//! from memory but takes the tag line from the cache, whose tags say the key is absent.
//! BI: the tag line is dropped and read again with the rest of the path. Counted: fresh
//! lookups that missed a key inserted before they began.

use super::{Hazard, two_runtimes};
use bi_collections::map::{BiHashMap, MapConfig};
use bi_core::runtime::{Fault, RuntimeConfig};

pub(super) const HAZARD: Hazard = Hazard {
    name: "miss_from_cached_tags",
    fault: Fault::TagPath,
    counts: "fresh lookups that missed a key inserted before they began",
    run,
};

/// Keys looked up per run.
const KEYS: u64 = 8;

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let s = two_runtimes(config, seed, |c| c);
    let map = BiHashMap::<u64, u64>::at(s.slot(0));
    let mut w = map
        .write_handle_with(s.writer(0), MapConfig::new().initial_buckets(8))
        .expect("map");
    for k in 0..6 {
        w.insert(k, k).expect("insert");
    }
    s.quiesce_all().expect("pass");
    let r = map.read_handle(&s.nodes[1]).expect("reader slot");
    let mut missed = 0;
    for k in (1000 + seed * 100..).take(KEYS as usize) {
        assert_eq!(r.get_fresh(&k).expect("read"), None);
        w.insert(k, k).expect("insert");
        missed += u64::from(r.get_fresh(&k).expect("read").is_none());
        w.remove(&k).expect("remove");
    }
    missed
}
