//! One node run from two hosts: a second host is started with a node id another live
//! process runs, and its passes speak for the node, from a cache that is not the node's.
//!
//! The schedule: node 0's writer publishes an object; node 1's reader enters a section
//! and reads it (node 1's host caches the slot and the object). Then a process on a
//! third host starts as node 1. The writer replaces and retires the object, node 0 and
//! the second process pass, and the writer reuses the object's block if the grace point
//! allows. The reader, still inside its section, follows its link again. Broken
//! ([`Fault::NodeClaim`]): the second process is let in; its passes read node 1's reader
//! records from its own host (where no reader is inside) and publish node 1's record, so
//! the grace point passes node 1 by and the block is reused under the reader. BI: the
//! second process is refused ([`BiError::NodeTaken`](bi_core::runtime::BiError::NodeTaken)),
//! and the block waits for node 1's own passes. Counted: the oracle's reuse hazards on
//! node 1's host.

use super::Hazard;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{EmulatedClock, Fault, NodeRuntime, RuntimeConfig};
use std::sync::Arc;

pub(super) const HAZARD: Hazard = Hazard {
    name: "one_node_two_hosts",
    fault: Fault::NodeClaim,
    counts: "loads on node 1's host of a reused block's old lines (oracle reuse hazards)",
    run,
};

/// Four lines' worth of value.
type Val = [u64; 28];

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    // Three hosts; the third host's own process leaves (cleanly: it holds nothing back).
    let mut s = Setup::with(
        RegionConfig::new(1 << 18).with_nodes(3),
        |c| c.seed(seed),
        config.clone(),
    );
    s.nodes.truncate(2);
    let slot = s.slot(0);
    let mut w = s.writer(0);
    let b = w.alloc([1u64; 28]).expect("heap");
    w.publish(slot, b).expect("publish");
    for _ in 0..2 {
        s.quiesce_all().expect("pass");
    }
    let reader = s.nodes[1].reader().expect("reader slot");
    let guard = reader.enter();
    let x = guard
        .load::<Val>(slot)
        .expect("read")
        .expect("published")
        .link();
    // A process on the third host starts as node 1.
    let third = s.emu.node(2);
    let clock = Arc::new(EmulatedClock::new(third.clone()));
    let second = NodeRuntime::new(third, *s.region.layout(), 1, config, clock).ok();
    let b = w.alloc([2u64; 28]).expect("heap");
    let old = w.publish(slot, b).expect("publish");
    w.retire(old).expect("retire");
    for _ in 0..3 {
        s.nodes[0].quiesce().expect("pass");
        if let Some(second) = &second {
            second.quiesce().expect("pass");
        }
    }
    if w.reclaim().expect("reclaim").freed_blocks > 0 {
        let b = w.alloc([3 + seed; 28]).expect("heap");
        debug_assert_eq!(b.offset(), x.offset(), "the block is reused");
        w.publish(slot, b).expect("publish");
    }
    // The reader, still inside, follows its link again (the object it read is live for
    // it until it leaves).
    let _ = guard.follow(x);
    drop(guard);
    s.emu.stats(1).reuse_hazards
}
