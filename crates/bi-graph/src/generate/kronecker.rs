//! Kronecker graphs drawn with R-MAT, as the Graph500 benchmark generates them.

use super::{MAX_EDGES, invalid, simplify, stream_seed};
use crate::edge_list::EdgeList;
use crate::error::GraphError;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Edges drawn from one random stream; fixed so the result does not depend on threads.
const CHUNK_EDGES: usize = 1 << 16;

/// The stream that permutes vertices and edges (chunks use streams `0..`).
const PERMUTATION_STREAM: u64 = u64::MAX;

/// A Kronecker (R-MAT) graph: `2^scale` vertices, `edge_factor * 2^scale` edges drawn.
///
/// Each edge picks one quadrant of the adjacency matrix per bit of its endpoints, with
/// probabilities `a` (top left), `b` (top right), `c` (bottom left) and `d = 1 - a - b -
/// c`, exactly as Graph500's reference generator. With `permute`, vertex labels and the
/// order of edges are then shuffled (Graph500 does this so that vertex 0 is not the hub).
/// Self-loops and repeated edges are removed (see the [module docs](super)).
///
/// ```
/// use bi_graph::generate::Kronecker;
///
/// let g = Kronecker { edge_factor: 8, ..Kronecker::graph500(8, 7) }.generate()?;
/// assert_eq!(g.num_vertices(), 256);
/// assert_eq!(g, Kronecker { edge_factor: 8, ..Kronecker::graph500(8, 7) }.generate()?);
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Kronecker {
    /// Log2 of the number of vertices (1 to 31).
    pub scale: u32,
    /// Edges drawn per vertex (before duplicates are removed).
    pub edge_factor: u32,
    /// Probability of the top-left quadrant.
    pub a: f64,
    /// Probability of the top-right quadrant.
    pub b: f64,
    /// Probability of the bottom-left quadrant (the bottom-right one gets the rest).
    pub c: f64,
    /// Seed of every random choice.
    pub seed: u64,
    /// Shuffle vertex labels and edge order.
    pub permute: bool,
}

impl Kronecker {
    /// Graph500's parameters: `a = 0.57`, `b = c = 0.19`, edge factor 16, permuted.
    pub fn graph500(scale: u32, seed: u64) -> Self {
        Kronecker {
            scale,
            edge_factor: 16,
            a: 0.57,
            b: 0.19,
            c: 0.19,
            seed,
            permute: true,
        }
    }

    /// Draws the graph.
    ///
    /// # Errors
    ///
    /// [`GraphError::InvalidArgument`] when `scale` is not in `1..=31`, `edge_factor` is
    /// zero or too large, or the probabilities are not finite, non-negative and at most 1
    /// in total.
    pub fn generate(&self) -> Result<EdgeList, GraphError> {
        let thresholds = self.validate()?;
        let n = 1u64 << self.scale;
        let drawn = (n * u64::from(self.edge_factor)) as usize;
        let mut edges = vec![(0u32, 0u32); drawn];
        draw_in_parallel(&mut edges, self.seed, self.scale, thresholds);
        let mut rng = SmallRng::seed_from_u64(stream_seed(self.seed, PERMUTATION_STREAM));
        if self.permute {
            let mut label: Vec<u32> = (0..n as u32).collect();
            label.shuffle(&mut rng);
            for (s, t) in &mut edges {
                (*s, *t) = (label[*s as usize], label[*t as usize]);
            }
        }
        simplify(&mut edges);
        if self.permute {
            edges.shuffle(&mut rng);
        }
        Ok(EdgeList {
            ids: (0..n).collect(),
            edges,
            weights: None,
        })
    }

    fn validate(&self) -> Result<Thresholds, GraphError> {
        if !(1..=31).contains(&self.scale) {
            return Err(invalid(format!("scale {} is not in 1..=31", self.scale)));
        }
        let drawn = (1u64 << self.scale) * u64::from(self.edge_factor);
        if self.edge_factor == 0 || drawn > MAX_EDGES {
            return Err(invalid(format!(
                "edge factor {} at scale {} is not in 1..={}",
                self.edge_factor,
                self.scale,
                MAX_EDGES >> self.scale
            )));
        }
        let (a, b, c) = (self.a, self.b, self.c);
        let valid = |p: f64| p.is_finite() && (0.0..=1.0).contains(&p);
        if !(valid(a) && valid(b) && valid(c) && a + b + c <= 1.0 + 1e-12) {
            return Err(invalid(format!(
                "R-MAT probabilities a={a} b={b} c={c} must be in [0, 1] with a + b + c <= 1"
            )));
        }
        Ok(Thresholds::new(a, b, c))
    }
}

/// The quadrant choice as thresholds on 16-bit random numbers, in Graph500's form:
/// first the row bit (`P(0) = a + b`), then the column bit given the row bit
/// (`P(0 | row 0) = a / (a + b)`, `P(0 | row 1) = c / (c + d)`). Sixteen bits resolve a
/// probability to 1.5e-5, far below what the degree distribution can show, and let one
/// 64-bit draw serve two levels.
#[derive(Clone, Copy, Debug)]
struct Thresholds {
    row_zero: u32,
    column_zero_in_top: u32,
    column_zero_in_bottom: u32,
}

impl Thresholds {
    fn new(a: f64, b: f64, c: f64) -> Self {
        let scale = |p: f64| (p.clamp(0.0, 1.0) * 65_536.0) as u32;
        let top = a + b;
        let bottom = 1.0 - top;
        Thresholds {
            row_zero: scale(top),
            column_zero_in_top: if top > 0.0 { scale(a / top) } else { 0 },
            column_zero_in_bottom: if bottom > 0.0 { scale(c / bottom) } else { 0 },
        }
    }

    /// The row and column bits of one level from 32 random bits.
    fn level(self, random: u32) -> (u32, u32) {
        let row_bit = (random & 0xffff) >= self.row_zero;
        let column_zero = if row_bit {
            self.column_zero_in_bottom
        } else {
            self.column_zero_in_top
        };
        let column_bit = (random >> 16) >= column_zero;
        (u32::from(row_bit), u32::from(column_bit))
    }
}

/// The chunks one thread fills, with their stream numbers.
type Share<'a> = Vec<(u64, &'a mut [(u32, u32)])>;

/// Fills `edges` chunk by chunk, each chunk from its own stream, on all cores.
fn draw_in_parallel(edges: &mut [(u32, u32)], seed: u64, scale: u32, t: Thresholds) {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut shares: Vec<Share<'_>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, chunk) in edges.chunks_mut(CHUNK_EDGES).enumerate() {
        shares[i % workers].push((i as u64, chunk));
    }
    std::thread::scope(|scope| {
        for share in shares {
            scope.spawn(move || {
                for (stream, chunk) in share {
                    let mut rng = SmallRng::seed_from_u64(stream_seed(seed, stream));
                    for edge in chunk {
                        *edge = draw_edge(&mut rng, scale, t);
                    }
                }
            });
        }
    });
}

fn draw_edge(rng: &mut SmallRng, scale: u32, t: Thresholds) -> (u32, u32) {
    let (mut row, mut column) = (0u32, 0u32);
    let mut random = 0u64;
    for bit in 0..scale {
        if bit % 2 == 0 {
            random = rng.random();
        }
        let (r, c) = t.level(random as u32);
        random >>= 32;
        row |= r << bit;
        column |= c << bit;
    }
    (row, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quadrant_frequencies_follow_the_probabilities() {
        let t = Thresholds::new(0.57, 0.19, 0.19);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut counts = [0u32; 4];
        let draws = 100_000;
        for _ in 0..draws {
            let (r, c) = draw_edge(&mut rng, 1, t);
            counts[(r * 2 + c) as usize] += 1;
        }
        let expected = [0.57, 0.19, 0.19, 0.05];
        for (count, p) in counts.iter().zip(expected) {
            let f = f64::from(*count) / f64::from(draws);
            assert!((f - p).abs() < 0.01, "{counts:?}");
        }
    }

    #[test]
    fn degenerate_probabilities_stay_in_range() {
        let all_top_left = Thresholds::new(1.0, 0.0, 0.0);
        let mut rng = SmallRng::seed_from_u64(2);
        for _ in 0..1000 {
            assert_eq!(draw_edge(&mut rng, 5, all_top_left), (0, 0));
        }
        let all_bottom_right = Thresholds::new(0.0, 0.0, 0.0);
        for _ in 0..1000 {
            assert_eq!(draw_edge(&mut rng, 5, all_bottom_right), (31, 31));
        }
    }
}
