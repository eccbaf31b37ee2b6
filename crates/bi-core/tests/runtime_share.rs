//! Several processes of one host as one node (`runtime::share`): a process joins the node
//! another runs; its readers hold reclamation back through the runner's pass, and what
//! only the runner may do is refused.
//! Under the emulator a second process of a host is a second runtime over the same
//! emulated node (one cache).

use bi_core::mem::EmulatedNode;
use bi_core::mem::MemView;
use bi_core::region::RegionConfig;
use bi_core::runtime::share::{HOLDER_AT, SHARE_SLOT, ShareRecord};
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, NodeRuntime, RuntimeConfig};
use std::time::Duration;

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .node_lease(1_000_000)
        .reader_lease(1_000_000)
}

fn setup(runtime: RuntimeConfig) -> Setup {
    let s = Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        |c| c.seed(5),
        runtime,
    );
    s.quiesce_all().unwrap(); // both nodes run: fresh heartbeats
    s
}

/// A second process of node 1's host.
fn join(s: &Setup, runtime: RuntimeConfig) -> Result<NodeRuntime<EmulatedNode>, BiError> {
    NodeRuntime::emulated_join(s.emu.node(1), *s.region.layout(), runtime)
}

#[test]
#[cfg_attr(miri, ignore = "no unsafe code of its own")]
fn a_joined_processs_reader_holds_reclamation_back() {
    let s = setup(config());
    let joined = join(&s, config()).unwrap();
    let mut w = s.writer(0);
    let slot = s.slot(0);
    let first = w.alloc(1u64).unwrap();
    w.publish(slot, first).unwrap();
    s.quiesce_all().unwrap();
    let reader = joined.reader().unwrap();
    let guard = reader.enter();
    assert_eq!(*guard.load::<u64>(slot).unwrap().unwrap(), 1);
    // The writer replaces and retires the object the joined reader holds.
    let second = w.alloc(2u64).unwrap();
    let old = w.publish(slot, second).unwrap();
    w.retire(old).unwrap();
    for _ in 0..4 {
        s.quiesce_all().unwrap();
    }
    let r = w.reclaim().unwrap();
    assert_eq!(
        r.freed_blocks, 0,
        "freed while a joined reader was inside: {r:?}"
    );
    drop(guard);
    for _ in 0..3 {
        s.quiesce_all().unwrap();
    }
    assert_eq!(w.reclaim().unwrap().freed_blocks, 1);
}

#[test]
#[cfg_attr(miri, ignore = "no unsafe code of its own")]
fn only_the_runner_writes_passes_and_locks() {
    let s = setup(config());
    let joined = join(&s, config()).unwrap();
    assert!(joined.is_joined() && !s.nodes[1].is_joined());
    assert!(matches!(
        joined.quiesce(),
        Err(BiError::NotRunner { node: 1 })
    ));
    assert!(matches!(
        joined.lock(Duration::from_millis(10)),
        Err(BiError::NotRunner { node: 1 })
    ));
    let heap = bi_core::heap::BumpHeap::new(s.arena(1), s.region.layout().line_size()).unwrap();
    assert!(matches!(
        joined.writer(heap),
        Err(BiError::NotRunner { node: 1 })
    ));
    // Dropping the joined process leaves the runner's claim alone.
    drop(joined);
    assert!(s.nodes[1].holds_claim().unwrap());
}

#[test]
#[cfg_attr(miri, ignore = "no unsafe code of its own")]
fn joining_a_node_nobody_runs_or_of_another_host_is_refused() {
    let s = Setup::with(RegionConfig::new(1 << 18).with_nodes(3), |c| c, config());
    s.quiesce_all().unwrap();
    // Node 2's runtime stops passing: past its lease, nobody runs the node.
    let layout = *s.region.layout();
    for _ in 0..3 {
        s.emu.advance(1_000_000);
        s.nodes[0].quiesce().unwrap();
    }
    assert!(matches!(
        NodeRuntime::emulated_join(s.emu.node(2), layout, config()),
        Err(BiError::NodeNotRunning { node: 2 })
    ));
    // A runner of another host: its share record names another host.
    s.nodes[1].quiesce().unwrap();
    let at = layout.node_record(1).unwrap().offset + SHARE_SLOT * layout.slot_size();
    let view = s.emu.node(1);
    let other = ShareRecord {
        host: 12345,
        ..ShareRecord::default()
    };
    view.store_to_memory(at, &other).unwrap();
    assert!(matches!(
        NodeRuntime::emulated_join(s.emu.node(1), layout, config()),
        Err(BiError::NodeOnAnotherHost { node: 1 })
    ));
}

#[test]
#[cfg_attr(miri, ignore = "no unsafe code of its own")]
fn reader_records_of_dead_processes_are_taken_over_and_live_ones_kept() {
    let s = setup(config());
    let layout = *s.region.layout();
    let per_node = layout.config().readers_per_node() as usize;
    let view = s.emu.node(1);
    // Every record of node 1 is held: half by a process that is gone, half by a live one
    // (this process, another runtime).
    let dead = (0x7fff_fff0u64 << 32) | 1;
    let live = (u64::from(std::process::id()) << 32) | 3;
    for r in 0..per_node {
        let at = layout.reader_record(1, r).unwrap().offset + HOLDER_AT;
        view.store_u64(at, if r % 2 == 0 { dead } else { live })
            .unwrap();
    }
    let mut readers = Vec::new();
    while let Ok(r) = s.nodes[1].reader() {
        readers.push(r);
    }
    assert_eq!(readers.len(), per_node.div_ceil(2));
    assert!(readers.iter().all(|r| r.index() % 2 == 0));
}

/// Readers registered one after another on a node get records in different 128-byte
/// blocks (adjacent-line prefetchers fetch such blocks whole: two cores storing into the
/// two lines of one block slow each other as if they shared a line).
#[test]
fn readers_of_a_node_get_records_in_different_line_pairs() {
    let s = setup(config());
    let layout = *s.region.layout();
    let readers: Vec<_> = (0..8).map(|_| s.nodes[1].reader().unwrap()).collect();
    let mut blocks: Vec<usize> = readers
        .iter()
        .map(|r| layout.reader_record(1, r.index()).unwrap().offset / 128)
        .collect();
    blocks.sort_unstable();
    blocks.dedup();
    assert_eq!(blocks.len(), readers.len());
}
