//! The superstep barrier, which a failing partition can break so no one waits forever.

use bi_core::mem::MemView;
use bi_core::runtime::{Fault, Faults};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

/// The barrier was broken because some partition failed (or, for a [`RegionBarrier`],
/// the launcher gave up on the run or is gone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aborted;

impl From<Aborted> for crate::error::GraphError {
    fn from(_: Aborted) -> Self {
        crate::error::GraphError::Aborted
    }
}

/// Where partitions meet between phases, and how one that failed releases the others.
pub(crate) trait Barrier: Sync {
    /// Waits until every partition arrives, or until the barrier is aborted.
    fn wait(&self) -> Result<(), Aborted>;
    /// Breaks the barrier: every current and future `wait` returns [`Aborted`].
    fn abort(&self);
    /// Whether the barrier was broken.
    fn is_aborted(&self) -> bool;
}

/// A reusable barrier for `n` threads with an abort switch.
#[derive(Debug)]
pub(crate) struct PhaseBarrier {
    n: usize,
    state: Mutex<(usize, u64)>,
    cv: Condvar,
    aborted: AtomicBool,
}

impl PhaseBarrier {
    pub fn new(n: usize) -> Self {
        PhaseBarrier {
            n,
            state: Mutex::new((0, 0)),
            cv: Condvar::new(),
            aborted: AtomicBool::new(false),
        }
    }
}

impl Barrier for PhaseBarrier {
    fn wait(&self) -> Result<(), Aborted> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if self.is_aborted() {
            return Err(Aborted);
        }
        state.0 += 1;
        if state.0 == self.n {
            state.0 = 0;
            state.1 = state.1.wrapping_add(1);
            self.cv.notify_all();
            return Ok(());
        }
        let generation = state.1;
        while state.1 == generation {
            if self.is_aborted() {
                return Err(Aborted);
            }
            state = self.cv.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        Ok(())
    }

    fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        let _guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.cv.notify_all();
    }

    fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }
}

/// The word a node writes in its own line when it gives up: above any arrival count.
const ABORT: u64 = u64::MAX;

/// A barrier in shared memory for nodes that are processes, with no cross-node atomic
/// operation: each node writes only its own line (its count of arrivals, written back),
/// and waits until every other node's line, invalidated and read again, shows at least
/// as many. A node that fails writes an abort mark there instead; so does the launcher,
/// in a line of its own, when a node's process dies. A node whose launcher is gone (it
/// was adopted by another parent) gives up too, so no process ever waits forever.
///
/// The graph engine's partitions meet here when they are processes over a region file;
/// the barrier needs only [`lines`](Self::lines) line-aligned lines of the memory every
/// node maps, zeroed before the first node arrives.
///
/// ```
/// use bi_core::mem::{Emulator, EmulatorConfig};
/// use bi_graph::RegionBarrier;
///
/// // Two emulated nodes, each with its own non-coherent cache over the same memory.
/// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
/// let a = RegionBarrier::new(emu.node(0), 0, 2, 0);
/// let b = RegionBarrier::new(emu.node(1), 0, 2, 1);
/// let round = a.arrive()?;
/// assert!(!a.poll(round)?); // node 1 has not arrived yet
/// assert_eq!(b.arrive()?, round);
/// assert!(a.poll(round)? && b.poll(round)?);
/// # Ok::<(), bi_graph::Aborted>(())
/// ```
pub struct RegionBarrier<V> {
    view: V,
    /// Offset of each node's line, then the launcher's.
    lines: Vec<usize>,
    line: usize,
    me: usize,
    arrivals: AtomicU64,
    aborted: AtomicBool,
    parent: Option<u32>,
    faults: Faults,
}

impl<V> RegionBarrier<V> {
    /// Lines the barrier of `nodes` nodes takes: one per node, then the launcher's.
    pub fn lines(nodes: usize) -> usize {
        nodes + 1
    }
}

impl<V: MemView> RegionBarrier<V> {
    /// Node `me`'s side of the barrier of `nodes` nodes whose lines start at `offset`
    /// (line-aligned) in `view`.
    pub fn new(view: V, offset: usize, nodes: usize, me: usize) -> Self {
        let line = view.line_size().get();
        RegionBarrier {
            lines: (0..=nodes).map(|q| offset + q * line).collect(),
            line,
            view,
            me,
            arrivals: AtomicU64::new(0),
            aborted: AtomicBool::new(false),
            #[cfg(unix)]
            parent: Some(std::os::unix::process::parent_id()),
            #[cfg(not(unix))]
            parent: None,
            faults: Faults::default(),
        }
    }

    /// The barrier with the mechanisms `faults` names switched off (negative controls).
    pub fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// The launcher's side: marks the run aborted for every node.
    pub(crate) fn abort_all(view: &V, offset: usize, nodes: usize) {
        let at = offset + nodes * view.line_size().get();
        Self::publish(view, at, ABORT);
    }

    fn publish(view: &V, at: usize, word: u64) {
        // A view refusing an in-bounds aligned word is a bug elsewhere; the waiting
        // nodes then still stop on their launcher's side.
        let _ = view.store_u64(at, word);
        let _ = view.writeback(at, 8);
        view.fence();
    }

    /// Node `q`'s word (`lines.len() - 1` is the launcher), read fresh (through this
    /// node's cache with [`Fault::RegionBarrierRead`], the negative control).
    fn read(&self, q: usize) -> u64 {
        let at = self.lines[q];
        if !self.faults.has(Fault::RegionBarrierRead) {
            if self.view.invalidate(at, self.line).is_err() {
                return ABORT;
            }
            self.view.fence();
        }
        self.view.load_u64(at).unwrap_or(ABORT)
    }

    /// Arrives: publishes this node's next arrival count in its line, and returns it (the
    /// round to [`poll`](Self::poll) for).
    pub fn arrive(&self) -> Result<u64, Aborted> {
        if self.aborted.load(Ordering::SeqCst) {
            return Err(Aborted);
        }
        let count = self.arrivals.fetch_add(1, Ordering::Relaxed) + 1;
        Self::publish(&self.view, self.lines[self.me], count);
        Ok(count)
    }

    /// One look at the other nodes' lines: whether every node has arrived for `round`.
    /// An abort mark in any line, or a launcher that is gone, ends the wait.
    pub fn poll(&self, round: u64) -> Result<bool, Aborted> {
        let mut behind = false;
        for q in (0..self.lines.len()).filter(|&q| q != self.me) {
            let word = self.read(q);
            if word == ABORT {
                return Err(self.give_up());
            }
            // The launcher's line only ever holds 0 or ABORT.
            behind |= q + 1 < self.lines.len() && word < round;
        }
        if behind && self.launcher_gone() {
            return Err(self.give_up());
        }
        Ok(!behind)
    }

    fn launcher_gone(&self) -> bool {
        #[cfg(unix)]
        {
            self.parent
                .is_some_and(|p| p != std::os::unix::process::parent_id())
        }
        #[cfg(not(unix))]
        {
            false
        }
    }

    fn give_up(&self) -> Aborted {
        self.aborted.store(true, Ordering::SeqCst);
        Aborted
    }
}

impl<V: MemView> Barrier for RegionBarrier<V> {
    fn wait(&self) -> Result<(), Aborted> {
        let round = self.arrive()?;
        let mut spins = 0u32;
        while !self.poll(round)? {
            spins = spins.saturating_add(1);
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        Self::publish(&self.view, self.lines[self.me], ABORT);
    }

    fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
            || self.launcher_gone()
            || (0..self.lines.len()).any(|q| q != self.me && self.read(q) == ABORT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bi_core::mem::{EmulatedNode, Emulator, EmulatorConfig};

    #[test]
    fn waits_for_all_and_aborts() {
        let b = PhaseBarrier::new(2);
        std::thread::scope(|s| {
            let h = s.spawn(|| (b.wait(), b.wait()));
            assert_eq!(b.wait(), Ok(()));
            assert_eq!(b.wait(), Ok(()));
            assert_eq!(h.join().unwrap(), (Ok(()), Ok(())));
        });
        std::thread::scope(|s| {
            let h = s.spawn(|| b.wait());
            b.abort();
            assert_eq!(h.join().unwrap(), Err(Aborted));
        });
        assert_eq!(b.wait(), Err(Aborted));
    }

    /// Each of `nodes` emulated nodes' side of one region barrier at offset 128.
    fn region_barriers(emu: &Emulator, nodes: usize) -> Vec<RegionBarrier<EmulatedNode>> {
        (0..nodes)
            .map(|me| RegionBarrier::new(emu.node(me), 128, nodes, me))
            .collect()
    }

    /// The launcher's abort reaches every node of a region barrier, the first one
    /// included (a mark in a node's own line would reach only the others).
    #[test]
    fn the_launchers_abort_reaches_every_node_of_a_region_barrier() {
        let emu = Emulator::new(EmulatorConfig::new(4096, 4));
        let nodes = region_barriers(&emu, 3);
        for n in &nodes {
            assert_eq!(n.arrive(), Ok(1));
        }
        assert!(nodes.iter().all(|n| n.poll(1) == Ok(true)));
        RegionBarrier::abort_all(&emu.node(3), 128, 3);
        for (me, n) in nodes.iter().enumerate() {
            assert_eq!(n.poll(2), Err(Aborted), "node {me}");
        }
    }

    /// A node that aborts breaks the barrier for itself at once and for every other node
    /// as soon as it reads that node's line: each sees the run aborted, a wait or an
    /// arrival returns `Aborted`. Before that, no node sees an abort.
    #[test]
    fn a_nodes_abort_reaches_every_other_node_of_a_region_barrier() {
        let emu = Emulator::new(EmulatorConfig::new(4096, 3));
        let nodes = region_barriers(&emu, 3);
        let aborted = || nodes.iter().map(|n| n.is_aborted()).collect::<Vec<_>>();
        assert_eq!(aborted(), [false; 3]);
        for n in &nodes {
            assert_eq!(n.arrive(), Ok(1));
        }
        assert!(nodes.iter().all(|n| n.poll(1) == Ok(true)));
        assert_eq!(aborted(), [false; 3]);
        nodes[1].abort();
        assert_eq!(aborted(), [true; 3]);
        assert_eq!(nodes[1].arrive(), Err(Aborted));
        assert_eq!(nodes[0].wait(), Err(Aborted));
        assert_eq!(nodes[0].arrive(), Err(Aborted));
        assert_eq!(nodes[2].poll(1), Err(Aborted));
    }
}
