//! Combining on a node: the threads of one node pool their operations, and one of them
//! carries the pooled batch to the writer.
//!
//! # Why
//!
//! Crossing between nodes is what costs: every record a client sends is written back,
//! and the tail that publishes it takes two fences; the server pays a fence per channel
//! it drains and per acknowledgement it stores. If every thread of a node had its own
//! channel, `t` threads sending one operation each would cross `t` times. Inside a node,
//! though, caches *are* coherent, so the threads can meet in ordinary memory with
//! ordinary atomics first. This is Argo's hierarchical queue delegation: a node-local
//! queue, one *combiner* at a time that takes everything queued and sends it as one
//! batch through the node's one channel ([`DelegationClient::send_batch`]), waits for
//! its acknowledgement, and hands each waiting thread its result. The server applies
//! the whole batch with one write-back batch and one fence, so a batch crosses between
//! the nodes once, however many threads it carries.
//!
//! # Who combines
//!
//! Nobody is dedicated to it. A thread that queues an operation and wants to wait for it
//! tries to take the node's channel; if it gets it, it combines until its own operation
//! is done, and lets go; otherwise some other thread is combining and will carry the
//! operation in its next batch. While one batch is on its way, new operations pile up in
//! the queue, so the busier the node, the larger the batches.
//!
//! # Order and exactly once
//!
//! The queue is first in, first out and a combiner takes from its front, so one thread's
//! operations reach the channel, and are applied, in the order it queued them. An
//! operation is taken from the queue by exactly one combiner and sent at most once;
//! nothing is ever resent. If sending or waiting fails, every operation of that batch
//! gets a typed error (the batch may still be applied later, once). If a combiner dies
//! mid-batch (it panicked, for instance in a structure's code on this thread), the
//! operations it carried get [`DelegationError::CombinerDied`]: each is then applied
//! once or not at all, never twice, and the node's channel is not used again (its
//! sender's count may disagree with memory), so later operations get the same error.
//! Attach a new combiner to another client index to go on.

use super::backoff::Backoff;
use super::client::DelegationClient;
use super::error::DelegationError;
use crate::{CollectionError, Op, Stored};
use bi_core::mem::MemView;
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};

/// The most operations one combined batch carries.
pub(crate) const DEFAULT_COMBINED_BATCH: usize = 256;

const PENDING: u8 = 0;
const APPLIED: u8 = 1;
const FAILED: u8 = 2;

/// The outcome of one queued operation, filled in by whichever thread carried it.
#[derive(Debug, Default)]
struct Ticket {
    state: AtomicU8,
    error: Mutex<Option<CollectionError>>,
}

impl Ticket {
    fn finish(&self, error: Option<CollectionError>) {
        let state = if error.is_some() { FAILED } else { APPLIED };
        if let Some(e) = error {
            *self.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
        }
        // Release: the error is written before the state says so.
        self.state.store(state, Ordering::Release);
    }

    fn outcome_known(&self) -> bool {
        self.state.load(Ordering::Acquire) != PENDING
    }

    fn outcome(&self) -> Option<Result<(), CollectionError>> {
        match self.state.load(Ordering::Acquire) {
            PENDING => None,
            APPLIED => Some(Ok(())),
            _ => Some(Err(self
                .error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .unwrap_or(DelegationError::CombinerDied.into()))),
        }
    }
}

struct Queued<K, V> {
    op: Op<K, V>,
    ticket: Arc<Ticket>,
}

struct Shared<Vw, K: Stored, V: Stored> {
    queue: Mutex<Vec<Queued<K, V>>>,
    channel: Mutex<DelegationClient<Vw, K, V>>,
    max_batch: usize,
}

/// The node-local side of delegation: any number of threads of one node share it (it is
/// `Clone`, and cheap to clone) and their operations travel to the writer combined. See
/// [delegation docs](super#combining-on-a-node-first) for why.
///
/// Nobody is dedicated to combining: a thread that waits for its operation and finds the
/// node's channel free carries everything queued, as one batch, until its own operation
/// is done. One thread's operations are applied in the order it queued them, each once.
/// If sending or waiting fails, every operation of that batch gets the error (it may
/// still be applied, once: nothing is resent). If the carrying thread dies mid-batch
/// (panics), its waiters get [`DelegationError::CombinerDied`], and so does every later
/// operation: the channel's sender count may disagree with memory, so it is not used
/// again; attach a new combiner to another client index.
///
/// ```
/// use bi_collections::delegate::{DelegationLayout, DelegationServer, NodeCombiner};
/// use bi_collections::{ApplyBatch, BatchReport, CollectionError, Op};
/// use bi_core::mem::{Emulator, EmulatorConfig};
/// use std::collections::BTreeMap;
/// use std::sync::atomic::{AtomicBool, Ordering};
///
/// #[derive(Default)]
/// struct Map(BTreeMap<u64, u64>);
/// impl ApplyBatch<u64, u64> for Map {
///     fn apply_batch(&mut self, ops: &[Op<u64, u64>]) -> Result<BatchReport, CollectionError> {
///         for op in ops {
///             if let Op::Insert(k, v) = *op {
///                 self.0.insert(k, v);
///             }
///         }
///         Ok(BatchReport { applied: ops.len(), ..BatchReport::default() })
///     }
/// }
///
/// // Node 0 is the writer's; node 1's threads share one channel (client 0).
/// let emu = Emulator::new(EmulatorConfig::new(1 << 15, 2));
/// let layout = DelegationLayout::<u64, u64>::new(0..1 << 15, 1, 64, emu.line_size()).unwrap();
/// let mut server = DelegationServer::new(emu.node(0), layout, Map::default()).unwrap();
/// let combiner = NodeCombiner::new(emu.node(1), layout, 0).unwrap();
/// let stop = AtomicBool::new(false);
/// std::thread::scope(|s| {
///     let serving = s.spawn(|| server.run_until(&stop));
///     let threads: Vec<_> = (0..3u64)
///         .map(|t| {
///             let c = combiner.clone();
///             s.spawn(move || {
///                 for k in 0..20 {
///                     c.insert_sync(t * 100 + k, k).unwrap();
///                 }
///             })
///         })
///         .collect();
///     for t in threads {
///         t.join().unwrap();
///     }
///     stop.store(true, Ordering::Release);
///     serving.join().unwrap().unwrap();
/// });
/// assert_eq!(server.structure().0.len(), 60);
/// ```
pub struct NodeCombiner<Vw, K: Stored, V: Stored> {
    shared: Arc<Shared<Vw, K, V>>,
}

impl<Vw, K: Stored, V: Stored> Clone for NodeCombiner<Vw, K, V> {
    fn clone(&self) -> Self {
        NodeCombiner {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<Vw, K: Stored, V: Stored> fmt::Debug for NodeCombiner<Vw, K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeCombiner")
            .field("max_batch", &self.shared.max_batch)
            .finish_non_exhaustive()
    }
}

/// An operation queued with [`NodeCombiner::send`]: wait for it with
/// [`wait`](Pending::wait).
#[must_use = "an operation is only known applied once waited for"]
pub struct Pending<Vw, K: Stored, V: Stored> {
    combiner: NodeCombiner<Vw, K, V>,
    ticket: Arc<Ticket>,
}

impl<Vw, K: Stored, V: Stored> fmt::Debug for Pending<Vw, K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pending").finish_non_exhaustive()
    }
}

impl<Vw: MemView, K: Stored, V: Stored> Pending<Vw, K, V> {
    /// Waits until the operation is applied and published (combining batches meanwhile
    /// if no other thread is), or until it is known to have failed.
    pub fn wait(self) -> Result<(), CollectionError> {
        self.combiner.wait_for(&self.ticket)
    }
}

impl<Vw: MemView, K: Stored, V: Stored> NodeCombiner<Vw, K, V> {
    /// The combiner of one node, sending through client `index` of `layout` (see
    /// [`DelegationClient::new`] for the errors).
    pub fn new(
        view: Vw,
        layout: super::DelegationLayout<K, V>,
        index: usize,
    ) -> Result<Self, CollectionError> {
        Ok(Self::with_client(DelegationClient::new(
            view, layout, index,
        )?))
    }

    /// The combiner of one node, sending through `client`.
    pub fn with_client(client: DelegationClient<Vw, K, V>) -> Self {
        NodeCombiner {
            shared: Arc::new(Shared {
                queue: Mutex::new(Vec::new()),
                channel: Mutex::new(client),
                max_batch: DEFAULT_COMBINED_BATCH,
            }),
        }
    }

    /// Queues `op` without waiting: operations one thread queues are applied in the
    /// order it queued them. The operation travels with the next batch some thread of
    /// the node carries, and a thread carries batches only while it waits: wait for
    /// this operation, or for a later one of the same thread, to be sure it goes.
    pub fn send(&self, op: Op<K, V>) -> Pending<Vw, K, V> {
        let ticket = Arc::new(Ticket::default());
        self.queue().push(Queued {
            op,
            ticket: Arc::clone(&ticket),
        });
        Pending {
            combiner: self.clone(),
            ticket,
        }
    }

    /// Queues `op` and waits until readers can see its effect.
    pub fn send_sync(&self, op: Op<K, V>) -> Result<(), CollectionError> {
        self.send(op).wait()
    }

    /// Inserts `key` with `value` and waits until readers can see it.
    pub fn insert_sync(&self, key: K, value: V) -> Result<(), CollectionError> {
        self.send_sync(Op::Insert(key, value))
    }

    /// Removes `key` and waits until readers can no longer find it.
    pub fn remove_sync(&self, key: K) -> Result<(), CollectionError> {
        self.send_sync(Op::Remove(key))
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Vec<Queued<K, V>>> {
        // The queue is only pushed to and drained whole; a panic elsewhere leaves it
        // consistent.
        self.shared
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn wait_for(&self, ticket: &Ticket) -> Result<(), CollectionError> {
        let mut backoff = Backoff::unbounded();
        loop {
            if let Some(outcome) = ticket.outcome() {
                return outcome;
            }
            match self.shared.channel.try_lock() {
                Ok(mut client) => {
                    self.combine(&mut client, ticket);
                    backoff.reset();
                }
                Err(TryLockError::Poisoned(_)) => {
                    // A combiner died: its channel is not used again.
                    self.fail_queued();
                }
                Err(TryLockError::WouldBlock) => {
                    backoff.wait();
                }
            }
        }
    }

    /// Carries batches from the queue until `mine` is done or the queue is empty.
    fn combine(&self, client: &mut DelegationClient<Vw, K, V>, mine: &Ticket) {
        let mut ops = Vec::new();
        while !mine.outcome_known() {
            let batch: Vec<Queued<K, V>> = {
                let mut q = self.queue();
                let n = q.len().min(self.shared.max_batch);
                q.drain(..n).collect()
            };
            if batch.is_empty() {
                return;
            }
            // If this thread unwinds from here on, the batch's waiters learn it.
            let carried = Carried(&batch);
            ops.clear();
            ops.extend(batch.iter().map(|q| q.op.clone()));
            let outcome = client
                .send_batch(&ops)
                .and_then(|last| client.wait_applied(last));
            std::mem::forget(carried);
            match outcome {
                Ok(()) => batch.iter().for_each(|q| q.ticket.finish(None)),
                Err(e) => batch.iter().for_each(|q| q.ticket.finish(Some(share(&e)))),
            }
        }
    }

    /// Fails everything queued (the channel is dead).
    fn fail_queued(&self) {
        let queued: Vec<_> = self.queue().drain(..).collect();
        for q in queued {
            q.ticket.finish(Some(DelegationError::CombinerDied.into()));
        }
    }
}

/// A batch on its way: dropped only while its combiner unwinds, and then it tells every
/// waiter of the batch that the combiner died (the operations were sent once or not at
/// all; they are never sent again).
struct Carried<'a, K, V>(&'a [Queued<K, V>]);

impl<K, V> Drop for Carried<'_, K, V> {
    fn drop(&mut self) {
        for q in self.0 {
            q.ticket.finish(Some(DelegationError::CombinerDied.into()));
        }
    }
}

/// The error every operation of a failed batch gets: delegation errors are copied, any
/// other is summarised (the combiner's own operation gets the same).
fn share(e: &CollectionError) -> CollectionError {
    match e {
        CollectionError::Delegation(d) => CollectionError::Delegation(*d),
        _ => DelegationError::BatchFailed.into(),
    }
}
