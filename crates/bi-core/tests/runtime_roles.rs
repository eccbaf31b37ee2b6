//! Writer roles (`runtime::role`): one writer per named structure, a dead writer's role
//! taken over after its lease, a restarted process taking its own node's role at once.

use bi_core::mem::EmulatedNode;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, NodeRuntime, RuntimeConfig};
use std::time::Duration;

const LEASE: u64 = 1_000_000;
const WAIT: Duration = Duration::from_secs(5);

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .node_lease(LEASE)
        .reader_lease(LEASE)
}

fn setup() -> (Setup, usize) {
    let s = Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        |c| c.seed(2),
        config(),
    );
    let view = s.nodes[0].view();
    let (slot, made) = s
        .region
        .structure(view, "orders", 0x5EED, true)
        .unwrap()
        .unwrap();
    assert!(made);
    (s, slot)
}

fn restart(s: &Setup, node: usize) -> Result<NodeRuntime<EmulatedNode>, BiError> {
    NodeRuntime::emulated(s.emu.node(node), *s.region.layout(), config())
}

#[test]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own, and it leaks runtimes on purpose to play dead processes"
)]
fn a_second_writer_is_refused_while_the_first_lives() {
    let (s, slot) = setup();
    let role = s.nodes[0].take_writer_role(slot, WAIT).unwrap();
    for n in [0, 1] {
        assert!(matches!(
            s.nodes[n].take_writer_role(slot, WAIT),
            Err(BiError::WriterAlive { node: 0 })
        ));
    }
    assert!(role.is_held().unwrap());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own, and it leaks runtimes on purpose to play dead processes"
)]
fn a_dead_writers_role_is_taken_over_after_its_lease() {
    let (mut s, slot) = setup();
    std::mem::forget(s.nodes[0].take_writer_role(slot, WAIT).unwrap());
    // Node 0's process dies (its runtime never clears its claim).
    std::mem::forget(s.nodes.remove(0));
    let node1 = &s.nodes[0];
    assert!(matches!(
        node1.take_writer_role(slot, WAIT),
        Err(BiError::WriterAlive { node: 0 })
    ));
    s.emu.advance(2 * LEASE);
    let role = node1.take_writer_role(slot, WAIT).unwrap();
    assert_eq!((role.previous().node, role.previous().takes), (1, 1));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own, and it leaks runtimes on purpose to play dead processes"
)]
fn a_restarted_process_takes_its_node_and_role_back_once_the_old_claim_lapses() {
    let (mut s, slot) = setup();
    // The process dies holding the role: neither its claim nor its role is cleared.
    std::mem::forget(s.nodes[0].take_writer_role(slot, WAIT).unwrap());
    std::mem::forget(s.nodes.remove(0));
    assert!(matches!(
        restart(&s, 0),
        Err(BiError::NodeTaken { node: 0 })
    ));
    s.emu.advance(2 * LEASE);
    // The restarted process claims node 0 with a new token: the old role is dead.
    let again = restart(&s, 0).unwrap();
    let role = again.take_writer_role(slot, WAIT).unwrap();
    assert_eq!(role.previous().takes, 1, "a structure to adopt");
}
