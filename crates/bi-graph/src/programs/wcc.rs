//! Weakly connected components by label propagation.

use crate::config::EngineConfig;
use crate::engine::{EdgeDirection, Graph, Run, VertexInfo, VertexProgram};
use crate::error::GraphError;

/// Weakly connected components: edges are read as undirected, every vertex starts with
/// its own index as label and takes the smallest label among its neighbours until
/// nothing changes, so each component ends labelled with its smallest index.
///
/// ```
/// use bi_graph::{run, EdgeList, EngineConfig, Wcc};
///
/// let g = EdgeList { ids: (0..5).collect(), edges: vec![(1, 0), (3, 2), (4, 3)], weights: None };
/// let config = EngineConfig { max_iterations: 10, ..EngineConfig::default() };
/// assert_eq!(run(&Wcc, &g, &config)?.values, [0, 0, 2, 2, 2]);
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wcc;

impl VertexProgram for Wcc {
    type Data = u32;
    type Gather = u32;
    type Aggregate = u64;

    fn gather_direction(&self) -> EdgeDirection {
        EdgeDirection::Both
    }
    fn scatter_direction(&self) -> EdgeDirection {
        EdgeDirection::Both
    }
    fn init(&self, vertex: &VertexInfo) -> u32 {
        vertex.id
    }
    fn zero(&self) -> u32 {
        u32::MAX
    }
    fn gather(&self, _weight: f64, neighbour: &u32) -> u32 {
        *neighbour
    }
    fn sum(&self, a: u32, b: u32) -> u32 {
        a.min(b)
    }
    fn apply(&self, _vertex: &VertexInfo, data: &u32, total: u32, _globals: &u64) -> u32 {
        (*data).min(total)
    }
    fn scatter(&self, _weight: f64, data: &u32, neighbour: &u32) -> bool {
        data < neighbour
    }
    fn aggregate_zero(&self) -> u64 {
        0
    }
    fn aggregate(&self, _vertex: &VertexInfo, old: &u32, new: &u32) -> u64 {
        u64::from(old != new)
    }
    fn combine(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

/// The weakly connected component of every vertex, named by its smallest dense index.
///
/// Runs to the fixed point: `config.max_iterations` is raised to the number of vertices
/// plus one if it is smaller (label propagation needs as many supersteps as the largest
/// component's diameter).
///
/// ```
/// use bi_graph::{EdgeList, EngineConfig, wcc};
///
/// let g = EdgeList { ids: (0..5).collect(), edges: vec![(1, 0), (3, 2), (4, 3)], weights: None };
/// assert_eq!(wcc(&g, &EngineConfig::default())?.values, [0, 0, 2, 2, 2]);
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
pub fn wcc<G: Graph + ?Sized>(graph: &G, config: &EngineConfig) -> Result<Run<u32>, GraphError> {
    let mut config = config.clone();
    config.max_iterations = config.max_iterations.max(graph.num_vertices() + 1);
    graph.run_program(&Wcc, &config)
}
