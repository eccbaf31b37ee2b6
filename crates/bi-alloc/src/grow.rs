//! What a growing heap asks for more memory: the one interface between a node's heap
//! ([`NodeHeap`](crate::NodeHeap)) and where its memory comes from (the pool's extents,
//! [`Extents`](crate::Extents), or anything else that hands out ranges).

use bi_core::heap::HeapError;
use std::ops::Range;

/// Where a growing [`NodeHeap`](crate::NodeHeap) gets more memory.
///
/// ```
/// use bi_alloc::{Grow, NodeHeap};
/// use bi_core::heap::{Heap, HeapError};
/// use bi_core::line::LineSize;
/// use std::ops::Range;
///
/// /// Grants one range (the first request, in whole lines), then nothing.
/// struct Once(bool);
/// impl Grow for Once {
///     fn grow(&mut self, bytes: usize) -> Result<Range<usize>, HeapError> {
///         match std::mem::replace(&mut self.0, true) {
///             false => Ok(0..bytes.next_multiple_of(64)),
///             true => Err(HeapError::OutOfMemory { requested: bytes, free: 0 }),
///         }
///     }
/// }
/// let source = Box::new(Once(false));
/// let mut heap = NodeHeap::growing(0..64 * 64, LineSize::X86, &[], source).unwrap();
/// assert!(heap.alloc(64).is_ok()); // granted
/// assert!(heap.alloc(60 * 64).is_err()); // the source has nothing more
/// ```
pub trait Grow: Send + Sync {
    /// A range of whole lines, at least `bytes` long, that the heap now owns and nobody
    /// else does. [`HeapError::OutOfMemory`] when the pool has no room for it.
    ///
    /// ```
    /// use bi_alloc::{Extents, Grow};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut extents = Extents::new(s.nodes[0].clone(), s.slot(0) as u64).unwrap();
    /// let a = extents.grow(100).unwrap(); // one extent: whole lines, at least 100 bytes
    /// assert!(a.len() >= 100 && a.start % 64 == 0);
    /// let b = extents.grow(100).unwrap();
    /// assert_eq!(b.start, a.end); // first fit: the next free extent
    /// assert_eq!(extents.owned().unwrap(), [a.start..b.end]); // merged
    /// ```
    fn grow(&mut self, bytes: usize) -> Result<Range<usize>, HeapError>;
}
