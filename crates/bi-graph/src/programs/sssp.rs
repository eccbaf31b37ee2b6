//! Single-source shortest paths, Bellman-Ford style.

use crate::config::EngineConfig;
use crate::engine::{EdgeDirection, Graph, Run, VertexInfo, VertexProgram};
use crate::error::GraphError;

/// Single-source shortest paths: the source starts at 0, everything else at infinity; a
/// vertex that was signalled takes the minimum of its distance and `dist(u) + w` over its
/// in-edges `(u, v)`, and a vertex whose distance dropped signals the out-neighbours it
/// improves. Unit weights unless the graph has weights (which must be non-negative).
///
/// ```
/// use bi_graph::{run, EdgeList, EngineConfig, Sssp};
///
/// let g = EdgeList { ids: (0..3).collect(), edges: vec![(0, 1), (1, 2)], weights: None };
/// let config = EngineConfig { max_iterations: 10, ..EngineConfig::default() };
/// assert_eq!(run(&Sssp { source: 1 }, &g, &config)?.values, [f64::INFINITY, 0.0, 1.0]);
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sssp {
    /// The source vertex (dense index).
    pub source: u32,
}

impl VertexProgram for Sssp {
    type Data = f64;
    type Gather = f64;
    type Aggregate = u64;

    fn gather_direction(&self) -> EdgeDirection {
        EdgeDirection::In
    }
    fn scatter_direction(&self) -> EdgeDirection {
        EdgeDirection::Out
    }
    fn init(&self, vertex: &VertexInfo) -> f64 {
        if vertex.id == self.source {
            0.0
        } else {
            f64::INFINITY
        }
    }
    fn initially_active(&self, vertex: &VertexInfo) -> bool {
        vertex.id == self.source
    }
    fn zero(&self) -> f64 {
        f64::INFINITY
    }
    fn gather(&self, weight: f64, neighbour: &f64) -> f64 {
        neighbour + weight
    }
    fn sum(&self, a: f64, b: f64) -> f64 {
        a.min(b)
    }
    fn apply(&self, _vertex: &VertexInfo, data: &f64, total: f64, _globals: &u64) -> f64 {
        data.min(total)
    }
    fn scatter(&self, weight: f64, data: &f64, neighbour: &f64) -> bool {
        data + weight < *neighbour
    }
    fn aggregate_zero(&self) -> u64 {
        0
    }
    fn aggregate(&self, _vertex: &VertexInfo, old: &f64, new: &f64) -> u64 {
        u64::from(old != new)
    }
    fn combine(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

/// Distance of every vertex from `source` (`f64::INFINITY` when unreachable).
///
/// Runs to the fixed point (`config.max_iterations` is raised to the number of vertices
/// plus one if it is smaller). Negative or NaN weights and a source outside the graph are
/// errors.
///
/// ```
/// use bi_graph::{EdgeList, EngineConfig, sssp};
///
/// let g = EdgeList { ids: (0..4).collect(), edges: vec![(0, 1), (1, 2), (0, 2)], weights: Some(vec![1.0, 1.0, 5.0]) };
/// assert_eq!(sssp(&g, 0, &EngineConfig::default())?.values, [0.0, 1.0, 2.0, f64::INFINITY]);
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
pub fn sssp<G: Graph + ?Sized>(
    graph: &G,
    source: u32,
    config: &EngineConfig,
) -> Result<Run<f64>, GraphError> {
    if source as usize >= graph.num_vertices() {
        return Err(GraphError::InvalidArgument {
            reason: format!(
                "source {source} is not a vertex (the graph has {})",
                graph.num_vertices()
            ),
        });
    }
    if let Some(w) = graph.weights()
        && let Some(bad) = w.iter().find(|w| w.is_nan() || **w < 0.0)
    {
        return Err(GraphError::InvalidArgument {
            reason: format!("edge weight {bad} is negative or not a number"),
        });
    }
    let mut config = config.clone();
    config.max_iterations = config.max_iterations.max(graph.num_vertices() + 1);
    graph.run_program(&Sssp { source }, &config)
}
