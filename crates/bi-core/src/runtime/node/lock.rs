//! The pool lock: mutual exclusion between nodes with no cross-node atomic.
//!
//! Nodes share no coherent line, so no compare-and-swap can arbitrate between them. The
//! lock is Lamport's bakery over the same three operations as everything else (as in
//! Cashmere-2L): each node writes only its own [`LockRecord`] (one line in its node
//! record), writes it back and fences before the next step; it reads another node's
//! record by invalidating it, fencing and loading. The bakery needs nothing stronger than
//! registers whose reads overlapping a write may return anything, which is what a line
//! read from memory while its owner writes it back is.
//!
//! 1. `choosing := 1`; read every record; `ticket := 1 + max ticket`; then `choosing := 0`
//!    (each a write-back and a fence of its own: a ticket must be in memory before the
//!    flag that says it is final).
//! 2. For every other node `j`: wait while `j` is choosing, then while `j` holds a ticket
//!    that goes first (`(ticket, node)` ordered lexicographically).
//! 3. The critical section; unlock by writing `ticket := 0`.
//!
//! **Leases.** A node that dies with a ticket would block everyone forever, so every
//! record carries a heartbeat (its node's clock when last written): a record whose
//! heartbeat is older than the node lease, allowing for the skew bound `D`, is ignored,
//! and a waiting node rewrites its heartbeat while it waits. The price is the usual one of
//! leases: a holder stalled for longer than the lease may find that another node took
//! the lock meanwhile. [`PoolLockGuard::check`] tells a holder whether its lease still
//! covers it; the operations the lock protects call it just before the one store that
//! commits them. A node whose runner is a process of this host that is gone (killed,
//! not stopped: `runtime::node::process`) is passed over at once, lease or not.
//!
//! A node's own record is only worth acting on while it is live: one that reached memory
//! after a stall carries the heartbeat of before it, and others may have passed over it.
//! So a node whose record lapsed at any step (more than half the lease between the
//! heartbeat it wrote and a write landing or a decision on what it read) withdraws and
//! takes a new ticket, which no node can have passed over. Heartbeats are never 0, which
//! reads as "no record".
//!
//! **Threads of one process.** A node has one lock record, so two threads of the process
//! running it must not take the bakery at once (both would write that record): they take
//! a process-local mutex first, held with the guard.

use crate::mem::MemView;
use crate::primitive::sync::MutexGuard;
use crate::runtime::fault::Fault;
use crate::runtime::process::Presence;
use crate::runtime::{BiError, NodeInner, share};
use bytemuck::{Pod, Zeroable};
use std::sync::TryLockError;
use std::time::{Duration, Instant};

/// Which slot of a node record holds the node's lock record.
pub(crate) const LOCK_SLOT: usize = 1;

/// A node's lock record (one line of its node record).
///
/// ```
/// use bi_core::mem::MemView;
/// use bi_core::runtime::{LockRecord, testing::Setup};
/// use std::time::Duration;
///
/// let s = Setup::new(2, 1);
/// let layout = s.region.layout();
/// let at = layout.node_record(0).unwrap().offset + layout.slot_size(); // its second slot
/// let guard = s.nodes[0].lock(Duration::from_secs(1)).unwrap();
/// let rec: LockRecord = s.nodes[0].view().load(at).unwrap();
/// assert_eq!((rec.choosing, rec.ticket), (0, guard.ticket()));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct LockRecord {
    /// 1 while the node picks its ticket.
    pub choosing: u64,
    /// The node's ticket; 0 when it neither holds nor wants the lock.
    pub ticket: u64,
    /// The node's clock when it last wrote the record.
    pub heartbeat: u64,
}

/// The pool lock, held: dropping it unlocks.
///
/// ```
/// use bi_core::runtime::testing::Setup;
/// use std::time::Duration;
///
/// let s = Setup::new(2, 1);
/// {
///     let guard = s.nodes[1].lock(Duration::from_secs(1)).unwrap();
///     assert!(guard.check().is_ok());
/// } // unlocked here
/// assert!(s.nodes[0].lock(Duration::from_millis(10)).is_ok());
/// ```
#[must_use = "dropping the guard unlocks at once"]
pub struct PoolLockGuard<'a, V: MemView> {
    inner: &'a NodeInner<V>,
    ticket: u64,
    heartbeat: u64,
    /// This process's other threads wait here; released after the ticket is withdrawn
    /// (fields drop after `Drop::drop`).
    _threads: MutexGuard<'a, ()>,
}

impl<V: MemView> std::fmt::Debug for PoolLockGuard<'_, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolLockGuard")
            .field("node", &self.inner.node)
            .field("ticket", &self.ticket)
            .field("heartbeat", &self.heartbeat)
            .finish()
    }
}

impl<V: MemView> PoolLockGuard<'_, V> {
    /// Whether this node still holds the lock for sure: its record's heartbeat is within
    /// the node lease, allowing for the skew bound (each pass of the node moves
    /// it). Call it just before the store that commits what the lock protects.
    ///
    /// ```
    /// use bi_core::runtime::{BiError, RuntimeConfig, testing::Setup};
    /// use std::time::Duration;
    ///
    /// let config = RuntimeConfig::default().node_lease(10_000).reader_lease(10_000);
    /// let s = Setup::with(Default::default(), |c| c, config);
    /// let guard = s.nodes[0].lock(Duration::from_secs(1)).unwrap();
    /// assert!(guard.check().is_ok());
    /// s.emu.advance(6_000); // more than half the lease
    /// assert!(matches!(guard.check(), Err(BiError::LockLeaseLost { node: 0 })));
    /// ```
    pub fn check(&self) -> Result<(), BiError> {
        // Another node ignores this record once its clock, less `D`, passes
        // `heartbeat + lease`; its clock is at most `D` ahead of ours. Half the lease is
        // kept as a margin for the store the caller is about to make.
        let now = self.inner.clock.refresh();
        if crate::runtime::record::covers(self.heartbeat, now, self.inner.config.node_lease) {
            Ok(())
        } else {
            Err(BiError::LockLeaseLost {
                node: self.inner.node,
            })
        }
    }

    /// Rewrites the heartbeat, extending the lease.
    pub(crate) fn renew(&mut self) -> Result<(), BiError> {
        self.heartbeat = write(self.inner, 0, self.ticket)?;
        Ok(())
    }

    /// This node's ticket (for diagnostics).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(2, 1);
    /// let guard = s.nodes[0].lock(Duration::from_secs(1)).unwrap();
    /// assert!(guard.ticket() > 0); // nonzero while held
    /// ```
    pub fn ticket(&self) -> u64 {
        self.ticket
    }
}

impl<V: MemView> Drop for PoolLockGuard<'_, V> {
    fn drop(&mut self) {
        // A failed write-back leaves the ticket in memory; the lease then frees the lock.
        let _ = write(self.inner, 0, 0);
    }
}

fn record_at<V: MemView>(inner: &NodeInner<V>, node: usize) -> Result<usize, BiError> {
    let slot = LOCK_SLOT * inner.layout.slot_size();
    if inner.config.faults.has(Fault::RecordLines) {
        // Nodes `2 k` and `2 k + 1` keep their records side by side in `2 k`'s slot.
        let first = node - node % 2;
        let beside = (node % 2) * size_of::<LockRecord>();
        return Ok(inner.node_record_of(first)? + slot + beside);
    }
    Ok(inner.node_record_of(node)? + slot)
}

/// Writes this node's record and makes it visible; returns the heartbeat written (never
/// 0, which reads as "no record").
fn write<V: MemView>(inner: &NodeInner<V>, choosing: u64, ticket: u64) -> Result<u64, BiError> {
    let at = record_at(inner, inner.node)?;
    let heartbeat = inner.clock.refresh().max(1);
    let record = LockRecord {
        choosing,
        ticket,
        heartbeat,
    };
    inner.view.store(at, &record)?;
    if !inner.config.faults.has(Fault::LockWriteback) {
        inner.view.writeback(at, size_of::<LockRecord>())?;
    }
    inner.view.fence();
    Ok(heartbeat)
}

/// Whether this node's record written at `heartbeat` is still live in every other node's
/// eyes now, with the margin [`PoolLockGuard::check`] keeps. A record that reached memory
/// after a stall carries the heartbeat of before the stall, and others may have ignored
/// it meanwhile: a step of the bakery taken on it proves nothing.
fn still_live<V: MemView>(inner: &NodeInner<V>, heartbeat: u64) -> bool {
    inner.config.faults.has(Fault::LockLapse)
        || crate::runtime::record::covers(heartbeat, inner.clock.refresh(), inner.config.node_lease)
}

/// Reads node `j`'s record from memory; `None` if its heartbeat is older than the lease
/// at `now` (allowing for `D`), or it never wrote one.
fn read<V: MemView>(
    inner: &NodeInner<V>,
    j: usize,
    now: u64,
) -> Result<Option<LockRecord>, BiError> {
    let r: LockRecord = inner.view.load_from_memory(record_at(inner, j)?)?;
    let horizon = now.saturating_sub(inner.config.skew);
    let live = r.heartbeat != 0 && r.heartbeat.saturating_add(inner.config.node_lease) >= horizon;
    Ok(live.then_some(r))
}

/// How many times [`again_if_lease_lost`] runs a step again.
pub(crate) const LOST_LEASE_RETRIES: u32 = 16;

/// Runs `step`, a step under the pool lock that takes the lock itself and calls
/// [`PoolLockGuard::check`] before its first store, again from the start (the lock taken
/// anew) each time it fails for a lease lost while it held the lock (`lost` tells those
/// errors), up to 16 times (`LOST_LEASE_RETRIES`). Such a failure wrote nothing, so running
/// the step again is running it for the first time: a process stalled inside the lock
/// on a loaded machine waits once more instead of failing its caller.
///
/// ```
/// use bi_core::runtime::BiError;
/// use bi_core::runtime::lock::again_if_lease_lost;
///
/// let mut tries = 0;
/// let lost = |e: &BiError| matches!(e, BiError::LockLeaseLost { .. });
/// let r = again_if_lease_lost(|| {
///     tries += 1;
///     if tries < 3 { Err(BiError::LockLeaseLost { node: 0 }) } else { Ok(tries) }
/// }, lost);
/// assert_eq!(r.unwrap(), 3);
/// // Another error is the step's answer at once.
/// let r: Result<(), _> = again_if_lease_lost(|| Err(BiError::BadNode { node: 9 }), lost);
/// assert!(matches!(r, Err(BiError::BadNode { node: 9 })));
/// ```
pub fn again_if_lease_lost<T, E>(
    mut step: impl FnMut() -> Result<T, E>,
    lost: impl Fn(&E) -> bool,
) -> Result<T, E> {
    let mut tries = 0;
    loop {
        match step() {
            Err(e) if lost(&e) && tries < LOST_LEASE_RETRIES => tries += 1,
            r => return r,
        }
    }
}

/// Whether `e` is a lease lost while holding the pool lock.
pub fn is_lease_lost(e: &BiError) -> bool {
    matches!(e, BiError::LockLeaseLost { .. })
}

/// Takes the pool lock, waiting at most `timeout`.
pub(crate) fn lock<V: MemView>(
    inner: &NodeInner<V>,
    timeout: Duration,
) -> Result<PoolLockGuard<'_, V>, BiError> {
    let me = inner.node;
    let started = Instant::now();
    let threads = loop {
        match inner.lock_threads.try_lock() {
            Ok(g) => break g,
            // The mutex guards nothing but the record, which the next holder rewrites.
            Err(TryLockError::Poisoned(p)) => break p.into_inner(),
            Err(TryLockError::WouldBlock) if started.elapsed() > timeout => {
                return Err(BiError::LockTimeout {
                    node: me,
                    holder: me,
                });
            }
            Err(TryLockError::WouldBlock) => crate::primitive::thread::yield_now(),
        }
    };
    // From here on, dropping the guard withdraws the ticket.
    let mut guard = PoolLockGuard {
        inner,
        ticket: 0,
        heartbeat: 0,
        _threads: threads,
    };
    // A node whose own record lapsed at any step (a stall longer than half the lease) may
    // have been ignored by a node that then went ahead of it: it withdraws and takes a
    // new ticket, which the others cannot ignore.
    while !(guard.take_ticket()? && guard.wait_turn(started, timeout)?) {
        guard.heartbeat = write(inner, 0, 0)?;
        guard.ticket = 0;
        if started.elapsed() > timeout {
            return Err(BiError::LockTimeout {
                node: me,
                holder: me,
            });
        }
    }
    Ok(guard)
}

impl<V: MemView> PoolLockGuard<'_, V> {
    /// The doorway: `choosing`, a ticket above every live one, `choosing` cleared. False
    /// if this node's record lapsed on the way.
    fn take_ticket(&mut self) -> Result<bool, BiError> {
        let inner = self.inner;
        let chose = write(inner, 1, 0)?;
        if !still_live(inner, chose) {
            return Ok(false);
        }
        let now = inner.clock.refresh();
        let mut max = 0;
        for j in (0..inner.nodes).filter(|&j| j != inner.node) {
            if let Some(r) = read(inner, j, now)? {
                max = max.max(r.ticket);
            }
        }
        self.ticket = max + 1;
        write(inner, 1, self.ticket)?;
        self.heartbeat = write(inner, 0, self.ticket)?;
        Ok(still_live(inner, chose) && still_live(inner, self.heartbeat))
    }

    /// Waits until every other node has chosen and none holds a ticket that goes first.
    /// False if this node's record lapsed while it waited.
    fn wait_turn(&mut self, started: Instant, timeout: Duration) -> Result<bool, BiError> {
        let (inner, me) = (self.inner, self.inner.node);
        for j in (0..inner.nodes).filter(|&j| j != me) {
            loop {
                let now = inner.clock.refresh();
                let goes_first = match read(inner, j, now)? {
                    None => false,
                    Some(r) if r.choosing != 0 => true,
                    Some(r) => r.ticket != 0 && (r.ticket, j) < (self.ticket, me),
                };
                // What was read is only worth acting on while this node's record was live
                // throughout: otherwise `j` may have taken its ticket ignoring ours.
                if !still_live(inner, self.heartbeat) {
                    return Ok(false);
                }
                if !goes_first {
                    break;
                }
                // A node whose runner's process is gone from this host holds nothing
                // back, lease or not: a dead process neither enters nor leaves.
                if share::runner_of(inner, j)?.1 == Presence::Gone {
                    break;
                }
                if started.elapsed() > timeout {
                    return Err(BiError::LockTimeout {
                        node: me,
                        holder: j,
                    });
                }
                // Keep our own lease alive while we wait.
                if now.saturating_sub(self.heartbeat) > inner.config.node_lease / 4 {
                    self.renew()?;
                }
                crate::primitive::thread::yield_now();
            }
        }
        Ok(true)
    }
}

/// Examples of the crate-private items above, as tests.
#[cfg(test)]
mod private_examples {
    #[test]
    fn renew_example() {
        use crate::runtime::{RuntimeConfig, testing::Setup};
        use std::time::Duration;

        let config = RuntimeConfig::default()
            .node_lease(10_000)
            .reader_lease(10_000);
        let s = Setup::with(Default::default(), |c| c, config);
        let mut guard = s.nodes[0].lock(Duration::from_secs(1)).unwrap();
        s.emu.advance(6_000);
        assert!(guard.check().is_err());
        guard.renew().unwrap();
        assert!(guard.check().is_ok());
    }
}
