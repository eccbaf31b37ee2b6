//! Read throughput of `BiHashMap` against papaya, dashmap and left-right, two threads.
//!
//! `BiHashMap` runs over the `Hardware` view (real memory, real cache instructions) with
//! a background quiescence pass per node every millisecond. The map is split into four
//! partitions (one writer owns them all here), each sized up front at one bucket line per
//! key it will hold (a line holds three `u64 -> u64` entries), so loading never resizes.
//!
//! Workloads, each with two threads looking up keys that are all present, drawn at random
//! from the loaded set:
//! - `read_only`: both threads only read;
//! - `read_98`: thread 0 owns the single writer (BiHashMap and left-right have one writer
//!   per structure) and replaces a value on 4% of its operations, thread 1 only reads:
//!   98% reads overall. For papaya and dashmap thread 0 writes the same way. left-right
//!   publishes after every 16 writes (its writes are invisible until published).
//!
//! Every lookup opens and closes its own read section / guard. `BI_BENCH_QUICK=1` (or
//! `-- --quick`) shortens the run. After criterion's single-thread groups it prints the
//! two-thread figures (million lookups per second, median of several runs) and the
//! ratios against the targets: BiHashMap / left-right read-only, BiHashMap / papaya at
//! 98% reads.
//!
//! Then byte-string keys: a `BiHashMap<String, u64>` of 16-64-byte keys against papaya and
//! dashmap with `String` keys, two threads looking keys up by `&str` (read-only), and
//! the ratios (no target: the figure is stated).
//!
//! Profiling aids: `BI_MAP_KEYS=n` changes the key count (in-cache against in-memory),
//! `BI_MAP_ONLY=1` runs only BiHashMap's two-thread read-only figure (and writes no
//! findings).
//!
//! Machine settings (`bi_kit::bench::Settings`): the region is in `BI_REGION` (file
//! `map.bi` in a directory) and bound to `BI_MEMBIND`; the pass period is `BI_PERIOD`
//! (default 1 ms). Under `BI_PIN` the two measuring threads play the two nodes, for every
//! contestant alike: thread 0 (the writer in `read_98`) runs on node 0, thread 1 on node
//! 1, and each reads `BiHashMap` through its own node; the main thread loads on node 0
//! (the writer's) and runs criterion's one-thread groups on node 1 (reading through node
//! 1), and each node's pass thread runs on that node. The bench always runs two nodes,
//! one per thread, so `BI_NODES` does not apply. With `BI_REPORT_DIR` the ratios are
//! written to `map.json`.

mod common;

use bi_alloc::NodeHeap;
use bi_collections::map::{BiHashMap, MapConfig};
use bi_collections::{ApplyBatch, Op};
use bi_core::region::RegionConfig;
use bi_kit::bench::{Findings, Settings, Target};
use criterion::Throughput;
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn key(i: u64) -> u64 {
    splitmix(i)
}

/// A cheap per-thread stream of key indices.
struct Keys {
    state: u64,
    n: u64,
}

impl Keys {
    fn new(seed: u64, n: u64) -> Keys {
        Keys {
            state: splitmix(seed),
            n,
        }
    }
    #[inline]
    fn next_key(&mut self) -> u64 {
        key(self.next_index())
    }
    #[inline]
    fn next_index(&mut self) -> u64 {
        self.state = self
            .state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.state >> 32) * self.n) >> 32
    }
}

const PARTITIONS: usize = 4;
/// One write in this many operations of thread 0 in `read_98` (4%, so 2% overall).
const WRITE_EVERY: u64 = 25;

/// Runs `per_thread` operations on each of two threads, thread `t` on node `t`'s CPUs;
/// returns million ops per second.
fn two_threads(settings: &Settings, per_thread: u64, work: impl Fn(usize, u64) + Sync) -> f64 {
    let barrier = Barrier::new(3);
    let elapsed = std::thread::scope(|s| {
        for t in 0..2 {
            let (barrier, work) = (&barrier, &work);
            s.spawn(move || {
                settings.pin_thread(t).expect("BI_PIN");
                barrier.wait();
                work(t, per_thread);
                barrier.wait();
            });
        }
        barrier.wait();
        let start = Instant::now();
        barrier.wait();
        start.elapsed()
    });
    (2 * per_thread) as f64 / elapsed.as_secs_f64() / 1e6
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[derive(Clone, Default)]
struct LrMap(HashMap<u64, u64>);

impl left_right::Absorb<(u64, u64)> for LrMap {
    fn absorb_first(&mut self, op: &mut (u64, u64), _other: &Self) {
        self.0.insert(op.0, op.1);
    }
    fn sync_with(&mut self, first: &Self) {
        self.0.clone_from(&first.0);
    }
}

fn main() {
    let settings = Settings::load("map");
    let quick = bi_kit::bench::quick();
    // BI_MAP_KEYS overrides the key count (a profiling aid: in-cache vs. in-memory).
    let n: u64 = std::env::var("BI_MAP_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 20);
    let (runs, per_thread) = if quick {
        (3, 2_000_000)
    } else {
        (7, 10_000_000)
    };

    // --- BiHashMap over real memory -------------------------------------------------
    // Loaded on the writer's node; criterion reads from node 1 (set below).
    settings.pin_thread(0).expect("BI_PIN");
    let build = Instant::now();
    let region = common::region(
        &settings,
        "map",
        RegionConfig::new(1 << 29)
            .with_nodes(2)
            .with_readers_per_node(8)
            .with_log_ring_entries(1 << 16),
    );
    let layout = *region.layout();
    let nodes = common::hardware_nodes(&region);
    // A node's first pass in a fresh region finds no previous heartbeat and invalidates
    // the whole heap once; take that cost here, before anything is loaded or measured.
    for rt in &nodes {
        rt.quiesce().expect("first pass");
    }
    let _passes = common::start_passes(
        &settings,
        &nodes,
        settings.period_or(Duration::from_millis(1)),
        0,
    );
    let stride =
        layout.root_entry(1).expect("root").offset - layout.root_entry(0).expect("root").offset;
    let map = BiHashMap::<u64, u64>::partitioned(
        layout.root_entry(0).expect("root").offset,
        stride,
        PARTITIONS,
    )
    .expect("map");
    let heap = NodeHeap::for_node(&layout, 0).expect("heap");
    let arena = heap.arena();
    let writer = nodes[0].writer(heap).expect("writer");
    let buckets = (n as usize / PARTITIONS).next_power_of_two();
    let mut w = map
        .write_handle_with(writer, MapConfig::new().initial_buckets(buckets))
        .expect("write handle");
    let ops: Vec<Op<u64, u64>> = (0..n).map(|i| Op::Insert(key(i), i)).collect();
    let setup = build.elapsed();
    let load = Instant::now();
    for chunk in ops.chunks(8192) {
        w.apply_batch(chunk).expect("load");
    }
    let bi_load = load.elapsed();
    drop(ops);
    assert_eq!(w.len() as u64, n);
    let bi_build = build.elapsed();
    println!(
        "BiHashMap: setup {:.2} s (region, runtimes, first passes, write handle), inserting {n} keys {:.2} s",
        setup.as_secs_f64(),
        bi_load.as_secs_f64()
    );

    for rt in &nodes {
        let rec = rt.record().expect("record");
        println!(
            "node {}: {} passes, {} whole-heap invalidations after loading",
            rt.node(),
            rec.passes,
            rec.overflows
        );
    }

    if std::env::var_os("BI_MAP_ONLY").is_some() {
        // Profiling aid: BiHashMap's two-thread read-only figure alone.
        let r_only = |t: usize, ops: u64| {
            let r = map.read_handle(&nodes[t]).expect("reader");
            let mut keys = Keys::new(t as u64 + 10, n);
            for _ in 0..ops {
                black_box(r.get(&keys.next_key()).expect("get"));
            }
        };
        let runs: Vec<f64> = (0..runs)
            .map(|_| two_threads(&settings, per_thread, r_only))
            .collect();
        println!("BiHashMap read_only, two threads: {:.2} M/s", median(runs));
        for rt in &nodes {
            println!("node {}: {:?}", rt.node(), rt.record().expect("record"));
        }
        return;
    }

    // --- peers -----------------------------------------------------------------------
    let build = Instant::now();
    let papaya_map = papaya::HashMap::<u64, u64>::with_capacity(n as usize);
    {
        let m = papaya_map.pin();
        for i in 0..n {
            m.insert(key(i), i);
        }
    }
    let papaya_build = build.elapsed();
    let dash = dashmap::DashMap::<u64, u64>::with_capacity(n as usize);
    for i in 0..n {
        dash.insert(key(i), i);
    }
    let (mut lr_w, lr_r) = left_right::new_from_empty::<LrMap, (u64, u64)>(LrMap::default());
    for i in 0..n {
        lr_w.append((key(i), i));
    }
    lr_w.publish();
    println!(
        "node 0 arena {} MiB, live {} MiB",
        arena.len() >> 20,
        w.writer().heap().node_stats().heap.live >> 20
    );
    println!(
        "loaded {n} keys: BiHashMap {:.1} s ({} buckets in {PARTITIONS} partitions), papaya {:.1} s",
        bi_build.as_secs_f64(),
        w.capacity(),
        papaya_build.as_secs_f64()
    );

    // --- criterion: one thread, one lookup per iteration ------------------------------
    // This thread reads through node 1: it runs there.
    settings.pin_thread(1).expect("BI_PIN");
    let mut c = bi_kit::bench::criterion(quick);
    {
        let mut g = c.benchmark_group("map_get_one_thread");
        g.throughput(Throughput::Elements(1));
        let r = map.read_handle(&nodes[1]).expect("reader");
        let mut keys = Keys::new(1, n);
        g.bench_function("bihashmap", |b| {
            b.iter(|| black_box(r.get(&keys.next_key()).expect("get")))
        });
        let mut keys = Keys::new(1, n);
        g.bench_function("papaya", |b| {
            b.iter(|| black_box(papaya_map.pin().get(&keys.next_key()).copied()))
        });
        let mut keys = Keys::new(1, n);
        g.bench_function("dashmap", |b| {
            b.iter(|| black_box(dash.get(&keys.next_key()).map(|v| *v)))
        });
        let mut keys = Keys::new(1, n);
        g.bench_function("left_right", |b| {
            b.iter(|| {
                let k = keys.next_key();
                black_box(lr_r.enter().and_then(|m| m.0.get(&k).copied()))
            })
        });
        g.finish();
    }
    c.final_summary();

    // --- two threads ------------------------------------------------------------------
    let mut results: Vec<(&str, &str, f64)> = Vec::new();
    let bi_read_only = |t: usize, ops: u64| {
        let r = map.read_handle(&nodes[t]).expect("reader");
        let mut keys = Keys::new(t as u64 + 10, n);
        let mut found = 0u64;
        for _ in 0..ops {
            found += u64::from(r.get(&keys.next_key()).expect("get").is_some());
        }
        assert_eq!(found, ops);
    };
    let papaya_read_only = |t: usize, ops: u64| {
        let mut keys = Keys::new(t as u64 + 10, n);
        let mut found = 0u64;
        for _ in 0..ops {
            found += u64::from(papaya_map.pin().get(&keys.next_key()).is_some());
        }
        assert_eq!(found, ops);
    };
    let dash_read_only = |t: usize, ops: u64| {
        let mut keys = Keys::new(t as u64 + 10, n);
        let mut found = 0u64;
        for _ in 0..ops {
            found += u64::from(dash.get(&keys.next_key()).is_some());
        }
        assert_eq!(found, ops);
    };
    let lr_factory = lr_r.factory();
    let lr_read_only = |t: usize, ops: u64| {
        let r = lr_factory.handle();
        let mut keys = Keys::new(t as u64 + 10, n);
        let mut found = 0u64;
        for _ in 0..ops {
            let k = keys.next_key();
            found += u64::from(r.enter().is_some_and(|m| m.0.contains_key(&k)));
        }
        assert_eq!(found, ops);
    };
    // The contestants take turns, run by run, so that a slow spell of the machine
    // (other guests, frequency changes) falls on all of them, not on one.
    let interleaved = |contestants: &[&(dyn Fn(usize, u64) + Sync)]| -> Vec<f64> {
        let mut figures = vec![Vec::with_capacity(runs); contestants.len()];
        for _ in 0..runs {
            for (f, figure) in contestants.iter().zip(&mut figures) {
                figure.push(two_threads(&settings, per_thread, f));
            }
        }
        figures.into_iter().map(median).collect()
    };
    let names = ["BiHashMap", "papaya", "dashmap", "left-right"];
    let read_only = interleaved(&[
        &bi_read_only,
        &papaya_read_only,
        &dash_read_only,
        &lr_read_only,
    ]);
    for (name, mops) in names.iter().zip(read_only) {
        results.push(("read_only", name, mops));
    }

    // 98% reads: thread 0 holds the single writer.
    let bi_w = std::sync::Mutex::new(w);
    let bi_mixed = |t: usize, ops: u64| {
        let r = map.read_handle(&nodes[t]).expect("reader");
        let mut keys = Keys::new(t as u64 + 20, n);
        let mut guard = (t == 0).then(|| bi_w.lock().expect("writer"));
        for i in 0..ops {
            let k = keys.next_key();
            match guard.as_mut() {
                Some(w) if i % WRITE_EVERY == 0 => {
                    w.insert(k, i).expect("insert");
                    if i % (WRITE_EVERY * 256) == 0 {
                        w.reclaim().expect("reclaim");
                    }
                }
                _ => {
                    black_box(r.get(&k).expect("get"));
                }
            }
        }
    };
    let papaya_mixed = |t: usize, ops: u64| {
        let mut keys = Keys::new(t as u64 + 20, n);
        for i in 0..ops {
            let k = keys.next_key();
            if t == 0 && i % WRITE_EVERY == 0 {
                papaya_map.pin().insert(k, i);
            } else {
                black_box(papaya_map.pin().get(&k).copied());
            }
        }
    };
    let dash_mixed = |t: usize, ops: u64| {
        let mut keys = Keys::new(t as u64 + 20, n);
        for i in 0..ops {
            let k = keys.next_key();
            if t == 0 && i % WRITE_EVERY == 0 {
                dash.insert(k, i);
            } else {
                black_box(dash.get(&k).map(|v| *v));
            }
        }
    };
    let lr_w = std::sync::Mutex::new(lr_w);
    let lr_mixed = |t: usize, ops: u64| {
        let r = lr_factory.handle();
        let mut keys = Keys::new(t as u64 + 20, n);
        let mut guard = (t == 0).then(|| lr_w.lock().expect("writer"));
        let mut pending = 0;
        for i in 0..ops {
            let k = keys.next_key();
            match guard.as_mut() {
                Some(w) if i % WRITE_EVERY == 0 => {
                    w.append((k, i));
                    pending += 1;
                    if pending == 16 {
                        w.publish();
                        pending = 0;
                    }
                }
                _ => {
                    black_box(r.enter().and_then(|m| m.0.get(&k).copied()));
                }
            }
        }
        if let Some(w) = guard.as_mut() {
            w.publish();
        }
    };
    let read_98 = interleaved(&[&bi_mixed, &papaya_mixed, &dash_mixed, &lr_mixed]);
    for (name, mops) in names.iter().zip(read_98) {
        results.push(("read_98", name, mops));
    }

    println!(
        "two threads, {n} keys, million lookups per second (median of {runs} interleaved runs of {per_thread} ops per thread):"
    );
    for (wl, name, mops) in &results {
        println!("  {wl:10} {name:11} {mops:8.2}");
    }
    let get = |wl: &str, name: &str| {
        results
            .iter()
            .find(|(w, nm, _)| *w == wl && *nm == name)
            .map_or(f64::NAN, |r| r.2)
    };
    let mut findings = Findings::new("map", &settings);
    for (wl, peer, target, goal) in [
        (
            "read_only",
            "left-right",
            "target >= 1.00",
            Some(Target::AtLeast(1.0)),
        ),
        ("read_only", "papaya", "no target", None),
        (
            "read_98",
            "papaya",
            "target >= 1.00",
            Some(Target::AtLeast(1.0)),
        ),
        ("read_98", "left-right", "no target", None),
    ] {
        let ratio = get(wl, "BiHashMap") / get(wl, peer);
        println!("  ratio BiHashMap / {peer} ({wl}): {ratio:.2}  ({target})");
        let workload = if wl == "read_only" {
            "read-only"
        } else {
            "98% reads"
        };
        findings.ratio(
            format!("BiHashMap / {peer} read throughput, {workload}"),
            ratio,
            goal,
        );
    }
    let (with_setup, inserting) = (
        bi_build.as_secs_f64() / papaya_build.as_secs_f64(),
        bi_load.as_secs_f64() / papaya_build.as_secs_f64(),
    );
    println!(
        "  ratio BiHashMap / papaya, loading {n} keys: {with_setup:.2} with setup, {inserting:.2} inserting only  (target <= 2.00)"
    );
    let keys = key_count(n);
    findings.ratio(
        format!("BiHashMap / papaya, loading {keys} keys"),
        with_setup,
        Some(Target::AtMost(2.0)),
    );
    findings.ratio(
        format!("BiHashMap / papaya, loading {keys} keys, inserting only"),
        inserting,
        None,
    );

    // --- byte-string keys ---------------------------------------------------------------
    // Loaded on the writer's node, like the integer keys.
    settings.pin_thread(0).expect("BI_PIN");
    let w = bi_w.into_inner().expect("writer");
    let sn = (n / 4).max(1);
    let skeys: Vec<String> = (0..sn).map(string_key).collect();
    let smap = BiHashMap::<String, u64>::partitioned(
        layout.root_entry(PARTITIONS).expect("root").offset,
        stride,
        PARTITIONS,
    )
    .expect("string map");
    let sbuckets = (2 * sn as usize / PARTITIONS).next_power_of_two();
    let mut sw = smap
        .write_handle_with(w.into_writer(), MapConfig::new().initial_buckets(sbuckets))
        .expect("string write handle");
    let load = Instant::now();
    for chunk in skeys.chunks(8192) {
        let ops: Vec<Op<String, u64>> = chunk
            .iter()
            .enumerate()
            .map(|(i, k)| Op::Insert(k.clone(), i as u64))
            .collect();
        sw.apply_batch(&ops).expect("load strings");
    }
    let s_load = load.elapsed();
    let load = Instant::now();
    let spapaya = papaya::HashMap::<String, u64>::with_capacity(sn as usize);
    {
        let m = spapaya.pin();
        for (i, k) in skeys.iter().enumerate() {
            m.insert(k.clone(), i as u64);
        }
    }
    let p_load = load.elapsed();
    let sdash = dashmap::DashMap::<String, u64>::with_capacity(sn as usize);
    for (i, k) in skeys.iter().enumerate() {
        sdash.insert(k.clone(), i as u64);
    }
    let pick = |keys: &mut Keys| &skeys[keys.next_index() as usize];
    let bi_strings = |t: usize, ops: u64| {
        let r = smap.read_handle(&nodes[t]).expect("reader");
        let mut keys = Keys::new(t as u64 + 30, sn);
        let mut found = 0u64;
        for _ in 0..ops {
            found += u64::from(r.get(pick(&mut keys).as_str()).expect("get").is_some());
        }
        assert_eq!(found, ops);
    };
    let papaya_strings = |t: usize, ops: u64| {
        let mut keys = Keys::new(t as u64 + 30, sn);
        let mut found = 0u64;
        for _ in 0..ops {
            found += u64::from(spapaya.pin().get(pick(&mut keys).as_str()).is_some());
        }
        assert_eq!(found, ops);
    };
    let dash_strings = |t: usize, ops: u64| {
        let mut keys = Keys::new(t as u64 + 30, sn);
        let mut found = 0u64;
        for _ in 0..ops {
            found += u64::from(sdash.get(pick(&mut keys).as_str()).is_some());
        }
        assert_eq!(found, ops);
    };
    let strings = interleaved(&[&bi_strings, &papaya_strings, &dash_strings]);
    println!(
        "two threads, {sn} keys of 16-64 bytes looked up by &str, million lookups per second (loading: BiHashMap {:.2} s, papaya {:.2} s):",
        s_load.as_secs_f64(),
        p_load.as_secs_f64()
    );
    for (name, mops) in ["BiHashMap", "papaya", "dashmap"].iter().zip(&strings) {
        println!("  strings    {name:11} {mops:8.2}");
    }
    println!(
        "  ratio BiHashMap / papaya (string keys, read_only): {:.2}  (stated, no target)",
        strings[0] / strings[1]
    );
    println!(
        "  ratio BiHashMap / dashmap (string keys, read_only): {:.2}  (stated, no target)",
        strings[0] / strings[2]
    );
    findings.ratio(
        "BiHashMap / papaya read throughput, string keys, read-only",
        strings[0] / strings[1],
        None,
    );
    findings.ratio(
        "BiHashMap / dashmap read throughput, string keys, read-only",
        strings[0] / strings[2],
        None,
    );
    findings.write().expect("writing the findings");
}

/// A key count as the findings name it: `1M`, `64K`, or the number.
fn key_count(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{}K", n >> 10)
    } else {
        n.to_string()
    }
}

/// Key `i` of the string-key workload: 16 to 64 bytes of hex digits.
fn string_key(i: u64) -> String {
    let h = splitmix(i ^ 0x5157_0000);
    let len = 16 + (h % 49) as usize;
    let mut s = String::with_capacity(64);
    for k in 0..4 {
        s.push_str(&format!("{:016x}", splitmix(h.wrapping_add(k))));
    }
    s.truncate(len);
    s
}
