//! Switches that turn one protocol mechanism off, so a test can show the mechanism is
//! needed: with the switch on, some check counts a hazard; with it off, none does.
//!
//! The switches exist only with the `faults` feature. Without it,
//! `RuntimeConfig::fault` is not there and
//! [`Faults::has`] is a constant `false` that the compiler folds away, so shipped builds
//! carry no trace of them.

/// Declares [`Fault`] and [`Fault::ALL`] from one list, so that no switch can be
/// missing from `ALL` (the meta test of the hazard catalog walks it).
macro_rules! switches {
    ($(#[$enum_doc:meta])* enum Fault { $($(#[$doc:meta])* $name:ident,)* }) => {
        $(#[$enum_doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum Fault {
            $($(#[$doc])* $name,)*
        }

        impl Fault {
            /// Every switch, in declaration order.
            ///
            /// ```
            /// use bi_core::runtime::Fault;
            ///
            /// assert_eq!(Fault::ALL[0], Fault::ScopeRefresh);
            /// assert!(Fault::ALL.iter().enumerate().all(|(i, &f)| f as usize == i));
            /// ```
            pub const ALL: &'static [Fault] = &[$(Fault::$name,)*];
        }
    };
}

switches! {
    /// One mechanism a test can switch off.
    ///
    /// ```
    /// use bi_core::runtime::{Fault, Faults};
    ///
    /// // Nothing is switched off unless a test asks for it (`faults` feature).
    /// assert!(!Faults::default().has(Fault::LockWriteback));
    /// assert_ne!(Fault::LockWriteback, Fault::NodeClaim);
    /// ```
    enum Fault {
        /// A node whose reader declares a structure for the first time does not drop the
        /// lines its passes skipped for that structure ([`scope`](super::scope)).
        ScopeRefresh,
        /// The pool lock's record is stored but not written back, so other nodes keep
        /// reading what memory held before ([`lock`](super::lock)).
        LockWriteback,
        /// A runtime neither refuses a node that another live process runs nor checks, before
        /// each pass writes the node's record, that memory still names it
        /// ([`claim`](super::claim)).
        NodeClaim,
        /// A writer that adopts a structure gives the rest of its arena back to the heap at
        /// once instead of keeping it until a grace period has passed
        /// ([`Writer::adopt`](super::Writer::adopt)).
        AdoptQuarantine,
        /// A writer that adopts a structure does not announce its root slots in the modified
        /// ring, so nodes keep a root the dead writer wrote back without logging it
        /// ([`Writer::adopt`](super::Writer::adopt)).
        AdoptAnnounce,
        /// A node's pass ignores the flag a joined process raises, and skips what writers
        /// logged for structures only that process reads ([`share`](super::share)).
        JoinedScopes,
        /// A delegation server that takes over from a dead one serves the requests it finds
        /// unacknowledged instead of reporting them failed, so a request the dead server
        /// applied without acknowledging is applied again
        /// (`bi_collections::delegate::DelegationServer::resume`).
        DelegationTakeover,
        /// A delegation server decides every conditional request of a batch (insert-if-absent,
        /// compare-and-set) on what the structure held before the batch, not on what the
        /// batch's earlier operations left at the key, so two requests that each expect
        /// the old value both apply
        /// (`bi_collections::ApplyBatch::apply_conditional`).
        ConditionsAtBatchStart,
        /// A publication stores and writes back the slot *before* the write-back and fence
        /// that put the object in memory, so the slot can reach memory first and another
        /// node follow it to lines that are not there yet
        /// ([`Writer::publish`](super::Writer::publish)). Observable only where write-backs
        /// land late, as the hardware's do
        /// ([`EmulatorConfig::late_writebacks`](crate::mem::EmulatorConfig::late_writebacks)).
        PublishOrder,
        /// A writer does not check, before it writes, that its node's heartbeat is younger
        /// than half the node lease, so after a stall longer than the lease it keeps
        /// writing a structure whose role another process has taken
        /// ([`lease`](super::lease)).
        WriterLease,
        /// A map's snapshot read accepts two collects that agree without checking that the
        /// lines' stamps sum to what the header says, so memory holding part of a commit
        /// (its write-backs land in any order until the fence) passes for a published
        /// version (`bi_collections::map::MapRef::iter`).
        SnapshotSum,
        /// A map's snapshot read accepts its first collect without reading everything again,
        /// so lines read at different moments pass for one version
        /// (`bi_collections::map::MapRef::iter`).
        SnapshotRecollect,
        /// A delegation client does not write back the parcel holding a long key or value
        /// before it publishes the record that names it, nor the server a long old value's
        /// reply (nor does it fence between the reply or the result slots and the
        /// acknowledgement), so the other side can read memory without them
        /// (`bi_collections::delegate`).
        ParcelWriteback,
        /// A delegation server reads a parcel, and a client a reply, from its own cache
        /// without dropping the lines first, so a copy of what an earlier request left at
        /// the same place passes for the new one (`bi_collections::delegate`).
        ParcelInvalidate,
        /// An object's line is written stamp first, then payload, instead of
        /// [`Stamp::INVALID`](super::Stamp::INVALID), payload, stamp: a copy of the line taken
        /// between the two stores (another node's prefetch of a line evicted half written)
        /// carries the new stamp over the old payload and passes for the new object
        /// ([`object`](super::object)).
        StampOrder,
        /// A validated read neither compares a line's stamp with the link's generation nor
        /// the stamps of an object's lines with each other (nor a stamp read after the
        /// payload with the one read before), so a copy of an older incarnation of the block
        /// (refilled by a prefetch after the node's pass dropped it) passes for the object
        /// the link names ([`object`](super::object)).
        LineStamp,
        /// A validated read ignores the FREED mark of line 0, so a reader that fetched a
        /// retired object from memory (its retirement written back) reads it as live instead
        /// of turning to the slot that replaced it ([`object`](super::object)).
        FreedMark,
        /// A node's pass reads the writers' modified rings but does not invalidate the
        /// slots they logged, so the node keeps reading a slot's old link for as long as
        /// the line stays in its cache ([`pass`](super::pass)).
        LoggedSlots,
        /// A node's pass drops a group of retired objects' lines once, when it reads their
        /// retirement, and not again once the readers that were inside have left, so a
        /// reader that walked a retired object after the first invalidation leaves its
        /// lines cached when the block is reused ([`pass`](super::pass)).
        SecondInvalidation,
        /// The grace point compares clocks of different nodes without allowing for the
        /// configured skew bound `D`, so a node whose clock runs ahead seems to have
        /// passed after a retirement it has not seen (`runtime::write::grace`).
        SkewBound,
        /// A reused block's new object takes the generation of the block's last one
        /// instead of the next, so a link kept from before the reuse (and any stale copy
        /// of its lines) matches the new object ([`Writer`](super::Writer)).
        GenerationBump,
        /// A hash map's lookup that misses in the lines its node's cache holds reports the
        /// key absent instead of reading the partition's root slot and bucket lines again
        /// from memory, so a key whose insertion was published before the lookup began is
        /// missed until the node's next pass ([`lazy`](super::lazy),
        /// `bi_collections::map::MapRef::get_fresh`).
        LazyMap,
        /// A tree's lookup that misses in the version its node's cache holds reports the
        /// key absent instead of reading the root slot again from memory, so a key whose
        /// insertion was published before the lookup began is missed until the node's next
        /// pass ([`lazy`](super::lazy), `bi_collections::tree::TreeRef::get`).
        LazyTree,
        /// A map's writer gives an entry a batch emptied to another key of the same
        /// batch, so a key removed and put back in one batch may change line without
        /// being absent from any version: a lookup that reads the chain's lines through
        /// the cache, as versions of different moments, can then miss a key present in
        /// every version (`bi_collections::map::MapRef::get`).
        ChainMiss,
        /// A whole-heap invalidation of a pool's node (`extents_only`) reads the extent
        /// table through the node's cache, so the lines of an extent granted after the
        /// node cached the table stay in its cache
        /// ([`RuntimeConfig::extents_only`](super::RuntimeConfig::extents_only)).
        ExtentTableRead,
        /// A process that had another node's writer apply a write does not read the key's
        /// path again from memory once the write is acknowledged, so its node may read
        /// the key as it was before the write until its next pass
        /// (`bi_collections::Refresh`, `bi::SharedMap::insert`).
        OwnWrites,
        /// A channel's consumer polls the tail from its cache without dropping the line
        /// first, so its copy keeps answering with the tail it read when it attached and
        /// it never sees another message (a polling loop keeps the line hot, so not even
        /// eviction rescues it) ([`Receiver`](crate::channel::Receiver)).
        ChannelTail,
        /// A writer whose modified or freed ring is full overwrites the oldest entries
        /// instead of refusing ([`BiError::LogFull`](super::BiError::LogFull)) until every
        /// live node's pass has consumed them, so a node that falls behind finds more
        /// unread entries than the ring holds: it cannot know what it missed and drops
        /// every line of the heap and the root directory it caches
        /// (`runtime::format::ring`).
        LogBackPressure,
        /// The pool lock's records of nodes `2 k` and `2 k + 1` lie side by side in one
        /// line instead of on lines of their own, so each node writes back a copy of the
        /// line that holds the other's record as it last read it, and overwrites what the
        /// other wrote since: a ticket withdrawn comes back, a ticket taken disappears
        /// ([`lock`](super::lock)).
        RecordLines,
        /// A writer's reclamation gives every retired block back to the heap at once
        /// instead of only those whose retirement the grace point has passed, so a block
        /// is reused while a reader on another node is still inside the section that
        /// reached it, or still caches its lines
        /// ([`Writer::reclaim`](super::Writer::reclaim)).
        GraceWait,
        /// A reader entering a section does not store its enter tick in its reader record,
        /// so its node's passes see no reader inside: they drain the groups of retired
        /// objects it may still hold, and the grace point passes their retirement while
        /// it reads them ([`Reader::enter`](super::Reader::enter), [`pass`](super::pass)).
        ReaderRecord,
        /// The grace point waits for every node a process has claimed, however old its
        /// heartbeat, instead of excluding a node whose heartbeat is older than the node
        /// lease, so a node whose host died without clearing its claim holds every
        /// writer's reclamation back forever ([`GracePoint`](super::GracePoint)).
        NodeLease,
        /// A node's pass waits for every reader inside a section, however long ago it
        /// entered, instead of excluding a reader inside one section longer than the
        /// reader lease, so a reader that stopped inside its section holds every
        /// writer's reclamation back forever ([`pass`](super::pass)).
        ReaderLease,
        /// A graph engine's partition does not drop, after a superstep's barrier, its
        /// copies of the other partitions' lines it reads next (values, partials and
        /// aggregates), so it folds and gathers what its cache kept from an earlier
        /// superstep (`bi_graph::Mode::BiOnDemand`, `bi_graph::RunOptions::faults`).
        GraphBarrier,
        /// A pass whose previous heartbeat had stopped covering writes (older than half
        /// the node lease) does not flag the lapse, so a writer whose passes stalled and
        /// then ran once finds a fresh heartbeat and publishes without re-reading its
        /// roles, beside the process that took them ([`lease`](super::lease)).
        LeaseLapse,
        /// A role a renewal found taken is not remembered: the renewal's own pass made the
        /// heartbeat fresh, so the next write through the same handle publishes
        /// ([`BiError::RoleLost`](super::BiError::RoleLost)).
        LostRoles,
        /// A node whose own pool lock record lapsed during the bakery (a stall of more
        /// than half the lease while choosing or waiting) goes on with its ticket instead
        /// of withdrawing and taking a new one, although another node may have passed
        /// over its record meanwhile ([`lock`](super::lock)).
        LockLapse,
        /// A graph engine's partition working on the frontier (WCC, SSSP) does not mark
        /// the neighbours a changed vertex puts out of date, so they keep a partial
        /// gathered from values that have since changed (`bi_graph::RunOptions::faults`).
        FrontierMarks,
        /// A graph engine's partition writes a superstep's new values into the bank of
        /// value slots the superstep reads instead of the other one, so a master applied
        /// as soon as its own gather is done overwrites a value that later gathers of the
        /// same superstep, on its partition or another, still read: the superstep folds a
        /// mix of old and new values (`bi_graph::RunOptions::faults`).
        ValueBanks,
        /// A graph engine's partition in the periodic mode puts its initial values into
        /// the first bank of value slots only, so a replica that reads the second bank
        /// before a superstep's values reach memory reads the region's zeros as a value
        /// (a distance of 0, a label of 0) that no superstep ever had
        /// (`bi_graph::RunOptions::faults`).
        SecondBankStart,
        /// A graph partition that is a process reads the other partitions' lines of the
        /// region barrier through its cache instead of dropping them first, so it keeps
        /// seeing the arrival counts it cached a superstep ago and waits until its cache
        /// happens to evict them: forever, on a cache that keeps them
        /// (`bi_graph::RegionBarrier`).
        RegionBarrierRead,
        /// A hash map's fresh lookup, and a process's refresh of a key's path after a
        /// write another node's writer applied for it, read the bucket's tag line through
        /// the cache instead of from memory, so a tag line cached before the key was
        /// inserted still answers that the key is absent
        /// (`bi_collections::map::MapRef::get_fresh`).
        TagPath,
        /// A writer does not record a line's new image in its rewrite journal before it
        /// rewrites the line in place, so a successor that finds the line half-written by
        /// a killed process cannot finish it ([`journal`](super::journal)).
        RewriteJournal,
        /// A writer's rewrite journal is only stored, not written back and fenced before
        /// the line's first store, so when the writer's host dies after its cache wrote
        /// the half-written line back (an eviction), memory holds the line with its stamp
        /// invalid and no journal to finish it from ([`journal`](super::journal)).
        JournalWriteBack,
        /// A node's runner whose heartbeat is older than the node lease counts as dead
        /// even when its process still exists on this host (stopped, not gone), so another
        /// process takes its node and its writer roles, and the stopped process's stores
        /// land beside its successor's once it runs again
        /// (`runtime::node::process`).
        LiveProcess,
        /// A node's runner does not check, at each pass, that its node's share record
        /// still names it: when another process claimed the same free node at the same
        /// moment and its share record landed last, the record names that loser, so
        /// other processes cannot ask the kernel about the runner and judge it by its
        /// lease alone (`runtime::node::share`).
        ShareRecordRepair,
        /// A process that takes the writer role of a structure from a dead writer whose
        /// node this host's kernel can judge does not first make that node's cache write
        /// back what the dead process stored, so stores it left unwritten-back land
        /// after the successor adopted the structure and overwrite what it wrote
        /// (`runtime::node::role`, [`MemView::write_back_node`](crate::mem::MemView::write_back_node)).
        DeadWriterStores,
        /// A region file is made in place at its path (created, lengthened, its header
        /// written) instead of whole under another name and then linked to its path, so
        /// a process that opens the path meanwhile finds a file too short or a header of
        /// zeros ([`Region::create`](crate::region::Region::create)).
        LinkedCreation,
        /// A graph engine's periodic pass reads the other partitions' written-line logs
        /// through its cache instead of dropping them first, so once it has cached a log
        /// word it keeps seeing the pass number it read then, and leaves cached the
        /// lines that partition writes afterwards (`bi_graph::Mode::BiPeriodic`).
        WrittenLog,
    }
}

/// The mechanisms switched off: none, unless a test built with the `faults` feature
/// asked.
///
/// ```
/// use bi_core::runtime::{Fault, RuntimeConfig};
///
/// assert_eq!(RuntimeConfig::default().faults(), Default::default());
/// assert!(!RuntimeConfig::default().faults().has(Fault::ScopeRefresh));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    #[cfg(feature = "faults")]
    bits: u64,
}

// Without the feature the switches take no space and every check is a constant `false`:
// a build without it (`cargo check -p bi-core`) fails here if that ever stops being so.
#[cfg(not(feature = "faults"))]
const _: () = assert!(size_of::<Faults>() == 0);

// Every switch is one bit of `Faults::bits`.
#[cfg(feature = "faults")]
const _: () = assert!(Fault::ALL.len() <= u64::BITS as usize);

impl Faults {
    /// Whether `fault` is switched on (always `false` without the `faults` feature).
    ///
    /// ```
    /// use bi_core::runtime::{Fault, Faults};
    ///
    /// let none = Faults::default();
    /// assert!(!none.has(Fault::AdoptQuarantine) && !none.has(Fault::JoinedScopes));
    /// ```
    #[inline(always)]
    pub fn has(self, fault: Fault) -> bool {
        #[cfg(feature = "faults")]
        return self.bits & Self::bit(fault) != 0;
        #[cfg(not(feature = "faults"))]
        {
            let _ = fault;
            false
        }
    }

    #[cfg(feature = "faults")]
    pub(crate) fn with(self, fault: Fault) -> Faults {
        Faults {
            bits: self.bits | Self::bit(fault),
        }
    }

    #[cfg(feature = "faults")]
    const fn bit(fault: Fault) -> u64 {
        1 << fault as u64
    }
}
