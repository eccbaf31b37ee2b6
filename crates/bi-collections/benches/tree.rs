//! The shape of the Bonsai-tree table of the Bounded Incoherence evaluation: lookup and
//! update latency at 0%, 10% and 30% updates, for working sets of 1K, 64K and 1M nodes,
//! for `BiTree` (over the `Hardware` view: real cache instructions, a background pass
//! every millisecond on each node), `EpochBonsai` (the same algorithm, coherent, with
//! crossbeam-epoch), `RwLock<BTreeMap>` and `crossbeam-skiplist`.
//!
//! Each tree holds `n` keys (the even keys below `2n`); lookups pick a present key at
//! random (the table measures hits, as the paper's does). A miss costs more on `BiTree`
//! by design: lazy invalidation re-reads the root slot from memory before it reports a
//! key absent; the criterion group measures that path separately (`BiTree (absent)`). Two threads: a measured reader thread doing lookups only, and an
//! updater thread whose operations are updates with the given probability (half inserts,
//! half removes of random keys) and lookups otherwise. Lookup latency is the median over
//! rounds of the mean per lookup; update latency is the mean per update (for `BiTree`
//! including its share of retiring and reclaiming, which the writer does by itself every
//! 64 replaced nodes).
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

const NAMES: [&str; 4] = ["BiTree", "EpochBonsai", "RwLock<BTreeMap>", "SkipMap"];

/// The working sets: key count and label.
const SIZES: [(u64, &str); 3] = [(1 << 10, "1K"), (1 << 16, "64K"), (1 << 20, "1M")];

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
        let target = match pct {
            0 => " (target <= 1.05)",
            10 => " (target <= 1.20)",
            _ => "",
        };
        println!(
            "  {label:>4} {pct:>2}% updates: {:.2}{target}",
            row.lookup[0] / row.lookup[1]
        );
    }

    println!("\nupdate latency ratio {} / {}:", NAMES[0], NAMES[1]);
    for (label, pct, row) in table.iter().filter(|(_, pct, _)| *pct > 0) {
        let target = if *pct == 10 { " (target <= 1.50)" } else { "" };
        println!(
            "  {label:>4} {pct:>2}% updates: {:.2}{target}",
            row.update[0] / row.update[1]
        );
    }

    let mut findings = Findings::new("tree", &settings);
    for (label, pct, row) in &table {
        let target = match pct {
            0 => Some(Target::AtMost(1.2)),
            10 => Some(Target::AtMost(1.3)),
            _ => None,
        };
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
