//! Model-based test of `BiHashMap` against `HashMap` under the non-coherence emulator:
//! random inserts, removals and batches (growing and shrinking the table) on the writer
//! node, reads on the other nodes, passes and reclaims in between, with adversarial
//! hardware events (evictions, prefetch, clock skew).
//!
//! What is checked:
//! - between passes, a read on node `n` returns a value that was current at some moment
//!   since the start of `n`'s last pass (every key keeps its version history), and a miss
//!   is returned only for a key absent now (lazy invalidation);
//! - after a pass on every node, reads, `len` and iteration are exact;
//! - every load of a reused block's old incarnation was rejected (zero such loads when
//!   prefetch is off);
//! - retired memory is all given back once the passes have run.

use bi_collections::map::{BiHashMap, MapConfig, MapReadHandle, MapWriteHandle};
use bi_collections::testing::{History, check_reuse_hazards};
use bi_collections::{ApplyBatch, Op};
use bi_core::heap::BumpHeap;
use bi_core::mem::EmulatedNode;
use bi_core::region::RegionConfig;
use bi_core::runtime::RuntimeConfig;
use bi_core::runtime::testing::Setup;
use proptest::prelude::*;

type Key = u32;
/// A value that sits in the bucket line beside its key (two entries per line).
type Value = [u64; 2];
/// A value too large for a bucket line: it lives in its own object behind a link.
type BigValue = [u64; 8];

/// Values the model builds from a key and a version.
trait TestValue: bi_collections::Plain + Ord + std::fmt::Debug {
    /// A value that names its key and version, so a torn or misplaced value cannot pass.
    fn make(key: Key, v: u64) -> Self;
}

impl TestValue for Value {
    fn make(key: Key, v: u64) -> Self {
        [v, v ^ (u64::from(key) << 32) ^ 0x5a5a]
    }
}

impl TestValue for BigValue {
    fn make(key: Key, v: u64) -> Self {
        std::array::from_fn(|i| v.rotate_left(i as u32 * 8) ^ (u64::from(key) << 32))
    }
}

#[derive(Clone, Debug)]
enum Step {
    Insert(Key, u64),
    Remove(Key),
    Batch(Vec<(Key, Option<u64>)>),
    Read(usize, Key),
    Pass(usize),
    Reclaim,
    Advance(u64),
}

fn step(keys: Key, nodes: usize) -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..keys, any::<u64>()).prop_map(|(k, v)| Step::Insert(k, v)),
        4 => (0..keys).prop_map(Step::Remove),
        1 => prop::collection::vec((0..keys, prop::option::of(any::<u64>())), 1..40)
            .prop_map(Step::Batch),
        8 => (1..nodes, 0..keys).prop_map(|(n, k)| Step::Read(n, k)),
        2 => (0..nodes).prop_map(Step::Pass),
        1 => Just(Step::Reclaim),
        2 => (0..200u64).prop_map(Step::Advance),
    ]
}

fn value(key: Key, v: u64) -> Value {
    Value::make(key, v)
}

fn machine(seed: u64, skew: u64, evictions: f64, prefetch: bool) -> Setup {
    let (adjacent, random) = if prefetch { (0.2, 0.02) } else { (0.0, 0.0) };
    Setup::with(
        RegionConfig::new(1 << 20)
            .with_nodes(3)
            .with_log_ring_entries(4096),
        |c| {
            c.seed(seed)
                .eviction_rate(evictions)
                .adjacent_prefetch_rate(adjacent)
                .random_prefetch_rate(random)
                .late_writebacks(0.05)
                .clock_skew(skew)
        },
        RuntimeConfig::default()
            .node_lease(100_000_000)
            .reader_lease(100_000_000)
            .skew(2 * skew),
    )
}

type Writer<V> = MapWriteHandle<Key, V, EmulatedNode, BumpHeap>;
type ReadHandle<V> = MapReadHandle<Key, V, EmulatedNode>;

fn check_exact<V: TestValue>(model: &History<Key, V>, readers: &[ReadHandle<V>], keys: Key) {
    for r in readers {
        let m = r.enter();
        for k in 0..keys {
            assert_eq!(
                m.get(&k).unwrap(),
                model.model().get(&k).copied(),
                "key {k}"
            );
        }
        assert_eq!(m.len().unwrap(), model.model().len());
        let mut all: Vec<(Key, V)> = m.iter().collect::<Result<_, _>>().unwrap();
        all.sort();
        let want: Vec<(Key, V)> = model.model().iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(all, want);
        let mut live: Vec<(Key, V)> = m.iter_live().collect::<Result<_, _>>().unwrap();
        live.sort();
        assert_eq!(live, want, "read key by key through the cache");
        assert_eq!(m.is_empty().unwrap(), want.is_empty());
        for k in 0..keys {
            assert_eq!(m.contains_key(&k).unwrap(), model.model().contains_key(&k));
        }
        drop(m);
        // The handle's own entry points read the same version: one key at a time, a
        // batch of every key, and its `Debug`, which lists what a section iterates.
        let every: Vec<Key> = (0..keys).collect();
        let mut batch = Vec::new();
        r.get_many(&every, &mut batch).unwrap();
        for k in 0..keys {
            let want = model.model().get(&k).copied();
            assert_eq!(batch[k as usize], want, "key {k} in a batch");
            assert_eq!(r.contains_key(&k).unwrap(), want.is_some(), "key {k}");
        }
        assert_eq!(format!("{r:?}"), format!("{:?}", r.enter()));
    }
}

fn run<V: TestValue>(
    seed: u64,
    skew: u64,
    evictions: f64,
    prefetch: bool,
    steps: &[Step],
    keys: Key,
) {
    let value = V::make;
    let s = machine(seed, skew, evictions, prefetch);
    let map = BiHashMap::<Key, V>::at(s.slot(0));
    let mut w: Writer<V> = map
        .write_handle_with(s.writer(0), MapConfig::new().initial_buckets(8))
        .unwrap();
    let readers: Vec<ReadHandle<V>> = (1..3)
        .map(|n| map.read_handle(&s.nodes[n]).unwrap())
        .collect();
    let mut model = History::<Key, V>::new(3);
    let mut max_buckets = 0;
    let mut min_buckets_after_max = usize::MAX;
    for st in steps {
        match st {
            Step::Insert(k, v) => {
                let old = w.insert(*k, value(*k, *v)).unwrap();
                assert_eq!(old, model.model().get(k).copied());
                model.publish([(*k, Some(value(*k, *v)))]);
            }
            Step::Remove(k) => {
                let old = w.remove(k).unwrap();
                assert_eq!(old, model.model().get(k).copied());
                model.publish([(*k, None)]);
            }
            Step::Batch(ops) => {
                let ops: Vec<Op<Key, V>> = ops
                    .iter()
                    .map(|(k, v)| match v {
                        Some(v) => Op::Insert(*k, value(*k, *v)),
                        None => Op::Remove(*k),
                    })
                    .collect();
                let rep = w.apply_batch(&ops).unwrap();
                assert_eq!(rep.applied, ops.len());
                model.publish_ops(&ops);
            }
            Step::Read(n, k) => {
                // Even keys by the fresh read: current since the node's last pass, and a
                // miss only for a key absent now (a miss re-reads from memory). Odd keys
                // by the bounded read: a value or an absence current at some moment since
                // the node's last pass.
                let r = &readers[n - 1];
                let checked = if k % 2 == 0 {
                    model.check_get(*n, k, r.get_fresh(k).unwrap())
                } else {
                    model.check_get_bounded(*n, k, r.get(k).unwrap())
                };
                checked.unwrap_or_else(|v| panic!("{v}"));
                let wrote = w.get(k);
                assert_eq!(wrote, model.model().get(k).copied());
            }
            Step::Pass(n) => {
                model.pass_started(*n);
                s.nodes[*n].quiesce().unwrap();
            }
            Step::Reclaim => {
                w.reclaim().unwrap();
            }
            Step::Advance(t) => s.emu.advance(*t),
        }
        s.emu.advance(3);
        assert_eq!(w.len(), model.model().len());
        let b = w.capacity();
        if b >= max_buckets {
            max_buckets = b;
            min_buckets_after_max = usize::MAX;
        }
        min_buckets_after_max = min_buckets_after_max.min(b);
    }
    // Everyone passes: reads are exact.
    model.all_passed();
    s.quiesce_all().unwrap();
    check_exact(&model, &readers, keys);
    // Retired memory all comes back after the grace period.
    for _ in 0..4 {
        s.emu.advance(10 * skew + 10);
        s.quiesce_all().unwrap();
        w.reclaim().unwrap();
    }
    assert_eq!(w.pending_retirements(), 0);
    assert_eq!(
        w.writer().retired_blocks(),
        0,
        "everything retired was reclaimed"
    );
    // Every old-incarnation load was rejected (and there were none without prefetch).
    check_reuse_hazards(&s, !prefetch).unwrap_or_else(|v| panic!("{v}"));
}

fn cases() -> u32 {
    if cfg!(miri) { 2 } else { 64 }
}

fn len() -> std::ops::Range<usize> {
    if cfg!(miri) { 5..20 } else { 50..300 }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn quiet_hardware(seed in any::<u64>(), steps in prop::collection::vec(step(48, 3), len())) {
        run::<Value>(seed, 0, 0.0, false, &steps, 48);
    }

    #[test]
    fn evictions_and_skew(seed in any::<u64>(), steps in prop::collection::vec(step(48, 3), len())) {
        run::<Value>(seed, 30, 0.05, false, &steps, 48);
    }

    #[test]
    fn evictions_prefetch_and_skew(seed in any::<u64>(), steps in prop::collection::vec(step(48, 3), len())) {
        run::<Value>(seed, 30, 0.05, true, &steps, 48);
    }

    #[test]
    fn linked_values_quiet_hardware(seed in any::<u64>(), steps in prop::collection::vec(step(48, 3), len())) {
        run::<BigValue>(seed, 0, 0.0, false, &steps, 48);
    }

    #[test]
    fn linked_values_evictions_prefetch_and_skew(seed in any::<u64>(), steps in prop::collection::vec(step(48, 3), len())) {
        run::<BigValue>(seed, 30, 0.05, true, &steps, 48);
    }
}

/// A map's two ends in these tests: node 0's writer and node 2's reader.
type Ends = (
    MapWriteHandle<Key, Value, EmulatedNode, BumpHeap>,
    MapReadHandle<Key, Value, EmulatedNode>,
);

/// A map of 8 buckets to start with, written on node 0 and read on node 2.
fn small_table(s: &Setup) -> Ends {
    let map = BiHashMap::<Key, Value>::at(s.slot(0));
    let w = map
        .write_handle_with(s.writer(0), MapConfig::new().initial_buckets(8))
        .unwrap();
    (w, map.read_handle(&s.nodes[2]).unwrap())
}

/// A reservation builds the table once at the size the keys need: loading them never
/// grows it, a table still filling is never shrunk (it starts far under its shrink
/// point), and removals shrink it as usual; readers on other nodes follow.
#[test]
fn a_reserved_table_is_built_once_and_shrinks_only_after_removals() {
    let keys: Key = if cfg!(miri) { 40 } else { 400 };
    for seed in bi_kit::seeds(4, 1) {
        let s = machine(seed, 10, 0.02, true);
        let (mut w, r) = small_table(&s);
        w.reserve(keys as usize).unwrap();
        let reserved = w.capacity();
        assert!(
            reserved * 3 >= 2 * keys as usize && reserved > 8,
            "{reserved}"
        );
        for k in 0..keys {
            w.insert(k, value(k, 1)).unwrap();
            assert_eq!(r.get_fresh(&k).unwrap(), Some(value(k, 1)));
            assert_eq!(w.capacity(), reserved, "resized at key {k}");
            if k % 50 == 0 {
                s.quiesce_all().unwrap();
                w.reclaim().unwrap();
            }
        }
        // Reserving what the table holds already changes nothing.
        w.reserve(0).unwrap();
        assert_eq!(w.capacity(), reserved);
        for k in 0..keys - 3 {
            assert_eq!(w.remove(&k).unwrap(), Some(value(k, 1)));
        }
        assert!(w.capacity() < reserved / 8, "shrunk to {}", w.capacity());
        s.quiesce_all().unwrap();
        let m = r.enter();
        assert_eq!(m.len().unwrap(), 3);
        for k in keys - 3..keys {
            assert_eq!(m.get(&k).unwrap(), Some(value(k, 1)));
        }
    }
}

/// The table grows past its start and shrinks back as keys come and go, and readers on
/// other nodes follow every resize.
#[test]
fn the_table_grows_and_shrinks_while_readers_read() {
    let keys: Key = if cfg!(miri) { 40 } else { 400 };
    for seed in bi_kit::seeds(4, 1) {
        let s = machine(seed, 10, 0.02, true);
        let (mut w, r) = small_table(&s);
        let start = w.capacity();
        for k in 0..keys {
            w.insert(k, value(k, 1)).unwrap();
            // Lazy invalidation: found at once on another node, across resizes.
            assert_eq!(r.get_fresh(&k).unwrap(), Some(value(k, 1)));
            if k % 50 == 0 {
                s.quiesce_all().unwrap();
                w.reclaim().unwrap();
            }
        }
        let grown = w.capacity();
        assert!(grown >= keys as usize && grown > start, "{grown}");
        for k in 0..keys - 3 {
            assert_eq!(w.remove(&k).unwrap(), Some(value(k, 1)));
            // Removed: gone, or (between passes) its last value, never anything else.
            let got = r.get(&k).unwrap();
            assert!(
                got.is_none() || got == Some(value(k, 1)),
                "key {k}: {got:?}"
            );
            if k % 50 == 0 {
                s.quiesce_all().unwrap();
                w.reclaim().unwrap();
            }
        }
        assert!(w.capacity() < grown / 8, "shrunk to {}", w.capacity());
        s.quiesce_all().unwrap();
        let m = r.enter();
        assert_eq!(m.len().unwrap(), 3);
        for k in keys - 3..keys {
            assert_eq!(m.get(&k).unwrap(), Some(value(k, 1)));
        }
        drop(m);
        let rejected: u64 = s.nodes.iter().map(|n| n.mismatches()).sum();
        assert!(s.emu.total_stats().reuse_hazards <= rejected);
    }
}
