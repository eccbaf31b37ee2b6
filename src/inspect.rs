//! What a pool holds, read from its region without joining it: its nodes and their
//! passes, its structures and their writers, and how its heap is granted.
//!
//! [`PoolReport::read`] opens a region file (or device) as it is, runs no node and
//! writes nothing, so it can look at a pool that live processes are using, or at one
//! that no process runs any more. [`Pool::stats`](crate::Pool::stats) gives the same
//! report from inside a process; [`PoolReport::problems`] checks what it read. Every
//! word is read from memory (invalidated first), so the report is what the region held
//! at about the moment of the call; a live pool moves on.
//!
//! ```
//! use bi::inspect::PoolReport;
//! use bi::{Pool, PoolConfig};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("pool.bi");
//! let pool = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
//! let orders = pool.map::<u64, u64>("orders").unwrap();
//! orders.insert(1, 10).unwrap();
//!
//! let report = PoolReport::read(&path).unwrap(); // as another process would
//! let node = &report.nodes[pool.node()];
//! assert!(node.live);
//! let map = report.structures.iter().find(|s| s.name == "orders").unwrap();
//! assert_eq!(map.writer_node, Some(pool.node()));
//! assert!(map.writer_live && map.heap_bytes > 0);
//! assert!(report.problems().is_empty(), "{:?}", report.problems());
//! ```
//!
//! # Trade-offs
//!
//! - Liveness is judged with the default leases ([`RuntimeConfig::default`]); a pool
//!   whose processes run longer or shorter leases reads as live a little longer or
//!   shorter here.
//! - Clocks are this host's monotonic clock: ages of records stamped by another host
//!   are only as good as the agreement of the two clocks.

use crate::error::Error;
use bi_core::mem::MemView;
use bi_core::region::{Layout, Region};
use bi_core::runtime::role::WRITER_RECORD_OFFSET;
use bi_core::runtime::{
    Clock, FIGURES_SLOT, NodeFigures, NodeRecord, RuntimeConfig, TickClock, WriterRecord,
};
use std::path::Path;

/// What a pool's region holds.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PoolReport {
    /// Bytes of the region.
    pub size: u64,
    /// One entry per node of the region, in node order.
    pub nodes: Vec<NodeReport>,
    /// Every named structure (and every other named root), in directory order.
    pub structures: Vec<StructureReport>,
    /// How the heap is granted to structures.
    pub heap: HeapReport,
    /// Extents whose owner names no root: memory nothing can reach (see
    /// [`problems`](Self::problems)).
    pub orphan_extents: Vec<usize>,
}

/// One node of a pool, as its record in the region says.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct NodeReport {
    /// The node.
    pub node: usize,
    /// A process claimed the node (its record names a holder).
    pub claimed: bool,
    /// The claim is live: its heartbeat is within a lease of now.
    pub live: bool,
    /// Passes the node ran.
    pub passes: u64,
    /// How long the node's last pass took, in nanoseconds.
    pub last_pass_ns: u64,
    /// Nanoseconds since the node's last heartbeat (the end of its last pass); `None`
    /// when its record holds none (never claimed, or given up).
    pub heartbeat_age_ns: Option<u64>,
    /// Passes that dropped the whole heap (a log ring overflowed, or a lease expired).
    pub overflows: u64,
    /// Reader exclusions for an expired reader lease.
    pub expired_readers: u64,
    /// The longest pass since the running process claimed the node, in nanoseconds.
    pub longest_pass_ns: u64,
    /// Lines the node's passes invalidated since its process claimed it.
    pub invalidated_lines: u64,
    /// Readers registered in the node's process at its last pass.
    pub readers: u64,
    /// Bytes the node's writer retired that wait for their grace period.
    pub retired_bytes: u64,
    /// How full the node's log rings are, in percent: entries not yet known consumed by
    /// every node, in the fuller of its two rings (100: its writer's next update waits).
    pub ring_fill_percent: u64,
}

/// One named root of a pool: a structure (map, tree, delegation area) or a plain object.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct StructureReport {
    /// Its name.
    pub name: String,
    /// Offset of its slot in the region.
    pub offset: u64,
    /// The node whose process holds (or last held) its writer role.
    pub writer_node: Option<usize>,
    /// A process holds the writer role now, and its node's claim is live.
    pub writer_live: bool,
    /// Times its writer role was taken (1: its first writer made it).
    pub writer_takes: u64,
    /// Bytes of the heap's extents granted to it.
    pub heap_bytes: usize,
    /// Entries, as its writer last noted them (published by the writer node's next pass;
    /// 0 for a structure that notes none, or whose last writer's node has gone on to
    /// write another).
    pub entries: u64,
    /// Nanoseconds since its writer's lease was last renewed (its node's heartbeat), when
    /// a live process holds the role.
    pub lease_age_ns: Option<u64>,
    /// Bytes its writer retired that wait for their grace period (its writer node's).
    pub retired_bytes: u64,
    /// How full its writer node's log rings are, in percent ([`NodeReport::ring_fill_percent`]).
    pub ring_fill_percent: u64,
}

/// How a pool's heap is granted.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct HeapReport {
    /// Bytes of the heap.
    pub bytes: usize,
    /// Extents the heap is cut into.
    pub extents: usize,
    /// Extents granted to a structure.
    pub granted: usize,
}

impl PoolReport {
    /// Reads the region at `path` without joining it (no node claimed, nothing written).
    ///
    /// Errors: whatever opening the region finds ([`ErrorKind::NotFound`] for a missing
    /// file, [`ErrorKind::Corrupt`] for a file that is not a valid region, ...).
    ///
    /// [`ErrorKind::NotFound`]: crate::ErrorKind::NotFound
    /// [`ErrorKind::Corrupt`]: crate::ErrorKind::Corrupt
    pub fn read(path: impl AsRef<Path>) -> Result<PoolReport, Error> {
        let region = Region::open(path)?;
        PoolReport::of(&region, &region.hardware())
    }

    /// Reads `region` through `view`.
    pub(crate) fn of<V: MemView>(region: &Region, view: &V) -> Result<PoolReport, Error> {
        let layout = region.layout();
        let config = RuntimeConfig::default();
        let now = TickClock::new().refresh();
        let records = (0..layout.config().nodes() as usize)
            .map(|node| node_record(layout, view, node))
            .collect::<Result<Vec<_>, Error>>()?;
        let nodes: Vec<NodeReport> = records
            .iter()
            .enumerate()
            .map(|(node, (r, f))| node_report(layout, node, r, f, now, &config))
            .collect();
        let owners = extent_owners(layout, view)?;
        let extent_bytes = |owner: u64| -> usize {
            (0..owners.len())
                .filter(|&i| owners[i] == owner)
                .filter_map(|i| layout.extent(i))
                .map(|s| s.len)
                .sum()
        };
        let mut structures = Vec::new();
        for root in region.roots(view)? {
            let writer: WriterRecord =
                view.load_from_memory(root.offset as usize + WRITER_RECORD_OFFSET)?;
            let writer_node = writer.node.checked_sub(1).map(|n| n as usize);
            let writer_live = writer.holder != 0
                && writer_node
                    .and_then(|n| Some((nodes.get(n)?, records.get(n)?)))
                    .is_some_and(|(n, (r, _))| n.live && r.holder == writer.holder);
            let writer_report = writer_node.and_then(|n| nodes.get(n));
            structures.push(StructureReport {
                heap_bytes: extent_bytes(root.offset),
                entries: writer_node
                    .and_then(|n| records.get(n))
                    .filter(|(_, f)| f.structure == root.offset)
                    .map_or(0, |(_, f)| f.entries),
                lease_age_ns: writer_report
                    .filter(|_| writer_live)
                    .and_then(|n| n.heartbeat_age_ns),
                retired_bytes: writer_report.map_or(0, |n| n.retired_bytes),
                ring_fill_percent: writer_report.map_or(0, |n| n.ring_fill_percent),
                name: root.name,
                offset: root.offset,
                writer_node,
                writer_live,
                writer_takes: writer.takes,
            });
        }
        let orphan_extents = (0..owners.len())
            .filter(|&i| owners[i] != 0 && !structures.iter().any(|s| s.offset == owners[i]))
            .collect();
        Ok(PoolReport {
            size: layout.config().size(),
            nodes,
            structures,
            heap: HeapReport {
                bytes: layout.heap().len,
                extents: owners.len(),
                granted: owners.iter().filter(|&&o| o != 0).count(),
            },
            orphan_extents,
        })
    }

    /// Sets this report's figures as [`metrics`](https://docs.rs/metrics) gauges (the
    /// `metrics` feature), for whatever recorder the service installed: per node
    /// `bi_node_passes`, `bi_node_last_pass_ns`, `bi_node_longest_pass_ns`,
    /// `bi_node_heartbeat_age_ns`, `bi_node_overflows`, `bi_node_invalidated_lines`,
    /// `bi_node_readers`, `bi_node_retired_bytes`, `bi_node_ring_fill_percent`,
    /// `bi_node_live` (label `node`); per structure `bi_structure_heap_bytes`,
    /// `bi_structure_entries`, `bi_structure_lease_age_ns`, `bi_structure_writer_live`,
    /// `bi_structure_writer_takes` (label `structure`); and `bi_heap_extents_granted`,
    /// `bi_heap_extents`.
    #[cfg(feature = "metrics")]
    pub fn publish(&self) {
        use metrics::gauge;
        for n in &self.nodes {
            let node = n.node.to_string();
            gauge!("bi_node_passes", "node" => node.clone()).set(n.passes as f64);
            gauge!("bi_node_last_pass_ns", "node" => node.clone()).set(n.last_pass_ns as f64);
            if let Some(age) = n.heartbeat_age_ns {
                gauge!("bi_node_heartbeat_age_ns", "node" => node.clone()).set(age as f64);
            }
            gauge!("bi_node_overflows", "node" => node.clone()).set(n.overflows as f64);
            gauge!("bi_node_longest_pass_ns", "node" => node.clone()).set(n.longest_pass_ns as f64);
            gauge!("bi_node_invalidated_lines", "node" => node.clone())
                .set(n.invalidated_lines as f64);
            gauge!("bi_node_readers", "node" => node.clone()).set(n.readers as f64);
            gauge!("bi_node_retired_bytes", "node" => node.clone()).set(n.retired_bytes as f64);
            gauge!("bi_node_ring_fill_percent", "node" => node.clone())
                .set(n.ring_fill_percent as f64);
            gauge!("bi_node_live", "node" => node).set(f64::from(u8::from(n.live)));
        }
        for s in &self.structures {
            let name = s.name.clone();
            gauge!("bi_structure_heap_bytes", "structure" => name.clone()).set(s.heap_bytes as f64);
            gauge!("bi_structure_entries", "structure" => name.clone()).set(s.entries as f64);
            if let Some(age) = s.lease_age_ns {
                gauge!("bi_structure_lease_age_ns", "structure" => name.clone()).set(age as f64);
            }
            gauge!("bi_structure_writer_live", "structure" => name.clone())
                .set(f64::from(u8::from(s.writer_live)));
            gauge!("bi_structure_writer_takes", "structure" => name).set(s.writer_takes as f64);
        }
        gauge!("bi_heap_extents_granted").set(self.heap.granted as f64);
        gauge!("bi_heap_extents").set(self.heap.extents as f64);
    }

    /// What is wrong with the pool, in words (empty: nothing found). Opening it already
    /// checked the region's header and layout; this checks what lies inside: extents
    /// granted to an owner that names no structure, writer records that name no node
    /// of the region.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for &e in &self.orphan_extents {
            out.push(format!(
                "extent {e} is granted to an owner that names no structure"
            ));
        }
        for s in &self.structures {
            if let Some(n) = s.writer_node.filter(|&n| n >= self.nodes.len()) {
                out.push(format!(
                    "structure {:?} names writer node {n}, outside the region's {} nodes",
                    s.name,
                    self.nodes.len()
                ));
            }
        }
        out
    }
}

/// Node `node`'s record and figures, read from memory.
fn node_record<V: MemView>(
    layout: &Layout,
    view: &V,
    node: usize,
) -> Result<(NodeRecord, NodeFigures), Error> {
    let at = layout
        .node_record(node)
        .ok_or_else(|| bi_core::runtime::BiError::BadNode { node })?;
    let figures_at = at.offset + FIGURES_SLOT * layout.slot_size();
    Ok((
        view.load_from_memory(at.offset)?,
        view.load_from_memory(figures_at)?,
    ))
}

fn node_report(
    layout: &Layout,
    node: usize,
    r: &NodeRecord,
    f: &NodeFigures,
    now: u64,
    config: &RuntimeConfig,
) -> NodeReport {
    let in_flight = f.modified_in_flight.max(f.freed_in_flight);
    let capacity = u64::from(layout.config().log_ring_entries());
    NodeReport {
        node,
        claimed: r.holder != 0,
        live: r.is_live(now, config),
        passes: r.passes,
        last_pass_ns: r.end.saturating_sub(r.start),
        heartbeat_age_ns: (r.heartbeat != 0).then(|| now.saturating_sub(r.heartbeat)),
        overflows: r.overflows,
        expired_readers: r.expired_readers,
        longest_pass_ns: f.longest_pass,
        invalidated_lines: f.invalidated_lines,
        readers: f.readers,
        retired_bytes: f.retired_bytes,
        ring_fill_percent: (in_flight * 100)
            .checked_div(capacity)
            .unwrap_or(0)
            .min(100),
    }
}

/// The owner word of every extent, read from memory.
fn extent_owners<V: MemView>(layout: &Layout, view: &V) -> Result<Vec<u64>, Error> {
    let table = layout.extent_table();
    view.invalidate(table.offset, table.len)?;
    view.fence();
    let mut words = vec![0u64; layout.extents()];
    view.load_u64s(table.offset, &mut words)?;
    Ok(words)
}
