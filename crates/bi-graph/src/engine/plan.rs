//! What each partition holds: its local vertices, its masters and their replicas, and
//! compressed adjacency (CSR) of its own edges over local indices.
//!
//! Everything here is private to one partition and read-only while the program runs.
//! Local indices are dense `0..locals` in increasing global order, so a partition's
//! per-vertex arrays are contiguous and its edge arrays are a few `u32`s per edge.

use super::program::VertexProgram;
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

impl Needs {
    /// What `program` walks and sends.
    pub fn of<P: VertexProgram>(program: &P) -> Needs {
        let (gdir, sdir) = (program.gather_direction(), program.scatter_direction());
        let scatters = !program.always_active();
        // Signalling programs also walk their gather edges backwards, from a changed
        // vertex to the neighbours whose partial it puts out of date. A replica feeds its
        // master across the edges it gathers over, and across those a neighbour's
        // scatter signals it over (the reverse of the scatter direction).
        Needs {
            incoming: gdir.incoming() || (scatters && (sdir.incoming() || gdir.outgoing())),
            outgoing: gdir.outgoing() || (scatters && (sdir.outgoing() || gdir.incoming())),
            feed_in: gdir.incoming() || (scatters && sdir.outgoing()),
            feed_out: gdir.outgoing() || (scatters && sdir.incoming()),
        }
    }
}

/// What the other partitions need of one partition's plan: the sizes of its shared
/// arrays and how many messages it sends each. Partitions that each hold only their own
/// plan gather these to lay out the region and count what they receive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PartShape {
    /// Masters held here (value slots).
    pub masters: usize,
    /// `feeders[m]`: local vertices feeding a master on partition `m` (partial slots).
    pub feeders: Vec<usize>,
    /// `mirrors[q]`: replicas on partition `q` of masters held here.
    pub mirrors: Vec<usize>,
}

impl PartShape {
    /// Local vertices feeding a master elsewhere: the partition's partial slots.
    pub fn feeding(&self) -> usize {
        self.feeders.iter().sum()
    }

    /// The shape as words: masters, then the feeders, then the mirrors.
    pub fn words(&self) -> Vec<u64> {
        std::iter::once(self.masters)
            .chain(self.feeders.iter().copied())
            .chain(self.mirrors.iter().copied())
            .map(|n| n as u64)
            .collect()
    }

    /// Every partition's shape from their [`words`](Self::words), one after the other.
    pub fn all_from_words(words: &[u64], parts: usize) -> Option<Vec<PartShape>> {
        let each = 1 + 2 * parts;
        if words.len() != each * parts {
            return None;
        }
        words
            .chunks_exact(each)
            .map(|w| {
                let n = |x: &u64| usize::try_from(*x).ok();
                Some(PartShape {
                    masters: n(&w[0])?,
                    feeders: w[1..=parts].iter().map(n).collect::<Option<_>>()?,
                    mirrors: w[1 + parts..].iter().map(n).collect::<Option<_>>()?,
                })
            })
            .collect()
    }
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

    /// What the other partitions of a run of `parts` need of this plan.
    pub fn shape(&self, parts: usize) -> PartShape {
        let mut shape = PartShape {
            masters: self.masters.len(),
            feeders: vec![0; parts],
            mirrors: vec![0; parts],
        };
        for (&m, _) in self.master_of.iter().zip(&self.feeds).filter(|(_, f)| **f) {
            if let Some(n) = shape.feeders.get_mut(usize::from(m)) {
                *n += 1;
            }
        }
        for &q in &self.mirror_part {
            if let Some(n) = shape.mirrors.get_mut(usize::from(q)) {
                *n += 1;
            }
        }
        shape
    }
}

/// What a partition must know of every vertex to build its own plan, the same on every
/// partition: the partitions it lives on, its master's partition, and the partitions
/// whose replica of it feeds its master. One entry per vertex in each.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Vertices<'a> {
    pub presence: &'a [u64],
    pub master: &'a [u8],
    pub feeds: &'a [u64],
}

#[cfg_attr(not(feature = "mpi"), allow(dead_code))] // a share runs over MPI
impl Vertices<'_> {
    /// How many replicas on partition `q` feed a master on partition `p` (the partials
    /// `p` receives from `q` each superstep).
    pub fn feeders(&self, q: usize, p: usize) -> usize {
        Self::masters_marked(self.master, self.feeds, p, q)
    }

    /// How many masters on partition `q` have a replica on partition `p` (the values
    /// `p` receives from `q` each superstep).
    pub fn replicated(&self, q: usize, p: usize) -> usize {
        Self::masters_marked(self.master, self.presence, q, p)
    }

    /// How many vertices whose master is on `owner` have `other`'s bit in `table`
    /// (none when they are one partition).
    fn masters_marked(master: &[u8], table: &[u64], owner: usize, other: usize) -> usize {
        if owner == other {
            return 0;
        }
        master
            .iter()
            .zip(table)
            .filter(|&(&m, &bits)| usize::from(m) == owner && bits & (1 << other) != 0)
            .count()
    }
}

/// Marks in `feeds` the replicas on partition `q` that feed their master across `q`'s
/// `edges`: the targets of its edges where replicas gather or are signalled across
/// in-edges, the sources where across out-edges.
pub(crate) fn mark_feeders(
    q: usize,
    master: &[u8],
    edges: impl Iterator<Item = (u32, u32)>,
    needs: Needs,
    feeds: &mut [u64],
) {
    let mut mark = |x: u32| {
        if usize::from(master[x as usize]) != q {
            feeds[x as usize] |= 1 << q;
        }
    };
    for (u, v) in edges {
        if needs.feed_in {
            mark(v);
        }
        if needs.feed_out {
            mark(u);
        }
    }
}

/// Partition `q`'s plan (of `parts`), from the vertex tables and its own edges: `edges()`
/// yields them as `(source, target, weight)` in the graph's edge order; their weights are
/// kept when `weighted`. What it builds depends on nothing else, so a partition that
/// loaded only its own edges builds the plan a process holding the whole graph builds.
pub(crate) fn build_one<I: Iterator<Item = (u32, u32, f64)>>(
    q: usize,
    parts: usize,
    vertices: Vertices<'_>,
    edges: impl Fn() -> I,
    weighted: bool,
    needs: Needs,
) -> PartPlan {
    let Vertices {
        presence,
        master,
        feeds,
    } = vertices;
    let here = 1u64 << q;
    let mut plan = PartPlan::default();
    // Masters with replicas come first on their partition, each group in vertex order.
    let mut mirrored = vec![0u32; parts];
    let mut total = vec![0usize; parts];
    for (&set, &m) in presence.iter().zip(master) {
        mirrored[usize::from(m)] += u32::from(set.count_ones() > 1);
        total[usize::from(m)] += 1;
    }
    plan.mirrored = mirrored[q] as usize;
    plan.masters = vec![0; total[q]];
    let mut next_mirrored = vec![0u32; parts];
    let mut next_plain = mirrored;
    // The local index the next vertex living on each partition gets there.
    let mut next_local = vec![0u32; parts];
    for (v, (&set, &m)) in presence.iter().zip(master).enumerate() {
        let is_mirrored = set.count_ones() > 1;
        let counter = if is_mirrored {
            &mut next_mirrored[usize::from(m)]
        } else {
            &mut next_plain[usize::from(m)]
        };
        let m_index = *counter;
        *counter += 1;
        if set & here != 0 {
            plan.globals.push(v as u32);
            plan.master_of.push(m);
            plan.master_index.push(m_index);
            if usize::from(m) == q {
                plan.masters[m_index as usize] = next_local[q];
            }
        }
        if usize::from(m) == q {
            let mut rest = set & !here;
            while rest != 0 {
                let r = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                plan.mirror_part.push(r as u8);
                plan.mirror_local.push(next_local[r]);
                plan.mirror_feeds.push(feeds[v] & (1 << r) != 0);
            }
            if is_mirrored {
                plan.mirror_start.push(plan.mirror_part.len() as u32);
            }
        }
        let mut rest = set;
        while rest != 0 {
            next_local[rest.trailing_zeros() as usize] += 1;
            rest &= rest - 1;
        }
    }
    // Ends of the mirrored masters' lists were pushed in master order; put the leading
    // zero in front and give the masters without replicas empty lists.
    plan.mirror_start.insert(0, 0);
    let end = plan.mirror_part.len() as u32;
    plan.mirror_start.resize(plan.masters.len() + 1, end);
    plan.feeds = plan
        .globals
        .iter()
        .map(|&v| feeds[v as usize] & here != 0)
        .collect();
    let mut to_local = vec![u32::MAX; presence.len()];
    for (l, &v) in plan.globals.iter().enumerate() {
        to_local[v as usize] = l as u32;
    }
    let build_dir = |incoming: bool| -> Csr {
        let n = plan.globals.len();
        let mut offsets = vec![0usize; n + 1];
        for (u, v, _) in edges() {
            let key = if incoming { v } else { u };
            offsets[to_local[key as usize] as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let total = offsets[n];
        let mut cols = vec![0u32; total];
        let mut weights = weighted.then(|| vec![0f64; total]);
        let mut fill = offsets.clone();
        for (u, v, w) in edges() {
            let (key, other) = if incoming { (v, u) } else { (u, v) };
            let slot = &mut fill[to_local[key as usize] as usize];
            cols[*slot] = to_local[other as usize];
            if let Some(ws) = &mut weights {
                ws[*slot] = w;
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
    plan
}

/// Builds every partition's plan from a cut of the whole graph.
pub(crate) fn build(graph: &EdgeList, cut: &VertexCut, needs: Needs) -> Vec<PartPlan> {
    let parts = cut.parts();
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
    let own = |q: usize| {
        by_part[starts[q]..starts[q + 1]].iter().map(|&e| {
            let (u, v) = graph.edges[e as usize];
            (u, v, graph.weight(e as usize))
        })
    };
    let mut feeds = vec![0u64; graph.num_vertices()];
    for q in 0..parts {
        let edges = own(q).map(|(u, v, _)| (u, v));
        mark_feeders(q, cut.masters_all(), edges, needs, &mut feeds);
    }
    let vertices = Vertices {
        presence: cut.presence_all(),
        master: cut.masters_all(),
        feeds: &feeds,
    };
    let weighted = graph.weights.is_some();
    (0..parts)
        .map(|q| build_one(q, parts, vertices, || own(q), weighted, needs))
        .collect()
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
