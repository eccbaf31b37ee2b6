//! The quiescence pass of one node.
//!
//! See the [module docs](crate::runtime) for the argument; this file is its steps, one
//! function each, in the order `quiesce` calls them:
//!
//! 1. `order_readers`: order every reader's "inside" store before what follows
//!    (membarrier, when the node has a registered reader), `S := now`;
//! 2. `scan_readers`: scan this node's reader records: the oldest enter tick among active
//!    readers within their lease, and the expired ones (excluded, reported);
//! 3. `read_logs`: for each writer, read the freed tail, *then* invalidate and read the
//!    modified tail (an unlink is logged before the retire, so it is seen no later),
//!    invalidate and read the new entries; this node's own writer's entries are only
//!    counted (its lines are never stale here), but its retirements still make a pending
//!    group;
//! 4. `invalidate_logged`: invalidate modified slots (policy) and freed objects, under
//!    [`Policy::Accessed`] only those of structures this node's readers declared
//!    ([`scope`](crate::runtime::scope)); the freed ones become a pending group tagged
//!    with this pass;
//! 5. `drain`: a group of pass `k` whose every still-active reader entered after `E_k` is
//!    invalidated once more (lines a reader re-fetched after pass `k` are dropped) and
//!    forgotten; the reclaim point becomes the start of the last pass all of whose groups
//!    (and all earlier ones) are drained;
//! 6. the policy's extras (everything, callback);
//! 7. `publish_record`: one fence, `E := now`, publish the node record, write it back,
//!    fence; then `drop_all_if_excluded`: if a writer may have excluded this node
//!    meanwhile (lease), or on the node's first pass, invalidate the whole heap.
//!
//! # What a pass costs
//!
//! - one `membarrier` if the node has a registered reader (an interrupt to every CPU
//!   running a thread of the process: a few microseconds, more in a VM), one fence
//!   otherwise;
//! - one load per reader record of the node;
//! - per other node: two tail lines invalidated and read (two fences), the new ring
//!   entries invalidated and read (one fence), then one invalidation per logged line
//!   (slots, tracked objects, freed objects) and, once its readers have left, a second
//!   one per freed line; the node's own writer costs two loads;
//! - one write-back and fence of the node record.
//!
//! So a pass costs `O(nodes + readers + entries the other nodes' writers logged since the
//! last pass)` loads and `O(lines logged for the structures this node's readers read)`
//! invalidations, whatever the size of the structures. A node whose readers only read
//! structures written on their own node invalidates nothing, and a structure whose
//! readers all sit on its writer's node costs the other nodes one load per entry.

use crate::mem::MemView;
use crate::primitive::sync::atomic::Ordering;
use crate::region::RingKind;
use crate::runtime::config::Policy;
use crate::runtime::fault::Fault;
use crate::runtime::pass_state::{Group, Items, PassState};
use crate::runtime::reader_state::ReaderState;
use crate::runtime::record::{NodeRecord, covers};
use crate::runtime::ring::{LogEntry, RingGeom, read_entries};
use crate::runtime::scope::Scope;
use crate::runtime::share::keep_naming_runner;
use crate::runtime::{BiError, NodeInner};
use bytemuck::{Pod, Zeroable};

/// What one pass did.
///
/// ```
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// s.quiesce_all().unwrap();
/// let mut w = s.writer(0);
/// let old = w.alloc_sealed(1u64).unwrap();
/// w.publish_link(s.slot(0), old).unwrap();
/// let new = w.alloc_sealed(2u64).unwrap();
/// w.publish_link(s.slot(0), new).unwrap();
/// w.retire(old).unwrap();
/// let rep = s.nodes[1].quiesce().unwrap();
/// assert_eq!(rep.pass, 2);
/// assert_eq!(rep.freed, 1); // the retired object
/// assert!(rep.modified >= 2); // the slot, twice, and the objects
/// assert!(!rep.overflow && rep.expired_readers.is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Pass number (1 for the first).
    pub pass: u64,
    /// Start tick `S`.
    pub start: u64,
    /// End tick `E`.
    pub end: u64,
    /// The reclaim point published.
    pub reclaim_point: u64,
    /// Modified entries consumed.
    pub modified: usize,
    /// Freed entries consumed.
    pub freed: usize,
    /// Entries of other nodes skipped because no reader of this node declared their
    /// structure ([`Policy::Accessed`]).
    pub skipped: usize,
    /// Pending groups drained (invalidated a second time and forgotten).
    pub drained: usize,
    /// Groups still pending.
    pub pending: usize,
    /// Readers excluded because their lease expired (indices within this node).
    pub expired_readers: Vec<usize>,
    /// A ring had more unread entries than it holds: the whole heap was invalidated.
    pub overflow: bool,
    /// This node may have been excluded by a writer (its own lease lapsed), or it is its
    /// first pass: the whole heap was invalidated.
    pub whole_heap: bool,
    /// The pass ordered the readers with `membarrier` (membarrier ordering, and a reader
    /// registered on the node).
    pub barrier: bool,
    /// Lines the pass invalidated (log entries, drained groups, a whole heap).
    pub invalidated_lines: usize,
}

/// Where a node record keeps its [`NodeFigures`]: the slot after the pool lock's and the
/// share record's.
pub const FIGURES_SLOT: usize = 3;

/// What a node's process publishes about its work beside the node record (slot
/// [`FIGURES_SLOT`]), for inspection tools and gauges: written back by
/// every pass, read by nothing the protocol depends on. The totals count from the
/// moment the running process claimed the node.
///
/// ```
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 1);
/// let _reader = s.nodes[1].reader().unwrap();
/// s.nodes[1].quiesce().unwrap(); // a first pass drops the whole heap
/// let f = s.nodes[1].figures().unwrap();
/// assert_eq!(f.readers, 1);
/// let r = s.nodes[1].record().unwrap();
/// assert!(f.invalidated_lines > 0);
/// assert_eq!(f.longest_pass, r.end - r.start); // one pass so far
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct NodeFigures {
    /// The longest pass, in clock ticks (nanoseconds).
    pub longest_pass: u64,
    /// Lines the passes invalidated, in total.
    pub invalidated_lines: u64,
    /// Readers registered in the running process at its last pass.
    pub readers: u64,
    /// Bytes the node's writer retired and has not given back to the heap yet.
    pub retired_bytes: u64,
    /// Entries of the node's modified ring not yet known to be consumed by every node.
    pub modified_in_flight: u64,
    /// The same for the freed ring (each ring holds
    /// [`RegionConfig::log_ring_entries`](crate::region::RegionConfig::log_ring_entries)).
    pub freed_in_flight: u64,
    /// The slot of the structure the node's writer last wrote (0: none).
    pub structure: u64,
    /// The entries that writer last noted for it
    /// ([`Writer::note_entries`](crate::runtime::Writer::note_entries)).
    pub entries: u64,
}

/// Drops this node's copies of the root directory and of the heap: every line of it, or
/// only the extents the table marks granted ([`RuntimeConfig::extents_only`]). Returns
/// the bytes dropped.
///
/// [`RuntimeConfig::extents_only`]: crate::runtime::RuntimeConfig::extents_only
pub(crate) fn invalidate_everything<V: MemView>(inner: &NodeInner<V>) -> Result<usize, BiError> {
    let layout = &inner.layout;
    let dir = layout.root_directory();
    inner.view.invalidate(dir.offset, dir.len)?;
    if !inner.config.extents_only {
        let heap = layout.heap();
        inner.view.invalidate(heap.offset, heap.len)?;
        return Ok(dir.len + heap.len);
    }
    // The table as memory has it now: an extent granted later was never written before.
    let table = layout.extent_table();
    if !inner.config.faults.has(Fault::ExtentTableRead) {
        inner.view.invalidate(table.offset, table.len)?;
        inner.view.fence();
    }
    let mut dropped = dir.len;
    let mut run: Option<(usize, usize)> = None;
    for i in 0..layout.extents() {
        let owner = inner.view.load_u64(table.offset + 8 * i)?;
        let Some(extent) = layout.extent(i).filter(|_| owner != 0) else {
            continue;
        };
        dropped += extent.len;
        run = match run {
            Some((at, len)) if at + len == extent.offset => Some((at, len + extent.len)),
            Some((at, len)) => {
                inner.view.invalidate(at, len)?;
                Some((extent.offset, extent.len))
            }
            None => Some((extent.offset, extent.len)),
        };
    }
    if let Some((at, len)) = run {
        inner.view.invalidate(at, len)?;
    }
    Ok(dropped)
}

/// Drops a group's lines; returns the bytes dropped.
fn invalidate_items<V: MemView>(inner: &NodeInner<V>, items: &Items) -> Result<usize, BiError> {
    match items {
        Items::Everything => invalidate_everything(inner),
        Items::Ranges(r) => {
            for &(at, len) in r {
                inner.view.invalidate(at, len)?;
            }
            Ok(r.iter().map(|&(_, len)| len).sum())
        }
    }
}

/// The range an entry covers, if it lies in the region (a torn or foreign entry is
/// skipped: it can only come from a ring this node fell behind on, which the whole-heap
/// path covers).
fn entry_range<V: MemView>(inner: &NodeInner<V>, e: &LogEntry) -> Option<(usize, usize)> {
    let len = e.lines().checked_mul(inner.line)?;
    let (at, l) = (e.offset(), &inner.layout);
    (len > 0 && (l.heap().contains(at, len) || l.root_directory().contains(at, len)))
        .then_some((at, len))
}

/// Runs one pass of `inner`'s node: the steps of the module docs, one function each.
pub(crate) fn quiesce<V: MemView>(inner: &NodeInner<V>) -> Result<PassReport, BiError> {
    let mut st = inner.lock_pass();
    let st = &mut *st;
    let barrier = order_readers(inner);
    let start = inner.clock.refresh();
    let (oldest, expired_readers) = scan_readers(inner, start)?;
    let mut report = PassReport {
        pass: st.passes + 1,
        start,
        expired_readers,
        barrier,
        ..PassReport::default()
    };
    let logged = read_logs(inner, st, &mut report)?;
    let mut dropped = invalidate_logged(inner, &logged, report.overflow)?;
    dropped += drain(inner, st, oldest, &mut report)?;
    let group = if report.overflow {
        Some(Items::Everything)
    } else if !logged.freed.is_empty() || logged.own_freed {
        Some(Items::Ranges(logged.freed))
    } else {
        None
    };
    dropped += match &st.policy {
        Policy::Accessed | Policy::Modified => 0,
        Policy::Everything => invalidate_everything(inner)?,
        Policy::Callback(f) => f(&inner.view).map(|()| 0)?,
    };
    let end = publish_record(inner, st, &mut report, group)?;
    dropped += drop_all_if_excluded(inner, st, end, &mut report)?;
    st.first = false;
    report.invalidated_lines = dropped / inner.line;
    st.invalidated_lines += report.invalidated_lines as u64;
    st.longest = st.longest.max(end.saturating_sub(start));
    publish_figures(inner, st)?;
    inner.view.fence();
    st.passes = report.pass;
    st.last_start = start;
    st.reclaim = report.reclaim_point;
    st.heartbeat = end;
    report.end = end;
    report.pending = st.pending.len();
    Ok(report)
}

/// Step 1: orders every reader's "inside" store before what the pass reads next. Returns
/// whether it took a `membarrier` (with no registered reader there is nothing to order
/// against: see the module docs' "Reader ordering").
fn order_readers<V: MemView>(inner: &NodeInner<V>) -> bool {
    let barrier = inner.membarrier && inner.registered.load(Ordering::SeqCst) > 0;
    if barrier {
        crate::runtime::membarrier::barrier();
    } else {
        // Pairs with the reader's fence (Fence ordering) or the emulator's lock.
        crate::primitive::sync::atomic::fence(Ordering::SeqCst);
    }
    barrier
}

/// Step 2: the oldest enter tick among this node's readers inside their lease at `start`,
/// and the readers whose lease expired (excluded).
fn scan_readers<V: MemView>(
    inner: &NodeInner<V>,
    start: u64,
) -> Result<(u64, Vec<usize>), BiError> {
    let cfg = &inner.config;
    let mut oldest = u64::MAX;
    let mut expired_readers = Vec::new();
    let per_node = inner.layout.config().readers_per_node() as usize;
    for r in 0..per_node {
        let at = inner.reader_record(r)?;
        if let Some(entered) = ReaderState::from_raw(inner.view.load_u64(at)?).enter_tick() {
            let expired = entered.saturating_add(cfg.reader_lease) < start;
            if expired && !cfg.faults.has(Fault::ReaderLease) {
                expired_readers.push(r);
            } else {
                oldest = oldest.min(entered);
            }
        }
    }
    Ok((oldest, expired_readers))
}

/// What the other nodes' writers logged since the last pass, as ranges to drop.
#[derive(Default)]
struct Logged {
    /// Lines of modified entries (slots and tracked objects).
    modified: Vec<(usize, usize)>,
    /// Lines of freed entries: dropped now, and again once the readers inside have left.
    freed: Vec<(usize, usize)>,
    /// This node's own writer retired something: its lines cannot be stale here (it
    /// wrote them through this node's cache), but this node's readers must still leave
    /// before the memory is reused, so the pass makes a group of it.
    own_freed: bool,
}

/// Step 3: reads every node's freed tail, *then* its modified tail (an unlink is logged
/// before the retire, so it is seen no later), and the entries up to them; this node's
/// own writer's entries are only counted.
fn read_logs<V: MemView>(
    inner: &NodeInner<V>,
    st: &mut PassState<V>,
    report: &mut PassReport,
) -> Result<Logged, BiError> {
    let view = &inner.view;
    let log_modified = matches!(st.policy, Policy::Accessed | Policy::Modified);
    let scoped = matches!(st.policy, Policy::Accessed);
    let mut logged = Logged::default();
    let mut entries = Vec::new();
    for w in 0..inner.nodes {
        let f = RingGeom::new(&inner.layout, w, RingKind::Freed)?;
        let m = RingGeom::new(&inner.layout, w, RingKind::Modified)?;
        let own = w == inner.node;
        // Another node's tail is read from memory; this node's own is current here.
        let read_tail = |at: usize| -> Result<u64, BiError> {
            if !own {
                view.invalidate(at, 8)?;
                view.fence();
            }
            Ok(view.load(at)?)
        };
        let tail_f = read_tail(f.tail_at)?;
        let tail_m = read_tail(m.tail_at)?;
        let mut todo = [(f, tail_f, 1usize), (m, tail_m, 0usize)];
        for (g, tail, k) in &mut todo {
            let next = st.next[w][*k];
            if *tail < next || *tail - next > g.capacity {
                report.overflow = true;
                st.next[w][*k] = *tail;
            } else if !own {
                for (at, len) in g.entry_ranges(next, *tail) {
                    if len > 0 {
                        view.invalidate(at, len)?;
                    }
                }
            }
        }
        if own {
            let (next_f, next_m) = (st.next[w][1], st.next[w][0]);
            // `tail >= next` here, or the overflow branch above moved `next` to `tail`.
            report.freed += (tail_f - next_f) as usize;
            report.modified += (tail_m - next_m) as usize;
            logged.own_freed |= tail_f != next_f;
            st.next[w] = [tail_m, tail_f];
            continue;
        }
        view.fence();
        // Structures a joined process of this node reads are not in `scopes`: with one
        // joined, nothing is skipped. Read after this ring's tail (see `share`).
        crate::primitive::sync::atomic::fence(Ordering::SeqCst);
        let scoped = scoped
            && (inner.config.faults.has(Fault::JoinedScopes)
                || !crate::runtime::share::joined(inner)?);
        for (g, tail, k) in todo {
            let next = st.next[w][k];
            if next == tail {
                continue;
            }
            entries.clear();
            read_entries(view, &g, next, tail, &mut entries)?;
            st.next[w][k] = tail;
            if k == 1 {
                report.freed += entries.len();
            } else {
                report.modified += entries.len();
                if !log_modified {
                    continue;
                }
            }
            // After the tails were read: see `scope` for why that order makes skipping
            // sound against a reader declaring the scope meanwhile.
            let into = if k == 1 {
                &mut logged.freed
            } else {
                &mut logged.modified
            };
            inner.scopes.with(|declared| {
                for e in &entries {
                    if scoped && !declared(e.scope()) {
                        report.skipped += 1;
                    } else if let Some(r) = entry_range(inner, e) {
                        into.push(r);
                    }
                }
            });
        }
    }
    Ok(logged)
}

/// Step 4: drops the logged lines (under [`Policy::Accessed`] only those of structures
/// this node's readers declared), or the whole heap if a ring overflowed. Returns the
/// bytes dropped.
fn invalidate_logged<V: MemView>(
    inner: &NodeInner<V>,
    logged: &Logged,
    overflow: bool,
) -> Result<usize, BiError> {
    let modified: &[(usize, usize)] = match inner.config.faults.has(Fault::LoggedSlots) {
        true => &[],
        false => &logged.modified,
    };
    let mut dropped = 0;
    for &(at, len) in modified.iter().chain(&logged.freed) {
        inner.view.invalidate(at, len)?;
        dropped += len;
    }
    if overflow {
        dropped += invalidate_everything(inner)?;
    }
    Ok(dropped)
}

/// Step 5: a group of pass `k` whose every reader still inside entered after `E_k` is
/// dropped once more (lines a reader fetched again after pass `k`) and forgotten; the
/// reclaim point then follows ([`publish_record`]). Returns the bytes dropped.
fn drain<V: MemView>(
    inner: &NodeInner<V>,
    st: &mut PassState<V>,
    oldest: u64,
    report: &mut PassReport,
) -> Result<usize, BiError> {
    let mut dropped = 0;
    while let Some(g) = st.pending.front().filter(|g| oldest > g.end) {
        if !inner.config.faults.has(Fault::SecondInvalidation) {
            dropped += invalidate_items(inner, &g.items)?;
        }
        st.pending.pop_front();
        report.drained += 1;
    }
    Ok(dropped)
}

/// Step 7: one fence, `E := now`, this pass's group (if any) pending, and the node
/// record published: written back and fenced, if memory still names this runtime as the
/// node's holder. Returns `E`.
fn publish_record<V: MemView>(
    inner: &NodeInner<V>,
    st: &mut PassState<V>,
    report: &mut PassReport,
    group: Option<Items>,
) -> Result<u64, BiError> {
    let view = &inner.view;
    view.fence();
    let end = inner.clock.refresh();
    if let Some(items) = group {
        st.pending.push_back(Group {
            end,
            prev_start: st.last_start,
            items,
        });
    }
    // The start of the last pass all of whose groups (and all earlier ones) are drained.
    let reclaim = match st.pending.front() {
        None => report.start,
        Some(g) => g.prev_start,
    }
    .max(st.reclaim);
    if report.overflow {
        st.overflows += 1;
    }
    st.expired_total += report.expired_readers.len() as u64;
    let record = NodeRecord {
        start: report.start,
        end,
        reclaim,
        heartbeat: end,
        passes: report.pass,
        overflows: st.overflows,
        expired_readers: st.expired_total,
        holder: inner.token,
    };
    // Another process may have claimed this node meanwhile: then it runs the node, and
    // this runtime stops writing its record.
    inner.claimed().check()?;
    keep_naming_runner(inner)?;
    let rec_at = inner.node_record_at();
    view.store(rec_at, &record)?;
    view.writeback(rec_at, size_of::<NodeRecord>())?;
    view.fence();
    report.reclaim_point = reclaim;
    Ok(end)
}

/// After the record that ends at `end`: if the previous heartbeat stopped covering
/// writes before this one landed (or this is the node's first pass), a writer may have
/// excluded this node and reused memory it still caches: drops it all now, and again
/// once the readers that were inside have left. Returns the bytes dropped.
fn drop_all_if_excluded<V: MemView>(
    inner: &NodeInner<V>,
    st: &mut PassState<V>,
    end: u64,
    report: &mut PassReport,
) -> Result<usize, BiError> {
    let cfg = &inner.config;
    // Another process may have taken this one's roles in between. Writers see the flag
    // with the new heartbeat and renew, re-reading their roles, before they write again.
    if !covers(st.heartbeat, inner.clock.refresh(), cfg.node_lease)
        && !cfg.faults.has(Fault::LeaseLapse)
    {
        inner.lapsed.store(true, Ordering::Release);
    }
    inner.heartbeat.store(end, Ordering::Release);
    let lapsed = inner.clock.refresh() > st.heartbeat.saturating_add(cfg.node_lease);
    if !(st.first || lapsed) {
        return Ok(0);
    }
    let dropped = invalidate_everything(inner)?;
    inner.view.fence();
    st.pending.push_back(Group {
        end: inner.clock.refresh(),
        prev_start: st.last_start,
        items: Items::Everything,
    });
    report.whole_heap = true;
    if lapsed && !st.first {
        st.overflows += 1;
    }
    Ok(dropped)
}

/// Writes this node's [`NodeFigures`] back beside its record (a line only this node's
/// process writes: a figure kept in a line that others write, such as a structure's
/// slot, would carry stale copies of their words back to memory with it).
fn publish_figures<V: MemView>(inner: &NodeInner<V>, st: &PassState<V>) -> Result<(), BiError> {
    let f = &inner.stats;
    let figures = NodeFigures {
        longest_pass: st.longest,
        invalidated_lines: st.invalidated_lines,
        readers: inner.registered.load(Ordering::Relaxed) as u64,
        retired_bytes: f.retired_bytes.load(Ordering::Relaxed),
        modified_in_flight: f.in_flight[0].load(Ordering::Relaxed),
        freed_in_flight: f.in_flight[1].load(Ordering::Relaxed),
        structure: f.structure.load(Ordering::Relaxed),
        entries: f.entries.load(Ordering::Relaxed),
    };
    let at = inner.node_record_at() + FIGURES_SLOT * inner.layout.slot_size();
    inner.view.store(at, &figures)?;
    inner.view.writeback(at, size_of::<NodeFigures>())?;
    Ok(())
}

/// Declares that readers of `inner`'s node read the structure of `scope`; the first time,
/// drops every cached line of the heap and the root directory (what passes skipped for
/// it). Returns whether it did.
pub(crate) fn declare_scope<V: MemView>(
    inner: &NodeInner<V>,
    scope: Scope,
) -> Result<bool, BiError> {
    if !inner.scopes.insert(scope) {
        return Ok(false);
    }
    if inner.config.faults.has(Fault::ScopeRefresh) {
        return Ok(true);
    }
    invalidate_everything(inner)?;
    inner.view.fence();
    Ok(true)
}

#[cfg(test)]
mod tests {
    use crate::mem::MemView;
    use crate::region::{RegionConfig, RingKind};
    use crate::runtime::RuntimeConfig;
    use crate::runtime::ring::{LogEntry, RingGeom};
    use crate::runtime::scope::Scope;
    use crate::runtime::testing::Setup;

    /// A pass reports what it did: its number, when it started and ended (as the node
    /// record says), the entries of every ring it consumed (its own node's writer's too,
    /// which it only counts) and the lines it dropped: each retired object's once when
    /// its entry comes, and again when its group drains. A node that keeps up with the
    /// rings never reports an overflow, however many entries went by in all.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn a_pass_reports_its_number_the_entries_it_consumed_and_the_lines_it_dropped() {
        let s = Setup::with(
            RegionConfig::new(1 << 18)
                .with_nodes(2)
                .with_log_ring_entries(16),
            |c| c.seed(1),
            RuntimeConfig::default(),
        );
        let first = s.quiesce_all().unwrap();
        assert_eq!((first[0].pass, first[1].pass), (1, 1));
        assert!(first[1].whole_heap);
        assert_eq!(
            s.nodes[1].record().unwrap().overflows,
            0,
            "a first pass is no lapse"
        );
        let mut w = s.writer(0);
        let mut old = w.alloc_sealed(0u64).unwrap();
        w.publish_link(s.slot(0), old).unwrap();
        s.quiesce_all().unwrap();
        for round in 0..4u64 {
            let replaced = 3;
            for i in 0..replaced {
                let new = w.alloc_sealed(round * 10 + i).unwrap();
                w.publish_link(s.slot(0), new).unwrap();
                w.retire(old).unwrap();
                old = new;
            }
            let own = s.nodes[0].quiesce().unwrap();
            let other = s.nodes[1].quiesce().unwrap();
            let record = s.nodes[1].record().unwrap();
            let expected_pass = 3 + 2 * round;
            assert_eq!(other.pass, expected_pass, "round {round}");
            assert_eq!((other.start, other.end), (record.start, record.end));
            assert!(!own.overflow && !other.overflow, "round {round}");
            assert_eq!(own.freed, replaced as usize, "round {round}");
            assert_eq!(other.freed, replaced as usize, "round {round}");
            assert!(other.modified >= replaced as usize, "round {round}");
            assert_eq!(own.modified, other.modified, "round {round}");
            assert!(
                other.invalidated_lines >= replaced as usize,
                "round {round}"
            );
            // Nothing new: the groups of both nodes drain, node 1's dropping the retired
            // objects' lines (one each) a second time.
            let own = s.nodes[0].quiesce().unwrap();
            let other = s.nodes[1].quiesce().unwrap();
            assert_eq!((own.drained, other.drained), (1, 1), "round {round}");
            assert_eq!(other.invalidated_lines, replaced as usize, "round {round}");
            assert_eq!((own.modified, other.modified), (0, 0), "round {round}");
            w.reclaim().unwrap();
        }
    }

    /// Under [`Policy::Everything`](crate::runtime::Policy::Everything) every pass drops
    /// the whole heap and the root directory, and says so in its count of lines.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn under_the_everything_policy_a_pass_drops_and_counts_the_whole_heap() {
        let s = Setup::new(2, 0);
        s.quiesce_all().unwrap();
        s.nodes[1].set_policy(crate::runtime::Policy::Everything);
        let layout = s.region.layout();
        let whole = (layout.heap().len + layout.root_directory().len) / layout.line_size().get();
        let pass = s.nodes[1].quiesce().unwrap();
        assert!(pass.invalidated_lines >= whole, "{pass:?}");
    }

    /// What a node's passes publish beside its record, read back where inspection tools
    /// read it: the lines they dropped in all, the longest pass, the readers registered.
    /// Another node's figures are its own.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn passes_publish_their_figures_beside_the_node_record() {
        let s = Setup::new(2, 0);
        let _reader = s.nodes[1].reader().unwrap();
        let (mut total, mut longest) = (0, 0);
        for _ in 0..3 {
            let p = s.nodes[1].quiesce().unwrap();
            total += p.invalidated_lines as u64;
            longest = longest.max(p.end - p.start);
        }
        assert!(total > 0);
        let f = s.nodes[1].figures().unwrap();
        assert_eq!(
            (f.invalidated_lines, f.longest_pass, f.readers),
            (total, longest, 1)
        );
        assert_eq!(s.nodes[0].figures().unwrap(), super::NodeFigures::default());
    }

    /// A node's own writer's retirements wait for the node's own readers too: a reader
    /// inside since before the retirement holds the block back, however many passes run,
    /// until it leaves.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn a_block_retired_under_a_reader_of_the_writers_own_node_waits_for_it() {
        let s = Setup::new(2, 0);
        s.quiesce_all().unwrap();
        let mut w = s.writer(0);
        let old = w.alloc_sealed(1u64).unwrap();
        w.publish_link(s.slot(0), old).unwrap();
        s.quiesce_all().unwrap();
        let reader = s.nodes[0].reader().unwrap();
        let guard = reader.enter();
        assert_eq!(*guard.load::<u64>(s.slot(0)).unwrap().unwrap(), 1);
        let new = w.alloc_sealed(2u64).unwrap();
        w.publish_link(s.slot(0), new).unwrap();
        w.retire(old).unwrap();
        for _ in 0..4 {
            s.quiesce_all().unwrap();
        }
        assert_eq!(w.reclaim().unwrap().freed_blocks, 0, "the reader is inside");
        drop(guard);
        for _ in 0..2 {
            s.quiesce_all().unwrap();
        }
        assert_eq!(w.reclaim().unwrap().freed_blocks, 1);
    }

    /// Entries a pass cannot trust (one naming lines past the end of the region, one of
    /// no line at all) are counted and skipped: the pass goes on, and drops the lines
    /// the good entry beside them names.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test, minutes interpreted: its object copies run in others"
    )]
    fn entries_outside_the_region_are_skipped_and_the_pass_goes_on() {
        let s = Setup::new(2, 0);
        s.quiesce_all().unwrap();
        let (n0, n1) = (s.emu.node(0), s.emu.node(1));
        let line = s.region.layout().line_size().get();
        let at = s.arena(0).start;
        n1.load::<u64>(at).unwrap(); // node 1 caches a line of node 0's share
        n0.store(at, &7u64).unwrap();
        n0.writeback(at, 8).unwrap();
        let ring = RingGeom::new(s.region.layout(), 0, RingKind::Modified).unwrap();
        let tail: u64 = n0.load_from_memory(ring.tail_at).unwrap();
        let past_the_end = s.region.layout().size() + line;
        let entries = [
            LogEntry::new(past_the_end, 1, 1, Scope::ALL),
            LogEntry::new(at, 0, 1, Scope::ALL),
            LogEntry::new(at, 1, 1, Scope::ALL),
        ];
        for (i, e) in entries.iter().enumerate() {
            n0.store(ring.entry_at(tail + i as u64), e).unwrap();
            n0.writeback(ring.entry_at(tail + i as u64), size_of::<LogEntry>())
                .unwrap();
        }
        n0.fence();
        n0.store(ring.tail_at, &(tail + 3)).unwrap();
        n0.writeback(ring.tail_at, 8).unwrap();
        n0.fence();
        let pass = s.nodes[1].quiesce().unwrap();
        assert_eq!(pass.modified, 3);
        assert!(!n1.is_cached(at), "the good entry's line is dropped");
        assert_eq!(n1.load::<u64>(at).unwrap(), 7);
    }
}
