//! The structure's single writer: drains every client's channel, applies all of it as one
//! batch, then acknowledges under one fence.

use super::backoff::{Backoff, Idle};
use super::error::DelegationError;
use super::layout::DelegationLayout;
use super::mem;
use super::parcel::{self, Parcels};
use super::record::{FailedWords, Outcome, ResultRecord, WireRecord};
use crate::stored::out_of_line_len;
use crate::{ApplyBatch, BatchReport, CollectionError, Condition, Op, Stored};
use bi_core::channel::Consumer;
use bi_core::mem::MemView;
use bi_core::runtime::{Fault, Faults};
use std::fmt;
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicBool, Ordering};

/// The largest batch [`DelegationServer::run_until`] applies unless told otherwise.
pub const DEFAULT_MAX_BATCH: usize = 1024;

/// Polls in a row that found nothing from a client before [`DelegationServer::run_until`]
/// counts it quiet (about as many microseconds of silence, while it spins).
const QUIET_AFTER: u32 = 64;
/// While spinning, one poll in this many reads quiet clients too; the others read only
/// the busy ones (a pool has a client per node, and most send nothing most of the
/// time: each client read is two lines dropped and fetched again).
const FULL_POLL_EVERY: u32 = 16;

/// Lowers the calling thread's timer slack to one nanosecond (Linux), so a serving
/// loop's short naps are not stretched by the default 50 microseconds.
fn precise_naps() {
    #[cfg(all(target_os = "linux", not(miri)))]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and changes only the
    // calling thread's timer slack; the extra arguments are ignored. A failure leaves
    // the slack as it was, which only makes naps longer.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// The clients one poll reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Poll {
    /// Every client.
    All,
    /// Only those that sent something within the last [`QUIET_AFTER`] polls.
    Busy,
}

/// What one [`DelegationServer::serve_once`] did.
///
/// ```
/// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
/// use bi_collections::EpochBonsai;
/// use bi_core::mem::{Emulator, EmulatorConfig};
///
/// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
/// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
/// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
/// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
/// client.insert(1, 1).unwrap();
/// client.insert(1, 2).unwrap();
/// let report = server.serve_once(16).unwrap();
/// assert_eq!((report.ops, report.clients), (2, 1));
/// assert_eq!((report.batch.inserted, report.batch.replaced), (1, 1));
/// assert_eq!(server.serve_once(16).unwrap().ops, 0); // an idle poll
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServeReport {
    /// Operations received and applied (zero: an idle poll).
    pub ops: usize,
    /// Clients that contributed at least one of them.
    pub clients: usize,
    /// What the structure reported for the batch.
    pub batch: BatchReport,
}

/// Totals over the calls of [`DelegationServer::run_until`].
///
/// ```
/// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
/// use bi_collections::EpochBonsai;
/// use bi_core::mem::{Emulator, EmulatorConfig};
///
/// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
/// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
/// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
/// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
/// for k in 0..10 {
///     client.insert(k, k).unwrap();
/// }
/// let stop = std::sync::atomic::AtomicBool::new(true); // drain what is sent, then stop
/// let totals = server.run_until(&stop).unwrap();
/// assert_eq!(totals.ops, 10);
/// assert!(totals.batches >= 1 && totals.largest_batch <= 10);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServeTotals {
    /// Polls of the channels (busy or idle).
    pub polls: u64,
    /// Polls that applied a batch.
    pub batches: u64,
    /// Operations applied.
    pub ops: u64,
    /// The largest batch applied.
    pub largest_batch: usize,
}

impl ServeTotals {
    fn add(&mut self, report: &ServeReport) {
        self.polls += 1;
        if report.ops > 0 {
            self.batches += 1;
            self.ops += report.ops as u64;
            self.largest_batch = self.largest_batch.max(report.ops);
        }
    }
}

/// The server's view of one client's channel (of records `R`).
#[derive(Clone, Copy, Debug)]
struct ClientState<R> {
    /// Its channel's consuming end: the head is what was consumed, applied and
    /// acknowledged (the head counter and the acknowledgement word in memory).
    consumer: Consumer<R>,
    ack_offset: usize,
    /// Records taken in the current batch.
    take: usize,
    /// Polls of this client in a row that found nothing new.
    quiet: u32,
    /// The words beside its acknowledgement, as this server last wrote (or found) them.
    failed: FailedWords,
    /// Its channel held something no client writes (counters or a record): it is read
    /// by full polls only, until it holds sane counters and records again, and the
    /// error is in [`DelegationServer::broken_clients`].
    broken: bool,
}

/// The single writer of a delegated structure: owns the structure `S`, receives the
/// operations its clients send and applies them in batches.
///
/// One [`serve_once`](Self::serve_once) is one batch, at a fixed cost in fences whatever
/// the number of clients and operations:
///
/// 1. invalidate every client's tail line (and, when a line holds whole records, the
///    line of its next record), **fence**, read the tails;
/// 2. invalidate the slots about to be read, **fence**, read the records (checking each
///    one's sequence number); skipped when every client sent one record, whose line
///    step 1 dropped (a copy refetched before the record arrived shows the previous
///    lap's sequence number, and is dropped and read again);
/// 3. one [`ApplyBatch::apply_conditional`] call (the structure publishes the whole batch
///    with its own write-back and fence, and tells the old values; a batch with conditional
///    requests, such as compare-and-set, is published in several steps, see there);
/// 4. store every operation's outcome in its result slot, every affected head counter
///    and acknowledgement word (beside which the client's latest outcome is repeated),
///    write them back, **fence** once.
///
/// An idle poll costs step 1 only.
///
/// ```
/// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
/// use bi_collections::{ApplyBatch, BatchReport, CollectionError, Op};
/// use bi_core::mem::{Emulator, EmulatorConfig};
/// use std::collections::BTreeMap;
///
/// #[derive(Default)]
/// struct Map(BTreeMap<u32, u32>);
/// impl ApplyBatch<u32, u32> for Map {
///     fn apply_batch(&mut self, ops: &[Op<u32, u32>]) -> Result<BatchReport, CollectionError> {
///         for op in ops {
///             match *op {
///                 Op::Insert(k, v) => { self.0.insert(k, v); }
///                 Op::Remove(k) => { self.0.remove(&k); }
///             }
///         }
///         Ok(BatchReport { applied: ops.len(), ..BatchReport::default() })
///     }
/// }
///
/// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 3));
/// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 2, 16, emu.line_size()).unwrap();
/// let mut server = DelegationServer::new(emu.node(0), layout, Map::default()).unwrap();
/// let mut a = DelegationClient::new(emu.node(1), layout, 0).unwrap();
/// let mut b = DelegationClient::new(emu.node(2), layout, 1).unwrap();
/// a.insert(1, 100).unwrap();
/// b.insert(2, 200).unwrap();
/// a.remove(1).unwrap();
/// let report = server.serve_once(64).unwrap();
/// assert_eq!((report.ops, report.clients), (3, 2)); // one batch from both clients
/// assert_eq!(a.flush().unwrap(), 2);
/// assert_eq!(server.into_structure().0, BTreeMap::from([(2, 200)]));
/// ```
pub struct DelegationServer<Vw, K: Stored, V: Stored, S> {
    view: Vw,
    layout: DelegationLayout<K, V>,
    structure: S,
    clients: Vec<ClientState<WireRecord<K, V>>>,
    /// The client served first in the next batch (round robin, for fairness when
    /// `max_batch` cuts a batch short).
    first: usize,
    /// The batch being assembled (kept to reuse its allocation).
    ops: Vec<Op<K, V>>,
    /// The condition of each operation of the batch.
    conditions: Vec<Condition<V>>,
    /// The values the batch's operations found (and replaced, if they applied), when
    /// the structure tells.
    olds: Vec<Option<V>>,
    max_batch: usize,
    /// How [`run_until`](Self::run_until) waits while no request comes.
    idle: Idle,
    /// Mechanisms switched off, for tests ([`with_faults`](Self::with_faults)).
    faults: Faults,
    /// Clients whose channels were found corrupt, with what was found.
    broken: Vec<(usize, CollectionError)>,
}

impl<Vw, K: Stored, V: Stored, S> fmt::Debug for DelegationServer<Vw, K, V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelegationServer")
            .field("layout", &self.layout)
            .field("max_batch", &self.max_batch)
            .finish_non_exhaustive()
    }
}

impl<Vw: MemView, K: Stored, V: Stored, S: ApplyBatch<K, V>> DelegationServer<Vw, K, V, S> {
    /// Initialises the area described by `layout` (empty channels, zero
    /// acknowledgements, then the header clients check) through `view`, and serves
    /// `structure` from it.
    ///
    /// Create the server before any client attaches, and never two servers over one
    /// area: a client attached to an area that is initialised again finds its channel
    /// counters moved back and reports corruption.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 2, 16, emu.line_size()).unwrap();
    /// let server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// assert_eq!(server.acknowledged(1).unwrap(), 0); // every channel starts empty
    /// assert!(server.acknowledged(2).is_err()); // two clients only
    /// ```
    pub fn new(
        view: Vw,
        layout: DelegationLayout<K, V>,
        structure: S,
    ) -> Result<Self, CollectionError> {
        layout.init(&view)?;
        Self::attach(view, layout, structure)
    }

    /// Serves `structure` from an area a server that is gone initialised, as the writer
    /// that takes over from a dead one: clients stay attached and keep their sequence
    /// numbers. Every operation the old server had received but not acknowledged is
    /// reported [`Outcome::Failed`] in its result slot (and in the failed range beside
    /// the acknowledgement), then acknowledged, so that no operation is applied twice:
    /// the old server may have applied and published some of them before it died. A
    /// channel whose counters are corrupt makes the takeover fail with the channel's
    /// error: which of its records were received could not be told.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationError, DelegationLayout, DelegationServer};
    /// use bi_collections::{CollectionError, EpochBonsai};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let first = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// client.insert(1, 1).unwrap(); // sent; the server dies before serving it
    /// drop(first);
    /// let mut second = DelegationServer::resume(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let err = client.flush().unwrap_err();
    /// assert!(matches!(err, CollectionError::Delegation(DelegationError::WriterDied { first: 1, last: 1 })));
    /// client.insert(2, 2).unwrap();
    /// second.serve_once(16).unwrap();
    /// client.flush().unwrap(); // the new server applies what comes after
    /// assert_eq!(second.structure().iter(), vec![(2, 2)]);
    /// ```
    pub fn resume(
        view: Vw,
        layout: DelegationLayout<K, V>,
        structure: S,
    ) -> Result<Self, CollectionError> {
        Self::resume_with(view, layout, structure, Faults::default())
    }

    /// [`resume`](Self::resume) with protocol mechanisms switched off, for tests that
    /// show they are needed ([`Fault::DelegationTakeover`]: the unacknowledged requests
    /// are served, not reported failed). Shipped builds have no switch to turn on.
    pub fn resume_with(
        view: Vw,
        layout: DelegationLayout<K, V>,
        structure: S,
        faults: Faults,
    ) -> Result<Self, CollectionError> {
        layout.verify_header(&view)?;
        let mut server = Self::attach(view, layout, structure)?;
        if faults.has(Fault::DelegationTakeover) {
            server.refresh_counters(Poll::All, true)?;
            for c in &mut server.clients {
                c.consumer.forget_tail();
            }
        } else {
            server.fail_unacknowledged()?;
        }
        Ok(server)
    }

    /// Serves an area whose header is in place, every channel taken as empty.
    fn attach(
        view: Vw,
        layout: DelegationLayout<K, V>,
        structure: S,
    ) -> Result<Self, CollectionError> {
        // The words beside each acknowledgement, as a previous server left them (a
        // new area's are zero): the count of refusals goes on from there.
        let failed_at = |index| layout.failed_offset(index);
        for index in 0..layout.clients() {
            view.invalidate(failed_at(index)?, 2 * size_of::<u64>())
                .map_err(mem)?;
        }
        view.fence();
        let clients = (0..layout.clients())
            .map(|index| {
                Ok(ClientState {
                    consumer: Consumer::new(layout.channel(index)?, 0),
                    ack_offset: layout.ack_offset(index)?,
                    take: 0,
                    quiet: 0,
                    failed: FailedWords::from_words(view.load(failed_at(index)?).map_err(mem)?),
                    broken: false,
                })
            })
            .collect::<Result<Vec<_>, CollectionError>>()?;
        Ok(DelegationServer {
            view,
            layout,
            structure,
            clients,
            first: 0,
            ops: Vec::new(),
            conditions: Vec::new(),
            olds: Vec::new(),
            max_batch: DEFAULT_MAX_BATCH,
            idle: Idle::default(),
            faults: Faults::default(),
            broken: Vec::new(),
        })
    }

    /// Sets the largest batch [`run_until`](Self::run_until) applies (at least one).
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// let mut server = server.with_max_batch(4);
    /// assert_eq!(server.max_batch(), 4);
    /// for k in 0..10 {
    ///     client.insert(k, k).unwrap();
    /// }
    /// let stop = std::sync::atomic::AtomicBool::new(true);
    /// assert_eq!(server.run_until(&stop).unwrap().largest_batch, 4);
    /// ```
    pub fn with_max_batch(mut self, max_batch: usize) -> Self {
        self.max_batch = max_batch.max(1);
        self
    }

    /// Sets how [`run_until`](Self::run_until) waits while no request comes (the
    /// default: [`Idle::default`]).
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationLayout, DelegationServer, Idle};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    /// use std::time::Duration;
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let idle = Idle { nap: Duration::from_micros(50), ..Idle::default() };
    /// let server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// assert_eq!(server.with_idle(idle).idle(), idle);
    /// ```
    pub fn with_idle(mut self, idle: Idle) -> Self {
        self.idle = idle;
        self
    }

    /// How [`run_until`](Self::run_until) waits while no request comes.
    pub fn idle(&self) -> Idle {
        self.idle
    }

    /// Serves with protocol mechanisms switched off, for tests that show they are
    /// needed ([`Fault::ConditionsAtBatchStart`]: conditional requests decided on what the
    /// structure held before the batch; [`Fault::ParcelWriteback`] and
    /// [`Fault::ParcelInvalidate`]: replies not written back, parcels read from the
    /// cache). Shipped builds have no switch to turn on.
    pub fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// Receives up to `max_batch` operations from all clients, applies them as one
    /// batch and acknowledges them; see the type's documentation for the steps.
    ///
    /// On an error nothing is consumed or acknowledged: the records stay in their
    /// channels and the next call receives them again. If the structure failed part-way
    /// through the batch, the operations it had applied are then applied a second time;
    /// replaying a prefix of inserts and removes leaves the same final contents, but a
    /// structure's [`BatchReport`] counts them twice.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// for k in 0..5 {
    ///     client.insert(k, k).unwrap();
    /// }
    /// assert_eq!(server.serve_once(3).unwrap().ops, 3); // at most three
    /// assert_eq!(server.serve_once(3).unwrap().ops, 2);
    /// assert_eq!(client.flush().unwrap(), 5);
    /// ```
    pub fn serve_once(&mut self, max_batch: usize) -> Result<ServeReport, CollectionError> {
        self.serve(max_batch, Poll::All)
    }

    /// [`serve_once`](Self::serve_once), polling the clients `poll` names.
    fn serve(&mut self, max_batch: usize, poll: Poll) -> Result<ServeReport, CollectionError> {
        if max_batch == 0 {
            return Ok(ServeReport::default());
        }
        self.refresh_counters(poll, false)?;
        if self.plan(max_batch) == 0 {
            return Ok(ServeReport::default());
        }
        self.read_records()?;
        if V::OUT_OF_LINE && self.may_hold_unreportable()? {
            self.refuse_unreportable()?;
        }
        if self.ops.is_empty() {
            return Ok(ServeReport::default());
        }
        let mut no_room = None;
        let batch = if self.faults.has(Fault::ConditionsAtBatchStart) {
            self.apply_conditions_at_batch_start()?
        } else {
            let (ops, conditions) = (&self.ops, &self.conditions);
            match self
                .structure
                .apply_conditional(ops, conditions, V::same, &mut self.olds)
            {
                Ok(batch) => batch,
                // The heap had no room: the operations before the one that failed were
                // applied (or refused), that one is reported, and the rest wait in their
                // channels for the next batch, when room may have been freed.
                Err(e) if e.is_no_room() && self.structure.reports_applied_prefix() => {
                    let decided = self.olds.len();
                    if decided < self.ops.len() {
                        no_room = Some(decided);
                        self.keep_first(decided + 1);
                        self.count_refusal()?;
                    }
                    BatchReport::default()
                }
                Err(e) => return Err(e),
            }
        };
        let ops = self.ops.len();
        let clients = self.clients.iter().filter(|c| c.take > 0).count();
        // Outcomes beside the acknowledgement are written back with it, before one
        // fence; outcomes elsewhere are fenced before the acknowledgement is stored.
        let known = self.olds.len() == no_room.unwrap_or(ops);
        self.write_results(known, no_room)?;
        self.acknowledge()?;
        Ok(ServeReport {
            ops,
            clients,
            batch,
        })
    }

    /// Serves until `stop` is set, then drains what is already sent and returns.
    ///
    /// Idle polls back off: a short spin, then yielding the core, then, once a thousand
    /// yields found nothing, naps as [`with_idle`](Self::with_idle) set ([`Idle`]: by
    /// default 15 microseconds while a request came within the last 100 ms, then
    /// doubling up to a millisecond). So the loop is meant for a thread of its own; a
    /// request in a busy stretch is seen within the spin, one in a warm stretch within
    /// a nap, and the first after a long quiet time within the longest nap. On Linux it
    /// lowers the calling thread's timer slack to a nanosecond, so naps last what they
    /// ask rather than the default 50 microseconds more. While it spins,
    /// most polls read only the clients that sent something lately, and one in
    /// sixteen reads them all: a request from a quiet client waits a few more polls. It
    /// stops at the first error.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// let stop = AtomicBool::new(false);
    /// std::thread::scope(|t| {
    ///     let serving = t.spawn(|| server.run_until(&stop));
    ///     for k in 0..20 {
    ///         client.insert_sync(k, k * 2).unwrap();
    ///     }
    ///     stop.store(true, Ordering::Release);
    ///     assert_eq!(serving.join().unwrap().unwrap().ops, 20);
    /// });
    /// assert_eq!(server.structure().get(&19), Some(38));
    /// ```
    pub fn run_until(&mut self, stop: &AtomicBool) -> Result<ServeTotals, CollectionError> {
        self.run_until_observed(stop, |_| {})
    }

    /// [`run_until`](Self::run_until), calling `on_broken` with
    /// [`broken_clients`](Self::broken_clients) each time that list changes: how a
    /// serving thread tells the rest of its process which clients it stopped serving.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    /// use std::sync::atomic::AtomicBool;
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// // A tail far past anything the channel holds.
    /// let tail = layout.channel(0).unwrap().tail_offset();
    /// emu.node(1).store(tail, &1000u64).unwrap();
    /// emu.node(1).writeback(tail, 8).unwrap();
    /// emu.node(1).fence();
    /// let mut seen = Vec::new();
    /// let stop = AtomicBool::new(true); // drain what is there, then return
    /// server.run_until_observed(&stop, |broken| seen = broken.iter().map(|b| b.0).collect()).unwrap();
    /// assert_eq!(seen, [0]);
    /// ```
    pub fn run_until_observed(
        &mut self,
        stop: &AtomicBool,
        mut on_broken: impl FnMut(&[(usize, CollectionError)]),
    ) -> Result<ServeTotals, CollectionError> {
        let mut totals = ServeTotals::default();
        precise_naps();
        let mut backoff = Backoff::idle(self.idle);
        let mut polls = 0u32;
        let mut told: Vec<usize> = Vec::new();
        loop {
            // Read before polling: everything sent before `stop` was set is drained.
            let stopping = stop.load(Ordering::Acquire);
            polls = polls.wrapping_add(1);
            let busy = !stopping && backoff.spinning() && !polls.is_multiple_of(FULL_POLL_EVERY);
            let poll = if busy { Poll::Busy } else { Poll::All };
            let report = self.serve(self.max_batch, poll)?;
            totals.add(&report);
            if !self.broken.iter().map(|b| b.0).eq(told.iter().copied()) {
                told = self.broken.iter().map(|b| b.0).collect();
                on_broken(&self.broken);
            }
            if report.ops > 0 {
                backoff.reset();
            } else if stopping {
                return Ok(totals);
            } else {
                // Clients of this host ring the area's doorbell when they find the
                // server slow to answer.
                let bell = self.layout.doorbell();
                backoff.wait_napping(|nap| {
                    let _ = self.view.wait_doorbell(bell, nap);
                });
            }
        }
    }

    /// The clients whose channels hold what no client writes (counters that went back
    /// or past the capacity, a record out of sequence or of no known kind), with what
    /// was found first. The server goes on serving the others and reads a broken
    /// channel at its full polls only; the broken client's requests wait (and time out)
    /// until its channel is sane again (repaired, or a client that starts over from the
    /// head), when it is served and leaves the list.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 3));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 2, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut good = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// // Another node writes a tail far past anything its channel can hold.
    /// let tail = layout.channel(1).unwrap().tail_offset();
    /// emu.node(2).store(tail, &1000u64).unwrap();
    /// emu.node(2).writeback(tail, 8).unwrap();
    /// emu.node(2).fence();
    /// good.insert(1, 10).unwrap();
    /// assert_eq!(server.serve_once(16).unwrap().ops, 1);
    /// assert_eq!(server.broken_clients()[0].0, 1);
    /// ```
    pub fn broken_clients(&self) -> &[(usize, CollectionError)] {
        &self.broken
    }

    /// The acknowledgement of client `index` as this server last published it.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// client.insert(1, 1).unwrap();
    /// assert_eq!(server.acknowledged(0).unwrap(), 0);
    /// server.serve_once(16).unwrap();
    /// assert_eq!(server.acknowledged(0).unwrap(), 1);
    /// ```
    pub fn acknowledged(&self, index: usize) -> Result<u64, CollectionError> {
        match self.clients.get(index) {
            Some(c) => Ok(c.consumer.head()),
            None => Err(DelegationError::NoSuchClient {
                index,
                clients: self.clients.len(),
            }
            .into()),
        }
    }

    /// Reads from memory the tail of every client `poll` names (and, when `heads`, the
    /// head a previous server left, taken as applied), checking that the counters are
    /// ones a ring can have.
    fn refresh_counters(&mut self, poll: Poll, heads: bool) -> Result<(), CollectionError> {
        let v = &self.view;
        let speculate = self.speculates();
        let polled = |c: &ClientState<_>| poll == Poll::All || (!c.broken && c.quiet < QUIET_AFTER);
        for c in self.clients.iter().filter(|c| polled(c)) {
            let consumer = &c.consumer;
            consumer.drop_tail(v).map_err(mem)?;
            if speculate && !heads {
                let next = consumer.layout().slot_offset(consumer.head());
                v.invalidate(next, size_of::<WireRecord<K, V>>())
                    .map_err(mem)?;
            }
            if heads {
                consumer.drop_head(v).map_err(mem)?;
            }
        }
        v.fence();
        for (index, c) in self.clients.iter_mut().enumerate() {
            if !polled(c) {
                continue;
            }
            if heads {
                c.consumer.read_head(v).map_err(mem)?;
            }
            let new = match c.consumer.read_tail(v) {
                Ok(new) => new,
                Err(e) if heads => return Err(e.into()),
                Err(e) => {
                    // Nothing is taken from it; every other client goes on. A broken
                    // client's last sane tail is not kept: one that starts again may
                    // send from its head.
                    c.consumer.forget_tail();
                    mark_broken(&mut self.broken, index, c, e.into());
                    continue;
                }
            };
            if c.broken && c.consumer.available() == 0 {
                heal(&mut self.broken, index, c);
            }
            c.quiet = if new > 0 {
                0
            } else {
                c.quiet.saturating_add(1)
            };
        }
        Ok(())
    }

    /// Shares `max_batch` among the clients with records waiting, starting with
    /// `first`; returns the records taken.
    fn plan(&mut self, max_batch: usize) -> usize {
        let n = self.clients.len();
        let mut budget = max_batch;
        for k in 0..n {
            let c = &mut self.clients[(self.first + k) % n];
            c.take = c.consumer.available().min(budget);
            budget -= c.take;
        }
        self.first = (self.first + 1) % n;
        max_batch - budget
    }

    /// Step 2: invalidate the slots to read, one fence, read and check the records into
    /// `self.ops`, in client order then sequence order.
    fn read_records(&mut self) -> Result<(), CollectionError> {
        let v = &self.view;
        let speculates = self.speculates();
        let speculated = |c: &ClientState<_>| speculates && c.take == 1;
        let mut fence = false;
        for c in self.clients.iter().filter(|c| c.take > 0 && !speculated(c)) {
            c.consumer.drop_entries(v, c.take).map_err(mem)?;
            fence = true;
        }
        if fence {
            v.fence();
        }
        self.ops.clear();
        self.conditions.clear();
        for (index, c) in self.clients.iter_mut().enumerate() {
            let start = self.ops.len();
            let (ops, conditions) = (&mut self.ops, &mut self.conditions);
            let parcels = Parcels {
                view: v,
                area: self.layout.parcel_area(index)?,
                bad: DelegationError::BadParcel { client: index },
                faults: self.faults,
            };
            match Self::read_client(&parcels, index, c, speculated(c), ops, conditions) {
                Ok(()) if c.broken && c.take > 0 => heal(&mut self.broken, index, c),
                Ok(()) => {}
                Err(
                    e @ CollectionError::Delegation(
                        DelegationError::SequenceGap { .. }
                        | DelegationError::BadRecord { .. }
                        | DelegationError::BadParcel { .. },
                    ),
                ) => {
                    // What it sent before the bad record is not served either: its
                    // requests wait (and time out), and every other client goes on.
                    // (Its tail is read again at the next full poll.)
                    self.ops.truncate(start);
                    self.conditions.truncate(start);
                    c.take = 0;
                    c.consumer.forget_tail();
                    mark_broken(&mut self.broken, index, c, e);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads and checks the `take` records of client `index` into `ops` and `conditions`,
    /// their items read from the client's `parcels` where their words name one.
    fn read_client(
        parcels: &Parcels<'_, Vw>,
        index: usize,
        c: &ClientState<WireRecord<K, V>>,
        speculated: bool,
        ops: &mut Vec<Op<K, V>>,
        conditions: &mut Vec<Condition<V>>,
    ) -> Result<(), CollectionError> {
        let v = parcels.view;
        let size = size_of::<WireRecord<K, V>>();
        let from = c.consumer.head();
        for i in from..from + c.take as u64 {
            let at = c.consumer.layout().slot_offset(i);
            let mut record = v.load::<WireRecord<K, V>>(at).map_err(mem)?;
            if !record.carries(i + 1) && speculated {
                // The line was refetched between the poll's invalidation and the
                // record's arrival: drop it again, now that the tail covers it.
                v.invalidate(at, size).map_err(mem)?;
                v.fence();
                record = v.load::<WireRecord<K, V>>(at).map_err(mem)?;
            }
            if !record.carries(i + 1) {
                return Err(DelegationError::SequenceGap {
                    client: index,
                    expected: i + 1,
                    found: record.seq(),
                }
                .into());
            }
            let (op, condition) = record.request().ok_or_else(|| DelegationError::BadRecord {
                client: index,
                kind: record.kind(),
            })?;
            let bad = |e| match e {
                CollectionError::Delegation(_) | CollectionError::Channel(_) => e,
                // A word that decodes to no item (text that is not UTF-8).
                _ => DelegationError::BadParcel { client: index }.into(),
            };
            let key = |_: &mut (), w: &K::Word| K::from_word(w, parcels).map_err(bad);
            let value = |_: &mut (), w: &V::Word| V::from_word(w, parcels).map_err(bad);
            ops.push(op.try_map(&mut (), key, value)?);
            conditions.push(condition.try_map(|w| V::from_word(w, parcels).map_err(bad))?);
        }
        Ok(())
    }

    /// The longest value a reply carries.
    fn reply_limit(&self) -> Result<usize, CollectionError> {
        Ok(parcel::capacity(&self.layout.reply_area(0)?))
    }

    /// Whether the structure may hold a value longer than a reply carries (it cannot
    /// tell, or its bound is longer): only then are requests checked before a batch.
    fn may_hold_unreportable(&self) -> Result<bool, CollectionError> {
        let limit = self.reply_limit()?;
        Ok(self.structure.longest_value().is_none_or(|l| l > limit))
    }

    /// Before a batch of a structure whose values may be strings: every operation whose
    /// key held, before the batch, a value longer than a reply carries (the writer's own
    /// handle put it there) is refused, by a condition that admits only an absent key. Every
    /// operation of the batch on such a key then finds that value (none before it
    /// changed it), so none applies and each reports [`Outcome::TooLarge`]; every other
    /// one finds a value that came through a parcel, or none.
    fn refuse_unreportable(&mut self) -> Result<(), CollectionError> {
        let limit = self.reply_limit()?;
        for (op, condition) in self.ops.iter().zip(self.conditions.iter_mut()) {
            // Alone, so that it sees the structure as it was before the batch.
            let alone = std::slice::from_ref(op);
            if !self.structure.old_values(alone, &mut self.olds)? {
                return Ok(());
            }
            if self
                .olds
                .first()
                .and_then(Option::as_ref)
                .is_some_and(|v| out_of_line_len(v) > limit)
            {
                *condition = Condition::Absent;
            }
        }
        Ok(())
    }

    /// Step 3 with [`Fault::ConditionsAtBatchStart`]: each condition decided on the structure's
    /// own lookup of its key, as if no operation of the batch came before it.
    fn apply_conditions_at_batch_start(&mut self) -> Result<BatchReport, CollectionError> {
        let (mut found, mut kept) = (Vec::with_capacity(1), Vec::new());
        self.olds.clear();
        for (op, condition) in self.ops.iter().zip(&self.conditions) {
            if !self
                .structure
                .old_values(std::slice::from_ref(op), &mut found)?
            {
                self.olds.clear();
                return self.structure.apply_conditional(
                    &self.ops,
                    &self.conditions,
                    V::same,
                    &mut self.olds,
                );
            }
            let now = found.pop().flatten();
            if condition.admits(now.as_ref(), V::same) {
                kept.push(op.clone());
            }
            self.olds.push(now);
        }
        self.structure.apply_batch(&kept)
    }

    /// Whether a poll also drops the line of each client's next record, so that a
    /// batch of one record per client needs no second fence: only when a record never
    /// straddles two lines (a line holds whole records), since a copy refetched before
    /// the record arrived is then told by its sequence number, which shares the line.
    fn speculates(&self) -> bool {
        self.layout
            .line_size()
            .get()
            .is_multiple_of(size_of::<WireRecord<K, V>>())
    }

    /// Counts a refusal for lack of heap for the client of the batch's last operation,
    /// beside its acknowledgement (written back with it).
    fn count_refusal(&mut self) -> Result<(), CollectionError> {
        let Some(index) = self.clients.iter().rposition(|c| c.take > 0) else {
            return Ok(());
        };
        let c = &mut self.clients[index];
        c.failed.refused = c.failed.refused.wrapping_add(1);
        let at = self.layout.failed_offset(index)?;
        self.view.store(at, &c.failed.words()).map_err(mem)
    }

    /// Keeps the first `n` operations of the batch (in client order): the others stay
    /// in their channels, unacknowledged, for the next batch.
    fn keep_first(&mut self, n: usize) {
        let mut left = n;
        for c in &mut self.clients {
            c.take = c.take.min(left);
            left -= c.take;
        }
        self.ops.truncate(n);
        self.conditions.truncate(n);
    }

    /// Step 3 (after the structure applied the batch): write and write back the outcome
    /// of every operation of the batch in its client's result slots (decided from its
    /// condition and the value it found, in `self.olds` when `known`; [`Outcome::NoRoom`]
    /// for the operation `no_room` counts, the last of the batch then).
    fn write_results(
        &mut self,
        known: bool,
        no_room: Option<usize>,
    ) -> Result<(), CollectionError> {
        let (mut olds, mut conditions) = (self.olds.iter(), self.conditions.iter());
        let mut replied = false;
        let mut at = 0;
        for (index, c) in self.clients.iter().enumerate() {
            let seqs = c.consumer.head() + 1..=c.consumer.head() + c.take as u64;
            let outcome = |_| {
                let condition = conditions.next().unwrap_or(&Condition::Always);
                let this = at;
                at += 1;
                if no_room == Some(this) {
                    return Outcome::NoRoom;
                }
                let found = olds.next().cloned().filter(|_| known);
                Outcome::decide(condition, found, V::same)
            };
            replied |= self.write_outcomes(index, seqs, outcome)?;
        }
        if replied && !self.faults.has(Fault::ParcelWriteback) {
            // A client reads its reply, or a result record that spans two lines, once
            // it sees the acknowledgement, whose line can land before theirs unless a
            // fence comes between (a record's sequence number shows only whether its
            // first line landed).
            self.view.fence();
        }
        Ok(())
    }

    /// Stores the outcome of the last of `seqs` beside client `index`'s acknowledgement
    /// when it fits there (written back with it), else `outcome(seq)` in the result slot
    /// of each of `seqs`, written back (in at most two ranges, the second when they
    /// wrap). Says whether it wrote lines other than the acknowledgement's: a reply in
    /// the client's reply area, or result slots.
    fn write_outcomes(
        &self,
        index: usize,
        seqs: RangeInclusive<u64>,
        mut outcome: impl FnMut(u64) -> Outcome<V>,
    ) -> Result<bool, CollectionError> {
        let (start, n) = (*seqs.start(), seqs.clone().count());
        if n == 0 {
            return Ok(false);
        }
        let mut replied = false;
        let mut reply = |o| {
            let (o, put) = self.reply(index, o)?;
            replied |= put;
            Ok::<_, CollectionError>(o)
        };
        let v = &self.view;
        if let Some(at) = self.layout.inline_result_offset(index)? {
            // Only the latest outcome is ever read when it fits the acknowledgement's
            // line (a client reads outcomes of the last operation it sent, and sends
            // nothing before reading it); it is written back with the acknowledgement.
            // Every outcome is still computed: `outcome` may walk a list.
            let last = seqs.map(|seq| (seq, outcome(seq))).last();
            if let Some((seq, o)) = last {
                let record = ResultRecord::new(seq, reply(o)?);
                v.store(at, &record).map_err(mem)?;
            }
            return Ok(replied);
        }
        for seq in seqs {
            let record = ResultRecord::new(seq, reply(outcome(seq))?);
            v.store(self.layout.result_offset(index, seq)?, &record)
                .map_err(mem)?;
        }
        let size = size_of::<ResultRecord<V::Word>>();
        let (first, rest) = split_at_wrap(start - 1, n, self.layout.capacity());
        v.writeback(self.layout.result_offset(index, start)?, first * size)
            .map_err(mem)?;
        v.writeback(self.layout.result_offset(index, 1)?, rest * size)
            .map_err(mem)?;
        Ok(true)
    }

    /// `outcome` as client `index` reads it: the value as its word, put at the start of
    /// the client's reply area if it does not fit the word ([`parcel`](super::parcel));
    /// [`Outcome::TooLarge`] if it does not fit the area either.
    fn reply(
        &self,
        index: usize,
        outcome: Outcome<V>,
    ) -> Result<(Outcome<V::Word>, bool), CollectionError> {
        let area = self.layout.reply_area(index)?;
        let mut used = 0;
        let mut put = |bytes: &[u8]| parcel::put(&self.view, &area, &mut used, bytes, self.faults);
        match outcome.try_map(|value| value.to_word(&mut put)) {
            Err(CollectionError::Delegation(DelegationError::ItemTooLarge { len, .. })) => {
                Ok((Outcome::TooLarge { len }, false))
            }
            word => Ok((word?, used > 0)),
        }
    }

    /// The takeover of [`resume`](Self::resume): reads every client's counters from
    /// memory, reports what lies between head and tail failed (result slots and failed
    /// range, written back and fenced first), then moves head and acknowledgement to
    /// the tail.
    fn fail_unacknowledged(&mut self) -> Result<(), CollectionError> {
        self.refresh_counters(Poll::All, true)?;
        let v = &self.view;
        for index in 0..self.clients.len() {
            let consumer = &self.clients[index].consumer;
            let (head, tail) = (consumer.head(), consumer.tail());
            if tail > head {
                self.write_outcomes(index, head + 1..=tail, |_| Outcome::Failed)?;
                let failed = self.layout.failed_offset(index)?;
                let words = &mut self.clients[index].failed;
                (words.from, words.to) = (head, tail);
                v.store(failed, &words.words()).map_err(mem)?;
                v.writeback(failed, 2 * size_of::<u64>()).map_err(mem)?;
            }
        }
        v.fence();
        for c in &mut self.clients {
            c.take = c.consumer.available();
        }
        self.acknowledge()
    }

    /// Step 4: for every client in the batch, move its head (freeing its slots) and its
    /// acknowledgement to the last record applied; one write-back each, one fence.
    fn acknowledge(&mut self) -> Result<(), CollectionError> {
        let v = &self.view;
        for c in self.clients.iter_mut().filter(|c| c.take > 0) {
            c.consumer.publish_head(v, c.take).map_err(mem)?;
            // The sequence number of record `i` is `i + 1`, so the new head is also the
            // last sequence number applied.
            v.store(c.ack_offset, &c.consumer.head()).map_err(mem)?;
            // The whole line: the acknowledgement and the latest outcome beside it.
            v.writeback(c.ack_offset, 1).map_err(mem)?;
            c.take = 0;
        }
        v.fence();
        Ok(())
    }
}

impl<Vw, K: Stored, V: Stored, S> DelegationServer<Vw, K, V, S> {
    /// The structure, for reading on the server's thread.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// client.insert(9, 90).unwrap();
    /// server.serve_once(16).unwrap();
    /// assert_eq!(server.structure().iter(), vec![(9, 90)]);
    /// ```
    pub fn structure(&self) -> &S {
        &self.structure
    }

    /// The structure, for direct updates by the server's thread (they bypass the
    /// channels, and are ordered with delegated batches by this thread's program order).
    ///
    /// ```
    /// use bi_collections::{ApplyBatch, Op};
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// // The server's own thread writes directly, bypassing the channels.
    /// server.structure_mut().apply_batch(&[Op::Insert(1, 10)]).unwrap();
    /// client.remove(1).unwrap();
    /// server.serve_once(16).unwrap(); // applied after the direct write
    /// assert!(server.structure().is_empty());
    /// ```
    pub fn structure_mut(&mut self) -> &mut S {
        &mut self.structure
    }

    /// Stops serving and hands the structure back. Operations still in the channels
    /// stay unapplied; their clients time out.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// client.insert(1, 10).unwrap();
    /// server.serve_once(16).unwrap();
    /// let tree = server.into_structure();
    /// assert_eq!(tree.get(&1), Some(10));
    /// ```
    pub fn into_structure(self) -> S {
        self.structure
    }

    /// The area's layout.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// assert_eq!(*server.layout(), layout);
    /// assert_eq!(server.layout().clients(), 1);
    /// ```
    pub fn layout(&self) -> &DelegationLayout<K, V> {
        &self.layout
    }

    /// The view the server works through.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// assert_eq!(server.view().id(), 0);
    /// ```
    pub fn view(&self) -> &Vw {
        &self.view
    }

    /// The largest batch [`run_until`](DelegationServer::run_until) applies.
    ///
    /// ```
    /// use bi_collections::delegate::DEFAULT_MAX_BATCH;
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// assert_eq!(server.max_batch(), DEFAULT_MAX_BATCH);
    /// ```
    pub fn max_batch(&self) -> usize {
        self.max_batch
    }
}

/// `take` consecutive slots of a ring of `capacity` from position `from`, as the counts
/// before and after the wrap to slot 0.
/// Records that client `index` is broken (keeping the first error while it stays so).
fn mark_broken<R>(
    broken: &mut Vec<(usize, CollectionError)>,
    index: usize,
    c: &mut ClientState<R>,
    e: CollectionError,
) {
    if !c.broken {
        c.broken = true;
        broken.push((index, e));
    }
}

/// Client `index` holds sane counters and records again.
fn heal<R>(broken: &mut Vec<(usize, CollectionError)>, index: usize, c: &mut ClientState<R>) {
    c.broken = false;
    broken.retain(|(i, _)| *i != index);
}

fn split_at_wrap(from: u64, take: usize, capacity: usize) -> (usize, usize) {
    let slot = (from % capacity as u64) as usize;
    let first = take.min(capacity - slot);
    (first, take - first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delegate::DelegationClient;
    use crate::testing::StopOnDrop;
    use bi_core::mem::{Emulator, EmulatorConfig};

    /// Every operation applied, in order.
    #[derive(Default)]
    struct Log(Vec<Op<u32, u32>>);

    impl ApplyBatch<u32, u32> for Log {
        fn apply_batch(&mut self, ops: &[Op<u32, u32>]) -> Result<BatchReport, CollectionError> {
            self.0.extend_from_slice(ops);
            Ok(BatchReport {
                applied: ops.len(),
                ..BatchReport::default()
            })
        }
    }

    #[test]
    fn busy_polls_skip_quiet_clients_until_a_full_poll() {
        let emu = Emulator::new(EmulatorConfig::new(1 << 15, 3));
        let layout = DelegationLayout::<u32, u32>::new(0..1 << 15, 2, 16, emu.line_size()).unwrap();
        let mut server = DelegationServer::new(emu.node(0), layout, Log::default()).unwrap();
        let mut busy = DelegationClient::new(emu.node(1), layout, 0).unwrap();
        let mut quiet = DelegationClient::new(emu.node(2), layout, 1).unwrap();
        for _ in 0..QUIET_AFTER {
            assert_eq!(server.serve(16, Poll::All).unwrap().ops, 0);
        }
        busy.insert(1, 1).unwrap();
        assert_eq!(server.serve(16, Poll::All).unwrap().ops, 1);
        // Client 0 sent within the last polls; client 1 has been silent for all of them.
        busy.insert(2, 2).unwrap();
        quiet.insert(3, 3).unwrap();
        let report = server.serve(16, Poll::Busy).unwrap();
        assert_eq!((report.ops, report.clients), (1, 1));
        assert_eq!(server.serve(16, Poll::Busy).unwrap().ops, 0);
        assert_eq!(server.serve(16, Poll::All).unwrap().ops, 1);
        // Having sent, it is busy again.
        quiet.insert(4, 4).unwrap();
        assert_eq!(server.serve(16, Poll::Busy).unwrap().ops, 1);
        assert_eq!(server.structure().0.len(), 4);
    }

    /// A loop told to stop drains everything already sent, a quiet client's too, batch
    /// after batch, and calls its observer only when the set of broken clients changes
    /// (here: never).
    #[test]
    fn a_stopping_loop_drains_every_client_and_reports_no_unchanged_breakage() {
        let emu = Emulator::new(EmulatorConfig::new(1 << 15, 3));
        let layout = DelegationLayout::<u32, u32>::new(0..1 << 15, 2, 16, emu.line_size()).unwrap();
        let mut server = DelegationServer::new(emu.node(0), layout, Log::default())
            .unwrap()
            .with_max_batch(1);
        let mut busy = DelegationClient::new(emu.node(1), layout, 0).unwrap();
        let mut quiet = DelegationClient::new(emu.node(2), layout, 1).unwrap();
        for _ in 0..QUIET_AFTER {
            assert_eq!(server.serve(16, Poll::All).unwrap().ops, 0);
        }
        for k in 0..3 {
            quiet.insert(k, k).unwrap();
        }
        busy.insert(9, 9).unwrap();
        let stop = AtomicBool::new(true);
        let mut told = 0;
        let totals = server.run_until_observed(&stop, |_| told += 1).unwrap();
        assert_eq!((totals.ops, totals.batches, told), (4, 4, 0));
        assert_eq!(server.acknowledged(0).unwrap(), 1);
        assert_eq!(server.acknowledged(1).unwrap(), 3);
        assert!(matches!(
            server.acknowledged(2),
            Err(CollectionError::Delegation(DelegationError::NoSuchClient {
                index: 2,
                clients: 2
            }))
        ));
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "two threads polling each other; no unsafe code of its own"
    )]
    fn run_until_serves_a_client_that_was_quiet() {
        let emu = Emulator::new(EmulatorConfig::new(1 << 15, 3));
        let layout = DelegationLayout::<u32, u32>::new(0..1 << 15, 2, 16, emu.line_size()).unwrap();
        let mut server = DelegationServer::new(emu.node(0), layout, Log::default()).unwrap();
        let mut busy = DelegationClient::new(emu.node(1), layout, 0).unwrap();
        let mut quiet = DelegationClient::new(emu.node(2), layout, 1).unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|t| {
            let _stop = StopOnDrop(&stop);
            let serving = t.spawn(|| server.run_until(&stop));
            for k in 0..200 {
                busy.insert_sync(k, k).unwrap();
            }
            quiet.insert_sync(1000, 1).unwrap();
            for k in 200..300 {
                busy.insert_sync(k, k).unwrap();
                if k % 50 == 0 {
                    quiet.insert_sync(1000 + k, 1).unwrap();
                }
            }
            stop.store(true, Ordering::Release);
            assert_eq!(serving.join().unwrap().unwrap().ops, 303);
        });
    }
}
