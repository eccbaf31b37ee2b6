//! A writer's own lease: nothing written after a stall that may have outlived it.
//!
//! Other nodes judge this node by the heartbeat its passes write. Once that heartbeat is
//! older than the node lease (allowing for the skew bound), another process may take
//! the writer roles this process holds ([`role`](crate::runtime::role)) and adopt their
//! structures, and writers stop waiting for this node's passes. The writer's thread
//! does not run the passes, so it cannot assume they ran: a pass thread starved of CPU,
//! a virtual machine paused, a process stopped and continued, all let the heartbeat age
//! while the writer keeps its handles. Writing on would make two writers of one
//! structure.
//!
//! So a writer checks its node's last heartbeat against its clock before every
//! publication and before the first allocation of an update. A heartbeat younger than
//! half the lease passes at the cost of a clock read: no other node can find this one
//! dead before another half lease has gone by, which is time enough for the write the
//! check guards. An older heartbeat makes the writer renew first, under the pool lock:
//! it runs a pass (a fresh heartbeat; the pass also checks that memory still names this
//! process as the node's runner) and reads every writer role this process holds from
//! memory. A role another process took meanwhile is [`BiError::RoleLost`], and the
//! writer writes nothing. Takers check liveness and write their record under the same
//! lock, so either a taker came first (the renewal finds its record) or the renewal did
//! (the taker finds a live heartbeat).
//!
//! A pass does not check roles, yet its heartbeat is what the check above reads: so a
//! pass that finds its previous heartbeat had stopped covering writes before it wrote
//! the next flags the lapse, and the writer's next check renews (reading the roles)
//! however fresh the heartbeat. A role once found taken stays lost: the renewal made the
//! heartbeat fresh too, and the handle must keep failing until it is dropped.
//!
//! What a lease cannot exclude is a stall of more than half a lease between the check
//! and the store it guards: the window is one publication long, not the whole life of
//! a handle, but a process stopped (SIGSTOP, a debugger, a paused virtual machine) lands
//! in it now and then, and makes its store when it runs again, after its successor
//! adopted the structure. Between processes of one host the kernel closes it: a writer
//! whose process still exists is alive however old its heartbeat, so no process of its
//! host takes its role or its node (`runtime::node::process`). Between hosts only
//! the lease judges, and the window stays.
//!
//! A killed process leaves a second thing behind: the stores it made and had not yet
//! written back, which stay dirty in its node's cache while the node lives on. Where
//! the nodes of one host share coherent caches they are in memory for every other
//! process at once. Where they do not (the emulator; a NUMA machine with cross-socket
//! coherence off), a taker the kernel told of the death first makes that node's cache
//! write them back (`role::settle_dead_writer`,
//! [`MemView::write_back_node`](crate::mem::MemView::write_back_node), which the
//! hardware view cannot do for another socket yet). A taker on another host cannot
//! reach them at all: a write-back may put them in memory at any later moment, over
//! what the taker wrote. The window is the same one publication long (a writer writes
//! back each line right after it stores it); closing it there needs stores that never
//! stay in a cache (non-temporal ones).

use crate::mem::MemView;
use crate::primitive::sync::atomic::Ordering;
use crate::runtime::fault::Fault;
use crate::runtime::inner::Lost;
use crate::runtime::record::covers;
use crate::runtime::role::WriterRecord;
use crate::runtime::{BiError, NodeInner, lock, pass};
use std::time::Duration;

/// How long a renewal waits for the pool lock.
const RENEW_WAIT: Duration = Duration::from_secs(5);

/// Checks that this node's lease covers a write now, renewing it first if needed
/// (see the module docs).
pub(crate) fn check<V: MemView>(inner: &NodeInner<V>) -> Result<(), BiError> {
    if inner.config.faults.has(Fault::WriterLease) {
        return Ok(());
    }
    // A role once found taken stays lost: the handle fails until it is dropped.
    if let Some(lost) = inner
        .lost_role()
        .filter(|_| !inner.config.faults.has(Fault::LostRoles))
    {
        return Err(BiError::RoleLost {
            node: inner.node,
            taker: lost.taker,
        });
    }
    let now = inner.clock.refresh();
    // The flag is set before the heartbeat that follows a lapse is stored: a heartbeat
    // read fresh here comes with the flag of its pass.
    let heartbeat = inner.heartbeat.load(Ordering::Acquire);
    if covers(heartbeat, now, inner.config.node_lease) && !inner.lapsed.load(Ordering::Acquire) {
        return Ok(());
    }
    renew(inner)
}

/// Renews this node's lease under the pool lock and checks the roles this process holds
/// (again, if the lease lapsed while it held the lock).
fn renew<V: MemView>(inner: &NodeInner<V>) -> Result<(), BiError> {
    lock::again_if_lease_lost(|| renew_once(inner), lock::is_lease_lost)
}

/// One try of [`renew`], under one hold of the pool lock.
fn renew_once<V: MemView>(inner: &NodeInner<V>) -> Result<(), BiError> {
    let guard = lock::lock(inner, RENEW_WAIT)?;
    pass::quiesce(inner)?;
    guard.check()?;
    // Roles read from here on are read after any lapse the flag recorded.
    inner.lapsed.store(false, Ordering::Release);
    for at in inner.held_roles() {
        let r: WriterRecord = inner.view.load_from_memory(at)?;
        if r.holder != inner.token {
            let lost = Lost {
                taker: r.node.checked_sub(1).map(|n| n as usize),
            };
            inner.note_lost(at, lost);
            return Err(BiError::RoleLost {
                node: inner.node,
                taker: lost.taker,
            });
        }
    }
    Ok(())
}
