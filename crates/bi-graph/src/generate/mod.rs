//! Synthetic graphs: Kronecker (R-MAT, Graph500 parameters) and uniform random.
//!
//! # Why these two
//!
//! Benchmarks need graphs of any size without shipping data. Kronecker graphs have the
//! skewed, power-law-like degrees of web and social graphs, which is what stresses a
//! vertex-cut engine (high-degree vertices are replicated on every partition); the
//! Graph500 parameters make results comparable with published figures. Uniform random
//! graphs (Erdős–Rényi `G(n, m)`) are the unskewed control.
//!
//! # What comes out
//!
//! Both produce a *simple* directed graph: no self-loops and no repeated edge. R-MAT
//! draws edges independently, so it repeats some; they are removed (and self-loops
//! dropped) so that the graph has a single well-defined meaning, and PageRank on it
//! matches networkx on the same `DiGraph`. A Kronecker graph therefore has somewhat fewer
//! than `edge_factor * 2^scale` edges; a uniform graph has exactly `m`. Vertices are
//! numbered `0..n` and every one is present, isolated or not (`ids[i] == i`).
//!
//! Generation is deterministic for a given seed, configuration and version of this crate
//! (the random generator is `rand`'s `SmallRng`); it does not depend on the number of
//! threads used. Memory is the [`EdgeList`](crate::EdgeList) itself, a sort buffer of the
//! same size and a permutation of the vertices: at scale 20 (1M vertices, 16M edges
//! drawn) the process peaks at about 260 MiB.
//!
//! ```
//! use bi_graph::generate::{Kronecker, Uniform};
//!
//! let skewed = Kronecker::graph500(10, 42).generate()?;
//! assert_eq!(skewed.num_vertices(), 1024);
//! assert!(skewed.num_edges() <= 16 * 1024);
//! assert!(skewed.edges.iter().all(|&(s, t)| s != t));
//!
//! let flat = Uniform::new(1024, 16 * 1024, 42).generate()?;
//! assert_eq!(flat.num_edges(), 16 * 1024);
//! # Ok::<(), bi_graph::GraphError>(())
//! ```

mod kronecker;
mod uniform;

pub use kronecker::Kronecker;
pub use uniform::Uniform;

use crate::error::GraphError;

/// Most edges a generator draws: their memory (8 bytes each) must stay reasonable.
const MAX_EDGES: u64 = 1 << 32;

/// Drops self-loops, sorts and removes repeated edges.
fn simplify(edges: &mut Vec<(u32, u32)>) {
    edges.retain(|&(s, t)| s != t);
    sort_edges(edges);
    edges.dedup();
}

/// Below this many edges a comparison sort is as fast as the radix sort.
const RADIX_MIN: usize = 1 << 12;

/// Sorts by `(source, target)`: a least-significant-digit radix sort on 16-bit digits
/// (target low, target high, source low, source high; passes whose digit is always
/// zero are skipped). Several times faster than a comparison sort on millions of edges,
/// at the cost of one buffer as large as the edges.
fn sort_edges(edges: &mut Vec<(u32, u32)>) {
    if edges.len() < RADIX_MIN {
        edges.sort_unstable();
        return;
    }
    let max_source = edges.iter().map(|e| e.0).max().unwrap_or(0);
    let max_target = edges.iter().map(|e| e.1).max().unwrap_or(0);
    let mut buffer = vec![(0u32, 0u32); edges.len()];
    let mut counts = vec![0usize; 1 << 16];
    for pass in 0..4u32 {
        let field_max = if pass < 2 { max_target } else { max_source };
        let shift = 16 * (pass % 2);
        if shift > 0 && field_max >> shift == 0 {
            continue;
        }
        let digit = |e: &(u32, u32)| {
            let field = if pass < 2 { e.1 } else { e.0 };
            ((field >> shift) & 0xffff) as usize
        };
        counts.fill(0);
        for e in edges.iter() {
            counts[digit(e)] += 1;
        }
        let mut next = 0;
        for count in counts.iter_mut() {
            (*count, next) = (next, next + *count);
        }
        for e in edges.iter() {
            let d = digit(e);
            buffer[counts[d]] = *e;
            counts[d] += 1;
        }
        std::mem::swap(edges, &mut buffer);
    }
}

/// The seed of independent stream `stream` of a generator seeded with `seed`
/// (SplitMix64 finaliser of both, so nearby seeds give unrelated streams).
fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn invalid(reason: String) -> GraphError {
    GraphError::InvalidArgument { reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simplify_drops_loops_and_repeats() {
        let mut e = vec![(2, 1), (1, 1), (0, 3), (2, 1), (0, 3), (3, 0)];
        simplify(&mut e);
        assert_eq!(e, [(0, 3), (2, 1), (3, 0)]);
    }

    #[test]
    fn the_radix_sort_agrees_with_a_comparison_sort() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (len, bits) in [
            (10, 32),
            (RADIX_MIN * 3, 32),
            (RADIX_MIN * 2, 12),
            (RADIX_MIN, 20),
        ] {
            let mask = if bits == 32 {
                u64::from(u32::MAX)
            } else {
                (1 << bits) - 1
            };
            let mut edges: Vec<(u32, u32)> = (0..len)
                .map(|_| {
                    let r = next();
                    ((r & mask) as u32, ((r >> 32) & mask) as u32)
                })
                .collect();
            let mut expected = edges.clone();
            expected.sort_unstable();
            sort_edges(&mut edges);
            assert_eq!(edges, expected, "{len} edges of {bits} bits");
        }
    }

    #[test]
    fn streams_differ() {
        assert_ne!(stream_seed(0, 0), stream_seed(0, 1));
        assert_ne!(stream_seed(0, 1), stream_seed(1, 0));
    }
}
