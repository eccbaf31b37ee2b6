//! Drives a `BiHashMap<u32, [u64; 2]>` on an emulated three-node machine through an
//! arbitrary sequence of operations and checks every read against a version history.
//!
//! The input chooses the emulator seed, the rates of evictions, adjacent and random
//! prefetch, a small clock skew, the size of the writer's heap (small enough that some
//! inputs exhaust it), and up to a few hundred operations: inserts, removals and batches
//! on node 0 (growing and shrinking the table), lookups, iterations and `len` on nodes 1
//! and 2, passes on chosen nodes, reclaims and clock advances. Rules (from
//! `bi_collections::testing`): a read between passes returns a value current since its
//! node's last pass; a miss only for a key absent now; after a pass on every node reads
//! are exact; a failed write (heap exhausted, log full) leaves the map as it was, or, for
//! a batch, as after a prefix of it; retired memory all comes back; no read accepts a
//! reused block's old incarnation. Any violation panics.

#![no_main]

use arbitrary::Arbitrary;
use bi_alloc::NodeHeap;
use bi_collections::map::{BiHashMap, MapConfig, MapReadHandle, MapWriteHandle};
use bi_collections::testing::{
    History, Violation, check_failed_write, check_reuse_hazards, is_resource_exhaustion,
};
use bi_collections::{ApplyBatch, CollectionError, Op};
use bi_core::mem::EmulatedNode;
use bi_fuzz::hardware::CollectionInput;
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;

const NODES: usize = 3;
const KEYS: u8 = 48;
const MAX_STEPS: usize = 300;
const MAX_BATCH: usize = 40;

type Key = u32;
type Value = [u64; 2];

/// The machine's parameters, then steps until the data runs out.
type Input = CollectionInput<Step, MAX_STEPS>;

#[derive(Arbitrary, Debug)]
enum Step {
    Insert(u8, u16),
    Remove(u8),
    Batch(Vec<(u8, Option<u16>)>),
    Get(u8, u8),
    Iter(u8),
    Len(u8),
    Pass(u8),
    PassAll,
    Reclaim,
    Advance(u8),
}

type Writer = MapWriteHandle<Key, Value, EmulatedNode, NodeHeap>;
type Reader = MapReadHandle<Key, Value, EmulatedNode>;

fn key(k: u8) -> Key {
    Key::from(k % KEYS)
}

/// A value that names its key and version, so a torn or misplaced value cannot pass.
fn value(k: Key, v: u16) -> Value {
    let v = u64::from(v);
    [v, v ^ (u64::from(k) << 32) ^ 0x5a5a]
}

/// Reader nodes are 1 and 2.
fn reader(n: u8) -> usize {
    1 + usize::from(n) % (NODES - 1)
}

fn check<T>(r: Result<T, Violation>) -> T {
    r.unwrap_or_else(|v| panic!("{v}"))
}

/// The writer's private mirror of the map.
fn mirror(w: &Writer) -> BTreeMap<Key, Value> {
    (0..Key::from(KEYS))
        .filter_map(|k| w.get(&k).map(|v| (k, v)))
        .collect()
}

/// After a failed write: the error is a legal one and the writer's contents are the
/// model after a prefix of `ops` (no prefix for a single operation). Records what was
/// published.
fn failed(w: &Writer, h: &mut History<Key, Value>, ops: &[Op<Key, Value>], e: &CollectionError) {
    let actual = mirror(w);
    assert_eq!(w.len(), actual.len());
    check_failed_write(h, ops, &actual, e).unwrap();
}

fn run(input: Input) {
    let hw = input.hardware;
    let (s, heap) = hw.build(NODES);
    let map = BiHashMap::<Key, Value>::at(s.slot(0));
    let mut w: Writer = match map.write_handle_with(
        s.nodes[0].writer(heap).unwrap(),
        MapConfig::new().initial_buckets(8),
    ) {
        Ok(w) => w,
        // A heap too small for the first bucket array: a legal refusal.
        Err(e) if is_resource_exhaustion(&e) => return,
        Err(e) => panic!("{e}"),
    };
    let readers: Vec<Reader> = (1..NODES)
        .map(|n| map.read_handle(&s.nodes[n]).unwrap())
        .collect();
    let mut h = History::<Key, Value>::new(NODES);
    let pass = |n: usize, h: &mut History<Key, Value>| {
        h.pass_started(n);
        s.nodes[n].quiesce().unwrap();
    };

    for st in input.steps.iter().take(MAX_STEPS) {
        match st {
            Step::Insert(k, v) => {
                let (k, v) = (key(*k), value(key(*k), *v));
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
                let ops: Vec<Op<Key, Value>> = ops
                    .iter()
                    .take(MAX_BATCH)
                    .map(|&(k, v)| match v {
                        Some(v) => Op::Insert(key(k), value(key(k), v)),
                        None => Op::Remove(key(k)),
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
                // Even keys by the fresh read (a miss only for a key absent now), odd keys
                // by the bounded one (a value or an absence since the node's last pass).
                let r = &readers[n - 1];
                check(if k % 2 == 0 {
                    h.check_get(n, &k, r.get_fresh(&k).unwrap())
                } else {
                    h.check_get_bounded(n, &k, r.get(&k).unwrap())
                });
            }
            Step::Iter(n) => {
                let n = reader(*n);
                let m = readers[n - 1].enter();
                let got: Vec<(Key, Value)> = m.iter().collect::<Result<_, _>>().unwrap();
                check(h.check_scan(n, &got, |_| true));
            }
            Step::Len(n) => {
                let n = reader(*n);
                let got = readers[n - 1].enter().len().unwrap();
                check(h.check_len(n, got));
            }
            Step::Pass(n) => pass(usize::from(*n) % NODES, &mut h),
            Step::PassAll => (0..NODES).for_each(|n| pass(n, &mut h)),
            Step::Reclaim => {
                w.reclaim().unwrap();
            }
            Step::Advance(t) => s.emu.advance(u64::from(*t)),
        }
        assert_eq!(w.len(), h.model().len());
        assert_eq!(&mirror(&w), h.model());
    }

    // After a pass on every node, every read is exact.
    (0..NODES).for_each(|n| pass(n, &mut h));
    let all: Vec<(Key, Value)> = h.model().iter().map(|(k, v)| (*k, *v)).collect();
    for r in &readers {
        let m = r.enter();
        let mut got: Vec<(Key, Value)> = m.iter().collect::<Result<_, _>>().unwrap();
        got.sort();
        assert_eq!(got, all);
        assert_eq!(m.len().unwrap(), all.len());
        for k in 0..Key::from(KEYS) {
            assert_eq!(m.get(&k).unwrap(), h.model().get(&k).copied(), "key {k}");
        }
    }
    // Retired memory all comes back after the grace period.
    for _ in 0..4 {
        s.emu.advance(4 * hw.skew_ticks() + 1);
        s.quiesce_all().unwrap();
        w.reclaim().unwrap();
    }
    assert_eq!(w.pending_retirements(), 0);
    assert_eq!(w.writer().retired_blocks(), 0);
    check(check_reuse_hazards(&s, !hw.prefetches()));
}

fuzz_target!(|input: Input| run(input));
