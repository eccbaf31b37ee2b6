//! The order an object's line is written in, shown needed. The writer stores
//! `INVALID` over the line's stamp, then the payload, then the object's stamp, so a copy
//! of the line taken half way (the line evicted from the writer's cache between two of
//! its stores, and fetched by another node's prefetch) never carries the new stamp over
//! an old payload. With [`Fault::StampOrder`] the stamp goes first: such a copy passes
//! for the new object, and a reader that later follows the object's link reads it from
//! its cache with no reason to doubt it.
//!
//! The schedule is scripted over an observed view of the writer's node: at the writer's
//! second store into the object's line (its first payload word), the line is evicted
//! (written back) and node 1 fetches it.

use bi_core::heap::BumpHeap;
use bi_core::mem::{Access, MemView, Observed};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{EmulatedClock, Fault, NodeRuntime, RuntimeConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const VALUE: [u64; 4] = [11, 22, 33, 44];

/// What node 1 reads through the published link of an object whose line was evicted
/// and prefetched half written.
fn read_after_a_half_written_prefetch(config: RuntimeConfig) -> [u64; 4] {
    let mut s = Setup::with(
        RegionConfig::new(1 << 20).with_nodes(2),
        |c| c.seed(1),
        config.clone(),
    );
    // Node 0 runs over the observed view (its plain runtime gives the node up first).
    drop(s.nodes.remove(0));
    let (node0, node1) = (s.emu.node(0), s.emu.node(1));
    // Stores into the writer's arena since the schedule was armed (0: not armed).
    let stores = Arc::new(AtomicUsize::new(0));
    let (seen, arena) = (stores.clone(), s.arena(0));
    let (evict, fetch) = (node0.clone(), node1.clone());
    let view = Observed::new(node0.clone(), move |access| {
        if let Access::Store(at) = access
            && arena.contains(&at)
            && seen.load(Ordering::SeqCst) > 0
            && seen.fetch_add(1, Ordering::SeqCst) == 2
        {
            // The line's first store is done, its payload not yet: the line leaves the
            // writer's cache now, and node 1 fetches it.
            let line = at / 64 * 64;
            evict.writeback(line, 64).unwrap();
            evict.fence();
            fetch.invalidate(line, 64).unwrap();
            fetch.fence();
            let _: u64 = fetch.load(line).unwrap();
        }
        Ok(())
    });
    let clock = Arc::new(EmulatedClock::new(node0));
    let rt = NodeRuntime::new(view, *s.region.layout(), 0, config, clock).unwrap();
    let heap = BumpHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
    let mut w = rt.writer(heap).unwrap();
    let slot = s.slot(0);
    stores.store(1, Ordering::SeqCst);
    let link = w.alloc_sealed(VALUE).unwrap();
    assert!(stores.load(Ordering::SeqCst) > 2, "the schedule never ran");
    w.publish_link(slot, link).unwrap();
    let r = s.nodes[0].reader().unwrap();
    let g = r.enter();
    let v = g.load_fresh::<[u64; 4]>(slot).unwrap().expect("published");
    *v
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a scripted emulator schedule; the object paths run under Miri elsewhere"
)]
fn a_line_caught_half_written_is_never_taken_for_the_new_object() {
    assert_eq!(
        read_after_a_half_written_prefetch(RuntimeConfig::default()),
        VALUE
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a scripted emulator schedule; the object paths run under Miri elsewhere"
)]
fn with_the_stamp_written_first_a_reader_takes_the_old_payload() {
    let broken = RuntimeConfig::default().fault(Fault::StampOrder);
    assert_ne!(read_after_a_half_written_prefetch(broken), VALUE);
}
