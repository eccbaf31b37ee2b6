//! Node claims: one live process per node id.
//!
//! A node's quiescence record ([`NodeRecord`]) names the process that runs the node: a
//! random `holder` token drawn when the runtime starts, next to the heartbeat its passes
//! refresh. Starting a runtime for a node whose record names another holder with a live
//! heartbeat is [`BiError::NodeTaken`]: two processes never run one node (they would
//! write one record and one set of rings from two caches). A holder whose heartbeat is
//! older than the node lease is dead, and its node is taken over.
//!
//! Two processes that start on one node at the same moment can both find it free and
//! both write their claim. Memory then holds one of the two, and each pass checks, before
//! it writes the record, that memory still names its own holder: the other process's
//! next pass fails with [`BiError::NodeTaken`] and it stops running the node, within one
//! pass period, before it wrote anything but its claim and its record.
//!
//! Claims do not go through the pool lock ([`lock`](crate::runtime::lock)), although it is the
//! lock of root-directory changes and writer roles: its bakery gives each *node* one
//! ticket record, and a process that is still choosing its node has none of its own
//! (two processes claiming one node would share that node's ticket, which breaks the
//! bakery). The claim is instead a flag protocol of its own: write the claim, let it
//! settle, and check that memory still names this process before acting as the node
//! (the pool waits 5 ms; every pass checks again). A claim writes the whole record, one
//! 64-byte line, so of two claims written back at once the later one replaces the
//! earlier whole, as on a coherent machine: no stale byte of either reaches memory (the
//! emulator's oracle does not count such a write-back as lost). Each claimant then
//! writes the node's share record ([`share`](crate::runtime::share)), and the one that
//! lands last may be the loser's: the winner's passes make it name the winner again.
//!
//! A runtime that ends (its last handle dropped) clears its claim and its heartbeat, so
//! writers stop waiting for the node at once instead of after its lease. A node that
//! never started has a zero heartbeat and holds nothing back either.

use crate::mem::MemView;
use crate::runtime::fault::{Fault, Faults};
use crate::runtime::process::Presence;
use crate::runtime::record::{NodeRecord, live};
use crate::runtime::{BiError, RuntimeConfig};
use std::hash::{BuildHasher, Hasher};

/// A fresh, nonzero holder token: random per process and per call (std's hasher keys come
/// from the operating system's random source).
pub(crate) fn new_token() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish() | 1
}

/// Claims node `node` whose record is at `at` for `token`; returns the record as it was.
/// `presence` says what this host's kernel knows of a holder's process: one that still
/// exists keeps the node its own however old its heartbeat, one that is gone loses it
/// however fresh ([`process`](crate::runtime::process)).
pub(crate) fn claim<V: MemView>(
    view: &V,
    at: usize,
    node: usize,
    token: u64,
    now: impl Fn() -> u64,
    presence: impl Fn(u64) -> Result<Presence, BiError>,
    config: &RuntimeConfig,
) -> Result<NodeRecord, BiError> {
    let (lease, skew) = (config.node_lease, config.skew);
    let prev: NodeRecord = view.load_from_memory(at)?;
    let t = now();
    let checked = !config.faults.has(Fault::NodeClaim);
    if checked
        && prev.holder != token
        && presence(prev.holder)?.or_lease(live(prev.holder, prev.heartbeat, t, lease, skew))
    {
        return Err(BiError::NodeTaken { node });
    }
    let record = NodeRecord {
        holder: token,
        heartbeat: t,
        ..prev
    };
    view.store_to_memory(at, &record)?;
    Ok(prev)
}

/// What a check of a node's claim needs: the node's view of memory, where its record
/// lies, its id, the token this runtime claimed it with, and the faults switched off.
#[derive(Clone, Copy)]
pub(crate) struct Claimed<'a, V> {
    pub(crate) view: &'a V,
    pub(crate) at: usize,
    pub(crate) node: usize,
    pub(crate) token: u64,
    pub(crate) faults: Faults,
}

impl<V: MemView> Claimed<'_, V> {
    /// The node's record as memory holds it, if memory still names this runtime as the
    /// node's holder ([`BiError::NodeTaken`] otherwise).
    fn held(&self) -> Result<NodeRecord, BiError> {
        let r: NodeRecord = self.view.load_from_memory(self.at)?;
        if r.holder == self.token || self.faults.has(Fault::NodeClaim) {
            Ok(r)
        } else {
            Err(BiError::NodeTaken { node: self.node })
        }
    }

    /// Checks that memory still names this runtime as the node's holder.
    pub(crate) fn check(&self) -> Result<(), BiError> {
        if self.faults.has(Fault::NodeClaim) {
            return Ok(());
        }
        self.held().map(drop)
    }

    /// Clears this runtime's claim and heartbeat, if memory still names it.
    pub(crate) fn release(&self) -> Result<(), BiError> {
        let cleared = NodeRecord {
            holder: 0,
            heartbeat: 0,
            ..self.held()?
        };
        Ok(self.view.store_to_memory(self.at, &cleared)?)
    }
}
