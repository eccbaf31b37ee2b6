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
//! - **A bounded walk.** Every walk counts the objects it reads and gives up after
//!   [`walk::MAX_WALK`] with [`LinkCycle`](crate::runtime::BiError::LinkCycle), so links
//!   corrupted into a cycle end a lookup with an error instead of spinning forever. The
//!   count is a decrement and a branch per object read, about 4 of the some 70
//!   instructions a level costs: a few percent of a lookup in a small tree held in the
//!   cache, nothing measurable once the walk waits on memory.

pub mod lazy;
pub(crate) mod reader;
pub mod walk;
