//! Prefetch after invalidate: a node drops a line, the hardware prefetcher brings it
//! straight back, and the writer's new bytes land in memory after that; the node's next
//! load hits the refilled, now stale, copy although it "just invalidated".
//!
//! No invalidation schedule can rule this out, so BI objects carry their identity: the
//! link to an object names its generation and every line of the object repeats it. The
//! objects here are not logged for the passes (`track_objects(false)`, as the sealed
//! objects of a path copy are not), so only the stamps can tell. The schedule: the writer retires an object, the grace period gives its block back, and the
//! writer builds the next value in that block; before its write-back, node 1's prefetcher
//! fetches the block (its old, retired bytes). The writer publishes; node 1's pass drops
//! the slot, and node 1 reads the slot's new link and the object it names. Broken
//! ([`Fault::LineStamp`]): the read does not compare the line's stamp with the link, and
//! takes the refilled copy. BI: it does, drops the line and reads it again. Counted: old
//! values returned for a new link.

use super::{Hazard, hostile, two_runtimes};
use bi_core::runtime::{Fault, RuntimeConfig};

pub(super) const HAZARD: Hazard = Hazard {
    name: "prefetch_after_invalidate",
    fault: Fault::LineStamp,
    counts: "old values returned for a new link (a prefetch refilled the line)",
    run,
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    // Objects are not logged for the passes (as with sealed objects of a path copy), so
    // nothing but the stamp tells node 1 its copy is old.
    let s = two_runtimes(config.track_objects(false), seed, hostile);
    let slot = s.slot(0);
    let mut w = s.writer(0);
    let reader = s.nodes[1].reader().expect("reader slot");
    let n1 = s.emu.node(1);
    let mut accepted_stale = 0;
    for version in 1..=24u64 {
        let b = w.alloc([version; 4]).expect("heap");
        // The prefetcher fetches the block before the writer's new bytes reach memory.
        n1.prefetch(b.offset()).expect("in bounds");
        let old = w.publish(slot, b).expect("publish");
        if !old.is_null() {
            w.retire(old).expect("retire");
        }
        s.nodes[1].quiesce().expect("pass");
        let seen = *reader
            .enter()
            .load::<[u64; 4]>(slot)
            .expect("valid read")
            .expect("published");
        accepted_stale += u64::from(seen != [version; 4]);
        // The grace period lets the writer reuse the old block for the next version.
        s.nodes[0].quiesce().expect("pass");
        s.nodes[1].quiesce().expect("pass");
        w.reclaim().expect("reclaim");
    }
    accepted_stale
}
