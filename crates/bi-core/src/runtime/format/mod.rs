//! Formats: how what nodes share is laid out in memory, below everything that reads or
//! writes it. An object's lines each start with a stamp (a generation and flags) that a
//! link's generation must match ([`object`]); a scope names the structure a log entry
//! belongs to ([`scope`]); a reader record's first word says whether its reader is inside
//! a section ([`reader_state`]); a log ring holds the entries a writer appends and every
//! node's pass consumes ([`ring`]). Nothing here reads the clock or knows about nodes'
//! liveness.
//!
//! # Trade-offs
//!
//! - **A stamp on every line.** Eight bytes of each line go to its stamp, so a 64-byte
//!   line carries 56 bytes of payload; in exchange any copy of any line tells by itself
//!   whether it belongs to the object a link names, which is what lets readers use their
//!   caches with no cache operation and still never trust reused memory.
//! - **Links keep 16 bits of the generation.** A link fits one word with its offset, at
//!   the price of a generation that wraps for a link (a block must be reused 65,536 times
//!   under one stale link before a copy could pass for the new object; the grace period
//!   makes that moot).
//! - **The ring's writer lives with its layout.** `RingWriter` is the write side's, but
//!   it only needs the layout below it, so the ring stays one file here.

pub mod object;
pub(crate) mod reader_state;
pub mod ring;
pub mod scope;
