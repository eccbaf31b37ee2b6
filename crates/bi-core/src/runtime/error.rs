//! The runtime's error type.

use crate::heap::HeapError;
use crate::mem::MemError;
use crate::region::{RegionError, RingKind};
use std::fmt;

/// Everything the runtime can refuse or fail at. Library code never panics on bad input;
/// it returns one of these.
///
/// ```
/// use bi_core::mem::MemError;
/// use bi_core::runtime::BiError;
///
/// let e: BiError = MemError::OutOfBounds { offset: 8, len: 8, size: 8 }.into();
/// assert!(matches!(e, BiError::Mem(_)));
/// assert!(e.to_string().contains("outside"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum BiError {
    /// A memory access failed (out of bounds).
    Mem(MemError),
    /// The heap could not serve an allocation or refused a free.
    Heap(HeapError),
    /// A region-level failure.
    Region(RegionError),
    /// A log ring has no free entry: some live node has not passed since the oldest entry
    /// was written. Nothing was published or retired; retry later.
    LogFull {
        /// Writer node owning the ring.
        node: usize,
        /// Which ring.
        kind: RingKind,
        /// Entries in the ring.
        capacity: u64,
    },
    /// The link (or the slot holding it) names an object that is no longer there: freed,
    /// reused, or not yet visible on this node after invalidating it. The caller should
    /// retry from a fresher root.
    StaleLink {
        /// Offset the link points at.
        offset: usize,
    },
    /// A link, slot or record offset lies outside the section it must be in.
    OutOfSection {
        /// The offending offset.
        offset: usize,
        /// The section it should lie in.
        section: &'static str,
    },
    /// A walk along links read more objects than any structure's path has
    /// ([`MAX_WALK`](crate::runtime::walk::MAX_WALK)): the links form a cycle, so the
    /// memory is corrupt.
    LinkCycle {
        /// Offset of the object the walk stopped at.
        offset: usize,
    },
    /// No free reader record is left on this node.
    NoReaderSlot {
        /// The node.
        node: usize,
    },
    /// This node already has a writer.
    WriterTaken {
        /// The node.
        node: usize,
    },
    /// Another live process runs this node (its claim in the node record is not this
    /// runtime's): choose another node id, or wait for that process's lease to expire.
    NodeTaken {
        /// The node.
        node: usize,
    },
    /// This process joined the node another process of its host runs
    /// ([`share`](super::share)): it reads only (no writer, no pass, no pool lock).
    NotRunner {
        /// The node.
        node: usize,
    },
    /// No live process runs the node this process asked to join.
    NodeNotRunning {
        /// The node.
        node: usize,
    },
    /// The process running the node this process asked to join is on another host
    /// (or this host cannot tell which it is): only processes that share a cache can be
    /// one node.
    NodeOnAnotherHost {
        /// The node.
        node: usize,
    },
    /// The structure's writer is alive (in another process, or a role this process still
    /// holds): a structure has one writer. Delegate writes to it, or wait for its lease.
    WriterAlive {
        /// The writer's node.
        node: usize,
    },
    /// A writer role this process held was taken by another process while this node's
    /// lease had lapsed (its passes stalled longer than the node lease): the structure
    /// has a new writer, and this process wrote nothing more to it. Its write handle
    /// keeps failing (reads still work); once it is dropped, opening the structure again
    /// gives a handle that sends writes to the new writer.
    RoleLost {
        /// This node.
        node: usize,
        /// The node of the process that took the role, if the record names one.
        taker: Option<usize>,
    },
    /// The pool lock was not free within the time asked for.
    LockTimeout {
        /// The node that asked.
        node: usize,
        /// A node still ahead of it when it gave up.
        holder: usize,
    },
    /// The pool lock's lease of this node ran out while it held the lock: another node may
    /// hold it now, so nothing may be committed under it.
    LockLeaseLost {
        /// The node.
        node: usize,
    },
    /// The node index is not in the region.
    BadNode {
        /// The node index.
        node: usize,
    },
    /// The object was already retired (its FREED mark is set).
    AlreadyRetired {
        /// Offset of the object.
        offset: usize,
    },
    /// The object does not fit the runtime's limits (too many lines for a log entry).
    TooLarge {
        /// Payload bytes.
        bytes: usize,
    },
    /// A line rewritten in place has used up its versions (2^46 rewrites): rewriting it
    /// again could not be told apart from an older copy. Copy the record elsewhere.
    VersionsExhausted {
        /// Offset of the line.
        offset: usize,
    },
    /// A configuration value or the line size cannot work.
    BadConfig {
        /// Why.
        reason: &'static str,
    },
}

impl fmt::Display for BiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BiError::Mem(e) => write!(f, "memory access failed: {e}"),
            BiError::Heap(e) => write!(f, "heap failed: {e}"),
            BiError::Region(e) => write!(f, "region failed: {e}"),
            BiError::LogFull {
                node,
                kind,
                capacity,
            } => write!(
                f,
                "the {kind:?} log ring of node {node} is full ({capacity} entries): a live node has not passed since its oldest entry"
            ),
            BiError::StaleLink { offset } => {
                write!(f, "the link to offset {offset} is stale (freed or reused)")
            }
            BiError::OutOfSection { offset, section } => {
                write!(f, "offset {offset} is outside the {section}")
            }
            BiError::LinkCycle { offset } => write!(
                f,
                "a path of links through offset {offset} is longer than any structure's (a cycle: the memory is corrupt)"
            ),
            BiError::NoReaderSlot { node } => write!(f, "node {node} has no free reader record"),
            BiError::WriterTaken { node } => write!(f, "node {node} already has a writer"),
            BiError::NodeTaken { node } => write!(
                f,
                "node {node} is run by another live process (its claim in the region is not ours)"
            ),
            BiError::NotRunner { node } => write!(
                f,
                "this process joined node {node}, which another process runs: it can only read"
            ),
            BiError::NodeNotRunning { node } => {
                write!(
                    f,
                    "no live process runs node {node}, so it cannot be joined"
                )
            }
            BiError::NodeOnAnotherHost { node } => write!(
                f,
                "node {node} is run by a process of another host: only processes of one host can share a node"
            ),
            BiError::WriterAlive { node } => {
                write!(f, "the structure already has a live writer on node {node}")
            }
            BiError::RoleLost { node, taker } => {
                write!(
                    f,
                    "node {node}'s lease lapsed and its writer role was taken over"
                )?;
                match taker {
                    Some(t) => write!(f, " by node {t}"),
                    None => Ok(()),
                }
            }
            BiError::LockTimeout { node, holder } => write!(
                f,
                "node {node} timed out waiting for the pool lock (node {holder} was ahead of it)"
            ),
            BiError::LockLeaseLost { node } => write!(
                f,
                "node {node} held the pool lock past half its lease; it may no longer hold it"
            ),
            BiError::BadNode { node } => write!(f, "node {node} is not in the region"),
            BiError::AlreadyRetired { offset } => {
                write!(f, "the object at offset {offset} was already retired")
            }
            BiError::TooLarge { bytes } => write!(f, "an object of {bytes} bytes is too large"),
            BiError::VersionsExhausted { offset } => {
                write!(f, "the line at offset {offset} has used up its versions")
            }
            BiError::BadConfig { reason } => write!(f, "bad runtime configuration: {reason}"),
        }
    }
}

impl std::error::Error for BiError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BiError::Mem(e) => Some(e),
            BiError::Heap(e) => Some(e),
            BiError::Region(e) => Some(e),
            _ => None,
        }
    }
}

impl From<MemError> for BiError {
    fn from(e: MemError) -> Self {
        BiError::Mem(e)
    }
}

impl From<HeapError> for BiError {
    fn from(e: HeapError) -> Self {
        BiError::Heap(e)
    }
}

impl From<RegionError> for BiError {
    fn from(e: RegionError) -> Self {
        BiError::Region(e)
    }
}
