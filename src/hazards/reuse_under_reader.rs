//! A block reused under a reader: a reader on node 1 is inside a section that reached an
//! object when the writer on node 0 replaces and retires it, and keeps reading it through
//! the link it holds (after each pass of its node, as a reader walking a structure
//! does). The writer then reclaims and allocates an object of the same size, and the
//! reader reads its link once more. Two rows run this schedule.
//!
//! **Reuse before the grace point**. Broken ([`Fault::GraceWait`]): the writer's
//! reclamation gives the retired block back at once, and the new object reuses it while
//! the reader's node still caches the old object's lines. BI: the grace point has not
//! passed the retirement (the reader's node has not drained the retired group: the
//! reader is still inside), so nothing is given back and the new object goes elsewhere.
//!
//! **A section nobody sees**. Broken ([`Fault::ReaderRecord`]): the reader does not
//! record its section, so its node's passes find no reader inside, drain the retired
//! group, and the grace point passes the retirement: the writer gives the block back
//! and reuses it. BI: the passes see the reader's enter tick and keep the group.
//!
//! Counted in both: loads on the reader's node that returned a line of the block from
//! before its reuse (the oracle's reuse hazards). The reader's generation check still
//! refuses the object (the retirement's FREED mark, then the new generation): what the
//! rows show is the grace period failing, which leaves the reader protected by that
//! check alone.

use super::{Hazard, two_runtimes};
use bi_core::runtime::{Fault, RuntimeConfig};

pub(super) const HAZARD: Hazard = Hazard {
    name: "reuse_before_grace",
    fault: Fault::GraceWait,
    counts: "loads on a reader's node of a block's lines from before its reuse (oracle reuse_hazards)",
    run: reader_inside_while_the_block_is_reused,
};

pub(super) const UNRECORDED: Hazard = Hazard {
    name: "unrecorded_reader",
    fault: Fault::ReaderRecord,
    counts: "loads on a reader's node of a block's lines from before its reuse (oracle reuse_hazards)",
    run: reader_inside_while_the_block_is_reused,
};

/// Four lines' worth of value.
type Val = [u64; 28];

/// Passes between the retirement and the reclamation: more than enough for the grace
/// point to pass the retirement once no reader holds it back.
const PASSES: usize = 3;

fn reader_inside_while_the_block_is_reused(config: RuntimeConfig, seed: u64) -> u64 {
    let s = two_runtimes(config, seed, super::hostile);
    let slot = s.slot(0);
    let mut w = s.writer(0);
    let first = w.alloc([1u64; 28]).expect("heap");
    w.publish(slot, first).expect("publish");
    s.quiesce_all().expect("pass");
    let reader = s.nodes[1].reader().expect("reader slot");
    let section = reader.enter();
    let kept = section
        .load::<Val>(slot)
        .expect("read")
        .expect("published")
        .link();
    let second = w.alloc([2u64; 28]).expect("heap");
    let old = w.publish(slot, second).expect("publish");
    w.retire(old).expect("retire");
    for _ in 0..PASSES {
        s.quiesce_all().expect("pass");
        // Refused (the object is retired), but its lines are in the reader's cache again.
        let _ = section.follow(kept);
    }
    w.reclaim().expect("reclaim");
    let third = w.alloc([3u64; 28]).expect("heap");
    w.publish(slot, third).expect("publish");
    let before = s.emu.stats(1).reuse_hazards;
    let _ = section.follow(kept);
    s.emu.stats(1).reuse_hazards - before
}
