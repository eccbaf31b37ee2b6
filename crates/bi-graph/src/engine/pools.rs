//! Pools of partitions for the two-level mode: partitions of one pool share a region
//! (Bounded Incoherence between them), pools exchange messages (MPI between them).
//!
//! A master's value crosses to another pool once per superstep: to its *receiver* there,
//! the pool's lowest partition holding a replica, which stores it in one of its mirror
//! slots; every replica of that pool reads the mirror slot in place. Partials cross as
//! one message per replica, so a master still folds them in increasing partition order
//! and the values equal the single-pool run's bit for bit.

use super::plan::{PartPlan, Vertices};
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
    /// `received[q][p]`: the values partition `q` sends partition `p` each superstep.
    received: Vec<Vec<usize>>,
}

/// `parts` rows of which row `p` is `own` and the others are empty.
fn own_row<T>(parts: usize, p: usize, own: Vec<T>) -> Vec<Vec<T>> {
    let mut rows: Vec<Vec<T>> = (0..parts).map(|_| Vec::new()).collect();
    if let Some(row) = rows.get_mut(p) {
        *row = own;
    }
    rows
}

/// Counts the first slot of each mirror as masters are visited in order: every
/// partition's masters, partition by partition, in each partition's master order.
struct Slots {
    pool_size: usize,
    mirrors: Vec<usize>,
    received: Vec<Vec<usize>>,
}

impl Slots {
    fn new(parts: usize, pool_size: usize) -> Slots {
        Slots {
            pool_size,
            mirrors: vec![0; parts],
            received: vec![vec![0; parts]; parts],
        }
    }

    /// The mirrors of a master on partition `m` whose replicas are `replicas` (each a
    /// partition and what the caller knows of the replica there), in increasing
    /// partition order: `each(replica, its target, whether the target is new)` for each
    /// replica in another pool, whose receiver (the pool's first replica) takes a new
    /// slot.
    fn visit<R>(
        &mut self,
        m: usize,
        replicas: impl Iterator<Item = (usize, R)>,
        mut each: impl FnMut((usize, R), (u32, u32), bool),
    ) {
        let pool = |q: usize| q / self.pool_size;
        let mut current: Option<(usize, (u32, u32))> = None;
        for (q, r) in replicas {
            if pool(q) == pool(m) {
                continue;
            }
            match current {
                Some((b, target)) if b == pool(q) => each((q, r), target, false),
                _ => {
                    let target = (q as u32, self.mirrors[q] as u32);
                    self.mirrors[q] += 1;
                    self.received[m][q] += 1;
                    current = Some((pool(q), target));
                    each((q, r), target, true);
                }
            }
        }
    }
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
        let mut slots = Slots::new(parts, size);
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
                let replicas = replicas.map(|r| {
                    let q = usize::from(plan.mirror_part[r]);
                    (q, plan.mirror_local[r] as usize)
                });
                slots.visit(m, replicas, |(q, l), target, new| {
                    if new {
                        to.push(target);
                    }
                    replica_mirror[q][l] = Some(target);
                });
                starts.push(to.len() as u32);
            }
            send_start.push(starts);
            sends.push(to);
        }
        Ok(Pools {
            size,
            mirrors: slots.mirrors,
            replica_mirror,
            send_start,
            sends,
            received: slots.received,
        })
    }

    /// What partition `p` (of `plan`) needs of the pools, from the vertex tables every
    /// partition of a graph read in shares holds: every partition's mirror slots, its
    /// own replicas' mirrors and its own masters' sends (the other partitions' rows are
    /// empty). The same as [`new`](Self::new)'s rows for `p`.
    pub fn of_share(
        p: usize,
        plan: &PartPlan,
        vertices: Vertices<'_>,
        parts: usize,
        size: usize,
    ) -> Result<Pools, GraphError> {
        if size == 0 {
            return Err(GraphError::InvalidArgument {
                reason: "a pool has at least one partition".into(),
            });
        }
        // Each partition's masters with replicas, in its master order (increasing vertex
        // order): masters without replicas have no mirrors.
        let mut mirrored: Vec<Vec<u32>> = vec![Vec::new(); parts];
        for (v, (&m, &bits)) in vertices.master.iter().zip(vertices.presence).enumerate() {
            if bits & !(1 << m) != 0 {
                mirrored[usize::from(m)].push(v as u32);
            }
        }
        let mut slots = Slots::new(parts, size);
        let mut replica_mirror = vec![None; plan.locals()];
        let mut to = Vec::new();
        let mut starts = Vec::with_capacity(plan.masters.len() + 1);
        starts.push(0);
        for (m, masters) in mirrored.iter().enumerate() {
            for &v in masters {
                let bits = vertices.presence[v as usize] & !(1 << m);
                let replicas = (0..parts).filter(|&q| bits & (1 << q) != 0);
                slots.visit(m, replicas.map(|q| (q, ())), |(q, ()), target, new| {
                    if new && m == p {
                        to.push(target);
                    }
                    if q == p
                        && let Ok(l) = plan.globals.binary_search(&v)
                    {
                        replica_mirror[l] = Some(target);
                    }
                });
                if m == p {
                    starts.push(to.len() as u32);
                }
            }
        }
        // The masters without replicas send nothing.
        starts.resize(plan.masters.len() + 1, to.len() as u32);
        Ok(Pools {
            size,
            mirrors: slots.mirrors,
            replica_mirror: own_row(parts, p, replica_mirror),
            send_start: own_row(parts, p, starts),
            sends: own_row(parts, p, to),
            received: slots.received,
        })
    }

    /// The pool of partition `q`.
    #[inline]
    pub fn of(&self, q: usize) -> usize {
        q / self.size
    }

    /// Value messages partition `q` sends partition `p` each superstep.
    pub fn values_from(&self, q: usize, p: usize) -> usize {
        self.received[q][p]
    }
}
