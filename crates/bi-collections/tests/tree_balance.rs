//! The balance invariant (key order, subtree sizes, weight balance with delta 3) holds
//! after every operation of long random sequences, single and batched, and the tree
//! always agrees with a `BTreeMap`.

use bi_alloc::NodeHeap;
use bi_collections::tree::BiTree;
use bi_collections::{ApplyBatch, Op};
use bi_core::region::RegionConfig;
use bi_core::runtime::RuntimeConfig;
use bi_core::runtime::testing::Setup;
use rand::Rng;
use std::collections::BTreeMap;

fn setup(seed: u64) -> Setup {
    Setup::with(
        RegionConfig::new(if cfg!(miri) { 1 << 18 } else { 4 << 20 }).with_nodes(2),
        |c| c.seed(seed),
        RuntimeConfig::default()
            .node_lease(1 << 40)
            .reader_lease(1 << 40),
    )
}

fn heap(s: &Setup, n: usize) -> NodeHeap {
    NodeHeap::new(s.arena(n), s.region.layout().line_size()).unwrap()
}

#[test]
fn balance_holds_after_every_single_operation() {
    let steps = if cfg!(miri) { 40 } else { 3000 };
    for seed in bi_kit::seeds(3, 1) {
        let s = setup(seed);
        let tree = BiTree::<u64, u64>::at(s.slot(0));
        let mut w = tree
            .write_handle(s.nodes[0].writer(heap(&s, 0)).unwrap())
            .unwrap();
        let mut model = BTreeMap::new();
        let mut rng = bi_kit::rng(seed, "operations");
        let keys = if seed == 0 { 64 } else { 400 };
        for i in 0..steps {
            let k = rng.random_range(0..keys);
            // Runs of ascending and descending keys stress the rotations.
            let k = match i / 200 % 3 {
                0 => k,
                1 => i % keys,
                _ => keys - 1 - i % keys,
            };
            if rng.random_bool(0.6) {
                assert_eq!(w.insert(k, i).unwrap(), model.insert(k, i), "insert {k}");
            } else {
                assert_eq!(w.remove(&k).unwrap(), model.remove(&k), "remove {k}");
            }
            w.check_invariants()
                .unwrap_or_else(|e| panic!("seed {seed} step {i}: {e}"));
            assert_eq!(w.len(), model.len());
            if i % 50 == 0 {
                s.quiesce_all().unwrap();
                w.reclaim().unwrap();
            }
        }
        let all: Vec<_> = model.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(w.iter().unwrap(), all);
        assert_eq!(
            w.range(10..20).unwrap(),
            model
                .range(10..20)
                .map(|(k, v)| (*k, *v))
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn balance_holds_after_every_batch_and_batches_publish_once() {
    let s = setup(9);
    let tree = BiTree::<u32, u32>::at(s.slot(1));
    let mut w = tree
        .write_handle(s.nodes[0].writer(heap(&s, 0)).unwrap())
        .unwrap();
    let mut model = BTreeMap::new();
    let mut rng = bi_kit::rng(9, "batches");
    let r = tree.read_handle(&s.nodes[1]).unwrap();
    for b in 0..if cfg!(miri) { 3 } else { 150 } {
        let ops: Vec<Op<u32, u32>> = (0..rng.random_range(1..40))
            .map(|_| {
                let k = rng.random_range(0..300);
                if rng.random_bool(0.65) {
                    Op::Insert(k, rng.random())
                } else {
                    Op::Remove(k)
                }
            })
            .collect();
        let mut expect = bi_collections::BatchReport::default();
        for op in &ops {
            expect.applied += 1;
            match *op {
                Op::Insert(k, v) => match model.insert(k, v) {
                    None => expect.inserted += 1,
                    Some(_) => expect.replaced += 1,
                },
                Op::Remove(k) => {
                    if model.remove(&k).is_some() {
                        expect.removed += 1;
                    }
                }
            }
        }
        let before = s.emu.node(0).stats().fences;
        assert_eq!(w.apply_batch(&ops).unwrap(), expect);
        let fences = s.emu.node(0).stats().fences - before;
        // One publication (fence before and after the slot store, ring append) and one
        // retirement group; nowhere near one fence per operation.
        assert!(
            fences <= 8,
            "batch {b}: {fences} fences for {} ops",
            ops.len()
        );
        w.check_invariants()
            .unwrap_or_else(|e| panic!("batch {b}: {e}"));
        assert_eq!(w.len(), model.len());
        if b % 5 == 0 {
            s.quiesce_all().unwrap();
            w.reclaim().unwrap();
            let v = r.enter();
            let all: Vec<_> = model.iter().map(|(k, v)| (*k, *v)).collect();
            assert_eq!(v.iter().unwrap(), all);
            assert_eq!(v.len().unwrap(), model.len());
        }
    }
}
