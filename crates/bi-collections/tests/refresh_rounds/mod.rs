//! The rounds the map's and the tree's refresh tests share: a process reads a key on node
//! 1 (its node now caches the key's path), node 0's writer writes the key, node 1
//! refreshes the key and must read the write at once. Node 1 never passes, so without
//! the refresh it would read what it cached.

use bi_core::runtime::testing::Setup;

/// Three laps over `keys`: new values (new keys on the first lap), then every other key
/// removed on the last. `write(k, Some(v))` inserts, `write(k, None)` removes; a refresh
/// of a key for which `one_fence(k)` holds must cost node 1 exactly one fence.
pub fn write_then_refresh(
    s: &Setup,
    keys: &[u64],
    get: impl Fn(u64) -> Option<u64>,
    mut write: impl FnMut(u64, Option<u64>),
    refresh: impl Fn(u64),
    one_fence: impl Fn(u64) -> bool,
) {
    for lap in 0..3u64 {
        for (i, &k) in keys.iter().enumerate() {
            get(k); // node 1 now caches the key's path as it is
            let want = (lap < 2 || i % 2 == 0).then_some(lap * 1000 + i as u64);
            write(k, want);
            let fences = s.emu.stats(1).fences;
            refresh(k);
            if one_fence(k) {
                assert_eq!(s.emu.stats(1).fences - fences, 1, "lap {lap}, key {k}");
            }
            assert_eq!(get(k), want, "lap {lap}, key {k}");
        }
    }
}
