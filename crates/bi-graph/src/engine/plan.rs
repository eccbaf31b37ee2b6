//! What each partition holds: its local vertices, its masters and their replicas, and
//! compressed adjacency (CSR) of its own edges over local indices.
//!
//! Everything here is private to one partition and read-only while the program runs.
//! Local indices are dense `0..locals` in increasing global order, so a partition's
//! per-vertex arrays are contiguous and its edge arrays are a few `u32`s per edge.

use crate::edge_list::EdgeList;
use crate::partition::VertexCut;

/// Adjacency of one direction: `cols[offsets[l]..offsets[l + 1]]` are the neighbours of
/// local vertex `l` (local indices), with the matching weights when the graph has them.
#[derive(Debug, Default)]
pub(crate) struct Csr {
    pub offsets: Vec<usize>,
    pub cols: Vec<u32>,
    pub weights: Option<Vec<f64>>,
}

impl Csr {
    #[inline]
    pub fn range(&self, l: usize) -> std::ops::Range<usize> {
        self.offsets[l]..self.offsets[l + 1]
    }

    #[inline]
    pub fn weight(&self, e: usize) -> f64 {
        self.weights.as_ref().map_or(1.0, |w| w[e])
    }
}

/// Which adjacency a partition needs, and which local edges make a replica *feed* its
/// master (send it a partial each superstep).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Needs {
    pub incoming: bool,
    pub outgoing: bool,
    /// A replica with local in-edges feeds (it gathers across them, or is signalled
    /// across them).
    pub feed_in: bool,
    /// A replica with local out-edges feeds.
    pub feed_out: bool,
}

/// One partition's static view of the graph.
#[derive(Debug, Default)]
pub(crate) struct PartPlan {
    /// Global index of each local vertex, ascending.
    pub globals: Vec<u32>,
    /// Master partition of each local vertex.
    pub master_of: Vec<u8>,
    /// Index of each local vertex among its master partition's masters.
    pub master_index: Vec<u32>,
    /// Local index of each master of this partition, by master index. Masters with
    /// replicas come first (so the lines other partitions read are one prefix of the
    /// value array), each group in increasing vertex order.
    pub masters: Vec<u32>,
    /// How many masters have replicas (the prefix of `masters`).
    pub mirrored: usize,
    /// For master `i`, its replicas are `mirror_start[i]..mirror_start[i + 1]` of the two
    /// arrays below, in increasing partition order.
    pub mirror_start: Vec<u32>,
    /// Partition of each replica.
    pub mirror_part: Vec<u8>,
    /// Local index of each replica in its partition.
    pub mirror_local: Vec<u32>,
    /// Whether each replica feeds its master a partial (has local edges it gathers or is
    /// signalled across). A replica that does not is only read from: with a cut that
    /// keeps a vertex's gather edges beside its master, no replica feeds.
    pub mirror_feeds: Vec<bool>,
    /// Whether each local vertex is a replica that feeds its master.
    pub feeds: Vec<bool>,
    /// In-edges of each local vertex (sources).
    pub incoming: Option<Csr>,
    /// Out-edges of each local vertex (targets).
    pub outgoing: Option<Csr>,
}

impl PartPlan {
    pub fn locals(&self) -> usize {
        self.globals.len()
    }

    /// Number of replicas on partition `q` of masters held here.
    pub fn mirrors_on(&self, q: usize) -> usize {
        self.mirror_part
            .iter()
            .filter(|&&p| usize::from(p) == q)
            .count()
    }

    /// Number of local vertices feeding a master on partition `q` (their partial slots).
    pub fn feeders_of(&self, q: usize) -> usize {
        self.master_of
            .iter()
            .zip(&self.feeds)
            .filter(|&(&p, &feeds)| feeds && usize::from(p) == q)
            .count()
    }
}

/// Builds every partition's plan from a cut.
pub(crate) fn build(graph: &EdgeList, cut: &VertexCut, needs: Needs) -> Vec<PartPlan> {
    let parts = cut.parts();
    let mut plans: Vec<PartPlan> = (0..parts).map(|_| PartPlan::default()).collect();
    let presence = cut.presence_all();
    let master = cut.masters_all();
    let mut next_local = vec![0u32; parts];
    let mut total = vec![0usize; parts];
    for (&set, &m) in presence.iter().zip(master) {
        let plan = &mut plans[usize::from(m)];
        plan.mirrored += usize::from(set.count_ones() > 1);
        total[usize::from(m)] += 1;
    }
    for (plan, &t) in plans.iter_mut().zip(&total) {
        plan.masters = vec![0; t];
    }
    let mut next_mirrored = vec![0u32; parts];
    let mut next_plain: Vec<u32> = plans.iter().map(|p| p.mirrored as u32).collect();
    let mut spots: Vec<(u8, u32)> = Vec::with_capacity(parts);
    for (v, (&set, &m)) in presence.iter().zip(master).enumerate() {
        let is_mirrored = set.count_ones() > 1;
        let counter = if is_mirrored {
            &mut next_mirrored[usize::from(m)]
        } else {
            &mut next_plain[usize::from(m)]
        };
        let m_index = *counter;
        *counter += 1;
        spots.clear();
        let mut rest = set;
        while rest != 0 {
            let q = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let l = next_local[q];
            next_local[q] += 1;
            let plan = &mut plans[q];
            plan.globals.push(v as u32);
            plan.master_of.push(m);
            plan.master_index.push(m_index);
            spots.push((q as u8, l));
        }
        let mp = &mut plans[usize::from(m)];
        for &(q, l) in &spots {
            if q == m {
                mp.masters[m_index as usize] = l;
            } else {
                mp.mirror_part.push(q);
                mp.mirror_local.push(l);
            }
        }
        if is_mirrored {
            mp.mirror_start.push(mp.mirror_part.len() as u32);
        }
    }
    for plan in &mut plans {
        // Ends of the mirrored masters' lists were pushed in master order; put the
        // leading zero in front and give the masters without replicas empty lists.
        plan.mirror_start.insert(0, 0);
        let end = plan.mirror_part.len() as u32;
        plan.mirror_start.resize(plan.masters.len() + 1, end);
    }
    // Edge indices grouped by partition (one counting sort), so each partition reads
    // only its own edges.
    let edge_part = cut.edge_partitions();
    let mut starts = vec![0usize; parts + 1];
    for &q in edge_part {
        starts[usize::from(q) + 1] += 1;
    }
    for q in 0..parts {
        starts[q + 1] += starts[q];
    }
    let mut by_part = vec![0u32; edge_part.len()];
    let mut fill = starts.clone();
    for (e, &q) in edge_part.iter().enumerate() {
        by_part[fill[usize::from(q)]] = e as u32;
        fill[usize::from(q)] += 1;
    }
    drop(fill);
    // Per partition: global -> local map (reused), then counting sort of its edges.
    let mut to_local = vec![u32::MAX; graph.num_vertices()];
    for (q, plan) in plans.iter_mut().enumerate() {
        for (l, &v) in plan.globals.iter().enumerate() {
            to_local[v as usize] = l as u32;
        }
        let own = &by_part[starts[q]..starts[q + 1]];
        let mine = || own.iter().map(|&e| (e as usize, &graph.edges[e as usize]));
        let build_dir = |incoming: bool| -> Csr {
            let n = plan.globals.len();
            let mut offsets = vec![0usize; n + 1];
            for (_, &(u, v)) in mine() {
                let key = if incoming { v } else { u };
                offsets[to_local[key as usize] as usize + 1] += 1;
            }
            for i in 0..n {
                offsets[i + 1] += offsets[i];
            }
            let total = offsets[n];
            let mut cols = vec![0u32; total];
            let mut weights = graph.weights.as_ref().map(|_| vec![0f64; total]);
            let mut fill = offsets.clone();
            for (e, &(u, v)) in mine() {
                let (key, other) = if incoming { (v, u) } else { (u, v) };
                let slot = &mut fill[to_local[key as usize] as usize];
                cols[*slot] = to_local[other as usize];
                if let Some(w) = &mut weights {
                    w[*slot] = graph.weight(e);
                }
                *slot += 1;
            }
            Csr {
                offsets,
                cols,
                weights,
            }
        };
        plan.incoming = needs.incoming.then(|| build_dir(true));
        plan.outgoing = needs.outgoing.then(|| build_dir(false));
        let mut feeds = vec![false; plan.globals.len()];
        for (_, &(u, v)) in mine() {
            feeds[to_local[v as usize] as usize] |= needs.feed_in;
            feeds[to_local[u as usize] as usize] |= needs.feed_out;
        }
        for (f, &m) in feeds.iter_mut().zip(&plan.master_of) {
            *f &= usize::from(m) != q;
        }
        plan.feeds = feeds;
        for &v in &plan.globals {
            to_local[v as usize] = u32::MAX;
        }
    }
    for m in 0..parts {
        let feeds = plans[m]
            .mirror_part
            .iter()
            .zip(&plans[m].mirror_local)
            .map(|(&q, &l)| plans[usize::from(q)].feeds[l as usize])
            .collect();
        plans[m].mirror_feeds = feeds;
    }
    plans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Partitioner;

    /// A pull program's needs: gather over in-edges, no scatter.
    const PULL: Needs = Needs {
        incoming: true,
        outgoing: false,
        feed_in: true,
        feed_out: false,
    };

    fn feeders(plans: &[PartPlan]) -> usize {
        plans
            .iter()
            .map(|p| p.feeds.iter().filter(|&&f| f).count())
            .sum()
    }

    #[test]
    fn replicas_feed_only_across_their_gather_edges() {
        let g = EdgeList {
            ids: (0..200).collect(),
            edges: (0..200u32)
                .flat_map(|u| [(u, (u * 7 + 1) % 200), (u, (u * 13 + 5) % 200)])
                .collect(),
            weights: None,
        };
        for parts in [2, 3] {
            let random = VertexCut::new(&g, parts, Partitioner::Random, 1).unwrap();
            let plans = build(&g, &random, PULL);
            assert!(feeders(&plans) > 0, "a vertex cut splits some in-edges");
            for (q, plan) in plans.iter().enumerate() {
                for (l, &feeds) in plan.feeds.iter().enumerate() {
                    let in_edges = plan.incoming.as_ref().unwrap().range(l).len();
                    let replica = usize::from(plan.master_of[l]) != q;
                    assert_eq!(feeds, replica && in_edges > 0);
                }
            }
            // Every master's list of feeding replicas matches the replicas' own flags.
            let listed: usize = plans
                .iter()
                .map(|p| p.mirror_feeds.iter().filter(|&&f| f).count())
                .sum();
            assert_eq!(listed, feeders(&plans));
            let by_target = VertexCut::new(&g, parts, Partitioner::ByTarget, 1).unwrap();
            let plans = build(&g, &by_target, PULL);
            assert!(
                plans.iter().any(|p| !p.mirror_part.is_empty()),
                "sources are replicated"
            );
            assert_eq!(feeders(&plans), 0, "in-edges sit beside their master");
        }
    }
}
