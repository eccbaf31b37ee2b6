//! A named tree's writer dies (its host loses its cache: nothing it had not written back
//! reaches memory) after every step of a scripted workload; a restarted process takes the
//! role over and adopts the tree. Every acknowledged write is there after each restart,
//! readers on another node see them, and the memory the dead writers left is given back.

use bi_alloc::NodeHeap;
use bi_collections::CollectionError;
use bi_collections::tree::{BiTree, TreeWriteHandle};
use bi_core::heap::Heap;
use bi_core::mem::EmulatedNode;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, RuntimeConfig};
use std::collections::BTreeMap;

const LEASE: u64 = 1_000_000;
type Handle = TreeWriteHandle<u64, u64, EmulatedNode, NodeHeap>;

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .node_lease(LEASE)
        .reader_lease(LEASE)
}

/// Adversarial hardware: random evictions (which write dirty lines back at random
/// moments) and prefetches.
fn machine() -> Setup {
    Setup::with(
        RegionConfig::new(1 << 20).with_nodes(2),
        |c| {
            c.seed(11)
                .eviction_rate(0.01)
                .adjacent_prefetch_rate(0.2)
                .random_prefetch_rate(0.05)
                .late_writebacks(0.05)
        },
        config(),
    )
}

/// Node 0's process takes the writer role of the tree "t" (adopting it if it exists).
fn writer(s: &Setup) -> Result<Handle, CollectionError> {
    let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
    let node_writer = s.nodes[0].writer(heap)?;
    // Every node passes, as background passes would: a new writer counts its ring's old
    // entries as just written until then, and adopting appends to the freed ring.
    s.quiesce_all()?;
    let tree = BiTree::<u64, u64>::named(&s.region, &s.nodes[0], "t")?;
    tree.take_writer(&s.nodes[0], node_writer)
}

/// Node 0's new process adopts the tree; both nodes then pass twice, the grace period
/// after which what the dead writer left behind (logged in the freed ring at adoption)
/// comes back to the heap.
fn adopt(s: &Setup) -> Handle {
    let w = writer(s).unwrap();
    for _ in 0..2 {
        s.quiesce_all().unwrap();
    }
    w
}

fn op(i: u64) -> (u64, Option<u64>) {
    let key = (i * 37) % 61;
    (key, (i % 4 != 3).then_some(i))
}

fn apply(w: &mut Handle, model: &mut BTreeMap<u64, u64>, i: u64) {
    match op(i) {
        (k, Some(v)) => {
            w.insert(k, v).unwrap();
            model.insert(k, v);
        }
        (k, None) => {
            w.remove(&k).unwrap();
            model.remove(&k);
        }
    }
}

fn check(s: &Setup, w: &Handle, model: &BTreeMap<u64, u64>) {
    w.check_invariants().unwrap();
    assert_eq!(w.len(), model.len());
    let reader = BiTree::<u64, u64>::named(&s.region, &s.nodes[1], "t")
        .unwrap()
        .read_handle(&s.nodes[1])
        .unwrap();
    for k in 0..61 {
        assert_eq!(
            w.try_get(&k).unwrap(),
            model.get(&k).copied(),
            "writer, key {k}"
        );
        assert_eq!(
            reader.get(&k).unwrap(),
            model.get(&k).copied(),
            "reader, key {k}"
        );
    }
}

#[test]
fn every_acknowledged_write_survives_a_writer_death_after_every_step() {
    const STEPS: u64 = 40;
    for crash_after in 1..=STEPS {
        let mut s = machine();
        let mut model = BTreeMap::new();
        let mut w = writer(&s).unwrap();
        for i in 0..crash_after {
            apply(&mut w, &mut model, i);
            if i % 8 == 0 {
                s.quiesce_all().unwrap();
            }
        }
        std::mem::forget(w);
        s.crash_and_restart(0, config());
        let mut w = adopt(&s);
        check(&s, &w, &model);
        // The adopter goes on writing; what the dead writer left comes back to the heap.
        for i in crash_after..STEPS + 20 {
            apply(&mut w, &mut model, i);
            if i % 8 == 0 {
                s.quiesce_all().unwrap();
            }
        }
        s.quiesce_all().unwrap();
        check(&s, &w, &model);
    }
}

#[test]
fn many_restarts_keep_memory_bounded() {
    let mut s = machine();
    let mut model = BTreeMap::new();
    let mut w = writer(&s).unwrap();
    let capacity = w.writer().heap().stats().capacity;
    let mut i = 0;
    for _ in 0..25 {
        for _ in 0..30 {
            apply(&mut w, &mut model, i);
            i += 1;
            if i % 8 == 0 {
                s.quiesce_all().unwrap();
            }
        }
        std::mem::forget(w);
        s.crash_and_restart(0, config());
        w = adopt(&s);
        check(&s, &w, &model);
    }
    for _ in 0..2 {
        s.quiesce_all().unwrap();
    }
    w.writer().reclaim().unwrap();
    // Everything but the live tree came back after 25 deaths.
    let live = w.writer().heap().stats().live;
    assert!(
        live <= model.len() * 64,
        "live {live} of {capacity} for {} keys",
        model.len()
    );
}

#[test]
fn a_second_writer_is_refused_and_wipes_nothing() {
    let s = machine();
    let mut w = writer(&s).unwrap();
    w.insert(1, 10).unwrap();
    let heap = NodeHeap::new(s.arena(1), s.region.layout().line_size()).unwrap();
    let tree = BiTree::<u64, u64>::named(&s.region, &s.nodes[1], "t").unwrap();
    let second = tree.take_writer(&s.nodes[1], s.nodes[1].writer(heap).unwrap());
    assert!(matches!(
        second,
        Err(CollectionError::Runtime(BiError::WriterAlive { node: 0 }))
    ));
    assert_eq!(w.get(&1), Some(10));
    // Other types under the same name are refused too.
    assert!(BiTree::<u32, u64>::named(&s.region, &s.nodes[1], "t").is_err());
}

/// What a dead writer left is quarantined, not reused, while a reader that entered before
/// the adoption is still inside: its node may still cache the old nodes. The adopter
/// reclaims and inserts as a live writer does, before and after the reader's node
/// passes; none of it may hand that memory out before the reader leaves (the oracle
/// counts a reader's load of a line whose memory was reused since it was cached). Once
/// the reader has left, the memory comes back.
#[test]
fn memory_a_dead_writer_left_is_not_reused_under_a_reader_inside() {
    // Readers' leases longer than the test: the reader below stays inside throughout.
    let config = config().reader_lease(u64::MAX / 4);
    let mut s = Setup::with(
        RegionConfig::new(1 << 20).with_nodes(2),
        |c| c.seed(12),
        config.clone(),
    );
    let mut w = writer(&s).unwrap();
    for k in 0..40 {
        w.insert(k, k).unwrap();
    }
    s.quiesce_all().unwrap();
    s.quiesce_all().unwrap();
    let tree = BiTree::<u64, u64>::named(&s.region, &s.nodes[1], "t").unwrap();
    let reader = tree.read_handle(&s.nodes[1]).unwrap();
    let view = reader.enter();
    for k in 0..40 {
        assert_eq!(view.get(&k).unwrap(), Some(k));
    }
    // Every node the reader walked is replaced, then the writer's host dies.
    for k in 0..40 {
        w.insert(k, k + 100).unwrap();
    }
    std::mem::forget(w);
    s.crash_and_restart(0, config);
    // A new process on node 0 adopts the tree before node 1 passes again: node 1 still
    // caches the old nodes (and the root slot that leads to them).
    let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
    let node_writer = s.nodes[0].writer(heap).unwrap();
    s.nodes[0].quiesce().unwrap();
    let tree0 = BiTree::<u64, u64>::named(&s.region, &s.nodes[0], "t").unwrap();
    let mut w = tree0.take_writer(&s.nodes[0], node_writer).unwrap();
    // The adopter reclaims and inserts at once, then the reader reads, then every node
    // passes, four times over: any of the old nodes' memory handed out again is read
    // stale from the reader's cache.
    let mut inserted = 0;
    for round in 0..4 {
        w.reclaim().unwrap();
        for k in 0..5 {
            inserted += u64::from(w.insert(1000 + round * 5 + k, k).is_ok());
        }
        for k in 0..40 {
            let _ = view.get(&k);
        }
        s.quiesce_all().unwrap();
    }
    assert_eq!(
        s.emu.stats(1).reuse_hazards,
        0,
        "memory reused under the reader ({inserted} inserts went through)"
    );
    drop(view);
    s.quiesce_all().unwrap();
    s.quiesce_all().unwrap();
    w.reclaim().unwrap();
    w.insert(5000, 1).unwrap();
}
