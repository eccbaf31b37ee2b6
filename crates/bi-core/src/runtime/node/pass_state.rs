//! A node's private pass state: what its passes have consumed of every writer's rings,
//! the groups of lines waiting to be dropped once the readers that may hold them left,
//! and the figures its record publishes.

use crate::runtime::config::Policy;
use crate::runtime::record::NodeRecord;
use std::collections::VecDeque;

#[derive(Debug)]
pub(crate) enum Items {
    Ranges(Vec<(usize, usize)>),
    Everything,
}

#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) end: u64,
    pub(crate) prev_start: u64,
    pub(crate) items: Items,
}

/// A node's private pass state.
pub(crate) struct PassState<V> {
    pub(crate) policy: Policy<V>,
    pub(crate) passes: u64,
    pub(crate) next: Vec<[u64; 2]>,
    pub(crate) pending: VecDeque<Group>,
    pub(crate) last_start: u64,
    pub(crate) reclaim: u64,
    pub(crate) heartbeat: u64,
    pub(crate) overflows: u64,
    pub(crate) expired_total: u64,
    pub(crate) first: bool,
    pub(crate) longest: u64,
    pub(crate) invalidated_lines: u64,
}

impl<V> PassState<V> {
    pub(crate) fn new(nodes: usize, policy: Policy<V>, prev: NodeRecord) -> PassState<V> {
        PassState {
            policy,
            passes: prev.passes,
            next: vec![[0, 0]; nodes],
            pending: VecDeque::new(),
            last_start: prev.start,
            reclaim: prev.reclaim,
            heartbeat: prev.heartbeat,
            overflows: prev.overflows,
            expired_total: prev.expired_readers,
            first: true,
            longest: 0,
            invalidated_lines: 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn pending_groups(&self) -> usize {
        self.pending.len()
    }
}
