//! PageRank time per superstep in the three modes at 1, 2 and 4 nodes, against a plain
//! single-machine CSR pull loop.
//!
//! The question is what the engine's distribution costs. `stock` pays for messages from
//! masters to replicas; the Bounded Incoherence modes replace them with reads of the
//! master through the cache, plus write-back and invalidation in the barrier
//! (`bi-on-demand`) or in the background (`bi-periodic`). The CSR loop
//! (`bi_graph::reference::pagerank`) is the floor a single core reaches with no
//! partitioning at all.
//!
//! The graph is a Graph500 Kronecker graph of scale 18 (262,144 vertices, ~3.8M edges
//! after removing repeats), seed 1, on the `Hardware` backend. `BI_BENCH_QUICK=1` (or
//! `-- --quick`) uses scale 16 and shorter measurements. Each criterion iteration is one
//! superstep: a run of `n` supersteps reports its compute time (loading and partitioning
//! excluded). The reference's per-superstep time is the time of `n` iterations minus
//! that of zero (building its CSR). After criterion's groups a plain table gives the
//! median time per superstep and the ratios mode / stock and mode / CSR.

use bi_graph::generate::Kronecker;
use bi_graph::{Backend, EdgeList, EngineConfig, Mode, Partitioner, pagerank, reference};
use criterion::{Criterion, Throughput};
use std::hint::black_box;
use std::time::{Duration, Instant};

const MODES: [Mode; 3] = [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic];
const NODES: [usize; 3] = [1, 2, 4];

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Stock => "stock",
        Mode::BiOnDemand => "bi-on-demand",
        Mode::BiPeriodic => "bi-periodic",
    }
}

fn config(nodes: usize, mode: Mode, supersteps: usize) -> EngineConfig {
    EngineConfig {
        nodes,
        partitioner: Partitioner::Random,
        mode,
        backend: Backend::Hardware,
        seed: 1,
        max_iterations: supersteps,
        tolerance: None,
        ..EngineConfig::default()
    }
}

/// Compute time of `supersteps` supersteps of the engine.
fn engine_time(graph: &EdgeList, nodes: usize, mode: Mode, supersteps: usize) -> Duration {
    let run = pagerank(graph, &config(nodes, mode, supersteps)).expect("pagerank runs");
    black_box(&run.values);
    run.stats.compute_time
}

/// Time of `iterations` iterations of the CSR loop, its construction excluded.
fn reference_time(graph: &EdgeList, iterations: usize) -> Duration {
    let timed = |n: usize| {
        let start = Instant::now();
        black_box(reference::pagerank(graph, n, None));
        start.elapsed()
    };
    let build = timed(0);
    timed(iterations).saturating_sub(build)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let quick = bi_kit::bench::quick();
    let scale = if quick { 16 } else { 18 };
    let graph = Kronecker::graph500(scale, 1)
        .generate()
        .expect("Graph500 parameters are valid");
    println!(
        "Kronecker scale {scale}: {} vertices, {} edges",
        graph.num_vertices(),
        graph.num_edges()
    );

    let mut c = Criterion::default().configure_from_args().sample_size(10);
    c = if quick {
        c.warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(1))
    } else {
        c.warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(5))
    };
    {
        let mut g = c.benchmark_group(format!("pagerank_superstep_scale{scale}"));
        g.throughput(Throughput::Elements(graph.num_edges() as u64));
        for nodes in NODES {
            for mode in MODES {
                g.bench_function(format!("{}/{nodes}", mode_name(mode)), |b| {
                    b.iter_custom(|n| engine_time(&graph, nodes, mode, n as usize))
                });
            }
        }
        g.bench_function("csr_reference", |b| {
            // Ten supersteps per sample keep the difference with the CSR build (which
            // `reference_time` subtracts) well above the machine's noise.
            b.iter_custom(|n| {
                (reference_time(&graph, n as usize * 10) / 10).max(Duration::from_nanos(1))
            })
        });
        g.finish();
    }
    c.final_summary();

    let (runs, supersteps) = if quick { (3, 5) } else { (5, 10) };
    let csr = median(
        (0..runs)
            .map(|_| reference_time(&graph, supersteps) / supersteps as u32)
            .collect(),
    );
    println!(
        "PageRank time per superstep, Kronecker scale {scale} (median of {runs} runs of {supersteps} supersteps)"
    );
    println!("  csr reference (1 core)      {:>10.3} ms", ms(csr));
    println!(
        "  {:<14} {:>5} {:>12} {:>10} {:>10}",
        "mode", "nodes", "ms/step", "/ stock", "/ csr"
    );
    for nodes in NODES {
        let per_mode: Vec<Duration> = MODES
            .iter()
            .map(|&mode| {
                median(
                    (0..runs)
                        .map(|_| engine_time(&graph, nodes, mode, supersteps) / supersteps as u32)
                        .collect(),
                )
            })
            .collect();
        let stock = per_mode[0];
        for (mode, t) in MODES.iter().zip(&per_mode) {
            println!(
                "  {:<14} {:>5} {:>12.3} {:>10.2} {:>10.2}",
                mode_name(*mode),
                nodes,
                ms(*t),
                ratio(*t, stock),
                ratio(*t, csr)
            );
        }
    }
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
