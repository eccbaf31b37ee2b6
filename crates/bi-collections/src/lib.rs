//! # bi-collections: shared tree and hash map
//!
//! *Being built.* This crate will hold data structures that several non-coherent nodes
//! read through their caches with no cache operation on the read path:
//!
//! - `BiTree<K, V>`: a Bonsai tree (weight-balanced, path copying, rotations that
//!   allocate fresh nodes and retire the old ones) with lookups, range scans, ordered
//!   iteration and `len`;
//! - `BiHashMap<K, V>`: immutable chain nodes, copy-on-write updates, resizing by
//!   publishing a new bucket array while readers keep reading.
//!
//! Both will look keys up under a guard with lazy invalidation on a miss, accept one
//! writer per structure (or per partition) and take writes from other threads and nodes
//! through delegation channels, applied in batches.

mod error;
pub mod op;

pub mod delegate;
pub mod map;
pub mod testing;
pub mod tree;

pub use delegate::{DelegationClient, DelegationLayout, DelegationServer};
pub use error::CollectionError;
pub use map::{BiHashMap, MapReadHandle, MapRef, MapWriteHandle};
pub use op::{ApplyBatch, BatchReport, Op};
pub use tree::{BiTree, EpochBonsai, TreeReadHandle, TreeRef, TreeWriteHandle};
