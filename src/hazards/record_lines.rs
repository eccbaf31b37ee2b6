//! Two nodes writing one line: whichever writes its copy back second overwrites the other's
//! bytes with the stale values its copy still holds.
//!
//! The pool lock is a bakery: each node writes only its own lock record and reads the
//! others' from memory. The schedule, twenty turns: one node takes the lock and holds it
//! while the other asks for it (and gives up after a millisecond), then both let go; the
//! nodes swap roles every turn. Broken ([`Fault::RecordLines`]): the two records lie side
//! by side in one line, so every write of a node's record writes back its copy of the
//! other's as it last read it, over what the other wrote since: the ticket the other
//! withdrew comes back, and the next node to take the lock waits for a holder that is
//! gone until its timeout. BI: every record a node writes lies on lines of its own.
//! Counted: the oracle's lost writes.

use super::{Hazard, two_runtimes};
use bi_core::runtime::{Fault, RuntimeConfig};
use std::time::Duration;

pub(super) const HAZARD: Hazard = Hazard {
    name: "two_nodes_one_line",
    fault: Fault::RecordLines,
    counts: "write-backs that overwrote another node's newer bytes (oracle lost_writes)",
    run,
};

const TURNS: usize = 20;

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let s = two_runtimes(config, seed, super::hostile);
    for turn in 0..TURNS {
        let (holder, asker) = (&s.nodes[turn % 2], &s.nodes[1 - turn % 2]);
        // Either may time out in the broken variant, on a ticket that came back.
        let held = holder.lock(Duration::from_millis(1));
        let asked = asker.lock(Duration::from_millis(1));
        drop(asked);
        drop(held);
    }
    s.emu.total_stats().lost_writes
}
