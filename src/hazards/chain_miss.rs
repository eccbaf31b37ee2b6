//! A miss read from lines of different moments: a map's lookup answers from its node's
//! cache, misses included, and one bucket line is one version of itself; but a chain of
//! two lines read through the cache may be two versions of different moments. If the
//! writer could move a key from one line to the other within one batch (a key removed
//! and put back takes the chain's first free entry), the key would be in neither copy.
//!
//! The schedule: four keys of one bucket fill its line and start an overflow line; node
//! 1 passes and reads them all (its cache holds both lines); the writer then, in one
//! batch, removes the first key, inserts a fifth key of the same bucket and puts the
//! first key back; node 1's cache drops the first line (an eviction), so its next lookup
//! reads that line as memory has it now and the overflow line as it was before the
//! batch. Broken ([`Fault::ChainMiss`]): the fifth key takes the freed entry of the first
//! line and the first key goes to the overflow line, so a key present in every version
//! is reported absent. BI: an entry a batch empties stays empty for the rest of the
//! batch unless its own key comes back, so a key never changes line while it is present.
//! Counted: lookups of the moved key that reported it absent.

use super::{Hazard, two_runtimes};
use bi_collections::map::{BiHashMap, MapConfig, bucket_of, key_hash};
use bi_collections::{ApplyBatch, Op};
use bi_core::runtime::{Fault, Link, RuntimeConfig, Via};

pub(super) const HAZARD: Hazard = Hazard {
    name: "miss_across_chain_versions",
    fault: Fault::ChainMiss,
    counts: "lookups through the cache that missed a key present in every version",
    run,
};

/// Buckets of the map (it never grows here).
const BUCKETS: u64 = 8;

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let s = two_runtimes(config, seed, |c| c);
    let map = BiHashMap::<u64, u64>::at(s.slot(0));
    let mut w = map
        .write_handle_with(
            s.writer(0),
            MapConfig::new().initial_buckets(BUCKETS as usize),
        )
        .expect("map");
    // Five keys of one bucket (bucket = the hash's low bits), starting from the seed.
    let bucket = seed % BUCKETS;
    let keys: Vec<u64> = (seed * 1000..)
        .filter(|k| bucket_of(key_hash(k), BUCKETS as usize) as u64 == bucket)
        .take(5)
        .collect();
    for &k in &keys[..4] {
        w.insert(k, k).expect("insert");
    }
    s.quiesce_all().expect("pass");
    let r = map.read_handle(&s.nodes[1]).expect("reader slot");
    for &k in &keys[..4] {
        r.get(&k).expect("read"); // node 1 caches both lines of the chain
    }
    let moved = keys[0];
    let batch = [
        Op::Remove(moved),
        Op::Insert(keys[4], 0),
        Op::Insert(moved, 1),
    ];
    w.apply_batch(&batch).expect("batch");
    // Node 1 drops the chain's first line, as an eviction would.
    let first_line = {
        let m = r.enter();
        let array = m.guard().slot_word(s.slot(0), Via::Cached).expect("slot");
        let line = s.region.layout().line_size().get() as u64;
        Link::<u64>::from_raw(array).offset() as u64 + (1 + bucket) * line
    };
    s.emu.node(1).evict(first_line as usize).expect("evict");
    u64::from(r.get(&moved).expect("read").is_none())
}
