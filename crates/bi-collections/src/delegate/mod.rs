//! Delegated writes: any thread on any node updates a structure by sending operations to
//! its single writer, which applies them in batches.
//!
//! # Why delegate
//!
//! Without cache coherence there is no atomic read-modify-write across nodes and no lock
//! two nodes can both take: a lock word is a line, and two nodes storing to one line lose
//! each other's stores. The structures of this crate are therefore written by exactly one
//! writer (see [`bi_core::runtime`]), and every other thread or node that wants to update
//! one must ask that writer to do it. The request travels in shared memory that is itself
//! single-writer per line:
//!
//! - each client has its own channel ([`bi_core::channel`]): the client alone writes its
//!   tail and slots, the server alone writes its head;
//! - each client has its own acknowledgement word, on a line of its own, written only by
//!   the server: "this client's operations are applied and published up to sequence
//!   number `s`".
//!
//! So no line in the whole scheme has two writers, which is what makes it correct on
//! memory that is not coherent: each side only needs to write back what it wrote and
//! invalidate what it is about to read. This is Argo DSM's queue delegation (one thread
//! owns the critical section and executes the others' requests) carried over to
//! non-coherent shared memory.
//!
//! # Why batches
//!
//! On memory without coherence the expensive part of an update is not the update but the
//! fence that makes it visible. A [`DelegationServer`] drains *every* client's channel,
//! applies all of it as one [`ApplyBatch::apply_batch`](crate::ApplyBatch::apply_batch)
//! call (which the structures publish with one write-back batch and one fence), then
//! stores every affected acknowledgement and fences once. The fence count of a batch is
//! fixed (three of the server's own, two when every client sent one operation, plus the
//! structure's) whatever the number of clients and operations in it, so the more
//! clients are busy, the cheaper each update gets.
//!
//! # Latency against throughput
//!
//! A synchronous update ([`DelegationClient::insert_sync`]) costs a round trip: the
//! client writes back its record and publishes its tail, the server notices on its next
//! poll, applies, acknowledges, and the client notices on its next read of its
//! acknowledgement. That is a few microseconds even when nothing else is going on, far
//! more than a local update of an unshared structure. In exchange the structure has no
//! contention at all: its writer never waits for a lock, never retries, and keeps its
//! lines in its own cache; and clients that do not need to wait
//! ([`DelegationClient::insert`] returns as soon as the record is in the channel) pay
//! only for their own write-backs, while the server amortises its fences over everything
//! that arrived meanwhile.
//!
//! # Compared with familiar handles
//!
//! - left-right's `WriteHandle` is also the one writer of a structure that readers read
//!   without locks, and it also batches: operations are appended to an oplog and applied
//!   on `publish`. But the handle is the writer itself; other threads that want to write
//!   must share it behind a `Mutex`. Here the writer stays put (on its own thread, or
//!   node) and every other thread gets its own [`DelegationClient`], so writers never
//!   contend on a lock; `flush` / `wait_applied` play the part of waiting for `publish`.
//! - papaya's `HashMap` lets every thread `insert` and `remove` directly, with atomic
//!   compare-and-swap on shared memory. That needs coherence. A [`DelegationClient`]
//!   offers the same calls (with `_sync` variants that return once the change is
//!   visible) but routes them to the single writer, and readers stay as cheap as
//!   papaya's: they never see the channels. Where papaya compares and swaps, a client
//!   sends a conditional request ([`DelegationClient::compare_and_set`],
//!   [`DelegationClient::insert_if_absent`], [`Condition`](crate::Condition)) that the writer
//!   decides as it applies it.
//!
//! # How to use it
//!
//! 1. Carve a line-aligned range out of shared memory (a heap section, or a range found
//!    through a named root) of at least [`DelegationLayout::required_bytes`], and build
//!    the same [`DelegationLayout`] on every node.
//! 2. On the writer's node, [`DelegationServer::new`] initialises the area and takes the
//!    structure; run [`DelegationServer::run_until`] on a thread, or call
//!    [`DelegationServer::serve_once`] from the writer's own loop.
//! 3. Each client thread attaches with [`DelegationClient::new`] and its own index; or,
//!    better when a node has several writing threads, the node attaches once as a
//!    [`NodeCombiner`] and its threads share it.
//!
//! # Strings
//!
//! A record is fixed-size: keys and values travel as their [words](crate::Stored), which
//! hold a plain type whole and a string of up to 16 bytes. A longer string's bytes go
//! into a **parcel area** the client alone writes, beside its channel, and the old value
//! the writer reports comes back through a **reply area** the server alone writes
//! (module `parcel`): each side writes back what it put before the other is told of
//! it, and each reads the other's area fresh. A write whose strings together do not fit
//! the area ([`DelegationLayout::parcel_bytes`], 256 KiB by default) is refused before
//! anything is sent ([`DelegationError::ItemTooLarge`]); so is one whose key holds a
//! value too long to report back, which only the writer's own handle can put there.
//! Plain keys and values have no areas and pay nothing for them.
//!
//! ```
//! use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
//! use bi_collections::map::BiHashMap;
//! use bi_core::runtime::testing::Setup;
//! use std::sync::atomic::{AtomicBool, Ordering};
//!
//! let s = Setup::new(3, 1);
//! let map = BiHashMap::<String, Vec<u8>>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
//! let line = s.emu.line_size();
//! let layout = DelegationLayout::with_parcels(s.arena(2), 1, 8, 4096, line).unwrap();
//! let mut server = DelegationServer::new(s.emu.node(0), layout, map).unwrap();
//! let stop = AtomicBool::new(false);
//! std::thread::scope(|scope| {
//!     let serving = scope.spawn(|| server.run_until(&stop));
//!     let mut client = DelegationClient::new(s.emu.node(1), layout, 0).unwrap();
//!     let key = "a key longer than its sixteen-byte word".to_string();
//!     assert_eq!(client.insert_returning(key.clone(), vec![7; 1000]).unwrap(), None);
//!     assert_eq!(client.insert_returning(key, vec![8]).unwrap(), Some(vec![7; 1000]));
//!     assert!(client.insert_returning("k".into(), vec![0; 5000]).is_err()); // too long
//!     stop.store(true, Ordering::Release);
//!     serving.join().unwrap().unwrap();
//! });
//! ```
//!
//! # Combining on a node first
//!
//! Threads of one node are coherent with each other, so they need not cross to the
//! writer's node one by one. A [`NodeCombiner`] queues their operations in ordinary
//! memory, and whichever waiting thread finds the node's channel free carries everything
//! queued as one batch (Argo's hierarchical queue delegation): the batch crosses between
//! the nodes once, and the server applies it with one write-back batch and one fence.
//! Each thread's operations are applied once, in its order; if the carrying thread dies
//! mid-batch, its waiters get [`DelegationError::CombinerDied`] and nothing is applied
//! twice.
//!
//! ```
//! use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
//! use bi_collections::{ApplyBatch, BatchReport, CollectionError, Op};
//! use bi_core::mem::{Emulator, EmulatorConfig};
//! use std::sync::atomic::{AtomicBool, Ordering};
//!
//! #[derive(Default)]
//! struct Sum(u64);
//! impl ApplyBatch<u64, u64> for Sum {
//!     fn apply_batch(&mut self, ops: &[Op<u64, u64>]) -> Result<BatchReport, CollectionError> {
//!         for op in ops {
//!             if let Op::Insert(_, v) = op {
//!                 self.0 += v;
//!             }
//!         }
//!         Ok(BatchReport { applied: ops.len(), ..BatchReport::default() })
//!     }
//! }
//!
//! let emu = Emulator::new(EmulatorConfig::new(1 << 15, 3));
//! let need = DelegationLayout::<u64, u64>::required_bytes(2, 8, emu.line_size()).unwrap();
//! let layout = DelegationLayout::<u64, u64>::new(0..need, 2, 8, emu.line_size()).unwrap();
//! let mut server = DelegationServer::new(emu.node(0), layout, Sum::default()).unwrap();
//! let stop = AtomicBool::new(false);
//! std::thread::scope(|s| {
//!     let serving = s.spawn(|| server.run_until(&stop));
//!     let workers: Vec<_> = (0..2)
//!         .map(|i| {
//!             let view = emu.node(1 + i);
//!             s.spawn(move || {
//!                 let mut client = DelegationClient::new(view, layout, i).unwrap();
//!                 for v in 1..=10 {
//!                     client.insert(v, v).unwrap();
//!                 }
//!                 client.flush().unwrap();
//!             })
//!         })
//!         .collect();
//!     for w in workers {
//!         w.join().unwrap();
//!     }
//!     stop.store(true, Ordering::Release);
//!     serving.join().unwrap().unwrap();
//! });
//! assert_eq!(server.structure().0, 2 * 55);
//! ```

mod area;
mod backoff;
mod client;
mod combine;
mod error;
mod layout;
mod parcel;
mod record;
mod server;

pub use backoff::Idle;
pub use client::{ClientConfig, DelegationClient, ServerGone};
pub use combine::{NodeCombiner, Pending};
pub use error::{DelegationError, WaitingFor};
pub use layout::{DEFAULT_PARCEL_BYTES, DelegationLayout};
pub(crate) use record::same_bytes;
pub use record::{OpRecord, Outcome};
pub use server::{DEFAULT_MAX_BATCH, DelegationServer, ServeReport, ServeTotals};

/// A memory access in the delegation area failed: reported like one in a channel
/// (the area is channels and their acknowledgements).
fn mem(e: bi_core::mem::MemError) -> crate::CollectionError {
    crate::CollectionError::Channel(bi_core::channel::ChannelError::Mem(e))
}
