//! PageRank as networkx defines it, as a GAS program.

use crate::config::EngineConfig;
use crate::edge_list::EdgeList;
use crate::engine::{EdgeDirection, Graph, Run, VertexInfo, VertexProgram};
use crate::error::GraphError;

/// PageRank with uniform teleport and dangling mass spread uniformly (networkx's
/// definition): ranks start at `1/N`; each superstep
///
/// ```text
/// rank'(v) = d * sum over in-edges (u, v) of rank(u) / out_degree(u)
///          + (d * dangling + 1 - d) / N
/// ```
///
/// where `dangling` is the total rank of vertices without out-edges; ranks always sum
/// to 1.
///
/// The data a vertex publishes is what its out-neighbours' gathers need: its *share*,
/// `rank / out_degree`, so a gather reads one word per edge and divides nothing. A
/// vertex without out-edges is read by no gather and publishes its rank itself.
/// [`PageRank::rank`] recovers the rank from the published value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PageRank {
    /// Damping factor (0.85 in networkx).
    pub damping: f64,
    /// Number of vertices of the graph.
    pub vertices: usize,
    /// Stop once the L1 change between supersteps falls below this.
    pub tolerance: Option<f64>,
}

impl PageRank {
    /// PageRank over a graph of `vertices` vertices, damping 0.85.
    pub fn new(vertices: usize, tolerance: Option<f64>) -> PageRank {
        PageRank {
            damping: 0.85,
            vertices,
            tolerance,
        }
    }

    /// The ranks that a run's published values (indexed by vertex) stand for: what
    /// [`pagerank`] returns, for callers of [`run`](crate::run) or
    /// [`run_detailed`](crate::run_detailed).
    pub fn ranks(graph: &EdgeList, values: &[f64]) -> Vec<f64> {
        Self::ranks_of(&Graph::out_degrees(graph), values)
    }

    /// The ranks of the vertices whose out-degrees are `out_degrees` and whose data
    /// after a run are `values` (see [`ranks`](Self::ranks)).
    pub fn ranks_of(out_degrees: &[u32], values: &[f64]) -> Vec<f64> {
        values
            .iter()
            .zip(out_degrees.iter().copied())
            .enumerate()
            .map(|(v, (&data, out_degree))| {
                let info = VertexInfo {
                    id: v as u32,
                    in_degree: 0,
                    out_degree,
                };
                PageRank::rank(&info, data)
            })
            .collect()
    }

    /// The rank a published value stands for.
    pub fn rank(vertex: &VertexInfo, data: f64) -> f64 {
        if vertex.out_degree == 0 {
            data
        } else {
            data * f64::from(vertex.out_degree)
        }
    }

    fn share(vertex: &VertexInfo, rank: f64) -> f64 {
        if vertex.out_degree == 0 {
            rank
        } else {
            rank / f64::from(vertex.out_degree)
        }
    }
}

impl VertexProgram for PageRank {
    type Data = f64;
    type Gather = f64;
    /// `[dangling rank, L1 change]`.
    type Aggregate = [f64; 2];

    fn gather_direction(&self) -> EdgeDirection {
        EdgeDirection::In
    }
    fn scatter_direction(&self) -> EdgeDirection {
        EdgeDirection::None
    }
    fn init(&self, vertex: &VertexInfo) -> f64 {
        Self::share(vertex, 1.0 / self.vertices as f64)
    }
    fn always_active(&self) -> bool {
        true
    }
    fn zero(&self) -> f64 {
        0.0
    }
    #[inline]
    fn gather(&self, _weight: f64, neighbour: &f64) -> f64 {
        *neighbour
    }
    #[inline]
    fn sum(&self, a: f64, b: f64) -> f64 {
        a + b
    }
    /// `globals[0]` is the teleport term (see [`globals`](VertexProgram::globals)).
    #[inline]
    fn apply(&self, vertex: &VertexInfo, _data: &f64, total: f64, globals: &[f64; 2]) -> f64 {
        Self::share(vertex, self.damping * total + globals[0])
    }
    fn scatter(&self, _weight: f64, _data: &f64, _neighbour: &f64) -> bool {
        false
    }
    fn aggregate_zero(&self) -> [f64; 2] {
        [0.0, 0.0]
    }
    #[inline]
    fn aggregate(&self, vertex: &VertexInfo, old: &f64, new: &f64) -> [f64; 2] {
        let (old, new) = (Self::rank(vertex, *old), Self::rank(vertex, *new));
        let dangling = if vertex.out_degree == 0 { new } else { 0.0 };
        [dangling, (new - old).abs()]
    }
    #[inline]
    fn combine(&self, a: [f64; 2], b: [f64; 2]) -> [f64; 2] {
        [a[0] + b[0], a[1] + b[1]]
    }
    /// The teleport term `(d * dangling + 1 - d) / N`, and the L1 change.
    fn globals(&self, total: [f64; 2]) -> [f64; 2] {
        let d = self.damping;
        [(d * total[0] + (1.0 - d)) / self.vertices as f64, total[1]]
    }
    fn converged(&self, _step: usize, total: &[f64; 2]) -> bool {
        self.tolerance.is_some_and(|t| total[1] < t)
    }
}

/// PageRank of every vertex (damping 0.85, networkx's definition; see [`PageRank`]).
///
/// Runs exactly `config.max_iterations` supersteps, or stops earlier once the L1 change
/// between supersteps is below `config.tolerance`.
///
/// ```
/// use bi_graph::{EdgeList, EngineConfig, Mode, pagerank};
///
/// // 0 -> 1 -> 2 -> 0, and 3 dangling on 0.
/// let g = EdgeList { ids: (0..4).collect(), edges: vec![(0, 1), (1, 2), (2, 0), (3, 0)], weights: None };
/// let config = EngineConfig { nodes: 2, mode: Mode::BiOnDemand, max_iterations: 50, ..EngineConfig::default() };
/// let run = pagerank(&g, &config)?;
/// assert!((run.values.iter().sum::<f64>() - 1.0).abs() < 1e-12);
/// let plain = bi_graph::reference::pagerank(&g, 50, None);
/// assert!(run.values.iter().zip(&plain).all(|(a, b)| (a - b).abs() < 1e-12));
/// assert_eq!(run.stats.iterations, 50);
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
pub fn pagerank<G: Graph + ?Sized>(
    graph: &G,
    config: &EngineConfig,
) -> Result<Run<f64>, GraphError> {
    let program = PageRank::new(graph.num_vertices(), config.tolerance);
    let run = graph.run_program(&program, config)?;
    let values = PageRank::ranks_of(&graph.out_degrees(), &run.values);
    Ok(Run {
        values,
        stats: run.stats,
    })
}
