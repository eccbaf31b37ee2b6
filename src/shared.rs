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
//! [`Condition`] the writer decides when it applies it, so
//! [`insert_if_absent`](SharedStructure::insert_if_absent),
//! [`compare_and_set`](SharedStructure::compare_and_set) and
//! [`compare_and_remove`](SharedStructure::compare_and_remove) are single steps of the writer,
//! with no other write between the test and the change. Closures (`update`, `compute`,
//! `retain`) run on the writer's own handle ([`writer`](SharedStructure::writer)).
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
//! serves the others from then on. A writer whose process ran on this host and is gone
//! (killed, crashed, exited) is dead at once, lease or not: the kernel says so (process
//! id and start time, asked of `/proc`), so a writer restarted
//! right after a crash takes the role when it opens the structure. One of another host
//! is judged by its lease: a writer restarted while the dead one's lease runs opens as
//! a remote handle and becomes the writer on its first write after the lease, with no
//! loop in user code.
//!
//! **A stopped writer is not dead.** A writer process of the same host that still exists
//! (stopped by SIGSTOP or a debugger, or starved) keeps its role however old its lease:
//! it may have stopped inside a write, which it finishes when it runs again, and a
//! successor would have adopted the structure under that write. Writes sent meanwhile
//! time out; once it runs again it serves them, and once it is killed the next write
//! takes the role. A writer on another host is judged by its lease alone.
//!
//! A write sent before the lease lapsed waits for the writer until the client timeout
//! ([`PoolConfig::write_timeout`](crate::PoolConfig::write_timeout)), or until a look at
//! the role (every 5 ms while it waits) finds the writer certainly gone: it gave the role
//! up, or its process is gone from this host ([`DelegationError::ServerGone`], kind
//! [`NoWriter`](crate::ErrorKind::NoWriter), when this handle does not take the role; a
//! writer on another host is waited for until the timeout). The handle then takes the
//! role if the lease has lapsed, and the write fails with
//! [`DelegationError::WriterDied`] (kind [`NoWriter`](crate::ErrorKind::NoWriter): the
//! takeover reported it failed), or with [`DelegationError::Timeout`] (kind
//! [`Timeout`](crate::ErrorKind::Timeout)) while the lease still runs: the writer may be
//! alive and slow, and may still apply it. The process that takes the role (this one or
//! another) reports every request it finds unacknowledged as failed
//! ([`DelegationError::WriterDied`]) and applies none of them, so no request is applied
//! twice; the dead writer may have applied some before dying (the outcome of a request
//! to a process that died is unknown, as with any RPC), so read the structure before
//! sending again.
//!
//! **How long a write blocks.** At most the write timeout, plus a node lease to know a
//! dead writer gone and take its role, plus a pass, when one writer is lost while it
//! waits; a lease more for each further writer lost meanwhile (a successor killed or
//! stopped in its turn). No write is acknowledged while no writer lives, so no bound on
//! a write can ignore how many writers die under it.

//! # What reads see
//!
//! Reads never leave the reading node and never wait: [`get`](SharedStructure::get) answers
//! from the version this node's cache holds, hits and misses alike, at most one
//! staleness bound old (the pool's pass period, a millisecond by default, plus the
//! runtime's skew allowance). On top of that, **a process reads its own writes**: the
//! writer's process applies them in its node's cache; a remote handle, once the writer
//! acknowledges a write, drops its node's copies of the key's path (a few invalidations
//! and one fence on the write, nothing on reads), so the next `get` of that key on this
//! node reads it from memory and finds the write. [`get_fresh`](SharedMap::get_fresh)
//! finds every insertion published before the call, whoever made it, at the price of
//! reading a miss again from memory.
//!
//! # Trade-offs
//!
//! - **Latency of a remote write**: a round trip through shared memory to the writer's
//!   serving thread, which spins while requests keep coming, then naps
//!   ([`PoolConfig::serving`](crate::PoolConfig::serving): 10 us naps for 100 ms after
//!   a request, then up to a millisecond). A writer of the same host rings the server
//!   awake; one of another host waits out the nap. Idling costs CPU: on a 2-core KVM
//!   guest, half a core or more while warm and about 1.5% once cold (see
//!   [`Idle`]); longer naps cost less.
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

use crate::error::PoolError;
use crate::error::{Error, structure};
use crate::pool::writer_in;
use crate::pool::{Pool, Writing};
use bi_alloc::NodeHeap;
use bi_collections::delegate::{
    ClientConfig, DelegationClient, DelegationError, DelegationLayout, DelegationServer, Idle,
    Outcome, ServeTotals,
};
use bi_collections::map::{BiHashMap, MapConfig, MapReadHandle, MapWriteHandle};
use bi_collections::tree::{BiTree, TreeReadHandle, TreeWriteHandle};
use bi_collections::{
    ApplyBatch, BatchReport, CollectionError, Condition, Decided, Op, Refresh, Stored,
    compared_value, found_value,
};
use bi_core::mem::{Hardware, MemView};
use bi_core::runtime::{BiError, NodeRuntime};
use crossbeam_utils::CachePadded;
use std::any::Any;
use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thread_local::ThreadLocal;

/// A map every process of the pool reads and writes ([`Pool::map`]).
pub type SharedMap<K, V, M = Hardware> =
    SharedStructure<K, V, MapWriteHandle<K, V, M, NodeHeap>, MapReadHandle<K, V, M>, M>;

/// An ordered map every process of the pool reads and writes ([`Pool::tree`]).
pub type SharedTree<K, V, M = Hardware> =
    SharedStructure<K, V, TreeWriteHandle<K, V, M, NodeHeap>, TreeReadHandle<K, V, M>, M>;

/// A structure's handle in one process of the pool: reads on this node, writes applied
/// here if this process is the writer, else sent to it. See the [module](self) docs.
///
/// A handle is `Send + Sync + Clone`: one handle (or its clones, which share everything)
/// serves every thread and task of the process. Each thread that reads gets a read
/// handle of its own (a reader record of the node) on its first read; when the thread
/// ends, the next new thread reuses it, so short-lived threads take no more records
/// than run at once.
pub struct SharedStructure<K: Stored, V: Stored, W, R: Send, M: MemView = Hardware> {
    reads: Arc<Reads<R>>,
    writes: Arc<Writes<K, V, W, M>>,
}

impl<K: Stored, V: Stored, W, R: Send, M: MemView> Clone for SharedStructure<K, V, W, R, M> {
    fn clone(&self) -> Self {
        SharedStructure {
            reads: self.reads.clone(),
            writes: self.writes.clone(),
        }
    }
}

/// A structure's read handles in this process, one per thread that reads.
struct Reads<R: Send> {
    /// Padded to a cache block each: every lookup writes its handle (the guard's depth,
    /// the last array read), and two threads writing neighbouring handles slow each
    /// other as if they shared a line (two reader threads of one map on a 2-core AMD
    /// EPYC guest: 25-37 M lookups/s unpadded).
    per_thread: ThreadLocal<CachePadded<R>>,
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
        let padded = self
            .per_thread
            .get_or_try(|| (self.open)().map(CachePadded::new))?;
        Ok(padded)
    }
}

/// How this process writes a structure: shared by every handle of it in the process.
///
/// The writer role comes and goes: a process takes it when no live process holds it
/// (at the first handle, or when the writer it sent its writes to is gone), and loses it
/// when it stalled past its lease and another process took it meanwhile. While it holds
/// the role its writes apply here and a thread serves the other processes; otherwise
/// they go through this node's client to the process that holds it.
struct Writes<K: Stored, V: Stored, W, M: MemView> {
    /// This process's writer handle while it holds the role (`None` otherwise). The
    /// serving thread takes the same lock.
    writer: Arc<WriterSlot<W>>,
    /// The thread serving the other processes while this one holds the role.
    serving: Mutex<Option<Server>>,
    /// This node's client, made the first time another process holds the role.
    remote: OnceLock<Remote<K, V, M>>,
    /// Takes the writer role (adopting the structure), or says who holds it.
    take: TakeWriter<W>,
    /// Held while the role is taken or given up, so that one thread does it.
    taking: Mutex<()>,
    name: String,
    /// This node's runtime and the structure's slot, to tell whether its writer lives.
    rt: NodeRuntime<M>,
    slot: usize,
    /// The structure's delegation area (`None` for a process that reads only).
    area: Option<DelegationLayout<K, V>>,
    /// How this process serves and sends.
    writing: Writing,
    /// This process joined another's node: it reads only.
    read_only: Option<usize>,
}

/// Another process holds the writer role: writes go through this node's client, and
/// the role is taken here once that process is gone.
struct Remote<K: Stored, V: Stored, M: MemView> {
    client: Mutex<DelegationClient<M, K, V>>,
    /// When the writer last showed it was alive (an acknowledgement, or its record),
    /// and how long that stands: half the node lease.
    seen_alive: Mutex<Instant>,
    trust: Duration,
}

impl<K: Stored, V: Stored, W, M: MemView> Writes<K, V, W, M> {
    /// Whether the writer may be gone: an earlier write of this node is unanswered, or
    /// nothing showed it alive for half a lease and its record, read now, says so.
    fn writer_may_be_gone(&self, remote: &Remote<K, V, M>) -> Result<bool, PoolError> {
        let stuck = {
            let client = lock(&remote.client)?;
            client.sent() > client.applied()
        };
        let mut seen = lock(&remote.seen_alive)?;
        if !stuck && seen.elapsed() < remote.trust {
            return Ok(false);
        }
        if self.rt.writer_held(self.slot)? && !stuck {
            *seen = Instant::now();
            return Ok(false);
        }
        Ok(true)
    }
}

impl<K: Stored, V: Stored, M: MemView> Remote<K, V, M> {
    /// An acknowledgement came: the writer lives.
    fn answered(&self) -> Result<(), PoolError> {
        *lock(&self.seen_alive)? = Instant::now();
        Ok(())
    }
}

/// How a process takes a structure's writer role.
type TakeWriter<W> = Box<dyn Fn() -> Result<W, PoolError> + Send + Sync>;

/// What a handle does with a write now.
enum Now<'a, K: Stored, V: Stored, M: MemView> {
    /// This process holds the role (unless it loses it before the write takes the
    /// writer's lock: then the lock holds `None`).
    Local,
    Remote(&'a Remote<K, V, M>),
    ReadOnly(usize),
    /// This process lost the role and has no client yet: a write makes one.
    Unserved,
}

impl<K: Stored, V: Stored, W, M: MemView> Writes<K, V, W, M> {
    fn now(&self) -> Now<'_, K, V, M> {
        if let Some(node) = self.read_only {
            return Now::ReadOnly(node);
        }
        if lock(&self.writer).is_ok_and(|w| w.is_some()) {
            return Now::Local;
        }
        match self.remote.get() {
            Some(remote) => Now::Remote(remote),
            None => Now::Unserved,
        }
    }

    /// This process's writer handle, locked; `None` if it does not hold the role.
    fn local(&self) -> Result<Option<WriterGuard<'_, W>>, PoolError> {
        Ok(writer_guard(&self.writer)?)
    }
}

/// This process's writer handle of a structure (`None` while it does not hold the role),
/// behind the lock its threads' writes and its serving thread take, with the count of
/// its threads waiting for it.
///
/// The serving thread applies batch after batch while other processes send, and a lock
/// does not queue: a thread of this process woken when the lock is freed would find it
/// taken again by the next batch, for as long as the others keep sending (seconds, under
/// a burst). So the serving thread lets a waiting thread of the process go first.
struct WriterSlot<W> {
    handle: Mutex<Option<W>>,
    waiting: AtomicUsize,
}

impl<W> Default for WriterSlot<W> {
    fn default() -> Self {
        WriterSlot {
            handle: Mutex::new(None),
            waiting: AtomicUsize::new(0),
        }
    }
}

impl<W> std::ops::Deref for WriterSlot<W> {
    type Target = Mutex<Option<W>>;
    fn deref(&self) -> &Mutex<Option<W>> {
        &self.handle
    }
}

/// The writer handle in `slot`, locked for a thread of this process, if there is one
/// (this process holds the role).
fn writer_guard<W>(slot: &WriterSlot<W>) -> Result<Option<WriterGuard<'_, W>>, CollectionError> {
    let w = match slot.handle.try_lock() {
        Ok(w) => w,
        Err(_) => {
            slot.waiting.fetch_add(1, Ordering::SeqCst);
            let w = lock_soon(&slot.handle);
            slot.waiting.fetch_sub(1, Ordering::SeqCst);
            w?
        }
    };
    Ok(w.is_some().then_some(WriterGuard(w)))
}

/// [`writer_guard`] for the serving thread: it lets the threads of this process that
/// wait for the lock have it first, for up to [`DEFER_FOR`] per batch.
fn serving_guard<W>(slot: &WriterSlot<W>) -> Result<Option<WriterGuard<'_, W>>, CollectionError> {
    let mut start = None;
    while slot.waiting.load(Ordering::SeqCst) > 0
        && start.get_or_insert_with(Instant::now).elapsed() < DEFER_FOR
    {
        std::thread::yield_now();
    }
    let w = lock_soon(&slot.handle)?;
    Ok(w.is_some().then_some(WriterGuard(w)))
}

/// How long the serving thread lets this process's own writes go first, per batch.
const DEFER_FOR: Duration = Duration::from_millis(1);

/// This process's writer handle of a shared structure, locked: other threads' writes and
/// the other processes' (through the serving thread) wait until it is dropped.
pub struct WriterGuard<'a, W>(MutexGuard<'a, Option<W>>);

impl<W> std::ops::Deref for WriterGuard<'_, W> {
    type Target = W;
    fn deref(&self) -> &W {
        // Made only over `Some`, which cannot change while the lock is held.
        self.0
            .as_ref()
            .unwrap_or_else(|| unreachable!("a writer guard over no writer"))
    }
}

impl<W> std::ops::DerefMut for WriterGuard<'_, W> {
    fn deref_mut(&mut self) -> &mut W {
        self.0
            .as_mut()
            .unwrap_or_else(|| unreachable!("a writer guard over no writer"))
    }
}

impl<K, V, W, M> Writes<K, V, W, M>
where
    K: Stored + Send + Sync,
    V: Stored + Send + Sync,
    W: ApplyBatch<K, V> + Send + 'static,
    M: MemView + 'static,
{
    /// Takes the writer role if no live process holds it (the one that held it is gone,
    /// or gave it up): from then on this process applies the writes, its own and the
    /// other processes'. Whether this process now writes.
    fn take_role(&self) -> Result<bool, PoolError> {
        if self.read_only.is_some() {
            return Ok(false);
        }
        let _one = lock(&self.taking)?;
        if lock(&self.writer)?.is_some() {
            return Ok(true);
        }
        match (self.take)() {
            Ok(writer) => {
                let area = self.area.ok_or_else(|| CollectionError::Corrupt {
                    reason: "the writer was granted no delegation area",
                })?;
                *lock(&self.writer)? = Some(writer);
                let server = serve(
                    &self.name,
                    self.rt.view().clone(),
                    area,
                    self.writer.clone(),
                    self.rt.node(),
                    self.writing.serving,
                );
                match server {
                    Ok(server) => *lock(&self.serving)? = Some(server),
                    Err(e) => {
                        *lock(&self.writer)? = None;
                        return Err(e);
                    }
                }
                Ok(true)
            }
            Err(
                PoolError::WriterTaken
                | PoolError::Collection(CollectionError::Runtime(BiError::WriterAlive { .. })),
            ) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// This process's writer handle, locked, if it holds the role, after [`prepare`]
    /// when it does not (which may take the role). A writer's own write takes the lock
    /// once.
    ///
    /// [`prepare`]: Self::prepare
    fn local_or_prepare(&self) -> Result<Option<WriterGuard<'_, W>>, PoolError> {
        if let Some(w) = self.local()? {
            return Ok(Some(w));
        }
        self.prepare()?;
        self.local()
    }

    /// Before a write: takes the role if the writer this process sends to may be gone
    /// (or if this process lost the role and has no client yet, and nobody holds it),
    /// and makes the client if another process holds it.
    fn prepare(&self) -> Result<(), PoolError> {
        match self.now() {
            Now::Remote(remote) if self.writer_may_be_gone(remote)? => {
                // Its lease lapsed (or it gave the role up): this process takes the role
                // before it sends anything more, and applies the write itself.
                self.take_role()?;
            }
            Now::Unserved => {
                if !self.take_role()? {
                    self.remote_client()?;
                }
            }
            Now::Local | Now::Remote(_) | Now::ReadOnly(_) => {}
        }
        Ok(())
    }

    /// The error of a write that found neither the role here nor a client (the role
    /// changed hands under it).
    fn unserved(&self) -> PoolError {
        CollectionError::Runtime(BiError::RoleLost {
            node: self.rt.node(),
            taker: None,
        })
        .into()
    }

    /// After this process's own write failed: if memory no longer names this process as
    /// the writer (it stalled past its lease and another process took the role), it
    /// gives the role up, stops serving, and from then on sends its writes to the new
    /// writer. Whether it gave the role up (the failed write was not applied: a writer
    /// checks its role before it publishes).
    fn lost_role(&self) -> Result<bool, PoolError> {
        if self.rt.holds_writer_role(self.slot)? {
            return Ok(false);
        }
        let _one = lock(&self.taking)?;
        // The serving thread stops first: it takes the writer's lock.
        let server = lock(&self.serving)?.take();
        drop(server);
        *lock(&self.writer)? = None;
        self.remote_client()?;
        Ok(true)
    }

    /// This node's client of the structure's delegation area, made the first time
    /// another process holds the role.
    fn remote_client(&self) -> Result<&Remote<K, V, M>, PoolError> {
        if let Some(remote) = self.remote.get() {
            return Ok(remote);
        }
        let area = self.area.ok_or_else(|| CollectionError::Corrupt {
            reason: "no delegation area to send writes through",
        })?;
        let config = ClientConfig::default().timeout(self.writing.timeout);
        let mut client =
            DelegationClient::with_config(self.rt.view().clone(), area, self.rt.node(), config)?;
        // A write stops waiting for a writer that is certainly gone (it gave the role up,
        // or its process ended on this host) at the next look at the role, not at the
        // timeout.
        let (rt, slot) = (self.rt.clone(), self.slot);
        // The writer it is made to send to, seen now.
        let mut first = 0;
        rt.writer_certainly_gone(slot, &mut first)?;
        let seen = AtomicU64::new(first);
        client.watch_server(move || {
            let mut last = seen.load(Ordering::Relaxed);
            let gone = rt.writer_certainly_gone(slot, &mut last);
            seen.store(last, Ordering::Relaxed);
            matches!(gone, Ok(true))
        });
        let lease = self.rt.config().node_lease_ticks();
        let remote = Remote {
            client: Mutex::new(client),
            seen_alive: Mutex::new(Instant::now()),
            trust: Duration::from_nanos(lease / 2),
        };
        Ok(self.remote.get_or_init(|| remote))
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
/// requests takes it once, old values and application together. Once the process has
/// given the role up (`None`), every batch fails as the role's loss.
struct Locked<W> {
    writer: Arc<WriterSlot<W>>,
    node: usize,
}

impl<W> Locked<W> {
    fn held(&self) -> Result<WriterGuard<'_, W>, CollectionError> {
        serving_guard(&self.writer)?.ok_or_else(|| {
            CollectionError::Runtime(BiError::RoleLost {
                node: self.node,
                taker: None,
            })
        })
    }
}

/// Locks `m`, spinning a while before sleeping: a write holds the writer's lock for about
/// a microsecond, much less than a thread's sleep and wake-up through the kernel, which
/// every write that met another would otherwise pay.
fn lock_soon<W>(m: &Mutex<W>) -> Result<MutexGuard<'_, W>, CollectionError> {
    // The clock is read only once the lock was found taken.
    let mut start = None;
    loop {
        match m.try_lock() {
            Ok(g) => return Ok(g),
            Err(TryLockError::Poisoned(_)) => return lock(m),
            Err(TryLockError::WouldBlock)
                if start.get_or_insert_with(Instant::now).elapsed() > SPIN_FOR =>
            {
                return lock(m);
            }
            Err(TryLockError::WouldBlock) => {
                for _ in 0..16 {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

/// How long a writing thread spins for the writer's lock before it sleeps.
const SPIN_FOR: Duration = Duration::from_micros(20);

fn lock<W>(m: &Mutex<W>) -> Result<MutexGuard<'_, W>, CollectionError> {
    m.lock().map_err(|_| CollectionError::Corrupt {
        reason: "a thread panicked while writing through this process's handle",
    })
}

impl<K, V, W: ApplyBatch<K, V>> ApplyBatch<K, V> for Locked<W> {
    fn apply_batch(&mut self, ops: &[Op<K, V>]) -> Result<BatchReport, CollectionError> {
        self.held()?.apply_batch(ops)
    }

    fn longest_value(&self) -> Option<usize> {
        self.held().ok()?.longest_value()
    }

    fn reserve(&mut self, additional: usize) -> Result<(), CollectionError> {
        self.held()?.reserve(additional)
    }

    fn reports_applied_prefix(&self) -> bool {
        self.held().is_ok_and(|w| w.reports_applied_prefix())
    }

    fn old_values(
        &self,
        ops: &[Op<K, V>],
        olds: &mut Vec<Option<V>>,
    ) -> Result<bool, CollectionError> {
        self.held()?.old_values(ops, olds)
    }

    fn apply_reporting(
        &mut self,
        ops: &[Op<K, V>],
        olds: &mut Vec<Option<V>>,
    ) -> Result<BatchReport, CollectionError> {
        self.held()?.apply_reporting(ops, olds)
    }

    fn apply_conditional(
        &mut self,
        ops: &[Op<K, V>],
        conditions: &[Condition<V>],
        same: fn(&V, &V) -> bool,
        found: &mut Vec<Option<V>>,
    ) -> Result<BatchReport, CollectionError> {
        self.held()?.apply_conditional(ops, conditions, same, found)
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
/// assert_eq!(format!("{t:?}"), r#"SharedStructure { role: "writer", entries: {1: 10} }"#);
/// ```
impl<K: Stored, V: Stored, W, R: fmt::Debug + Send, M: MemView> fmt::Debug
    for SharedStructure<K, V, W, R, M>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let role = match self.writes.now() {
            Now::Local => "writer",
            Now::Remote(_) | Now::Unserved => "remote",
            Now::ReadOnly(_) => "read-only",
        };
        let mut d = f.debug_struct("SharedStructure");
        d.field("role", &role);
        match self.reads.here() {
            Ok(reads) => d.field("entries", reads),
            Err(e) => d.field("entries", &format_args!("<unreadable: {e}>")),
        };
        d.finish()
    }
}

impl<K, V, W, R, M> SharedStructure<K, V, W, R, M>
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
        let found = self.write(Op::Insert(key, value), Condition::Always)?;
        Ok(found_value(found))
    }

    /// Removes; returns the value the key had. Takes the key's borrowed form (`&str`
    /// for a `String` key).
    pub fn remove<Q>(&self, key: &Q) -> Result<Option<V>, Error>
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + ?Sized,
    {
        let found = self.write(Op::Remove(key.to_owned()), Condition::Always)?;
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
        let found = self.write(Op::Insert(key, value), Condition::Absent)?;
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
        let found = self.write(Op::Insert(key, new), Condition::Equals(expected))?;
        Ok(compared_value(found))
    }

    /// Removes `key` only if it holds `expected`: `Ok` with the value removed, or `Err`
    /// with the value found. Example at [`compare_and_set`](Self::compare_and_set).
    pub fn compare_and_remove<Q>(&self, key: &Q, expected: V) -> Result<Result<V, Option<V>>, Error>
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + ?Sized,
    {
        let found = self.write(Op::Remove(key.to_owned()), Condition::Equals(expected))?;
        Ok(compared_value(found))
    }

    /// Inserts every entry of `entries`, in batches of 4,096: the writer applies each
    /// batch as one publication, after making room for the iterator's lower size hint at
    /// once (as `HashMap::extend` does: one rebuild of the table instead of one every
    /// doubling); another process sends each through its channel without waiting for
    /// old values, and waits once, at the end, until all are applied.
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
        let expected = entries.size_hint().0;
        let mut next_chunk = |ops: &mut Vec<Op<K, V>>| {
            ops.clear();
            ops.extend(entries.by_ref().take(BATCH).map(|(k, v)| Op::Insert(k, v)));
            !ops.is_empty()
        };
        if let Some(mut w) = self.writes.local_or_prepare()? {
            // One rebuild at the size the entries need instead of a grow every doubling.
            // A rebuild the heap cannot hold leaves the table to grow as the entries
            // arrive (and count its failed grows).
            let _ = w.reserve(expected);
            while next_chunk(&mut ops) {
                if let Err(e) = w.apply_batch(&ops) {
                    drop(w);
                    // A role lost to another process is given up for the next write.
                    self.writes.lost_role()?;
                    return Err(e.into());
                }
                total += ops.len();
            }
            return Ok(total);
        }
        match self.writes.now() {
            Now::Local | Now::Unserved => return Err(self.writes.unserved().into()),
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

    /// Applies `op` under `condition` here or at the writer; the value found at the key,
    /// `Ok` if the operation applied, `Err` if the condition refused it.
    fn write(&self, op: Op<K, V>, condition: Condition<V>) -> Result<Decided<V>, PoolError> {
        if let Some(mut w) = self.writes.local_or_prepare()? {
            let mut found = Vec::with_capacity(1);
            let (ops, conditions) = (std::slice::from_ref(&op), std::slice::from_ref(&condition));
            let applied = w.apply_conditional(ops, conditions, V::same, &mut found);
            drop(w);
            match applied {
                Ok(_) => {
                    return Outcome::decide(&condition, found.pop(), V::same)
                        .found()
                        .ok_or_else(|| {
                            PoolError::Collection(CollectionError::Corrupt {
                                reason: "the writer's handle reported no old value",
                            })
                        });
                }
                // Another process took the role while this one stalled: the write (not
                // applied: a writer checks its role before it publishes) goes to it.
                Err(e) if !self.writes.lost_role()? => return Err(e.into()),
                Err(_) => {}
            }
        }
        let remote = match self.writes.now() {
            Now::Remote(remote) => remote,
            Now::ReadOnly(node) => return Err(BiError::NotRunner { node }.into()),
            Now::Local | Now::Unserved => return Err(self.writes.unserved()),
        };
        let key = match &op {
            Op::Insert(k, _) | Op::Remove(k) => k.clone(),
        };
        // The client's lock goes before a failure is handled (taking the role takes it
        // again).
        let sent = lock(&remote.client)?.request(op, condition);
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

    /// After a remote write failed: if the writer timed out or died, take its role
    /// when its lease has lapsed, so that the next write applies here. Returns the error
    /// to report: a timeout after which this process took the role is the writer's
    /// death ([`DelegationError::WriterDied`]): taking the role reported the request
    /// failed, and no writer applies it from then on.
    fn after_failure(&self, e: CollectionError) -> Result<CollectionError, PoolError> {
        let CollectionError::Delegation(
            d @ (DelegationError::Timeout { .. }
            | DelegationError::ServerGone { .. }
            | DelegationError::WriterDied { .. }),
        ) = &e
        else {
            return Ok(e);
        };
        let timed_out = match d {
            DelegationError::Timeout { seq, .. } | DelegationError::ServerGone { seq, .. } => {
                Some(*seq)
            }
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
        let serving = self
            .writes
            .serving
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match serving.as_ref() {
            Some(server) => server
                .broken
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            None => Vec::new(),
        }
    }

    /// Whether this process is the structure's writer (writes apply here).
    pub fn is_writer(&self) -> bool {
        matches!(self.writes.now(), Now::Local)
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
    pub fn writer(&self) -> Result<Option<WriterGuard<'_, W>>, Error> {
        Ok(self.writes.local()?)
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
    /// let config = PoolConfig { region, ..PoolConfig::default() };
    /// let pool = Pool::open_or_create(dir.path().join("pool.bi"), config).unwrap();
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
        if let Some(mut w) = self.writes.local_or_prepare()? {
            let updated = w.update(key.clone(), &f);
            drop(w);
            match updated {
                Ok(old) => return Ok(old),
                Err(e) if !self.writes.lost_role()? => return Err(e.into()),
                // The role went to another process: the update goes there.
                Err(_) => {}
            }
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
    /// The value of `key` as this node reads it: the version its cache holds, at most
    /// one staleness bound old, with this process's own writes (see
    /// [What reads see](crate::shared#what-reads-see)). A miss costs what a hit costs.
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

    /// The value of `key`, finding every insertion published before the call by any
    /// process: a miss in this node's cache re-reads the root from memory and searches
    /// again (a hit costs what [`get`](Self::get)'s does).
    ///
    /// ```
    /// use bi::{Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let here = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let there = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    /// let writer = here.tree::<u32, u32>("t").unwrap();
    /// let remote = there.tree::<u32, u32>("t").unwrap();
    /// assert_eq!(remote.get(&1).unwrap(), None); // now cached as absent there
    /// writer.insert(1, 2).unwrap();
    /// assert_eq!(remote.get_fresh(&1).unwrap(), Some(2));
    /// ```
    pub fn get_fresh<Q>(&self, key: &Q) -> Result<Option<V>, Error>
    where
        K: Borrow<Q>,
        Q: bi_collections::Query<K> + Ord + ?Sized,
    {
        Ok(self.reads.here()?.get_fresh(key)?)
    }
}

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
    /// Measured (786,432 entries loaded with [`extend`](SharedMap::extend), which sizes
    /// the table once): `u64 -> u64` takes 51 bytes of the pool per entry (40 MB),
    /// `String -> String` with 20-byte keys and 100-byte values 340 bytes (267 MB). A map
    /// that grows one insert at a time needs up to twice the table's share (95 bytes per
    /// `u64` entry): each grow builds the new table beside the old one, whose memory then
    /// stays in the structure's heap for later objects. Give the pool that room, or more:
    /// a grow the heap cannot hold leaves the table smaller and counts a failed grow
    /// ([`SharedMap::failed_grows`]).
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
        Ok(SharedStructure {
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
            Ok(SharedStructure {
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
            writer: Arc::new(WriterSlot::default()),
            serving: Mutex::new(None),
            remote: OnceLock::new(),
            take: Box::new(take),
            taking: Mutex::new(()),
            name: name.to_owned(),
            rt: rt.clone(),
            slot,
            area: None,
            writing: self.writing(),
            read_only: None,
        };
        if rt.is_joined() {
            writes.read_only = Some(rt.node());
            return Ok(writes);
        }
        let clients = self.region().layout().config().nodes() as usize;
        // A writer that took the role a moment ago may not have named its area yet: its
        // area is awaited for as long as a write would wait for it.
        let deadline = Instant::now() + self.writing().timeout;
        loop {
            match (writes.take)() {
                Ok(w) => {
                    let area = DelegationLayout::named(self.region(), rt, name, clients, true)?
                        .ok_or_else(|| CollectionError::Corrupt {
                            reason: "the writer was granted no delegation area",
                        })?;
                    writes.area = Some(area);
                    *lock(&writes.writer)? = Some(w);
                    let server = serve(
                        name,
                        rt.view().clone(),
                        area,
                        writes.writer.clone(),
                        rt.node(),
                        writes.writing.serving,
                    )?;
                    *lock(&writes.serving)? = Some(server);
                    return Ok(writes);
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
                    match DelegationLayout::named(self.region(), rt, name, clients, false)? {
                        Some(area) => {
                            writes.area = Some(area);
                            match writes.remote_client() {
                                Ok(_) => return Ok(writes),
                                // Granted, but its server has not set it up yet.
                                Err(PoolError::Collection(CollectionError::Delegation(
                                    DelegationError::HeaderMismatch { found: 0, .. },
                                ))) if Instant::now() < deadline => {}
                                Err(e) => return Err(e),
                            }
                        }
                        None if matches!(e, PoolError::WriterTaken) => return Err(e),
                        None if Instant::now() > deadline => return Err(PoolError::NoWriterYet),
                        None => {}
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => return Err(e),
            }
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
    writer: Arc<WriterSlot<W>>,
    node: usize,
    serving: Idle,
) -> Result<Server, PoolError>
where
    K: Stored + Send + Sync,
    V: Stored + Send + Sync,
    W: ApplyBatch<K, V> + Send + 'static,
    M: MemView + 'static,
{
    let structure = Locked {
        writer: writer.clone(),
        node,
    };
    let mut server = match DelegationServer::resume(view.clone(), layout, structure) {
        Err(CollectionError::Delegation(DelegationError::HeaderMismatch {
            field: "magic",
            found: 0,
            ..
        })) => DelegationServer::new(view, layout, Locked { writer, node })?,
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
    Ok(Server {
        stop,
        thread: Some(thread),
        broken,
    })
}
