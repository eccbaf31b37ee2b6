//! Handles every process of a pool reads and writes through: [`Pool::map`] and
//! [`Pool::tree`].
//!
//! # Why
//!
//! A structure has one writer (nothing else is safe without coherence), and a process
//! that is not it would otherwise have to run a delegation client by hand. A shared
//! handle hides the difference: the process that holds the structure's writer role
//! applies writes itself, and serves every other process's writes from a thread; any
//! other process's handle sends its writes to that thread through the structure's
//! delegation area ([`DelegationLayout::named`]) and waits for the old value, as
//! papaya's or `HashMap`'s `insert` returns it. Reads never leave the reading node.
//! Keys and values are plain types or strings, on either side:
//!
//! ```
//! use bi::{Pool, PoolConfig};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("pool.bi");
//! let here = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
//! let there = Pool::open_or_create(&path, PoolConfig::default()).unwrap(); // another process
//! let writer = here.map::<String, String>("sessions").unwrap();
//! let remote = there.map::<String, String>("sessions").unwrap();
//! let token = "a session token longer than sixteen bytes".to_string();
//! assert_eq!(remote.insert(token.clone(), "alice".into()).unwrap(), None);
//! assert_eq!(writer.insert(token.clone(), "bob".into()).unwrap(), Some("alice".into()));
//! assert_eq!(remote.remove(token.as_str()).unwrap(), Some("bob".into()));
//! ```
//!
//! Read-modify-write from any process needs no shipped code: a write can carry a
//! [`Guard`] the writer decides when it applies it, so
//! [`insert_if_absent`](Shared::insert_if_absent),
//! [`compare_and_set`](Shared::compare_and_set) and
//! [`compare_and_remove`](Shared::compare_and_remove) are single steps of the writer,
//! with no other write between the test and the change. Closures (`update`, `compute`,
//! `retain`) run on the writer's own handle ([`writer`](Shared::writer)).
//!
//! # Who writes
//!
//! Opening a shared handle takes the structure's writer role if no live process holds
//! it (adopting what a dead writer left), and becomes that process's *local* handle;
//! otherwise it becomes a *remote* one, with this node's client of the area (one per
//! node; every handle of the process shares it). A node runs one writer, so a process
//! that writes one structure of the pool is a remote for every other: opening one that
//! no process has served yet is [`PoolError::WriterTaken`]. A process that joined another's node
//! reads only: its writes are refused ([`BiError::NotRunner`]).
//!
//! # When the writer dies
//!
//! **A structure always gets a writer back.** A remote handle watches its writer: an
//! acknowledgement shows it alive; after half a node lease without one, the handle reads
//! the writer's record before it sends. Once the writer's lease has lapsed (its process
//! died, or gave the role up), the next write of any handle of the process takes the
//! role, adopting what the dead writer left, and applies the write here; the process
//! serves the others from then on. So a writer restarted while its dead predecessor's
//! lease runs, which opens as a remote handle, becomes the writer on its first write
//! after the lease, with no loop in user code.
//!
//! A write sent before the lease lapsed waits for the dead process until the client
//! timeout ([`PoolConfig::write_timeout`](crate::PoolConfig::write_timeout)); the handle
//! then takes the role if the lease has lapsed, and the write fails with
//! [`DelegationError::WriterDied`] (kind [`NoWriter`](crate::ErrorKind::NoWriter): the
//! takeover reported it failed), or with [`DelegationError::Timeout`] (kind
//! [`Timeout`](crate::ErrorKind::Timeout)) while the lease still runs: the writer may be
//! alive and slow, and may still apply it. The process that takes the role (this one or another) reports
//! every request it finds unacknowledged as failed ([`DelegationError::WriterDied`]) and
//! applies none of them, so no request is applied twice; the dead writer may have
//! applied some before dying (the outcome of a request to a process that died is
//! unknown, as with any RPC), so read the structure before sending again.

//! # What reads see
//!
//! Reads never leave the reading node and never wait: [`get`](Shared::get) answers
//! from the version this node's cache holds, hits and misses alike, at most one
//! staleness bound old (the pool's pass period, a millisecond by default, plus the
//! runtime's skew allowance). On top of that, **a process reads its own writes**: the
//! writer's process applies them in its node's cache; a remote handle, once the writer
//! acknowledges a write, drops its node's copies of the key's path (a few invalidations
//! and one fence on the write, nothing on reads), so the next `get` of that key on this
//! node reads it from memory and finds the write. [`get_fresh`](SharedMap::get_fresh) finds every insertion
//! published before the call, whoever made it, at the price of reading a miss again from
//! memory.
//!
//! # Trade-offs
//!
//! - **Latency of a remote write**: a round trip through shared memory to the writer's
//!   serving thread, which spins while requests keep coming, then naps
//!   ([`PoolConfig::serving`](crate::PoolConfig::serving): 10 us naps for 100 ms after
//!   a request, then up to a millisecond). A writer of the same host rings the server
//!   awake; one of another host waits out the nap. Idling costs CPU: on a 2-core KVM
//!   guest, half a core or more while warm and about 1.5% once cold (see
//!   [`Idle`](bi_collections::delegate::Idle)); longer naps cost less.
//! - **A remote write carries strings of up to 256 KiB** (less 8 bytes; keys, values
//!   and a compare-and-set's expected value together): a request is a fixed-size
//!   record, and a string longer than its 16-byte word travels in the sending node's
//!   parcel area beside the channel, its old value back in a reply area (see
//!   [`delegate`](bi_collections::delegate)). Past that,
//!   [`DelegationError::ItemTooLarge`], nothing written; the writer's own handle
//!   stores strings as long as its heap allows. Each node's two areas cost a string
//!   structure 512 KiB of the region.
//! - **One serving thread per writer process**, taking the same lock as the process's
//!   own writes: writes are serialized, as with any single writer.

use crate::error::{Error, structure};
use crate::pool::writer_in;
use crate::pool::{Pool, PoolError};
use bi_alloc::NodeHeap;
use bi_collections::delegate::{
    ClientConfig, DelegationClient, DelegationError, DelegationLayout, DelegationServer, Idle,
    Outcome, ServeTotals,
};
use bi_collections::map::{BiHashMap, MapConfig, MapReadHandle, MapWriteHandle};
use bi_collections::tree::{BiTree, TreeReadHandle, TreeWriteHandle};
use bi_collections::{
    ApplyBatch, BatchReport, CollectionError, Decided, Guard, Op, Refresh, Stored, compared_value,
    found_value,
};
use bi_core::mem::{Hardware, MemView};
use bi_core::runtime::{BiError, NodeRuntime};
use std::any::Any;
use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thread_local::ThreadLocal;

/// A map every process of the pool reads and writes ([`Pool::map`]).
pub type SharedMap<K, V, M = Hardware> =
    Shared<K, V, MapWriteHandle<K, V, M, NodeHeap>, MapReadHandle<K, V, M>, M>;

/// An ordered map every process of the pool reads and writes ([`Pool::tree`]).
pub type SharedTree<K, V, M = Hardware> =
    Shared<K, V, TreeWriteHandle<K, V, M, NodeHeap>, TreeReadHandle<K, V, M>, M>;

/// A structure's handle in one process of the pool: reads on this node, writes applied
/// here if this process is the writer, else sent to it. See the [module](self) docs.
///
/// A handle is `Send + Sync + Clone`: one handle (or its clones, which share everything)
/// serves every thread and task of the process. Each thread that reads gets a read
/// handle of its own (a reader record of the node) on its first read; when the thread
/// ends, the next new thread reuses it, so short-lived threads take no more records
/// than run at once.
pub struct Shared<K: Stored, V: Stored, W, R: Send, M: MemView = Hardware> {
    reads: Arc<Reads<R>>,
    writes: Arc<Writes<K, V, W, M>>,
}

impl<K: Stored, V: Stored, W, R: Send, M: MemView> Clone for Shared<K, V, W, R, M> {
    fn clone(&self) -> Self {
        Shared {
            reads: self.reads.clone(),
            writes: self.writes.clone(),
        }
    }
}

/// A structure's read handles in this process, one per thread that reads.
struct Reads<R: Send> {
    per_thread: ThreadLocal<R>,
    /// Makes the calling thread's read handle.
    open: OpenReader<R>,
}

/// How a thread's read handle is made.
type OpenReader<R> = Box<dyn Fn() -> Result<R, PoolError> + Send + Sync>;

impl<R: Send> Reads<R> {
    /// The read handles made by `open`, the calling thread's made now (so that a
    /// handle that cannot read fails when it is opened).
    fn new(open: OpenReader<R>) -> Result<Arc<Self>, PoolError> {
        let reads = Reads {
            per_thread: ThreadLocal::new(),
            open,
        };
        reads.here()?;
        Ok(Arc::new(reads))
    }

    /// The calling thread's read handle, made on its first read.
    #[inline]
    fn here(&self) -> Result<&R, PoolError> {
        self.per_thread.get_or_try(|| (self.open)())
    }
}

/// How this process writes a structure: shared by every handle of it in the process.
struct Writes<K: Stored, V: Stored, W, M: MemView> {
    /// Set once this process holds the writer role, and then for good.
    local: OnceLock<Local<W>>,
    /// While another process holds the role: this node's client of its area.
    remote: Option<Remote<K, V, W, M>>,
    /// This process joined another's node: it reads only.
    read_only: Option<usize>,
}

/// This process holds the writer role: writes apply here, and a thread serves the
/// others.
struct Local<W> {
    writer: Arc<Mutex<W>>,
    /// The thread serving the other processes (it stops with the last handle).
    serving: Server,
}

/// Another process holds the writer role: writes go through this node's client, and
/// the role is taken here once that process is gone.
struct Remote<K: Stored, V: Stored, W, M: MemView> {
    client: Mutex<DelegationClient<M, K, V>>,
    layout: DelegationLayout<K, V>,
    /// Takes the writer role (adopting the structure), or says who holds it.
    take: TakeWriter<W>,
    /// Held while the role is being taken, so that one thread takes it.
    taking: Mutex<()>,
    name: String,
    /// This node's runtime and the structure's slot, to tell whether its writer lives.
    rt: NodeRuntime<M>,
    slot: usize,
    /// When the writer last showed it was alive (an acknowledgement, or its record),
    /// and how long that stands: half the node lease.
    seen_alive: Mutex<Instant>,
    trust: Duration,
    /// How this process serves once it takes the role.
    serving: Idle,
}

impl<K: Stored, V: Stored, W, M: MemView> Remote<K, V, W, M> {
    /// Whether the writer may be gone: an earlier write of this node is unanswered, or
    /// nothing showed it alive for half a lease and its record, read now, says so.
    fn writer_may_be_gone(&self) -> Result<bool, PoolError> {
        let stuck = {
            let client = lock(&self.client)?;
            client.sent() > client.applied()
        };
        let mut seen = lock(&self.seen_alive)?;
        if !stuck && seen.elapsed() < self.trust {
            return Ok(false);
        }
        if self.rt.writer_held(self.slot)? && !stuck {
            *seen = Instant::now();
            return Ok(false);
        }
        Ok(true)
    }

    /// An acknowledgement came: the writer lives.
    fn answered(&self) -> Result<(), PoolError> {
        *lock(&self.seen_alive)? = Instant::now();
        Ok(())
    }
}

/// How a process takes a structure's writer role.
type TakeWriter<W> = Box<dyn Fn() -> Result<W, PoolError> + Send + Sync>;

/// What a handle does with a write now.
enum Now<'a, K: Stored, V: Stored, W, M: MemView> {
    Local(&'a Local<W>),
    Remote(&'a Remote<K, V, W, M>),
    ReadOnly(usize),
}

impl<K: Stored, V: Stored, W, M: MemView> Writes<K, V, W, M> {
    fn now(&self) -> Now<'_, K, V, W, M> {
        match (self.local.get(), &self.remote) {
            (Some(local), _) => Now::Local(local),
            (None, Some(remote)) => Now::Remote(remote),
            (None, None) => Now::ReadOnly(self.read_only.unwrap_or(0)),
        }
    }
}

impl<K, V, W, M> Writes<K, V, W, M>
where
    K: Stored + Send + Sync,
    V: Stored + Send + Sync,
    W: ApplyBatch<K, V> + Send + 'static,
    M: MemView + 'static,
{
    /// Takes the writer role if the process that held it is gone (its lease lapsed, or
    /// it gave the role up): from then on this process applies the writes, its own and
    /// the other processes'. Whether this process now writes.
    fn take_role(&self) -> Result<bool, PoolError> {
        let Some(remote) = &self.remote else {
            return Ok(self.local.get().is_some());
        };
        let _one = lock(&remote.taking)?;
        if self.local.get().is_some() {
            return Ok(true);
        }
        match (remote.take)() {
            Ok(writer) => {
                let view = lock(&remote.client)?.view().clone();
                let local = serve(&remote.name, view, remote.layout, writer, remote.serving)?;
                // Only this thread sets it (under `taking`).
                let _ = self.local.set(local);
                Ok(true)
            }
            Err(
                PoolError::WriterTaken
                | PoolError::Collection(CollectionError::Runtime(BiError::WriterAlive { .. })),
            ) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// How a process serves the other processes' writes and sends its own: the pool's
/// [`PoolConfig::serving`](crate::PoolConfig::serving) and
/// [`PoolConfig::write_timeout`](crate::PoolConfig::write_timeout).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Writing {
    serving: Idle,
    timeout: Duration,
}

impl Writing {
    pub(crate) fn of(config: &crate::PoolConfig) -> Writing {
        Writing {
            serving: config.serving,
            timeout: config.write_timeout,
        }
    }
}

/// The serving thread of a writer process; stopped (after draining what was sent) when
/// the last handle goes.
struct Server {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<ServeTotals, CollectionError>>>,
    /// The nodes whose channels the thread found corrupt, with what it found.
    broken: Arc<Mutex<Vec<(usize, String)>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            // An error of the serving thread has been seen by its clients (they time
            // out); the writer's own handle is unaffected.
            let _ = t.join();
        }
    }
}

/// The writer's handle behind the lock its process's own writes take: a batch of
/// requests takes it once, old values and application together.
struct Locked<W>(Arc<Mutex<W>>);

fn lock<W>(m: &Mutex<W>) -> Result<MutexGuard<'_, W>, CollectionError> {
    m.lock().map_err(|_| CollectionError::Corrupt {
        reason: "a thread panicked while writing through this process's handle",
    })
}

impl<K, V, W: ApplyBatch<K, V>> ApplyBatch<K, V> for Locked<W> {
    fn apply_batch(&mut self, ops: &[Op<K, V>]) -> Result<BatchReport, CollectionError> {
        lock(&self.0)?.apply_batch(ops)
    }

    fn longest_value(&self) -> Option<usize> {
        lock(&self.0).ok()?.longest_value()
    }

    fn reports_applied_prefix(&self) -> bool {
        lock(&self.0).is_ok_and(|w| w.reports_applied_prefix())
    }

    fn old_values(
        &self,
        ops: &[Op<K, V>],
        olds: &mut Vec<Option<V>>,
    ) -> Result<bool, CollectionError> {
        lock(&self.0)?.old_values(ops, olds)
    }

    fn apply_reporting(
        &mut self,
        ops: &[Op<K, V>],
        olds: &mut Vec<Option<V>>,
    ) -> Result<BatchReport, CollectionError> {
        lock(&self.0)?.apply_reporting(ops, olds)
    }

    fn apply_guarded(
        &mut self,
        ops: &[Op<K, V>],
        guards: &[Guard<V>],
        same: fn(&V, &V) -> bool,
        found: &mut Vec<Option<V>>,
    ) -> Result<BatchReport, CollectionError> {
        lock(&self.0)?.apply_guarded(ops, guards, same, found)
    }
}

/// The role of this process and the entries as this node reads them.
///
/// ```
/// use bi::{Pool, PoolConfig};
///
/// let dir = tempfile::tempdir().unwrap();
/// let pool = Pool::open_or_create(dir.path().join("pool.bi"), PoolConfig::default()).unwrap();
/// let t = pool.tree::<u32, u32>("t").unwrap();
/// t.insert(1, 10).unwrap();
/// assert_eq!(format!("{t:?}"), r#"Shared { role: "writer", entries: {1: 10} }"#);
/// ```
impl<K: Stored, V: Stored, W, R: fmt::Debug + Send, M: MemView> fmt::Debug
    for Shared<K, V, W, R, M>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let role = match self.writes.now() {
            Now::Local(_) => "writer",
            Now::Remote(_) => "remote",
            Now::ReadOnly(_) => "read-only",
        };
        let mut d = f.debug_struct("Shared");
        d.field("role", &role);
        match self.reads.here() {
            Ok(reads) => d.field("entries", reads),
            Err(e) => d.field("entries", &format_args!("<unreadable: {e}>")),
        };
        d.finish()
    }
}

impl<K, V, W, R, M> Shared<K, V, W, R, M>
where
    K: Stored + Send + Sync,
    V: Stored + Send + Sync,
    W: ApplyBatch<K, V> + Send + 'static,
    R: Refresh<K> + Send,
    M: MemView + 'static,
{
    /// Inserts or replaces; returns the value the key had.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// // Two processes (here two pools of one process, each its own node).
    /// let here = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let there = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let writer = here.map::<u64, u64>("orders").unwrap(); // takes the writer role
    /// let remote = there.map::<u64, u64>("orders").unwrap(); // sends to it
    /// assert!(writer.is_writer() && !remote.is_writer());
    /// assert_eq!(remote.insert(1, 10).unwrap(), None);
    /// assert_eq!(writer.insert(1, 11).unwrap(), Some(10));
    /// assert_eq!(remote.remove(&1).unwrap(), Some(11));
    /// ```
    pub fn insert(&self, key: K, value: V) -> Result<Option<V>, Error> {
        let found = self.write(Op::Insert(key, value), Guard::Always)?;
        Ok(found_value(found))
    }

    /// Removes; returns the value the key had. Takes the key's borrowed form (`&str`
    /// for a `String` key).
    pub fn remove<Q>(&self, key: &Q) -> Result<Option<V>, Error>
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + ?Sized,
    {
        let found = self.write(Op::Remove(key.to_owned()), Guard::Always)?;
        Ok(found_value(found))
    }

    /// Inserts `value` only if `key` is absent, as one step of the writer (no other
    /// write comes between the test and the insert, from any process); returns the value
    /// the key had: `None` if `value` went in, `Some` if nothing was written.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let here = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let there = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let writer = here.map::<u64, u64>("owners").unwrap();
    /// let remote = there.map::<u64, u64>("owners").unwrap();
    /// // Two processes race to claim key 7: exactly one wins.
    /// assert_eq!(remote.insert_if_absent(7, 2).unwrap(), None);
    /// assert_eq!(writer.insert_if_absent(7, 1).unwrap(), Some(2));
    /// ```
    pub fn insert_if_absent(&self, key: K, value: V) -> Result<Option<V>, Error> {
        let found = self.write(Op::Insert(key, value), Guard::Absent)?;
        Ok(found_value(found))
    }

    /// Sets `key` to `new` only if it holds `expected` (compared byte for byte), as one
    /// step of the writer: `Ok` with the value replaced, or `Err` with the value found
    /// (`None`: absent), nothing written.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let here = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let there = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let writer = here.map::<u64, u64>("balances").unwrap();
    /// let remote = there.map::<u64, u64>("balances").unwrap();
    /// writer.insert(1, 100).unwrap();
    /// // A read-modify-write from another process: retry while someone else moved it.
    /// let mut seen = remote.get(&1).unwrap().unwrap();
    /// while let Err(now) = remote.compare_and_set(1, seen, seen - 30).unwrap() {
    ///     seen = now.unwrap();
    /// }
    /// assert_eq!(writer.get(&1).unwrap(), Some(70));
    /// assert_eq!(writer.compare_and_set(1, 100, 0).unwrap(), Err(Some(70)));
    /// assert_eq!(writer.compare_and_remove(&1, 70).unwrap(), Ok(70));
    /// ```
    pub fn compare_and_set(
        &self,
        key: K,
        expected: V,
        new: V,
    ) -> Result<Result<V, Option<V>>, Error> {
        let found = self.write(Op::Insert(key, new), Guard::Equals(expected))?;
        Ok(compared_value(found))
    }

    /// Removes `key` only if it holds `expected`: `Ok` with the value removed, or `Err`
    /// with the value found. Example at [`compare_and_set`](Self::compare_and_set).
    pub fn compare_and_remove<Q>(&self, key: &Q, expected: V) -> Result<Result<V, Option<V>>, Error>
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + ?Sized,
    {
        let found = self.write(Op::Remove(key.to_owned()), Guard::Equals(expected))?;
        Ok(compared_value(found))
    }

    /// Inserts every entry of `entries`, in batches of 4,096: the writer applies each
    /// batch as one publication; another process sends each through its channel without
    /// waiting for old values, and waits once, at the end, until all are applied.
    /// Returns how many entries were inserted. On an error the batches before it are
    /// applied (from another process: sent, and applied unless the writer died).
    ///
    /// Read-your-writes does not cover a batch sent from another process: this node
    /// reads its entries once it has passed after `extend` returned (the pass period),
    /// or at once through `get_fresh`.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let here = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let there = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let writer = here.map::<u64, u64>("squares").unwrap();
    /// let remote = there.map::<u64, u64>("squares").unwrap();
    /// assert_eq!(remote.extend((0..10_000).map(|k| (k, k * k))).unwrap(), 10_000);
    /// assert_eq!(writer.get(&99).unwrap(), Some(9_801));
    /// ```
    pub fn extend(&self, entries: impl IntoIterator<Item = (K, V)>) -> Result<usize, Error> {
        const BATCH: usize = 4096;
        let (mut ops, mut total) = (Vec::with_capacity(BATCH), 0);
        let mut entries = entries.into_iter().peekable();
        let mut next_chunk = |ops: &mut Vec<Op<K, V>>| {
            ops.clear();
            ops.extend(entries.by_ref().take(BATCH).map(|(k, v)| Op::Insert(k, v)));
            !ops.is_empty()
        };
        match self.writes.now() {
            Now::Local(local) => {
                while next_chunk(&mut ops) {
                    lock(&local.writer)?.apply_batch(&ops)?;
                    total += ops.len();
                }
            }
            Now::Remote(remote) => {
                // One hold of the node's client from the first send to the flush: the
                // flush then reports every refusal of this batch, and none of another
                // thread's.
                let sent = {
                    let mut client = lock(&remote.client)?;
                    let mut sent = Ok(());
                    while sent.is_ok() && next_chunk(&mut ops) {
                        sent = client.send_batch(&ops).map(|_| total += ops.len());
                    }
                    sent.and_then(|()| client.flush().map(drop))
                };
                if let Err(e) = sent {
                    return Err(self.after_failure(e)?.into());
                }
            }
            Now::ReadOnly(node) => return Err(BiError::NotRunner { node }.into()),
        }
        Ok(total)
    }

    /// Applies `op` under `guard` here or at the writer; the value found at the key,
    /// `Ok` if the operation applied, `Err` if the guard refused it.
    fn write(&self, op: Op<K, V>, guard: Guard<V>) -> Result<Decided<V>, PoolError> {
        if let Now::Remote(remote) = self.writes.now()
            && remote.writer_may_be_gone()?
        {
            // Its lease lapsed (or it gave the role up): this process takes the role
            // before it sends anything more, and applies the write itself.
            self.writes.take_role()?;
        }
        match self.writes.now() {
            Now::Local(Local { writer, .. }) => {
                let mut found = Vec::with_capacity(1);
                let guards = std::slice::from_ref(&guard);
                lock(writer)?.apply_guarded(&[op], guards, V::same, &mut found)?;
                Outcome::decide(&guard, found.pop(), V::same)
                    .found()
                    .ok_or(PoolError::Collection(CollectionError::Corrupt {
                        reason: "the writer's handle reported no old value",
                    }))
            }
            Now::Remote(remote) => {
                let key = match &op {
                    Op::Insert(k, _) | Op::Remove(k) => k.clone(),
                };
                // The client's lock goes before a failure is handled (taking the role
                // takes it again).
                let sent = lock(&remote.client)?.request(op, guard);
                let found = match sent {
                    Ok(found) => {
                        remote.answered()?;
                        found
                    }
                    Err(e) => return Err(self.after_failure(e)?.into()),
                };
                // Acknowledged, so published: this node's next read of the key comes from
                // memory (read-your-writes), not from what its cache had before the write.
                self.reads.here()?.refresh(&key)?;
                Ok(found)
            }
            Now::ReadOnly(node) => Err(BiError::NotRunner { node }.into()),
        }
    }

    /// After a remote write failed: if the writer timed out or died, take its role
    /// when its lease has lapsed, so that the next write applies here. Returns the error
    /// to report: a timeout after which this process took the role is the writer's
    /// death ([`DelegationError::WriterDied`]): taking the role reported the request
    /// failed, and no writer applies it from then on.
    fn after_failure(&self, e: CollectionError) -> Result<CollectionError, PoolError> {
        let CollectionError::Delegation(
            d @ (DelegationError::Timeout { .. } | DelegationError::WriterDied { .. }),
        ) = &e
        else {
            return Ok(e);
        };
        let timed_out = match d {
            DelegationError::Timeout { seq, .. } => Some(*seq),
            _ => None,
        };
        match (self.writes.take_role()?, timed_out) {
            (true, Some(seq)) => Ok(CollectionError::Delegation(DelegationError::WriterDied {
                first: seq,
                last: seq,
            })),
            _ => Ok(e),
        }
    }

    /// The nodes whose channels this process's serving thread found holding what no
    /// client writes (a corrupt record or counter), with what it found: their requests
    /// wait, and time out, until their channel is sane again; every other node is
    /// served. Empty in a process that is not the writer.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::open_or_create(dir.path().join("pool.bi"), PoolConfig::default()).unwrap();
    /// let m = pool.map::<u64, u64>("m").unwrap();
    /// m.insert(1, 1).unwrap();
    /// assert!(m.broken_clients().is_empty());
    /// ```
    pub fn broken_clients(&self) -> Vec<(usize, String)> {
        match self.writes.now() {
            Now::Local(local) => local
                .serving
                .broken
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            _ => Vec::new(),
        }
    }

    /// Whether this process is the structure's writer (writes apply here).
    pub fn is_writer(&self) -> bool {
        matches!(self.writes.now(), Now::Local(_))
    }

    /// The writer's own handle, locked, for everything else it offers (`retain`,
    /// `update`, `compute`, string keys...): `None` in a process that is not the
    /// writer. Requests of other processes wait while it is held.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::open_or_create(dir.path().join("pool.bi"), PoolConfig::default()).unwrap();
    /// let counts = pool.map::<u64, u64>("counts").unwrap();
    /// counts.insert(7, 1).unwrap();
    /// let mut w = counts.writer().unwrap().unwrap();
    /// w.update(7, |n| n + 1).unwrap();
    /// drop(w);
    /// assert_eq!(counts.insert(7, 0).unwrap(), Some(2));
    /// ```
    pub fn writer(&self) -> Result<Option<MutexGuard<'_, W>>, Error> {
        match self.writes.now() {
            Now::Local(local) => Ok(Some(lock(&local.writer)?)),
            _ => Ok(None),
        }
    }

    /// The calling thread's read handle on this node (made on its first read).
    pub fn reads(&self) -> Result<&R, Error> {
        Ok(self.reads.here()?)
    }
}

impl<K: Stored + Eq + Hash + Send + Sync, V: Stored + Send + Sync, M: MemView + 'static>
    SharedMap<K, V, M>
{
    /// The value of `key` as this node reads it: the version its cache holds, at most
    /// one staleness bound old, with this process's own writes (see
    /// [What reads see](crate::shared#what-reads-see)). A miss costs what a hit costs.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let here = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let there = Pool::open_or_create(&path, PoolConfig::default()).unwrap(); // another process
    /// let writer = here.map::<u32, u32>("m").unwrap();
    /// let remote = there.map::<u32, u32>("m").unwrap();
    /// assert_eq!(remote.get(&1).unwrap(), None);
    /// remote.insert(1, 2).unwrap(); // applied by the writer's process
    /// assert_eq!(remote.get(&1).unwrap(), Some(2)); // its own write, read at once
    /// assert_eq!(writer.get(&1).unwrap(), Some(2));
    /// ```
    pub fn get<Q>(&self, key: &Q) -> Result<Option<V>, Error>
    where
        K: Borrow<Q>,
        Q: bi_collections::Query<K> + Hash + Eq + ?Sized,
    {
        Ok(self.reads.here()?.get(key)?)
    }

    /// The value of `key`, finding every insertion published before the call by any
    /// process: a miss in this node's cache is read again from memory (a few hundred
    /// nanoseconds more than [`get`](Self::get) on a miss; a hit costs the same).
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let here = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let there = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let writer = here.map::<u32, u32>("m").unwrap();
    /// let remote = there.map::<u32, u32>("m").unwrap();
    /// assert_eq!(remote.get(&1).unwrap(), None); // now cached as absent there
    /// writer.insert(1, 2).unwrap();
    /// assert_eq!(remote.get_fresh(&1).unwrap(), Some(2));
    /// ```
    pub fn get_fresh<Q>(&self, key: &Q) -> Result<Option<V>, Error>
    where
        K: Borrow<Q>,
        Q: bi_collections::Query<K> + Hash + Eq + ?Sized,
    {
        Ok(self.reads.here()?.get_fresh(key)?)
    }

    /// How many times the map's writer needed a larger table and the pool's heap could
    /// not hold one (as this node reads the map). Writes still succeed then, with longer
    /// bucket chains and slower lookups: a count above zero means the pool is too small
    /// for the map (size it with [`Pool::map_with_capacity`](crate::Pool::map_with_capacity)'s
    /// figures, or open a larger pool).
    ///
    /// ```
    /// use bi::core::region::RegionConfig;
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let region = RegionConfig::new(1 << 20).with_nodes(2); // a small pool
    /// let pool = Pool::open_or_create(dir.path().join("pool.bi"), PoolConfig { region, ..PoolConfig::default() }).unwrap();
    /// let m = pool.map::<u64, u64>("m").unwrap();
    /// let mut k = 0;
    /// while m.failed_grows().unwrap() == 0 {
    ///     m.insert(k, k).unwrap(); // never fails for lack of room to grow
    ///     k += 1;
    /// }
    /// assert_eq!(m.get(&(k - 1)).unwrap(), Some(k - 1));
    /// ```
    pub fn failed_grows(&self) -> Result<u64, Error> {
        Ok(self.reads.here()?.enter().failed_grows()?)
    }

    /// The values of `keys`, in order, into `out` (cleared first), each as
    /// [`get`](Self::get) reads it, in one read section. The bucket lines of up to
    /// [`BATCH_AHEAD`](bi_collections::map::BATCH_AHEAD) keys are requested from memory
    /// before any of them is read, so their trips to memory overlap: where most lookups
    /// miss in the cache (large maps; memory far away, as on a CXL pool) a batch costs a
    /// fraction of a loop of `get`s per key. None of the maps `bi` is measured against
    /// offers this.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::open_or_create(dir.path().join("pool.bi"), PoolConfig::default()).unwrap();
    /// let m = pool.map::<u64, u64>("m").unwrap();
    /// m.extend((0..1000).map(|k| (k, k + 1))).unwrap();
    /// let mut out = Vec::new();
    /// m.get_many(&[5, 5000, 999], &mut out).unwrap();
    /// assert_eq!(out, [Some(6), None, Some(1000)]);
    /// ```
    pub fn get_many<Q>(&self, keys: &[Q], out: &mut Vec<Option<V>>) -> Result<(), Error>
    where
        K: Borrow<Q>,
        Q: bi_collections::Query<K> + Hash + Eq,
    {
        Ok(self.reads.here()?.get_many(keys, out)?)
    }

    /// Replaces the value of `key` with `f` of it, only if the key is present; returns
    /// the value it replaced (`None`: absent, nothing written). The writer's process
    /// applies it in one step; another process reads the value, then sets `f` of it
    /// only if the key still holds what it read ([`compare_and_set`](Self::compare_and_set)),
    /// and starts again if another write came between, so `f` may run more than once.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let here = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let there = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let writer = here.map::<u64, u64>("visits").unwrap();
    /// let remote = there.map::<u64, u64>("visits").unwrap();
    /// writer.insert(7, 1).unwrap();
    /// assert_eq!(writer.update(7, |n| n + 1).unwrap(), Some(1));
    /// assert_eq!(remote.update(7, |n| n + 1).unwrap(), Some(2));
    /// assert_eq!(remote.update(8, |n| n + 1).unwrap(), None); // absent: nothing written
    /// assert_eq!(writer.get(&7).unwrap(), Some(3));
    /// ```
    pub fn update(&self, key: K, f: impl Fn(&V) -> V) -> Result<Option<V>, Error> {
        if let Now::Local(local) = self.writes.now() {
            return Ok(lock(&local.writer)?.update(key, f)?);
        }
        loop {
            let Some(seen) = self.reads.here()?.get_fresh(&key)? else {
                return Ok(None);
            };
            let new = f(&seen);
            match self.compare_and_set(key.clone(), seen, new)? {
                Ok(old) => return Ok(Some(old)),
                Err(None) => return Ok(None),
                // Another write came between the read and the set: read again.
                Err(Some(_)) => {}
            }
        }
    }
}

impl<K: Stored + Ord, V: Stored, M: MemView> SharedTree<K, V, M> {
    /// The value of `key` as this node reads it.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::open_or_create(dir.path().join("pool.bi"), PoolConfig::default()).unwrap();
    /// let t = pool.tree::<u32, u32>("t").unwrap();
    /// t.insert(1, 2).unwrap();
    /// assert_eq!(t.get(&1).unwrap(), Some(2));
    /// ```
    pub fn get<Q>(&self, key: &Q) -> Result<Option<V>, Error>
    where
        K: Borrow<Q>,
        Q: bi_collections::Query<K> + Ord + ?Sized,
    {
        Ok(self.reads.here()?.get(key)?)
    }
}

/// The writes of every structure this process has a shared handle of, by name, so that
/// its handles share one writer or one client (two clients of one node on one channel
/// would corrupt it).
pub(crate) type OpenWrites = Mutex<Vec<(String, std::sync::Weak<dyn Any + Send + Sync>)>>;

impl<M: MemView + 'static> Pool<M> {
    /// A handle of the map named `name` that reads on this node and writes from here
    /// whoever the writer is: this process becomes the writer if no live process is
    /// (see [`shared`](crate::shared)). The handle is `Send + Sync + Clone`: share one
    /// (or clones of it) between every thread of the process; each thread that reads
    /// gets a reader record of its own. Handles opened again share the process's writes.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::open_or_create(dir.path().join("pool.bi"), PoolConfig::default()).unwrap();
    /// let prices = pool.map::<u64, f64>("prices").unwrap();
    /// assert_eq!(prices.insert(3, 9.5).unwrap(), None);
    /// let again = pool.map::<u64, f64>("prices").unwrap(); // shares the writer
    /// assert_eq!(again.insert(3, 9.75).unwrap(), Some(9.5));
    /// ```
    pub fn map<K: Stored + Eq + Hash + Send + Sync, V: Stored + Send + Sync>(
        &self,
        name: &str,
    ) -> Result<SharedMap<K, V, M>, Error> {
        self.map_with_config(name, MapConfig::default())
            .map_err(|e| Error::from(e).about(|| structure::<K, V>("map", name)))
    }

    /// [`map`](Self::map), sized for `capacity` keys the way `HashMap::with_capacity` is:
    /// if this process makes the map (or adopts it), its table starts large enough that
    /// loading `capacity` keys never resizes it, and it never shrinks below that. A map
    /// that another process writes keeps the size its writer chose.
    ///
    /// The pool must hold the table: a `u64 -> u64` map takes about 43 bytes per key of
    /// capacity at the start (a 64-byte line for every 1.5 keys), and strings that do not fit their
    /// 16-byte word take their length rounded up to 64 bytes, plus a line per entry for
    /// keys and values over 48 bytes together. A table the heap cannot hold is
    /// [`PoolError::Collection`] with the heap's error.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::open_or_create(dir.path().join("pool.bi"), PoolConfig::default()).unwrap();
    /// let m = pool.map_with_capacity::<u64, u64>("sized", 100_000).unwrap();
    /// let w = m.writer().unwrap().unwrap();
    /// assert!(w.capacity() * 3 / 2 >= 100_000); // buckets of three entries, grown at half
    /// ```
    pub fn map_with_capacity<K: Stored + Eq + Hash + Send + Sync, V: Stored + Send + Sync>(
        &self,
        name: &str,
        capacity: usize,
    ) -> Result<SharedMap<K, V, M>, Error> {
        self.map_with_config(name, MapConfig::for_keys::<K, V>(capacity))
            .map_err(|e| Error::from(e).about(|| structure::<K, V>("map", name)))
    }

    fn map_with_config<K: Stored + Eq + Hash + Send + Sync, V: Stored + Send + Sync>(
        &self,
        name: &str,
        config: MapConfig,
    ) -> Result<SharedMap<K, V, M>, PoolError> {
        let map = BiHashMap::<K, V>::named(self.region(), self.runtime(), name)?;
        let rt = self.runtime().clone();
        let take = move || Ok(map.take_writer_with(&rt, writer_in(&rt, map.slot())?, config)?);
        let rt = self.runtime().clone();
        let open = move || Ok(map.read_handle(&rt)?);
        Ok(Shared {
            reads: Reads::new(Box::new(open))?,
            writes: self.writes(name, map.slot(), take)?,
        })
    }

    /// The same for the tree named `name`.
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::open_or_create(dir.path().join("pool.bi"), PoolConfig::default()).unwrap();
    /// let index = pool.tree::<u64, u64>("index").unwrap();
    /// index.insert(2, 20).unwrap();
    /// assert_eq!(index.remove(&2).unwrap(), Some(20));
    /// ```
    pub fn tree<K: Stored + Ord + Send + Sync, V: Stored + Send + Sync>(
        &self,
        name: &str,
    ) -> Result<SharedTree<K, V, M>, Error> {
        let shared = || -> Result<_, PoolError> {
            let tree = BiTree::<K, V>::named(self.region(), self.runtime(), name)?;
            let rt = self.runtime().clone();
            let take = move || Ok(tree.take_writer(&rt, writer_in(&rt, tree.slot())?)?);
            let rt = self.runtime().clone();
            let open = move || Ok(tree.read_handle(&rt)?);
            Ok(Shared {
                reads: Reads::new(Box::new(open))?,
                writes: self.writes(name, tree.slot(), take)?,
            })
        };
        shared().map_err(|e| Error::from(e).about(|| structure::<K, V>("tree", name)))
    }

    /// This process's writes of `name`: the ones already open, or new ones.
    fn writes<K, V, W>(
        &self,
        name: &str,
        slot: usize,
        take: impl Fn() -> Result<W, PoolError> + Send + Sync + 'static,
    ) -> Result<Arc<Writes<K, V, W, M>>, PoolError>
    where
        K: Stored + Send + Sync,
        V: Stored + Send + Sync,
        W: ApplyBatch<K, V> + Send + 'static,
    {
        let mut open = self
            .open_writes()
            .lock()
            .map_err(|_| CollectionError::Corrupt {
                reason: "a thread panicked while opening a shared handle",
            })?;
        open.retain(|(_, w)| w.strong_count() > 0);
        if let Some((_, w)) = open.iter().find(|(n, _)| n == name) {
            // The structure was found by name and type above, so its writes are of
            // these types.
            if let Some(w) = w
                .upgrade()
                .and_then(|w| w.downcast::<Writes<K, V, W, M>>().ok())
            {
                return Ok(w);
            }
        }
        let writes = Arc::new(self.new_writes(name, slot, take)?);
        let any: Arc<dyn Any + Send + Sync> = writes.clone();
        open.push((name.to_owned(), Arc::downgrade(&any)));
        Ok(writes)
    }

    fn new_writes<K, V, W>(
        &self,
        name: &str,
        slot: usize,
        take: impl Fn() -> Result<W, PoolError> + Send + Sync + 'static,
    ) -> Result<Writes<K, V, W, M>, PoolError>
    where
        K: Stored + Send + Sync,
        V: Stored + Send + Sync,
        W: ApplyBatch<K, V> + Send + 'static,
    {
        let rt = self.runtime();
        let mut writes = Writes {
            local: OnceLock::new(),
            remote: None,
            read_only: None,
        };
        if rt.is_joined() {
            writes.read_only = Some(rt.node());
            return Ok(writes);
        }
        let clients = self.region().layout().config().nodes() as usize;
        let view = rt.view().clone();
        match take() {
            Ok(w) => {
                let layout = DelegationLayout::named(self.region(), rt, name, clients, true)?
                    .ok_or(CollectionError::Corrupt {
                        reason: "the writer was granted no delegation area",
                    })?;
                let serving = self.writing().serving;
                let _ = writes.local.set(serve(name, view, layout, w, serving)?);
                Ok(writes)
            }
            // Another process writes it; or this process writes another structure (a
            // node runs one writer), and the structure has been served before: its
            // writer is taken to be alive until a write finds it gone.
            Err(
                e @ (PoolError::WriterTaken
                | PoolError::Collection(CollectionError::Runtime(BiError::WriterAlive {
                    ..
                }))),
            ) => {
                let served = DelegationLayout::named(self.region(), rt, name, clients, false)?;
                let layout = match (served, e) {
                    (Some(layout), _) => layout,
                    (None, PoolError::WriterTaken) => return Err(PoolError::WriterTaken),
                    (None, _) => return Err(PoolError::NoWriterYet),
                };
                let writing = self.writing();
                let config = ClientConfig::default().timeout(writing.timeout);
                let client = DelegationClient::with_config(view, layout, rt.node(), config)?;
                let lease = rt.config().node_lease_ticks();
                writes.remote = Some(Remote {
                    client: Mutex::new(client),
                    layout,
                    take: Box::new(take),
                    taking: Mutex::new(()),
                    name: name.to_owned(),
                    rt: rt.clone(),
                    slot,
                    seen_alive: Mutex::new(Instant::now()),
                    trust: Duration::from_nanos(lease / 2),
                    serving: writing.serving,
                });
                Ok(writes)
            }
            Err(e) => Err(e),
        }
    }
}

/// Starts serving the other processes' writes of the structure `name` with `w`, this
/// process's writer handle, through the delegation area `layout`: resumes the area a
/// previous writer served (reporting what it left unacknowledged as failed), or sets up
/// a new one.
fn serve<K, V, W, M>(
    name: &str,
    view: M,
    layout: DelegationLayout<K, V>,
    w: W,
    serving: Idle,
) -> Result<Local<W>, PoolError>
where
    K: Stored + Send + Sync,
    V: Stored + Send + Sync,
    W: ApplyBatch<K, V> + Send + 'static,
    M: MemView + 'static,
{
    let writer = Arc::new(Mutex::new(w));
    let structure = Locked(writer.clone());
    let mut server = match DelegationServer::resume(view.clone(), layout, structure) {
        Err(CollectionError::Delegation(DelegationError::HeaderMismatch {
            field: "magic",
            found: 0,
            ..
        })) => DelegationServer::new(view, layout, Locked(writer.clone()))?,
        r => r?,
    }
    .with_idle(serving);
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let broken = Arc::new(Mutex::new(Vec::new()));
    let telling = broken.clone();
    let tell = move |now: &[(usize, CollectionError)]| {
        let now = now.iter().map(|(node, e)| (*node, e.to_string())).collect();
        // A poisoned list is replaced whole: nothing of it is read.
        *telling.lock().unwrap_or_else(|e| e.into_inner()) = now;
    };
    let thread = std::thread::Builder::new()
        .name(format!("bi-serve-{name}"))
        .spawn(move || server.run_until_observed(&stopping, tell))
        .map_err(|_| CollectionError::Corrupt {
            reason: "no thread could be started to serve other processes",
        })?;
    Ok(Local {
        writer,
        serving: Server {
            stop,
            thread: Some(thread),
            broken,
        },
    })
}
