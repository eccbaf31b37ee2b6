//! A dead writer's tree adopted by its successor: node 0's host dies (its cache is lost:
//! nothing it had not written back reaches memory), a new process on node 0 takes the
//! writer role of the named tree and adopts what memory holds, and node 1's reader reads
//! on. Two rows.
//!
//! **Memory reused under a reader**: node 1's reader enters a section, reads every key
//! and keeps the root it reached; the writer replaces every node of the tree and dies;
//! the new writer adopts the tree, reclaims and inserts new keys until its heap is full;
//! the reader, still inside, reads every key and its kept root again. Broken
//! ([`Fault::AdoptQuarantine`]): the adoption gives everything outside the adopted tree
//! (the old nodes the reader walks among them) back to the heap at once, and the new
//! keys reuse it. BI: that memory is logged as retired and kept until the readers inside
//! have left (the new writer finds no memory meanwhile, and its inserts fail). Counted:
//! the oracle's reuse hazards on node 1.
//!
//! **An old root kept after adoption**: node 1's reader reads the tree (node 1 caches its
//! root slot); the writer inserts a key, and its host dies right after the root slot's
//! write-back reached memory, before the entry that logs the new root (scripted over an
//! observed view of node 0). The new writer adopts the tree as memory holds it, the new
//! key included, and node 1 passes and reads. Broken ([`Fault::AdoptAnnounce`]): the
//! adoption does not log the root slot, so node 1's pass keeps its cached copy and its
//! reader reads the tree before the insert. BI: the adoption logs the root slot in the
//! modified ring and node 1's pass drops it. Counted: node 1's reads after the adoption
//! and a pass that did not return the adopted contents.

use super::Hazard;
use bi_alloc::NodeHeap;
use bi_collections::CollectionError;
use bi_collections::tree::{BiTree, Node, TreeWriteHandle};
use bi_core::mem::{Access, EmulatedNode, MemError, MemView, Observed};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{EmulatedClock, Fault, NodeRuntime, RuntimeConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub(super) const QUARANTINE: Hazard = Hazard {
    name: "adopted_memory_reused",
    fault: Fault::AdoptQuarantine,
    counts: "loads by a reader inside its section of memory the adopting writer reused (oracle reuse hazards)",
    run: reuse_under_a_reader,
};

pub(super) const ANNOUNCE: Hazard = Hazard {
    name: "old_root_after_adoption",
    fault: Fault::AdoptAnnounce,
    counts: "reads, after the adoption and a pass, of other contents than the adopted ones",
    run: old_root_kept,
};

const LEASE: u64 = 1_000_000;

/// The tree's writer on a runtime over the view `M`.
type Handle<M> = TreeWriteHandle<u64, u64, M, NodeHeap>;

/// Node 0's runtime `rt` takes the writer role of the tree "t" (adopting it if it
/// exists), after a pass on every node (`pass_all`), as background passes would: a new
/// writer counts its ring's old entries as just written until then, and adopting appends
/// to the freed ring.
fn take<M: MemView>(
    s: &Setup,
    rt: &NodeRuntime<M>,
    pass_all: impl Fn(),
) -> Result<Handle<M>, CollectionError> {
    let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).expect("arena");
    let writer = rt.writer(heap)?;
    pass_all();
    BiTree::<u64, u64>::named(&s.region, rt, "t")?.take_writer(rt, writer)
}

/// Node 0's host is dead: node 1 passes while node 0's lease runs out, then a new process
/// starts on node 0.
fn restart_node_0(
    s: &Setup,
    node1: &NodeRuntime<EmulatedNode>,
    config: RuntimeConfig,
) -> NodeRuntime<EmulatedNode> {
    for _ in 0..4 {
        s.emu.advance(LEASE / 2);
        node1.quiesce().expect("pass");
    }
    NodeRuntime::emulated(s.emu.node(0), *s.region.layout(), config).expect("runtime")
}

fn reuse_under_a_reader(config: RuntimeConfig, seed: u64) -> u64 {
    let config = config.node_lease(LEASE);
    let mut s = Setup::with(
        RegionConfig::new(1 << 20).with_nodes(2),
        |c| {
            c.seed(seed)
                .eviction_rate(0.01)
                .adjacent_prefetch_rate(0.2)
                .random_prefetch_rate(0.05)
                .late_writebacks(0.05)
        },
        config.clone(),
    );
    let mut w = take(&s, &s.nodes[0], || pass_all(&s)).expect("writer");
    for k in 0..40 {
        w.insert(k, k).expect("insert");
    }
    pass_all(&s);
    pass_all(&s);
    let tree = BiTree::<u64, u64>::named(&s.region, &s.nodes[1], "t").expect("tree");
    let reader = tree.read_handle(&s.nodes[1]).expect("reader");
    let view = reader.enter();
    for k in 0..40 {
        let value = view.get(&k).expect("read");
        debug_assert_eq!(value, Some(k));
    }
    // The reader keeps the root it reached, as a reader walking the tree does.
    let kept = view
        .guard()
        .load::<Node<u64, u64>>(tree.slot())
        .expect("read")
        .expect("published")
        .link();
    for k in 0..40 {
        w.insert(k, k + 100).expect("insert");
    }
    // Node 0's host dies (its handles are forgotten: a killed process runs no destructor).
    std::mem::forget(w);
    std::mem::forget(s.nodes.remove(0));
    s.emu.node(0).crash();
    let fresh = restart_node_0(&s, &s.nodes[0], config);
    s.nodes.insert(0, fresh);
    let mut w = take(&s, &s.nodes[0], || pass_all(&s)).expect("adoption");
    pass_all(&s);
    // Refused (the old root is retired), but its lines are in the reader's cache again.
    let _ = view.guard().follow(kept);
    // The new writer gives back what passed its grace period, and inserts until the heap
    // is full: it reuses whatever it gave back.
    w.reclaim().expect("reclaim");
    for k in 200..100_000 {
        if w.insert(k, k).is_err() {
            break;
        }
    }
    for k in 0..40 {
        let _ = view.get(&k);
    }
    let _ = view.guard().follow(kept);
    drop(view);
    s.emu.stats(1).reuse_hazards
}

fn pass_all(s: &Setup) {
    s.quiesce_all().expect("pass");
}

/// What every access of node 0's view returns once its host died.
const DEAD: MemError = MemError::BadSize {
    requested: 0,
    reason: "the host is dead",
};

fn old_root_kept(config: RuntimeConfig, seed: u64) -> u64 {
    let config = config.node_lease(LEASE);
    let mut s = Setup::with(
        RegionConfig::new(1 << 20).with_nodes(2),
        |c| c.seed(seed),
        config.clone(),
    );
    // Node 0 runs over an observed view (its plain runtime gives the node up first).
    drop(s.nodes.remove(0));
    let node1 = s.nodes.remove(0);
    let host = s.emu.node(0);
    // The root slot whose write-back the host dies after (0: none yet).
    let fatal_slot = Arc::new(AtomicUsize::new(0));
    let dead = Arc::new(AtomicBool::new(false));
    let (slot, died, dying) = (fatal_slot.clone(), dead.clone(), host.clone());
    let view = Observed::new(host.clone(), move |access| {
        if died.load(Ordering::SeqCst) {
            return Err(DEAD);
        }
        if let Access::WriteBack(at, 8) = access
            && at == slot.load(Ordering::SeqCst)
        {
            // The slot lands in memory, and the host dies before anything logs it.
            dying.writeback(at, 8)?;
            dying.fence();
            dying.crash();
            died.store(true, Ordering::SeqCst);
            return Err(DEAD);
        }
        Ok(())
    });
    let clock = Arc::new(EmulatedClock::new(host));
    let node0 =
        NodeRuntime::new(view, *s.region.layout(), 0, config.clone(), clock).expect("runtime");
    let pass_both = || {
        node0.quiesce().expect("pass");
        node1.quiesce().expect("pass");
    };
    let mut w = take(&s, &node0, pass_both).expect("writer");
    for k in 0..4 + seed % 8 {
        w.insert(k, k).expect("insert");
    }
    pass_both();
    let tree = BiTree::<u64, u64>::named(&s.region, &node1, "t").expect("tree");
    let reader = tree.read_handle(&node1).expect("reader");
    // Node 1 caches the tree, its root slot included.
    let before = reader.enter().iter().expect("read");
    fatal_slot.store(tree.slot(), Ordering::SeqCst);
    let died_inserting = w.insert(100, 100).is_err();
    debug_assert!(died_inserting && dead.load(Ordering::SeqCst));
    // The dead process's handles are dropped: its view is dead, so none of their
    // destructors reaches memory, as when a killed process runs none.
    drop(w);
    drop(node0);
    let node0 = restart_node_0(&s, &node1, config);
    let w = take(&s, &node0, || {
        node0.quiesce().expect("pass");
        node1.quiesce().expect("pass");
    })
    .expect("adoption");
    let adopted = w.iter().expect("the writer reads its tree");
    debug_assert_ne!(adopted, before, "the root slot reached memory");
    node1.quiesce().expect("pass");
    let seen = reader.enter().iter();
    u64::from(seen.ok() != Some(adopted))
}
