//! Node membership: who runs each node and whether it is alive. A process claims a node
//! ([`claim`]) and keeps it by the heartbeat its passes write into the node's record
//! ([`record`], [`pass`]); the pool lock orders nodes without a cross-node atomic
//! ([`lock`]); a structure has one writer role at a time ([`role`]), which its holder keeps
//! by its node's lease ([`lease`]); other processes of a host may join a node and read
//! ([`share`]); and the kernel of this host tells a process that is gone from one that is
//! only slow ([`process`]). The formats of what nodes read and write lie below this
//! folder; the read and write sides, which use it, above.
//!
//! # Trade-offs
//!
//! - **Leases, helped by the kernel.** With no coherent memory between hosts, a node's
//!   liveness is a heartbeat in memory: a node that stops writing it is taken for dead
//!   after its lease, so a stall longer than a lease loses the node's claims and roles.
//!   Where the holder's process ran on this host, the kernel's word replaces the lease
//!   (gone: at once; stopped but there: never), which a remote host cannot get.
//! - **A bakery, not an atomic.** The pool lock costs a read of every other node's lock
//!   record from memory on each step, so its cost grows with the node count; it guards
//!   rare steps only (roles, adoption, extents), never a read or a write of a structure.
//! - **Passes on a period.** Staleness is bounded by the pass period plus the skew bound,
//!   and each pass costs its node the invalidations the writers logged since the last one:
//!   a shorter period means fresher reads and more background work.

pub(crate) mod background;
pub mod claim;
pub(crate) mod clock;
pub(crate) mod config;
pub(crate) mod inner;
pub mod lease;
pub mod lock;
pub(crate) mod membarrier;
pub mod pass;
pub(crate) mod pass_state;
pub(crate) mod process;
pub(crate) mod record;
pub mod role;
pub mod share;
