//! A graph read in shares: each partition reads its own part of an edge list and builds
//! only its own plan, so that a graph larger than one machine's memory can run on
//! several. The partitions are MPI ranks (`Placement::Mpi`) or processes launched on one
//! machine ([`launch_shares`](super::launch_shares)), which exchange through files
//! ([`FileGroup`](super::file_group::FileGroup)) and lay their region out from the
//! shapes of each other's plans.
//!
//! # What each partition reads, keeps and exchanges
//!
//! Partition `p` of `k` reads the lines that start in the `p`-th `1 / k` of the file's
//! bytes ([`input::share`](crate::input)). Then, with the others ([`Collective`]):
//!
//! 1. **Dense ids.** Each share's distinct ids are gathered everywhere and merged, so
//!    every partition numbers the vertices as a process reading the whole file does
//!    (the `i`-th smallest id is vertex `i`).
//! 2. **The cut.** Each partition places its edges ([`Partitioner`]: random, grid or by
//!    target place an edge by its endpoints alone; the oblivious greedy cut needs every
//!    edge before it, so it is refused) and sends each to its partition, which receives
//!    them in the file's order.
//! 3. **Per vertex**, one word each, or-ed or summed over the partitions: the partitions
//!    a vertex lives on (its master follows from that, by the same hash), its in- and
//!    out-degree, and (when the run starts) the partitions whose replica of it feeds the
//!    master.
//!
//! From those tables and its own edges a partition builds exactly the plan a process
//! holding the whole graph builds for it (`plan::build_one`, which both call), so the
//! values are those of one process, bit for bit.
//!
//! # Trade-offs
//!
//! - A partition keeps its own edges and a few words per vertex of the whole graph
//!   (ids, presence, master, degrees: about 30 bytes), not the whole edge list: the
//!   vertex tables are what the cut needs everywhere, and they are small next to the
//!   edges of power-law graphs (16 edges per vertex at Graph500 scale).
//! - Only edge lists are read in shares: a Matrix Market file's header and symmetry
//!   rules belong to the whole file.

use super::plan::{self, Needs, PartPlan, Vertices};
use crate::config::Partitioner;
use crate::error::GraphError;
use crate::input::GraphReader;
use crate::partition::{MAX_PARTITIONS, Placer, master_of, replication_factor};
use std::path::Path;

/// What the partitions of a run do together while they load a graph in shares: an MPI
/// communicator, or threads of one process in tests. Every partition calls each method
/// the same number of times, in the same order.
pub trait Collective {
    /// This partition.
    fn partition(&self) -> usize;
    /// Partitions taking part.
    fn partitions(&self) -> usize;
    /// Every partition's `mine`, one after the other in partition order.
    fn all_gather(&self, mine: &[u64]) -> Result<Vec<u64>, GraphError>;
    /// Sends `out[q]` to partition `q`; returns what every partition sent here, one
    /// after the other in partition order. Takes `out` so that it can be freed before
    /// what arrives is.
    fn all_to_all(&self, out: Vec<Vec<u64>>) -> Result<Vec<u64>, GraphError>;
    /// Replaces each of `words` by its bitwise or over the partitions (by default from
    /// [`all_gather`](Self::all_gather); a communicator with reductions of its own
    /// overrides it).
    fn or_all(&self, words: &mut [u64]) -> Result<(), GraphError> {
        let all = self.all_gather(words)?;
        for table in tables_of(&all, words.len(), self.partitions())? {
            for (w, &x) in words.iter_mut().zip(table) {
                *w |= x;
            }
        }
        Ok(())
    }
    /// Replaces each of `counts` by its sum over the partitions (by default from
    /// [`all_gather`](Self::all_gather), wrapping).
    fn sum_all(&self, counts: &mut [u32]) -> Result<(), GraphError> {
        let mine: Vec<u64> = counts.iter().map(|&c| u64::from(c)).collect();
        let all = self.all_gather(&mine)?;
        let tables = tables_of(&all, counts.len(), self.partitions())?;
        counts.fill(0);
        for table in tables {
            for (c, &x) in counts.iter_mut().zip(table) {
                *c = c.wrapping_add(x as u32);
            }
        }
        Ok(())
    }
}

/// Every partition's table of `len` words in `all`, one after the other.
fn tables_of(
    all: &[u64],
    len: usize,
    parts: usize,
) -> Result<std::slice::ChunksExact<'_, u64>, GraphError> {
    if all.len() != len * parts {
        return Err(GraphError::Exchange {
            what: "partitions reduced tables of different lengths",
        });
    }
    Ok(all.chunks_exact(len.max(1)))
}

/// One partition's share of a graph (see the module docs): every vertex's id and
/// tables, this partition's edges.
#[derive(Debug)]
pub struct GraphShare {
    part: usize,
    parts: usize,
    ids: Vec<u64>,
    /// This partition's edges, in the file's order.
    edges: Vec<(u32, u32)>,
    weights: Option<Vec<f64>>,
    total_edges: usize,
    presence: Vec<u64>,
    master: Vec<u8>,
    in_degree: Vec<u32>,
    out_degree: Vec<u32>,
}

/// A partition's word in the first exchange when it could not read its share.
const FAILED: u64 = 3;

fn refused(reason: String) -> GraphError {
    GraphError::InvalidArgument { reason }
}

impl GraphShare {
    /// Reads this partition's share of the edge list at `path` with `reader`'s options
    /// and cuts it with `partitioner` and `seed`, together with the other partitions of
    /// `collective` (each calls this once).
    ///
    /// # Errors
    ///
    /// What reading a file gives ([`GraphError::Io`], [`GraphError::Parse`] with the
    /// line's number in the whole file), and [`GraphError::InvalidArgument`] for a
    /// Matrix Market file, the oblivious cut, more than [`MAX_PARTITIONS`] partitions,
    /// lines of which some carry weights and some do not, or more vertices or edges
    /// than 32-bit indices number.
    pub fn read(
        reader: &GraphReader,
        path: &Path,
        partitioner: Partitioner,
        seed: u64,
        collective: &dyn Collective,
    ) -> Result<GraphShare, GraphError> {
        let (part, parts) = (collective.partition(), collective.partitions());
        if parts == 0 || parts > MAX_PARTITIONS || part >= parts {
            return Err(refused(format!(
                "partition {part} of {parts}: 1 to {MAX_PARTITIONS} partitions are supported"
            )));
        }
        let placer = Placer::new(partitioner, parts, seed).ok_or_else(|| {
            refused(
                "the oblivious cut places each edge after all the edges before it: a graph \
                 read in shares is cut by random, grid or by-target"
                    .into(),
            )
        })?;
        let raw = reader.read_share(path, part, parts);
        // Every partition learns whether the others read their share, so none waits for
        // one that gave up; and either every edge line of the file has a weight or none
        // has.
        let flag = match &raw {
            Err(_) => FAILED,
            Ok(raw) => raw.weighted.map_or(0, |w| 1 + u64::from(w)),
        };
        let flags = collective.all_gather(&[flag])?;
        let raw = raw?;
        if let Some(q) = flags.iter().position(|&f| f == FAILED) {
            return Err(refused(format!(
                "partition {q} could not read its share of {}",
                path.display()
            )));
        }
        let weighted = flags.contains(&2);
        if weighted && flags.contains(&1) {
            return Err(GraphError::Parse {
                file: path.to_path_buf(),
                line: 0,
                problem: "some edge lines have a weight and some do not".into(),
            });
        }
        let ids = dense_ids(&raw.ends, collective)?;
        let index = |id: u64| ids.binary_search(&id).map(|i| i as u32);
        let counts = collective.all_gather(&[raw.ends.len() as u64 / 2])?;
        let total_edges = usize::try_from(counts.iter().sum::<u64>()).unwrap_or(usize::MAX);
        if u32::try_from(total_edges).is_err() {
            return Err(refused(format!(
                "{total_edges} edges do not fit 32-bit indices"
            )));
        }
        // Each edge to its partition: source and target in one word (and weight bits).
        let mut out = vec![Vec::new(); parts];
        for (e, pair) in raw.ends.chunks_exact(2).enumerate() {
            // Every id of every share is in `ids`.
            let (Ok(u), Ok(v)) = (index(pair[0]), index(pair[1])) else {
                return Err(GraphError::Exchange {
                    what: "an id of this share is missing from the merged ids",
                });
            };
            let to = &mut out[usize::from(placer.place(u, v))];
            to.push((u64::from(u) << 32) | u64::from(v));
            if let Some(w) = &raw.weights {
                to.push(w[e].to_bits());
            }
        }
        drop(raw);
        let received = collective.all_to_all(out)?;
        let per_edge = if weighted { 2 } else { 1 };
        let n = ids.len();
        let (mut edges, mut weights) = (Vec::new(), weighted.then(Vec::new));
        let mut presence = vec![0u64; n];
        let (mut in_degree, mut out_degree) = (vec![0u32; n], vec![0u32; n]);
        for edge in received.chunks_exact(per_edge) {
            let (u, v) = ((edge[0] >> 32) as u32, edge[0] as u32);
            if u as usize >= n || v as usize >= n {
                return Err(GraphError::Exchange {
                    what: "a received edge names no vertex",
                });
            }
            edges.push((u, v));
            if let Some(w) = &mut weights {
                w.push(f64::from_bits(edge[1]));
            }
            presence[u as usize] |= 1 << part;
            presence[v as usize] |= 1 << part;
            out_degree[u as usize] += 1;
            in_degree[v as usize] += 1;
        }
        drop(received);
        collective.or_all(&mut presence)?;
        collective.sum_all(&mut in_degree)?;
        collective.sum_all(&mut out_degree)?;
        let master = presence
            .iter_mut()
            .enumerate()
            .map(|(v, set)| master_of(partitioner, parts, seed, v as u32, set))
            .collect();
        Ok(GraphShare {
            part,
            parts,
            ids,
            edges,
            weights,
            total_edges,
            presence,
            master,
            in_degree,
            out_degree,
        })
    }

    /// This partition.
    pub fn part(&self) -> usize {
        self.part
    }

    /// Partitions of the run.
    pub fn parts(&self) -> usize {
        self.parts
    }

    /// Vertices of the whole graph.
    pub fn num_vertices(&self) -> usize {
        self.ids.len()
    }

    /// Edges of the whole graph.
    pub fn num_edges(&self) -> usize {
        self.total_edges
    }

    /// Every vertex's id in the file, vertex `i` being the `i`-th smallest.
    pub fn ids(&self) -> &[u64] {
        &self.ids
    }

    /// This partition's edges, as dense indices, in the file's order.
    pub fn edges(&self) -> &[(u32, u32)] {
        &self.edges
    }

    /// Their weights, when the file has them.
    pub fn weights(&self) -> Option<&[f64]> {
        self.weights.as_deref()
    }

    /// Every vertex's out-degree in the whole graph.
    pub fn out_degrees(&self) -> &[u32] {
        &self.out_degree
    }

    /// Every vertex's in-degree in the whole graph.
    pub fn in_degrees(&self) -> &[u32] {
        &self.in_degree
    }

    /// Average number of partitions per vertex, as [`VertexCut::replication_factor`]
    /// gives it for the whole graph.
    ///
    /// [`VertexCut::replication_factor`]: crate::VertexCut::replication_factor
    pub fn replication_factor(&self) -> f64 {
        replication_factor(&self.presence)
    }

    /// This partition's plan for a program of `needs`, and the table of which replicas
    /// feed their masters (or-ed with the other partitions').
    pub(crate) fn plan(
        &self,
        needs: Needs,
        collective: &dyn Collective,
    ) -> Result<(PartPlan, Vec<u64>), GraphError> {
        let mut feeds = vec![0u64; self.ids.len()];
        let edges = self.edges.iter().copied();
        plan::mark_feeders(self.part, &self.master, edges, needs, &mut feeds);
        collective.or_all(&mut feeds)?;
        let weight = |e: usize| self.weights.as_ref().map_or(1.0, |w| w[e]);
        let own = || {
            self.edges
                .iter()
                .enumerate()
                .map(move |(e, &(u, v))| (u, v, weight(e)))
        };
        let plan = plan::build_one(
            self.part,
            self.parts,
            self.vertices(&feeds),
            own,
            self.weights.is_some(),
            needs,
        );
        Ok((plan, feeds))
    }

    /// The vertex tables with `feeds`.
    pub(crate) fn vertices<'a>(&'a self, feeds: &'a [u64]) -> Vertices<'a> {
        Vertices {
            presence: &self.presence,
            master: &self.master,
            feeds,
        }
    }
}

/// The sorted distinct ids of every share, from this share's raw endpoints.
fn dense_ids(ends: &[u64], collective: &dyn Collective) -> Result<Vec<u64>, GraphError> {
    let mut mine = ends.to_vec();
    mine.sort_unstable();
    mine.dedup();
    mine.shrink_to_fit();
    let mut ids = collective.all_gather(&mine)?;
    drop(mine);
    ids.sort_unstable();
    ids.dedup();
    if u32::try_from(ids.len()).is_err() {
        return Err(refused(format!(
            "{} distinct vertices do not fit 32-bit vertex indices",
            ids.len()
        )));
    }
    Ok(ids)
}

/// Partitions as threads of this process that exchange through shared buffers: the
/// [`Collective`] of tests.
#[cfg(test)]
pub(crate) mod threads {
    use super::Collective;
    use crate::error::GraphError;
    use std::sync::{Barrier, Mutex};

    /// What the threads of one group share.
    pub(crate) struct Group {
        barrier: Barrier,
        slots: Mutex<Vec<Vec<Vec<u64>>>>,
    }

    impl Group {
        pub(crate) fn new(size: usize) -> Group {
            Group {
                barrier: Barrier::new(size),
                slots: Mutex::new(vec![Vec::new(); size]),
            }
        }
    }

    /// One thread's view of its group.
    pub(crate) struct Member<'a> {
        pub(crate) group: &'a Group,
        pub(crate) rank: usize,
    }

    impl Member<'_> {
        /// Every member's `out`, once all have put theirs.
        fn swap(&self, out: Vec<Vec<u64>>) -> Vec<Vec<Vec<u64>>> {
            self.group.slots.lock().unwrap()[self.rank] = out;
            self.group.barrier.wait();
            let all = self.group.slots.lock().unwrap().clone();
            self.group.barrier.wait();
            all
        }
    }

    impl Collective for Member<'_> {
        fn partition(&self) -> usize {
            self.rank
        }
        fn partitions(&self) -> usize {
            self.group.slots.lock().unwrap().len()
        }
        fn all_gather(&self, mine: &[u64]) -> Result<Vec<u64>, GraphError> {
            Ok(self.swap(vec![mine.to_vec()]).concat().concat())
        }
        fn all_to_all(&self, out: Vec<Vec<u64>>) -> Result<Vec<u64>, GraphError> {
            let all = self.swap(out);
            Ok(all.iter().flat_map(|o| o[self.rank].clone()).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::threads::{Group, Member};
    use super::*;
    use crate::engine::exchange::Expected;
    use crate::engine::file_group::FileGroup;
    use crate::engine::plan::{Csr, build};
    use crate::engine::pools::Pools;
    use crate::partition::VertexCut;
    use std::io::Write;

    /// Every partition, reading its share of a file, builds the plan one process reading
    /// the whole file builds for it, for every cut that places edges by their endpoints
    /// and both kinds of program, whether the partitions exchange as threads or as
    /// processes through files.
    #[test]
    fn each_partition_builds_from_its_share_the_plan_of_the_whole_graph() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            file,
            "# ids sparse and out of order, repeats and a self-loop"
        )
        .unwrap();
        for u in 0..300u64 {
            for k in [7, 13, 1] {
                let v = (u * k + 5) % 300;
                writeln!(file, "{} {} {}", 1000 + u * 3, 1000 + v * 3, (u + v) % 7).unwrap();
            }
        }
        writeln!(file, "1003 1003 1").unwrap();
        let reader = GraphReader::new();
        let whole = reader.read_path(file.path()).unwrap();
        let pull = Needs {
            incoming: true,
            outgoing: false,
            feed_in: true,
            feed_out: false,
        };
        let both = Needs {
            incoming: true,
            outgoing: true,
            feed_in: true,
            feed_out: true,
        };
        let dir = tempfile::tempdir().unwrap();
        let mut groups = 0;
        for (parts, files) in [(1, false), (3, false), (4, false), (1, true), (4, true)] {
            for partitioner in [
                Partitioner::Random,
                Partitioner::Grid,
                Partitioner::ByTarget,
            ] {
                let cut = VertexCut::new(&whole, parts, partitioner, 9).unwrap();
                for needs in [pull, both] {
                    let plans = build(&whole, &cut, needs);
                    let group = Group::new(parts);
                    groups += 1;
                    let tag = format!("g{groups}");
                    std::thread::scope(|s| {
                        for p in 0..parts {
                            let (group, reader, plans, whole) = (&group, &reader, &plans, &whole);
                            let (cut, dir, tag) = (&cut, dir.path(), &tag);
                            let path = file.path();
                            s.spawn(move || {
                                let me: Box<dyn Collective> = if files {
                                    Box::new(FileGroup::join(dir, tag, p, parts).unwrap())
                                } else {
                                    Box::new(Member { group, rank: p })
                                };
                                let me = &*me;
                                let share =
                                    GraphShare::read(reader, path, partitioner, 9, me).unwrap();
                                assert_eq!(share.ids(), &whole.ids[..]);
                                assert_eq!(share.num_edges(), whole.num_edges());
                                // Its own edges, in the file's order, with their weights.
                                let mine = |e: &usize| usize::from(cut.edge_partitions()[*e]) == p;
                                let own: Vec<usize> = (0..whole.num_edges()).filter(mine).collect();
                                let edges: Vec<_> = own.iter().map(|&e| whole.edges[e]).collect();
                                assert_eq!(share.edges(), &edges[..]);
                                let weights: Vec<_> =
                                    own.iter().map(|&e| whole.weight(e)).collect();
                                assert_eq!(share.weights(), Some(&weights[..]));
                                // The whole graph's degrees.
                                let mut degrees = [
                                    vec![0u32; whole.num_vertices()],
                                    vec![0; whole.num_vertices()],
                                ];
                                for &(u, v) in &whole.edges {
                                    degrees[0][v as usize] += 1;
                                    degrees[1][u as usize] += 1;
                                }
                                assert_eq!(share.in_degrees(), &degrees[0][..]);
                                assert_eq!(share.out_degrees(), &degrees[1][..]);
                                let rf = share.replication_factor();
                                assert_eq!(rf, cut.replication_factor());
                                assert_eq!(rf > 1.0, parts > 1);
                                let (plan, feeds) = share.plan(needs, me).unwrap();
                                // What it expects each superstep, from the tables, is what
                                // the plans of a whole-graph run expect.
                                let tables = share.vertices(&feeds);
                                let expected = Expected::counting(parts, p, |q| {
                                    (tables.feeders(q, p), tables.replicated(q, p))
                                });
                                let shapes: Vec<_> =
                                    plans.iter().map(|plan| plan.shape(parts)).collect();
                                assert_eq!(expected, Expected::from_shapes(&shapes, p));
                                assert_eq!(plan.shape(parts), shapes[p]);
                                // Its rows of the pools of a two-level run, from the
                                // tables, are those of the whole graph's pools.
                                for size in 1..=parts {
                                    let whole = Pools::new(plans, size).unwrap();
                                    let own =
                                        Pools::of_share(p, &plan, tables, parts, size).unwrap();
                                    let what = format!("{partitioner:?} {p}/{parts} by {size}");
                                    assert_eq!(own.mirrors, whole.mirrors, "{what}");
                                    let rows = |x: &Pools| {
                                        (
                                            x.replica_mirror[p].clone(),
                                            x.send_start[p].clone(),
                                            x.sends[p].clone(),
                                        )
                                    };
                                    assert_eq!(rows(&own), rows(&whole), "{what}");
                                    for q in 0..parts {
                                        assert_eq!(
                                            own.values_from(q, p),
                                            whole.values_from(q, p),
                                            "{what}"
                                        );
                                    }
                                }
                                same_plan(
                                    &plan,
                                    &plans[p],
                                    &format!("{partitioner:?} {p}/{parts}"),
                                );
                            });
                        }
                    });
                }
            }
        }
    }

    /// A partition that answers every exchange as if it were alone, with `arriving` as
    /// the edges sent to it when given.
    struct Alone {
        rank: usize,
        size: usize,
        arriving: Option<Vec<u64>>,
    }

    impl Collective for Alone {
        fn partition(&self) -> usize {
            self.rank
        }
        fn partitions(&self) -> usize {
            self.size
        }
        fn all_gather(&self, mine: &[u64]) -> Result<Vec<u64>, GraphError> {
            Ok(mine.to_vec())
        }
        fn all_to_all(&self, out: Vec<Vec<u64>>) -> Result<Vec<u64>, GraphError> {
            Ok(self.arriving.clone().unwrap_or_else(|| out.concat()))
        }
        fn or_all(&self, _: &mut [u64]) -> Result<(), GraphError> {
            Ok(())
        }
        fn sum_all(&self, _: &mut [u32]) -> Result<(), GraphError> {
            Ok(())
        }
    }

    /// A partition outside its group, a group of no or too many partitions, and an edge
    /// arriving with a vertex the ids do not have are errors, not panics.
    #[test]
    fn impossible_groups_and_edges_are_errors() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(file, "1 2\n2 3").unwrap();
        let read = |rank, size, arriving| {
            let me = Alone {
                rank,
                size,
                arriving,
            };
            GraphShare::read(
                &GraphReader::new(),
                file.path(),
                Partitioner::Random,
                1,
                &me,
            )
        };
        for (rank, size) in [(0, 0), (0, MAX_PARTITIONS + 1), (2, 2)] {
            let err = read(rank, size, None).unwrap_err().to_string();
            assert!(
                err.contains("partitions are supported"),
                "{rank}/{size}: {err}"
            );
        }
        assert!(
            read(63, MAX_PARTITIONS, None).is_ok(),
            "the most partitions a cut has"
        );
        let alone = read(0, 1, None).unwrap();
        assert_eq!(
            (alone.num_vertices(), alone.edges()),
            (3, &[(0, 1), (1, 2)][..])
        );
        // Vertex 0 to vertex 99 of 3.
        let err = read(0, 1, Some(vec![99])).unwrap_err().to_string();
        assert!(err.contains("names no vertex"), "{err}");
    }

    fn same_csr(a: &Option<Csr>, b: &Option<Csr>, what: &str) {
        match (a, b) {
            (None, None) => {}
            (Some(a), Some(b)) => {
                assert_eq!(a.offsets, b.offsets, "{what}");
                assert_eq!(a.cols, b.cols, "{what}");
                assert_eq!(a.weights, b.weights, "{what}");
            }
            _ => panic!("{what}: one plan has the adjacency, the other not"),
        }
    }

    fn same_plan(a: &PartPlan, b: &PartPlan, what: &str) {
        assert_eq!(a.globals, b.globals, "{what}");
        assert_eq!(a.master_of, b.master_of, "{what}");
        assert_eq!(a.master_index, b.master_index, "{what}");
        assert_eq!(a.masters, b.masters, "{what}");
        assert_eq!(a.mirrored, b.mirrored, "{what}");
        assert_eq!(a.mirror_start, b.mirror_start, "{what}");
        assert_eq!(a.mirror_part, b.mirror_part, "{what}");
        assert_eq!(a.mirror_local, b.mirror_local, "{what}");
        assert_eq!(a.mirror_feeds, b.mirror_feeds, "{what}");
        assert_eq!(a.feeds, b.feeds, "{what}");
        same_csr(&a.incoming, &b.incoming, what);
        same_csr(&a.outgoing, &b.outgoing, what);
    }

    /// The oblivious cut, shares of which one has weights and the other not, and a bad
    /// line in one share are refused with errors, by every partition (none waits for
    /// another that gave up).
    #[test]
    fn what_a_share_cannot_be_cut_by_is_refused() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        // 32 bytes of weighted lines, then 32 of unweighted ones: one share each.
        write!(file, "{}{}", "1 2 1.5\n".repeat(4), "2 3\n".repeat(8)).unwrap();
        let mut bad = tempfile::NamedTempFile::new().unwrap();
        write!(bad, "{}{}", "1 2\n".repeat(8), "2 x\n".repeat(8)).unwrap();
        let reader = GraphReader::new();
        let group = Group::new(2);
        std::thread::scope(|s| {
            for p in 0..2 {
                let (group, reader, path, bad) = (&group, &reader, file.path(), &bad);
                s.spawn(move || {
                    let me = Member { group, rank: p };
                    let oblivious = GraphShare::read(reader, path, Partitioner::Oblivious, 1, &me);
                    assert!(oblivious.unwrap_err().to_string().contains("oblivious"));
                    let mixed = GraphShare::read(reader, path, Partitioner::Random, 1, &me);
                    let err = mixed.unwrap_err().to_string();
                    assert!(err.contains("some edge lines have a weight"), "{err}");
                    let err = GraphShare::read(reader, bad.path(), Partitioner::Random, 1, &me)
                        .unwrap_err()
                        .to_string();
                    let expected = if p == 1 {
                        ":9: target id 'x'"
                    } else {
                        "partition 1"
                    };
                    assert!(err.contains(expected), "{p}: {err}");
                });
            }
        });
    }
}
