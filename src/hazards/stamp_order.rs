//! A half-written line: an object's line is copied into another node's cache between two
//! of the writer's stores into it, and the copy passes for the new object.
//!
//! The writer stores [`Stamp::INVALID`](bi_core::runtime::Stamp::INVALID) over the line's
//! stamp, then the payload, then the object's stamp, so a copy taken half way never
//! carries the new stamp over an old payload. The schedule, scripted over an observed
//! view of the writer's node: at the writer's second store into the new object's line,
//! the line reaches memory as it stands (as an eviction would write it back) and node 1
//! fetches it; the writer then finishes and publishes, and node 1 reads the slot fresh
//! and follows it to the object, which its cache already holds. Broken
//! ([`Fault::StampOrder`]): the stamp is stored first, so node 1's copy holds the new
//! stamp over the old payload. BI: the copy holds `INVALID`, which matches no link, so
//! the read drops it and fetches the line again. Counted: reads of the published object
//! that returned another value than the one published.

use super::Hazard;
use bi_core::heap::BumpHeap;
use bi_core::mem::{Access, MemView, Observed};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{EmulatedClock, Fault, NodeRuntime, RuntimeConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

pub(super) const HAZARD: Hazard = Hazard {
    name: "half_written_line",
    fault: Fault::StampOrder,
    counts: "reads of a published object that returned a copy taken half way through its write",
    run,
};

/// One line's worth of value (with the line's stamp).
type Val = [u64; 4];

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let value: Val = [seed + 11, seed + 22, seed + 33, seed + 44];
    let mut s = Setup::with(
        RegionConfig::new(1 << 20).with_nodes(2),
        |c| c.seed(seed),
        config.clone(),
    );
    // Node 0 runs over an observed view (its plain runtime gives the node up first).
    drop(s.nodes.remove(0));
    let (node0, node1) = (s.emu.node(0), s.emu.node(1));
    // Stores into the writer's arena since the schedule was armed (0: not armed).
    let stores = Arc::new(AtomicUsize::new(0));
    let (seen, arena) = (stores.clone(), s.arena(0));
    let (evict, fetch) = (node0.clone(), node1.clone());
    let line = s.region.layout().line_size().get();
    let view = Observed::new(node0.clone(), move |access| {
        if let Access::Store(at) = access
            && arena.contains(&at)
            && seen.load(Ordering::SeqCst) > 0
            && seen.fetch_add(1, Ordering::SeqCst) == 2
        {
            // The line's first store is done, its payload not yet: the line reaches
            // memory now, and node 1 fetches it.
            let start = at / line * line;
            evict.writeback(start, line)?;
            evict.fence();
            fetch.invalidate(start, line)?;
            fetch.fence();
            let _: u64 = fetch.load(start)?;
        }
        Ok(())
    });
    let clock = Arc::new(EmulatedClock::new(node0));
    let layout = *s.region.layout();
    let rt = NodeRuntime::new(view, layout, 0, config, clock).expect("runtime");
    let heap = BumpHeap::new(s.arena(0), layout.line_size()).expect("arena");
    let mut w = rt.writer(heap).expect("writer");
    let slot = s.slot(0);
    stores.store(1, Ordering::SeqCst);
    let link = w.alloc_sealed(value).expect("heap");
    debug_assert!(stores.load(Ordering::SeqCst) > 2, "the schedule ran");
    w.publish_link(slot, link).expect("publish");
    let reader = s.nodes[0].reader().expect("reader slot");
    let read = *reader
        .enter()
        .load_fresh::<Val>(slot)
        .expect("read")
        .expect("published");
    u64::from(read != value)
}
