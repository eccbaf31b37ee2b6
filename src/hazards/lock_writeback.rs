//! Two holders of the pool lock: the lock is a bakery over lock records that each node
//! writes in its own cache and the others read from memory, so a record that is stored
//! but never written back is one no other node sees.
//!
//! The schedule, on adversarial hardware, alternates the nodes: each round one node takes
//! the lock, and while it holds it the other node tries to take it too (giving up at
//! once if it must wait). Broken ([`Fault::LockWriteback`]): the records are stored and
//! fenced but not written back, so memory holds what it held before (or whatever a random
//! eviction wrote back), and the second node finds no ticket ahead of its own. BI: every
//! record is written back before the fence, and the second node waits for the holder's
//! ticket. Counted: acquisitions granted while the other node held the lock.

use super::{Hazard, hostile, two_runtimes};
use bi_core::runtime::{BiError, Fault, RuntimeConfig};
use std::time::Duration;

pub(super) const HAZARD: Hazard = Hazard {
    name: "two_holders_of_the_pool_lock",
    fault: Fault::LockWriteback,
    counts: "pool lock acquisitions granted while another node held the lock",
    run,
};

const ROUNDS: usize = 16;

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let s = two_runtimes(config, seed, hostile);
    // Nobody waits: a node that finds another's ticket ahead of its own gives up.
    let at_once = Duration::ZERO;
    let mut overlaps = 0;
    for round in 0..ROUNDS {
        let (holder, other) = (&s.nodes[round % 2], &s.nodes[1 - round % 2]);
        let _held = match holder.lock(at_once) {
            Ok(guard) => guard,
            // A stale record in memory can make even a lone node wait (broken variant).
            Err(BiError::LockTimeout { .. }) => continue,
            Err(e) => panic!("lock: {e}"),
        };
        match other.lock(at_once) {
            Ok(_second) => overlaps += 1,
            Err(BiError::LockTimeout { .. }) => {}
            Err(e) => panic!("lock: {e}"),
        }
    }
    overlaps
}
