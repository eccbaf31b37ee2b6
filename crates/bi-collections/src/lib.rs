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
//! ## Deploying: one writer process, any number of reader processes
//!
//! Through the `bi` facade's pool, each process maps the region file, runs one node of
//! it and opens the structure by name and type, in two statements (the whole program is
//! `examples/two_processes.rs` at the repository's root: `cargo run --release --example
//! two_processes`):
//!
//! ```ignore
//! // The writer process.
//! let pool = bi::Pool::open_or_create("/dev/shm/orders.bi", bi::PoolConfig::default())?;
//! let mut orders = pool.map_writer::<u64, Order>("orders")?;
//! orders.insert(42, order)?; // visible to every node once it returns
//!
//! // A reader process (on this host, or another host of the memory pool).
//! let pool = bi::Pool::open_or_create("/dev/shm/orders.bi", bi::PoolConfig::default())?;
//! let orders = pool.map_reader::<u64, Order>("orders")?;
//! let o = orders.get(&42)?;
//! ```
//!
//! Keys and values are plain data (integers, arrays, your own `Pod` types marked
//! [`Plain`]) or strings and byte strings (`String`, `Vec<u8>`, `Box<str>`,
//! `Box<[u8]>`), looked up by their borrowed form (`map.get("key")`; see [`stored`]).
//!
//! A second writer is refused ([`BiError::WriterAlive`](bi_core::runtime::BiError)) while
//! the first is alive; a writer that is killed is replaced by the next process that opens
//! the map as writer, on its node or another, which **adopts** the map from memory
//! ([`naming`]): every write whose `insert` returned is there. A structure's memory comes
//! from the region's heap in extents granted to it as it grows, so one writer can use
//! the whole heap. Opening the name with other key or value types is an error, never a
//! reinterpretation. More reader processes of a host can *join* the node one of them
//! runs instead of running nodes of their own (`PoolConfig::join`).
//!
//! ## What a reader sees, and when
//!
//! Between two quiescence passes of its node a reader may see an older version of a
//! structure, never a torn one (every version is made of immutable, generation-checked
//! objects), and never one replaced longer ago than the runtime's bound (a pass period,
//! the pass's own duration and the clock skew), for misses as for hits. A *fresh* lookup
//! (`get_fresh`) re-reads the root from memory before it answers "absent" (lazy
//! invalidation), so a key whose insertion was published before the lookup began is
//! always found. Memory of replaced nodes is reused only after every node has
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
//!
//! ## Trade-offs
//!
//! What bi gives:
//!
//! - reads that use the cache as on one coherent machine (no cache operation, no fence, no
//!   atomic read-modify-write on the read path), a bounded staleness (a pass period plus
//!   the pass and the clock skew), and no torn or reused object ever returned;
//! - sharing across nodes that have no coherence and no cross-node atomics at all;
//! - a writer that can die at any point without losing an acknowledged write.
//!
//! What it costs:
//!
//! - **one writer per structure** (per partition of a map). Writes from elsewhere are
//!   delegated to it ([`delegate`]); a second writer is an error, not a second lock holder;
//! - **writes cost more than on a coherent machine**: every new object is written back to
//!   memory and every retired one marked, so an update costs several times its
//!   crossbeam-epoch twin (see the README's benchmark table for the measured ratios);
//! - **a reader may see an old version** for up to the staleness bound, as with any RCU
//!   scheme, plus the time its node's pass takes; a miss is re-checked against memory, so
//!   a key published before the lookup is never reported absent;
//! - **memory is reused late**: only after every live node has passed twice (a
//!   millisecond each by default), so retired memory is a few pass periods of updates;
//! - **keys and values are plain data or strings** ([`Stored`]): a `Pod` type marked
//!   [`Plain`] is stored as its bytes; `String`, `Vec<u8>` and their boxed forms keep
//!   up to 16 bytes in the entry and the rest in a byte string of their own, so a lookup
//!   of a longer key reads one or two lines more, and every insert of one writes (and
//!   every replacement retires) a string; a plain value too large for a bucket line
//!   lives behind a link, one more line per lookup;
//! - **each node runs a background pass** (a thread waking every millisecond), and a node
//!   that stops passing is excluded after its lease, after which it re-reads everything;
//!   processes of one host that join one node share its pass, but read only, fence on
//!   entering a section, and make the node's passes act on every structure;
//! - a structure whose writer died is adopted only once the writer's lease has run out,
//!   and a node that restarts waits out its old lease (a second by default) before it
//!   can claim its id again; adopting walks the whole structure and invalidates its
//!   memory on every node once;
//! - **memory granted to a structure stays its own**: extents are never given back to
//!   the region, even when the structure shrinks.

mod entry;
mod error;
pub mod op;

pub mod delegate;
pub mod map;
pub mod naming;
mod refresh;
mod show;
pub mod stored;
mod strings;
pub mod testing;
pub mod tree;

pub use delegate::{DelegationClient, DelegationLayout, DelegationServer};
pub use error::CollectionError;
pub use map::{BiHashMap, MapReadHandle, MapRef, MapWriteHandle};
pub use op::{ApplyBatch, BatchReport, Condition, Decided, Op, compared_value, found_value};
pub use refresh::Refresh;
pub use stored::{Plain, Query, Stored};
pub use tree::{BiTree, EpochBonsai, TreeReadHandle, TreeRef, TreeWriteHandle};
