//! Vertex cuts: every edge on exactly one partition, vertices spanning several.
//!
//! # Why cut vertices rather than edges
//!
//! Power-law graphs have a few vertices with enormous degree. Cutting *edges* (giving each
//! vertex to one partition) leaves whichever partition owns such a hub with most of the
//! work and makes every partition talk to it. PowerGraph cuts *vertices* instead: edges are
//! spread evenly, and a vertex whose edges land on several partitions exists on each of
//! them. One copy is the **master**, which owns the vertex's value; the others are
//! **replicas** (mirrors), which need the master's value to run their local edges. The
//! cost of a cut is its **replication factor**: the average number of partitions a vertex
//! lives on, since every extra copy must learn every update.
//!
//! # The three placements
//!
//! - [`Partitioner::Random`]: an edge goes to a partition chosen by a seeded hash of its
//!   endpoints. Balanced, oblivious, with the highest replication.
//! - [`Partitioner::Oblivious`]: PowerGraph's greedy heuristic, edges placed one at a time:
//!   onto a partition that already holds both endpoints if there is one, else one that holds
//!   either, else any; always the least loaded such. Lower replication, sequential.
//! - [`Partitioner::Grid`]: partitions form a `rows x cols` grid and every vertex hashes to
//!   one cell; an edge `(u, v)` goes to the cell in `u`'s row and `v`'s column, so a vertex
//!   lives at most on its row and its column (`rows + cols - 1` partitions).
//! - [`Partitioner::ByTarget`]: every vertex hashes to its master's partition and an edge
//!   goes with its target (the 1D cut of pull-based engines). A vertex's in-edges all sit
//!   beside its master, so a program gathering over in-edges (PageRank, SSSP) folds them
//!   there: no replica has a partial to send, and only values cross partitions.
//!
//! Masters are chosen among the partitions holding a vertex's edges by a seeded hash (by
//! the target's hash with [`Partitioner::ByTarget`]); an isolated vertex gets a master too
//! (on a hashed partition), so every vertex has a value and appears in the output.

use crate::config::Partitioner;
use crate::edge_list::EdgeList;
use crate::error::GraphError;

/// Most partitions a cut supports (presence sets are 64-bit masks).
pub const MAX_PARTITIONS: usize = 64;

/// The result of cutting a graph: which partition holds each edge, which partitions
/// each vertex spans, and where its master lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VertexCut {
    parts: usize,
    edge_part: Vec<u8>,
    presence: Vec<u64>,
    master: Vec<u8>,
}

impl VertexCut {
    /// Cuts `graph` into `parts` partitions with `partitioner`, seeded by `seed`.
    ///
    /// ```
    /// use bi_graph::{EdgeList, Partitioner, VertexCut};
    ///
    /// let g = EdgeList { ids: (0..4).collect(), edges: vec![(0, 1), (1, 2), (2, 0)], weights: None };
    /// let cut = VertexCut::new(&g, 2, Partitioner::Oblivious, 7)?;
    /// assert_eq!(cut.edge_partitions().len(), 3);
    /// assert!(cut.replication_factor() >= 1.0);
    /// assert!(cut.spans(3, cut.master(3))); // the isolated vertex still has a master
    /// # Ok::<(), bi_graph::GraphError>(())
    /// ```
    pub fn new(
        graph: &EdgeList,
        parts: usize,
        partitioner: Partitioner,
        seed: u64,
    ) -> Result<VertexCut, GraphError> {
        if parts == 0 || parts > MAX_PARTITIONS {
            return Err(GraphError::InvalidArgument {
                reason: format!("{parts} partitions requested; 1 to {MAX_PARTITIONS} supported"),
            });
        }
        let n = graph.num_vertices();
        if n > u32::MAX as usize || graph.edges.len() > u32::MAX as usize {
            return Err(GraphError::InvalidArgument {
                reason: format!(
                    "{n} vertices and {} edges do not fit 32-bit indices",
                    graph.edges.len()
                ),
            });
        }
        if let Some(&(u, v)) = graph
            .edges
            .iter()
            .find(|&&(u, v)| u as usize >= n || v as usize >= n)
        {
            return Err(GraphError::InvalidArgument {
                reason: format!("edge ({u}, {v}) names a vertex outside 0..{n}"),
            });
        }
        if let Some(w) = &graph.weights
            && w.len() != graph.edges.len()
        {
            return Err(GraphError::InvalidArgument {
                reason: format!("{} weights for {} edges", w.len(), graph.edges.len()),
            });
        }
        let mut presence = vec![0u64; n];
        let edge_part = match Placer::new(partitioner, parts, seed) {
            Some(placer) => graph
                .edges
                .iter()
                .map(|&(u, v)| placer.place(u, v))
                .collect(),
            None => oblivious_placement(graph, parts, &mut presence),
        };
        if partitioner != Partitioner::Oblivious {
            for (&(u, v), &p) in graph.edges.iter().zip(&edge_part) {
                presence[u as usize] |= 1 << p;
                presence[v as usize] |= 1 << p;
            }
        }
        let mut master = vec![0u8; n];
        for (v, (set, m)) in presence.iter_mut().zip(&mut master).enumerate() {
            *m = master_of(partitioner, parts, seed, v as u32, set);
        }
        Ok(VertexCut {
            parts,
            edge_part,
            presence,
            master,
        })
    }

    /// Number of partitions.
    pub fn parts(&self) -> usize {
        self.parts
    }

    /// The partition of each edge, in the graph's edge order.
    pub fn edge_partitions(&self) -> &[u8] {
        &self.edge_part
    }

    /// The master partition of vertex `v`.
    pub fn master(&self, v: u32) -> usize {
        usize::from(self.master[v as usize])
    }

    /// The set of partitions vertex `v` lives on, as a bit mask.
    pub fn presence(&self, v: u32) -> u64 {
        self.presence[v as usize]
    }

    /// Whether vertex `v` lives on partition `part` (as master or replica).
    pub fn spans(&self, v: u32, part: usize) -> bool {
        part < MAX_PARTITIONS && self.presence[v as usize] & (1 << part) != 0
    }

    /// Average number of partitions per vertex (1 when nothing is replicated; 0 for an
    /// empty graph).
    pub fn replication_factor(&self) -> f64 {
        replication_factor(&self.presence)
    }

    /// Edges held by each partition.
    pub fn edges_per_partition(&self) -> Vec<usize> {
        let mut count = vec![0; self.parts];
        for &p in &self.edge_part {
            count[usize::from(p)] += 1;
        }
        count
    }

    pub(crate) fn presence_all(&self) -> &[u64] {
        &self.presence
    }

    pub(crate) fn masters_all(&self) -> &[u8] {
        &self.master
    }
}

/// Average number of partitions per vertex, from every vertex's set of partitions (0
/// for no vertex).
pub(crate) fn replication_factor(presence: &[u64]) -> f64 {
    if presence.is_empty() {
        return 0.0;
    }
    let copies: u64 = presence.iter().map(|s| u64::from(s.count_ones())).sum();
    copies as f64 / presence.len() as f64
}

/// SplitMix64's finaliser: a cheap, well-mixed hash.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn nth_set_bit(mut set: u64, n: u32) -> u32 {
    for _ in 0..n {
        set &= set - 1;
    }
    set.trailing_zeros()
}

/// Where edges go under a cut that places each edge by its endpoints alone (every one
/// but the oblivious greedy cut): a partition that reads some edges of a graph places
/// them as a process reading all of it does.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placer {
    partitioner: Partitioner,
    parts: usize,
    seed: u64,
    /// Columns of the grid ([`Partitioner::Grid`]).
    cols: usize,
}

impl Placer {
    /// The placer of `partitioner`, or `None` for [`Partitioner::Oblivious`], whose
    /// placement of an edge depends on every edge placed before it.
    pub(crate) fn new(partitioner: Partitioner, parts: usize, seed: u64) -> Option<Placer> {
        partitioner.reads_shares().then(|| Placer {
            partitioner,
            parts,
            seed,
            cols: grid_shape(parts).1,
        })
    }

    /// The partition of edge `(u, v)`.
    #[inline]
    pub(crate) fn place(&self, u: u32, v: u32) -> u8 {
        let parts = self.parts as u64;
        let seed = self.seed;
        match self.partitioner {
            Partitioner::ByTarget => owner(seed, self.parts, v),
            Partitioner::Grid => {
                let cell = |x: u32| (mix(seed ^ 0x0067_7269_6400 ^ u64::from(x)) % parts) as usize;
                let (row, col) = (cell(u) / self.cols, cell(v) % self.cols);
                (row * self.cols + col) as u8
            }
            Partitioner::Random | Partitioner::Oblivious => {
                (mix(seed ^ ((u64::from(u) << 32) | u64::from(v))) % parts) as u8
            }
        }
    }
}

/// The partition vertex `v` hashes to under [`Partitioner::ByTarget`].
fn owner(seed: u64, parts: usize, v: u32) -> u8 {
    (mix(seed ^ 0x7461_7267_6574 ^ u64::from(v)) % parts as u64) as u8
}

/// The master partition of vertex `v`, which lives on the partitions of `set`: one of
/// them by a seeded hash (the target's partition under [`Partitioner::ByTarget`]; a
/// hashed partition for an isolated vertex). The master's partition is added to `set`.
pub(crate) fn master_of(
    partitioner: Partitioner,
    parts: usize,
    seed: u64,
    v: u32,
    set: &mut u64,
) -> u8 {
    let h = mix(seed ^ 0x6d61_7374_6572 ^ u64::from(v).wrapping_mul(0x9e37_79b9));
    let p = if partitioner == Partitioner::ByTarget {
        u32::from(owner(seed, parts, v))
    } else if *set == 0 {
        (h % parts as u64) as u32
    } else {
        nth_set_bit(*set, (h % u64::from(set.count_ones())) as u32)
    };
    *set |= 1 << p;
    p as u8
}

fn oblivious_placement(graph: &EdgeList, parts: usize, presence: &mut [u64]) -> Vec<u8> {
    let all = if parts == 64 {
        u64::MAX
    } else {
        (1u64 << parts) - 1
    };
    let mut load = vec![0u64; parts];
    graph
        .edges
        .iter()
        .map(|&(u, v)| {
            let (a, b) = (presence[u as usize], presence[v as usize]);
            let candidates = if a & b != 0 {
                a & b
            } else if a | b != 0 {
                a | b
            } else {
                all
            };
            let mut best = candidates.trailing_zeros() as usize;
            let mut rest = candidates & (candidates - 1);
            while rest != 0 {
                let p = rest.trailing_zeros() as usize;
                if load[p] < load[best] {
                    best = p;
                }
                rest &= rest - 1;
            }
            // Keep the cut balanced: a candidate far above the least loaded partition is
            // passed over (PowerGraph's balance term).
            let min = *load.iter().min().unwrap_or(&0);
            if load[best] > min + 1 + min / 8 {
                best = load.iter().position(|&l| l == min).unwrap_or(best);
            }
            load[best] += 1;
            presence[u as usize] |= 1 << best;
            presence[v as usize] |= 1 << best;
            best as u8
        })
        .collect()
}

/// `rows x cols = parts` with `rows` the largest divisor not above the square root.
fn grid_shape(parts: usize) -> (usize, usize) {
    let rows = (1..=parts)
        .take_while(|r| r * r <= parts)
        .filter(|r| parts.is_multiple_of(*r))
        .last()
        .unwrap_or(1);
    (rows, parts / rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(n: u32) -> EdgeList {
        EdgeList {
            ids: (0..u64::from(n) + 1).collect(),
            edges: (0..n).map(|i| (i, (i + 1) % n)).collect(),
            weights: None,
        }
    }

    #[test]
    fn grid_shapes() {
        assert_eq!(grid_shape(1), (1, 1));
        assert_eq!(grid_shape(4), (2, 2));
        assert_eq!(grid_shape(6), (2, 3));
        assert_eq!(grid_shape(7), (1, 7));
    }

    #[test]
    fn every_vertex_has_a_master_among_its_partitions() {
        let g = ring(50);
        for p in [
            Partitioner::Random,
            Partitioner::Oblivious,
            Partitioner::Grid,
            Partitioner::ByTarget,
        ] {
            for parts in 1..=9 {
                let cut = VertexCut::new(&g, parts, p, 3).unwrap();
                for (e, &(u, v)) in g.edges.iter().enumerate() {
                    let q = usize::from(cut.edge_partitions()[e]);
                    assert!(q < parts && cut.spans(u, q) && cut.spans(v, q));
                }
                for v in 0..51 {
                    assert!(cut.spans(v, cut.master(v)));
                }
                assert_eq!(cut.presence(50).count_ones(), 1); // isolated
                let rf = cut.replication_factor();
                assert!((1.0..=parts as f64).contains(&rf));
                // The copies per vertex, counted here.
                let copies: u32 = (0..51).map(|v| cut.presence(v).count_ones()).sum();
                assert_eq!(rf, f64::from(copies) / 51.0);
                // A ring cut in several places has vertices on two partitions.
                assert_eq!(rf > 1.0, parts > 1, "{p:?} {parts}");
                assert_eq!(cut.edges_per_partition().iter().sum::<usize>(), 50);
            }
        }
    }

    #[test]
    fn grid_bounds_replication() {
        let g = EdgeList {
            ids: (0..40).collect(),
            edges: (0..40u32)
                .flat_map(|u| (0..40u32).map(move |v| (u, v)))
                .collect(),
            weights: None,
        };
        let cut = VertexCut::new(&g, 4, Partitioner::Grid, 1).unwrap();
        for v in 0..40 {
            assert!(cut.presence(v).count_ones() <= 3);
        }
    }

    #[test]
    fn by_target_keeps_in_edges_with_their_master() {
        let g = ring(50);
        for parts in 1..=5 {
            let cut = VertexCut::new(&g, parts, Partitioner::ByTarget, 9).unwrap();
            for (e, &(_, v)) in g.edges.iter().enumerate() {
                assert_eq!(usize::from(cut.edge_partitions()[e]), cut.master(v));
            }
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        let g = ring(3);
        assert!(VertexCut::new(&g, 0, Partitioner::Random, 0).is_err());
        assert!(VertexCut::new(&g, 65, Partitioner::Random, 0).is_err());
        let bad = EdgeList {
            ids: vec![0],
            edges: vec![(0, 1)],
            weights: None,
        };
        assert!(VertexCut::new(&bad, 1, Partitioner::Random, 0).is_err());
    }
}
