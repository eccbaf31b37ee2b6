//! Publish before write-back: the pointer to a new object reaches memory before the object
//! does, so another node follows it into old or half-written bytes.
//!
//! Write-backs here are late, as the hardware's are: one starts a line's way to memory
//! and the line lands at the node's next fence at the latest, or earlier if it is
//! evicted. The schedule: the writer publishes; the moment it writes the slot back, the
//! slot's line is evicted (it lands) and node 1 reads the slot from memory and the
//! object it names. Broken ([`Fault::PublishOrder`]): the object's write-back is fenced
//! only after the slot's. BI: it is fenced before the slot is stored. Counted: fresh reads
//! of the slot whose object did not validate (or held another value).

use super::Hazard;
use bi_core::heap::BumpHeap;
use bi_core::mem::{Access, Observed};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{EmulatedClock, Fault, NodeRuntime, RuntimeConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) const HAZARD: Hazard = Hazard {
    name: "publish_before_writeback",
    fault: Fault::PublishOrder,
    counts: "fresh reads of a published slot whose object was not in memory",
    run,
};

/// Four lines' worth of value.
type Val = [u64; 28];

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let mut s = Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        // Late write-backs, landing at fences (or evictions) only.
        |c| c.seed(seed).late_writebacks(1e-9),
        config.clone(),
    );
    let slot = s.slot(0);
    // Node 0 runs over an observed view (its plain runtime gives the node up first).
    drop(s.nodes.remove(0));
    let node0 = s.emu.node(0);
    let node1 = s.nodes[0].clone();
    let torn = Arc::new(AtomicU64::new(0));
    let (count, evict) = (torn.clone(), node0.clone());
    let view = Observed::new(node0.clone(), move |access| {
        if access == Access::WriteBack(slot, 8) {
            // The slot's line leaves the writer's cache now; node 1 reads it from memory.
            evict.evict(slot)?;
            let reader = node1.reader().expect("reader slot");
            let g = reader.enter();
            let read = g.load_fresh::<Val>(slot);
            let whole = matches!(&read, Ok(Some(v)) if v.iter().all(|&x| x == v[0]));
            count.fetch_add(u64::from(!whole), Ordering::Relaxed);
        }
        Ok(())
    });
    let layout = *s.region.layout();
    let clock = Arc::new(EmulatedClock::new(node0));
    let rt = NodeRuntime::new(view, layout, 0, config, clock).expect("runtime");
    let heap = BumpHeap::new(s.arena(0), layout.line_size()).expect("arena");
    let mut w = rt.writer(heap).expect("writer");
    for version in 1..=16u64 {
        let b = w.alloc([version; 28]).expect("heap");
        w.publish(slot, b).expect("publish");
    }
    torn.load(Ordering::Relaxed)
}
