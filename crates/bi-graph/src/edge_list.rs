//! A graph as the engine receives it: dense vertex indices, the original ids beside them.

/// A directed graph with dense vertex indices `0..ids.len()`.
///
/// Readers and generators produce it; partitioners and the engine consume it. The
/// original (possibly sparse, 64-bit) id of vertex `i` is `ids[i]`; output is written
/// with those ids. Isolated vertices are allowed (an index with no edge).
///
/// ```
/// use bi_graph::EdgeList;
///
/// // Original ids 100, 7 and 42 become dense indices 0, 1 and 2.
/// let g = EdgeList { ids: vec![100, 7, 42], edges: vec![(0, 1), (1, 2)], weights: None };
/// assert_eq!(g.ids[g.edges[1].1 as usize], 42);
/// assert_eq!(g.num_vertices(), 3);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EdgeList {
    /// Original id of each vertex, indexed by dense index.
    pub ids: Vec<u64>,
    /// Edges `(source, target)` as dense indices.
    pub edges: Vec<(u32, u32)>,
    /// One weight per edge, when the input had a third column.
    pub weights: Option<Vec<f64>>,
}

impl EdgeList {
    /// Number of vertices.
    ///
    /// ```
    /// use bi_graph::EdgeList;
    ///
    /// let g = EdgeList { ids: vec![10, 20, 30], edges: vec![(0, 1)], weights: None };
    /// assert_eq!((g.num_vertices(), g.num_edges()), (3, 1));
    /// ```
    pub fn num_vertices(&self) -> usize {
        self.ids.len()
    }

    /// Number of edges.
    ///
    /// ```
    /// use bi_graph::EdgeList;
    ///
    /// let g = EdgeList { ids: vec![1, 2], edges: vec![(0, 1), (1, 0), (0, 1)], weights: None };
    /// assert_eq!(g.num_edges(), 3); // parallel edges count
    /// ```
    pub fn num_edges(&self) -> usize {
        self.edges.len()
    }

    /// Weight of edge `e` (1 when the graph is unweighted).
    ///
    /// ```
    /// use bi_graph::EdgeList;
    ///
    /// let mut g = EdgeList { ids: vec![1, 2], edges: vec![(0, 1)], weights: None };
    /// assert_eq!(g.weight(0), 1.0);
    /// g.weights = Some(vec![2.5]);
    /// assert_eq!(g.weight(0), 2.5);
    /// ```
    pub fn weight(&self, e: usize) -> f64 {
        self.weights.as_ref().map_or(1.0, |w| w[e])
    }
}
