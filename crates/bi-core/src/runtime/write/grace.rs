//! The grace point: the latest writer tick before which retired objects are gone from
//! every live node.

use crate::mem::MemView;
use crate::runtime::record::NodeRecord;
use crate::runtime::{BiError, Fault, NodeInner};

/// The result of [`Writer::synchronize`](crate::runtime::Writer::synchronize): retired objects
/// whose retirement became visible before `tick` (writer clock) may be freed.
///
/// ```
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// let w = s.writer(0);
/// s.quiesce_all().unwrap();
/// let g = w.synchronize().unwrap();
/// assert!(g.lease_expired.is_empty()); // both nodes run
/// assert!(g.tick > 0 && g.tick <= g.now);
/// assert!(g.min_pass_start <= g.now);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GracePoint {
    /// `min` over live nodes of their reclaim point, minus `D`.
    pub tick: u64,
    /// The writer's clock when the records were read.
    pub now: u64,
    /// `min` over live nodes of their last pass start (for log ring space).
    pub min_pass_start: u64,
    /// Nodes excluded: no process runs them, or their heartbeat is older than the node
    /// lease.
    pub lease_expired: Vec<usize>,
    /// Each claimed node's last pass start and heartbeat, its lease live or not: a node
    /// whose last pass started before a ring entry holds that entry until it passes
    /// again or its lease, counted from its heartbeat, lapses.
    pub claimed: Vec<(u64, u64)>,
}

/// Reads every node's record (invalidate all, one fence, read) and combines them.
pub(crate) fn grace<V: MemView>(inner: &NodeInner<V>) -> Result<GracePoint, BiError> {
    let view = &inner.view;
    let d = if inner.config.faults.has(Fault::SkewBound) {
        0
    } else {
        inner.config.skew
    };
    for n in 0..inner.nodes {
        view.invalidate(inner.node_record_of(n)?, size_of::<NodeRecord>())?;
    }
    view.fence();
    let now = inner.clock.refresh();
    let horizon = now.saturating_sub(d);
    let mut point = GracePoint {
        tick: u64::MAX,
        now,
        min_pass_start: u64::MAX,
        lease_expired: Vec::new(),
        claimed: Vec::new(),
    };
    let leased = !inner.config.faults.has(Fault::NodeLease);
    for n in 0..inner.nodes {
        let rec: NodeRecord = view.load(inner.node_record_of(n)?)?;
        let live = if leased {
            crate::runtime::record::live(rec.holder, rec.heartbeat, now, inner.config.node_lease, d)
        } else {
            rec.holder != 0
        };
        if rec.holder != 0 {
            point.claimed.push((rec.start, rec.heartbeat));
        }
        if !live {
            point.lease_expired.push(n);
            continue;
        }
        point.tick = point.tick.min(rec.reclaim);
        point.min_pass_start = point.min_pass_start.min(rec.start);
    }
    if point.tick == u64::MAX {
        // No live node: nobody can hold anything.
        point.tick = horizon;
        point.min_pass_start = horizon;
    }
    point.tick = point.tick.saturating_sub(d);
    Ok(point)
}
