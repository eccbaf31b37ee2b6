//! A map's iteration is a snapshot: node 1 iterates while node 0 commits batches of
//! several keys (each batch rewrites several bucket lines and the header under one
//! fence), on a machine whose write-backs land late and in any order until a fence, and
//! that evicts and prefetches lines at random. Every snapshot node 1 takes must be a
//! version node 0 published.
//!
//! A scripted schedule adds the case two threads rarely produce: a commit's counters line
//! lands before another of its lines while the reader is between them.

use bi_collections::map::{BiHashMap, MapConfig, bucket_of, key_hash};
use bi_collections::{ApplyBatch, CollectionError, Op};
use bi_core::mem::{Access, MemView, Observed};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{EmulatedClock, Lines, Link, NodeRuntime, RuntimeConfig};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

type LineLink = Link<Lines<[u64; 7]>>;

type Version = BTreeMap<u64, u64>;

const BATCHES: u64 = 400;
/// Keys over few buckets, so batches share lines and chains overflow.
const KEYS: u64 = 48;

/// Sets its flag when dropped.
struct Stop<'a>(&'a AtomicBool);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Node 0 commits `BATCHES` batches while node 1 takes snapshots; returns (snapshots
/// taken, snapshots that are no published version, contended reads).
fn snapshots_against_batches(seed: u64, late: f64, config: RuntimeConfig) -> (u64, u64, u64) {
    let s = Setup::with(
        RegionConfig::new(1 << 21).with_nodes(2),
        |c| {
            c.seed(seed)
                .eviction_rate(0.02)
                .adjacent_prefetch_rate(0.2)
                .late_writebacks(late)
        },
        config.node_lease(u64::MAX / 4).reader_lease(u64::MAX / 4),
    );
    let map = BiHashMap::<u64, u64>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    // Every version that may be in memory: the published ones and the one in flight.
    let versions = Mutex::new(vec![Version::new()]);
    let (started, done) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|t| {
        let reading = t.spawn(|| {
            let r = map.read_handle(&s.nodes[1]).unwrap();
            let (mut taken, mut wrong, mut contended) = (0, 0, 0);
            started.store(true, Ordering::Release);
            // Once more after the writer is done: at least one snapshot, of its last version.
            let mut last = false;
            while !last {
                last = done.load(Ordering::Acquire);
                let snapshot: Result<Version, CollectionError> = r.enter().iter().collect();
                match snapshot {
                    Ok(v) => {
                        taken += 1;
                        wrong += u64::from(!versions.lock().unwrap().contains(&v));
                    }
                    Err(CollectionError::Contended { .. }) => contended += 1,
                    Err(e) => panic!("node 1: {e}"),
                }
            }
            (taken, wrong, contended)
        });
        let _stop = Stop(&done);
        while !started.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        let mut model = Version::new();
        for i in 0..BATCHES {
            let ops: Vec<Op<u64, u64>> = (0..4)
                .map(|j| {
                    let k = (i * 7 + j * 13) % KEYS;
                    if (i + j) % 5 == 4 {
                        Op::Remove(k)
                    } else {
                        Op::Insert(k, i * 10 + j)
                    }
                })
                .collect();
            for op in &ops {
                match *op {
                    Op::Insert(k, v) => model.insert(k, v),
                    Op::Remove(k) => model.remove(&k),
                };
            }
            versions.lock().unwrap().push(model.clone());
            w.apply_batch(&ops).unwrap();
            if i % 8 == 7 {
                // Passes consume the modified ring, which would otherwise fill.
                s.quiesce_all().unwrap();
            }
        }
        drop(_stop);
        reading.join().unwrap()
    })
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of batches against a polling thread")]
fn every_snapshot_is_a_published_version() {
    for (seed, late) in [(0, 0.05), (1, 0.05), (2, 0.5), (3, 0.5)] {
        let (taken, wrong, _) = snapshots_against_batches(seed, late, RuntimeConfig::default());
        assert!(taken > 0, "seed {seed}: no snapshot succeeded");
        assert_eq!(
            wrong, 0,
            "seed {seed}: {wrong} of {taken} snapshots were never published"
        );
    }
}

const BUCKETS: usize = 8;

/// The first key from 0 in bucket `b` of a `BUCKETS`-bucket array.
fn key_in_bucket(b: usize) -> u64 {
    (0..)
        .find(|k| bucket_of(key_hash(k), BUCKETS) == b)
        .unwrap()
}

/// One scripted schedule: node 0 inserts `a` (bucket 0), and that line reaches memory
/// after its counters line (node 2 plays the late write-back: it puts the old line back
/// until the moment comes). Node 1's snapshot read has read the new counters and `a`'s
/// old line when `a`'s line lands and node 0 inserts `b` (bucket 5); then it reads on.
/// Returns what node 1's read returned, and every version node 0 published.
fn counters_before_a_line(reader: RuntimeConfig) -> (Version, Vec<Version>) {
    let mut s = Setup::with(
        RegionConfig::new(1 << 20).with_nodes(3),
        |c| c.seed(5),
        RuntimeConfig::default(),
    );
    let map = BiHashMap::<u64, u64>::at(s.slot(0));
    let config = MapConfig::new().initial_buckets(BUCKETS);
    let w = Arc::new(Mutex::new(
        map.write_handle_with(s.writer(0), config).unwrap(),
    ));
    let (a, b) = (key_in_bucket(0), key_in_bucket(5));
    let array = LineLink::from_raw(s.emu.peek::<u64>(s.slot(0)).unwrap()).offset();
    let (line_a, counters) = (array + 64, array + (BUCKETS + 1) * 64);
    let before: [u64; 8] = s.emu.peek(line_a).unwrap();
    w.lock().unwrap().insert(a, 1).unwrap();
    let after: [u64; 8] = s.emu.peek(line_a).unwrap();
    assert_ne!(before, after, "key {a} is not in the array's first bucket");
    let node2 = s.emu.node(2);
    let put = move |line: [u64; 8]| {
        node2.store(line_a, &line).unwrap();
        node2.writeback(line_a, 64).unwrap();
        node2.fence();
        node2.invalidate(line_a, 64).unwrap();
    };
    put(before);
    let armed = Arc::new(AtomicBool::new(false));
    let (fire, writer) = (armed.clone(), w.clone());
    let hook = move |access| {
        // The first load past `a`'s line (the counters line is read before the buckets).
        if let Access::Load(offset) = access
            && offset >= line_a + 64
            && offset < counters
            && fire.swap(false, Ordering::SeqCst)
        {
            put(after);
            writer.lock().unwrap().insert(b, 2).unwrap();
        }
        Ok(())
    };
    // Node 1 runs over the hooked view (its plain runtime gives the node up first).
    drop(s.nodes.remove(1));
    let node1 = s.emu.node(1);
    let clock = Arc::new(EmulatedClock::new(node1.clone()));
    let view = Observed::new(node1, hook);
    let rt = NodeRuntime::new(view, *s.region.layout(), 1, reader, clock).unwrap();
    let r = map.read_handle(&rt).unwrap();
    armed.store(true, Ordering::SeqCst);
    let read: Version = r.enter().iter().collect::<Result<_, _>>().unwrap();
    assert!(!armed.load(Ordering::SeqCst), "the schedule never ran");
    let published = vec![
        Version::new(),
        Version::from([(a, 1)]),
        Version::from([(a, 1), (b, 2)]),
    ];
    (read, published)
}

#[test]
#[cfg_attr(miri, ignore = "the emulator's threads of a scripted schedule")]
fn a_snapshot_read_rereads_when_a_line_lands_after_the_counters() {
    let (read, published) = counters_before_a_line(RuntimeConfig::default());
    assert!(published.contains(&read), "{read:?}");
}
