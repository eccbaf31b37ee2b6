//! The engine on emulated non-coherent nodes with adversarial eviction and prefetch: the
//! oracle must count no reuse hazard and no lost write in any mode, and no stale read in
//! the on-demand mode, whose results must equal the hardware backend's bit for bit.

use bi_graph::{
    Backend, EdgeList, EngineConfig, Mode, PageRank, Partitioner, RunOptions, Sssp, Wcc, pagerank,
    reference, run_detailed,
};
use std::time::Duration;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u32) -> u32 {
        (self.next() % u64::from(n)) as u32
    }
}

fn graph(n: u32, m: usize, seed: u64) -> EdgeList {
    let mut rng = Rng(seed);
    let live = n - 2; // two isolated vertices
    let edges = (0..m)
        .map(|_| (rng.below(live), rng.below(live).min(rng.below(live))))
        .filter(|&(u, _)| u % 5 != 0) // multiples of 5 dangle
        .collect();
    EdgeList {
        ids: (0..u64::from(n)).collect(),
        edges,
        weights: None,
    }
}

fn config(nodes: usize, partitioner: Partitioner, mode: Mode, seed: u64) -> EngineConfig {
    EngineConfig {
        nodes,
        partitioner,
        mode,
        backend: Backend::Emulated { seed },
        seed: 9,
        max_iterations: 10,
        tolerance: None,
        ..EngineConfig::default()
    }
}

fn adversarial() -> RunOptions {
    RunOptions {
        quiescence_period: Duration::from_micros(200),
        channel_capacity: 8,
        eviction_rate: 0.2,
        prefetch_rate: 0.2,
        cache_lines: 16,
        ..RunOptions::default()
    }
}

const SEEDS: [u64; 3] = [1, 7, 42];

#[test]
#[cfg_attr(miri, ignore = "hundreds of threaded runs; too slow for Miri")]
fn on_demand_pagerank_reads_nothing_stale_and_matches_hardware() {
    let g = graph(if cfg!(miri) { 10 } else { 30 }, 100, 1);
    for partitioner in [
        Partitioner::Random,
        Partitioner::Oblivious,
        Partitioner::Grid,
        Partitioner::ByTarget,
    ] {
        for nodes in [2, 3, 4] {
            let mut hw = config(nodes, partitioner, Mode::BiOnDemand, 0);
            hw.backend = Backend::Hardware;
            let expected = pagerank(&g, &hw).unwrap().values;
            for seed in SEEDS {
                let cfg = config(nodes, partitioner, Mode::BiOnDemand, seed);
                let program = PageRank::new(g.num_vertices(), None);
                let run = run_detailed(&program, &g, &cfg, &adversarial()).unwrap();
                let emu = run.emulator.unwrap();
                assert_eq!(emu.stale_reads, 0, "{partitioner:?} {nodes} {seed}: {emu}");
                assert_eq!(emu.reuse_hazards, 0);
                assert_eq!(emu.lost_writes, 0);
                assert!(emu.evictions > 0 && emu.prefetches > 0);
                // Same arithmetic in the same order: the same bits as on hardware.
                let ranks = pagerank(&g, &cfg).unwrap().values;
                assert_eq!(ranks, expected);
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of threaded runs; too slow for Miri")]
fn stock_pagerank_over_emulated_channels_matches_hardware() {
    let g = graph(24, 80, 2);
    for nodes in [2, 4] {
        let mut hw = config(nodes, Partitioner::Random, Mode::Stock, 0);
        hw.backend = Backend::Hardware;
        let expected = pagerank(&g, &hw).unwrap();
        for seed in SEEDS {
            let cfg = config(nodes, Partitioner::Random, Mode::Stock, seed);
            let program = PageRank::new(g.num_vertices(), None);
            let run = run_detailed(&program, &g, &cfg, &adversarial()).unwrap();
            let emu = run.emulator.unwrap();
            assert_eq!((emu.reuse_hazards, emu.lost_writes), (0, 0));
            assert_eq!(run.run.stats.messages_sent, expected.stats.messages_sent);
            let ranks: Vec<f64> = pagerank(&g, &cfg).unwrap().values;
            assert_eq!(ranks, expected.values);
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of threaded runs; too slow for Miri")]
fn periodic_pagerank_converges_despite_staleness() {
    let g = graph(30, 110, 3);
    let fixed = reference::pagerank(&g, 1000, Some(1e-15));
    let mut stale_seen = 0;
    let mut max_staleness = 0;
    for nodes in [2, 3] {
        for seed in SEEDS {
            let mut cfg = config(nodes, Partitioner::Oblivious, Mode::BiPeriodic, seed);
            cfg.measure_staleness = true;
            cfg.tolerance = Some(1e-10);
            cfg.max_iterations = 2000;
            let program = PageRank::new(g.num_vertices(), cfg.tolerance);
            let run = run_detailed(&program, &g, &cfg, &adversarial()).unwrap();
            let emu = run.emulator.unwrap();
            assert_eq!((emu.reuse_hazards, emu.lost_writes), (0, 0));
            stale_seen += emu.stale_reads;
            let stats = &run.run.stats;
            assert!(stats.iterations < 2000);
            assert!(stats.max_staleness <= stats.iterations as u64);
            max_staleness = max_staleness.max(stats.max_staleness);
            // Values are shares; compare as ranks.
            let ranks = reference_ranks(&g, &run.run.values);
            let d = ranks
                .iter()
                .zip(&fixed)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(d < 1e-9, "{nodes} {seed}: off by {d} ({stats:?})");
        }
    }
    // With small caches and no quiescence in the barrier, stale data must show up.
    assert!(stale_seen > 0);
    // ... and replicas read values from earlier supersteps.
    assert!(max_staleness > 0);
}

fn reference_ranks(g: &EdgeList, shares: &[f64]) -> Vec<f64> {
    let mut out = vec![0u32; g.num_vertices()];
    for &(u, _) in &g.edges {
        out[u as usize] += 1;
    }
    shares
        .iter()
        .zip(out)
        .map(|(&s, d)| if d == 0 { s } else { s * f64::from(d) })
        .collect()
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of threaded runs; too slow for Miri")]
fn components_and_paths_are_exact_in_every_mode() {
    let g = graph(30, 45, 4);
    let labels = reference::wcc(&g);
    let dist = reference::sssp(&g, 3);
    for mode in [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic] {
        for seed in SEEDS {
            let mut cfg = config(3, Partitioner::Grid, mode, seed);
            cfg.max_iterations = 100;
            let w = run_detailed(&Wcc, &g, &cfg, &adversarial()).unwrap();
            assert_eq!(w.run.values, labels, "{mode:?} {seed}");
            let s = run_detailed(&Sssp { source: 3 }, &g, &cfg, &adversarial()).unwrap();
            assert_eq!(s.run.values, dist, "{mode:?} {seed}");
            for emu in [w.emulator.unwrap(), s.emulator.unwrap()] {
                assert_eq!((emu.reuse_hazards, emu.lost_writes), (0, 0));
                if mode == Mode::BiOnDemand {
                    assert_eq!(emu.stale_reads, 0);
                }
            }
        }
    }
}

#[test]
fn a_tiny_graph_in_every_mode() {
    // Small enough for Miri: every mode once, on two emulated nodes.
    let g = graph(8, 14, 5);
    let expected = reference::pagerank(&g, 2, None);
    for mode in [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic] {
        let mut cfg = config(2, Partitioner::Random, mode, 1);
        cfg.max_iterations = 2;
        let run = run_detailed(&PageRank::new(8, None), &g, &cfg, &adversarial()).unwrap();
        let emu = run.emulator.unwrap();
        assert_eq!((emu.reuse_hazards, emu.lost_writes), (0, 0));
        if mode != Mode::BiPeriodic {
            let ranks = reference_ranks(&g, &run.run.values);
            let d = ranks
                .iter()
                .zip(&expected)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(d < 1e-12, "{mode:?}: {d}");
        }
    }
}

#[test]
fn an_impossible_emulator_is_its_own_error() {
    let g = graph(10, 20, 3);
    let cfg = config(2, Partitioner::Random, Mode::BiOnDemand, 1);
    let options = RunOptions {
        eviction_rate: 2.0, // a probability above one
        ..adversarial()
    };
    let program = PageRank::new(g.num_vertices(), None);
    let err = run_detailed(&program, &g, &cfg, &options).unwrap_err();
    assert!(matches!(err, bi_graph::GraphError::Emulator(_)), "{err:?}");
    assert!(err.to_string().starts_with("emulator: "), "{err}");
}

/// The periodic mode's passes drop what the others wrote since: with caches that keep
/// every line and passes far more often than supersteps, no replica reads a value half
/// the run old. (Without the written-line log's watches, or with the log read through
/// the cache, every replica keeps the values it first read: catalog row
/// `written_lines_left_cached`.)
#[test]
#[cfg_attr(miri, ignore = "threaded emulated runs; too slow for Miri")]
fn periodic_passes_drop_what_the_others_wrote_since() {
    const SUPERSTEPS: usize = 40;
    let graph = bi_graph::generate::Uniform::new(2000, 16_000, 3)
        .generate()
        .unwrap();
    for nodes in [2, 3] {
        let config = EngineConfig {
            nodes,
            partitioner: Partitioner::Random,
            mode: Mode::BiPeriodic,
            backend: Backend::Emulated { seed: 3 },
            max_iterations: SUPERSTEPS,
            tolerance: None,
            measure_staleness: true,
            ..EngineConfig::default()
        };
        let options = RunOptions {
            quiescence_period: std::time::Duration::from_micros(50),
            eviction_rate: 0.0,
            prefetch_rate: 0.0,
            cache_lines: 4096,
            ..RunOptions::default()
        };
        let program = PageRank::new(graph.num_vertices(), None);
        let run = run_detailed(&program, &graph, &config, &options).unwrap();
        let stale = run.run.stats.max_staleness;
        assert!(
            stale < (SUPERSTEPS / 2) as u64,
            "{nodes} nodes: {stale} supersteps stale"
        );
    }
}
