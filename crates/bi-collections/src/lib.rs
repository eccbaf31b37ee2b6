//! # bi-collections: a tree and a hash map shared across non-coherent nodes
//!
//! Several nodes map one memory, but their caches are not kept coherent. These
//! structures let every node read through its own cache, with **no cache operation on
//! the read path**, while one writer updates them RCU-style on top of the
//! [`bi_core::runtime`]:
//!
//! - [`BiTree`]: a Bonsai tree (weight-balanced, path copying, rotations that allocate
//!   fresh nodes): `get`, `range`, ordered `iter`, `len`. [`EpochBonsai`] is the same
//!   algorithm over crossbeam-epoch, the coherent baseline it is measured against.
//! - [`BiHashMap`]: immutable chain nodes, copy-on-write updates, resizing by publishing a
//!   new bucket array while readers keep reading the old one; optional partitions, each
//!   with its own writer.
//! - [`delegate`]: writes from any thread or node travel to the structure's single writer
//!   over a non-coherent channel and are applied in batches, one fence per batch.
//!
//! ## What a reader sees, and when
//!
//! Between two quiescence passes of its node a reader may see an older version of a
//! structure, never a torn one (every version is made of immutable, generation-checked
//! objects), and never one replaced longer ago than the runtime's bound (a pass period,
//! the pass's own duration and the clock skew). A lookup that *misses* re-reads the root from memory before it answers
//! "absent" (lazy invalidation), so a key whose insertion was published before the lookup
//! began is always found. Memory of replaced nodes is reused only after every node has
//! passed twice, and a reader that meets reused memory anyway (a prefetch, a node excluded
//! for a late pass) rejects it by its generation and reads again.
//!
//! ## The handles
//!
//! As with left-right, there is one write handle and any number of read handles; unlike
//! left-right, the read handles may live on other nodes (other processes, other hosts):
//!
//! ```
//! use bi_collections::{ApplyBatch, BiTree, Op};
//! use bi_core::runtime::testing::Setup;
//!
//! let s = Setup::new(2, 7); // two emulated nodes with non-coherent caches
//! let tree = BiTree::<u64, u64>::at(s.slot(0));
//! let mut w = tree.write_handle(s.writer(0)).unwrap();
//! w.apply_batch(&[Op::Insert(1, 10), Op::Insert(2, 20), Op::Insert(3, 30)]).unwrap();
//!
//! let r = tree.read_handle(&s.nodes[1]).unwrap(); // a reader on the other node
//! assert_eq!(r.get(&2).unwrap(), Some(20)); // found: a miss would re-read the root
//! let view = r.enter();
//! assert_eq!(view.range(2..).unwrap(), vec![(2, 20), (3, 30)]);
//! ```
//!
//! [`testing`] holds the model checker the property tests and fuzz targets share.

mod error;
pub mod op;

pub mod delegate;
pub mod map;
pub mod named;
pub mod testing;
pub mod tree;

pub use delegate::{DelegationClient, DelegationLayout, DelegationServer};
pub use error::CollectionError;
pub use map::{BiHashMap, MapReadHandle, MapRef, MapWriteHandle};
pub use op::{ApplyBatch, BatchReport, Op};
pub use tree::{BiTree, EpochBonsai, TreeReadHandle, TreeRef, TreeWriteHandle};
