//! Drives a `BiTree<u64, u64>` on an emulated three-node machine through an arbitrary
//! sequence of operations and checks every read against a version history.
//!
//! The input chooses the emulator seed, the rates of evictions, adjacent and random
//! prefetch, a small clock skew, the size of the writer's heap (small enough that some
//! inputs exhaust it), and up to a few hundred operations: inserts, removals and batches
//! on node 0, lookups, ranges, iterations and `len` on nodes 1 and 2, passes on chosen
//! nodes, reclaims and clock advances. Rules (from `bi_collections::testing`): a read
//! between passes returns a value current since its node's last pass; a miss only for a
//! key absent now; after a pass on every node reads are exact; a failed write (heap
//! exhausted, log full) leaves the published tree as it was, or, for a batch, as after a
//! prefix of it; the tree's invariants hold after every step; retired memory all comes
//! back; no read accepts a reused block's old incarnation. Any violation panics.

#![no_main]

use arbitrary::Arbitrary;
use bi_alloc::NodeHeap;
use bi_collections::testing::{History, check_failed_write, check_reuse_hazards};
use bi_collections::tree::{BiTree, TreeReadHandle, TreeWriteHandle};
use bi_collections::{ApplyBatch, Op};
use bi_core::heap::Heap;
use bi_core::mem::EmulatedNode;
use bi_fuzz::hardware::CollectionInput;
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use std::ops::Bound;

const NODES: usize = 3;
const KEYS: u8 = 40;
const MAX_STEPS: usize = 300;
const MAX_BATCH: usize = 24;
/// A `u64 -> u64` node is one 64-byte line (40 bytes beside the line's stamp).
const BLOCK: usize = 64;

/// The machine's parameters, then steps until the data runs out.
type Input = CollectionInput<Step, MAX_STEPS>;

#[derive(Arbitrary, Debug)]
enum Step {
    Insert(u8),
    Remove(u8),
    Batch(Vec<(bool, u8)>),
    Get(u8, u8),
    Range(u8, u8, u8),
    Iter(u8),
    Len(u8),
    Pass(u8),
    PassAll,
    Reclaim,
    Advance(u8),
}

type Writer = TreeWriteHandle<u64, u64, EmulatedNode, NodeHeap>;
type Reader = TreeReadHandle<u64, u64, EmulatedNode>;

fn key(k: u8) -> u64 {
    u64::from(k % KEYS)
}

/// Reader nodes are 1 and 2.
fn reader(n: u8) -> usize {
    1 + usize::from(n) % (NODES - 1)
}

fn check<T>(r: Result<T, bi_collections::testing::Violation>) -> T {
    r.unwrap_or_else(|v| panic!("{v}"))
}

/// After a failed write: the error is a legal one, the tree is intact, and the writer's
/// contents are the model after a prefix of `ops` (no prefix for a single operation).
/// Records what was published.
fn failed(
    w: &Writer,
    h: &mut History<u64, u64>,
    ops: &[Op<u64, u64>],
    e: &bi_collections::CollectionError,
) {
    w.check_invariants().unwrap();
    let actual: BTreeMap<u64, u64> = w.iter().unwrap().into_iter().collect();
    check_failed_write(h, ops, &actual, e).unwrap();
}

fn run(input: Input) {
    let hw = input.hardware;
    let (s, heap) = hw.build(NODES);
    let tree = BiTree::<u64, u64>::at(s.slot(0));
    let mut w: Writer = tree.write_handle(s.nodes[0].writer(heap).unwrap()).unwrap();
    let readers: Vec<Reader> = (1..NODES)
        .map(|n| tree.read_handle(&s.nodes[n]).unwrap())
        .collect();
    let mut h = History::<u64, u64>::new(NODES);
    let mut next_value = 1u64;
    let mut fresh = || {
        next_value += 1;
        next_value
    };
    let pass = |n: usize, h: &mut History<u64, u64>| {
        h.pass_started(n);
        s.nodes[n].quiesce().unwrap();
    };

    for st in input.steps.iter().take(MAX_STEPS) {
        match st {
            Step::Insert(k) => {
                let (k, v) = (key(*k), fresh());
                match w.insert(k, v) {
                    Ok(old) => {
                        assert_eq!(old, h.model().get(&k).copied());
                        h.publish([(k, Some(v))]);
                    }
                    Err(e) => failed(&w, &mut h, &[], &e),
                }
            }
            Step::Remove(k) => {
                let k = key(*k);
                match w.remove(&k) {
                    Ok(old) => {
                        assert_eq!(old, h.model().get(&k).copied());
                        if old.is_some() {
                            h.publish([(k, None)]);
                        }
                    }
                    Err(e) => failed(&w, &mut h, &[], &e),
                }
            }
            Step::Batch(ops) => {
                let ops: Vec<Op<u64, u64>> = ops
                    .iter()
                    .take(MAX_BATCH)
                    .map(|&(ins, k)| {
                        if ins {
                            Op::Insert(key(k), fresh())
                        } else {
                            Op::Remove(key(k))
                        }
                    })
                    .collect();
                match w.apply_batch(&ops) {
                    Ok(report) => {
                        assert_eq!(report.applied, ops.len());
                        h.publish_ops(&ops);
                    }
                    Err(e) => failed(&w, &mut h, &ops, &e),
                }
            }
            Step::Get(n, k) => {
                let (n, k) = (reader(*n), key(*k));
                let got = readers[n - 1].get(&k).unwrap();
                check(h.check_get(n, &k, got));
            }
            Step::Range(n, a, b) => {
                let n = reader(*n);
                let (a, b) = (key(*a).min(key(*b)), key(*a).max(key(*b)));
                let got = readers[n - 1]
                    .enter()
                    .range((Bound::Included(a), Bound::Excluded(b)))
                    .unwrap();
                assert!(
                    got.windows(2).all(|p| p[0].0 < p[1].0),
                    "range out of order"
                );
                check(h.check_scan(n, &got, |k| a <= *k && *k < b));
            }
            Step::Iter(n) => {
                let n = reader(*n);
                let got = readers[n - 1].enter().iter().unwrap();
                assert!(
                    got.windows(2).all(|p| p[0].0 < p[1].0),
                    "iteration out of order"
                );
                check(h.check_scan(n, &got, |_| true));
            }
            Step::Len(n) => {
                let n = reader(*n);
                let got = readers[n - 1].len().unwrap();
                check(h.check_len(n, got));
            }
            Step::Pass(n) => pass(usize::from(*n) % NODES, &mut h),
            Step::PassAll => (0..NODES).for_each(|n| pass(n, &mut h)),
            Step::Reclaim => {
                w.reclaim().unwrap();
            }
            Step::Advance(t) => s.emu.advance(u64::from(*t)),
        }
        w.check_invariants().unwrap();
        assert_eq!(w.len(), h.model().len());
    }

    // After a pass on every node, every read is exact.
    (0..NODES).for_each(|n| pass(n, &mut h));
    let all: Vec<(u64, u64)> = h.model().iter().map(|(k, v)| (*k, *v)).collect();
    for r in &readers {
        let v = r.enter();
        assert_eq!(v.iter().unwrap(), all);
        assert_eq!(v.len().unwrap(), all.len());
        for k in 0..u64::from(KEYS) {
            assert_eq!(v.get(&k).unwrap(), h.model().get(&k).copied(), "key {k}");
        }
    }
    // Retired memory comes back once every node has passed twice more: the heap then
    // holds exactly the published tree.
    for _ in 0..3 {
        s.emu.advance(4 * hw.skew_ticks() + 1);
        s.quiesce_all().unwrap();
        w.reclaim().unwrap();
    }
    assert_eq!(w.unretired(), 0);
    assert_eq!(w.writer().retired_blocks(), 0);
    assert_eq!(w.writer().heap().stats().live, h.model().len() * BLOCK);
    check(check_reuse_hazards(&s, !hw.prefetches()));
}

fuzz_target!(|input: Input| run(input));
