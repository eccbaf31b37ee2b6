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
//! - **Per-node arenas** ([`Arenas`]): the heap section is divided into one arena per node,
//!   as a pure function of the region's layout. A node allocates and frees only in its own
//!   arena, so no allocator operation ever needs an atomic that crosses nodes.
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
mod live;
pub mod node_heap;
mod runs;

pub use arena::{ArenaRange, Arenas, MIN_ARENA_LINES};
pub use error::AllocError;
pub use node_heap::{ClassStats, LargeStats, NodeHeap, NodeHeapStats};
