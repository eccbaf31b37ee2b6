//! The Bounded Incoherence runtime: reader sections, publication, retirement, quiescence
//! passes and a grace period that is sound without cache coherence.
//!
//! # Why it is shaped like this
//!
//! Nodes share memory but not coherence. A reader on node `n` can keep reading a line
//! that a writer on node `w` changed long ago, until `n` invalidates it; and it can keep a
//! copy of an object that `w` freed and reused. RCU-style reclamation ("wait until every
//! reader has left a section that began before the unlink") is not enough here, for four
//! reasons, and each shapes the design:
//!
//! 1. **Stale links.** After a reader leaves its section, its *cache* still holds the old
//!    slot and the old object. A later section can read them again. So a node must
//!    *invalidate* what writers changed (log rings + a periodic pass), and reclamation
//!    must wait for each node's pass, not just for its readers.
//! 2. **Re-fetch after the pass.** A reader already inside a section when its node's pass
//!    invalidates a freed object can pull the lines back in afterwards (it still holds the
//!    link). So one pass is not enough: after every reader that was inside at the end of
//!    pass `k` has left, a later pass invalidates the same lines *again* (the pending
//!    groups of [`pass`]).
//! 3. **Prefetch.** Hardware may refill any line at any moment, including a freed block's
//!    line between the last invalidation and the block's reuse. No invalidation schedule
//!    prevents that, so objects carry their identity: every line of an object starts with
//!    the object's *generation* (bumped at every reuse and rewrite; [`Stamp`]), and a
//!    link carries the generation it expects. A reader checks every line it uses; a mismatch means "old
//!    copy": it invalidates the object's lines, fences and reads once more, and if it
//!    still does not match, the *link* is stale and the caller re-reads the slot
//!    (lazy invalidation). The same check catches a multi-line object whose first line
//!    is fresh and a later line stale, and (with the write order of [`object`]) a line
//!    that reached memory half written.
//! 4. **Clocks.** Nodes have no common clock; stamps from two nodes are compared allowing
//!    for a skew bound `D` (pairwise: the largest difference between two node clocks at
//!    one instant).
//!
//! And two constraints shape the costs: the read path (enter, load/follow on a hit,
//! exit) performs no cache operation and no fence, because a fence alone costs as much as
//! a whole read section; and no line is ever written by two nodes (every record, ring and
//! block has a single writer), because a write-back of a shared line loses the other
//! node's bytes.
//!
//! # The grace argument
//!
//! Writer `w` retires object `X`: it has already published a replacement (slot written
//! back, slot logged in the modified ring), then it sets FREED, writes it back, appends
//! `X` to its freed ring, writes the entry and the tail back, fences, and only then reads
//! its clock: `t_X`, the moment `X`'s entry was certainly in memory.
//!
//! Node `n`'s pass `k` starts at `S_k` (after `membarrier`, so every reader's "inside"
//! store is visible), reads the freed tail, *then* invalidates and reads the modified tail
//! (so the unlink of anything it sees freed is seen too, even if a prefetch refilled the
//! modified tail's line early), invalidates the logged slots and the freed objects, and
//! ends at `E_k` after one fence. The freed objects form group `k`. A later pass `j`
//! whose oldest active, unexpired reader entered after `E_k` invalidates group `k` again
//! and drops it. The reclaim point `R_n` is `S_K` for the largest `K` such that every
//! group up to `K` has been dropped; it is published (written back, fenced) in `n`'s node
//! record.
//!
//! `w` frees `X` when `t_X + D < R_n` for every live node `n`. Then `X`'s entry was in
//! memory before `S_K` (skew allowed), so pass `K` or an earlier one read it; that group
//! was invalidated once after the unlink became visible (so slots on `n` lead to the
//! replacement), and once more after every reader that could have held `X`'s link had
//! left; readers entering later cannot reach `X` (fresh slots, immutable objects). So `n`
//! holds no reference to `X`, and any line of `X` it still caches arrived by prefetch
//! after the last invalidation: harmless, because after reuse its stamp no longer matches
//! any link. Hence: no live node dereferences `X` after reuse.
//!
//! Liveness needs leases. A reader inside one section longer than the *reader lease* is
//! excluded by its node's pass (and reported); a node whose last pass ended longer than
//! the *node lease* ago is excluded by writers (and reported). Excluded parties are no
//! longer protected by the grace period; they are protected only by the generation check
//! (they never accept a reused object's bytes as theirs). A node that finds (after its
//! pass) that it may have been excluded, or that a ring overflowed under it, invalidates
//! the whole heap and root directory, and again once its readers have left. A node the
//! region lists but that never runs a pass holds reclamation back for one node lease
//! (its record looks like a node that has just started).
//!
//! # Where the first sketch of this design had holes
//!
//! Each of these is closed in the code and exercised by a test:
//!
//! - **Skew is pairwise.** `D` bounds the difference between *two* node clocks; the
//!   emulator's `clock_skew(b)` offsets each node by up to `b`, so `D = 2 b` there.
//! - **The retire tick is a visibility time.** It is read *after* the freed entry and the
//!   tail are written back and fenced, with [`Clock::refresh`] (a coarse clock may lag by
//!   a whole period, which would date the retirement too early).
//! - **Reading the freed tail before the modified tail is not enough**: a prefetch can
//!   refill the modified tail's line between the two invalidations; the pass therefore
//!   invalidates (and fences) the modified tail only *after* loading the freed tail.
//! - **Partly written lines.** Dirty lines can be evicted at any moment, so memory may
//!   hold any prefix of a writer's stores. Each line is written stamp := invalid, payload,
//!   stamp := generation (see [`object`] for why that order suffices), and
//!   [`BiBox::set`] after allocation rewrites under a *new* generation (another node
//!   may already cache the first version's lines).
//! - **Generations must beat every stale line**, not just the old first line: a heap that
//!   splits or merges blocks puts old stamps of other objects into a new block, so the
//!   new generation is one more than the largest stamp found in any of its lines.
//! - **A line refilled while being copied**: readers re-check each line's stamp after
//!   copying its payload.
//! - **Self-exclusion is checked after publishing the record**: a writer can exclude a
//!   node while that node's pass is still running, so the node compares its clock *after*
//!   writing its record back with its previous heartbeat plus the lease.
//! - **Retire only your own objects**: setting FREED writes the object's first line,
//!   which belongs to the allocating writer; a writer refuses links it did not allocate.
//! - **The oracle's reuse hazards cannot all be prevented**: a prefetcher may refill a
//!   freed block's line after every invalidation and before reuse, and a reader whose
//!   slot line is not cached sees a new link before its pass. What the protocol
//!   guarantees is that every such load is rejected (the reader stops at the first
//!   mismatching line), so tests assert `reuse_hazards <= rejected reads`, and zero where
//!   the schedule keeps prefetch out.
//!
//! # Bounds
//!
//! - **Staleness.** A slot published at writer time `t` is fresh on node `n` after the
//!   first pass of `n` that starts after `t + D`: so a reader sees it at most
//!   `period + D + pass duration` ticks after publication.
//! - **Memory.** A retirement that becomes visible just after a pass of node `n` starts
//!   is read by the next pass (group `k`), drained by the one after (if no reader that
//!   was inside at the end of pass `k` is still inside), and then `R_n` is the start of
//!   pass `k`, which is more than `D` after the retirement when the period exceeds `D`.
//!   So a retired block is reclaimable about `2 periods + pass duration + D + longest
//!   read section` after its retirement (plus the node lease if a node stops passing),
//!   and freed at the next [`Writer::reclaim`], or by the next bag
//!   [`Writer::defer_retire`] retires (which gives back up to [`RECLAIM_STEP`] blocks):
//!   retired-but-unreclaimed bytes stay below `retire rate x (2 periods + D + longest
//!   section + reclaim interval [+ node lease])`, plus one bag of [`RETIRE_BATCH`]
//!   objects not yet retired. (Measured: at most 2 periods' worth over a million cycles;
//!   see the tests, and `bi-collections`' `tree_memory` for a tree that never calls
//!   `reclaim`.)
//!
//! # Pieces
//!
//! - [`NodeRuntime`]: a node's runtime: [`reader`](NodeRuntime::reader),
//!   [`writer`](NodeRuntime::writer), [`quiesce`](NodeRuntime::quiesce),
//!   [`start_background`](NodeRuntime::start_background);
//! - [`Reader`], [`BiGuard`], [`Shared`] (reader side); [`Writer`], [`BiBox`] (writer
//!   side); [`Link`] (generation-tagged links);
//! - the protocol words as types: [`Stamp`] and [`Generation`] (the word at the start of
//!   every line of an object, and its matching rule), `ReaderState` (a reader record's
//!   word);
//! - the read path, each written once: [`BiGuard::fetch`] / [`BiGuard::fetch_with`] (the
//!   validated read of one object: [`Fetch`]), [`walk`] (a search along links, through
//!   the cache or from memory: [`BiGuard::walk_via`]), [`lazy`] (lazy invalidation: cached
//!   first, fresh entry points on a miss);
//! - [`SlotArray`], [`SlotArrayRef`]: runtime-sized arrays of slots updated in place,
//!   see [`slots`] for why reading one slot is sound;
//! - [`Lines`]: line arrays whose lines are records rewritten in place under a new
//!   version of their stamp (a hash map's bucket lines), see [`lines`];
//! - [`Clock`] ([`TickClock`], [`EmulatedClock`]), [`RuntimeConfig`], [`Policy`].
//!
//! # Where the code lives
//!
//! By role, each folder importing only from those below it (a test reads the sources and
//! fails on an import that runs upward or in a circle), lowest first:
//!
//! - `format/`: how objects, scopes, reader records and log rings lie in memory;
//! - `node/`: who runs each node (claims, the node record and its leases, passes, the
//!   pool lock, writer roles, joined processes, the clock and the configuration);
//! - `read/` and `write/`, side by side and never naming each other: a reader's
//!   sections, the lookup loop and the walk; the writer, its grace point, its journal and
//!   adoption;
//! - `kinds/`: line arrays, slot arrays and byte strings, each with its layout, its reads
//!   and its writes in one file.
//!
//! So [`BiGuard`]'s and [`Writer`]'s methods are spread by two rules, and only by them: a
//! kind's reads and writes live with the kind, and inside `read/` and `write/` each file
//! is one step of the protocol with the methods that make it (`lazy.rs` the lookup loop,
//! `walk.rs` the walk along links; `journal.rs` the journal of an update in flight,
//! `adopt.rs` the adoption of a dead writer's memory).
//!
//! `mod.rs` holds the runtime's handle, [`NodeRuntime`]; [`BiError`] and [`Fault`] are
//! the vocabulary every folder uses.
//!
//! # Reader ordering
//!
//! A reader stores its state word, then loads shared data. The pass must not miss a
//! reader that has already loaded a link: that needs store-to-load ordering between the
//! reader's thread and the pass's thread. As liburcu's memb flavour does, the pass pays:
//! it issues `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` and readers issue only a
//! compiler fence. A pass on a node with no registered reader has nobody to order
//! against and skips the barrier (a writer-only node, a delegation server's node): a
//! reader registers with a sequentially consistent increment before it can enter, so
//! its loads all follow any pass that counted zero, like those of a reader entering
//! after the barrier. If membarrier cannot be registered (old kernel, Miri), readers fall
//! back to `fence(SeqCst)` ([`ReaderOrdering::Fence`]). Under the emulator
//! ([`ReaderOrdering::Emulated`]) a node's cache sits behind a mutex, which orders both
//! sides already.
//!
//! ```
//! use bi_core::runtime::testing::Setup;
//!
//! let s = Setup::new(2, 3);
//! let mut w = s.writer(0);
//! let first = w.alloc(1u64).unwrap();
//! assert!(w.publish(s.slot(0), first).unwrap().is_null());
//! let second = w.alloc(2u64).unwrap();
//! let old = w.publish(s.slot(0), second).unwrap();
//! w.retire(old).unwrap();
//! for _ in 0..3 {
//!     for n in &s.nodes {
//!         n.quiesce().unwrap();
//!     }
//! }
//! let r = s.nodes[1].reader().unwrap();
//! assert_eq!(*r.enter().load::<u64>(s.slot(0)).unwrap().unwrap(), 2);
//! assert_eq!(w.reclaim().unwrap().freed_blocks, 1);
//! ```

mod error;
pub mod fault;
mod format;
mod kinds;
mod node;
mod read;
pub mod testing;
mod write;

use format::reader_state;
use format::ring;
pub use format::{object, scope};
pub use kinds::{bytes, lines, slots};
use node::{background, clock, config, inner, membarrier, pass_state, process, record};
pub use node::{claim, lease, lock, pass, role, share};
use read::reader;
pub use read::{lazy, walk};
pub use write::journal;
use write::{adopt, grace, writer};

pub use adopt::AdoptReport;
pub use background::Background;
pub use bytes::Bytes;
pub use clock::{Clock, EmulatedClock, TickClock};
pub use config::{Policy, ReaderOrdering, RuntimeConfig};
pub use error::BiError;
pub use fault::{Fault, Faults};
pub use grace::GracePoint;
pub use lazy::{Search, Via};
pub use lock::{LockRecord, PoolLockGuard};
pub use object::{Fetch, Generation, Lines, Link, LinkGeneration, Stamp};
pub use pass::{FIGURES_SLOT, NodeFigures, PassReport};
pub use reader::{BiGuard, Fetcher, Reader, Shared};
pub use record::NodeRecord;
pub use role::{Role, WriterRecord};
pub use scope::Scope;
pub use slots::{SlotArray, SlotArrayRef};
pub use writer::{BiBox, RECLAIM_STEP, RETIRE_BATCH, ReclaimReport, Unpublished, Writer};

use crate::heap::Heap;
use crate::mem::{EmulatedNode, MemView};
use crate::primitive::sync::Mutex;
use crate::primitive::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::region::Layout;
use inner::{NodeInner, Stats};
use pass_state::PassState;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The usual period of the background pass ([`NodeRuntime::start_background`]).
pub const DEFAULT_PASS_PERIOD: Duration = Duration::from_millis(1);

/// One node's runtime: its view, clock, configuration, reader records and pass state.
///
/// A cheap handle (clones share the node). One runtime runs a node: creating it claims
/// the node in the region ([`claim`]), and a second runtime for a node that a live
/// process runs is [`BiError::NodeTaken`]. The claim ends when the last handle is
/// dropped. (Several processes of one host acting as one node are not supported by this
/// version: reader records are handed out by this handle, and the pass state lives in
/// it.)
///
/// ```
/// use bi_core::region::{Region, RegionConfig};
/// use bi_core::runtime::{BiError, NodeRuntime, RuntimeConfig, TickClock};
/// use std::sync::Arc;
///
/// let region = Region::anonymous(RegionConfig::new(1 << 20)).unwrap();
/// let rt = NodeRuntime::new(region.hardware(), *region.layout(), 0, RuntimeConfig::default(),
///     Arc::new(TickClock::new())).unwrap();
/// let again = NodeRuntime::new(region.hardware(), *region.layout(), 0, RuntimeConfig::default(),
///     Arc::new(TickClock::new()));
/// assert!(matches!(again, Err(BiError::NodeTaken { node: 0, .. })));
/// assert_eq!(rt.clone().node(), 0); // clones share the node
/// ```
pub struct NodeRuntime<V: MemView> {
    inner: Arc<NodeInner<V>>,
}

impl<V: MemView> Clone for NodeRuntime<V> {
    fn clone(&self) -> Self {
        NodeRuntime {
            inner: self.inner.clone(),
        }
    }
}

impl<V: MemView> fmt::Debug for NodeRuntime<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeRuntime")
            .field("node", &self.inner.node)
            .field("ordering", &self.inner.ordering)
            .finish_non_exhaustive()
    }
}

impl NodeRuntime<EmulatedNode> {
    /// The runtime of emulated node `node.id()` over a region with `layout`, with the
    /// node's emulated clock and [`ReaderOrdering::Emulated`].
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    /// use bi_core::region::{Region, RegionConfig};
    /// use bi_core::runtime::{NodeRuntime, RuntimeConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 17).with_nodes(2)).unwrap();
    /// let emu = Emulator::over(
    ///     region.backing().clone(),
    ///     EmulatorConfig::new(region.layout().size(), 2),
    /// )
    /// .unwrap();
    /// let rt = NodeRuntime::emulated(emu.node(1), *region.layout(), RuntimeConfig::default())
    ///     .unwrap();
    /// assert_eq!(rt.node(), 1);
    /// ```
    pub fn emulated(
        node: EmulatedNode,
        layout: Layout,
        config: RuntimeConfig,
    ) -> Result<Self, BiError> {
        NodeRuntime::start_emulated(node, layout, config, false)
    }

    /// [`join`](NodeRuntime::join) for an emulated node: another process of the host
    /// `node` stands for (its cache is the one `node` models).
    ///
    /// ```
    /// use bi_core::runtime::{NodeRuntime, RuntimeConfig, testing::Setup};
    ///
    /// let s = Setup::new(2, 1);
    /// s.nodes[0].quiesce().unwrap();
    /// let layout = *s.region.layout();
    /// let joined = NodeRuntime::emulated_join(s.emu.node(0), layout, RuntimeConfig::default())
    ///     .unwrap();
    /// assert!(joined.is_joined() && !s.nodes[0].is_joined());
    /// ```
    pub fn emulated_join(
        node: EmulatedNode,
        layout: Layout,
        config: RuntimeConfig,
    ) -> Result<Self, BiError> {
        NodeRuntime::start_emulated(node, layout, config, true)
    }

    /// Runs (or, with `join`, joins) emulated node `node.id()` with its emulated clock.
    fn start_emulated(
        node: EmulatedNode,
        layout: Layout,
        config: RuntimeConfig,
        join: bool,
    ) -> Result<Self, BiError> {
        let id = node.id();
        let clock = Arc::new(EmulatedClock::new(node.clone()));
        let config = config.reader_ordering(ReaderOrdering::Emulated);
        NodeRuntime::start(node, layout, id, config, clock, join)
    }
}

impl<V: MemView> NodeRuntime<V> {
    /// The runtime of node `node` seeing shared memory through `view`.
    ///
    /// Errors: a node the layout does not have, lines shorter than 32 bytes, a view
    /// smaller than the layout, a bad configuration.
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig};
    /// use bi_core::runtime::{BiError, NodeRuntime, RuntimeConfig, TickClock};
    /// use std::sync::Arc;
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 20)).unwrap();
    /// let clock = Arc::new(TickClock::new());
    /// let layout = *region.layout();
    /// let config = RuntimeConfig::default();
    /// let rt = NodeRuntime::new(region.hardware(), layout, 0, config, clock).unwrap();
    /// assert_eq!(rt.node(), 0);
    /// assert_eq!(rt.quiesce().unwrap().pass, 1);
    /// // A node the region does not have.
    /// let bad = NodeRuntime::new(region.hardware(), layout, 99, RuntimeConfig::default(),
    ///     Arc::new(TickClock::new()));
    /// assert!(matches!(bad, Err(BiError::BadNode { node: 99 })));
    /// ```
    pub fn new(
        view: V,
        layout: Layout,
        node: usize,
        config: RuntimeConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, BiError> {
        NodeRuntime::start(view, layout, node, config, clock, false)
    }

    /// Joins node `node`, which another process of this host runs, as a reader only
    /// ([`share`]): its readers are seen by the runner's pass, and it has no writer, no
    /// pass and no pool lock of its own ([`BiError::NotRunner`]).
    ///
    /// Errors: [`BiError::NodeNotRunning`] when no live process runs the node,
    /// [`BiError::NodeOnAnotherHost`] when its runner is on another host, and those of
    /// [`new`](Self::new).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use bi_core::runtime::{BiError, NodeRuntime, RuntimeConfig};
    ///
    /// let s = Setup::new(2, 3);
    /// s.quiesce_all().unwrap(); // node 1 runs: its heartbeat is fresh
    /// // A second process of node 1's host (here: another runtime over the same node).
    /// let layout = *s.region.layout();
    /// let joined = NodeRuntime::emulated_join(s.emu.node(1), layout, RuntimeConfig::default())
    ///     .unwrap();
    /// let reader = joined.reader().unwrap(); // node 1's pass sees it
    /// assert_ne!(reader.index(), s.nodes[1].reader().unwrap().index());
    /// assert!(matches!(joined.quiesce(), Err(BiError::NotRunner { node: 1 })));
    /// ```
    pub fn join(
        view: V,
        layout: Layout,
        node: usize,
        config: RuntimeConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, BiError> {
        NodeRuntime::start(view, layout, node, config, clock, true)
    }

    fn start(
        view: V,
        layout: Layout,
        node: usize,
        config: RuntimeConfig,
        clock: Arc<dyn Clock>,
        join: bool,
    ) -> Result<Self, BiError> {
        config.validate()?;
        let line = layout.line_size();
        if line != view.line_size() || line.get() < 32 {
            return Err(BiError::BadConfig {
                reason: "view and layout must agree on a line size of at least 32 bytes",
            });
        }
        let heap = layout.heap();
        let heap_end = heap.offset.checked_add(heap.len);
        if view.size() < layout.size() || heap_end.is_none_or(|end| end > view.size()) {
            // The validated read skips the view's own bounds check for an object inside
            // the heap (`object::copy_stamped`): the heap must lie inside the view.
            return Err(BiError::BadConfig {
                reason: "the view is smaller than the region layout",
            });
        }
        let rec = layout
            .node_record(node)
            .ok_or_else(|| BiError::BadNode { node })?;
        let nodes = layout.config().nodes() as usize;
        let ordering = match config.ordering {
            // The runner's barrier reaches no other process: a joined one fences.
            ReaderOrdering::Membarrier if join => ReaderOrdering::Fence,
            ReaderOrdering::Membarrier if membarrier::register() => ReaderOrdering::Membarrier,
            ReaderOrdering::Membarrier => ReaderOrdering::Fence,
            o => o,
        };
        let token = claim::new_token();
        // No later than the heartbeat the claim writes.
        let claimed_at = clock.refresh();
        let share_at = rec.offset + share::SHARE_SLOT * layout.slot_size();
        let prev = if join {
            share::join(
                &view,
                rec.offset,
                share_at,
                node,
                || clock.refresh(),
                &config,
            )?
        } else {
            let prev = claim::claim(
                &view,
                rec.offset,
                node,
                token,
                || clock.refresh(),
                |holder| share::runner_presence(&view, share_at, holder, &config),
                &config,
            )?;
            let shared: share::ShareRecord = view.load_from_memory(share_at)?;
            let mine = share::ShareRecord::of_this_process(token, shared.joined);
            view.store_to_memory(share_at, &mine)?;
            prev
        };
        let inner = NodeInner {
            token: if join { 0 } else { token },
            reader_holder: reader_state::ReaderHolder::new(std::process::id(), token),
            joined: join,
            line: line.get(),
            layout,
            node,
            nodes,
            fence_on_enter: ordering == ReaderOrdering::Fence,
            membarrier: ordering == ReaderOrdering::Membarrier,
            ordering,
            clock,
            registered: AtomicUsize::new(0),
            writer_taken: AtomicUsize::new(0),
            heartbeat: AtomicU64::new(claimed_at),
            lapsed: AtomicBool::new(false),
            roles: Mutex::new(Vec::new()),
            any_lost: AtomicBool::new(false),
            lock_threads: Mutex::new(()),
            scopes: scope::ScopeSet::new(),
            pass: Mutex::new(PassState::new(nodes, Policy::Accessed, prev)),
            stats: Stats::default(),
            config,
            view,
        };
        let inner = Arc::new(inner);
        if join {
            // After the joined flag (`share::join`): what passes skipped before it.
            pass::invalidate_everything(&inner)?;
            inner.view.fence();
        }
        Ok(NodeRuntime { inner })
    }

    /// This node's index.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(3, 1);
    /// let ids: Vec<usize> = s.nodes.iter().map(|n| n.node()).collect();
    /// assert_eq!(ids, [0, 1, 2]);
    /// ```
    pub fn node(&self) -> usize {
        self.inner.node
    }

    /// The view.
    ///
    /// ```
    /// use bi_core::mem::MemView;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 1);
    /// let view = s.nodes[1].view();
    /// assert_eq!(view.line_size(), s.region.layout().line_size());
    /// assert!(view.size() >= s.region.layout().size());
    /// ```
    pub fn view(&self) -> &V {
        &self.inner.view
    }

    /// The region layout.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 1);
    /// assert_eq!(s.nodes[0].layout(), s.region.layout());
    /// assert_eq!(s.nodes[0].layout().config().nodes(), 2);
    /// ```
    pub fn layout(&self) -> &Layout {
        &self.inner.layout
    }

    /// The configuration.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 1); // leases of a million ticks
    /// assert_eq!(s.nodes[0].config().node_lease_ticks(), 1_000_000);
    /// assert_eq!(s.nodes[0].config().skew_bound(), 0);
    /// ```
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// The ordering readers actually use (after a membarrier fallback).
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig};
    /// use bi_core::runtime::testing::Setup;
    /// use bi_core::runtime::{NodeRuntime, ReaderOrdering, RuntimeConfig, TickClock};
    /// use std::sync::Arc;
    ///
    /// assert_eq!(Setup::new(1, 0).nodes[0].reader_ordering(), ReaderOrdering::Emulated);
    /// let region = Region::anonymous(RegionConfig::new(1 << 20)).unwrap();
    /// let rt = NodeRuntime::new(region.hardware(), *region.layout(), 0, RuntimeConfig::default(),
    ///     Arc::new(TickClock::new())).unwrap();
    /// // Membarrier where the kernel allows it, a fence otherwise.
    /// assert_ne!(rt.reader_ordering(), ReaderOrdering::Emulated);
    /// ```
    pub fn reader_ordering(&self) -> ReaderOrdering {
        self.inner.ordering
    }

    /// This node's clock.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 1);
    /// let before = s.nodes[1].clock().refresh();
    /// s.emu.advance(100);
    /// assert!(s.nodes[1].clock().refresh() >= before + 100);
    /// ```
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// Reads that failed validation once (and were retried after invalidating), so far.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 1);
    /// let mut w = s.writer(0);
    /// let b = w.alloc(5u64).unwrap();
    /// w.publish(s.slot(0), b).unwrap();
    /// s.quiesce_all().unwrap();
    /// let r = s.nodes[1].reader().unwrap();
    /// assert_eq!(*r.enter().load::<u64>(s.slot(0)).unwrap().unwrap(), 5);
    /// assert_eq!(s.nodes[1].mismatches(), 0); // the pass dropped every stale line
    /// ```
    pub fn mismatches(&self) -> u64 {
        self.inner.stats.mismatches.load(Ordering::Relaxed)
    }

    /// The longest time this process's writer took, since the last call, from an
    /// update's first store to a line other nodes may hold (a root slot, a line rewritten
    /// in place, the FREED marks of a retired bag) to the log append that tells their
    /// passes. A read on another node may
    /// see the old line that long on top of the staleness bound, which counts from the
    /// append: on a loaded machine a writer descheduled between the two lengthens it.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let b = w.alloc(5u64).unwrap();
    /// w.publish(s.slot(0), b).unwrap();
    /// let span = s.nodes[0].take_longest_publish_span();
    /// assert!(span > Duration::ZERO && span < Duration::from_secs(60));
    /// assert_eq!(s.nodes[0].take_longest_publish_span(), Duration::ZERO); // taken
    /// ```
    pub fn take_longest_publish_span(&self) -> std::time::Duration {
        let span = self.inner.stats.publish_span.swap(0, Ordering::Relaxed);
        std::time::Duration::from_nanos(span)
    }

    /// Replaces the quiescence policy.
    ///
    /// ```
    /// use bi_core::runtime::{Policy, testing::Setup};
    ///
    /// let s = Setup::new(2, 1);
    /// s.nodes[1].set_policy(Policy::Everything);
    /// let mut w = s.writer(0);
    /// let b = w.alloc(9u64).unwrap();
    /// w.publish(s.slot(0), b).unwrap();
    /// s.quiesce_all().unwrap();
    /// let r = s.nodes[1].reader().unwrap(); // declared no structure: still fresh
    /// assert_eq!(*r.enter().load::<u64>(s.slot(0)).unwrap().unwrap(), 9);
    /// ```
    pub fn set_policy(&self, policy: Policy<V>) {
        self.inner.lock_pass().policy = policy;
    }

    /// Pending groups of freed objects waiting for their second invalidation.
    #[cfg(test)]
    pub(crate) fn pending_groups(&self) -> usize {
        self.inner.lock_pass().pending_groups()
    }

    /// Registers a reader: claims a free reader record of this node.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 1);
    /// let a = s.nodes[1].reader().unwrap();
    /// let b = s.nodes[1].reader().unwrap();
    /// assert_ne!(a.index(), b.index());
    /// let freed = a.index();
    /// drop(a); // its record is free again
    /// assert_eq!(s.nodes[1].reader().unwrap().index(), freed);
    /// ```
    pub fn reader(&self) -> Result<Reader<V>, BiError> {
        let index = share::take_reader_record(&self.inner, self.inner.reader_holder)?;
        let record = self.inner.reader_record(index)?;
        self.inner.view.store(record, &[0u64, 0u64])?;
        // SeqCst, and before the reader can enter: a pass that still counts no reader
        // (and so skips membarrier) is ordered before every load this reader makes.
        self.inner.registered.fetch_add(1, Ordering::SeqCst);
        Ok(Reader::new(self.inner.clone(), index, record))
    }

    /// The node's writer, owning `heap` (this node's arena). One at a time per node.
    ///
    /// ```
    /// use bi_core::heap::BumpHeap;
    /// use bi_core::runtime::{BiError, testing::Setup};
    ///
    /// let s = Setup::new(2, 1);
    /// let line = s.region.layout().line_size();
    /// let w = s.nodes[0].writer(BumpHeap::new(s.arena(0), line).unwrap()).unwrap();
    /// let second = s.nodes[0].writer(BumpHeap::new(s.arena(0), line).unwrap());
    /// assert!(matches!(second, Err(BiError::WriterTaken { node: 0 })));
    /// drop(w);
    /// assert!(s.nodes[0].writer(BumpHeap::new(s.arena(0), line).unwrap()).is_ok());
    /// ```
    pub fn writer<H: Heap>(&self, heap: H) -> Result<Writer<V, H>, BiError> {
        self.inner.check_runner()?;
        if self
            .inner
            .writer_taken
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(BiError::WriterTaken {
                node: self.inner.node,
            });
        }
        Writer::new(self.inner.clone(), heap).inspect_err(|_| self.inner.release_writer())
    }

    /// Declares that readers of this node read the structure of `scope` (its root slot's
    /// [`Scope::of_slot`]). Under [`Policy::Accessed`] a pass skips what writers logged
    /// for structures no reader here declared; the first declaration of a scope drops
    /// every line this node caches of the heap and the root directory (once per scope
    /// for the life of the runtime: the cost of reading a structure whose notices were
    /// skipped). Returns whether this was the first declaration. The collections' read
    /// handles declare their structure; code that reads slots with a bare [`Reader`]
    /// declares what it reads (or logs under [`Scope::ALL`]).
    ///
    /// ```
    /// use bi_core::runtime::{Scope, testing::Setup};
    ///
    /// let s = Setup::new(2, 1);
    /// let scope = Scope::of_slot(s.slot(0));
    /// assert!(s.nodes[1].use_scope(scope).unwrap());
    /// assert!(!s.nodes[1].use_scope(scope).unwrap());
    /// ```
    pub fn use_scope(&self, scope: Scope) -> Result<bool, BiError> {
        pass::declare_scope(&self.inner, scope)
    }

    /// Takes the pool lock ([`lock`]): mutual exclusion with every other node of the
    /// region whose lease is live, waiting at most `timeout` ([`BiError::LockTimeout`]).
    /// Dropping the guard unlocks.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(2, 1);
    /// let guard = s.nodes[0].lock(Duration::from_secs(1)).unwrap();
    /// guard.check().unwrap();
    /// // Node 1 waits for node 0, and gives up after its timeout.
    /// assert!(s.nodes[1].lock(Duration::from_millis(10)).is_err());
    /// drop(guard);
    /// assert!(s.nodes[1].lock(Duration::from_millis(10)).is_ok());
    /// ```
    pub fn lock(&self, timeout: Duration) -> Result<PoolLockGuard<'_, V>, BiError> {
        self.inner.check_runner()?;
        lock::lock(&self.inner, timeout)
    }

    /// Whether the named structure whose slot is at `slot` has a writer now (this
    /// process, or another whose node's lease runs), read from memory without the pool
    /// lock: a process that sends its writes to another can tell that it is gone and
    /// take the role ([`take_writer_role`](Self::take_writer_role)) instead of waiting.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(2, 1);
    /// let (slot, _) = s.region.structure(s.nodes[0].view(), "orders", 7, true).unwrap().unwrap();
    /// assert!(!s.nodes[1].writer_held(slot).unwrap()); // never written
    /// let role = s.nodes[0].take_writer_role(slot, Duration::from_secs(1)).unwrap();
    /// assert!(s.nodes[1].writer_held(slot).unwrap());
    /// drop(role);
    /// assert!(!s.nodes[1].writer_held(slot).unwrap());
    /// ```
    pub fn writer_held(&self, slot: usize) -> Result<bool, BiError> {
        role::held(&self.inner, slot)
    }

    /// Whether the writer of the structure whose slot is at `slot` is certainly gone: its
    /// process is gone from this host (the kernel says so) while its node still names it,
    /// or nobody holds the role though `seen` keeps a holder found before (it gave the
    /// role up). `seen` starts at 0 and keeps the last holder found. `false` does not say
    /// a writer lives: a lapsed lease is not certain enough here
    /// ([`writer_held`](Self::writer_held) judges that). What a remote write can look at
    /// while it waits, to stop waiting for a writer that is not coming back
    /// (bi-collections' `DelegationClient::watch_server`).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(2, 1);
    /// let (slot, _) = s.region.structure(s.nodes[0].view(), "orders", 7, true).unwrap().unwrap();
    /// let mut seen = 0;
    /// assert!(!s.nodes[1].writer_certainly_gone(slot, &mut seen).unwrap()); // its first writer may be coming
    /// let role = s.nodes[0].take_writer_role(slot, Duration::from_secs(1)).unwrap();
    /// assert!(!s.nodes[1].writer_certainly_gone(slot, &mut seen).unwrap());
    /// assert_ne!(seen, 0);
    /// drop(role); // gives the role up
    /// assert!(s.nodes[1].writer_certainly_gone(slot, &mut seen).unwrap());
    /// ```
    pub fn writer_certainly_gone(&self, slot: usize, seen: &mut u64) -> Result<bool, BiError> {
        role::certainly_gone(&self.inner, slot, seen)
    }

    /// Whether memory names this process as the writer of the structure whose slot is
    /// at `slot`: false once another process took the role (this one stalled past its
    /// lease), or before this one took it.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(2, 1);
    /// assert!(!s.nodes[0].holds_writer_role(s.slot(0)).unwrap());
    /// let role = s.nodes[0].take_writer_role(s.slot(0), Duration::from_secs(1)).unwrap();
    /// assert!(s.nodes[0].holds_writer_role(s.slot(0)).unwrap());
    /// assert!(!s.nodes[1].holds_writer_role(s.slot(0)).unwrap());
    /// drop(role);
    /// assert!(!s.nodes[0].holds_writer_role(s.slot(0)).unwrap());
    /// ```
    pub fn holds_writer_role(&self, slot: usize) -> Result<bool, BiError> {
        role::mine(&self.inner, slot)
    }

    /// Takes the writer role of the named structure whose slot is at `slot` ([`role`]),
    /// under the pool lock (waiting at most `timeout` for it). A writer that is still
    /// alive (in this process or another) makes it [`BiError::WriterAlive`].
    ///
    /// ```
    /// use bi_core::runtime::{BiError, testing::Setup};
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(2, 1);
    /// let (slot, _) = s.region.structure(s.nodes[0].view(), "orders", 7, true).unwrap().unwrap();
    /// let role = s.nodes[0].take_writer_role(slot, Duration::from_secs(1)).unwrap();
    /// assert_eq!(role.previous().takes, 0); // a new structure
    /// assert!(matches!(
    ///     s.nodes[1].take_writer_role(slot, Duration::from_secs(1)),
    ///     Err(BiError::WriterAlive { node: 0 })
    /// ));
    /// drop(role); // gives the role up
    /// let role = s.nodes[1].take_writer_role(slot, Duration::from_secs(1)).unwrap();
    /// assert_eq!(role.previous().takes, 1); // written before: adopt it
    /// ```
    pub fn take_writer_role(&self, slot: usize, timeout: Duration) -> Result<Role<V>, BiError> {
        role::take(&self.inner, slot, timeout)
    }

    /// Whether this process joined its node rather than running it ([`join`](Self::join)).
    ///
    /// ```
    /// use bi_core::runtime::{NodeRuntime, RuntimeConfig, testing::Setup};
    ///
    /// let s = Setup::new(2, 1);
    /// assert!(!s.nodes[1].is_joined());
    /// s.nodes[1].quiesce().unwrap();
    /// let layout = *s.region.layout();
    /// let config = RuntimeConfig::default();
    /// let j = NodeRuntime::emulated_join(s.emu.node(1), layout, config).unwrap();
    /// assert!(j.is_joined());
    /// ```
    pub fn is_joined(&self) -> bool {
        self.inner.joined
    }

    /// Whether memory still names this runtime as the process running its node
    /// ([`claim`]): `false` once another process claimed the node.
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig};
    /// use bi_core::runtime::{NodeRuntime, RuntimeConfig, TickClock};
    /// use std::sync::Arc;
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 20)).unwrap();
    /// let rt = NodeRuntime::new(region.hardware(), *region.layout(), 1, RuntimeConfig::default(),
    ///     Arc::new(TickClock::new())).unwrap();
    /// assert!(rt.holds_claim().unwrap());
    /// ```
    pub fn holds_claim(&self) -> Result<bool, BiError> {
        match self.inner.claimed().check() {
            Ok(()) => Ok(true),
            Err(BiError::NodeTaken { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Runs one quiescence pass now.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 1);
    /// let mut w = s.writer(0);
    /// let b = w.alloc(1u64).unwrap();
    /// w.publish(s.slot(0), b).unwrap();
    /// let first = s.nodes[1].quiesce().unwrap();
    /// assert_eq!(first.pass, 1);
    /// assert!(first.whole_heap); // a first pass drops everything
    /// let second = s.nodes[1].quiesce().unwrap();
    /// assert_eq!(second.pass, 2);
    /// assert!(!second.whole_heap && second.start >= first.end);
    /// ```
    pub fn quiesce(&self) -> Result<PassReport, BiError> {
        self.inner.check_runner()?;
        pass::quiesce(&self.inner)
    }

    /// This node's published record, as in memory.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 1);
    /// assert_eq!(s.nodes[0].record().unwrap().passes, 0);
    /// let rep = s.nodes[0].quiesce().unwrap();
    /// let rec = s.nodes[0].record().unwrap();
    /// assert_eq!((rec.passes, rec.start, rec.end), (1, rep.start, rep.end));
    /// assert_ne!(rec.holder, 0); // the claim of the process running it
    /// ```
    pub fn record(&self) -> Result<NodeRecord, BiError> {
        Ok(self.inner.view.load(self.inner.node_record_at())?)
    }

    /// What this node's last pass published beside its record ([`NodeFigures`]).
    pub fn figures(&self) -> Result<NodeFigures, BiError> {
        let at = self.inner.node_record_at() + pass::FIGURES_SLOT * self.inner.layout.slot_size();
        Ok(self.inner.view.load(at)?)
    }
}

impl<V: MemView + 'static> NodeRuntime<V> {
    /// Starts a thread that runs a pass every `period` ([`DEFAULT_PASS_PERIOD`] is the
    /// usual choice).
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig};
    /// use bi_core::runtime::{NodeRuntime, RuntimeConfig, TickClock};
    /// use std::{sync::Arc, time::Duration};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 20)).unwrap();
    /// let rt = NodeRuntime::new(region.hardware(), *region.layout(), 0, RuntimeConfig::default(),
    ///     Arc::new(TickClock::new())).unwrap();
    /// let bg = rt.start_background(Duration::from_millis(1));
    /// while bg.passes() < 2 {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// assert_eq!(bg.stop(), 0); // no pass failed
    /// assert!(rt.record().unwrap().passes >= 2);
    /// ```
    pub fn start_background(&self, period: Duration) -> Background {
        Background::start(self.inner.clone(), period)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Setup;
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test, minutes interpreted: its object copies run in others"
    )]
    fn publish_retire_reclaim_cycle_under_the_emulator() {
        let s = Setup::new(2, 9);
        let mut w = s.writer(0);
        let r = s.nodes[1].reader().unwrap();
        for v in 1..=6u64 {
            let b = w.alloc([v; 5]).unwrap();
            let old = w.publish(s.slot(1), b).unwrap();
            if !old.is_null() {
                w.retire(old).unwrap();
            }
            s.quiesce_all().unwrap();
            let g = r.enter();
            assert_eq!(*g.load::<[u64; 5]>(s.slot(1)).unwrap().unwrap(), [v; 5]);
            drop(g);
            w.reclaim().unwrap();
        }
        s.quiesce_all().unwrap();
        s.quiesce_all().unwrap();
        let rep = w.reclaim().unwrap();
        assert_eq!(w.retired_blocks(), 0, "{rep:?}");
        assert_eq!(s.emu.total_stats().reuse_hazards, 0);
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        let s = Setup::new(2, 0);
        let mut w = s.writer(0);
        assert!(matches!(
            s.nodes[0]
                .writer(crate::heap::BumpHeap::new(0..64, s.region.layout().line_size()).unwrap()),
            Err(BiError::WriterTaken { node: 0 })
        ));
        let b = w.alloc(1u64).unwrap();
        let header = s.region.layout().header().offset;
        assert!(matches!(
            w.try_publish(header, b),
            Err(Unpublished {
                error: BiError::OutOfSection { .. },
                ..
            })
        ));
        let r = s.nodes[1].reader().unwrap();
        let g = r.enter();
        assert!(g.load::<u64>(3).is_err()); // misaligned slot
        let wild: Link<u64> = Link::new(s.region.layout().size() - 8, LinkGeneration::new(1));
        assert!(matches!(g.follow(wild), Err(BiError::OutOfSection { .. })));
        assert!(w.retire(wild).is_err());
        let b = w.alloc(2u64).unwrap();
        let l = b.link();
        w.publish(s.slot(0), b).unwrap();
        w.retire(l).unwrap();
        assert!(matches!(w.retire(l), Err(BiError::AlreadyRetired { .. })));
        assert!(
            NodeRuntime::emulated(
                s.emu.node(0),
                *s.region.layout(),
                RuntimeConfig::default().node_lease(0)
            )
            .is_err()
        );
        let many: Vec<_> = (0..16).map(|_| s.nodes[1].reader()).collect();
        assert!(
            many.iter()
                .any(|r| matches!(r, Err(BiError::NoReaderSlot { node: 1 })))
        );
    }

    #[test]
    fn a_box_changed_before_publication_is_published_under_its_announced_link() {
        let s = Setup::new(2, 4);
        let mut w = s.writer(0);
        let mut b = w.alloc([1u64; 9]).unwrap();
        let first = b.link();
        b.set([2; 9]);
        let announced = b.link();
        assert_ne!(first, announced);
        w.publish(s.slot(0), b).unwrap();
        s.quiesce_all().unwrap();
        let r = s.nodes[1].reader().unwrap();
        let g = r.enter();
        let v = g.load::<[u64; 9]>(s.slot(0)).unwrap().unwrap();
        assert_eq!((*v, v.link()), ([2; 9], announced));
        assert!(
            g.follow(first).is_err(),
            "the first version's link matches nothing"
        );
        drop(g);
        w.retire(announced).unwrap();
    }

    #[test]
    fn callback_and_everything_policies_run() {
        use std::sync::atomic::AtomicUsize;
        let s = Setup::new(2, 2);
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        s.nodes[1].set_policy(Policy::Callback(Arc::new(move |_v| {
            c.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })));
        s.nodes[0].set_policy(Policy::Everything);
        let mut w = s.writer(0);
        let b = w.alloc(3u64).unwrap();
        w.publish(s.slot(0), b).unwrap();
        s.quiesce_all().unwrap();
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        let r = s.nodes[0].reader().unwrap();
        assert_eq!(*r.enter().load::<u64>(s.slot(0)).unwrap().unwrap(), 3);
    }
}

/// Examples of the crate-private items above, as tests.
#[cfg(test)]
mod private_examples {
    #[test]
    fn pending_groups_example() {
        use crate::runtime::testing::Setup;

        let s = Setup::new(1, 1);
        let mut w = s.writer(0);
        s.nodes[0].quiesce().unwrap(); // a first pass drops everything: one group
        s.nodes[0].quiesce().unwrap(); // which this one drains
        assert_eq!(s.nodes[0].pending_groups(), 0);
        let old = w.alloc_sealed(1u64).unwrap();
        w.publish_link(s.slot(0), old).unwrap();
        let new = w.alloc_sealed(2u64).unwrap();
        w.publish_link(s.slot(0), new).unwrap();
        w.retire(old).unwrap();
        assert_eq!(s.nodes[0].pending_groups(), 0);
        s.nodes[0].quiesce().unwrap(); // reads the retirement: one group
        assert_eq!(s.nodes[0].pending_groups(), 1);
        s.nodes[0].quiesce().unwrap(); // no reader was inside: drained
        assert_eq!(s.nodes[0].pending_groups(), 0);
    }
}
