//! What a delegated update costs: the round trip of a synchronous insert from a client
//! thread to a server thread spinning in `run_until`, and the rate of asynchronous inserts
//! that the server applies in batches (sent one by one, or as one `send_batch`).
//!
//! Runs on the `Hardware` view over anonymous memory, so every write-back, invalidation
//! and fence is the real instruction. The structure is built by a factory:
//! `bench_structure` takes any `ApplyBatch<u64, u64> + Send`, so a shared tree or hash
//! map is benchmarked by adding one line to `main`. `BI_BENCH_QUICK=1` (or `-- --quick`)
//! shortens the run. After criterion's groups it prints, per structure, the median, p99
//! and p99.9 latency of a synchronous update measured one by one.
//!
//! Two structures: `LocalBTree`, a private `BTreeMap` (the cost of delegation alone), and
//! `BiTree`, the shared Bonsai tree over a region of its own with a background pass every
//! millisecond on each of its two nodes; the tree's writer reclaims its retired nodes by
//! itself (every 64 replaced nodes), so memory stays bounded however long criterion runs.
//!
//! After the direct round trips, the same client's channel becomes a node's
//! [`NodeCombiner`], and 1 then 2 threads insert synchronously through it: the
//! operations per second are printed beside the latencies.
//!
//! Machine settings (`bi_kit::bench::Settings`): each structure's delegation channels
//! are in a region of their own in `BI_REGION` (`delegate-local_btreemap.bi`,
//! `delegate-bi_tree.bi` in a directory), and the shared tree's region in
//! `delegate-tree.bi` when `BI_REGION` is a directory (a single file or device holds the
//! channels, and the tree is in anonymous memory); every region is bound to
//! `BI_MEMBIND`, and the tree's pass period is `BI_PERIOD` (default 1 ms). Under `BI_PIN`
//! the server thread (the tree's writer, which also builds the structure) runs on node
//! 0, and the client, the main thread, on node 1, as do the threads that share its
//! channel through the node combiner; each of the tree's pass threads runs on its node.
//! The bench has one client and one server, so `BI_NODES` does not apply. With
//! `BI_REPORT_DIR` the shared tree's p50 and p99 (and the other latencies and rates, with
//! no target) are written to `delegate.json`.

mod common;

use bi_alloc::NodeHeap;
use bi_collections::delegate::{
    DelegationClient, DelegationLayout, DelegationServer, NodeCombiner,
};
use bi_collections::tree::{BiTree, TreeWriteHandle};
use bi_collections::{ApplyBatch, BatchReport, CollectionError, Op};
use bi_core::mem::Hardware;
use bi_core::region::{Region, RegionConfig};
use bi_core::runtime::{Background, DEFAULT_PASS_PERIOD, NodeRuntime};
use bi_kit::bench::{Findings, Settings, Target};
use criterion::{Criterion, Throughput};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Records per client channel.
const CAPACITY: usize = 64;
/// Keys the updates cycle over (a power of two).
const KEYS: u64 = 1 << 16;

/// A private `BTreeMap` behind `ApplyBatch`: the cost of delegation itself, with a
/// structure whose updates need no cache operation.
#[derive(Default)]
struct LocalBTree(BTreeMap<u64, u64>);

impl ApplyBatch<u64, u64> for LocalBTree {
    fn apply_batch(&mut self, ops: &[Op<u64, u64>]) -> Result<BatchReport, CollectionError> {
        let mut report = BatchReport::default();
        for op in ops {
            match *op {
                Op::Insert(k, v) => match self.0.insert(k, v) {
                    Some(_) => report.replaced += 1,
                    None => report.inserted += 1,
                },
                Op::Remove(k) => report.removed += usize::from(self.0.remove(&k).is_some()),
            }
        }
        report.applied = ops.len();
        Ok(report)
    }
}

/// A shared `BiTree` on two nodes over real memory, with background passes running.
struct SharedTree {
    // Field order is drop order: passes stop before the runtimes and the region go.
    _backgrounds: Vec<Background>,
    nodes: Vec<NodeRuntime<Hardware>>,
    _region: Region,
}

impl SharedTree {
    fn new(settings: &Settings) -> SharedTree {
        // A single `BI_REGION` file holds the delegation channels, in use at the same time.
        let file = settings
            .region_file("delegate-tree")
            .filter(|_| common::file_per_region(settings));
        let region = common::region_at(
            settings,
            file,
            RegionConfig::new(64 << 20)
                .with_nodes(2)
                .with_log_ring_entries(1 << 14),
        );
        let nodes = common::hardware_nodes(&region);
        // The client (this thread) runs on node 1.
        let backgrounds =
            common::start_passes(settings, &nodes, settings.period_or(DEFAULT_PASS_PERIOD), 1);
        SharedTree {
            _backgrounds: backgrounds,
            nodes,
            _region: region,
        }
    }

    /// The tree's write handle on node 0, filled with the even keys of `0..KEYS` (the
    /// updates then hit a tree of `KEYS / 2` to `KEYS` entries).
    fn writer(&self) -> TreeWriteHandle<u64, u64, Hardware, NodeHeap> {
        let layout = self.nodes[0].layout();
        let heap = NodeHeap::for_node(layout, 0).expect("heap");
        let slot = layout.root_entry(0).expect("root slot").offset;
        let mut w = BiTree::<u64, u64>::at(slot)
            .write_handle(self.nodes[0].writer(heap).expect("writer"))
            .expect("write handle");
        let entries: Vec<(u64, u64)> = (0..KEYS / 2).map(|i| (2 * i, i)).collect();
        w.load_sorted(&entries).expect("build");
        w
    }
}

/// Latency percentiles in nanoseconds.
struct Percentiles {
    p50: u64,
    p99: u64,
    p999: u64,
    samples: usize,
}

/// What one structure measured.
struct Measured {
    /// A synchronous insert through the client's own channel.
    direct: Percentiles,
    /// Operations per second of synchronous inserts through a node combiner, with 1 and
    /// 2 client threads.
    combined: [f64; 2],
}

fn percentiles(mut ns: Vec<u64>) -> Percentiles {
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q) as usize];
    Percentiles {
        p50: at(0.5),
        p99: at(0.99),
        p999: at(0.999),
        samples: ns.len(),
    }
}

/// Benchmarks delegated updates of the structure `make` builds: one server thread (on
/// node 0), one client thread (this one, on node 1), over real memory; then the same
/// client's channel shared by 1 and 2 threads (on node 1) through a [`NodeCombiner`].
fn bench_structure<S: ApplyBatch<u64, u64> + Send>(
    settings: &Settings,
    c: &mut Criterion,
    quick: bool,
    name: &str,
    make: impl Fn() -> S,
) -> Measured {
    // The server's side (the channel area, the structure) is set up on the server's node.
    settings.pin_thread(0).expect("BI_PIN");
    let region = common::region(
        settings,
        &format!("delegate-{name}"),
        RegionConfig::new(1 << 20).with_nodes(1),
    );
    let heap = region.layout().heap();
    let layout = DelegationLayout::<u64, u64>::new(
        heap.offset..heap.end(),
        1,
        CAPACITY,
        region.layout().line_size(),
    )
    .expect("delegation area");
    let mut server = DelegationServer::new(region.hardware(), layout, make()).expect("server");
    settings.pin_thread(1).expect("BI_PIN");
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        let serving = s.spawn(|| {
            settings.pin_thread(0).expect("BI_PIN");
            server.run_until(&stop)
        });
        let mut client = DelegationClient::new(region.hardware(), layout, 0).expect("client");
        let mut n = 0u64;
        let mut next = move || {
            n += 1;
            (n & (KEYS - 1), n)
        };
        let mut g = c.benchmark_group(format!("delegate/{name}"));
        g.throughput(Throughput::Elements(1));
        g.bench_function("insert_sync", |b| {
            b.iter(|| {
                let (k, v) = next();
                black_box(client.insert_sync(k, v).expect("insert_sync"))
            })
        });
        g.throughput(Throughput::Elements(CAPACITY as u64));
        g.bench_function(format!("insert_async_{CAPACITY}_then_flush"), |b| {
            b.iter(|| {
                for _ in 0..CAPACITY {
                    let (k, v) = next();
                    client.insert(k, v).expect("insert");
                }
                black_box(client.flush().expect("flush"))
            })
        });
        let mut ops = Vec::with_capacity(CAPACITY);
        g.bench_function(format!("send_batch_{CAPACITY}_then_flush"), |b| {
            b.iter(|| {
                ops.clear();
                ops.extend((0..CAPACITY).map(|_| {
                    let (k, v) = next();
                    Op::Insert(k, v)
                }));
                client.send_batch(&ops).expect("send_batch");
                black_box(client.flush().expect("flush"))
            })
        });
        g.finish();

        let samples = if quick { 20_000 } else { 200_000 };
        let ns = (0..samples)
            .map(|_| {
                let (k, v) = next();
                let start = Instant::now();
                client.insert_sync(k, v).expect("insert_sync");
                start.elapsed().as_nanos() as u64
            })
            .collect();
        // The same channel, now the node's: threads combine their inserts into it.
        let combiner = NodeCombiner::with_client(client);
        let span = Duration::from_millis(if quick { 400 } else { 2000 });
        let combined = [1u64, 2].map(|threads| {
            let start = Instant::now();
            let done: u64 = thread::scope(|t| {
                let workers: Vec<_> = (0..threads)
                    .map(|w| {
                        let c = combiner.clone();
                        t.spawn(move || {
                            settings.pin_thread(1).expect("BI_PIN");
                            let mut n = 0u64;
                            while start.elapsed() < span {
                                let k = (w << 40 | n) & (KEYS - 1);
                                c.insert_sync(k, n).expect("combined insert");
                                n += 1;
                            }
                            n
                        })
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().expect("worker")).sum()
            });
            done as f64 / start.elapsed().as_secs_f64()
        });
        stop.store(true, Ordering::Release);
        let totals = serving.join().expect("server thread").expect("server");
        println!(
            "delegate/{name}: server applied {} ops in {} batches (largest {})",
            totals.ops, totals.batches, totals.largest_batch
        );
        Measured {
            direct: percentiles(ns),
            combined,
        }
    })
}

fn main() {
    let settings = Settings::load("delegate");
    // This thread is the client, on node 1.
    settings.pin_thread(1).expect("BI_PIN");
    let quick = bi_kit::bench::quick();
    let mut c = bi_kit::bench::criterion(quick);
    // One call per structure: a shared tree or hash map plugs in here.
    let local = bench_structure(
        &settings,
        &mut c,
        quick,
        "local_btreemap",
        LocalBTree::default,
    );
    // Built after the stand-in's run, so its background passes do not disturb it.
    let tree = SharedTree::new(&settings);
    let shared = bench_structure(&settings, &mut c, quick, "bi_tree", || tree.writer());
    let results = [("local_btreemap", local), ("bi_tree", shared)];
    c.final_summary();

    println!("synchronous delegated insert, one client thread and one server thread, ns");
    println!("  structure            p50      p99    p99.9  (samples)");
    for (name, m) in &results {
        let p = &m.direct;
        println!(
            "  {name:<16} {:>7} {:>8} {:>8}  ({})",
            p.p50, p.p99, p.p999, p.samples
        );
    }
    println!("  target for the shared tree: p50 < 5000, p99 < 50000");
    println!("synchronous inserts through a node combiner, operations per second");
    println!("  structure          1 thread  2 threads");
    for (name, m) in &results {
        println!(
            "  {name:<16} {:>10.0} {:>10.0}",
            m.combined[0], m.combined[1]
        );
    }

    let mut findings = Findings::new("delegate", &settings);
    let us = |ns: u64| ns as f64 / 1000.0;
    for (name, m) in &results {
        let (what, p50, p99) = if *name == "bi_tree" {
            (
                "delegated BiTree insert",
                Some(Target::AtMost(5.0)),
                Some(Target::AtMost(50.0)),
            )
        } else {
            ("delegated local BTreeMap insert", None, None)
        };
        let p = &m.direct;
        findings.ratio(format!("{what} p50 (us)"), us(p.p50), p50);
        findings.ratio(format!("{what} p99 (us)"), us(p.p99), p99);
        findings.ratio(format!("{what} p99.9 (us)"), us(p.p999), None);
        for (threads, ops) in ["1 thread", "2 threads"].iter().zip(m.combined) {
            findings.ratio(
                format!("{what} through a node combiner, {threads} (M ops/s)"),
                ops / 1e6,
                None,
            );
        }
    }
    findings.write().expect("writing the findings");
}
