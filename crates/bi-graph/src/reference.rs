//! Plain single-threaded implementations over a CSR: the correctness oracle for tests
//! and the baseline the engine is measured against.
//!
//! They share nothing with the engine except the [`EdgeList`] they read, so an engine bug
//! cannot hide in both. The PageRank loop is the classic pull loop: one pass computes
//! every vertex's share `rank / out_degree`, a second sums shares over in-edges.

use crate::edge_list::EdgeList;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// In-edges as CSR: `sources[offsets[v]..offsets[v + 1]]` point at `v`, with the edge
/// indices beside them.
fn in_csr(graph: &EdgeList) -> (Vec<usize>, Vec<u32>) {
    let n = graph.num_vertices();
    let mut offsets = vec![0usize; n + 1];
    for &(_, v) in &graph.edges {
        offsets[v as usize + 1] += 1;
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    let mut fill = offsets.clone();
    let mut sources = vec![0u32; graph.edges.len()];
    for &(u, v) in &graph.edges {
        sources[fill[v as usize]] = u;
        fill[v as usize] += 1;
    }
    (offsets, sources)
}

/// PageRank (damping 0.85, uniform teleport, dangling mass spread uniformly): at most
/// `iterations` Jacobi updates, fewer if the L1 change drops below `tolerance`.
///
/// ```
/// let g = bi_graph::EdgeList { ids: vec![0, 1], edges: vec![(0, 1)], weights: None };
/// let r = bi_graph::reference::pagerank(&g, 100, Some(1e-12));
/// assert!((r[0] + r[1] - 1.0).abs() < 1e-12 && r[1] > r[0]);
/// ```
pub fn pagerank(graph: &EdgeList, iterations: usize, tolerance: Option<f64>) -> Vec<f64> {
    let n = graph.num_vertices();
    if n == 0 {
        return Vec::new();
    }
    let (offsets, sources) = in_csr(graph);
    let mut out_degree = vec![0u32; n];
    for &(u, _) in &graph.edges {
        out_degree[u as usize] += 1;
    }
    let d = 0.85;
    let mut rank = vec![1.0 / n as f64; n];
    let mut share = vec![0.0; n];
    let mut next = vec![0.0; n];
    for _ in 0..iterations {
        let mut dangling = 0.0;
        for v in 0..n {
            if out_degree[v] == 0 {
                dangling += rank[v];
                share[v] = 0.0;
            } else {
                share[v] = rank[v] / f64::from(out_degree[v]);
            }
        }
        let base = (d * dangling + (1.0 - d)) / n as f64;
        let mut change = 0.0;
        for v in 0..n {
            let mut sum = 0.0;
            for &u in &sources[offsets[v]..offsets[v + 1]] {
                sum += share[u as usize];
            }
            next[v] = d * sum + base;
            change += (next[v] - rank[v]).abs();
        }
        std::mem::swap(&mut rank, &mut next);
        if tolerance.is_some_and(|t| change < t) {
            break;
        }
    }
    rank
}

/// Weakly connected components by union-find: each vertex's label is the smallest index
/// in its component.
///
/// ```
/// let g = bi_graph::EdgeList { ids: (0..4).collect(), edges: vec![(3, 1)], weights: None };
/// assert_eq!(bi_graph::reference::wcc(&g), [0, 1, 2, 1]);
/// ```
pub fn wcc(graph: &EdgeList) -> Vec<u32> {
    let n = graph.num_vertices();
    let mut parent: Vec<u32> = (0..n as u32).collect();
    fn find(parent: &mut [u32], mut x: u32) -> u32 {
        while parent[x as usize] != x {
            let up = parent[parent[x as usize] as usize];
            parent[x as usize] = up;
            x = up;
        }
        x
    }
    for &(u, v) in &graph.edges {
        let (a, b) = (find(&mut parent, u), find(&mut parent, v));
        // The smaller root wins, so every root is its component's smallest index.
        match a.cmp(&b) {
            Ordering::Less => parent[b as usize] = a,
            Ordering::Greater => parent[a as usize] = b,
            Ordering::Equal => {}
        }
    }
    (0..n as u32).map(|v| find(&mut parent, v)).collect()
}

#[derive(PartialEq)]
struct Entry(f64, u32);

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: the heap pops the smallest distance first.
        other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
    }
}

/// Shortest distances from `source` by Dijkstra (weights are the graph's, 1 when it has
/// none, and assumed non-negative); `f64::INFINITY` for unreachable vertices, and for all
/// of them when `source` is not a vertex.
///
/// ```
/// let g = bi_graph::EdgeList { ids: (0..3).collect(), edges: vec![(0, 1), (1, 2)], weights: None };
/// assert_eq!(bi_graph::reference::sssp(&g, 1), [f64::INFINITY, 0.0, 1.0]);
/// ```
pub fn sssp(graph: &EdgeList, source: u32) -> Vec<f64> {
    let n = graph.num_vertices();
    let mut dist = vec![f64::INFINITY; n];
    if source as usize >= n {
        return dist;
    }
    let mut offsets = vec![0usize; n + 1];
    for &(u, _) in &graph.edges {
        offsets[u as usize + 1] += 1;
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    let mut fill = offsets.clone();
    let mut adj = vec![(0u32, 0f64); graph.edges.len()];
    for (e, &(u, v)) in graph.edges.iter().enumerate() {
        adj[fill[u as usize]] = (v, graph.weight(e));
        fill[u as usize] += 1;
    }
    let mut heap = BinaryHeap::new();
    dist[source as usize] = 0.0;
    heap.push(Entry(0.0, source));
    while let Some(Entry(d, u)) = heap.pop() {
        if d > dist[u as usize] {
            continue;
        }
        for &(v, w) in &adj[offsets[u as usize]..offsets[u as usize + 1]] {
            let nd = d + w;
            if nd < dist[v as usize] {
                dist[v as usize] = nd;
                heap.push(Entry(nd, v));
            }
        }
    }
    dist
}
