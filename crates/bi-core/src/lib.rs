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

pub mod cache;
pub mod channel;
pub mod heap;
pub mod line;
pub mod mem;
mod primitive;
pub mod ptr;
pub mod region;
pub mod runtime;
