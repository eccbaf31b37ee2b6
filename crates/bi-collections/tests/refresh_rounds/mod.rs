//! The rounds the map's and the tree's refresh tests share: a process reads a key on node
//! 1 (its node now caches the key's path), node 0's writer writes the key, node 1
//! refreshes the key and must read the write at once. Node 1 never passes, so without
//! the refresh it would read what it cached.

use bi_collections::{ApplyBatch, Op, Refresh};
use bi_core::runtime::testing::Setup;

/// Three laps over `keys`, written by `w` on node 0 and read by `get` on node 1, which
/// `r` refreshes: new values (new keys on the first lap), then every other key removed
/// on the last. A refresh of a key for which `one_fence(k)` holds must cost node 1
/// exactly one fence.
pub fn write_then_refresh(
    s: &Setup,
    keys: &[u64],
    w: &mut impl ApplyBatch<u64, u64>,
    r: &impl Refresh<u64>,
    get: impl Fn(u64) -> Option<u64>,
    one_fence: impl Fn(u64) -> bool,
) {
    for lap in 0..3u64 {
        for (i, &k) in keys.iter().enumerate() {
            get(k); // node 1 now caches the key's path as it is
            let want = (lap < 2 || i % 2 == 0).then_some(lap * 1000 + i as u64);
            let op = want.map_or(Op::Remove(k), |v| Op::Insert(k, v));
            assert_eq!(w.apply_batch(&[op]).unwrap().applied, 1);
            let fences = s.emu.stats(1).fences;
            r.refresh(&k).unwrap();
            if one_fence(k) {
                assert_eq!(s.emu.stats(1).fences - fences, 1, "lap {lap}, key {k}");
            }
            assert_eq!(get(k), want, "lap {lap}, key {k}");
        }
    }
}
