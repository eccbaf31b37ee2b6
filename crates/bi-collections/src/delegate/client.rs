//! The sending side: any thread on any node, with its own channel and acknowledgement.

use super::backoff::Backoff;
use super::error::{DelegationError, WaitingFor};
use super::layout::DelegationLayout;
use super::mem;

/// A client waiting for an acknowledgement rings the server's doorbell after this many
/// polls (a server that is awake answers within them), then once in [`RING_EVERY`].
const RING_AFTER: u32 = 6;
const RING_EVERY: u32 = 64;
use super::parcel::{self, Parcels};
use super::record::{FailedWords, OpRecord, Outcome, WireRecord, WireResult};
use crate::stored::out_of_line_len;
use crate::{CollectionError, Condition, Decided, Op, Stored, compared_value, found_value};
use bi_core::channel::Sender;
use bi_core::mem::MemView;
use bi_core::runtime::Faults;
use std::fmt;
use std::ops::Range;
use std::time::{Duration, Instant};

/// How often a waiting client asks its watch whether its server is gone (the first
/// time after waiting that long: an answer within it costs the watch nothing).
const WATCH_EVERY: Duration = Duration::from_millis(5);

/// A client's wait for its server ([`DelegationClient::wait_step`]).
struct Wait {
    backoff: Backoff,
    /// When the watch is asked next (`None`: not yet waited [`WATCH_EVERY`]).
    asked: Option<Instant>,
    waiting_for: WaitingFor,
    /// How the wait ended, reported at the step after the caller's last look.
    ended: Option<WaitEnd>,
}

/// Why a [`Wait`] ended.
#[derive(Clone, Copy)]
enum WaitEnd {
    Timeout,
    ServerGone,
}

impl WaitEnd {
    /// The error a wait for `waiting_for` of `seq` reports, `applied` acknowledged.
    fn error(self, waiting_for: WaitingFor, seq: u64, applied: u64) -> CollectionError {
        match self {
            WaitEnd::Timeout => DelegationError::Timeout {
                waiting_for,
                seq,
                applied,
            },
            WaitEnd::ServerGone => DelegationError::ServerGone {
                waiting_for,
                seq,
                applied,
            },
        }
        .into()
    }
}

/// Says whether no live process serves a client's area any more
/// ([`DelegationClient::watch_server`]).
pub type ServerGone = Box<dyn Fn() -> bool + Send + Sync>;

/// How long a client waits before giving up on its server.
///
/// ```
/// use bi_collections::delegate::ClientConfig;
/// use std::time::Duration;
///
/// let cfg = ClientConfig::default().timeout(Duration::from_millis(50));
/// assert_eq!(cfg.timeout_value(), Duration::from_millis(50));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    timeout: Duration,
}

impl Default for ClientConfig {
    /// One second: far beyond any batch a live server applies, short enough to notice
    /// a dead one.
    fn default() -> Self {
        ClientConfig {
            timeout: Duration::from_secs(1),
        }
    }
}

impl ClientConfig {
    /// Sets the longest a client waits for room in its channel or for an
    /// acknowledgement before returning [`DelegationError::Timeout`].
    ///
    /// ```
    /// use bi_collections::delegate::ClientConfig;
    /// use std::time::Duration;
    ///
    /// let cfg = ClientConfig::default().timeout(Duration::from_millis(5));
    /// assert_eq!(cfg.timeout_value(), Duration::from_millis(5));
    /// assert_ne!(cfg, ClientConfig::default());
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The timeout.
    ///
    /// ```
    /// use bi_collections::delegate::ClientConfig;
    /// use std::time::Duration;
    ///
    /// assert_eq!(ClientConfig::default().timeout_value(), Duration::from_secs(1));
    /// ```
    pub fn timeout_value(&self) -> Duration {
        self.timeout
    }
}

/// One client of a delegated structure: sends operations to the structure's single
/// writer ([`DelegationServer`](super::DelegationServer)) through its own channel, and
/// learns what was applied from its own acknowledgement word.
///
/// Sending is asynchronous ([`insert`](Self::insert), [`remove`](Self::remove) return
/// the operation's sequence number as soon as it is in the channel); waiting is explicit
/// ([`wait_applied`](Self::wait_applied), [`flush`](Self::flush)) or bundled
/// ([`insert_sync`](Self::insert_sync), [`remove_sync`](Self::remove_sync)). A client's
/// operations are applied in the order it sent them, each exactly once.
///
/// Not `Clone`: a channel has exactly one producer. Give each thread its own index.
///
/// ```
/// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
/// use bi_collections::{ApplyBatch, BatchReport, CollectionError, Op};
/// use bi_core::mem::{Emulator, EmulatorConfig};
///
/// /// A stand-in structure: a plain list of what was applied.
/// #[derive(Default)]
/// struct Log(Vec<Op<u64, u64>>);
/// impl ApplyBatch<u64, u64> for Log {
///     fn apply_batch(&mut self, ops: &[Op<u64, u64>]) -> Result<BatchReport, CollectionError> {
///         self.0.extend_from_slice(ops);
///         Ok(BatchReport { applied: ops.len(), ..BatchReport::default() })
///     }
/// }
///
/// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
/// let layout = DelegationLayout::<u64, u64>::new(0..1 << 14, 1, 8, emu.line_size()).unwrap();
/// let mut server = DelegationServer::new(emu.node(0), layout, Log::default()).unwrap();
/// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
/// let a = client.insert(1, 10).unwrap();
/// let b = client.remove(1).unwrap();
/// assert_eq!((a, b), (1, 2));
/// assert_eq!(client.poll_applied().unwrap(), 0);
/// server.serve_once(64).unwrap();
/// client.wait_applied(b).unwrap();
/// assert_eq!(server.structure().0, [Op::Insert(1, 10), Op::Remove(1)]);
/// ```
pub struct DelegationClient<Vw, K: Stored, V: Stored> {
    sender: Sender<Vw, WireRecord<K, V>>,
    index: usize,
    layout: DelegationLayout<K, V>,
    ack_offset: usize,
    /// The acknowledgement as last read (never ahead of memory).
    applied: u64,
    /// The operations the last takeover reported failed, as last read.
    failed: (u64, u64),
    /// The count of refused operations as last read.
    refused: u16,
    /// Whether that count changed since a wait last reported it.
    refusals: bool,
    /// A failed range read but not yet reported by a wait that covers it.
    unreported: Option<(u64, u64)>,
    config: ClientConfig,
    /// Records being sent by `send_batch` (kept to reuse its allocation).
    records: Vec<WireRecord<K, V>>,
    /// This client's parcel area, and the bytes of it the records sent since the last
    /// time every record was acknowledged name.
    parcels: Range<usize>,
    parcels_used: usize,
    /// Mechanisms switched off, for tests ([`with_faults`](Self::with_faults)).
    faults: Faults,
    /// Asked while waiting whether the server is gone ([`watch_server`](Self::watch_server)).
    watch: Option<ServerGone>,
}

impl<Vw, K: Stored, V: Stored> fmt::Debug for DelegationClient<Vw, K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelegationClient")
            .field("index", &self.index)
            .field("ack_offset", &self.ack_offset)
            .field("applied", &self.applied)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<Vw: MemView, K: Stored, V: Stored> DelegationClient<Vw, K, V> {
    /// Attaches client `index` of `layout` through `view`, with the default
    /// [`ClientConfig`].
    ///
    /// The server must have initialised the area first: otherwise, or if the server's
    /// layout differs from `layout`, this is [`DelegationError::HeaderMismatch`].
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// // Before the server initialised the area, a client cannot attach.
    /// assert!(DelegationClient::new(emu.node(1), layout, 0).is_err());
    /// let _server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// assert_eq!((client.index(), client.sent()), (0, 0));
    /// assert!(DelegationClient::new(emu.node(1), layout, 1).is_err()); // one client in the layout
    /// ```
    pub fn new(
        view: Vw,
        layout: DelegationLayout<K, V>,
        index: usize,
    ) -> Result<Self, CollectionError> {
        Self::with_config(view, layout, index, ClientConfig::default())
    }

    /// Attaches client `index` of `layout` through `view` with `config`.
    ///
    /// ```
    /// use bi_collections::delegate::{ClientConfig, DelegationClient};
    /// use bi_collections::delegate::{DelegationLayout, DelegationServer};
    /// use bi_collections::{CollectionError, EpochBonsai};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    /// use std::time::Duration;
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let _server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let config = ClientConfig::default().timeout(Duration::from_millis(10));
    /// let mut client = DelegationClient::with_config(emu.node(1), layout, 0, config).unwrap();
    /// // Nobody serves: waiting for the insert times out after 10 ms.
    /// let err = client.insert_sync(1, 1).unwrap_err();
    /// assert!(matches!(err, CollectionError::Delegation(_)));
    /// ```
    pub fn with_config(
        view: Vw,
        layout: DelegationLayout<K, V>,
        index: usize,
        config: ClientConfig,
    ) -> Result<Self, CollectionError> {
        let channel = layout.channel(index)?;
        let ack_offset = layout.ack_offset(index)?;
        layout.verify_header(&view)?;
        let sender = Sender::new(view, channel)?;
        let mut client = DelegationClient {
            sender,
            index,
            layout,
            ack_offset,
            applied: 0,
            failed: (0, 0),
            refused: 0,
            refusals: false,
            unreported: None,
            config,
            records: Vec::new(),
            parcels: layout.parcel_area(index)?,
            parcels_used: 0,
            faults: Faults::default(),
            watch: None,
        };
        client.poll_applied()?;
        // Failures of an earlier attachment are not this one's to report.
        client.unreported = None;
        client.refusals = false;
        Ok(client)
    }

    /// Sends with protocol mechanisms switched off, for tests that show they are needed
    /// ([`Fault::ParcelWriteback`](bi_core::runtime::Fault::ParcelWriteback): parcels
    /// not written back; [`Fault::ParcelInvalidate`](bi_core::runtime::Fault::ParcelInvalidate):
    /// replies read from the cache). Shipped builds have no switch to turn on.
    pub fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// Has every wait of this client ask `gone`, every few milliseconds once it waited
    /// that long, whether no live process serves the area any more (for a writer role:
    /// no live process holds it), and stop with [`DelegationError::ServerGone`] when it
    /// says so, instead of waiting out the timeout for a server that is not coming back.
    /// A server that is alive but slow, or stopped, is still waited for until the
    /// timeout.
    ///
    /// ```
    /// use bi_collections::delegate::{ClientConfig, DelegationClient, DelegationError};
    /// use bi_collections::delegate::{DelegationLayout, DelegationServer};
    /// use bi_collections::{CollectionError, EpochBonsai};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    /// use std::time::Duration;
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// drop(DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap());
    /// let config = ClientConfig::default().timeout(Duration::from_secs(10));
    /// let mut client = DelegationClient::with_config(emu.node(1), layout, 0, config).unwrap();
    /// client.watch_server(|| true); // the server process is gone
    /// // Not a timeout ten seconds later: the watch ends the wait.
    /// let err = client.insert_sync(1, 1).unwrap_err();
    /// assert!(matches!(
    ///     err,
    ///     CollectionError::Delegation(DelegationError::ServerGone { seq: 1, applied: 0, .. })
    /// ));
    /// ```
    pub fn watch_server(&mut self, gone: impl Fn() -> bool + Send + Sync + 'static) {
        self.watch = Some(Box::new(gone));
    }

    /// Sends an insertion of `key` with `value`; returns its sequence number.
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
    /// assert_eq!(client.insert(1, 10).unwrap(), 1); // sequence numbers start at 1
    /// assert_eq!(client.insert(2, 20).unwrap(), 2);
    /// server.serve_once(16).unwrap();
    /// assert_eq!(server.structure().get(&2), Some(20));
    /// ```
    pub fn insert(&mut self, key: K, value: V) -> Result<u64, CollectionError> {
        self.send(Op::Insert(key, value))
    }

    /// Sends a removal of `key`; returns its sequence number.
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
    /// server.structure().insert(5, 50);
    /// client.remove(5).unwrap();
    /// server.serve_once(16).unwrap();
    /// assert_eq!(server.structure().get(&5), None);
    /// ```
    pub fn remove(&mut self, key: K) -> Result<u64, CollectionError> {
        self.send(Op::Remove(key))
    }

    /// Sends `op` and returns its sequence number (this client's count of operations
    /// sent, this one included), without waiting for it to be applied.
    ///
    /// If the channel is full it waits for the server to drain it, up to the configured
    /// timeout, then fails with [`DelegationError::Timeout`]; the operation was not sent.
    /// An operation whose items could not fit this client's parcel area even empty is
    /// refused at once ([`DelegationError::ItemTooLarge`]), without waiting for the
    /// operations in flight.
    ///
    /// ```
    /// use bi_collections::Op;
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// let seq = client.send(Op::Insert(7, 70)).unwrap(); // returns at once
    /// assert_eq!(client.applied(), 0); // not applied yet
    /// server.serve_once(16).unwrap();
    /// client.wait_applied(seq).unwrap();
    /// assert_eq!(server.structure().get(&7), Some(70));
    /// ```
    pub fn send(&mut self, op: Op<K, V>) -> Result<u64, CollectionError> {
        self.send_with(op, Condition::Always, false)
    }

    /// Sends `op` under `condition` without waiting, as [`send`](Self::send) does: the
    /// writer applies it only if the condition admits the value it finds at the key
    /// (compared byte for byte) when it comes to it, after every operation sent before.
    /// Returns its sequence number.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::map::BiHashMap;
    /// use bi_collections::{Condition, Op};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(3, 1);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// let layout = DelegationLayout::<u64, u64>::new(s.arena(2), 1, 8, s.emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(s.emu.node(0), layout, map).unwrap();
    /// let mut client = DelegationClient::new(s.emu.node(1), layout, 0).unwrap();
    /// client.send(Op::Insert(1, 5)).unwrap();
    /// client.send_conditional(Op::Insert(1, 7), Condition::Absent).unwrap(); // finds 5: refused
    /// server.serve_once(16).unwrap(); // one batch
    /// client.flush().unwrap();
    /// assert_eq!(server.structure().get(&1), Some(5));
    /// ```
    pub fn send_conditional(
        &mut self,
        op: Op<K, V>,
        condition: Condition<V>,
    ) -> Result<u64, CollectionError> {
        self.send_with(op, condition, false)
    }

    /// [`send`](Self::send) of `op` under `condition`, leaving the tail's fence to the
    /// caller's next one when `unfenced`.
    fn send_with(
        &mut self,
        op: Op<K, V>,
        condition: Condition<V>,
        unfenced: bool,
    ) -> Result<u64, CollectionError> {
        if !self.fits_alone(&op, &condition) {
            return Err(self.too_large(&op, &condition));
        }
        let seq = self.sender.sent() + 1;
        self.reuse_parcels();
        let record = match self.record(seq, &op, &condition)? {
            Some(record) => record,
            None => {
                // Its parcels need the area the unacknowledged records' use.
                self.flush()?;
                self.parcels_used = 0;
                self.record(seq, &op, &condition)?
                    .ok_or_else(|| self.too_large(&op, &condition))?
            }
        };
        let mut wait = self.wait(WaitingFor::ChannelSpace);
        let record = std::slice::from_ref(&record);
        loop {
            let sent = if unfenced {
                self.sender.send_batch_unfenced(record)?
            } else {
                self.sender.send_batch(record)?
            };
            if sent == 1 {
                break;
            }
            self.wait_step(&mut wait, seq)?;
        }
        Ok(seq)
    }

    /// Sends `ops` in order, as few channel publications as the room allows (one
    /// write-back batch and two fences each, instead of per operation); returns the
    /// sequence number of the last one (of the last sent before, if `ops` is empty).
    ///
    /// An operation whose items could not fit this client's parcel area even when it is
    /// empty is refused ([`DelegationError::ItemTooLarge`]) before any operation of the
    /// batch is sent. If the channel stays full past the timeout, this fails with
    /// [`DelegationError::Timeout`] whose `seq` is the first operation not sent; the
    /// ones before it were sent ([`sent`](Self::sent) tells how many).
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::{ApplyBatch, BatchReport, CollectionError, Op};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// struct Count(usize);
    /// impl ApplyBatch<u8, u8> for Count {
    ///     fn apply_batch(&mut self, ops: &[Op<u8, u8>]) -> Result<BatchReport, CollectionError> {
    ///         self.0 += ops.len();
    ///         Ok(BatchReport { applied: ops.len(), ..BatchReport::default() })
    ///     }
    /// }
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 13, 2));
    /// let layout = DelegationLayout::<u8, u8>::new(0..1 << 13, 1, 4, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, Count(0)).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// let ops: Vec<_> = (0..3).map(|k| Op::Insert(k, k)).collect();
    /// assert_eq!(client.send_batch(&ops).unwrap(), 3);
    /// server.serve_once(16).unwrap();
    /// assert_eq!(client.flush().unwrap(), 3);
    /// assert_eq!(server.structure().0, 3);
    /// ```
    pub fn send_batch(&mut self, ops: &[Op<K, V>]) -> Result<u64, CollectionError> {
        let mut records = std::mem::take(&mut self.records);
        let sent = self.send_records(ops, &mut records);
        self.records = records;
        sent
    }

    /// [`send_batch`](Self::send_batch), making the records in `records`.
    fn send_records(
        &mut self,
        ops: &[Op<K, V>],
        records: &mut Vec<WireRecord<K, V>>,
    ) -> Result<u64, CollectionError> {
        records.clear();
        if let Some(op) = ops
            .iter()
            .find(|op| !self.fits_alone(op, &Condition::Always))
        {
            return Err(self.too_large(op, &Condition::Always));
        }
        self.reuse_parcels();
        for op in ops {
            let seq = self.sender.sent() + records.len() as u64 + 1;
            match self.record(seq, op, &Condition::Always)? {
                Some(record) => records.push(record),
                None => {
                    // The parcel area is full: send what is made, wait until it is
                    // applied, and start the area again.
                    self.send_made(records)?;
                    records.clear();
                    self.flush()?;
                    self.parcels_used = 0;
                    let record = self.record(seq, op, &Condition::Always)?;
                    records.push(record.ok_or_else(|| self.too_large(op, &Condition::Always))?);
                }
            }
        }
        self.send_made(records)
    }

    /// Sends `records`, as few channel publications as the room allows.
    fn send_made(&mut self, records: &[WireRecord<K, V>]) -> Result<u64, CollectionError> {
        let first = self.sender.sent() + 1;
        let mut done = 0;
        let mut wait = self.wait(WaitingFor::ChannelSpace);
        while done < records.len() {
            let n = self.sender.send_batch(&records[done..])?;
            done += n;
            if n > 0 {
                // The server is alive: the timeout counts from the last progress.
                wait = self.wait(WaitingFor::ChannelSpace);
            } else {
                self.wait_step(&mut wait, first + done as u64)?;
            }
        }
        Ok(self.sender.sent())
    }

    /// Starts the parcel area again if every record sent is acknowledged (as last read):
    /// then no parcel is in use. Called before making records, never between two.
    fn reuse_parcels(&mut self) {
        if self.applied == self.sender.sent() {
            self.parcels_used = 0;
        }
    }

    /// The record of `op` under `condition`, numbered `seq`, its items too long for their
    /// words put in this client's parcel area ([`parcel`](super::parcel)); `None` if they
    /// do not fit what is left of the area (the caller has checked that they fit it
    /// empty: [`fits_alone`](Self::fits_alone)).
    fn record(
        &mut self,
        seq: u64,
        op: &Op<K, V>,
        condition: &Condition<V>,
    ) -> Result<Option<WireRecord<K, V>>, CollectionError> {
        // Plain items never call `put`: their records are made the same way.
        let (view, area) = (self.sender.view(), &self.parcels);
        let used = &mut self.parcels_used;
        let faults = self.faults;
        let mut put = |bytes: &[u8]| parcel::put(view, area, used, bytes, faults);
        let made = op
            .try_map(&mut put, |p, k| k.to_word(p), |p, v| v.to_word(p))
            .and_then(|words| Ok((words, condition.try_map(|v| v.to_word(&mut put))?)));
        match made {
            Ok((words, expected)) => Ok(Some(OpRecord::conditional(seq, words, expected))),
            Err(CollectionError::Delegation(DelegationError::ItemTooLarge { .. })) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether `op`'s items under `condition`, each in a parcel of its own, fit an
    /// empty parcel area ([`too_large`](Self::too_large) otherwise).
    fn fits_alone(&self, op: &Op<K, V>, condition: &Condition<V>) -> bool {
        let parcel = |len: usize| match len {
            0 => Some(0),
            n => parcel::parcel_bytes(n),
        };
        let items = match op {
            Op::Insert(k, v) => [out_of_line_len(k), out_of_line_len(v)],
            Op::Remove(k) => [out_of_line_len(k), 0],
        };
        let conditional = match condition {
            Condition::Equals(v) => out_of_line_len(v),
            _ => 0,
        };
        let need = items
            .into_iter()
            .chain([conditional])
            .try_fold(0usize, |sum, len| sum.checked_add(parcel(len)?));
        need.is_some_and(|n| n <= self.parcels.end - self.parcels.start)
    }

    /// The error of an operation whose items, together, do not fit an empty parcel area.
    fn too_large(&self, op: &Op<K, V>, condition: &Condition<V>) -> CollectionError {
        let len = match op {
            Op::Insert(k, v) => out_of_line_len(k) + out_of_line_len(v),
            Op::Remove(k) => out_of_line_len(k),
        } + match condition {
            Condition::Equals(v) => out_of_line_len(v),
            _ => 0,
        };
        DelegationError::ItemTooLarge {
            len,
            limit: parcel::capacity(&self.parcels),
        }
        .into()
    }

    /// Sends `op` and waits until it is applied and published; returns its sequence
    /// number.
    ///
    /// ```
    /// use bi_collections::Op;
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::EpochBonsai;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2));
    /// let layout = DelegationLayout::<u32, u32>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    /// let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    /// let stop = std::sync::atomic::AtomicBool::new(false);
    /// std::thread::scope(|t| {
    ///     let serving = t.spawn(|| server.run_until(&stop)); // the writer thread
    ///     client.send_sync(Op::Insert(3, 30)).unwrap(); // returns once applied
    ///     assert_eq!(client.applied(), 1);
    ///     stop.store(true, std::sync::atomic::Ordering::Release);
    ///     serving.join().unwrap().unwrap();
    /// });
    /// assert_eq!(server.structure().get(&3), Some(30));
    /// ```
    pub fn send_sync(&mut self, op: Op<K, V>) -> Result<u64, CollectionError> {
        let seq = self.send(op)?;
        self.wait_applied(seq)?;
        Ok(seq)
    }

    /// Inserts `key` with `value` and waits until readers can see it.
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
    /// let stop = std::sync::atomic::AtomicBool::new(false);
    /// std::thread::scope(|t| {
    ///     let serving = t.spawn(|| server.run_until(&stop)); // the writer thread
    ///     assert_eq!(client.insert_sync(4, 40).unwrap(), 1);
    ///     stop.store(true, std::sync::atomic::Ordering::Release);
    ///     serving.join().unwrap().unwrap();
    /// });
    /// assert_eq!(server.structure().get(&4), Some(40));
    /// ```
    pub fn insert_sync(&mut self, key: K, value: V) -> Result<u64, CollectionError> {
        self.send_sync(Op::Insert(key, value))
    }

    /// Removes `key` and waits until readers can no longer find it.
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
    /// server.structure().insert(4, 40);
    /// let stop = std::sync::atomic::AtomicBool::new(false);
    /// std::thread::scope(|t| {
    ///     let serving = t.spawn(|| server.run_until(&stop)); // the writer thread
    ///     client.remove_sync(4).unwrap();
    ///     stop.store(true, std::sync::atomic::Ordering::Release);
    ///     serving.join().unwrap().unwrap();
    /// });
    /// assert!(server.structure().is_empty());
    /// ```
    pub fn remove_sync(&mut self, key: K) -> Result<u64, CollectionError> {
        self.send_sync(Op::Remove(key))
    }

    /// Waits until every operation sent so far is applied and published; returns the
    /// last sequence number.
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
    /// server.serve_once(16).unwrap();
    /// assert_eq!(client.flush().unwrap(), 5); // everything sent is applied
    /// assert_eq!(server.structure().len(), 5);
    /// ```
    pub fn flush(&mut self) -> Result<u64, CollectionError> {
        let seq = self.sender.sent();
        self.wait_applied(seq)?;
        Ok(seq)
    }

    /// Waits until the operation numbered `seq` (and so every earlier one) is applied
    /// and published, up to the configured timeout. A `seq` not yet sent is
    /// [`DelegationError::NotSent`]. Operations up to `seq` that a writer's successor
    /// found unapplied are reported, once, as [`DelegationError::WriterDied`] (also when
    /// an earlier poll already learned that they are over); operations the writer's
    /// heap had no room for, as [`DelegationError::NoRoom`].
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
    /// let seq = client.insert(1, 1).unwrap();
    /// assert!(client.wait_applied(seq + 1).is_err()); // never sent
    /// server.serve_once(16).unwrap();
    /// client.wait_applied(seq).unwrap();
    /// assert_eq!(client.applied(), seq);
    /// ```
    pub fn wait_applied(&mut self, seq: u64) -> Result<(), CollectionError> {
        if self.applied >= seq {
            // Over, but perhaps failed: a poll may have learned it without reporting.
            return self.report_failures(seq);
        }
        let sent = self.sender.sent();
        if seq > sent {
            return Err(DelegationError::NotSent { seq, sent }.into());
        }
        let mut wait = self.wait(WaitingFor::Acknowledgement);
        let mut waits = 0u32;
        while self.poll_applied()? < seq {
            // Not answered at once: the server may be napping. Ring its doorbell (it
            // hears it if it runs on this host), and again now and then in case it
            // fell asleep just after a ring.
            if waits % RING_EVERY == RING_AFTER {
                let _ = self.sender.view().ring_doorbell(self.layout.doorbell());
            }
            self.wait_step(&mut wait, seq)?;
            waits = waits.wrapping_add(1);
        }
        self.report_failures(seq)
    }

    /// Reports the operations up to `seq` that a takeover reported failed, once; then
    /// refusals for lack of heap seen since the last report.
    fn report_failures(&mut self, seq: u64) -> Result<(), CollectionError> {
        match self.unreported {
            Some((from, to)) if from < seq => {
                self.unreported = None;
                let (first, last) = (from + 1, to.min(seq));
                Err(DelegationError::WriterDied { first, last }.into())
            }
            _ if self.refusals => {
                self.refusals = false;
                Err(DelegationError::NoRoom { upto: seq }.into())
            }
            _ => Ok(()),
        }
    }

    /// Sends `op`, waits until it is applied and returns what the server reported: the
    /// value it replaced or removed, if the structure reports old values.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer, Outcome};
    /// use bi_collections::map::BiHashMap;
    /// use bi_collections::Op;
    /// use bi_core::runtime::testing::Setup;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    ///
    /// let s = Setup::new(3, 1);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// // The delegation area: node 2's share of the heap, which no writer uses here.
    /// let layout = DelegationLayout::<u64, u64>::new(s.arena(2), 1, 8, s.emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(s.emu.node(0), layout, map).unwrap();
    /// let stop = AtomicBool::new(false);
    /// std::thread::scope(|scope| {
    ///     let serving = scope.spawn(|| server.run_until(&stop));
    ///     let mut client = DelegationClient::new(s.emu.node(1), layout, 0).unwrap();
    ///     assert_eq!(client.send_returning(Op::Insert(1, 10)).unwrap(), Outcome::Replaced(None));
    ///     assert_eq!(client.insert_returning(1, 11).unwrap(), Some(10));
    ///     assert_eq!(client.remove_returning(1).unwrap(), Some(11));
    ///     stop.store(true, Ordering::Release);
    ///     serving.join().unwrap().unwrap();
    /// });
    /// ```
    pub fn send_returning(&mut self, op: Op<K, V>) -> Result<Outcome<V>, CollectionError> {
        self.send_conditional_returning(op, Condition::Always)
    }

    /// Sends `op` under `condition` (applied only if the condition admits the value the writer
    /// finds at the key, compared byte for byte), waits until it is decided and returns
    /// the outcome: [`Outcome::Replaced`] with the value found if it applied,
    /// [`Outcome::Refused`] with the value found if not.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer, Outcome};
    /// use bi_collections::map::BiHashMap;
    /// use bi_collections::{Condition, Op};
    /// use bi_core::runtime::testing::Setup;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    ///
    /// let s = Setup::new(3, 1);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// let layout = DelegationLayout::<u64, u64>::new(s.arena(2), 1, 8, s.emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(s.emu.node(0), layout, map).unwrap();
    /// let stop = AtomicBool::new(false);
    /// std::thread::scope(|scope| {
    ///     let serving = scope.spawn(|| server.run_until(&stop));
    ///     let mut client = DelegationClient::new(s.emu.node(1), layout, 0).unwrap();
    ///     let present = Condition::Present; // replace only what is there
    ///     assert_eq!(client.send_conditional_returning(Op::Insert(1, 5), present).unwrap(), Outcome::Refused(None));
    ///     assert_eq!(client.insert_if_absent(1, 10).unwrap(), None); // inserted
    ///     assert_eq!(client.insert_if_absent(1, 11).unwrap(), Some(10)); // left alone
    ///     assert_eq!(client.compare_and_set(1, 10, 12).unwrap(), Ok(10));
    ///     assert_eq!(client.compare_and_set(1, 10, 13).unwrap(), Err(Some(12)));
    ///     assert_eq!(client.compare_and_remove(1, 12).unwrap(), Ok(12));
    ///     assert_eq!(client.compare_and_remove(1, 12).unwrap(), Err(None));
    ///     stop.store(true, Ordering::Release);
    ///     serving.join().unwrap().unwrap();
    /// });
    /// ```
    pub fn send_conditional_returning(
        &mut self,
        op: Op<K, V>,
        condition: Condition<V>,
    ) -> Result<Outcome<V>, CollectionError> {
        // The wait's first poll fences: the tail needs no fence of its own.
        let seq = self.send_with(op, condition, true)?;
        match self.wait_applied(seq) {
            Ok(()) | Err(CollectionError::Delegation(DelegationError::WriterDied { .. })) => {}
            Err(e) => return Err(e),
        }
        self.result(seq)
    }

    /// Sends `op` under `condition`, waits, and returns the value the writer found at the
    /// key: `Ok` if the operation applied (the value it replaced or removed), `Err` if
    /// the condition refused it. [`DelegationError::WriterDied`] if the writer died with the
    /// operation unacknowledged, [`DelegationError::NoOldValues`] if the structure does
    /// not tell what it finds. The named calls below are this with a fixed condition.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
    /// use bi_collections::tree::BiTree;
    /// use bi_collections::{Condition, Op};
    /// use bi_core::runtime::testing::Setup;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    ///
    /// let s = Setup::new(3, 1);
    /// let tree = BiTree::<u64, u64>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// let layout = DelegationLayout::<u64, u64>::new(s.arena(2), 1, 8, s.emu.line_size()).unwrap();
    /// let mut server = DelegationServer::new(s.emu.node(0), layout, tree).unwrap();
    /// let stop = AtomicBool::new(false);
    /// std::thread::scope(|scope| {
    ///     let serving = scope.spawn(|| server.run_until(&stop));
    ///     let mut client = DelegationClient::new(s.emu.node(1), layout, 0).unwrap();
    ///     assert_eq!(client.request(Op::Insert(4, 1), Condition::Present).unwrap(), Err(None));
    ///     assert_eq!(client.request(Op::Insert(4, 1), Condition::Always).unwrap(), Ok(None));
    ///     assert_eq!(client.request(Op::Insert(4, 2), Condition::Present).unwrap(), Ok(Some(1)));
    ///     stop.store(true, Ordering::Release);
    ///     serving.join().unwrap().unwrap();
    /// });
    /// ```
    pub fn request(
        &mut self,
        op: Op<K, V>,
        condition: Condition<V>,
    ) -> Result<Decided<V>, CollectionError> {
        let seq = self.sender.sent() + 1;
        let outcome = self.send_conditional_returning(op, condition)?;
        let error = match outcome {
            Outcome::Replaced(found) => return Ok(Ok(found)),
            Outcome::Refused(found) => return Ok(Err(found)),
            Outcome::Failed => DelegationError::WriterDied {
                first: seq,
                last: seq,
            },
            Outcome::TooLarge { len } => DelegationError::ItemTooLarge {
                len,
                limit: parcel::capacity(&self.parcels),
            },
            Outcome::NoRoom => DelegationError::NoRoom { upto: seq },
            Outcome::Applied | Outcome::Undecided => DelegationError::NoOldValues { seq },
        };
        Err(error.into())
    }

    /// Inserts through the server and returns the value the key had (as papaya's and
    /// `HashMap`'s `insert` do). [`DelegationError::WriterDied`] if the writer died with
    /// the operation unacknowledged.
    pub fn insert_returning(&mut self, key: K, value: V) -> Result<Option<V>, CollectionError> {
        let found = self.request(Op::Insert(key, value), Condition::Always)?;
        Ok(found_value(found))
    }

    /// Removes through the server and returns the value the key had.
    pub fn remove_returning(&mut self, key: K) -> Result<Option<V>, CollectionError> {
        let found = self.request(Op::Remove(key), Condition::Always)?;
        Ok(found_value(found))
    }

    /// Inserts `value` only if `key` is absent; returns the value the key had (`None`:
    /// it was absent and `value` is in; `Some`: nothing was written). Example at
    /// [`send_conditional_returning`](Self::send_conditional_returning).
    pub fn insert_if_absent(&mut self, key: K, value: V) -> Result<Option<V>, CollectionError> {
        let found = self.request(Op::Insert(key, value), Condition::Absent)?;
        Ok(found_value(found))
    }

    /// Sets `key` to `new` only if it holds `expected` (compared byte for byte): `Ok`
    /// with the value replaced, or `Err` with the value found (`None`: absent), nothing
    /// written. Example at [`send_conditional_returning`](Self::send_conditional_returning).
    pub fn compare_and_set(
        &mut self,
        key: K,
        expected: V,
        new: V,
    ) -> Result<Result<V, Option<V>>, CollectionError> {
        let found = self.request(Op::Insert(key, new), Condition::Equals(expected))?;
        Ok(compared_value(found))
    }

    /// Removes `key` only if it holds `expected`: `Ok` with the value removed, or `Err`
    /// with the value found. Example at [`send_conditional_returning`](Self::send_conditional_returning).
    pub fn compare_and_remove(
        &mut self,
        key: K,
        expected: V,
    ) -> Result<Result<V, Option<V>>, CollectionError> {
        let found = self.request(Op::Remove(key), Condition::Equals(expected))?;
        Ok(compared_value(found))
    }

    /// The outcome of acknowledged operation `seq`, the last this client sent. A copy of
    /// an older one (a line this node still held, or a result slot whose write-back
    /// had not landed when the acknowledgement's did) is dropped and read again until
    /// the timeout.
    fn result(&mut self, seq: u64) -> Result<Outcome<V>, CollectionError> {
        let outcome = self.result_word(seq)?;
        let replies = Parcels {
            view: self.sender.view(),
            area: self.layout.reply_area(self.index)?,
            bad: DelegationError::BadResult {
                client: self.index,
                seq,
            },
            faults: self.faults,
        };
        outcome.try_map(|word| V::from_word(&word, &replies))
    }

    /// [`result`](Self::result) as the server wrote it: the value as its word.
    fn result_word(&mut self, seq: u64) -> Result<Outcome<V::Word>, CollectionError> {
        let view = self.sender.view();
        // Where the outcome fits the acknowledgement's line, the server repeats the
        // latest one there, and the poll that saw `seq` applied has just read the line
        // fresh; otherwise it is in the operation's result slot.
        let (at, mut fresh) = match self.layout.inline_result_offset(self.index)? {
            Some(at) => (at, true),
            None => (self.layout.result_offset(self.index, seq)?, false),
        };
        let size = size_of::<WireResult<V>>();
        let bad = DelegationError::BadResult {
            client: self.index,
            seq,
        };
        let mut backoff = Backoff::with_timeout(self.config.timeout);
        loop {
            if !fresh {
                view.invalidate(at, size).map_err(mem)?;
                view.fence();
            }
            fresh = false;
            let record = view.load::<WireResult<V>>(at).map_err(mem)?;
            if record.seq() == seq {
                return record.outcome().ok_or_else(|| bad.into());
            }
            if !backoff.wait() {
                return Err(bad.into());
            }
        }
    }

    /// Reads the acknowledgement word once from memory (invalidate, fence, load) and
    /// returns it: every operation up to that sequence number is applied and published.
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
    /// assert_eq!(client.poll_applied().unwrap(), 0);
    /// server.serve_once(16).unwrap();
    /// assert_eq!(client.poll_applied().unwrap(), 1);
    /// ```
    pub fn poll_applied(&mut self) -> Result<u64, CollectionError> {
        let view = self.sender.view();
        // The acknowledgement and the failed range share the server's line: one
        // invalidation covers the three words. A takeover writes the range back and
        // fences before it moves the acknowledgement, and the acquire fence keeps the
        // two loads in order, so the range read is at least as new as the
        // acknowledgement.
        view.invalidate(self.ack_offset, 3 * size_of::<u64>())
            .map_err(mem)?;
        view.fence();
        let ack = view.load::<u64>(self.ack_offset).map_err(mem)?;
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        let words = view
            .load::<[u64; 2]>(self.layout.failed_offset(self.index)?)
            .map_err(mem)?;
        let FailedWords { from, to, refused } = FailedWords::from_words(words);
        if refused != self.refused {
            self.refused = refused;
            self.refusals = true;
        }
        if (from, to) != self.failed {
            self.failed = (from, to);
            self.unreported = (to > from).then_some((from, to));
        }
        let sent = self.sender.sent();
        if ack < self.applied || ack > sent {
            return Err(DelegationError::BadAcknowledgement {
                client: self.index,
                ack,
                previous: self.applied,
                sent,
            }
            .into());
        }
        self.applied = ack;
        Ok(ack)
    }

    /// The acknowledgement as last read, without reading memory.
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
    /// server.serve_once(16).unwrap();
    /// assert_eq!(client.applied(), 0); // as last read: not read since
    /// client.poll_applied().unwrap();
    /// assert_eq!(client.applied(), 1);
    /// ```
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Operations sent so far (the last sequence number handed out).
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
    /// client.remove(1).unwrap();
    /// assert_eq!(client.sent(), 2);
    /// ```
    pub fn sent(&self) -> u64 {
        self.sender.sent()
    }

    /// This client's index in the layout.
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
    /// assert_eq!(client.index(), 0);
    /// ```
    pub fn index(&self) -> usize {
        self.index
    }

    /// The view this client works through.
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
    /// assert_eq!(client.view().id(), 1); // the emulated node it was attached through
    /// ```
    pub fn view(&self) -> &Vw {
        self.sender.view()
    }

    /// A wait for `waiting_for` that gives up after this client's timeout.
    fn wait(&self, waiting_for: WaitingFor) -> Wait {
        Wait {
            backoff: Backoff::with_timeout(self.config.timeout),
            asked: None,
            waiting_for,
            ended: None,
        }
    }

    /// One step of `wait` (for something up to `seq`). It ends in two steps: the one that
    /// finds the timeout run out ([`DelegationError::Timeout`]) or the watch, asked every
    /// [`WATCH_EVERY`], saying the server is gone ([`DelegationError::ServerGone`]) returns
    /// `Ok`, so that the caller looks once more, and the next returns the error. A
    /// server that acknowledged and then left between the caller's look and the
    /// watch's has done what the caller waits for.
    fn wait_step(&self, wait: &mut Wait, seq: u64) -> Result<(), CollectionError> {
        if let Some(end) = wait.ended {
            return Err(end.error(wait.waiting_for, seq, self.applied));
        }
        if !wait.backoff.wait() {
            wait.ended = Some(WaitEnd::Timeout);
            return Ok(());
        }
        let Some(gone) = self.watch.as_ref().filter(|_| !wait.backoff.spinning()) else {
            return Ok(());
        };
        let now = Instant::now();
        match wait.asked {
            Some(at) if now < at => return Ok(()),
            None => {
                wait.asked = Some(now + WATCH_EVERY);
                return Ok(());
            }
            Some(_) => wait.asked = Some(now + WATCH_EVERY),
        }
        if gone() {
            wait.ended = Some(WaitEnd::ServerGone);
        }
        Ok(())
    }
}
