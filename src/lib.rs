//! # bi: Bounded Incoherence
//!
//! Share a map or an ordered index between *nodes* that see the same memory but whose
//! caches are **not** kept coherent with each other: hosts on a CXL memory pool, sockets
//! of a NUMA machine with cross-socket coherence disabled, processes mapping one file.
//!
//! Two statements set a service up: open the pool (a region file or a DAX / CXL
//! device, made if missing), then the structure by name. Every process does the same;
//! the first to open a structure becomes its writer and the others send it their
//! writes:
//!
//! ```
//! use bi::prelude::*;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("sessions.bi");
//! let pool = Pool::open_or_create(&path, PoolConfig::default())?;
//! let sessions = pool.map::<String, String>("sessions")?;
//! sessions.insert("token-1".into(), "alice".into())?;
//! assert_eq!(sessions.get("token-1")?, Some("alice".into()));
//!
//! // Another process (here: another pool of the same file, another node).
//! let there = Pool::open_or_create(&path, PoolConfig::default())?;
//! let remote = there.map::<String, String>("sessions")?;
//! assert!(!remote.is_writer());
//! assert_eq!(remote.insert("token-2".into(), "bob".into())?, None); // sent to the writer
//! assert_eq!(remote.get("token-2")?, Some("bob".into())); // reads its own writes
//!
//! // One error type: decide on its kind, read its message.
//! let err = pool.map::<u64, u64>("sessions").unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::WrongTypes);
//! # Ok::<(), bi::Error>(())
//! ```
//!
//! A handle ([`SharedMap`], [`SharedTree`]) is `Send + Sync + Clone`: one serves every
//! thread and task of a process. [`shared`] tells who writes, what reads see and what
//! happens when the writer dies; [`Error`] and [`ErrorKind`] are the front door's one
//! error type.
//!
//! # How it works
//!
//! Readers use their caches with no cache operation on the read path. Each node runs a
//! background *pass* that drops, every period, the lines the writers logged as changed,
//! so a stale line lives at most a bounded time; memory is never reused while a stale
//! line of it may exist anywhere; a write copies, writes back, and publishes with one
//! pointer store (RCU-style). The crates underneath, re-exported here:
//!
//! - [`core`] (`bi-core`): cache operations, memory views (real hardware and the
//!   non-coherence emulator), regions, the runtime (passes, writers, leases);
//! - [`alloc`] (`bi-alloc`): the shared-memory heap;
//! - [`collections`] (`bi-collections`): the tree, the hash map, delegation;
//! - [`graph`] (`bi-graph`): the graph engine (its command-line tool is its own
//!   crate's `cli` feature, not pulled in by `bi`);
//!
//! and, with the `hazards` feature, the `hazards` catalog: each hazard of non-coherent
//! sharing, shown by the shipped protocol with one mechanism switched off and absent with
//! every mechanism on. Everything runs on an ordinary coherent machine over the emulator,
//! whose nodes see each other's writes only through write-backs and invalidations:
//!
//! ```
//! use bi::core::mem::{Emulator, EmulatorConfig, MemView};
//!
//! let emu = Emulator::new(EmulatorConfig::new(4096, 2));
//! let (a, b) = (emu.node(0), emu.node(1));
//! b.store(0, &0u64).unwrap(); // nothing yet
//! assert_eq!(a.load::<u64>(0).unwrap(), 0); // a caches the line
//! b.store(0, &7u64).unwrap();
//! b.writeback(0, 8);
//! b.fence();
//! assert_eq!(a.load::<u64>(0).unwrap(), 0); // stale: a never invalidated
//! a.invalidate(0, 8);
//! a.fence();
//! assert_eq!(a.load::<u64>(0).unwrap(), 7);
//! ```
//!
//! # Trade-offs
//!
//! - **Reads are bounded-stale**: a lookup answers from the node's cache, at most one
//!   pass period (a millisecond by default) plus the skew allowance behind the newest
//!   write of another process, when the node's pass thread runs on time; a machine too
//!   loaded for that makes reads staler by the pass's lateness
//!   ([`Pool::longest_pass_gap`]). `get_fresh` pays a read from memory for the newest.
//! - **One writer per structure**: writes from other processes travel to it and back
//!   (microseconds on one host, and a serving thread that naps, costing CPU while warm:
//!   [`PoolConfig::serving`]); writes are serialized as with any single writer.
//! - **Writes cost write-backs and fences** (about a microsecond each on the machines
//!   measured); reads cost what a coherent structure's do.
//! - **A dead writer's role waits out its lease** (a second by default) before another
//!   process takes it; its unanswered requests are reported failed, never applied twice.

mod emulation;
mod error;
#[cfg(feature = "hazards")]
pub mod hazards;
pub mod inspect;
mod pool;
pub mod shared;

/// What a service imports: `use bi::prelude::*;`.
pub mod prelude {
    pub use crate::{Error, ErrorKind, Pool, PoolConfig, SharedMap, SharedTree};
}

pub use emulation::Emulation;
pub use error::PoolError;
pub use error::{Error, ErrorKind};
pub use pool::{Pool, PoolConfig};
pub use shared::{SharedMap, SharedStructure, SharedTree};

pub use bi_alloc as alloc;
pub use bi_collections as collections;
pub use bi_core as core;
pub use bi_graph as graph;
