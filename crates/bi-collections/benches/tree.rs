//! The shape of the Bonsai-tree table of the Bounded Incoherence evaluation: lookup and
//! update latency at 0%, 10% and 30% updates, for working sets of 1K, 64K and 1M nodes,
//! for `BiTree` (over the `Hardware` view: real cache instructions, a background pass
//! every millisecond on each node), `EpochBonsai` (the same algorithm, coherent, with
//! crossbeam-epoch), `RwLock<BTreeMap>` and `crossbeam-skiplist`.
//!
//! Each tree holds `n` keys (the even keys below `2n`); lookups pick a present key at
//! random (the table measures hits, as the paper's does). A miss is answered from the
//! cached version like a hit (`get`); `get_fresh` re-reads the root slot from memory
//! before it reports a key absent. The criterion group measures both misses separately
//! (`BiTree (absent)`, `BiTree (absent, fresh)`), and the absent-key table compares a
//! miss with a hit on one thread. Two threads: a measured reader thread doing lookups only, and an
//! updater thread whose operations are updates with the given probability (half inserts,
//! half removes of random keys) and lookups otherwise. Lookup latency is the median over
//! rounds of the mean per lookup; update latency is the mean per update (for `BiTree`
//! including its share of retiring and reclaiming, which the writer does by itself every
//! 64 replaced nodes).
//!
//! Scans: a range of 100 consecutive keys, alone on the measured thread (criterion group
//! `tree_range100_*` and the scan table), and a YCSB-E-like mix: the updater thread runs
//! 95% scans and 5% inserts of new keys while the measured thread scans, each scan 1 to
//! 100 keys long (uniformly). Every contestant copies the entries out into a `Vec`.
//!
//! `BI_BENCH_QUICK=1` (or `-- --quick`) shortens every measurement; `BI_TREE_SIZES=1K,64K`
//! restricts the working sets. The criterion group
//! measures single-threaded lookups with no updater; the table and the ratios
//! `BiTree / EpochBonsai` are printed at the end.
//!
//! Machine settings (`bi_kit::bench::Settings`): each working set's region is in
//! `BI_REGION` (file `tree-1K.bi`, `tree-64K.bi`, `tree-1M.bi` in a directory) and bound to
//! `BI_MEMBIND`; the pass period is `BI_PERIOD` (default 1 ms). Under `BI_PIN` the main
//! thread, the measured reader (criterion's and the table's, `BiTree` reading through node
//! 1), runs on node 1, and the updater thread (`BiTree`'s writer) on node 0, for every
//! contestant alike; building runs on node 0 and each node's pass thread on that node.
//! The bench always runs two nodes, one reader and one writer, so `BI_NODES` does not
//! apply. With `BI_REPORT_DIR` the ratios and the table's lookup latencies (figure
//! `table1`) are written to `tree.json`.

mod common;

use bi_alloc::NodeHeap;
use bi_collections::tree::{BiTree, EpochBonsai};
use bi_core::region::{Region, RegionConfig};
use bi_core::runtime::{DEFAULT_PASS_PERIOD, NodeRuntime};
use bi_kit::bench::{Figure, Findings, Series, Settings, Target};
use crossbeam_skiplist::SkipMap;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A key the tree holds (the even keys below `keys`), chosen by `r`.
fn present(r: u64, keys: u64) -> u64 {
    (r % (keys / 2)) * 2
}

/// The keys of a short scan: `n` present keys from the one `r` picks (a span of `2n`,
/// since the tree holds the even keys), inside the key space.
fn scan_span(r: u64, keys: u64, n: u64) -> std::ops::Range<u64> {
    let start = present(r, keys - 2 * n);
    start..start + 2 * n
}

/// A YCSB-E scan length: 1 to 100 keys, uniformly, drawn from `r`'s high bits.
fn scan_len(r: u64) -> u64 {
    1 + (r >> 40) % 100
}

/// The entries of `span` in a `RwLock<BTreeMap>`, copied out under the read lock.
fn btree_range(map: &RwLock<BTreeMap<u64, u64>>, span: std::ops::Range<u64>) -> Vec<(u64, u64)> {
    let map = map.read().expect("lock");
    map.range(span).map(|(k, v)| (*k, *v)).collect()
}

/// The entries of `span` in a `SkipMap`, copied out.
fn skip_range(map: &SkipMap<u64, u64>, span: std::ops::Range<u64>) -> Vec<(u64, u64)> {
    map.range(span).map(|e| (*e.key(), *e.value())).collect()
}

/// Median over `rounds` of the mean ns per call of `op`, called `ops` times a round on
/// this thread with a fresh random word each time.
fn time_per_op(rounds: usize, ops: usize, mut op: impl FnMut(u64) -> usize) -> f64 {
    let mut rng = XorShift(0x5DEE_CE66_D1CE_4E5B);
    let mut samples: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..ops {
                black_box(op(rng.next()));
            }
            start.elapsed().as_nanos() as f64 / ops as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[derive(Clone, Copy)]
struct Plan {
    rounds: usize,
    lookups: usize,
}

/// Runs the measured reader here and the updater on another thread (on node 0's CPUs);
/// returns (median ns per lookup, mean ns per update).
fn measure(
    settings: &Settings,
    plan: Plan,
    keys: u64,
    update_pct: u64,
    lookup: impl Fn(u64) -> bool,
    updater_lookup: impl Fn(u64) -> bool + Send,
    mut update: impl FnMut(u64, bool) + Send,
) -> (f64, f64) {
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let stop = &stop;
        let up = sc.spawn(move || {
            settings.pin_thread(0).expect("BI_PIN");
            let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
            let (mut spent, mut count) = (Duration::ZERO, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let r = rng.next();
                let k = r % keys;
                if (r >> 40) % 100 < update_pct {
                    let start = Instant::now();
                    update(k, (r >> 32) & 1 == 0);
                    spent += start.elapsed();
                    count += 1;
                } else {
                    black_box(updater_lookup(k));
                }
            }
            (spent, count)
        });
        let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
        let mut samples: Vec<f64> = (0..plan.rounds)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..plan.lookups {
                    black_box(lookup(present(rng.next(), keys)));
                }
                start.elapsed().as_nanos() as f64 / plan.lookups as f64
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        let (spent, count) = up.join().expect("updater");
        samples.sort_by(f64::total_cmp);
        let update_ns = if count == 0 {
            f64::NAN
        } else {
            spent.as_nanos() as f64 / count as f64
        };
        (samples[samples.len() / 2], update_ns)
    })
}

struct BiSetup {
    _region: Region,
    nodes: Vec<NodeRuntime<bi_core::mem::Hardware>>,
    tree: BiTree<u64, u64>,
}

fn bi_setup(settings: &Settings, n: u64, label: &str) -> BiSetup {
    let size = (n as usize * 128 * 8).max(64 << 20).next_power_of_two();
    let region = common::region(
        settings,
        &format!("tree-{label}"),
        RegionConfig::new(size)
            .with_nodes(2)
            .with_log_ring_entries(1 << 14),
    );
    let layout = *region.layout();
    let nodes = common::hardware_nodes(&region);
    let tree = BiTree::at(layout.root_entry(0).expect("root slot").offset);
    BiSetup {
        _region: region,
        nodes,
        tree,
    }
}

fn entries(n: u64) -> Vec<(u64, u64)> {
    (0..n).map(|i| (2 * i, i)).collect()
}

#[derive(Default, Clone, Copy)]
struct Row {
    lookup: [f64; 4],
    update: [f64; 4],
}

/// The scan figures of one working set, per contestant: a range of 100 keys alone on
/// one thread, and the YCSB-E-like mix (the scans of the measured thread while the other
/// runs 95% scans and 5% inserts, and the mean insert of that thread).
#[derive(Default, Clone, Copy)]
struct ScanRow {
    range100: [f64; 4],
    mix_scan: [f64; 4],
    mix_insert: [f64; 4],
    /// BiTree alone: a hit, a miss (`get`) and a fresh miss (`get_fresh`), ns.
    hit_miss: [f64; 3],
}

const NAMES: [&str; 4] = ["BiTree", "EpochBonsai", "RwLock<BTreeMap>", "SkipMap"];

/// The working sets: key count and label.
const SIZES: [(u64, &str); 3] = [(1 << 10, "1K"), (1 << 16, "64K"), (1 << 20, "1M")];

/// The target of the lookup ratio `BiTree / EpochBonsai` at `pct`% updates.
fn lookup_target(pct: u64) -> Option<f64> {
    match pct {
        0 => Some(1.2),
        10 => Some(1.3),
        _ => None,
    }
}

/// The key count of the working set labelled `label`.
fn working_set(label: &str) -> u64 {
    SIZES.iter().find(|(_, l)| *l == label).map_or(0, |s| s.0)
}

fn main() {
    let settings = Settings::load("tree");
    let quick = bi_kit::bench::quick();
    let plan = if quick {
        Plan {
            rounds: 5,
            lookups: 50_000,
        }
    } else {
        Plan {
            rounds: 11,
            lookups: 500_000,
        }
    };
    let only = std::env::var("BI_TREE_SIZES").ok();
    let sizes: Vec<(u64, &str)> = SIZES
        .into_iter()
        .filter(|(_, l)| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|x| x == *l))
        })
        .collect();
    let pcts = [0u64, 10, 30];
    let mut c = bi_kit::bench::criterion(quick);
    if quick {
        c = c
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_millis(700))
            .sample_size(10);
    }
    let mut table: Vec<(String, u64, Row)> = Vec::new();
    let mut scan_table: Vec<(String, ScanRow)> = Vec::new();
    // Scans cost about twenty lookups: fewer of them a round, enough that the mixing
    // thread makes some hundreds of inserts meanwhile.
    let scan_plan = Plan {
        rounds: plan.rounds,
        lookups: plan.lookups / 10,
    };

    for (n, label) in sizes {
        let keys = 2 * n;
        let data = entries(n);
        // Built on the writer's node; measured from node 1 (set below).
        settings.pin_thread(0).expect("BI_PIN");
        // BiTree over real memory.
        let build = Instant::now();
        let bi = bi_setup(&settings, n, label);
        let heap = NodeHeap::for_node(bi.nodes[0].layout(), 0).expect("heap");
        let mut w = bi
            .tree
            .write_handle(bi.nodes[0].writer(heap).expect("writer"))
            .expect("write handle");
        w.load_sorted(&data).expect("build");
        let bi_build = build.elapsed();
        let backgrounds = common::start_passes(
            &settings,
            &bi.nodes,
            settings.period_or(DEFAULT_PASS_PERIOD),
            0,
        );
        let build = Instant::now();
        let epoch = EpochBonsai::from_sorted(&data).expect("sorted");
        let epoch_build = build.elapsed();
        let btree = RwLock::new(data.iter().copied().collect::<BTreeMap<u64, u64>>());
        let skip = SkipMap::new();
        for &(k, v) in &data {
            skip.insert(k, v);
        }
        println!(
            "working set {label}: built BiTree in {:.2} s, EpochBonsai in {:.2} s",
            bi_build.as_secs_f64(),
            epoch_build.as_secs_f64()
        );
        // The measured reader: this thread, on node 1.
        settings.pin_thread(1).expect("BI_PIN");

        {
            let r = bi.tree.read_handle(&bi.nodes[1]).expect("reader");
            let mut g = c.benchmark_group(format!("tree_lookup_{label}"));
            let mut rng = XorShift(7);
            g.bench_function("BiTree", |b| {
                b.iter(|| black_box(r.get(&present(rng.next(), keys)).expect("lookup")))
            });
            g.bench_function("BiTree (absent)", |b| {
                b.iter(|| black_box(r.get(&(present(rng.next(), keys) + 1)).expect("lookup")))
            });
            g.bench_function("BiTree (absent, fresh)", |b| {
                b.iter(|| {
                    black_box(
                        r.get_fresh(&(present(rng.next(), keys) + 1))
                            .expect("lookup"),
                    )
                })
            });
            g.bench_function("EpochBonsai", |b| {
                b.iter(|| black_box(epoch.get(&present(rng.next(), keys))))
            });
            g.bench_function("RwLock<BTreeMap>", |b| {
                b.iter(|| {
                    black_box(
                        btree
                            .read()
                            .expect("lock")
                            .get(&present(rng.next(), keys))
                            .copied(),
                    )
                })
            });
            g.bench_function("SkipMap", |b| {
                b.iter(|| black_box(skip.get(&present(rng.next(), keys)).map(|e| *e.value())))
            });
            g.finish();

            let mut g = c.benchmark_group(format!("tree_range100_{label}"));
            let span = |r: u64| scan_span(r, keys, 100);
            g.bench_function("BiTree", |b| {
                b.iter(|| black_box(r.enter().range(span(rng.next())).expect("range").len()))
            });
            g.bench_function("EpochBonsai", |b| {
                b.iter(|| black_box(epoch.range(span(rng.next())).len()))
            });
            g.bench_function("RwLock<BTreeMap>", |b| {
                b.iter(|| black_box(btree_range(&btree, span(rng.next())).len()))
            });
            g.bench_function("SkipMap", |b| {
                b.iter(|| black_box(skip_range(&skip, span(rng.next())).len()))
            });
            g.finish();
        }

        // A range of 100 keys, alone on the measured thread (node 1's reader for BiTree),
        // and BiTree's absent keys against its present ones.
        let mut scans = ScanRow::default();
        {
            let r = bi.tree.read_handle(&bi.nodes[1]).expect("reader");
            let lookups = |k: u64| usize::from(r.get(&k).expect("lookup").is_some());
            scans.hit_miss = [
                time_per_op(plan.rounds, plan.lookups, |x| lookups(present(x, keys))),
                time_per_op(plan.rounds, plan.lookups, |x| lookups(present(x, keys) + 1)),
                time_per_op(plan.rounds, plan.lookups, |x| {
                    usize::from(
                        r.get_fresh(&(present(x, keys) + 1))
                            .expect("lookup")
                            .is_some(),
                    )
                }),
            ];
            let (rounds, ops) = (scan_plan.rounds, scan_plan.lookups);
            let span = |x: u64| scan_span(x, keys, 100);
            scans.range100 = [
                time_per_op(rounds, ops, |x| {
                    r.enter().range(span(x)).expect("range").len()
                }),
                time_per_op(rounds, ops, |x| epoch.range(span(x)).len()),
                time_per_op(rounds, ops, |x| btree_range(&btree, span(x)).len()),
                time_per_op(rounds, ops, |x| skip_range(&skip, span(x)).len()),
            ];
        }

        for pct in pcts {
            let mut row = Row::default();
            // BiTree: reader on node 1, updater (the writer) on node 0.
            {
                let r1 = bi.tree.read_handle(&bi.nodes[1]).expect("reader");
                let r0 = bi.tree.read_handle(&bi.nodes[0]).expect("reader");
                let w = &mut w;
                (row.lookup[0], row.update[0]) = measure(
                    &settings,
                    plan,
                    keys,
                    pct,
                    |k| r1.get(&k).expect("lookup").is_some(),
                    move |k| r0.get(&k).expect("lookup").is_some(),
                    |k, insert| {
                        if insert {
                            w.insert(k, k).expect("insert");
                        } else {
                            w.remove(&k).expect("remove");
                        }
                    },
                );
            }
            (row.lookup[1], row.update[1]) = measure(
                &settings,
                plan,
                keys,
                pct,
                |k| epoch.get(&k).is_some(),
                |k| epoch.get(&k).is_some(),
                |k, insert| {
                    if insert {
                        epoch.insert(k, k);
                    } else {
                        epoch.remove(&k);
                    }
                },
            );
            (row.lookup[2], row.update[2]) = measure(
                &settings,
                plan,
                keys,
                pct,
                |k| btree.read().expect("lock").contains_key(&k),
                |k| btree.read().expect("lock").contains_key(&k),
                |k, insert| {
                    let mut m = btree.write().expect("lock");
                    if insert {
                        m.insert(k, k);
                    } else {
                        m.remove(&k);
                    }
                },
            );
            (row.lookup[3], row.update[3]) = measure(
                &settings,
                plan,
                keys,
                pct,
                |k| skip.get(&k).is_some(),
                |k| skip.get(&k).is_some(),
                |k, insert| {
                    if insert {
                        skip.insert(k, k);
                    } else {
                        skip.remove(&k);
                    }
                },
            );
            table.push((label.to_string(), pct, row));
        }

        // The YCSB-E-like mix: the updater thread runs 95% scans and 5% inserts of new
        // (odd) keys, the measured thread scans; scans are 1 to 100 keys long.
        let mix_span = |k: u64| k..k + 2 * scan_len(k.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        {
            let r1 = bi.tree.read_handle(&bi.nodes[1]).expect("reader");
            let r0 = bi.tree.read_handle(&bi.nodes[0]).expect("reader");
            let w = &mut w;
            (scans.mix_scan[0], scans.mix_insert[0]) = measure(
                &settings,
                scan_plan,
                keys,
                5,
                |k| !r1.enter().range(mix_span(k)).expect("range").is_empty(),
                move |k| !r0.enter().range(mix_span(k)).expect("range").is_empty(),
                |k, _| {
                    w.insert(k | 1, k).expect("insert");
                },
            );
        }
        (scans.mix_scan[1], scans.mix_insert[1]) = measure(
            &settings,
            scan_plan,
            keys,
            5,
            |k| !epoch.range(mix_span(k)).is_empty(),
            |k| !epoch.range(mix_span(k)).is_empty(),
            |k, _| {
                epoch.insert(k | 1, k);
            },
        );
        (scans.mix_scan[2], scans.mix_insert[2]) = measure(
            &settings,
            scan_plan,
            keys,
            5,
            |k| !btree_range(&btree, mix_span(k)).is_empty(),
            |k| !btree_range(&btree, mix_span(k)).is_empty(),
            |k, _| {
                btree.write().expect("lock").insert(k | 1, k);
            },
        );
        (scans.mix_scan[3], scans.mix_insert[3]) = measure(
            &settings,
            scan_plan,
            keys,
            5,
            |k| !skip_range(&skip, mix_span(k)).is_empty(),
            |k| !skip_range(&skip, mix_span(k)).is_empty(),
            |k, _| {
                skip.insert(k | 1, k);
            },
        );
        scan_table.push((label.to_string(), scans));
        for b in backgrounds {
            b.stop();
        }
        w.check_invariants().expect("invariants after the run");
    }
    c.final_summary();

    println!(
        "\nBonsai tree table (2 threads: measured reader + updater), ns; lookups: median of {} rounds of {}",
        plan.rounds, plan.lookups
    );
    println!(
        "{:>4} {:>4}  {:>34}  {:>34}",
        "set",
        "upd",
        "lookup ns (Bi / Epoch / RwLock / Skip)",
        "update ns (Bi / Epoch / RwLock / Skip)"
    );
    for (label, pct, row) in &table {
        println!(
            "{label:>4} {pct:>3}%  {:>7.1} {:>7.1} {:>8.1} {:>8.1}   {:>8.0} {:>8.0} {:>8.0} {:>8.0}",
            row.lookup[0],
            row.lookup[1],
            row.lookup[2],
            row.lookup[3],
            row.update[0],
            row.update[1],
            row.update[2],
            row.update[3]
        );
    }
    println!("\nlookup latency ratio {} / {}:", NAMES[0], NAMES[1]);
    for (label, pct, row) in &table {
        let target = lookup_target(*pct).map_or(String::new(), |t| format!(" (target <= {t:.2})"));
        println!(
            "  {label:>4} {pct:>2}% updates: {:.2}{target}",
            row.lookup[0] / row.lookup[1]
        );
    }

    println!("\nupdate latency ratio {} / {}:", NAMES[0], NAMES[1]);
    for (label, pct, row) in table.iter().filter(|(_, pct, _)| *pct > 0) {
        let target = " (target <= 1.50)";
        println!(
            "  {label:>4} {pct:>2}% updates: {:.2}{target}",
            row.update[0] / row.update[1]
        );
    }

    println!(
        "\nScans (range of 100 keys alone; YCSB-E-like mix: scans of 1-100 keys beside a thread of 95% scans, 5% inserts), ns"
    );
    println!(
        "{:>4}  {:>36}  {:>36}  {:>36}",
        "set",
        "range 100 (Bi / Epoch / RwLock / Skip)",
        "mix scan (Bi / Epoch / RwLock / Skip)",
        "mix insert (Bi / Epoch / RwLock / Skip)"
    );
    for (label, row) in &scan_table {
        let four =
            |v: &[f64; 4]| format!("{:>8.0} {:>8.0} {:>8.0} {:>8.0}", v[0], v[1], v[2], v[3]);
        println!(
            "{label:>4}  {}  {}  {}",
            four(&row.range100),
            four(&row.mix_scan),
            four(&row.mix_insert)
        );
    }
    println!("\nscan ratio {} / {}:", NAMES[0], NAMES[1]);
    for (label, row) in &scan_table {
        println!(
            "  {label:>4} range of 100 keys: {:.2} (target <= 1.20); mix scan {:.2}, mix insert {:.2}",
            row.range100[0] / row.range100[1],
            row.mix_scan[0] / row.mix_scan[1],
            row.mix_insert[0] / row.mix_insert[1]
        );
    }

    println!("\nBiTree absent keys, one thread, ns (hit / miss / fresh miss) and miss / hit:");
    for (label, row) in &scan_table {
        let [hit, miss, fresh] = row.hit_miss;
        println!(
            "  {label:>4} {hit:>7.1} {miss:>7.1} {fresh:>7.1}   {:.2} (target <= 1.50), fresh {:.2}",
            miss / hit,
            fresh / hit
        );
    }

    let mut findings = Findings::new("tree", &settings);
    for (label, row) in &scan_table {
        let [hit, miss, fresh] = row.hit_miss;
        if (miss / hit).is_finite() {
            findings.ratio(
                format!("BiTree absent / present key lookup, {label}"),
                miss / hit,
                Some(Target::AtMost(1.5)),
            );
            findings.ratio(
                format!("BiTree fresh absent (get_fresh) / present key lookup, {label}"),
                fresh / hit,
                None,
            );
        }
    }
    for (label, row) in &scan_table {
        let figures = [
            ("range of 100 keys", row.range100, Some(Target::AtMost(1.2))),
            ("YCSB-E-like scan", row.mix_scan, None),
            ("YCSB-E-like insert", row.mix_insert, None),
        ];
        for (what, v, target) in figures {
            let ratio = v[0] / v[1];
            if ratio.is_finite() {
                findings.ratio(
                    format!("BiTree / EpochBonsai {what}, {label}"),
                    ratio,
                    target,
                );
            }
        }
    }
    for (label, pct, row) in &table {
        let target = lookup_target(*pct).map(Target::AtMost);
        let ratio = row.lookup[0] / row.lookup[1];
        if ratio.is_finite() {
            findings.ratio(
                format!("BiTree / EpochBonsai lookup, {pct}% updates, {label}"),
                ratio,
                target,
            );
        }
    }
    for (label, pct, row) in table.iter().filter(|(_, pct, _)| *pct > 0) {
        let ratio = row.update[0] / row.update[1];
        if ratio.is_finite() {
            findings.ratio(
                format!("BiTree / EpochBonsai update latency, {pct}% updates, {label}"),
                ratio,
                Some(Target::AtMost(1.5)),
            );
        }
    }
    // One curve per contestant and update percentage, over the working sets measured.
    let series = NAMES
        .iter()
        .enumerate()
        .flat_map(|(i, name)| {
            let table = &table;
            pcts.iter().map(move |&pct| Series {
                name: format!("{name} {pct}%"),
                points: table
                    .iter()
                    .filter(|(_, p, row)| *p == pct && row.lookup[i].is_finite())
                    .map(|(label, _, row)| (working_set(label) as f64, row.lookup[i]))
                    .collect(),
            })
        })
        .collect();
    findings.figure(Figure {
        id: "table1".into(),
        title: "Bonsai tree lookup latency (Table 1 shape)".into(),
        x_label: "working set (keys)".into(),
        y_label: "ns per lookup".into(),
        log_x: true,
        series,
    });
    findings.write().expect("writing the findings");
}
