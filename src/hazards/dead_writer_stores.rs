//! Stores a killed writer left in its node's cache, landing after its successor adopted
//! the structure: a map's writer on node 0 stores a line (a bucket rewritten in place, a
//! slot naming a larger array) and is killed before it writes the line back. Its host
//! lives on, and so does the dirty line in the host's cache, which may reach memory at
//! any later moment. A successor on node 1 that goes on from memory without it adopts
//! the older state, writes new values and keys of its own, and loses them when the old
//! process's line lands over them.
//!
//! The schedule: node 0's process takes the writer role of a named map and inserts keys;
//! its view refuses every access from its `n`th store on (the process is killed; the
//! node's cache keeps what it stored), for every `n` over the workload. Node 0's record
//! then names a process of this host that is gone, so node 1 takes the map over at once,
//! gives the dead writer's keys new values and inserts keys of its own; node 0's cache
//! then writes back everything it holds.
//! (Node 0's cache evicts now and then, so some of its lines are in memory and some not.)
//! Broken ([`Fault::DeadWriterStores`]): the successor does not make node 0's cache write
//! back first. BI: it does (the emulator's nodes have caches of their own under one
//! kernel, as the sockets of a NUMA machine with coherence off do). Counted: takeovers
//! that failed, and keys whose last returned insert a later adopter does not find with
//! its value.

use super::Hazard;
use super::rewrite_journal::{over_kill_points, writer_killed_at_store};
use bi_alloc::NodeHeap;
use bi_collections::map::BiHashMap;
use bi_core::mem::MemView;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{Fault, RuntimeConfig};
use std::collections::BTreeMap;
use std::process::Command;

pub(super) const HAZARD: Hazard = Hazard {
    name: "killed_writers_stores_land_late",
    fault: Fault::DeadWriterStores,
    counts: "takeovers that failed, and keys whose insert returned that a later adopter lost",
    run,
};

const LEASE: u64 = 1_000_000;
const KEYS: u64 = 12;
/// What the successor adds to a key to make its value.
const SUCCESSOR: u64 = 1000;

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let config = config.node_lease(LEASE).reader_lease(LEASE);
    // Kill points: every fifth store of the workload (a line's rewrite is nine stores,
    // so each line's is hit), shifted by the seed.
    over_kill_points(1 + seed as usize % 5, 5, |n| kill_at(&config, seed, n))
}

/// Node 1 takes the map "m" over (with node 0's arena, which the map's memory is).
fn take_on_node_1(
    s: &Setup,
) -> Result<
    bi_collections::map::MapWriteHandle<u64, u64, bi_core::mem::EmulatedNode, NodeHeap>,
    bi_collections::CollectionError,
> {
    // Node 0's runtime is out of `s.nodes`: node 1's is first.
    let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).expect("arena");
    let map = BiHashMap::<u64, u64>::named(&s.region, &s.nodes[0], "m")?;
    map.take_writer(&s.nodes[0], s.nodes[0].writer(heap)?)
}

/// One run killed before store `n`: the count of what went wrong, and whether the
/// workload ended before store `n`.
fn kill_at(config: &RuntimeConfig, seed: u64, n: usize) -> (u64, bool) {
    let mut s = Setup::with(
        RegionConfig::new(1 << 20).with_nodes(2),
        |c| c.seed(seed).eviction_rate(0.01).adjacent_prefetch_rate(0.2),
        config.clone(),
    );
    let (acked, killed) = writer_killed_at_store(&mut s, config, n, KEYS);
    let mut expected: BTreeMap<u64, u64> = acked.into_iter().map(|k| (k, k)).collect();
    let finished = !killed;
    // Node 0's record names a process of this host, gone: node 1 takes over at once.
    let mut child = Command::new("sleep").arg("60").spawn().expect("sleep");
    let named = s.run_node_in(0, child.id()).expect("share record");
    let _ = child.kill();
    let _ = child.wait();
    if !named {
        return (1, finished);
    }
    match take_on_node_1(&s) {
        Ok(mut w) => {
            // New values for the dead writer's keys (in the lines it may have left
            // dirty), and keys of its own.
            for k in 0..2 * KEYS {
                if w.insert(k, k + SUCCESSOR).is_ok() {
                    expected.insert(k, k + SUCCESSOR);
                }
            }
        }
        Err(_) => return (1, finished),
    }
    // Node 0's cache writes back what it still holds, as it may at any moment.
    let heap = s.region.layout().heap();
    if s.emu.node(0).writeback(heap.offset, heap.len).is_err() {
        return (1, finished);
    }
    let Ok(w) = take_on_node_1(&s) else {
        return (1, finished);
    };
    let lost = expected
        .iter()
        .filter(|&(k, &v)| w.get(k) != Some(v))
        .count();
    (lost as u64, finished)
}
