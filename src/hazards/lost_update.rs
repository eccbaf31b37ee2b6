//! Two nodes writing one line: whichever writes its copy back second overwrites the other's
//! bytes with the stale values its copy still holds.
//!
//! Broken: two nodes keep their counters in the same line. BI: every record a node writes
//! is padded to a line of its own. Counted: the oracle's lost writes.

use super::{Hazard, Variant, adversarial};
use bi_core::mem::{Emulator, MemView};

pub(super) const HAZARD: Hazard = Hazard {
    name: "two_nodes_one_line",
    counts: "write-backs that overwrote another node's newer bytes (oracle lost_writes)",
    run,
};

fn run(variant: Variant, seed: u64) -> u64 {
    let emu = Emulator::new(adversarial(4096, 2, seed));
    let (a, b) = (emu.node(0), emu.node(1));
    let (at_a, at_b) = match variant {
        Variant::Broken => (0, 8),
        Variant::Bi => (0, 64),
    };
    for i in 1..=200u64 {
        for (node, at) in [(&a, at_a), (&b, at_b)] {
            node.store(at, &i).expect("in bounds");
            node.writeback(at, 8).expect("in bounds");
            node.fence();
        }
    }
    emu.total_stats().lost_writes
}
