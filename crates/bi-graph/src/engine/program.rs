//! The vertex-program interface: PowerGraph's gather, apply, scatter.

use bytemuck::Pod;

/// Which edges of a vertex a phase visits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EdgeDirection {
    /// No edges.
    None,
    /// Edges pointing at the vertex (the neighbour is the source).
    In,
    /// Edges leaving the vertex (the neighbour is the target).
    Out,
    /// Both.
    Both,
}

impl EdgeDirection {
    /// Whether in-edges are visited.
    pub fn incoming(self) -> bool {
        matches!(self, EdgeDirection::In | EdgeDirection::Both)
    }

    /// Whether out-edges are visited.
    pub fn outgoing(self) -> bool {
        matches!(self, EdgeDirection::Out | EdgeDirection::Both)
    }
}

/// What a program knows about a vertex besides its data: its dense index and its degrees
/// in the whole graph (not just the local partition).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VertexInfo {
    /// Dense index.
    pub id: u32,
    /// Edges pointing at it.
    pub in_degree: u32,
    /// Edges leaving it.
    pub out_degree: u32,
}

/// A vertex program in PowerGraph's gather-apply-scatter (GAS) shape.
///
/// Each superstep, for every vertex:
///
/// 1. **gather**: every partition holding some of the vertex's `gather_direction` edges
///    folds [`gather`](VertexProgram::gather) over them with [`sum`](VertexProgram::sum),
///    starting from [`zero`](VertexProgram::zero); the master folds those partial sums,
///    in increasing partition order, into one total. `sum` must be commutative and
///    associative (the engine fixes the order anyway, so floating-point results are
///    reproducible and identical across modes);
/// 2. **apply**: the master computes the new data from the old data, the total, and the
///    global aggregate of the previous superstep. Programs that are not
///    [`always_active`](VertexProgram::always_active) apply only to vertices that were
///    signalled;
/// 3. **scatter**: for vertices whose data changed, every partition visits their
///    `scatter_direction` edges and [`scatter`](VertexProgram::scatter) decides whether
///    to signal the neighbour, which is then applied in the next superstep.
///
/// After apply, [`aggregate`](VertexProgram::aggregate) is folded over all masters with
/// [`combine`](VertexProgram::combine); the total is passed to the next apply (PageRank's
/// dangling mass) and to [`converged`](VertexProgram::converged).
///
/// Data, gather values and aggregates are plain bytes (`Pod`) of at most 16 bytes: they
/// live in shared memory and travel in fixed-size messages.
///
/// ```
/// use bi_graph::{EdgeDirection, EdgeList, EngineConfig, VertexInfo, VertexProgram};
///
/// /// Each vertex learns the largest index among its in-neighbours and itself.
/// struct MaxIn;
///
/// impl VertexProgram for MaxIn {
///     type Data = u64;
///     type Gather = u64;
///     type Aggregate = u64;
///     fn gather_direction(&self) -> EdgeDirection { EdgeDirection::In }
///     fn scatter_direction(&self) -> EdgeDirection { EdgeDirection::Out }
///     fn init(&self, v: &VertexInfo) -> u64 { u64::from(v.id) }
///     fn zero(&self) -> u64 { 0 }
///     fn gather(&self, _weight: f64, neighbour: &u64) -> u64 { *neighbour }
///     fn sum(&self, a: u64, b: u64) -> u64 { a.max(b) }
///     fn apply(&self, _v: &VertexInfo, data: &u64, total: u64, _g: &u64) -> u64 { (*data).max(total) }
///     fn scatter(&self, _w: f64, data: &u64, neighbour: &u64) -> bool { data > neighbour }
///     fn aggregate_zero(&self) -> u64 { 0 }
///     fn aggregate(&self, _v: &VertexInfo, _old: &u64, _new: &u64) -> u64 { 0 }
///     fn combine(&self, a: u64, b: u64) -> u64 { a + b }
/// }
///
/// let g = EdgeList { ids: (0..3).collect(), edges: vec![(2, 1), (1, 0)], weights: None };
/// let run = bi_graph::run(&MaxIn, &g, &EngineConfig::default())?;
/// assert_eq!(run.values, [2, 2, 2]);
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
pub trait VertexProgram: Sync {
    /// The value a vertex holds (owned by its master, read by its replicas).
    type Data: Pod + Send + Sync;
    /// What gather produces and `sum` folds.
    type Gather: Pod + Send + Sync;
    /// The global value folded over all masters after each apply.
    type Aggregate: Pod + Send + Sync;

    /// Edges gathered over.
    fn gather_direction(&self) -> EdgeDirection;
    /// Edges scattered over.
    fn scatter_direction(&self) -> EdgeDirection;
    /// Initial data of a vertex.
    fn init(&self, vertex: &VertexInfo) -> Self::Data;
    /// Whether a vertex's initial data counts as a change (it scatters in superstep 0).
    fn initially_active(&self, _vertex: &VertexInfo) -> bool {
        true
    }
    /// Whether every vertex applies every superstep (no signalling; PageRank).
    fn always_active(&self) -> bool {
        false
    }
    /// The identity of `sum`.
    fn zero(&self) -> Self::Gather;
    /// The contribution of one edge, given its weight (1 on unweighted graphs) and the
    /// neighbour's data.
    fn gather(&self, weight: f64, neighbour: &Self::Data) -> Self::Gather;
    /// Folds two gather values (commutative, associative).
    fn sum(&self, a: Self::Gather, b: Self::Gather) -> Self::Gather;
    /// New data of a vertex from its old data, its gather total and the previous
    /// superstep's aggregate.
    fn apply(
        &self,
        vertex: &VertexInfo,
        data: &Self::Data,
        total: Self::Gather,
        globals: &Self::Aggregate,
    ) -> Self::Data;
    /// Whether a vertex that changed to `data` signals the neighbour across an edge of
    /// the given weight.
    fn scatter(&self, weight: f64, data: &Self::Data, neighbour: &Self::Data) -> bool;
    /// The identity of `combine`.
    fn aggregate_zero(&self) -> Self::Aggregate;
    /// One master's contribution to the aggregate, from its data before and after apply.
    fn aggregate(&self, vertex: &VertexInfo, old: &Self::Data, new: &Self::Data)
    -> Self::Aggregate;
    /// Folds two aggregates.
    fn combine(&self, a: Self::Aggregate, b: Self::Aggregate) -> Self::Aggregate;
    /// What [`apply`](VertexProgram::apply) receives as `globals` from a superstep's
    /// combined aggregate, computed once per superstep (the identity by default).
    /// PageRank turns the dangling mass into its teleport term here, so that apply does
    /// not divide by the vertex count for every vertex.
    fn globals(&self, total: Self::Aggregate) -> Self::Aggregate {
        total
    }
    /// Whether to stop after superstep `step` (0-based) given its aggregate.
    fn converged(&self, _step: usize, _total: &Self::Aggregate) -> bool {
        false
    }
}
