//! Clock skew beyond `D`: nodes compare times from different clocks, allowing for a skew
//! bound `D`; a clock that is further off than `D` makes a node's old pass look recent, and
//! a block is reused while that node still caches it.
//!
//! Node 1's clock runs 5 000 ticks ahead of node 0's, and the runtime's `D` covers that.
//! Broken ([`Fault::SkewBound`]): the grace point compares the clocks as if they agreed.
//! BI: it allows for `D`. Counted: the oracle's reuse hazards on node 1 when it reads the
//! slot after the writer reused every block it could.

use super::Hazard;
use bi_core::heap::BumpHeap;
use bi_core::mem::EmulatedNode;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{Clock, Fault, NodeRuntime, ReaderOrdering, RuntimeConfig};
use std::sync::Arc;

pub(super) const HAZARD: Hazard = Hazard {
    name: "clock_skew_beyond_bound",
    fault: Fault::SkewBound,
    counts: "loads of a reused block's old lines on the skewed node (oracle reuse hazards)",
    run,
};

const AHEAD: u64 = 5_000;

/// Node 1's clock: the emulator's, plus a constant lead.
struct Ahead(EmulatedNode);

impl Clock for Ahead {
    fn now(&self) -> u64 {
        self.0.local_time() + AHEAD
    }
}

type Val = [u64; 28];

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let mut s = Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        |c| c.seed(seed),
        RuntimeConfig::default(),
    );
    // Node runtimes of our own (node 1's with its skewed clock) replace the setup's.
    s.nodes.clear();
    let cfg = config.skew(AHEAD).reader_ordering(ReaderOrdering::Emulated);
    let layout = *s.region.layout();
    let clock = Arc::new(Ahead(s.emu.node(1)));
    let n1 = NodeRuntime::new(s.emu.node(1), layout, 1, cfg.clone(), clock).expect("runtime");
    let n0 = NodeRuntime::emulated(s.emu.node(0), layout, cfg).expect("runtime");
    let heap = BumpHeap::new(s.arena(0), layout.line_size()).expect("arena");
    let mut w = n0.writer(heap).expect("writer");
    let slot = s.slot(0);

    let b = w.alloc([1u64; 28]).expect("heap");
    w.publish(slot, b).expect("publish");
    n0.quiesce().expect("pass");
    n1.quiesce().expect("pass");
    n1.quiesce().expect("pass"); // node 1's last pass before the retirement
    let reader = n1.reader().expect("reader slot");
    let x = reader
        .enter()
        .load::<Val>(slot)
        .expect("read")
        .expect("published")
        .link(); // node 1 now caches the slot and X
    s.emu.advance(100);
    let b = w.alloc([2u64; 28]).expect("heap");
    let old = w.publish(slot, b).expect("publish");
    w.retire(old).expect("retire");
    for _ in 0..2 {
        n0.quiesce().expect("pass"); // only the writer's node passes
    }
    if w.reclaim().expect("reclaim").freed_blocks > 0 {
        // The block came free while node 1 never passed after the retirement.
        let b = w.alloc([3u64; 28]).expect("heap");
        debug_assert_eq!(b.offset(), x.offset());
        w.publish(slot, b).expect("publish");
    }
    // Node 1 reads through its (stale) cached slot.
    let _ = reader.enter().load::<Val>(slot);
    s.emu.stats(1).reuse_hazards
}
