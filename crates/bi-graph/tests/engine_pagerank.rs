//! PageRank on the engine against a dense power iteration, in every mode, partitioner
//! and node count, on the hardware backend.

use bi_graph::{Backend, EdgeList, EngineConfig, Mode, Partitioner, pagerank, reference};
use rand::Rng;
use std::time::Duration;

const PARTITIONERS: [Partitioner; 4] = [
    Partitioner::Random,
    Partitioner::Oblivious,
    Partitioner::Grid,
    Partitioner::ByTarget,
];

/// A random directed graph on `n` vertices whose last few are isolated and whose
/// vertices `0..n/6` never have out-edges (dangling), with a skew towards low indices.
fn graph(n: u32, m: usize, seed: u64) -> EdgeList {
    let mut rng = bi_kit::rng(seed, "pagerank graph");
    let live = n - n / 8;
    let mut edges = Vec::with_capacity(m);
    while edges.len() < m {
        let u = rng.random_range(0..live);
        let v = rng.random_range(0..live).min(rng.random_range(0..live));
        if u >= n / 6 {
            edges.push((u, v));
        }
    }
    EdgeList {
        ids: (0..u64::from(n)).map(|i| i * 10 + 3).collect(),
        edges,
        weights: None,
    }
}

/// PageRank by power iteration over a dense adjacency matrix.
fn dense_pagerank(g: &EdgeList, iterations: usize) -> Vec<f64> {
    let n = g.num_vertices();
    let mut a = vec![vec![0.0f64; n]; n];
    let mut out = vec![0.0f64; n];
    for &(u, v) in &g.edges {
        a[u as usize][v as usize] += 1.0;
        out[u as usize] += 1.0;
    }
    let mut x = vec![1.0 / n as f64; n];
    for _ in 0..iterations {
        let dangling: f64 = (0..n).filter(|&u| out[u] == 0.0).map(|u| x[u]).sum();
        let mut y = vec![(0.85 * dangling + 0.15) / n as f64; n];
        for u in 0..n {
            if out[u] > 0.0 {
                for v in 0..n {
                    y[v] += 0.85 * x[u] * a[u][v] / out[u];
                }
            }
        }
        x = y;
    }
    x
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

fn config(nodes: usize, partitioner: Partitioner, mode: Mode, iterations: usize) -> EngineConfig {
    EngineConfig {
        nodes,
        partitioner,
        mode,
        backend: Backend::Hardware,
        seed: 11,
        max_iterations: iterations,
        tolerance: None,
        ..EngineConfig::default()
    }
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of threaded runs; too slow for Miri")]
fn matches_the_dense_reference_everywhere() {
    let size = if cfg!(miri) { 12 } else { 48 };
    let iterations = 30;
    for seed in [1, 2] {
        let g = graph(size, size as usize * 4, seed);
        let dense = dense_pagerank(&g, iterations);
        let plain = reference::pagerank(&g, iterations, None);
        assert!(max_diff(&dense, &plain) < 1e-12);
        assert!((dense.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        for partitioner in PARTITIONERS {
            for nodes in 1..=4 {
                for mode in [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic] {
                    let run = pagerank(&g, &config(nodes, partitioner, mode, iterations)).unwrap();
                    let d = max_diff(&run.values, &dense);
                    assert!(d < 1e-10, "{partitioner:?} {nodes} {mode:?}: off by {d}");
                    assert_eq!(run.stats.iterations, iterations);
                    assert!(run.stats.replication_factor >= 1.0);
                    assert!(run.stats.replication_factor <= nodes as f64);
                }
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of threaded runs; too slow for Miri")]
fn on_demand_is_bitwise_stock_at_every_iteration_count() {
    let g = graph(40, 160, 3);
    let top = if cfg!(miri) { 3 } else { 12 };
    for partitioner in PARTITIONERS {
        for nodes in [2, 3, 4] {
            for n in 1..=top {
                let stock = pagerank(&g, &config(nodes, partitioner, Mode::Stock, n)).unwrap();
                let bi = pagerank(&g, &config(nodes, partitioner, Mode::BiOnDemand, n)).unwrap();
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&stock.values),
                    bits(&bi.values),
                    "{partitioner:?}, {nodes} nodes, {n} iterations"
                );
                assert_eq!((stock.stats.iterations, bi.stats.iterations), (n, n));
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of threaded runs; too slow for Miri")]
fn modes_report_what_they_did() {
    let g = graph(40, 160, 4);
    let run = |mode| pagerank(&g, &config(3, Partitioner::Random, mode, 5)).unwrap();
    let stock = run(Mode::Stock);
    let bi = run(Mode::BiOnDemand);
    assert!(stock.stats.messages_sent > 0);
    assert_eq!(bi.stats.messages_sent, 0);
    assert!(bi.stats.lines_written_back > 0 && bi.stats.lines_invalidated > 0);
    assert_eq!(bi.stats.max_staleness, 0);
    assert_eq!(stock.stats.replication_factor, bi.stats.replication_factor);
    // One partition: nothing to tell anyone.
    let alone = pagerank(&g, &config(1, Partitioner::Random, Mode::Stock, 5)).unwrap();
    assert_eq!(alone.stats.messages_sent, 0);
    assert_eq!(alone.stats.replication_factor, 1.0);
}

/// The phases split a superstep: they lie inside it, the BI exchanges' write-backs,
/// waits and invalidations inside the two exchanges, and the stock mode, which sends
/// messages instead, spends nothing on quiescence. A random cut's replicas feed their
/// masters, so the partials phase has work.
#[test]
#[cfg_attr(miri, ignore = "threaded runs; too slow for Miri")]
fn phases_account_for_the_superstep() {
    let g = graph(400, 3000, 5);
    for mode in [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic] {
        let s = pagerank(&g, &config(2, Partitioner::Random, mode, 8))
            .unwrap()
            .stats;
        let p = s.phases;
        let phases = p.scatter + p.gather_apply + p.partials + p.values;
        assert!(phases <= s.time_per_iteration, "{mode:?}: {p:?} in {s:?}");
        assert!(
            p.gather_apply > Duration::ZERO && p.partials > Duration::ZERO,
            "{p:?}"
        );
        assert!(p.values > Duration::ZERO, "{p:?}");
        assert!(
            p.write_back + p.wait + p.invalidate <= p.partials + p.values,
            "{p:?}"
        );
        assert_eq!(p.scatter, Duration::ZERO, "PageRank signals no one");
        match mode {
            Mode::Stock => {
                assert_eq!(
                    p.write_back + p.wait + p.invalidate,
                    Duration::ZERO,
                    "{p:?}"
                )
            }
            Mode::BiOnDemand => assert!(
                p.write_back > Duration::ZERO && p.invalidate > Duration::ZERO,
                "{p:?}"
            ),
            // The background passes write back and invalidate: the phase ends only wait.
            Mode::BiPeriodic => assert!(p.wait > Duration::ZERO, "{p:?}"),
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of threaded runs; too slow for Miri")]
fn tolerance_stops_early_and_periodic_converges() {
    let g = graph(48, 200, 5);
    let fixed = reference::pagerank(&g, 1000, Some(1e-15));
    for mode in [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic] {
        for nodes in [1, 2, 4] {
            let mut cfg = config(nodes, Partitioner::Oblivious, mode, 500);
            cfg.tolerance = Some(1e-10);
            let run = pagerank(&g, &cfg).unwrap();
            assert!(run.stats.iterations < 500, "{mode:?} did not converge");
            let d = max_diff(&run.values, &fixed);
            assert!(d < 1e-9, "{mode:?} {nodes}: off by {d}");
            assert!((run.values.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of threaded runs; too slow for Miri")]
fn zero_iterations_and_empty_graphs() {
    let g = graph(16, 30, 6);
    let run = pagerank(&g, &config(2, Partitioner::Grid, Mode::BiOnDemand, 0)).unwrap();
    assert_eq!(run.values, vec![1.0 / 16.0; 16]);
    assert_eq!(run.stats.iterations, 0);
    let empty = EdgeList::default();
    let run = pagerank(&empty, &config(3, Partitioner::Random, Mode::Stock, 4)).unwrap();
    assert!(run.values.is_empty());
    let bad = config(0, Partitioner::Random, Mode::Stock, 4);
    assert!(pagerank(&g, &bad).is_err());
}

#[test]
#[cfg_attr(miri, ignore = "maps a file")]
fn a_region_file_holds_the_threads_shared_memory() {
    use bi_graph::{PageRank, RunOptions, run_detailed};
    let g = graph(48, 200, 7);
    let program = PageRank::new(g.num_vertices(), None);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pagerank.bi");
    std::fs::write(&path, b"whatever was here").unwrap();
    for mode in [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic] {
        let cfg = config(3, Partitioner::ByTarget, mode, 10);
        let anonymous = run_detailed(&program, &g, &cfg, &RunOptions::default()).unwrap();
        let options = RunOptions {
            region_file: Some(path.clone()),
            ..RunOptions::default()
        };
        let filed = run_detailed(&program, &g, &cfg, &options).unwrap();
        if mode != Mode::BiPeriodic {
            assert_eq!(filed.run.values, anonymous.run.values, "{mode:?}");
        }
        // The file was replaced by a region.
        assert!(bi_core::region::Region::open(&path).is_ok(), "{mode:?}");
    }
}
