//! A torn snapshot: a map's snapshot read (the shipped [`BiHashMap`]'s `iter`) returns
//! entries that no published version of the map held together.
//!
//! A map changes in place, a line at a time. A snapshot read collects the partition from
//! memory twice and accepts the lines only if both collects found the same stamps and the
//! stamps of the bucket lines sum to what the counters line says. Two rows each script
//! one schedule over an 8-bucket map whose writer is on node 0 and whose reader is on
//! node 1; node 2 plays a late write-back (it puts an older copy of a line back in memory
//! until the moment the line lands).
//!
//! **A snapshot of part of a commit**: one batch inserts `a` and `b` (two bucket lines and
//! the counters line), and `a`'s line has not landed while node 1 reads; it lands once the
//! reader has started its read again. Broken ([`Fault::SnapshotSum`]): two collects that
//! agree pass for a version without the stamps' sum, so memory holding `b` and not `a`
//! is returned. BI: the stamps fall short of the counters' sum and the read starts again.
//! Counted: snapshots that are no published version.
//!
//! **A snapshot of lines read apart**: the writer inserts `a`, whose line lands after the
//! counters line; node 1 reads the new counters and `a`'s old line, then `a`'s line
//! lands and the writer inserts `b`, then node 1 reads `b`'s new line. The stamps sum to
//! the counters' (one rewrite missing, one extra). Broken ([`Fault::SnapshotRecollect`]):
//! the first collect is accepted without a second, so `b` without `a` is returned. BI:
//! the second collect finds other stamps and the read starts again. Counted: snapshots
//! that are no published version.

use super::Hazard;
use bi_collections::map::{BiHashMap, MapConfig, MapWriteHandle, bucket_of, key_hash};
use bi_collections::{ApplyBatch, Op};
use bi_core::heap::BumpHeap;
use bi_core::mem::{Access, EmulatedNode, MemError, MemView, Observed};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{EmulatedClock, Fault, Lines, Link, RuntimeConfig};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub(super) const SUM: Hazard = Hazard {
    name: "snapshot_of_part_of_a_commit",
    fault: Fault::SnapshotSum,
    counts: "snapshot reads that returned no published version",
    run: |config, seed| {
        let mut scene = Scene::new(config, seed);
        let (a, b) = (scene.a, scene.b);
        let (before, after) = scene.line_a_around(|w| {
            w.apply_batch(&[Op::Insert(a, 1), Op::Insert(b, 2)])
                .map(drop)
        });
        let land = scene.lander();
        land(before);
        // Every collect drops the whole bucket array from node 1's cache first: `a`'s
        // line lands at the first collect of the read's second attempt.
        let refresh = Access::Invalidate(scene.array, (BUCKETS + 2) * scene.line);
        let collects = AtomicUsize::new(0);
        let read = scene.read(move |access| {
            if access == refresh && collects.fetch_add(1, Ordering::SeqCst) == 2 {
                land(after);
            }
        });
        let published = [Version::new(), Version::from([(a, 1), (b, 2)])];
        u64::from(!published.contains(&read))
    },
};

pub(super) const RECOLLECT: Hazard = Hazard {
    name: "snapshot_of_lines_read_apart",
    fault: Fault::SnapshotRecollect,
    counts: "snapshot reads that returned no published version",
    run: |config, seed| {
        let mut scene = Scene::new(config, seed);
        let (a, b) = (scene.a, scene.b);
        let (before, after) = scene.line_a_around(|w| w.insert(a, 1).map(drop));
        let land = scene.lander();
        land(before);
        let (line_a, counters, line) = (scene.line_a, scene.counters, scene.line);
        let writer = scene.writer.clone();
        let armed = Arc::new(AtomicBool::new(true));
        let fire = armed.clone();
        let read = scene.read(move |access| {
            // The first load past `a`'s line (the counters line is read before the
            // buckets).
            if let Access::Load(offset) = access
                && offset >= line_a + line
                && offset < counters
                && fire.swap(false, Ordering::SeqCst)
            {
                land(after);
                let mut w = writer.lock().expect("writer");
                w.insert(b, 2).expect("insert");
            }
        });
        assert!(!armed.load(Ordering::SeqCst), "the schedule never ran");
        let published = [
            Version::new(),
            Version::from([(a, 1)]),
            Version::from([(a, 1), (b, 2)]),
        ];
        u64::from(!published.contains(&read))
    },
};

/// Buckets of the map's array.
const BUCKETS: usize = 8;

type Version = BTreeMap<u64, u64>;

type Writer = MapWriteHandle<u64, u64, EmulatedNode, BumpHeap>;

/// The map, its writer on node 0, and where its lines are.
struct Scene {
    s: Setup,
    config: RuntimeConfig,
    map: BiHashMap<u64, u64>,
    writer: Arc<Mutex<Writer>>,
    /// A key of one of the first four buckets (which one depends on the seed).
    a: u64,
    /// A key of bucket 5.
    b: u64,
    /// The bucket array, `a`'s bucket line and the counters line.
    array: usize,
    line_a: usize,
    counters: usize,
    /// Bytes of a line.
    line: usize,
}

impl Scene {
    fn new(config: RuntimeConfig, seed: u64) -> Scene {
        let s = Setup::with(
            RegionConfig::new(1 << 20).with_nodes(3),
            |c| c.seed(seed),
            config.clone(),
        );
        let map = BiHashMap::<u64, u64>::at(s.slot(0));
        let initial = MapConfig::new().initial_buckets(BUCKETS);
        let writer = map.write_handle_with(s.writer(0), initial).expect("map");
        let line = s.region.layout().line_size().get();
        let array =
            Link::<Lines<[u64; 7]>>::from_raw(s.emu.peek::<u64>(s.slot(0)).expect("slot")).offset();
        let bucket_a = seed as usize % 4;
        Scene {
            config,
            map,
            writer: Arc::new(Mutex::new(writer)),
            a: key_in_bucket(bucket_a),
            b: key_in_bucket(5),
            array,
            line_a: array + (1 + bucket_a) * line,
            counters: array + (1 + BUCKETS) * line,
            line,
            s,
        }
    }

    /// Runs `write` on the writer; returns `a`'s line in memory before and after.
    fn line_a_around(
        &self,
        write: impl FnOnce(&mut Writer) -> Result<(), bi_collections::CollectionError>,
    ) -> ([u64; 8], [u64; 8]) {
        let peek = || self.s.emu.peek::<[u64; 8]>(self.line_a).expect("line");
        let before = peek();
        write(&mut self.writer.lock().expect("writer")).expect("write");
        let after = peek();
        assert_ne!(before, after, "key {} is not in `a`'s bucket", self.a);
        (before, after)
    }

    /// Puts a copy of `a`'s line in memory, as a write-back landing would (node 2 stores
    /// and writes it back, and keeps no copy).
    fn lander(&self) -> impl Fn([u64; 8]) + Send + Sync + 'static {
        let (node2, at, line) = (self.s.emu.node(2), self.line_a, self.line);
        move |copy| {
            let put = || -> Result<(), MemError> {
                node2.store(at, &copy)?;
                node2.writeback(at, line)?;
                node2.fence();
                node2.invalidate(at, line)
            };
            put().expect("node 2 puts the line");
        }
    }

    /// Node 1's snapshot read of the map through a view `hook` sees every access of
    /// first.
    fn read(&mut self, hook: impl Fn(Access) + Send + Sync + 'static) -> Version {
        // Node 1 runs over the hooked view (its plain runtime gives the node up first).
        drop(self.s.nodes.remove(1));
        let node1 = self.s.emu.node(1);
        let clock = Arc::new(EmulatedClock::new(node1.clone()));
        let view = Observed::new(node1, move |access| {
            hook(access);
            Ok(())
        });
        let layout = *self.s.region.layout();
        let rt = bi_core::runtime::NodeRuntime::new(view, layout, 1, self.config.clone(), clock)
            .expect("runtime");
        let r = self.map.read_handle(&rt).expect("reader slot");
        r.enter()
            .iter()
            .collect::<Result<_, _>>()
            .expect("snapshot")
    }
}

/// The first key from 0 in bucket `b` of a `BUCKETS`-bucket array.
fn key_in_bucket(b: usize) -> u64 {
    (0..)
        .find(|k| bucket_of(key_hash(k), BUCKETS) == b)
        .expect("every bucket has keys")
}
