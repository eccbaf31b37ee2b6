//! PageRank time per superstep in the three modes at 1, 2 and 4 nodes, against plain
//! CSR pull loops on one core and on two.
//!
//! The question is what the engine's distribution costs. `stock` pays for messages from
//! masters to replicas; the Bounded Incoherence modes replace them with reads of the
//! master through the cache, plus write-back and invalidation in the barrier
//! (`bi-on-demand`) or in the background (`bi-periodic`). Two references run the same
//! PageRank with no engine and no partitioning at all:
//!
//! - `csr_reference` (`csr` in the tables, [`reference::pagerank`]): the
//!   single-threaded pull loop over an in-CSR, the floor one core reaches.
//! - `csr_pull_2threads` (`csr2`, [`reference::PullPageRank`] with 2 threads): the same
//!   loop with the vertex range split into two contiguous chunks, threads spawned once
//!   per run and a barrier between iterations, what a hand-written multicore loop
//!   reaches. The engine runs its nodes as threads of this process (the default
//!   placement), so on two cores this is the floor for 2 nodes and more.
//!
//! The engine cuts the graph by target ([`Partitioner::ByTarget`]): PageRank gathers over
//! in-edges, so every vertex folds its in-edges beside its master and only values cross
//! partitions, as in a pull loop split by vertex range. `BI_GRAPH_CUT=random` (or
//! `oblivious`, `grid`) measures PowerGraph's vertex cuts instead, where replicas also
//! send their masters partial sums.
//!
//! Two graphs, both drawn with seed 1 (the engine runs on the `Hardware` backend):
//!
//! - a Graph500 Kronecker graph (edge factor 16, repeats removed) of scale 18 (262,144
//!   vertices, ~3.8M edges), scale 16 in quick mode. `BI_GRAPH_SCALE=<n>` sets the scale
//!   in either mode (`BI_GRAPH_SCALE=20`: 1M vertices, ~16M edges);
//! - a uniform random graph `G(65536, 300000)`, the small, unskewed control.
//!
//! The machine settings are honoured ([`Settings`], printed first): `BI_NODES=k` measures
//! 1 and `k` nodes instead of 1, 2 and 4; partition `k`'s thread is pinned to node `k`'s
//! CPUs (`BI_PIN`) and faults the shared memory in on `BI_MEMBIND`'s NUMA nodes;
//! `BI_REGION` puts the shared region in a file or device; `BI_PERIOD` is the periodic
//! mode's pass. The references' threads are not pinned.
//!
//! `BI_BENCH_QUICK=1` (or `-- --quick`) also shortens the measurements. Each criterion
//! iteration is one superstep: a run of `n` supersteps reports its compute time (loading
//! and partitioning excluded). A reference's per-superstep time is the time of `n`
//! iterations minus that of zero (building its CSR for `csr_reference`; allocating and
//! spawning threads for `csr_pull_2threads`, whose CSR is built once beforehand), with
//! ten times as many iterations as an engine measurement. After criterion's groups, a
//! plain table per graph gives the median time per superstep and the ratios mode /
//! stock, mode / csr and mode / csr2.

use bi_graph::generate::{Kronecker, Uniform};
use bi_graph::reference::PullPageRank;
use bi_graph::{
    Backend, EdgeList, EngineConfig, Mode, PageRank, Partitioner, RunOptions, reference,
    run_detailed,
};
use bi_kit::bench::{Figure, Findings, Series, Settings, Target};
use criterion::{Criterion, Throughput};
use std::fmt::Write;
use std::hint::black_box;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const MODES: [Mode; 3] = [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic];
/// Threads of the multithreaded reference.
const PULL_THREADS: usize = 2;
/// A reference is timed over this many times the supersteps of an engine measurement,
/// so that what is left once its fixed costs are subtracted stays well above the
/// machine's noise.
const REFERENCE_BATCH: usize = 10;

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Stock => "stock",
        Mode::BiOnDemand => "bi-on-demand",
        Mode::BiPeriodic => "bi-periodic",
    }
}

/// The cut every engine run uses: `BI_GRAPH_CUT` (`by-target`, `random`, `oblivious`
/// or `grid`), by default `by-target`, the cut for a program that gathers over in-edges.
fn cut() -> Partitioner {
    match std::env::var("BI_GRAPH_CUT").as_deref() {
        Ok("by-target") | Err(_) => Partitioner::ByTarget,
        Ok("random") => Partitioner::Random,
        Ok("oblivious") => Partitioner::Oblivious,
        Ok("grid") => Partitioner::Grid,
        Ok(other) => {
            panic!("BI_GRAPH_CUT={other:?}: expected by-target, random, oblivious or grid")
        }
    }
}

/// The machine settings (`BI_*`), read once.
fn settings() -> &'static Settings {
    static SETTINGS: OnceLock<Settings> = OnceLock::new();
    SETTINGS.get_or_init(|| Settings::load("pagerank"))
}

/// Node counts measured: 1, 2 and 4, or 1 and `BI_NODES`.
fn node_counts() -> Vec<usize> {
    match settings().nodes {
        Some(n) if n > 1 => vec![1, n],
        Some(_) => vec![1],
        None => vec![1, 2, 4],
    }
}

fn config(nodes: usize, mode: Mode, supersteps: usize) -> EngineConfig {
    EngineConfig {
        nodes,
        partitioner: cut(),
        mode,
        backend: Backend::Hardware,
        seed: 1,
        max_iterations: supersteps,
        tolerance: None,
        // Partition k runs on node k's CPUs (`BI_PIN`) and faults its memory in on
        // `BI_MEMBIND`'s NUMA nodes.
        on_partition_start: Some(Arc::new(|p| {
            let s = settings();
            s.pin_thread(p).expect("BI_PIN");
            s.bind_thread_memory().expect("BI_MEMBIND");
        })),
        ..EngineConfig::default()
    }
}

/// The engine's options: `BI_PERIOD` for the periodic mode's pass, `BI_REGION` for the
/// shared region.
fn options() -> RunOptions {
    let defaults = RunOptions::default();
    RunOptions {
        quiescence_period: settings().period_or(defaults.quiescence_period),
        region_file: settings().region_file("pagerank"),
        ..defaults
    }
}

/// Compute time of `supersteps` supersteps of the engine.
fn engine_time(graph: &EdgeList, nodes: usize, mode: Mode, supersteps: usize) -> Duration {
    let program = PageRank::new(graph.num_vertices(), None);
    let run = run_detailed(
        &program,
        graph,
        &config(nodes, mode, supersteps),
        &options(),
    )
    .expect("pagerank runs");
    black_box(&run.run.values);
    run.run.stats.compute_time
}

/// Time of `iterations` iterations of `run` minus that of zero.
fn iterations_time(iterations: usize, run: impl Fn(usize) -> Vec<f64>) -> Duration {
    let timed = |n: usize| {
        let start = Instant::now();
        black_box(run(n));
        start.elapsed()
    };
    let fixed = timed(0);
    timed(iterations).saturating_sub(fixed)
}

/// Time of `iterations` iterations of the single-core CSR loop, its construction
/// excluded.
fn reference_time(graph: &EdgeList, iterations: usize) -> Duration {
    iterations_time(iterations, |n| reference::pagerank(graph, n, None))
}

/// Time of `iterations` iterations of the multithreaded pull loop, its buffers and
/// thread start excluded.
fn pull_time(pull: &PullPageRank, iterations: usize) -> Duration {
    iterations_time(iterations, |n| pull.run(n))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Median over `runs` of the time per superstep of `supersteps` supersteps.
fn per_superstep(runs: usize, supersteps: usize, time: impl Fn(usize) -> Duration) -> Duration {
    median(
        (0..runs)
            .map(|_| time(supersteps) / supersteps as u32)
            .collect(),
    )
}

/// Benches one graph: criterion's group `pagerank_superstep_{id}`, then the plain table,
/// returned for printing after criterion's summary; its figure and ratios go to
/// `findings`, the ratio to the 2-thread loop at 2 nodes against `csr2_target`.
fn bench_graph(
    c: &mut Criterion,
    id: &str,
    description: &str,
    graph: &EdgeList,
    quick: bool,
    csr2_target: Option<f64>,
    findings: &mut Findings,
) -> String {
    println!(
        "{description}: {} vertices, {} edges",
        graph.num_vertices(),
        graph.num_edges()
    );
    let pull = PullPageRank::new(graph, PULL_THREADS);
    let mut g = c.benchmark_group(format!("pagerank_superstep_{id}"));
    g.throughput(Throughput::Elements(graph.num_edges() as u64));
    for &nodes in &node_counts() {
        for mode in MODES {
            g.bench_function(format!("{}/{nodes}", mode_name(mode)), |b| {
                b.iter_custom(|n| engine_time(graph, nodes, mode, n as usize))
            });
        }
    }
    let batch = |time: Duration| (time / REFERENCE_BATCH as u32).max(Duration::from_nanos(1));
    g.bench_function("csr_reference", |b| {
        b.iter_custom(|n| batch(reference_time(graph, n as usize * REFERENCE_BATCH)))
    });
    g.bench_function(format!("csr_pull_{PULL_THREADS}threads"), |b| {
        b.iter_custom(|n| batch(pull_time(&pull, n as usize * REFERENCE_BATCH)))
    });
    g.finish();

    let (runs, supersteps) = if quick { (3, 5) } else { (5, 10) };
    let reference_steps = supersteps * REFERENCE_BATCH;
    let csr = per_superstep(runs, reference_steps, |k| reference_time(graph, k));
    let csr2 = per_superstep(runs, reference_steps, |k| pull_time(&pull, k));
    let mut table = String::new();
    let mut line = |text: String| writeln!(table, "{text}").expect("writing to a String");
    line(format!(
        "PageRank time per superstep, {description}, cut {:?} (median of {runs} runs of \
         {supersteps} supersteps, {reference_steps} for the references)",
        cut()
    ));
    line(format!("  {:<20} {:>12.3} ms", "csr (1 core)", ms(csr)));
    line(format!(
        "  {:<20} {:>12.3} ms   (csr / csr2 = {:.2})",
        format!("csr2 ({PULL_THREADS} threads)"),
        ms(csr2),
        ratio(csr, csr2)
    ));
    line(format!(
        "  {:<14} {:>5} {:>12} {:>10} {:>10} {:>10}",
        "mode", "nodes", "ms/step", "/ stock", "/ csr", "/ csr2"
    ));
    let mut series: Vec<Series> = MODES
        .iter()
        .map(|&mode| Series {
            name: mode_name(mode).into(),
            points: Vec::new(),
        })
        .collect();
    for &nodes in &node_counts() {
        let per_mode: Vec<Duration> = MODES
            .iter()
            .map(|&mode| per_superstep(runs, supersteps, |k| engine_time(graph, nodes, mode, k)))
            .collect();
        let stock = per_mode[0];
        let on_demand = per_mode[1];
        if nodes > 1 {
            findings.ratio(
                format!("PageRank bi-on-demand / stock, {nodes} nodes, {description}"),
                ratio(on_demand, stock),
                Some(Target::AtMost(1.0)),
            );
        }
        if nodes == 2 {
            findings.ratio(
                format!("PageRank bi-on-demand 2 nodes / 2-thread CSR loop, {description}"),
                ratio(on_demand, csr2),
                csr2_target.map(Target::AtMost),
            );
        }
        for (s, t) in series.iter_mut().zip(&per_mode) {
            s.points.push((nodes as f64, ms(*t)));
        }
        for (mode, t) in MODES.iter().zip(&per_mode) {
            line(format!(
                "  {:<14} {:>5} {:>12.3} {:>10.2} {:>10.2} {:>10.2}",
                mode_name(*mode),
                nodes,
                ms(*t),
                ratio(*t, stock),
                ratio(*t, csr),
                ratio(*t, csr2)
            ));
        }
    }
    let nodes = node_counts();
    for (name, t) in [("csr (1 core)", csr), ("csr2 (2 threads)", csr2)] {
        series.push(Series {
            name: name.into(),
            points: nodes.iter().map(|&n| (n as f64, ms(t))).collect(),
        });
    }
    findings.figure(Figure {
        id: "fig13".into(),
        title: format!("PageRank time per superstep, {description}"),
        x_label: "nodes".into(),
        y_label: "ms per superstep".into(),
        log_x: false,
        series,
    });
    table
}

/// The Kronecker scale: `BI_GRAPH_SCALE` when set, else 18 (16 in quick mode).
fn kronecker_scale(quick: bool) -> u32 {
    match std::env::var("BI_GRAPH_SCALE") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("BI_GRAPH_SCALE={s:?} is not a number")),
        Err(_) if quick => 16,
        Err(_) => 18,
    }
}

fn main() {
    let quick = bi_kit::bench::quick();
    let mut findings = Findings::new("pagerank", settings());
    let scale = kronecker_scale(quick);
    let kronecker = Kronecker::graph500(scale, 1)
        .generate()
        .unwrap_or_else(|e| panic!("Kronecker scale {scale}: {e}"));
    let uniform = Uniform::new(1 << 16, 300_000, 1)
        .generate()
        .expect("300,000 edges fit 65,536 vertices");

    let mut c = bi_kit::bench::criterion(quick).sample_size(10);
    c = if quick {
        c.warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(1))
    } else {
        c.warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(5))
    };
    let tables = [
        bench_graph(
            &mut c,
            &format!("scale{scale}"),
            &format!("Kronecker scale {scale}"),
            &kronecker,
            quick,
            // The target is set at scale 20 (`BI_GRAPH_SCALE=20`).
            (scale == 20).then_some(1.5),
            &mut findings,
        ),
        bench_graph(
            &mut c,
            "uniform64k",
            "uniform G(65536, 300000)",
            &uniform,
            quick,
            // A superstep's fixed costs (barrier, quiescence) against the loop's: see the
            // phases `bi-graph --phases` shows.
            Some(1.2),
            &mut findings,
        ),
    ];
    c.final_summary();
    for table in tables {
        println!("{table}");
    }
    findings.write().expect("writing the findings");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn ratio(a: Duration, b: Duration) -> f64 {
    if b.is_zero() {
        f64::NAN
    } else {
        a.as_secs_f64() / b.as_secs_f64()
    }
}
