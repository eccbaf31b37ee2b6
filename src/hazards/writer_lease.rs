//! Two writers of one structure: a writer whose node stopped passing for longer than the
//! node lease looks dead to the other nodes, another process takes its writer role, and
//! the first writer, which never noticed its stall, writes on beside its successor.
//!
//! The schedule: node 0 takes the writer role of a slot and publishes; node 0's passes
//! stall while time runs past its lease; node 1 takes the role (adopting the structure);
//! then node 0's writer, whose handles are still open, publishes again a few times,
//! going on after a [`BiError::RoleLost`] as a careless caller would. Three rows, one per
//! mechanism that stops it, counting publications by node 0's writer after node 1 took
//! its role:
//!
//! - `writer_past_its_lease` ([`Fault::WriterLease`]): switched off, the writer does not
//!   look at its heartbeat. BI: it finds the heartbeat older than half the lease, renews
//!   it under the pool lock, finds the role taken and writes nothing.
//! - `writer_renewed_by_a_pass` ([`Fault::LeaseLapse`]): node 0's pass thread wakes first
//!   and passes once, so the heartbeat the writer checks is fresh. Switched off, nothing
//!   tells the writer its lease lapsed. BI: the pass flags the lapse and the writer
//!   renews, reading its roles, before it writes.
//! - `lost_role_writes_again` ([`Fault::LostRoles`]): switched off, the renewal that
//!   reported the role lost also made the heartbeat fresh, and the next write through the
//!   same handle publishes. BI: the role stays lost until its handle is dropped.

use super::{Hazard, two_runtimes};
use bi_core::runtime::{BiError, Fault, RuntimeConfig};
use std::time::Duration;

pub(super) const HAZARD: Hazard = Hazard {
    name: "writer_past_its_lease",
    fault: Fault::WriterLease,
    counts: "publications by a stalled writer after another process took its role",
    run: |config, seed| run(config, seed, false),
};

pub(super) const RENEWED_BY_A_PASS: Hazard = Hazard {
    name: "writer_renewed_by_a_pass",
    fault: Fault::LeaseLapse,
    counts: "publications by a stalled writer, after one pass, once another process took its role",
    run: |config, seed| run(config, seed, true),
};

pub(super) const LOST_AGAIN: Hazard = Hazard {
    name: "lost_role_writes_again",
    fault: Fault::LostRoles,
    counts: "publications through a handle after it was told its role was lost",
    run: |config, seed| run(config, seed, false),
};

const LEASE: u64 = 1_000_000;
const WAIT: Duration = Duration::from_secs(5);

fn run(config: RuntimeConfig, seed: u64, pass_first: bool) -> u64 {
    let s = two_runtimes(config.node_lease(LEASE).reader_lease(LEASE), seed, |c| c);
    let slot = s.slot(0);
    let _role = s.nodes[0].take_writer_role(slot, WAIT).expect("role");
    let mut w = s.writer(0);
    let first = w.alloc_sealed(1u64).expect("heap");
    w.publish_link(slot, first).expect("publish");
    // Node 0's passes stall (none runs) while time runs past its lease.
    s.emu.advance(2 * LEASE);
    let _taken = s.nodes[1].take_writer_role(slot, WAIT).expect("role");
    if pass_first {
        s.nodes[0].quiesce().expect("node 0's pass");
    }
    let mut published = 0;
    for value in 2..4 + seed % 4 {
        let write = w
            .alloc_sealed(value)
            .and_then(|link| w.publish_link(slot, link));
        match write {
            Ok(_) => published += 1,
            Err(BiError::RoleLost { .. }) => {}
            Err(e) => panic!("node 0's writer: {e}"),
        }
    }
    published
}
