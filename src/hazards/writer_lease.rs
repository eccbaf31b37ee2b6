//! Two writers of one structure: a writer whose node stopped passing for longer than the
//! node lease looks dead to the other nodes, another process takes its writer role, and
//! the first writer, which never noticed its stall, writes on beside its successor.
//!
//! The schedule: node 0 takes the writer role of a slot and publishes; node 0's passes
//! stall while time runs past its lease; node 1 takes the role (adopting the structure);
//! then node 0's writer, whose handles are still open, publishes again a few times.
//! Broken ([`Fault::WriterLease`]): the writer does not look at its heartbeat and every
//! publication goes through. BI: the writer finds its heartbeat older than half the
//! lease, renews it under the pool lock, finds the role taken
//! ([`BiError::RoleLost`]) and writes nothing. Counted: publications by node 0's writer
//! after node 1 took its role.

use super::{Hazard, two_runtimes};
use bi_core::runtime::{BiError, Fault, RuntimeConfig};
use std::time::Duration;

pub(super) const HAZARD: Hazard = Hazard {
    name: "writer_past_its_lease",
    fault: Fault::WriterLease,
    counts: "publications by a stalled writer after another process took its role",
    run,
};

const LEASE: u64 = 1_000_000;
const WAIT: Duration = Duration::from_secs(5);

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let s = two_runtimes(config.node_lease(LEASE).reader_lease(LEASE), seed, |c| c);
    let slot = s.slot(0);
    let _role = s.nodes[0].take_writer_role(slot, WAIT).expect("role");
    let mut w = s.writer(0);
    let first = w.alloc_sealed(1u64).expect("heap");
    w.publish_link(slot, first).expect("publish");
    // Node 0's passes stall (none runs) while time runs past its lease.
    s.emu.advance(2 * LEASE);
    let _taken = s.nodes[1].take_writer_role(slot, WAIT).expect("role");
    let mut published = 0;
    for value in 2..4 + seed % 4 {
        let write = w
            .alloc_sealed(value)
            .and_then(|link| w.publish_link(slot, link));
        match write {
            Ok(_) => published += 1,
            Err(BiError::RoleLost { .. }) => break,
            Err(e) => panic!("node 0's writer: {e}"),
        }
    }
    published
}
