//! A node stalled inside the pool lock: while it waits its turn, time runs past its
//! lease, another node passes over its lapsed record and takes the lock, and the stalled
//! node, resuming, goes on with the ticket it took before the stall.
//!
//! The pool lock is a bakery whose records carry heartbeats, so a node that died holding
//! a ticket blocks nobody for longer than a lease. The schedule, over three nodes: node 2
//! is in its doorway (its record says it is choosing); node 0 takes a ticket and waits for
//! node 2. At node 0's next read of node 2's record, node 0 stalls: time runs past two
//! leases, node 1 asks for the lock, finds node 0's and node 2's records lapsed, takes the
//! lock and keeps it, and node 2 leaves its doorway without a ticket. Node 0 then reads
//! node 2's record. Broken ([`Fault::LockLapse`]): node 0 acts on what it read, finds
//! nobody ahead of it and takes the lock beside node 1. BI: node 0 sees that its own
//! record lapsed while it waited, withdraws and takes a new ticket, which is behind node
//! 1's (it gives up waiting). Counted: acquisitions granted while another node held the
//! lock.

use super::Hazard;
use bi_core::mem::{Access, MemView, Observed};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, EmulatedClock, Fault, LockRecord, NodeRuntime, RuntimeConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub(super) const HAZARD: Hazard = Hazard {
    name: "stalled_in_the_pool_lock",
    fault: Fault::LockLapse,
    counts: "pool lock acquisitions granted while another node held the lock",
    run,
};

const LEASE: u64 = 1_000_000;

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let config = config.node_lease(LEASE).reader_lease(LEASE);
    let mut s = Setup::with(
        RegionConfig::new(1 << 18).with_nodes(3),
        |c| c.seed(seed),
        config.clone(),
    );
    // Node 0 runs over an observed view (its plain runtime gives the node up first).
    drop(s.nodes.remove(0));
    let (node1, node2) = (s.nodes[0].clone(), s.nodes[1].clone());
    let layout = *s.region.layout();
    let record_of =
        move |node: usize| layout.node_record(node).expect("node").offset + layout.slot_size();
    let record = |choosing, rt: &NodeRuntime<_>| LockRecord {
        choosing,
        ticket: 0,
        heartbeat: rt.clock().refresh(),
    };
    // Node 2 is in its doorway.
    let view2 = s.emu.node(2);
    view2
        .store_to_memory(record_of(2), &record(1, &node2))
        .expect("node 2's record");

    let (armed, node1_holds) = (
        Arc::new(AtomicBool::new(true)),
        Arc::new(AtomicBool::new(false)),
    );
    let (arm, holds, emu) = (armed.clone(), node1_holds.clone(), s.emu.clone());
    let view = Observed::new(s.emu.node(0), move |access| {
        if let Access::Load(at) = access
            && at == record_of(2)
            && arm.swap(false, Ordering::SeqCst)
        {
            // Node 0 stalls here: time runs past its lease.
            emu.advance(2 * LEASE);
            // Node 1 passes over the lapsed records and keeps the lock it takes.
            match node1.lock(Duration::ZERO) {
                Ok(guard) => {
                    holds.store(true, Ordering::SeqCst);
                    std::mem::forget(guard);
                }
                Err(BiError::LockTimeout { .. }) => {}
                Err(e) => panic!("node 1's lock: {e}"),
            }
            // Node 2 leaves its doorway without a ticket.
            view2.store_to_memory(record_of(2), &record(0, &node2))?;
        }
        Ok(())
    });
    let clock = Arc::new(EmulatedClock::new(s.emu.node(0)));
    let rt = NodeRuntime::new(view, layout, 0, config, clock).expect("runtime");
    match rt.lock(Duration::from_millis(20)) {
        Ok(_guard) => {
            debug_assert!(!armed.load(Ordering::SeqCst), "the schedule ran");
            u64::from(node1_holds.load(Ordering::SeqCst))
        }
        Err(BiError::LockTimeout { .. }) => 0,
        Err(e) => panic!("node 0's lock: {e}"),
    }
}
