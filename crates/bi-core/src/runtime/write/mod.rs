//! The write side: a node's writer ([`writer`]: allocation, publication, retirement,
//! reclamation, the log rings' appends), the grace point it reclaims against
//! ([`grace`]), the journal that makes in-place rewrites survive a killed writer
//! ([`journal`]) and the adoption of a dead writer's structure ([`adopt`]).
//!
//! # Trade-offs
//!
//! - **Write back, fence, log.** Every publication writes its lines back and fences
//!   before one store makes it visible, then logs what other nodes must drop: a write
//!   costs trips to memory a coherent structure does not pay, so that reads need none.
//! - **Memory waits out every node.** A retired block is reused only once every live
//!   node passed after its retirement became visible (or its lease lapsed), so a stalled
//!   node holds memory back until its lease runs out.

pub(crate) mod adopt;
pub(crate) mod grace;
pub mod journal;
pub(crate) mod writer;
