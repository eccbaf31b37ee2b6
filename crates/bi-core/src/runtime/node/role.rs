//! Writer roles: one writer per structure, named in the region.
//!
//! A named structure's slot ([`Region::structure`](crate::region::Region::structure))
//! holds its root word and, after it, a [`WriterRecord`]: the node and the holder token
//! (see [`claim`](crate::runtime::claim)) of the process that writes it. Taking the role happens
//! under the pool lock ([`lock`](crate::runtime::lock)): the record is read from memory, and if it
//! names a writer that is still alive (its node's record still names that holder, with
//! a live heartbeat) the attempt is [`BiError::WriterAlive`], never a second writer.
//! Otherwise this process writes its own record, writes it back and fences.
//!
//! The writer's lease is its node's: when the process that held the role dies, its node
//! claim lapses with its heartbeat (or a restarted process claims the node with a new
//! token), and the role can be taken over. What the taker finds in the record tells it
//! whether a structure is already there to adopt ([`Role::previous`]).

use crate::mem::MemView;
use crate::runtime::inner::NodeInner;
use crate::runtime::process::Presence;
use crate::runtime::{BiError, Fault, record, share};
use bytemuck::{Pod, Zeroable};
use std::sync::Arc;
use std::time::Duration;

/// Where a structure's writer record lies in its slot: after the root word.
pub const WRITER_RECORD_OFFSET: usize = 8;

/// Who writes a structure.
///
/// ```
/// use bi_core::mem::MemView;
/// use bi_core::runtime::{WriterRecord, role::WRITER_RECORD_OFFSET, testing::Setup};
/// use std::time::Duration;
///
/// let s = Setup::new(2, 1);
/// let role = s.nodes[1].take_writer_role(s.slot(0), Duration::from_secs(1)).unwrap();
/// let view = s.nodes[1].view();
/// let rec: WriterRecord = view.load(s.slot(0) + WRITER_RECORD_OFFSET).unwrap();
/// assert_eq!((rec.node, rec.takes), (2, 1)); // node 1, plus one
/// assert_ne!(rec.holder, 0);
/// drop(role);
/// let rec: WriterRecord = view.load(s.slot(0) + WRITER_RECORD_OFFSET).unwrap();
/// assert_eq!(rec.holder, 0); // given up
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct WriterRecord {
    /// The writer's node plus one (the last writer's, once it gave the role up); 0 if the
    /// structure never had a writer.
    pub node: u64,
    /// The writer process's holder token; 0 when nobody holds the role.
    pub holder: u64,
    /// The writer's clock when it took the role.
    pub since: u64,
    /// Times the role was taken, ever (a taker that finds 0 makes the structure).
    pub takes: u64,
}

/// The writer role of one structure, held by this process: dropping it gives the role up
/// (the record is cleared, so another process can take it at once).
///
/// ```
/// use bi_core::runtime::testing::Setup;
/// use std::time::Duration;
///
/// let s = Setup::new(2, 1);
/// let role = s.nodes[0].take_writer_role(s.slot(0), Duration::from_secs(1)).unwrap();
/// assert!(role.is_held().unwrap());
/// assert!(s.nodes[1].take_writer_role(s.slot(0), Duration::from_secs(1)).is_err());
/// ```
pub struct Role<V: MemView> {
    inner: Arc<NodeInner<V>>,
    at: usize,
    previous: WriterRecord,
}

impl<V: MemView> std::fmt::Debug for Role<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Role")
            .field("node", &self.inner.node)
            .field("record_at", &self.at)
            .field("previous", &self.previous)
            .finish()
    }
}

impl<V: MemView> Role<V> {
    /// The record found when the role was taken: `takes == 0` means the structure had
    /// never had a writer (nothing to adopt); otherwise a writer wrote it before (this
    /// process, an earlier one, or another node's) and left or died.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(1, 1);
    /// let first = s.nodes[0].take_writer_role(s.slot(0), Duration::from_secs(1)).unwrap();
    /// assert_eq!(first.previous().takes, 0); // a new structure: nothing to adopt
    /// drop(first);
    /// let again = s.nodes[0].take_writer_role(s.slot(0), Duration::from_secs(1)).unwrap();
    /// assert_eq!((again.previous().takes, again.previous().node), (1, 1));
    /// ```
    pub fn previous(&self) -> WriterRecord {
        self.previous
    }

    /// Whether memory still names this process as the writer.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(1, 1);
    /// let role = s.nodes[0].take_writer_role(s.slot(2), Duration::from_secs(1)).unwrap();
    /// assert!(role.is_held().unwrap());
    /// ```
    pub fn is_held(&self) -> Result<bool, BiError> {
        Ok(read(&self.inner, self.at)?.holder == self.inner.token)
    }
}

impl<V: MemView> Drop for Role<V> {
    fn drop(&mut self) {
        // Best effort: a record that cannot be cleared lapses with this node's lease.
        if let Ok(r) = read(&self.inner, self.at)
            && r.holder == self.inner.token
        {
            // The node stays: the next writer learns where the structure was written.
            let _ = write(&self.inner, self.at, &WriterRecord { holder: 0, ..r });
        }
        self.inner.note_role(self.at, false);
    }
}

/// Whether the structure whose slot is at `slot` has a writer now: its record, read from
/// memory, names a holder that is this process or alive.
pub(crate) fn held<V: MemView>(inner: &NodeInner<V>, slot: usize) -> Result<bool, BiError> {
    let r = read(inner, slot + WRITER_RECORD_OFFSET)?;
    Ok(r.holder != 0 && (r.holder == inner.token || alive(inner, &r)?))
}

/// Whether the writer of the structure whose slot is at `slot` is certainly gone: the
/// process holding its role is gone from this host while its node's record still names
/// it, or nobody holds the role though a holder was `seen` before (it gave the role up).
/// `seen` keeps the last holder found: an empty role before any holder was seen is a
/// structure whose first writer is still taking it. Weaker signs are not enough (a
/// lapsed lease, or the node's record naming another process: a claim raced at the same
/// moment leaves the loser running until its next pass), so `false` does not say the
/// writer lives ([`held`] judges that).
pub(crate) fn certainly_gone<V: MemView>(
    inner: &NodeInner<V>,
    slot: usize,
    seen: &mut u64,
) -> Result<bool, BiError> {
    let r = read(inner, slot + WRITER_RECORD_OFFSET)?;
    if r.holder == 0 {
        return Ok(*seen != 0);
    }
    *seen = r.holder;
    if r.holder == inner.token {
        return Ok(false);
    }
    Ok(runner_named(inner, &r)?.is_some_and(|(_, presence)| presence == Presence::Gone))
}

/// The record of the node the writer `r` names, and what this host's kernel knows of
/// its runner's process, if that record still names the writer's holder (`None`: the
/// writer has no node, or another process claimed it since).
fn runner_named<V: MemView>(
    inner: &NodeInner<V>,
    r: &WriterRecord,
) -> Result<Option<(record::NodeRecord, Presence)>, BiError> {
    let Some(node) = r.node.checked_sub(1).map(|n| n as usize) else {
        return Ok(None);
    };
    let (rec, presence) = share::runner_of(inner, node)?;
    Ok((rec.holder == r.holder).then_some((rec, presence)))
}

/// Whether memory names this process as the writer of the structure whose slot is at
/// `slot` (a process that stalled past its lease may find another named).
pub(crate) fn mine<V: MemView>(inner: &NodeInner<V>, slot: usize) -> Result<bool, BiError> {
    Ok(read(inner, slot + WRITER_RECORD_OFFSET)?.holder == inner.token)
}

fn read<V: MemView>(inner: &NodeInner<V>, at: usize) -> Result<WriterRecord, BiError> {
    Ok(inner.view.load_from_memory(at)?)
}

fn write<V: MemView>(inner: &NodeInner<V>, at: usize, r: &WriterRecord) -> Result<(), BiError> {
    Ok(inner.view.store_to_memory(at, r)?)
}

/// Whether the writer `r` names is alive: its node's record still names its holder, whose
/// process still exists on this host (stopped, it would finish the write it stopped in
/// after its successor adopted the structure), or, where this host's kernel cannot say
/// ([`process`](crate::runtime::process)), whose heartbeat is live. A holder whose process is
/// gone is dead at once.
fn alive<V: MemView>(inner: &NodeInner<V>, r: &WriterRecord) -> Result<bool, BiError> {
    let Some((rec, presence)) = runner_named(inner, r)? else {
        return Ok(false);
    };
    let now = inner.clock.refresh();
    let cfg = &inner.config;
    Ok(presence.or_lease(record::live(
        rec.holder,
        rec.heartbeat,
        now,
        cfg.node_lease,
        cfg.skew,
    )))
}

/// Makes what the dead writer `r` stored reach memory before its successor reads it:
/// when this host's kernel can judge the runner of the writer's node (the node runs on
/// this host), the killed process's stores that it had not written back yet are still
/// in that node's cache, which lives on, and are written back now
/// ([`MemView::write_back_node`]; nothing to do where one host's caches are coherent).
/// Otherwise they stay in another host's cache, which may write them back later: see
/// [`lease`](super::lease).
fn settle_dead_writer<V: MemView>(inner: &NodeInner<V>, r: &WriterRecord) -> Result<(), BiError> {
    let Some(node) = r.node.checked_sub(1).map(|n| n as usize) else {
        return Ok(());
    };
    if inner.config.faults.has(Fault::DeadWriterStores) || node == inner.node {
        return Ok(());
    }
    let (_, presence) = share::runner_of(inner, node)?;
    if presence != Presence::Unknown {
        inner.view.write_back_node(node)?;
    }
    Ok(())
}

/// Takes the writer role of the structure whose slot is at `slot`.
pub(crate) fn take<V: MemView>(
    inner: &Arc<NodeInner<V>>,
    slot: usize,
    timeout: Duration,
) -> Result<Role<V>, BiError> {
    let at = slot + WRITER_RECORD_OFFSET;
    crate::runtime::lock::again_if_lease_lost(
        || take_once(inner, at, timeout),
        crate::runtime::lock::is_lease_lost,
    )
}

/// One try of [`take`], under one hold of the pool lock.
fn take_once<V: MemView>(
    inner: &Arc<NodeInner<V>>,
    at: usize,
    timeout: Duration,
) -> Result<Role<V>, BiError> {
    inner.check_runner()?;
    let guard = crate::runtime::lock::lock(inner, timeout)?;
    let previous = read(inner, at)?;
    // A record naming this process is a role it still holds (giving it up clears it).
    let mine = previous.holder == inner.token;
    if previous.holder != 0 && (mine || alive(inner, &previous)?) {
        return Err(BiError::WriterAlive {
            node: previous.node as usize - 1,
        });
    }
    if previous.holder != 0 {
        settle_dead_writer(inner, &previous)?;
    }
    let record = WriterRecord {
        node: inner.node as u64 + 1,
        holder: inner.token,
        since: inner.clock.refresh(),
        takes: previous.takes + 1,
    };
    guard.check()?;
    write(inner, at, &record)?;
    drop(guard);
    inner.note_role(at, true);
    Ok(Role {
        inner: Arc::clone(inner),
        at,
        previous,
    })
}
