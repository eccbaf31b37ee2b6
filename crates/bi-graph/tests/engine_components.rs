//! WCC and SSSP on the engine against union-find and Dijkstra/BFS written here.

use bi_graph::{Backend, EdgeList, EngineConfig, Mode, Partitioner, reference, sssp, wcc};
use std::collections::VecDeque;

const PARTITIONERS: [Partitioner; 4] = [
    Partitioner::Random,
    Partitioner::Oblivious,
    Partitioner::Grid,
    Partitioner::ByTarget,
];
const MODES: [Mode; 3] = [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic];

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

/// Several components: a long path (diameter), random clusters, isolated vertices.
fn graph(seed: u64, weighted: bool) -> EdgeList {
    let mut rng = Rng(seed);
    let mut edges = Vec::new();
    // A path 0 -> 1 -> ... -> 11 written backwards in places.
    for i in 0..11u32 {
        edges.push(if i % 3 == 0 { (i + 1, i) } else { (i, i + 1) });
    }
    // Two random clusters on 12..30 and 30..45.
    for _ in 0..40 {
        let (a, b) = (12 + rng.below(18), 12 + rng.below(18));
        edges.push((a, b));
    }
    for _ in 0..25 {
        let (a, b) = (30 + rng.below(15), 30 + rng.below(15));
        edges.push((a, b));
    }
    // A bridge from the path into the first cluster; 45..50 isolated.
    edges.push((5, 20));
    let weights = weighted.then(|| {
        (0..edges.len())
            .map(|_| f64::from(rng.below(9) + 1) / 4.0)
            .collect()
    });
    EdgeList {
        ids: (0..50).collect(),
        edges,
        weights,
    }
}

fn union_find(g: &EdgeList) -> Vec<u32> {
    let n = g.num_vertices();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            x = p[x];
        }
        x
    }
    for &(u, v) in &g.edges {
        let (a, b) = (root(&mut parent, u as usize), root(&mut parent, v as usize));
        parent[a.max(b)] = a.min(b);
    }
    (0..n).map(|v| root(&mut parent, v) as u32).collect()
}

fn bfs(g: &EdgeList, s: u32) -> Vec<f64> {
    let n = g.num_vertices();
    let mut d = vec![f64::INFINITY; n];
    d[s as usize] = 0.0;
    let mut q = VecDeque::from([s]);
    while let Some(u) = q.pop_front() {
        for &(a, b) in &g.edges {
            if a == u && d[b as usize].is_infinite() {
                d[b as usize] = d[u as usize] + 1.0;
                q.push_back(b);
            }
        }
    }
    d
}

/// Dijkstra by repeated selection of the nearest unsettled vertex (O(n^2), obviously right).
fn dijkstra(g: &EdgeList, s: u32) -> Vec<f64> {
    let n = g.num_vertices();
    let mut d = vec![f64::INFINITY; n];
    let mut done = vec![false; n];
    d[s as usize] = 0.0;
    for _ in 0..n {
        let Some(u) = (0..n)
            .filter(|&v| !done[v] && d[v].is_finite())
            .min_by(|&a, &b| d[a].total_cmp(&d[b]))
        else {
            break;
        };
        done[u] = true;
        for (e, &(a, b)) in g.edges.iter().enumerate() {
            if a as usize == u {
                d[b as usize] = d[b as usize].min(d[u] + g.weight(e));
            }
        }
    }
    d
}

fn config(nodes: usize, partitioner: Partitioner, mode: Mode) -> EngineConfig {
    EngineConfig {
        nodes,
        partitioner,
        mode,
        backend: Backend::Hardware,
        seed: 5,
        max_iterations: 3,
        tolerance: None,
        ..EngineConfig::default()
    }
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of threaded runs; too slow for Miri")]
fn wcc_matches_union_find() {
    for seed in [1, 2] {
        let g = graph(seed, false);
        let expected = union_find(&g);
        assert_eq!(reference::wcc(&g), expected);
        assert_eq!(expected[11], 0); // the path is one component
        for partitioner in PARTITIONERS {
            for nodes in 1..=4 {
                for mode in MODES {
                    let run = wcc(&g, &config(nodes, partitioner, mode)).unwrap();
                    assert_eq!(run.values, expected, "{partitioner:?} {nodes} {mode:?}");
                    // The path needs more than the configured 3 supersteps.
                    assert!(run.stats.iterations > 3);
                }
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of threaded runs; too slow for Miri")]
fn sssp_matches_bfs_and_dijkstra() {
    for weighted in [false, true] {
        let g = graph(3, weighted);
        for source in [0, 14, 47] {
            let expected = if weighted {
                dijkstra(&g, source)
            } else {
                bfs(&g, source)
            };
            assert_eq!(reference::sssp(&g, source), expected);
            for partitioner in PARTITIONERS {
                for nodes in 1..=4 {
                    for mode in MODES {
                        let run = sssp(&g, source, &config(nodes, partitioner, mode)).unwrap();
                        assert_eq!(
                            run.values, expected,
                            "{partitioner:?} {nodes} {mode:?} from {source}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of threaded runs; too slow for Miri")]
fn bad_sssp_arguments_are_errors() {
    let g = graph(1, false);
    let cfg = config(2, Partitioner::Random, Mode::BiOnDemand);
    assert!(sssp(&g, 50, &cfg).is_err());
    let mut neg = graph(1, true);
    neg.weights.as_mut().unwrap()[3] = -1.0;
    assert!(sssp(&neg, 0, &cfg).is_err());
    let mut short = graph(1, true);
    short.weights.as_mut().unwrap().pop();
    assert!(sssp(&short, 0, &cfg).is_err());
}

/// A path of `n` vertices, `0 -> 1 -> ... -> n - 1`, beside a complete cluster of
/// `cluster` vertices, which settles in the first supersteps.
fn path_and_cluster(n: u32, cluster: u32) -> EdgeList {
    let mut edges: Vec<(u32, u32)> = (0..n - 1).map(|i| (i, i + 1)).collect();
    for a in n..n + cluster {
        for b in n..n + cluster {
            if a != b {
                edges.push((a, b));
            }
        }
    }
    EdgeList {
        ids: (0..u64::from(n + cluster)).collect(),
        edges,
        weights: None,
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "threaded runs of hundreds of supersteps; too slow for Miri"
)]
fn wcc_and_sssp_gather_only_where_a_neighbour_changed() {
    // Shortest paths along the path: each superstep changes one vertex, so gathering
    // everything each time would read the edges 600 times; the frontier reads them about
    // once (the first superstep) plus two edges per superstep.
    let g = path_and_cluster(600, 40);
    let distances = bfs(&g, 0);
    // Label propagation changes a path's vertices many times (vertex `i` takes `i - 1`,
    // then `i - 2`, ...), but the large cluster settles at once and is gathered again
    // only in the first supersteps.
    let h = path_and_cluster(100, 200);
    let components = union_find(&h);
    for nodes in [1, 2, 3] {
        for mode in MODES {
            let cfg = config(nodes, Partitioner::Random, mode);
            let s = sssp(&g, 0, &cfg).unwrap();
            let w = wcc(&h, &cfg).unwrap();
            assert_eq!(s.values, distances, "sssp {nodes} {mode:?}");
            assert_eq!(w.values, components, "wcc {nodes} {mode:?}");
            // Every edge every superstep (WCC gathers both ways).
            let sssp_dense = g.num_edges() as u64 * s.stats.iterations as u64;
            let wcc_dense = 2 * h.num_edges() as u64 * w.stats.iterations as u64;
            let (sg, wg) = (s.stats.edges_gathered, w.stats.edges_gathered);
            if mode == Mode::BiPeriodic {
                // Reads may be stale there, so a change can go unseen: all gather.
                assert_eq!((sg, wg), (sssp_dense, wcc_dense), "{nodes}");
            } else {
                assert!(
                    sg <= 2 * g.num_edges() as u64,
                    "sssp {nodes} {mode:?}: {sg}"
                );
                assert!(
                    wg * 10 <= wcc_dense,
                    "wcc {nodes} {mode:?}: {wg} of {wcc_dense}"
                );
            }
        }
    }
}
