//! One node's runtime state, shared by every handle of it in this process: its view of
//! memory, its claim, its configuration and clock, the roles this process holds, and its
//! pass state ([`NodeRuntime`](crate::runtime::NodeRuntime) is the handle).

use crate::mem::MemView;
use crate::primitive::sync::Mutex;
use crate::primitive::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::region::Layout;
use crate::runtime::claim::Claimed;
use crate::runtime::clock::Clock;
use crate::runtime::config::{ReaderOrdering, RuntimeConfig};
use crate::runtime::pass_state::PassState;
use crate::runtime::reader_state::ReaderHolder;
use crate::runtime::scope::ScopeSet;
use crate::runtime::{BiError, object};
use std::ops::DerefMut;
use std::sync::{Arc, PoisonError};

/// A role found taken by another process: the writer's [`BiError::RoleLost`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lost {
    /// The node of the process that took it, if its record names one.
    pub(crate) taker: Option<usize>,
}

/// Counters of one node's runtime.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) mismatches: AtomicU64,
    /// What this process's writer last noted for the node's figures
    /// ([`pass::NodeFigures`]): bytes retired and not given back, and entries in flight in
    /// the modified and freed rings.
    pub(crate) retired_bytes: AtomicU64,
    pub(crate) in_flight: [AtomicU64; 2],
    /// The structure (slot) whose entries the writer noted last, and their number.
    pub(crate) structure: AtomicU64,
    pub(crate) entries: AtomicU64,
    /// The longest span, in clock nanoseconds, from an update's first write-back of a
    /// line other nodes may hold to its log append, since it was last taken.
    pub(crate) publish_span: AtomicU64,
}

pub(crate) struct NodeInner<V: MemView> {
    pub(crate) view: V,
    /// This runtime's holder token in the node record ([`claim`]).
    pub(crate) token: u64,
    pub(crate) layout: Layout,
    pub(crate) node: usize,
    pub(crate) nodes: usize,
    pub(crate) line: usize,
    pub(crate) config: RuntimeConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) fence_on_enter: bool,
    pub(crate) membarrier: bool,
    pub(crate) ordering: ReaderOrdering,
    /// What this runtime writes in the holder word of the reader records it takes.
    pub(crate) reader_holder: ReaderHolder,
    /// This process joined the node another process of its host runs ([`share`]).
    pub(crate) joined: bool,
    /// Readers registered now: a pass with none to order against skips `membarrier`.
    pub(crate) registered: AtomicUsize,
    pub(crate) writer_taken: AtomicUsize,
    /// The heartbeat this runtime last put in its node record (its clock then): what
    /// writers check their lease against ([`lease`]).
    pub(crate) heartbeat: AtomicU64,
    /// Set by a pass whose previous heartbeat no longer covered writes when it wrote the
    /// next: another process may have taken this process's roles in between, so writers
    /// renew (re-reading the roles) before they write again ([`lease`]).
    pub(crate) lapsed: AtomicBool,
    /// Where the writer records of the roles this process holds lie ([`role`]), and
    /// whether a renewal found the role taken by another process (then writes fail until
    /// the role's handle is dropped).
    pub(crate) roles: Mutex<Vec<(usize, Option<Lost>)>>,
    /// Some role in `roles` is marked lost (so the check before every write reads one
    /// word, not the list).
    pub(crate) any_lost: AtomicBool,
    /// Taken before the pool lock: the node's one lock record is not for two threads
    /// ([`lock`]).
    pub(crate) lock_threads: Mutex<()>,
    /// The structures this node's readers declared ([`scope`]).
    pub(crate) scopes: ScopeSet,
    pub(crate) pass: Mutex<PassState<V>>,
    pub(crate) stats: Stats,
}

impl<V: MemView> Drop for NodeInner<V> {
    fn drop(&mut self) {
        // Best effort: a runtime that cannot write its record any more leaves its claim
        // to expire with its lease. A joined process holds no claim.
        if !self.joined {
            let _ = self.claimed().release();
        }
    }
}

impl<V: MemView> NodeInner<V> {
    /// What a validated read needs besides the view ([`object::Objects`]).
    #[inline(always)]
    pub(crate) fn objects(&self) -> object::Objects {
        object::Objects {
            heap: self.layout.heap(),
            line: self.line,
            faults: self.config.faults,
        }
    }

    pub(crate) fn lock_pass(&self) -> impl DerefMut<Target = PassState<V>> + '_ {
        self.pass.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn reader_record(&self, r: usize) -> Result<usize, BiError> {
        self.layout
            .reader_record(self.node, r)
            .map(|s| s.offset)
            .ok_or_else(|| BiError::BadNode { node: self.node })
    }

    pub(crate) fn node_record_of(&self, n: usize) -> Result<usize, BiError> {
        self.layout
            .node_record(n)
            .map(|s| s.offset)
            .ok_or_else(|| BiError::BadNode { node: n })
    }

    pub(crate) fn node_record_at(&self) -> usize {
        // Checked in `NodeRuntime::new`.
        self.layout.node_record(self.node).map_or(0, |s| s.offset)
    }

    /// This runtime's claim of its node, to check or release ([`claim`]).
    pub(crate) fn claimed(&self) -> Claimed<'_, V> {
        Claimed {
            view: &self.view,
            at: self.node_record_at(),
            node: self.node,
            token: self.token,
            faults: self.config.faults,
        }
    }

    pub(crate) fn line_floor(&self, at: usize) -> usize {
        at - at % self.line
    }

    /// Refuses what only the process running the node may do.
    pub(crate) fn check_runner(&self) -> Result<(), BiError> {
        match self.joined {
            true => Err(BiError::NotRunner { node: self.node }),
            false => Ok(()),
        }
    }

    /// The writer records of the roles this process holds.
    pub(crate) fn held_roles(&self) -> Vec<usize> {
        let roles = self.roles.lock().unwrap_or_else(PoisonError::into_inner);
        roles.iter().map(|&(at, _)| at).collect()
    }

    /// Notes that this process holds (`true`) or gave up the role whose record is at
    /// `at`.
    pub(crate) fn note_role(&self, at: usize, held: bool) {
        let mut roles = self.roles.lock().unwrap_or_else(PoisonError::into_inner);
        roles.retain(|&(r, _)| r != at);
        if held {
            roles.push((at, None));
        }
        let lost = roles.iter().any(|(_, l)| l.is_some());
        self.any_lost.store(lost, Ordering::Release);
    }

    /// Notes that the role whose record is at `at` was found taken by another process.
    pub(crate) fn note_lost(&self, at: usize, lost: Lost) {
        let mut roles = self.roles.lock().unwrap_or_else(PoisonError::into_inner);
        for role in roles.iter_mut().filter(|(r, _)| *r == at) {
            role.1 = Some(lost);
            self.any_lost.store(true, Ordering::Release);
        }
    }

    /// A role of this process found taken, whose handle is not yet dropped.
    pub(crate) fn lost_role(&self) -> Option<Lost> {
        if !self.any_lost.load(Ordering::Acquire) {
            return None;
        }
        let roles = self.roles.lock().unwrap_or_else(PoisonError::into_inner);
        roles.iter().find_map(|&(_, lost)| lost)
    }

    pub(crate) fn release_writer(&self) {
        self.writer_taken.store(0, Ordering::Release);
    }
}
