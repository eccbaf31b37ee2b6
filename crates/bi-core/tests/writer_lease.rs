//! A writer's lease: a writer whose node's passes stalled longer than the node lease has
//! lost its claim in the eyes of the other nodes, and another process may take its
//! writer role. The writer checks its heartbeat before it writes, renews it under the
//! pool lock, and finds the role taken: it writes nothing more. When nobody took the
//! role, the renewal keeps it.

use bi_core::heap::BumpHeap;
use bi_core::mem::EmulatedNode;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, Link, Role, RuntimeConfig, Writer};
use std::time::Duration;

const LEASE: u64 = 1_000_000;
const WAIT: Duration = Duration::from_secs(5);

fn machine(config: RuntimeConfig) -> Setup {
    Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        |c| c.seed(11),
        config.node_lease(LEASE).reader_lease(LEASE),
    )
}

/// What [`role_taken`] leaves: the machine, node 0's role and writer (which published
/// `first` before it stalled), and node 1's role.
struct Taken {
    s: Setup,
    role: Role<EmulatedNode>,
    w: Writer<EmulatedNode, BumpHeap>,
    first: Link<u64>,
    taken: Role<EmulatedNode>,
}

/// Node 0 writes slot 0 under its role; its passes stall past the lease; node 1 takes
/// the role.
fn role_taken(config: RuntimeConfig) -> Taken {
    let s = machine(config);
    let slot = s.slot(0);
    let role = s.nodes[0].take_writer_role(slot, WAIT).unwrap();
    let mut w = s.writer(0);
    let first = w.alloc_sealed(1u64).unwrap();
    w.publish_link(slot, first).unwrap();
    // Node 0's passes stall (none runs) while time goes on past its lease.
    s.emu.advance(2 * LEASE);
    let taken = s.nodes[1].take_writer_role(slot, WAIT).unwrap();
    assert_eq!(taken.previous().node, 1, "node 1 adopts node 0's structure");
    Taken {
        s,
        role,
        w,
        first,
        taken,
    }
}

/// What node 0's next allocation and publication did once its role was taken.
fn write_after_the_role_was_taken(config: RuntimeConfig) -> Result<(), BiError> {
    // Both roles stay held (bound, not dropped) while node 0 writes.
    let Taken {
        s,
        mut w,
        role: _role,
        taken: _taken,
        ..
    } = role_taken(config);
    let second = w.alloc_sealed(2u64)?;
    w.publish_link(s.slot(0), second)?;
    Ok(())
}

/// That `r` is node 0's writer told its role was taken by node 1.
fn assert_taken_by_node_1(r: &Result<(), BiError>) {
    assert!(
        matches!(
            r,
            Err(BiError::RoleLost {
                node: 0,
                taker: Some(1)
            })
        ),
        "{r:?}"
    );
}

#[test]
fn a_writer_whose_lease_lapsed_writes_nothing_once_its_role_is_taken() {
    let r = write_after_the_role_was_taken(RuntimeConfig::default());
    assert_taken_by_node_1(&r);
}

#[test]
fn a_writer_whose_lease_lapsed_renews_it_when_nobody_took_its_role() {
    let s = machine(RuntimeConfig::default());
    let slot = s.slot(0);
    let _role = s.nodes[0].take_writer_role(slot, WAIT).unwrap();
    let mut w = s.writer(0);
    let before = s.nodes[0].record().unwrap();
    s.emu.advance(2 * LEASE);
    let link = w.alloc_sealed(7u64).unwrap();
    w.publish_link(slot, link).unwrap();
    let after = s.nodes[0].record().unwrap();
    assert!(after.passes > before.passes, "the writer ran a pass");
    assert!(
        after.heartbeat > before.heartbeat + LEASE,
        "with a fresh heartbeat"
    );
    // The renewed heartbeat keeps the role: node 1 cannot take it now.
    assert!(matches!(
        s.nodes[1].take_writer_role(slot, WAIT),
        Err(BiError::WriterAlive { node: 0 })
    ));
    // Within half a lease of a pass, writes pass the check without renewing, also
    // after a pass of the node's own (a background pass on time is no lapse).
    let passes = after.passes;
    let link = w.alloc_sealed(8u64).unwrap();
    w.publish_link(slot, link).unwrap();
    assert_eq!(s.nodes[0].record().unwrap().passes, passes);
    s.nodes[0].quiesce().unwrap();
    let link = w.alloc_sealed(9u64).unwrap();
    w.publish_link(slot, link).unwrap();
    assert_eq!(s.nodes[0].record().unwrap().passes, passes + 1);
}

/// A pass that runs after the lapse (a late background pass, say) gives node 0 a fresh
/// heartbeat before its writer writes again: the writer still learns that the lease
/// lapsed, renews, and finds its role taken. The node counts the lapse (its first pass
/// is no lapse).
#[test]
fn a_writer_whose_node_passed_after_a_lapse_still_finds_its_role_taken() {
    let s = machine(RuntimeConfig::default());
    let slot = s.slot(0);
    let _role = s.nodes[0].take_writer_role(slot, WAIT).unwrap();
    let mut w = s.writer(0);
    s.nodes[0].quiesce().unwrap();
    let first = w.alloc_sealed(1u64).unwrap();
    w.publish_link(slot, first).unwrap();
    s.emu.advance(2 * LEASE);
    let _taken = s.nodes[1].take_writer_role(slot, WAIT).unwrap();
    let pass = s.nodes[0].quiesce().unwrap();
    assert!(pass.whole_heap, "a lapsed node drops what it caches");
    s.nodes[0].quiesce().unwrap(); // whose record counts the lapse
    assert_eq!(s.nodes[0].record().unwrap().overflows, 1);
    s.nodes[0].quiesce().unwrap(); // and passes on time add nothing
    assert_eq!(s.nodes[0].record().unwrap().overflows, 1);
    let r = w.alloc_sealed(2u64).map(drop);
    assert_taken_by_node_1(&r);
}

#[test]
fn a_lost_role_stays_lost_after_its_taker_gives_it_up() {
    let Taken {
        s,
        role,
        mut w,
        first,
        taken,
    } = role_taken(RuntimeConfig::default());
    let lost = |r: Result<(), BiError>| matches!(r, Err(BiError::RoleLost { node: 0, .. }));
    assert!(lost(w.alloc_sealed(2u64).map(drop)));
    // The taker may have changed the structure: node 0's writer, which still believes
    // its own older picture, must not come back because the role is free again.
    drop(taken);
    s.quiesce_all().unwrap();
    assert!(lost(w.alloc_sealed(3u64).map(drop)));
    assert!(lost(w.publish_link(s.slot(0), first).map(drop)));
    drop(role);
}
