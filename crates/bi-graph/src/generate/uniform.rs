//! Uniform random graphs, `G(n, m)`.

use super::{MAX_EDGES, invalid, simplify, stream_seed};
use crate::edge_list::EdgeList;
use crate::error::GraphError;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// A uniform random simple digraph: `m` distinct edges among `n` vertices, no
/// self-loops, every such graph equally likely (Erdős–Rényi `G(n, m)`).
///
/// Edges come out sorted by `(source, target)`.
///
/// ```
/// use bi_graph::generate::Uniform;
///
/// let g = Uniform::new(100, 500, 3).generate()?;
/// assert_eq!((g.num_vertices(), g.num_edges()), (100, 500));
/// assert!(g.edges.windows(2).all(|w| w[0] < w[1])); // sorted, so no repeats
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uniform {
    /// `n`, the number of vertices.
    pub vertices: u32,
    /// `m`, the number of edges.
    pub edges: u64,
    /// Seed of every random choice.
    pub seed: u64,
}

impl Uniform {
    /// `G(vertices, edges)` drawn with `seed`.
    pub fn new(vertices: u32, edges: u64, seed: u64) -> Self {
        Uniform {
            vertices,
            edges,
            seed,
        }
    }

    /// Draws the graph.
    ///
    /// Pairs are drawn uniformly (never a self-loop), repeats removed, and the shortfall
    /// drawn again until there are `m`; a uniformly chosen surplus is then dropped. When
    /// more than half of all possible edges are wanted, the missing edges are drawn
    /// instead and the rest enumerated.
    ///
    /// # Errors
    ///
    /// [`GraphError::InvalidArgument`] when `m` exceeds `n (n - 1)` or the generator's
    /// limit of 2^32 edges.
    pub fn generate(&self) -> Result<EdgeList, GraphError> {
        let n = u64::from(self.vertices);
        let possible = n * n.saturating_sub(1);
        let m = self.edges;
        if m > possible || m > MAX_EDGES {
            return Err(invalid(format!(
                "{m} edges do not fit a simple digraph on {n} vertices (at most {})",
                possible.min(MAX_EDGES)
            )));
        }
        let mut rng = SmallRng::seed_from_u64(stream_seed(self.seed, 0));
        let edges = if m <= possible / 2 {
            distinct_pairs(&mut rng, self.vertices, m as usize)
        } else {
            let missing = distinct_pairs(&mut rng, self.vertices, (possible - m) as usize);
            complement(self.vertices, &missing, m as usize)
        };
        Ok(EdgeList {
            ids: (0..n).collect(),
            edges,
            weights: None,
        })
    }
}

/// `count` distinct non-loop pairs chosen uniformly, sorted; needs
/// `count <= n (n - 1) / 2` to finish quickly.
fn distinct_pairs(rng: &mut SmallRng, n: u32, count: usize) -> Vec<(u32, u32)> {
    let mut edges: Vec<(u32, u32)> = Vec::with_capacity(count + count / 16 + 16);
    while edges.len() < count {
        let short = count - edges.len();
        for _ in 0..short + short / 16 + 16 {
            let source = rng.random_range(0..n);
            let mut target = rng.random_range(0..n - 1);
            if target >= source {
                target += 1;
            }
            edges.push((source, target));
        }
        simplify(&mut edges);
    }
    if edges.len() > count {
        edges.shuffle(rng);
        edges.truncate(count);
        edges.sort_unstable();
    }
    edges
}

/// Every non-loop pair not in `missing` (sorted), in order.
fn complement(n: u32, missing: &[(u32, u32)], count: usize) -> Vec<(u32, u32)> {
    let mut edges = Vec::with_capacity(count);
    let mut skip = missing.iter().peekable();
    for source in 0..n {
        for target in (0..n).filter(|&t| t != source) {
            if skip.next_if_eq(&&(source, target)).is_none() {
                edges.push((source, target));
            }
        }
    }
    edges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_and_empty_graphs() {
        let full = Uniform::new(5, 20, 1).generate().unwrap();
        assert_eq!(full.num_edges(), 20);
        assert!(full.edges.iter().all(|&(s, t)| s != t));
        let empty = Uniform::new(5, 0, 1).generate().unwrap();
        assert!(empty.edges.is_empty());
        assert_eq!(Uniform::new(1, 0, 1).generate().unwrap().num_vertices(), 1);
        assert!(Uniform::new(5, 21, 1).generate().is_err());
        assert!(Uniform::new(0, 1, 1).generate().is_err());
    }

    #[test]
    fn dense_requests_use_the_complement() {
        let g = Uniform::new(10, 80, 4).generate().unwrap();
        assert_eq!(g.num_edges(), 80);
        let mut sorted = g.edges.clone();
        sorted.dedup();
        assert_eq!(sorted.len(), 80);
        assert!(g.edges.iter().all(|&(s, t)| s != t && s < 10 && t < 10));
    }
}
