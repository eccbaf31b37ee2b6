//! Writer roles (`runtime::role`): one writer per named structure, a dead writer's role
//! taken over after its lease, a restarted process taking its own node's role at once.

mod common;

use bi_core::mem::{EmulatedNode, MemView};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, NodeRuntime, RuntimeConfig};
use common::a_gone_process;
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

/// A process of this host that exits at once (reaped, so no process has its id for a
/// while; a later one with the same id would have started later).
#[test]
#[cfg_attr(miri, ignore = "spawns a process and asks the kernel about it")]
fn a_writer_whose_process_is_gone_loses_role_and_node_at_once() {
    let (mut s, slot) = setup();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    // Node 0 runs in the child (as its share record says), and writes.
    assert!(s.run_node_in(0, sleeper.id()).unwrap());
    std::mem::forget(s.nodes[0].take_writer_role(slot, WAIT).unwrap());
    // While the child exists, its role and node stay its own (its heartbeat is fresh).
    assert!(matches!(
        s.nodes[1].take_writer_role(slot, WAIT),
        Err(BiError::WriterAlive { node: 0 })
    ));
    assert!(matches!(
        restart(&s, 0),
        Err(BiError::NodeTaken { node: 0 })
    ));
    // It is killed: no lease runs out (the clock does not move), yet the kernel says
    // it is gone, so its role and then its node are taken at once.
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    std::mem::forget(s.nodes.remove(0));
    let role = s.nodes[0].take_writer_role(slot, WAIT).unwrap();
    assert_eq!(role.previous().node, 1, "node 0 held it");
    let again = restart(&s, 0).unwrap();
    assert!(matches!(
        again.take_writer_role(slot, WAIT),
        Err(BiError::WriterAlive { node: 1 })
    ));
    assert!(role.is_held().unwrap());
}

/// A writer's process is killed between a store and its write-back: its node's cache
/// keeps the line. A taker that the kernel told of the death (node 0 runs on this host,
/// whose caches are one) finds the store in memory; a taker that judged by the lease (the
/// runtime in this very process, which the kernel is not asked about) does not, and the
/// line stays in node 0's cache, as it would in another host's.
#[test]
#[cfg_attr(miri, ignore = "spawns a process and asks the kernel about it")]
fn a_role_taken_from_a_killed_process_of_this_host_finds_its_last_stores_in_memory() {
    for on_this_host in [true, false] {
        let (mut s, slot) = setup();
        let mut sleeper = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        if on_this_host {
            assert!(s.run_node_in(0, sleeper.id()).unwrap());
        }
        std::mem::forget(s.nodes[0].take_writer_role(slot, WAIT).unwrap());
        let at = s.region.layout().heap().offset + 64;
        s.nodes[0].view().store(at, &7u64).unwrap(); // killed before the write-back
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        std::mem::forget(s.nodes.remove(0));
        let node1 = &s.nodes[0];
        if !on_this_host {
            s.emu.advance(2 * LEASE);
        }
        let role = node1.take_writer_role(slot, WAIT).unwrap();
        assert_eq!(role.previous().node, 1, "node 0 held it");
        let found: u64 = node1.view().load_from_memory(at).unwrap();
        assert_eq!(
            found,
            if on_this_host { 7 } else { 0 },
            "on this host: {on_this_host}"
        );
    }
}

#[test]
#[cfg_attr(miri, ignore = "spawns a process and asks the kernel about it")]
fn a_gone_process_of_another_pid_namespace_or_host_leaves_the_lease_to_judge() {
    let (s, slot) = setup();
    let pid = a_gone_process();
    assert!(s.run_node_in(0, std::process::id()).unwrap());
    std::mem::forget(s.nodes[0].take_writer_role(slot, WAIT).unwrap());
    let view = s.nodes[0].view();
    let layout = s.region.layout();
    let share_at = layout.node_record(0).unwrap().offset
        + bi_core::runtime::share::SHARE_SLOT * layout.slot_size();
    let mine: bi_core::runtime::share::ShareRecord = view.load_from_memory(share_at).unwrap();
    // The record names a process that is gone, but of another pid namespace, then of
    // another host: the kernel here cannot tell, and the fresh lease keeps the role.
    for other in [
        bi_core::runtime::share::ShareRecord {
            pid: u64::from(pid),
            pid_space: mine.pid_space ^ 1,
            ..mine
        },
        bi_core::runtime::share::ShareRecord {
            pid: u64::from(pid),
            host: mine.host ^ 2,
            ..mine
        },
    ] {
        view.store_to_memory(share_at, &other).unwrap();
        assert!(matches!(
            s.nodes[1].take_writer_role(slot, WAIT),
            Err(BiError::WriterAlive { node: 0 })
        ));
    }
}

#[test]
fn a_role_given_up_is_free_at_once_and_every_node_sees_who_writes() {
    let (s, slot) = setup();
    assert!(!s.nodes[1].writer_held(slot).unwrap(), "never written");
    let role = s.nodes[0].take_writer_role(slot, WAIT).unwrap();
    assert!(s.nodes[1].writer_held(slot).unwrap());
    assert!(s.nodes[0].holds_writer_role(slot).unwrap());
    assert!(!s.nodes[1].holds_writer_role(slot).unwrap());
    assert!(format!("{role:?}").contains("Role"));
    drop(role);
    assert!(!s.nodes[1].writer_held(slot).unwrap());
    // No lease to wait out: the role was handed back.
    let taken = s.nodes[1].take_writer_role(slot, WAIT).unwrap();
    assert_eq!(taken.previous().node, 1, "node 0 wrote it last");
    assert!(s.nodes[0].writer_held(slot).unwrap());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own, and it leaks runtimes on purpose to play dead processes"
)]
fn a_writer_that_lost_its_role_knows_it_and_dropping_it_leaves_the_taker_in_place() {
    let (s, slot) = setup();
    let stalled = s.nodes[0].take_writer_role(slot, WAIT).unwrap();
    // Node 0 stalls past its lease (no pass runs); node 1 takes the role.
    s.emu.advance(2 * LEASE);
    assert!(
        !s.nodes[1].writer_held(slot).unwrap(),
        "its writer's lease lapsed"
    );
    let taker = s.nodes[1].take_writer_role(slot, WAIT).unwrap();
    assert!(!stalled.is_held().unwrap(), "memory names another writer");
    assert!(!s.nodes[0].holds_writer_role(slot).unwrap());
    assert!(taker.is_held().unwrap());
    assert!(s.nodes[1].holds_writer_role(slot).unwrap());
    drop(stalled);
    assert!(
        taker.is_held().unwrap(),
        "the stalled writer's drop kept the taker's record"
    );
}
