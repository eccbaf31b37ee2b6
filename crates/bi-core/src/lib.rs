//! # bi-core: the ground of Bounded Incoherence
//!
//! Several *nodes* (hosts on a CXL memory pool, sockets with cross-socket coherence
//! switched off, processes mapping one file) share memory, but their caches are not kept
//! coherent with each other: a line another node wrote stays stale in my cache until I
//! invalidate it, and a line I wrote stays in my cache until I write it back.
//!
//! This crate holds what every layer above stands on:
//!
//! - [`line`](mod@line): cache-line geometry and the rounding of byte ranges to lines;
//! - [`cache`]: the real cache instructions (write back, invalidate, flush, fence), chosen
//!   at run time for the processor;
//! - [`mem`]: *memory views*, the seam that makes non-coherent code testable: the
//!   [`Hardware`](mem::Hardware) view and the [`Emulator`](mem::Emulator), a software
//!   model of non-coherent caches whose oracle counts stale reads and reads of reused
//!   memory;
//! - [`region`]: the shared pool with its versioned header and named roots, anonymous or
//!   mapped from a file that several processes share;
//! - [`ptr`]: [`ShPtr`](ptr::ShPtr), an offset into a region that means the same thing in
//!   every process;
//! - [`channel`]: single-producer single-consumer rings between nodes, for delegating
//!   writes to a structure's single writer and for passing messages;
//! - [`runtime`]: the Bounded Incoherence protocol itself: reader sections, publication,
//!   retirement, log rings, quiescence passes and a grace period sound without coherence;
//! - [`heap`]: the seam between the runtime and the shared-memory heap (`bi-alloc`), with
//!   [`BumpHeap`](heap::BumpHeap), a minimal heap for tests.
//!
//! # Who each public part is for
//!
//! The public surface is kept to what one of four kinds of user calls; everything else
//! is crate-private.
//!
//! - **Structure authors** (`bi-collections`, `bi-graph`, and anyone writing a new shared
//!   structure): [`region`] to make, open and name roots in a pool;
//!   [`runtime::NodeRuntime`] for a node's [`Reader`](runtime::Reader) and
//!   [`Writer`](runtime::Writer); the read path ([`BiGuard`](runtime::BiGuard)'s
//!   `fetch`, `walk`, `walk_via`, `lazy`, `bounded`, `fresh`); the write path
//!   (`alloc`, `publish`, `retire` and their `try_` forms, which give back what they
//!   could not publish); the object kinds ([`runtime::lines`], [`runtime::slots`],
//!   [`runtime::bytes`]); the protocol words as types ([`Link`](runtime::Link),
//!   [`Stamp`](runtime::Stamp), [`Fetch`](runtime::Fetch),
//!   [`Search`](runtime::Search), [`Via`](runtime::Via)); [`heap`] and [`ptr`].
//! - **Services and tools that run or inspect a pool**: the runtime's configuration,
//!   passes and figures ([`runtime::RuntimeConfig`], [`runtime::NodeFigures`],
//!   [`runtime::PassReport`]), writer roles and the pool lock, and the region's
//!   [`Layout`](region::Layout), whose section accessors describe the format a pool has
//!   on disk.
//! - **Tests and model checks**: the [`Emulator`](mem::Emulator) and its oracle,
//!   [`runtime::testing`], and the fault switches ([`runtime::Fault`], behind the
//!   `faults` feature) that turn one mechanism off.
//! - **Ports to a new machine**: [`cache`] and [`line`](mod@line), the instructions and
//!   the geometry a [`MemView`](mem::MemView) is built from.
//!
//! The runtime's mechanism modules (claim, lease, lock, pass, role, share, journal) are
//! public so that their documentation, which the fault switches and the runtime's own
//! docs point to, can be read; their types appear in the signatures above.

pub mod cache;
pub mod channel;
pub mod heap;
pub mod line;
pub mod mem;
mod primitive;
pub mod ptr;
pub mod region;
pub mod runtime;
