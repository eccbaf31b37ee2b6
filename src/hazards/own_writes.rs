//! A process that does not read its own writes: a process that is not a structure's
//! writer sends its writes to the writer's process, which applies and publishes them
//! before it acknowledges; but the sender's node may still cache the lines the write
//! replaced, and a lookup trusts what its node caches (misses included) until the
//! node's next pass.
//!
//! The schedule: two pools of one region file over the emulator (two processes' nodes),
//! passes far apart (none runs during the program); the writer's process serves a map;
//! the other process looks a key up (its node now caches the key's bucket line: absent,
//! or with an older value), inserts it through its shared handle, and looks it up again;
//! on a second lap it writes a new value to each key, and removes every other key and
//! looks it up once more. The same schedule runs over a tree (second row). Broken
//! ([`Fault::OwnWrites`]): after the acknowledgement the handle does nothing, so the
//! second lookup reads the cached line or root. BI: once the writer acknowledges, the
//! handle drops its node's copies of the key's path ([`bi_collections::Refresh`]), so
//! the next lookup reads them from memory, which holds the write. Counted: lookups right
//! after the process's own acknowledged write that did not see it.

use super::Hazard;
use crate::{Error, Pool, PoolConfig};
use bi_core::mem::{EmulatedNode, EmulatorConfig};
use bi_core::region::RegionConfig;
use bi_core::runtime::{Fault, RuntimeConfig};
use std::time::Duration;

pub(super) const HAZARD: Hazard = Hazard {
    name: "own_write_unread",
    fault: Fault::OwnWrites,
    counts: "lookups right after a process's own acknowledged remote write that missed it",
    run: |config, seed| {
        let (_dir, writer_pool, other_pool) = pools(config, seed);
        let writer = writer_pool.map::<u64, u64>("own").expect("writer handle");
        let other = other_pool.map::<u64, u64>("own").expect("remote handle");
        assert!(writer.is_writer() && !other.is_writer());
        count_misses(
            seed,
            |k| other.get(k),
            |k, v| other.insert(k, v).map(drop),
            |k| other.remove(k).map(drop),
        )
    },
};

/// The same for a tree, whose write copies the path and publishes a new root: a lookup
/// through the cached root finds the value from before the write.
pub(super) const TREE: Hazard = Hazard {
    name: "own_write_unread_tree",
    fault: Fault::OwnWrites,
    counts: "tree lookups right after a process's own acknowledged remote write that missed it",
    run: |config, seed| {
        let (_dir, writer_pool, other_pool) = pools(config, seed);
        let writer = writer_pool.tree::<u64, u64>("own").expect("writer handle");
        let other = other_pool.tree::<u64, u64>("own").expect("remote handle");
        assert!(writer.is_writer() && !other.is_writer());
        count_misses(
            seed,
            |k| other.get(k),
            |k, v| other.insert(k, v).map(drop),
            |k| other.remove(k).map(drop),
        )
    },
};

/// Keys written per run: enough that the map grows twice on the way (a new array in the
/// root slot: the dropped path must include the slot).
const KEYS: u64 = 60;

/// Two pools of one region file over the emulator (two processes' nodes), with no pass
/// during the program: what a node reads is what its cache holds.
fn pools(
    config: RuntimeConfig,
    seed: u64,
) -> (tempfile::TempDir, Pool<EmulatedNode>, Pool<EmulatedNode>) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("own-writes.bi");
    let pools = PoolConfig {
        region: RegionConfig::new(8 << 20).with_nodes(2),
        runtime: config,
        pass_period: Duration::from_secs(3600),
        ..PoolConfig::default()
    };
    let machine = |c: EmulatorConfig| c.seed(seed);
    let writer = Pool::open_emulated(&path, pools.clone(), machine).expect("writer pool");
    let other = Pool::open_emulated(&path, pools, machine).expect("other pool");
    (dir, writer, other)
}

/// Per key: a lookup (the node caches what it finds), an insert (a new key, then, on the
/// second lap, a new value), a lookup that must see it; every other key also a remove
/// and a lookup that must not find it. Returns the lookups that missed the write.
fn count_misses(
    seed: u64,
    get: impl Fn(&u64) -> Result<Option<u64>, Error>,
    insert: impl Fn(u64, u64) -> Result<(), Error>,
    remove: impl Fn(&u64) -> Result<(), Error>,
) -> u64 {
    let key = |i: u64| (i * 7 + seed * 13) % 64; // distinct for i < 64
    let mut missed = 0;
    for lap in 0..2 {
        for i in 0..KEYS {
            let k = key(i);
            let v = seed * 1000 + lap * 100 + i + 1;
            get(&k).expect("lookup"); // cached: absent, or an older value
            insert(k, v).expect("insert");
            missed += u64::from(get(&k).expect("lookup") != Some(v));
            if lap == 1 && i % 2 == 1 {
                remove(&k).expect("remove");
                missed += u64::from(get(&k).expect("lookup").is_some());
            }
        }
    }
    missed
}
