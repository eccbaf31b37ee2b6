//! What can go wrong when dividing a region's heap among its nodes.
//!
//! Placing one object is answered by [`HeapError`] (the error of `bi-core`'s heap seam);
//! this type covers the step before: deciding which part of the heap section belongs to
//! which node. A heap section too small for its node count is an error value, never a
//! degenerate arena of zero lines.

use bi_core::heap::HeapError;
use std::fmt;

/// An error dividing a heap section into per-node arenas, or building a node's heap.
///
/// ```
/// use bi_alloc::{AllocError, Arenas};
/// use bi_core::line::LineSize;
///
/// // 8 lines for 2 nodes: less than the minimum arena per node.
/// let err = Arenas::split_range(0..512, LineSize::X86, 2).unwrap_err();
/// assert!(matches!(err, AllocError::HeapTooSmall { nodes: 2, .. }));
/// println!("{err}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllocError {
    /// A heap needs at least one node to belong to.
    NoNodes,
    /// The heap section cannot give every node an arena of the minimum size.
    HeapTooSmall {
        /// Bytes of whole lines in the heap section.
        heap_bytes: usize,
        /// Number of nodes sharing it.
        nodes: usize,
        /// The smallest heap section that gives every node a minimal arena.
        needed: usize,
    },
    /// A node index the split does not have.
    NoSuchNode {
        /// The index asked for.
        node: usize,
        /// Number of nodes (valid indices are `0..nodes`).
        nodes: usize,
    },
    /// The heap of a node refused its arena.
    Heap(HeapError),
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocError::NoNodes => write!(f, "a heap must be split among at least one node"),
            AllocError::HeapTooSmall {
                heap_bytes,
                nodes,
                needed,
            } => write!(
                f,
                "heap section of {heap_bytes} bytes is too small for {nodes} node arenas: \
                 at least {needed} bytes needed"
            ),
            AllocError::NoSuchNode { node, nodes } => {
                write!(f, "node {node} does not exist (the heap has {nodes} nodes)")
            }
            AllocError::Heap(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for AllocError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AllocError::Heap(e) => Some(e),
            _ => None,
        }
    }
}

impl From<HeapError> for AllocError {
    fn from(e: HeapError) -> Self {
        AllocError::Heap(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn messages_name_the_values() {
        let e = AllocError::HeapTooSmall {
            heap_bytes: 512,
            nodes: 3,
            needed: 1536,
        };
        let msg = e.to_string();
        assert!(msg.contains("512") && msg.contains('3') && msg.contains("1536"));
        assert!(e.source().is_none());
        let e = AllocError::NoSuchNode { node: 5, nodes: 2 };
        assert!(e.to_string().contains("node 5"));
        let e = AllocError::from(HeapError::BadArena { reason: "empty" });
        assert!(e.source().is_some());
        assert!(AllocError::NoNodes.to_string().contains("at least one"));
    }
}
