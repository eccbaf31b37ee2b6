//! One node, several processes of its host.
//!
//! A node is a cache domain: the processes of one host see each other's stores without
//! any cache operation. So several processes of a host can be one node: one of them
//! *runs* it (it holds the node's claim, runs its quiescence pass and may write), the
//! others *join* it ([`NodeRuntime::join`](crate::runtime::NodeRuntime::join)) and only read.
//! The node's one pass then covers every reader of every process of the node:
//!
//! - **Reader records are shared.** Each record names the process using it in a holder
//!   word (its process id and a token), taken with a compare-and-exchange that is atomic
//!   among the host's processes ([`MemView::compare_exchange_u64`]; never across nodes).
//!   A record whose holder process is gone is taken over. The pass reads every record of
//!   the node, whoever holds it.
//! - **Ordering without the runner's barrier.** The runner's pass orders its own
//!   process's readers with `membarrier`, which reaches no other process: a joined
//!   process's readers issue a full fence on entering instead
//!   ([`ReaderOrdering::Fence`](crate::runtime::ReaderOrdering::Fence)).
//! - **Every structure counts as read.** The runner knows which structures its own
//!   readers declared ([`scope`](crate::runtime::scope)), not those of other processes. A joined
//!   process raises the node's *joined* flag (in the node's share record), fences, then
//!   drops its host's cached copy of the heap and the root directory; a pass reads the
//!   flag, from memory, after the ring tails it will act on and, when it is set, invalidates what
//!   every structure's writers logged. So an entry a pass skipped was logged before the
//!   flag was raised, and the joined process's own invalidation came after it.
//!
//! The share record also names the runner's host (a hash of the kernel's boot id), so a
//! process of another host cannot join by mistake: it would share no cache with the
//! runner, and the runner's pass would not be its pass. And it names the runner's
//! process, so that processes of the same host can ask the kernel whether the runner
//! still exists before they take its node or its writer roles
//! (`runtime::node::process`).

use crate::mem::MemView;
use crate::primitive::sync::atomic::Ordering;
use crate::runtime::fault::Fault;
use crate::runtime::process::Presence;
use crate::runtime::reader_state::ReaderHolder;
use crate::runtime::record::{self, NodeRecord};
use crate::runtime::{BiError, NodeInner, RuntimeConfig, process};
use bytemuck::{Pod, Zeroable};

/// The node record slot that holds the share record.
pub const SHARE_SLOT: usize = 2;

/// The byte of a reader record that holds its holder word.
pub const HOLDER_AT: usize = 56;

/// A node's share record: the host and the process that run the node, and whether
/// processes joined it.
///
/// ```
/// use bi_core::mem::MemView;
/// use bi_core::runtime::share::{SHARE_SLOT, ShareRecord, host_id};
/// use bi_core::runtime::{NodeRuntime, RuntimeConfig, testing::Setup};
///
/// let s = Setup::new(2, 1);
/// let layout = *s.region.layout();
/// let at = layout.node_record(1).unwrap().offset + SHARE_SLOT * layout.slot_size();
/// let rec: ShareRecord = s.nodes[1].view().load(at).unwrap();
/// assert_eq!((rec.host, rec.joined), (host_id(), 0));
/// s.nodes[1].quiesce().unwrap();
/// let _joined = NodeRuntime::emulated_join(s.emu.node(1), layout, RuntimeConfig::default());
/// let rec: ShareRecord = s.nodes[1].view().load(at).unwrap();
/// assert_ne!(rec.joined, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct ShareRecord {
    /// The runner's host ([`host_id`]), 0 before a runner started.
    pub host: u64,
    /// Nonzero once a process joined the node (never cleared: a joined process may still
    /// read when the node's runner changes).
    pub joined: u64,
    /// The holder token of the runner these fields describe (the node record's `holder`
    /// while that runner holds the node).
    pub runner: u64,
    /// The runner's process id on `host`, 0 if unknown.
    pub pid: u64,
    /// When that process started (clock ticks since the host booted), which tells it
    /// from a later process given the same id.
    pub started: u64,
    /// The pid namespace `pid` belongs to, 0 if unknown (a region made before it was
    /// recorded): another namespace's ids cannot be looked up.
    pub pid_space: u64,
    /// Zero. Pads the record to one whole 64-byte line, so that each write of it (by a
    /// runner that claims the node, or a process that joins it) replaces the line
    /// whole: of two such writes at once the later one wins, as on a coherent machine,
    /// and no stale byte of the earlier one's copy reaches memory.
    pub reserved: [u64; 2],
}

// One whole line on x86 (see `reserved`).
const _: () = assert!(size_of::<ShareRecord>() == 64);

impl ShareRecord {
    /// The record of a runner with holder token `runner`: this host and this process.
    pub(crate) fn of_this_process(runner: u64, joined: u64) -> Self {
        let (pid, started) = process::this();
        ShareRecord {
            host: host_id(),
            joined,
            runner,
            pid,
            started,
            pid_space: process::pid_space(),
            reserved: [0; 2],
        }
    }
}

/// What this host's kernel says of the process that runs, as `holder`, the node whose
/// share record is at `share_at` ([`process`](crate::runtime::process)): there (stopped or not:
/// the holder is alive whatever its heartbeat), gone (dead whatever its heartbeat), or
/// unknown (another host or pid namespace, another holder's record: the lease judges).
pub(crate) fn runner_presence<V: MemView>(
    view: &V,
    share_at: usize,
    holder: u64,
    config: &RuntimeConfig,
) -> Result<Presence, BiError> {
    if holder == 0 || config.faults.has(Fault::LiveProcess) {
        return Ok(Presence::Unknown);
    }
    let r: ShareRecord = view.load_from_memory(share_at)?;
    let host = host_id();
    let here = host != 0 && r.host == host && r.pid_space != 0;
    if !here || r.runner != holder || r.pid_space != process::pid_space() {
        return Ok(Presence::Unknown);
    }
    Ok(process::presence(r.pid, r.started))
}

/// This host's identity: a hash of the kernel's boot id (the same for every process of
/// the host until it reboots), or 0 where there is none (and under Miri, which runs
/// isolated from the file system).
///
/// ```
/// use bi_core::runtime::share::host_id;
///
/// assert_eq!(host_id(), host_id()); // the same for every process of this boot
/// ```
pub fn host_id() -> u64 {
    if cfg!(miri) {
        return 0;
    }
    std::fs::read(BOOT_ID)
        .map(|id| host_id_of(&id))
        .unwrap_or(0)
}

/// Where the kernel keeps the identity of this boot.
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// The host identity of a host whose boot id reads `boot_id` (a 64-bit FNV-1a hash,
/// never 0).
fn host_id_of(boot_id: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in boot_id {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h | 1
}

/// Whether the process named by a reader record's holder word may still be alive (this
/// process, or a process of this host with that id; a reused id is taken as alive,
/// which only keeps a record from being reused).
fn may_be_alive(holder: ReaderHolder) -> bool {
    let pid = holder.pid();
    if pid == std::process::id() || cfg!(miri) {
        return true;
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing: it only checks that the process exists
    // and may be signalled; it reads and writes no memory of ours.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Takes a free reader record of `inner`'s node for `holder` (or one whose holder
/// process is gone); returns its index.
pub(crate) fn take_reader_record<V: MemView>(
    inner: &NodeInner<V>,
    holder: ReaderHolder,
) -> Result<usize, BiError> {
    let per_node = inner.layout.config().readers_per_node() as usize;
    for r in record_order(per_node, inner.layout.slot_size()) {
        let at = inner.reader_record(r)? + HOLDER_AT;
        let mut found = inner.view.compare_exchange_u64(at, 0, holder.word())?;
        if found != 0 && !may_be_alive(ReaderHolder::from_word(found)) {
            found = match inner.view.compare_exchange_u64(at, found, holder.word())? {
                f if f == found => 0,
                f => f,
            };
        }
        if found == 0 {
            return Ok(r);
        }
    }
    Err(BiError::NoReaderSlot { node: inner.node })
}

/// Bytes of the aligned blocks some processors fetch whole (the adjacent-line
/// prefetchers of AMD's and Intel's cores pair 64-byte lines).
const PAIRED_BYTES: usize = 128;

/// The order in which reader records of `slot` bytes are handed out: one per paired
/// block first, then the others, so that the records of two readers of a node share no
/// block while most of the table is free. Every enter and exit stores into the reader's
/// record; two cores storing into the two lines of one block slow each other down as if
/// they shared a line (two reader threads of one map on a 2-core AMD EPYC guest: 37 M
/// lookups/s with neighbouring records, 56 M with records apart).
fn record_order(per_node: usize, slot: usize) -> impl Iterator<Item = usize> {
    let stride = (PAIRED_BYTES / slot.max(1)).max(1);
    (0..stride).flat_map(move |phase| (phase..per_node).step_by(stride))
}

/// Gives reader record `index` back: the node counts one reader less, and the record is
/// anyone's again (best effort: a record that cannot be given back is taken over once
/// this process is gone).
pub(crate) fn release_reader<V: MemView>(inner: &NodeInner<V>, index: usize) {
    inner.registered.fetch_sub(1, Ordering::SeqCst);
    let _ = release_reader_record(inner, index, inner.reader_holder);
}

/// Gives reader record `r` back (if `holder` still holds it).
pub(crate) fn release_reader_record<V: MemView>(
    inner: &NodeInner<V>,
    r: usize,
    holder: ReaderHolder,
) -> Result<(), BiError> {
    let at = inner.reader_record(r)? + HOLDER_AT;
    inner.view.compare_exchange_u64(at, holder.word(), 0)?;
    Ok(())
}

/// Joins the node whose record is at `at` and share record at `share_at`: checks that a
/// live process of this host runs it, raises the joined flag in memory and fences (the
/// caller then drops its host's cached heap). Returns the node record as it was.
pub(crate) fn join<V: MemView>(
    view: &V,
    at: usize,
    share_at: usize,
    node: usize,
    now: impl Fn() -> u64,
    config: &RuntimeConfig,
) -> Result<NodeRecord, BiError> {
    let record: NodeRecord = view.load_from_memory(at)?;
    if !record::live(
        record.holder,
        record.heartbeat,
        now(),
        config.node_lease,
        config.skew,
    ) {
        return Err(BiError::NodeNotRunning { node });
    }
    let mut shared: ShareRecord = view.load_from_memory(share_at)?;
    let host = host_id();
    if host == 0 || shared.host != host {
        return Err(BiError::NodeOnAnotherHost { node });
    }
    shared.joined = 1;
    view.store_to_memory(share_at, &shared)?;
    // Before the caller's invalidation: a pass that read the flag unset had read its
    // ring tails before this (see the module docs).
    crate::primitive::sync::atomic::fence(crate::primitive::sync::atomic::Ordering::SeqCst);
    Ok(record)
}

/// The node's share record's offset.
pub(crate) fn record_at<V: MemView>(inner: &NodeInner<V>) -> usize {
    inner.node_record_at() + SHARE_SLOT * inner.layout.slot_size()
}

/// Node `node`'s share record's offset.
pub(crate) fn record_of<V: MemView>(inner: &NodeInner<V>, node: usize) -> Result<usize, BiError> {
    Ok(inner.node_record_of(node)? + SHARE_SLOT * inner.layout.slot_size())
}

/// Makes the node's share record name this runner again if it does not: two processes
/// that claim one free node at the same moment both write it, and the claim may go to
/// one while the record that landed last is the other's. The runner checks at each pass,
/// while it holds the claim, so the record names the process that runs the node within a
/// pass of the claim settling (the `joined` flag is kept).
pub(crate) fn keep_naming_runner<V: MemView>(inner: &NodeInner<V>) -> Result<(), BiError> {
    if inner.joined || inner.config.faults.has(Fault::ShareRecordRepair) {
        return Ok(());
    }
    let at = record_at(inner);
    let r: ShareRecord = inner.view.load_from_memory(at)?;
    if r.runner != inner.token {
        let mine = ShareRecord::of_this_process(inner.token, r.joined);
        inner.view.store_to_memory(at, &mine)?;
    }
    Ok(())
}

/// Node `node`'s record, read from memory, and whether the process it names as the
/// node's runner is there ([`runner_presence`]).
pub(crate) fn runner_of<V: MemView>(
    inner: &NodeInner<V>,
    node: usize,
) -> Result<(NodeRecord, Presence), BiError> {
    let rec: NodeRecord = inner.view.load_from_memory(inner.node_record_of(node)?)?;
    let presence = runner_presence(
        &inner.view,
        record_of(inner, node)?,
        rec.holder,
        &inner.config,
    )?;
    Ok((rec, presence))
}

/// Whether a process joined this node, read from memory, where the joiner stored it: a
/// process that keeps a cache of its own (the emulator's processes do) would otherwise
/// answer from a copy as old as its last pass or older.
pub(crate) fn joined<V: MemView>(inner: &NodeInner<V>) -> Result<bool, BiError> {
    let r: ShareRecord = inner.view.load_from_memory(record_at(inner))?;
    Ok(r.joined != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_boot_ids_are_two_hosts() {
        // Fewer interpreted: each id is a formatted string and a hash.
        let hosts: u32 = if cfg!(miri) { 100 } else { 2000 };
        let ids: Vec<u64> = (0..hosts)
            .map(|i| host_id_of(format!("{:08x}-77aa-4c1e-9d2b-{i:012x}\n", i * 7919).as_bytes()))
            .collect();
        let mut distinct = ids.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ids.len(), "two boots, one identity");
        assert!(ids.iter().all(|&h| h != 0), "0 is no host");
    }

    /// A process whose cache still holds its node's share record from before another
    /// process of the node joined learns of the join all the same.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn the_joined_flag_is_read_from_memory() {
        let s = crate::runtime::testing::Setup::new(2, 0);
        let inner = &s.nodes[1].inner;
        let at = record_at(inner);
        let mut record: ShareRecord = inner.view.load(at).unwrap(); // cached on node 1
        assert_eq!(record.joined, 0);
        record.joined = 1;
        // The joiner stores the flag to memory, past this cache.
        s.nodes[0].view().store_to_memory(at, &record).unwrap();
        assert!(joined(inner).unwrap());
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri runs isolated from the file system")]
    fn this_host_is_named_by_its_boot_id() {
        // Where the kernel gives a boot id, the host is named by it: two hosts sharing a
        // pool must not take each other's processes for their own.
        if let Ok(id) = std::fs::read(BOOT_ID) {
            assert_eq!(host_id(), host_id_of(&id));
        }
    }

    #[test]
    fn reader_records_are_handed_out_apart_and_every_one_once() {
        for (per_node, slot) in [(512, 64), (7, 64), (512, 128), (16, 32), (3, 4096)] {
            let order: Vec<usize> = record_order(per_node, slot).collect();
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(
                sorted,
                (0..per_node).collect::<Vec<_>>(),
                "{per_node} x {slot}"
            );
            // While at most one record per paired block is taken, no two share a block.
            let per_block = (PAIRED_BYTES / slot).max(1);
            let first = per_node.div_ceil(per_block);
            let blocks: Vec<usize> = order[..first]
                .iter()
                .map(|r| r * slot / PAIRED_BYTES)
                .collect();
            let mut distinct = blocks.clone();
            distinct.dedup();
            assert_eq!(
                distinct.len(),
                blocks.len(),
                "{per_node} x {slot}: {blocks:?}"
            );
        }
    }
}
