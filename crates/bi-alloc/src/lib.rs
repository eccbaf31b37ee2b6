//! # bi-alloc: the shared-memory heap
//!
//! *Not built yet.* This crate will place objects inside a shared region for the Bounded
//! Incoherence runtime of `bi-core`:
//!
//! - per-node arenas, so a node allocates and frees only in memory it owns and no
//!   cross-node atomic operation is ever needed;
//! - size classes whose slots are line-aligned and line-padded, so two nodes never write
//!   one cache line;
//! - a header per object (logged time, size, tracked flag, freed mark, incarnation), with
//!   every reuse of memory reported to the emulator's oracle as an incarnation bump;
//! - heap exhaustion as an error value, never a panic;
//! - statistics: live bytes, retired-but-unreclaimed bytes, peak.
//!
//! It will implement the small heap trait that `bi-core` defines.
