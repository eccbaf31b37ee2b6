//! Dangling reference: a block is reused while a node still caches lines of the object it
//! held, and that node reads them as if they were the new object.
//!
//! The schedule is the hard case of reclamation without coherence: a reader on node 1 is
//! inside a section holding the old object's link when node 1's pass invalidates it, and
//! walks the object again afterwards, pulling its lines back into node 1's cache. The
//! writer reuses the block as soon as the grace point allows. Broken
//! ([`Fault::SecondInvalidation`]): node 1's pass drops the retired object's lines once,
//! when it reads the retirement, and not again once the reader has left (the RCU rule
//! plus one cache flush). BI: it drops them again then. Counted: the oracle's reuse
//! hazards on node 1.

use super::{Hazard, two_runtimes};
use bi_core::heap::BumpHeap;
use bi_core::mem::{EmulatedNode, MemView};
use bi_core::runtime::{Fault, RuntimeConfig, Writer};

pub(super) const HAZARD: Hazard = Hazard {
    name: "dangling_reference",
    fault: Fault::SecondInvalidation,
    counts: "loads on the reader's node of a reused block's old lines (oracle reuse hazards)",
    run,
};

/// Four lines' worth of value.
type Val = [u64; 28];

fn publish(w: &mut Writer<EmulatedNode, BumpHeap>, slot: usize, id: u64) -> u64 {
    let b = w.alloc([id; 28]).expect("heap");
    w.publish(slot, b).expect("publish").offset() as u64
}

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let s = two_runtimes(config, seed, |c| c);
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
    // Reuse when the grace point allows it.
    while w.reclaim().expect("reclaim").freed_blocks == 0 {
        s.quiesce_all().expect("pass");
    }
    publish(&mut w, slot, 3);
    // Node 1 reads X's block again, as a reader that followed a stale link would.
    for line in 0..4 {
        let _: u64 = n1.load(x.offset() + 64 * line).expect("in bounds");
    }
    s.emu.stats(1).reuse_hazards
}
