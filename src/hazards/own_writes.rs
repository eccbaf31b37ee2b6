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
//! every other key it then removes and looks up once more. Broken ([`Fault::OwnWrites`]):
//! after the acknowledgement the handle does nothing, so the second lookup reads the
//! cached line. BI: once the writer acknowledges, the handle drops its node's copies of
//! the key's path ([`bi_collections::Refresh`]), so the next lookup reads them from
//! memory, which holds the write. Counted: lookups right after the process's own acknowledged write that did not
//! see it.

use super::Hazard;
use crate::{Pool, PoolConfig};
use bi_core::region::RegionConfig;
use bi_core::runtime::{Fault, RuntimeConfig};
use std::time::Duration;

pub(super) const HAZARD: Hazard = Hazard {
    name: "own_write_unread",
    fault: Fault::OwnWrites,
    counts: "lookups right after a process's own acknowledged remote write that missed it",
    run,
};

/// Keys written per run: enough that the map grows twice on the way (a new array in the
/// root slot: the dropped path must include the slot).
const KEYS: u64 = 60;

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("own-writes.bi");
    let pools = PoolConfig {
        region: RegionConfig::new(8 << 20).with_nodes(2),
        runtime: config,
        // No pass during the program: what a node reads is what its cache holds.
        pass_period: Duration::from_secs(3600),
        ..PoolConfig::default()
    };
    let machine = |c: bi_core::mem::EmulatorConfig| c.seed(seed);
    let writer_pool = Pool::open_emulated(&path, pools.clone(), machine).expect("writer pool");
    let other_pool = Pool::open_emulated(&path, pools, machine).expect("other pool");
    let writer = writer_pool.map::<u64, u64>("own").expect("writer handle");
    let other = other_pool.map::<u64, u64>("own").expect("remote handle");
    assert!(writer.is_writer() && !other.is_writer());
    let key = |i: u64| (i * 7 + seed * 13) % 64; // distinct for i < 64
    let mut missed = 0;
    for i in 0..KEYS {
        let k = key(i);
        let v = seed * 1000 + i + 1;
        other.get(&k).expect("lookup"); // cached: absent, or an older value
        other.insert(k, v).expect("insert");
        missed += u64::from(other.get(&k).expect("lookup") != Some(v));
        if i % 2 == 1 {
            other.remove(&k).expect("remove");
            missed += u64::from(other.get(&k).expect("lookup").is_some());
        }
    }
    missed
}
