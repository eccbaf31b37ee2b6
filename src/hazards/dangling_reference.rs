//! Dangling reference: a block is reused while a node still caches lines of the object it
//! held, and that node reads them as if they were the new object.
//!
//! The schedule is the hard case of reclamation without coherence: a reader on node 1 is
//! inside a section holding the old object's link when node 1's pass invalidates it, and
//! walks the object again afterwards, pulling its lines back into node 1's cache. Broken:
//! the block is reused once the reader has left and one pass has run (the RCU rule plus
//! one cache flush). BI: the writer reuses the block only when the grace point says so
//! (after a second invalidation on node 1). Counted: the oracle's reuse hazards on node 1.

use super::{Hazard, Variant, two_runtimes};
use bi_core::heap::BumpHeap;
use bi_core::mem::{EmulatedNode, MemView};
use bi_core::runtime::Writer;

pub(super) const HAZARD: Hazard = Hazard {
    name: "dangling_reference",
    counts: "loads on the reader's node of a reused block's old lines (oracle reuse hazards)",
    run,
};

/// Four lines' worth of value.
type Val = [u64; 28];

fn publish(w: &mut Writer<EmulatedNode, BumpHeap>, slot: usize, id: u64) -> u64 {
    let b = w.alloc([id; 28]).expect("heap");
    w.publish(slot, b).expect("publish").offset() as u64
}

fn run(variant: Variant, seed: u64) -> u64 {
    let s = two_runtimes(seed, |c| c);
    let slot = s.slot(0);
    let mut w = s.writer(0);
    publish(&mut w, slot, 1);
    s.quiesce_all().expect("pass");
    let reader = s.nodes[1].reader().expect("reader slot");
    let n1 = s.emu.node(1);
    let guard = reader.enter();
    let x = guard
        .load::<Val>(slot)
        .expect("read")
        .expect("published")
        .link();
    publish(&mut w, slot, 2);
    w.retire(x).expect("retire");
    s.quiesce_all().expect("pass");
    // The reader (still inside) walks X again: its lines come back into node 1's cache.
    for line in 0..4 {
        n1.prefetch(x.offset() + 64 * line).expect("in bounds");
    }
    drop(guard);
    match variant {
        Variant::Broken => {
            // Reuse now: the reader has left and node 1 has passed once. The writer's node
            // hands the block out again, as its heap would.
            let a = s.emu.node(0);
            a.note_reuse(x.offset(), 4 * 64).expect("in bounds");
            a.store(x.offset(), &[3u64; 32]).expect("in bounds");
            a.writeback(x.offset(), 4 * 64).expect("in bounds");
            a.fence();
        }
        Variant::Bi => {
            // Reuse when the grace point allows it.
            while w.reclaim().expect("reclaim").freed_blocks == 0 {
                s.quiesce_all().expect("pass");
            }
            publish(&mut w, slot, 3);
        }
    }
    // Node 1 reads X's block again, as a reader that followed a stale link would.
    for line in 0..4 {
        let _: u64 = n1.load(x.offset() + 64 * line).expect("in bounds");
    }
    s.emu.stats(1).reuse_hazards
}
