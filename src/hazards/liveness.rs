//! Reclamation held back forever: the liveness half of the protocol. The grace period
//! waits for every node's passes and for every reader inside a section; a party that
//! stops (a host that dies, a thread stopped inside its section) would make it wait
//! forever, and every retired block with it. Leases bound the wait. Two rows, each with a
//! short lease: the writer on node 0 publishes a value into one slot twelve times,
//! retiring the one it replaces, while the clock moves a quarter of the lease between
//! publications; the live nodes pass after each, and the writer reclaims.
//!
//! **A dead node**. Node 1's host dies after its first pass, leaving its claim in the
//! region. Broken ([`Fault::NodeLease`]): the grace point waits for every claimed node,
//! and node 1's reclaim point never moves again. BI: once its heartbeat is older than
//! the node lease, writers leave it out of the grace point.
//!
//! **A stuck reader**. A reader on node 1 enters a section and never leaves it. Broken
//! ([`Fault::ReaderLease`]): node 1's passes wait for it, so the retired groups are never
//! drained and node 1's reclaim point never moves. BI: once it has been inside longer
//! than the reader lease, the passes leave it out (and report it).
//!
//! Leaving a party out is safe because the party notices: a node whose pass finds that
//! its own heartbeat may have lapsed, or a process that takes over a node, drops every
//! line of the heap and the root directory it caches; a stopped reader that resumes is
//! protected by the generation check (it never accepts a reused block's bytes as the
//! object its link names). Counted: retired blocks still not given back to the heap
//! after the last publication and two more passes.

use super::{Hazard, hostile, two_runtimes};
use bi_core::runtime::Fault;
use bi_core::runtime::testing::Setup;

pub(super) const HAZARD: Hazard = Hazard {
    name: "dead_node_holds_memory",
    fault: Fault::NodeLease,
    counts: "retired blocks never given back while a dead node keeps its claim",
    run: |config, seed| {
        let mut s = two_runtimes(config.node_lease(LEASE), seed, hostile);
        s.quiesce_all().expect("pass");
        // Node 1's host dies: its claim stays in memory, its cache is lost.
        std::mem::forget(s.nodes.remove(1));
        s.emu.node(1).crash();
        retire_and_reclaim(&s)
    },
};

pub(super) const STUCK_READER: Hazard = Hazard {
    name: "stuck_reader_holds_memory",
    fault: Fault::ReaderLease,
    counts: "retired blocks never given back while a reader stays in its section",
    run: |config, seed| {
        let s = two_runtimes(config.reader_lease(LEASE), seed, hostile);
        s.quiesce_all().expect("pass");
        let reader = s.nodes[1].reader().expect("reader slot");
        let stuck = reader.enter();
        let unreclaimed = retire_and_reclaim(&s);
        drop(stuck);
        unreclaimed
    },
};

/// The lease under test, in ticks.
const LEASE: u64 = 40_000;
const PUBLICATIONS: u64 = 12;

/// Node 0 publishes and retires while time moves on; every node `s` still runs passes
/// after each publication. Returns the retired blocks not given back in the end.
fn retire_and_reclaim(s: &Setup) -> u64 {
    let slot = s.slot(0);
    let mut w = s.writer(0);
    for value in 1..=PUBLICATIONS {
        let b = w.alloc(value).expect("heap");
        let old = w.publish(slot, b).expect("publish");
        if !old.is_null() {
            w.retire(old).expect("retire");
        }
        s.emu.advance(LEASE / 4);
        s.quiesce_all().expect("pass");
        w.reclaim().expect("reclaim");
    }
    for _ in 0..2 {
        s.quiesce_all().expect("pass");
    }
    w.reclaim().expect("reclaim").pending_blocks as u64
}
