//! # bi: Bounded Incoherence
//!
//! Share data structures between *nodes* (hosts on a CXL memory pool, sockets of a NUMA
//! machine with cross-socket coherence disabled, processes mapping one file) that see the
//! same memory but whose caches are **not** kept coherent with each other.
//!
//! This facade re-exports the crates of the ecosystem:
//!
//! - [`core`] (`bi-core`): cache operations, memory views (real hardware and the
//!   non-coherence emulator), shared regions and offset pointers;
//! - [`alloc`] (`bi-alloc`): the shared-memory heap;
//! - [`collections`] (`bi-collections`): shared tree and hash map;
//! - [`graph`] (`bi-graph`): the graph engine;
//!
//! and, with the `hazards` feature, holds the `hazards` catalog: each hazard of
//! non-coherent sharing, shown by the shipped protocol with one mechanism switched off and
//! absent with every mechanism on.
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

mod emulation;
mod error;
#[cfg(feature = "hazards")]
pub mod hazards;
mod pool;
pub mod shared;

pub use emulation::Emulation;
pub use error::{Error, ErrorKind};
pub use pool::{Pool, PoolConfig, PoolError};
pub use shared::{Shared, SharedMap, SharedTree};

pub use bi_alloc as alloc;
pub use bi_collections as collections;
pub use bi_core as core;
pub use bi_graph as graph;
