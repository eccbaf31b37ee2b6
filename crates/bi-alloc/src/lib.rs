//! # bi-alloc: the shared-memory heap
//!
//! Places objects inside a shared region for the Bounded Incoherence runtime of `bi-core`,
//! by implementing its heap seam ([`bi_core::heap::Heap`]).
//!
//! ## Why it looks the way it does
//!
//! The nodes sharing a region do not see each other's caches, so the heap is built to
//! never need them to:
//!
//! - **Extents on demand** ([`Extents`]): the heap section is cut into extents, and a
//!   structure's writer is granted extents as its heap runs out, under the pool lock; the
//!   extent table in the region records who owns each. Whoever writes a structure next
//!   takes over exactly its extents. Only the owner allocates and frees in its memory, so
//!   no allocator operation ever needs an atomic that crosses nodes.
//! - **Per-node arenas** ([`Arenas`]), for code that runs the runtime by hand: the heap
//!   section divided evenly into one arena per node, as a pure function of the region's
//!   layout. A region's heap is used either this way or through extents, not both.
//! - **Line-padded slots** ([`class`]): every block is a whole number of lines starting
//!   on a line boundary, so two nodes never write one cache line and a write-back of one
//!   object can never carry (or lose) another object's bytes.
//! - **Reuse is reported** ([`Block::reused`](bi_core::heap::Block)): memory that held an
//!   object before may still be cached as that object somewhere, so the runtime tells its
//!   memory view (and the emulator's oracle) whenever a block is handed out again.
//! - **Exhaustion is a value**: a full arena is [`HeapError::OutOfMemory`], a bad size
//!   [`HeapError::BadSize`], a foreign or double free [`HeapError::ForeignBlock`]. The heap
//!   never panics on input.
//!
//! The heap only *places* memory: it never reads or writes the blocks it hands out (object
//! headers belong to the runtime), and its bookkeeping lives in the owning process, not in
//! the region (see [`node_heap`] for what that means on restart). It counts what it sees
//! ([`HeapStats`], [`NodeHeapStats`]); bytes retired but not yet reclaimed are the
//! runtime's to count, since the heap learns of a block only when it is freed.
//!
//! ```
//! use bi_alloc::{Arenas, NodeHeap};
//! use bi_core::heap::Heap;
//! use bi_core::region::{Layout, RegionConfig};
//!
//! let layout = Layout::compute(&RegionConfig::new(1 << 20).with_nodes(2)).unwrap();
//! let arenas = Arenas::split(&layout).unwrap();
//! let mut heaps: Vec<NodeHeap> = arenas
//!     .iter()
//!     .map(|a| NodeHeap::new(a.range(), layout.line_size()).unwrap())
//!     .collect();
//! let block = heaps[1].alloc(100).unwrap();
//! assert_eq!(arenas.node_of(block.offset), Some(1));
//! assert_eq!(block.offset % layout.line_size().get(), 0);
//! heaps[1].free(block).unwrap();
//! assert_eq!(heaps[1].stats().live, 0);
//! ```
//!
//! [`HeapError::OutOfMemory`]: bi_core::heap::HeapError::OutOfMemory
//! [`HeapError::BadSize`]: bi_core::heap::HeapError::BadSize
//! [`HeapError::ForeignBlock`]: bi_core::heap::HeapError::ForeignBlock
//! [`HeapStats`]: bi_core::heap::HeapStats

pub mod arena;
pub mod class;
pub mod error;
pub mod extents;
mod grow;
mod live;
pub mod node_heap;
mod runs;

pub use arena::{ArenaRange, Arenas};
pub use error::AllocError;
pub use extents::Extents;
pub use grow::Grow;
pub use node_heap::{ClassStats, LargeStats, NodeHeap, NodeHeapStats};
