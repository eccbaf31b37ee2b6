//! Plain implementations over a CSR: the correctness oracle for tests and the baseline
//! the engine is measured against.
//!
//! They share nothing with the engine except the [`EdgeList`] they read, so an engine bug
//! cannot hide in both. The PageRank loop is the classic pull loop: one pass computes
//! every vertex's share `rank / out_degree`, a second sums shares over in-edges.
//! [`pagerank`], [`wcc`] and [`sssp`] run on one thread; [`PullPageRank`] (and
//! [`pagerank_threads`]) is the same PageRank pull loop split over threads, the
//! multicore baseline.

use crate::edge_list::EdgeList;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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

/// PageRank's damping factor.
const DAMPING: f64 = 0.85;

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
    let d = DAMPING;
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

/// PageRank as [`pagerank`] defines it (networkx's: damping 0.85, uniform teleport,
/// dangling mass spread uniformly), exactly `iterations` Jacobi updates, on `threads`
/// threads: the plain multithreaded pull loop, no engine. Equal to
/// `pagerank(graph, iterations, None)` up to rounding (the dangling mass is summed per
/// thread), bit for bit on one thread. `threads` is at least 1 (0 counts as 1).
///
/// The in-CSR is built on every call; [`PullPageRank`] builds it once for many runs.
///
/// ```
/// use bi_graph::generate::Kronecker;
/// use bi_graph::reference;
///
/// let g = Kronecker::graph500(8, 3).generate()?;
/// let one = reference::pagerank(&g, 20, None);
/// for threads in [1, 2, 3] {
///     let many = reference::pagerank_threads(&g, 20, threads);
///     assert!(one.iter().zip(&many).all(|(a, b)| (a - b).abs() < 1e-12));
/// }
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
pub fn pagerank_threads(graph: &EdgeList, iterations: usize, threads: usize) -> Vec<f64> {
    PullPageRank::new(graph, threads).run(iterations)
}

/// The multithreaded PageRank pull loop with its in-CSR built once, so that runs can be
/// timed without the construction (see [`pagerank_threads`] for what it computes).
///
/// The vertex range is split into one contiguous chunk per thread, balanced on in-edges
/// plus vertices. [`run`](Self::run) spawns its threads once (the caller's thread takes
/// the first chunk) and separates iterations with a [`Barrier`]. In an iteration each
/// thread sums `share[u] = rank[u] / out_degree(u)` over the in-neighbours `u` of its
/// vertices, writes their new ranks into its chunk of the output and their new shares
/// into its chunk of the other share buffer (the two swap roles every iteration), and
/// adds up the rank of its dangling vertices for the next iteration's teleport term.
/// Nothing is allocated per iteration.
///
/// The share buffers are [`AtomicU64`]s holding `f64` bits: every thread reads all of
/// one while each writes its own chunk of the other, which safe Rust cannot express with
/// plain slices borrowed for the whole run. The barrier orders the writes before the
/// reads, so the accesses are relaxed, and relaxed loads and stores compile to plain
/// moves.
///
/// ```
/// use bi_graph::EdgeList;
/// use bi_graph::reference::{self, PullPageRank};
///
/// let g = EdgeList { ids: (0..4).collect(), edges: vec![(0, 1), (1, 2), (2, 0), (2, 3)], weights: None };
/// let pull = PullPageRank::new(&g, 2);
/// assert_eq!(pull.threads(), 2);
/// let expected = reference::pagerank(&g, 30, None);
/// let ranks = pull.run(30);
/// assert!(ranks.iter().zip(&expected).all(|(a, b)| (a - b).abs() < 1e-12));
/// assert_eq!(pull.run(0), [0.25; 4]);
/// ```
#[derive(Clone, Debug)]
pub struct PullPageRank {
    /// In-edges of `v`: `sources[offsets[v]..offsets[v + 1]]`.
    offsets: Vec<usize>,
    sources: Vec<u32>,
    out_degree: Vec<u32>,
    /// Thread `i` owns vertices `bounds[i]..bounds[i + 1]`.
    bounds: Vec<usize>,
}

impl PullPageRank {
    /// Builds the in-CSR, the out-degrees and the split of `graph`'s vertices among
    /// `threads` threads (at least 1).
    ///
    /// # Panics
    ///
    /// When an edge names a vertex outside `0..graph.num_vertices()`.
    pub fn new(graph: &EdgeList, threads: usize) -> Self {
        let n = graph.num_vertices();
        let threads = threads.max(1);
        let (offsets, sources) = in_csr(graph);
        let mut out_degree = vec![0u32; n];
        for &(u, _) in &graph.edges {
            out_degree[u as usize] += 1;
        }
        // The work of vertices `0..v` is `offsets[v] + v`; chunk `i` ends where it
        // reaches `(i + 1) / threads` of the total.
        let total = sources.len() + n;
        let mut bounds = Vec::with_capacity(threads + 1);
        let mut v = 0;
        for i in 0..=threads {
            while v < n && offsets[v] + v < i * total / threads {
                v += 1;
            }
            bounds.push(v);
        }
        PullPageRank {
            offsets,
            sources,
            out_degree,
            bounds,
        }
    }

    /// The number of threads [`run`](Self::run) uses.
    pub fn threads(&self) -> usize {
        self.bounds.len() - 1
    }

    /// `iterations` Jacobi updates from the uniform vector: the ranks, as
    /// [`pagerank`]`(graph, iterations, None)` gives them.
    pub fn run(&self, iterations: usize) -> Vec<f64> {
        let n = self.out_degree.len();
        if n == 0 {
            return Vec::new();
        }
        let threads = self.threads();
        let start = 1.0 / n as f64;
        let mut rank = vec![start; n];
        // The first iteration's shares and dangling mass (summed in vertex order, as
        // `pagerank` does).
        let first: Vec<AtomicU64> = self
            .out_degree
            .iter()
            .map(|&d| {
                let share = if d == 0 { 0.0 } else { start / f64::from(d) };
                AtomicU64::new(share.to_bits())
            })
            .collect();
        let dangling = self
            .out_degree
            .iter()
            .filter(|&&d| d == 0)
            .fold(0.0, |sum, _| sum + start);
        let second: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        let shares = [first, second];
        // Each thread's dangling mass, one slot per iteration parity: a slot is rewritten
        // two barriers after it was written, when every thread has read it.
        let partial: Vec<[AtomicU64; 2]> = (0..threads)
            .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
            .collect();
        let barrier = Barrier::new(threads);
        let worker = |id: usize, out: &mut [f64]| {
            let lo = self.bounds[id];
            let offsets = &self.offsets[lo..=lo + out.len()];
            let degrees = &self.out_degree[lo..lo + out.len()];
            let mut dangling = dangling;
            for it in 0..iterations {
                let share = &shares[it % 2][..];
                let next = &shares[(it + 1) % 2][lo..lo + out.len()];
                let base = (DAMPING * dangling + (1.0 - DAMPING)) / n as f64;
                let mut mine = 0.0;
                for (((r, s), w), &d) in out
                    .iter_mut()
                    .zip(next)
                    .zip(offsets.windows(2))
                    .zip(degrees)
                {
                    let sum = self.sources[w[0]..w[1]].iter().fold(0.0, |sum, &u| {
                        sum + f64::from_bits(share[u as usize].load(Relaxed))
                    });
                    let x = DAMPING * sum + base;
                    *r = x;
                    if d == 0 {
                        mine += x;
                        s.store(0.0f64.to_bits(), Relaxed);
                    } else {
                        s.store((x / f64::from(d)).to_bits(), Relaxed);
                    }
                }
                partial[id][it % 2].store(mine.to_bits(), Relaxed);
                barrier.wait();
                dangling = partial
                    .iter()
                    .fold(0.0, |sum, p| sum + f64::from_bits(p[it % 2].load(Relaxed)));
            }
        };
        std::thread::scope(|scope| {
            let mut chunks = self.bounds.windows(2).map(|w| w[1] - w[0]);
            let (mine, mut rest) = rank.split_at_mut(chunks.next().unwrap_or(0));
            for (id, len) in chunks.enumerate() {
                let (chunk, tail) = rest.split_at_mut(len);
                rest = tail;
                scope.spawn(move || worker(id + 1, chunk));
            }
            worker(0, mine);
        });
        rank
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::Kronecker;

    fn assert_close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (v, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() < 1e-12, "vertex {v}: {x} against {y}");
        }
    }

    #[test]
    fn pagerank_threads_matches_the_single_threaded_loop() {
        let g = Kronecker::graph500(10, 1).generate().unwrap();
        let expected = pagerank(&g, 30, None);
        for threads in [1, 2, 3] {
            assert_close(&pagerank_threads(&g, 30, threads), &expected);
        }
        // One thread sums in the same order, so it agrees to the bit.
        assert_eq!(pagerank_threads(&g, 30, 1), expected);
    }

    #[test]
    fn pull_pagerank_runs_repeatedly_and_splits_every_vertex() {
        let g = Kronecker::graph500(9, 2).generate().unwrap();
        let pull = PullPageRank::new(&g, 3);
        assert_eq!(pull.bounds.first(), Some(&0));
        assert_eq!(pull.bounds.last(), Some(&g.num_vertices()));
        assert!(pull.bounds.windows(2).all(|w| w[0] <= w[1]));
        for iterations in [0, 1, 2, 7] {
            assert_close(&pull.run(iterations), &pagerank(&g, iterations, None));
        }
    }

    #[test]
    fn pagerank_threads_on_small_and_empty_graphs() {
        assert!(pagerank_threads(&EdgeList::default(), 5, 2).is_empty());
        // More threads than vertices, and 0 threads meaning 1; vertex 2 dangles.
        let g = EdgeList {
            ids: vec![0, 1, 2],
            edges: vec![(0, 1), (1, 2), (1, 0)],
            weights: None,
        };
        let expected = pagerank(&g, 25, None);
        for threads in [0, 1, 2, 3, 8] {
            assert_close(&pagerank_threads(&g, 25, threads), &expected);
        }
        assert_eq!(PullPageRank::new(&g, 0).threads(), 1);
        assert_eq!(PullPageRank::new(&g, 8).threads(), 8);
    }
}
