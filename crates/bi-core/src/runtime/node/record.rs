//! A node's record and the lease arithmetic every party shares: when a heartbeat shows
//! its node run by a live process (claims, roles, the grace point, a joining process),
//! and when it still covers a write (the writer's lease and the pool lock's).

use crate::runtime::config::RuntimeConfig;
use bytemuck::{Pod, Zeroable};

/// A node's published quiescence record (first slot of its node record).
///
/// ```
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// let rep = s.nodes[1].quiesce().unwrap();
/// let rec = s.nodes[1].record().unwrap();
/// assert_eq!((rec.start, rec.end, rec.heartbeat), (rep.start, rep.end, rep.end));
/// assert_eq!((rec.passes, rec.overflows, rec.expired_readers), (1, 0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct NodeRecord {
    /// Start tick of the last pass.
    pub start: u64,
    /// End tick of the last pass.
    pub end: u64,
    /// Reclaim point: objects whose freed entry became visible more than `D` before it
    /// are gone from this node.
    pub reclaim: u64,
    /// Heartbeat (the last pass's end).
    pub heartbeat: u64,
    /// Passes run.
    pub passes: u64,
    /// Log overflows and lease expiries handled by whole-heap invalidation.
    pub overflows: u64,
    /// Reader exclusions for an expired lease, in total (a reader that stays stopped is
    /// counted again by every pass that sees it).
    pub expired_readers: u64,
    /// The token of the process running the node, 0 if none ([`claim`](crate::runtime::claim)).
    pub holder: u64,
}

// One whole line on x86: a claim replaces it whole ([`claim`](crate::runtime::claim)).
const _: () = assert!(size_of::<NodeRecord>() == 64);

impl NodeRecord {
    /// Whether the node is run by a live process at `now` (this host's clock), judged
    /// with `config`'s node lease and skew: it has a holder whose heartbeat is within a
    /// lease of now.
    ///
    /// ```
    /// use bi_core::runtime::{NodeRecord, RuntimeConfig};
    ///
    /// let config = RuntimeConfig::default().node_lease(1_000);
    /// let r = NodeRecord { holder: 7, heartbeat: 5_000, ..NodeRecord::default() };
    /// assert!(r.is_live(5_500, &config));
    /// assert!(!r.is_live(7_000, &config)); // its lease lapsed
    /// assert!(!NodeRecord::default().is_live(0, &config)); // never claimed
    /// ```
    pub fn is_live(&self, now: u64, config: &RuntimeConfig) -> bool {
        live(
            self.holder,
            self.heartbeat,
            now,
            config.node_lease,
            config.skew,
        )
    }
}

/// Whether a node whose record says `holder` and `heartbeat` is live at `now` (this
/// node's clock): it has a holder, and its heartbeat is not older than the lease allowing
/// for `D`. A heartbeat further ahead of `now` than `D` plus a lease was stamped by a
/// clock this one does not continue (before a reboot, say): its holder is gone.
pub(crate) fn live(holder: u64, heartbeat: u64, now: u64, lease: u64, skew: u64) -> bool {
    holder != 0
        && heartbeat.saturating_add(lease) >= now.saturating_sub(skew)
        && heartbeat <= now.saturating_add(skew).saturating_add(lease)
}

/// Whether a heartbeat written at `heartbeat` still covers a write at `now`: younger
/// than half the node lease (the other half is the margin for the write). The pool
/// lock's holder judges its own lease by the same rule ([`PoolLockGuard::check`]).
///
/// [`PoolLockGuard::check`]: crate::runtime::PoolLockGuard::check
pub(crate) fn covers(heartbeat: u64, now: u64, lease: u64) -> bool {
    now.saturating_sub(heartbeat) < lease / 2
}

#[cfg(test)]
mod tests {
    use super::{NodeRecord, covers};
    use crate::runtime::RuntimeConfig;

    #[test]
    fn a_node_is_live_while_its_holder_heartbeats_within_its_lease() {
        let config = RuntimeConfig::default().node_lease(1_000);
        let held = NodeRecord {
            holder: 7,
            heartbeat: 5_000,
            ..NodeRecord::default()
        };
        assert!(held.is_live(5_500, &config));
        assert!(
            !held.is_live(5_000 + 1_000 + config.skew + 1, &config),
            "lapsed"
        );
        let released = NodeRecord { holder: 0, ..held };
        assert!(!released.is_live(5_500, &config), "no holder");
    }

    #[test]
    fn a_heartbeat_covers_writes_for_half_a_lease() {
        assert!(covers(100, 100, 1_000));
        assert!(covers(100, 599, 1_000));
        assert!(!covers(100, 600, 1_000));
        // A heartbeat ahead of this clock (another thread refreshed it first) covers.
        assert!(covers(700, 600, 1_000));
    }
}
