//! Pools of partitions for the two-level mode: partitions of one pool share a region
//! (Bounded Incoherence between them), pools exchange messages (MPI between them).
//!
//! A master's value crosses to another pool once per superstep: to its *receiver* there,
//! the pool's lowest partition holding a replica, which stores it in one of its mirror
//! slots; every replica of that pool reads the mirror slot in place. Partials cross as
//! one message per replica, so a master still folds them in increasing partition order
//! and the values equal the single-pool run's bit for bit.

use super::plan::PartPlan;
use crate::error::GraphError;

/// Where values cross pools, the same in every partition of a run.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))] // the two-level mode (feature `mpi`)
#[derive(Debug)]
pub(crate) struct Pools {
    /// Partitions per pool (the last pool may have fewer).
    pub size: usize,
    /// Mirror slots of each partition.
    pub mirrors: Vec<usize>,
    /// Per partition, per local vertex: its master's mirror `(receiver, slot)` when the
    /// master is in another pool.
    pub replica_mirror: Vec<Vec<Option<(u32, u32)>>>,
    /// Per partition, per master: `sends[p][send_start[p][i]..send_start[p][i + 1]]` are
    /// the `(receiver, slot)` its value goes to, one per other pool with replicas.
    pub send_start: Vec<Vec<u32>>,
    pub sends: Vec<Vec<(u32, u32)>>,
}

#[cfg_attr(not(feature = "mpi"), allow(dead_code))] // the two-level mode (feature `mpi`)
impl Pools {
    pub fn new(plans: &[PartPlan], size: usize) -> Result<Pools, GraphError> {
        if size == 0 {
            return Err(GraphError::InvalidArgument {
                reason: "a pool has at least one partition".into(),
            });
        }
        let parts = plans.len();
        let pool = |q: usize| q / size;
        let mut mirrors = vec![0usize; parts];
        let mut replica_mirror: Vec<Vec<Option<(u32, u32)>>> =
            plans.iter().map(|p| vec![None; p.locals()]).collect();
        let mut send_start = Vec::with_capacity(parts);
        let mut sends = Vec::with_capacity(parts);
        for (m, plan) in plans.iter().enumerate() {
            let mut starts = Vec::with_capacity(plan.masters.len() + 1);
            let mut to = Vec::new();
            starts.push(0);
            for i in 0..plan.masters.len() {
                let replicas = plan.mirror_start[i] as usize..plan.mirror_start[i + 1] as usize;
                // Replicas come in increasing partition order: the first of each pool is
                // its receiver.
                let mut current: Option<(usize, (u32, u32))> = None;
                for r in replicas {
                    let q = usize::from(plan.mirror_part[r]);
                    if pool(q) == pool(m) {
                        continue;
                    }
                    let target = match current {
                        Some((b, target)) if b == pool(q) => target,
                        _ => {
                            let target = (q as u32, mirrors[q] as u32);
                            mirrors[q] += 1;
                            to.push(target);
                            current = Some((pool(q), target));
                            target
                        }
                    };
                    replica_mirror[q][plan.mirror_local[r] as usize] = Some(target);
                }
                starts.push(to.len() as u32);
            }
            send_start.push(starts);
            sends.push(to);
        }
        Ok(Pools {
            size,
            mirrors,
            replica_mirror,
            send_start,
            sends,
        })
    }

    /// The pool of partition `q`.
    #[inline]
    pub fn of(&self, q: usize) -> usize {
        q / self.size
    }

    /// Value messages partition `q` sends partition `p` each superstep.
    pub fn values_from(&self, q: usize, p: usize) -> usize {
        self.sends[q]
            .iter()
            .filter(|&&(r, _)| r as usize == p)
            .count()
    }
}
