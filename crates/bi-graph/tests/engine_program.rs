//! A user-written vertex program with two-word data, the observer, and argument errors.

use bi_graph::{
    Backend, EdgeDirection, EdgeList, EngineConfig, Mode, Observer, Partitioner, VertexInfo,
    VertexProgram, run,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts walks of length `t` ending at each vertex, and the superstep, in two words.
struct Walks;

impl VertexProgram for Walks {
    type Data = [f64; 2];
    type Gather = f64;
    type Aggregate = f64;
    fn gather_direction(&self) -> EdgeDirection {
        EdgeDirection::In
    }
    fn scatter_direction(&self) -> EdgeDirection {
        EdgeDirection::None
    }
    fn init(&self, v: &VertexInfo) -> [f64; 2] {
        [1.0, f64::from(v.id)]
    }
    fn always_active(&self) -> bool {
        true
    }
    fn zero(&self) -> f64 {
        0.0
    }
    fn gather(&self, weight: f64, n: &[f64; 2]) -> f64 {
        n[0] * weight
    }
    fn sum(&self, a: f64, b: f64) -> f64 {
        a + b
    }
    fn apply(&self, _v: &VertexInfo, d: &[f64; 2], total: f64, _g: &f64) -> [f64; 2] {
        [total, d[1] + 1.0]
    }
    fn scatter(&self, _w: f64, _d: &[f64; 2], _n: &[f64; 2]) -> bool {
        false
    }
    fn aggregate_zero(&self) -> f64 {
        0.0
    }
    fn aggregate(&self, _v: &VertexInfo, _old: &[f64; 2], new: &[f64; 2]) -> f64 {
        new[0]
    }
    fn combine(&self, a: f64, b: f64) -> f64 {
        a + b
    }
}

fn graph() -> EdgeList {
    let edges = vec![(0, 1), (1, 2), (2, 0), (0, 2), (3, 2), (2, 4), (4, 4)];
    EdgeList {
        ids: (0..6).collect(),
        weights: Some(vec![1.0, 2.0, 1.0, 1.0, 3.0, 1.0, 1.0]),
        edges,
    }
}

fn walks(g: &EdgeList, steps: usize) -> Vec<f64> {
    let mut x = vec![1.0; g.num_vertices()];
    for _ in 0..steps {
        let mut y = vec![0.0; x.len()];
        for (e, &(u, v)) in g.edges.iter().enumerate() {
            y[v as usize] += x[u as usize] * g.weight(e);
        }
        x = y;
    }
    x
}

#[test]
#[cfg_attr(miri, ignore = "many threaded runs; the emulated tests cover Miri")]
fn two_word_data_in_every_mode_and_backend() {
    let g = graph();
    let expected = walks(&g, 4);
    for mode in [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic] {
        for backend in [Backend::Hardware, Backend::Emulated { seed: 3 }] {
            for nodes in 1..=4 {
                let cfg = EngineConfig {
                    nodes,
                    mode,
                    backend,
                    partitioner: Partitioner::Grid,
                    max_iterations: 4,
                    ..EngineConfig::default()
                };
                let r = run(&Walks, &g, &cfg).unwrap();
                let got: Vec<f64> = r.values.iter().map(|d| d[0]).collect();
                if mode != Mode::BiPeriodic {
                    assert_eq!(got, expected, "{mode:?} {backend:?} {nodes}");
                }
                for (v, d) in r.values.iter().enumerate() {
                    assert_eq!(d[1], v as f64 + 4.0);
                }
            }
        }
    }
}

#[derive(Default)]
struct Progress {
    started: AtomicU64,
    advanced: AtomicU64,
    finished: AtomicU64,
}

impl Observer for Progress {
    fn start(&self, _phase: &str, total: u64) {
        self.started.store(total, Ordering::SeqCst);
    }
    fn advance(&self, n: u64) {
        self.advanced.fetch_add(n, Ordering::SeqCst);
    }
    fn finish(&self) {
        self.finished.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn the_observer_sees_every_superstep() {
    let progress = Arc::new(Progress::default());
    let cfg = EngineConfig {
        nodes: 2,
        max_iterations: 7,
        observer: Some(progress.clone()),
        ..EngineConfig::default()
    };
    let r = run(&Walks, &graph(), &cfg).unwrap();
    assert_eq!(r.stats.iterations, 7);
    assert_eq!(progress.started.load(Ordering::SeqCst), 7);
    assert_eq!(progress.advanced.load(Ordering::SeqCst), 7);
    assert_eq!(progress.finished.load(Ordering::SeqCst), 1);
}

/// Data too large for a slot.
struct Oversized;

impl VertexProgram for Oversized {
    type Data = [u64; 3];
    type Gather = u64;
    type Aggregate = u64;
    fn gather_direction(&self) -> EdgeDirection {
        EdgeDirection::In
    }
    fn scatter_direction(&self) -> EdgeDirection {
        EdgeDirection::None
    }
    fn init(&self, _v: &VertexInfo) -> [u64; 3] {
        [0; 3]
    }
    fn zero(&self) -> u64 {
        0
    }
    fn gather(&self, _w: f64, _n: &[u64; 3]) -> u64 {
        0
    }
    fn sum(&self, a: u64, _b: u64) -> u64 {
        a
    }
    fn apply(&self, _v: &VertexInfo, d: &[u64; 3], _t: u64, _g: &u64) -> [u64; 3] {
        *d
    }
    fn scatter(&self, _w: f64, _d: &[u64; 3], _n: &[u64; 3]) -> bool {
        false
    }
    fn aggregate_zero(&self) -> u64 {
        0
    }
    fn aggregate(&self, _v: &VertexInfo, _o: &[u64; 3], _n: &[u64; 3]) -> u64 {
        0
    }
    fn combine(&self, a: u64, _b: u64) -> u64 {
        a
    }
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    let g = graph();
    assert!(run(&Oversized, &g, &EngineConfig::default()).is_err());
    for nodes in [0, 65] {
        let cfg = EngineConfig {
            nodes,
            ..EngineConfig::default()
        };
        assert!(run(&Walks, &g, &cfg).is_err());
    }
    let mut bad = graph();
    bad.edges.push((0, 6));
    bad.weights.as_mut().unwrap().push(1.0);
    assert!(run(&Walks, &bad, &EngineConfig::default()).is_err());
}
