//! The read side: a reader's record and its sections ([`reader`]: [`Reader`],
//! [`BiGuard`], [`Shared`]), the one loop every lookup runs ([`lazy`]: through the cache,
//! then from fresh entry points) and the one walk along links ([`walk`]). Nothing here
//! writes back, invalidates or fences on a hit; a stale copy is read again from memory
//! by one skeleton.
//!
//! [`Reader`]: reader::Reader
//! [`BiGuard`]: reader::BiGuard
//! [`Shared`]: reader::Shared
//!
//! # Trade-offs
//!
//! - **Bounded staleness for free reads.** A hit costs what a read of local memory costs,
//!   and its answer may be up to one staleness bound old; a read that must find
//!   everything published before it ([`lazy`]) pays a trip to memory on a miss.
//! - **Copies, not references.** A validated read copies the object's lines before it
//!   trusts them (the stamp is checked on the copy), which costs a copy of large objects
//!   where a coherent structure would hand out a reference.

pub mod lazy;
pub(crate) mod reader;
pub mod walk;
