//! Node claims (`runtime::claim`): one live process per node id, a dead holder's node
//! taken over after its lease, a clean exit that holds nothing back, and nodes that never
//! joined holding nothing back either.

use bi_core::mem::{EmulatedNode, MemView};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, NodeRecord, NodeRuntime, RuntimeConfig};

const LEASE: u64 = 1_000_000;

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .node_lease(LEASE)
        .reader_lease(LEASE)
}

fn setup(nodes: u32) -> Setup {
    Setup::with(
        RegionConfig::new(1 << 18)
            .with_nodes(nodes)
            .with_log_ring_entries(16),
        |c| c.seed(4),
        config(),
    )
}

fn rejoin(s: &Setup, node: usize) -> Result<NodeRuntime<EmulatedNode>, BiError> {
    NodeRuntime::emulated(s.emu.node(node), *s.region.layout(), config())
}

#[test]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own, and it leaks runtimes on purpose to play dead processes"
)]
fn a_live_node_cannot_be_joined_twice() {
    let s = setup(2);
    assert!(matches!(rejoin(&s, 1), Err(BiError::NodeTaken { node: 1 })));
    // Also not after it passed, nor by a third attempt.
    s.nodes[1].quiesce().unwrap();
    assert!(matches!(rejoin(&s, 1), Err(BiError::NodeTaken { node: 1 })));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own, and it leaks runtimes on purpose to play dead processes"
)]
fn a_node_left_cleanly_is_free_at_once_and_holds_nothing_back() {
    let mut s = setup(2);
    s.quiesce_all().unwrap();
    s.nodes.truncate(1); // node 1's runtime ends
    let record: NodeRecord = s
        .emu
        .node(0)
        .load(s.region.layout().node_record(1).unwrap().offset)
        .unwrap();
    assert_eq!((record.holder, record.heartbeat), (0, 0));
    // The writer does not wait for it ...
    let w = s.writer(0);
    assert_eq!(w.synchronize().unwrap().lease_expired, vec![1]);
    drop(w);
    // ... and it can be joined again at once.
    let again = rejoin(&s, 1).unwrap();
    again.quiesce().unwrap();
}

#[test]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own, and it leaks runtimes on purpose to play dead processes"
)]
fn a_dead_holders_node_is_taken_over_after_its_lease() {
    let mut s = setup(2);
    s.quiesce_all().unwrap();
    // Node 1's process dies: its runtime never clears the claim.
    std::mem::forget(s.nodes.pop().unwrap());
    assert!(matches!(rejoin(&s, 1), Err(BiError::NodeTaken { node: 1 })));
    s.emu.advance(2 * LEASE);
    let successor = rejoin(&s, 1).unwrap();
    // Claimed with a fresh heartbeat: a third process finds the node taken, also before
    // the successor's first pass.
    assert!(matches!(rejoin(&s, 1), Err(BiError::NodeTaken { node: 1 })));
    // The successor's first pass drops everything the node cached.
    assert!(successor.quiesce().unwrap().whole_heap);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own, and it leaks runtimes on purpose to play dead processes"
)]
fn of_two_simultaneous_claims_the_one_memory_lost_stops_at_its_next_pass() {
    let s = setup(2);
    s.nodes[1].quiesce().unwrap();
    // Another process's claim of node 1 lands in memory after ours did. It ran on another
    // host (a configuration mistake gives two hosts one node id), so our host's cache
    // still holds our own claim: only memory tells the pass it lost.
    let at = s.region.layout().node_record(1).unwrap().offset;
    let theirs = s.emu.node(0);
    let mut r: NodeRecord = theirs.load_from_memory(at).unwrap();
    r.holder = 0xC0FFEE;
    theirs.store_to_memory(at, &r).unwrap();
    assert!(matches!(
        s.nodes[1].quiesce(),
        Err(BiError::NodeTaken { node: 1 })
    ));
    // It did not overwrite the other claim.
    assert_eq!(s.emu.peek::<NodeRecord>(at).unwrap().holder, 0xC0FFEE);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own, and it leaks runtimes on purpose to play dead processes"
)]
fn nodes_that_never_joined_hold_no_log_space() {
    // Four nodes in the region; only node 0 ever runs.
    let mut s = setup(4);
    s.nodes.truncate(1);
    let mut w = s.writer(0);
    let slot = s.slot(0);
    // Far more publications and retirements than the 16-entry rings hold.
    for v in 0..200u64 {
        let b = w.alloc(v).unwrap();
        let old = w
            .try_publish(slot, b)
            .expect("no LogFull: only node 0 is live");
        if !old.is_null() {
            w.try_retire(old).unwrap();
        }
        s.nodes[0].quiesce().unwrap();
        w.reclaim().unwrap();
    }
}
