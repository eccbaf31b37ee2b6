//! Drives the pool lock (`bi_core::runtime::lock`, a bakery over non-coherent memory) on
//! an emulated machine of two to four nodes, interleaving the nodes one memory operation
//! at a time in an order the input chooses.
//!
//! The lock's `lock` call blocks until it holds the lock, so each node runs in a thread
//! of its own, but never two at once: every node sees memory through a view that, before
//! each load, store, write-back, invalidation or fence, hands the turn to the node the
//! input names next (for a run of one to four operations) and waits for its own. The
//! interleaving is the input's and the run is deterministic. When the input's choices run
//! out the nodes take turns round robin, a fair schedule under which every node must
//! finish within a bound.
//!
//! The input chooses the emulator seed, the rates of evictions, adjacent and random
//! prefetch and late write-backs, a clock skew of up to 31 ticks per node (the runtime is
//! told twice that), the node count, how many times each node takes the lock (one to
//! three) and how many operations it spends holding it before it commits (zero to
//! seven), and the schedule, in which some bytes advance the clock by a quarter to two
//! node leases instead (only while no node is between its lease check and the end of its
//! commit: a holder's check cannot cover a stall that comes after it).
//!
//! A node that holds the lock checks its lease (`PoolLockGuard::check`) and, if it still
//! holds, commits: it reads a counter from memory, adds one and writes it back. Rules:
//! never two nodes between a passed check and the end of their commit; no increment lost
//! (the counter ends equal to the commits); no error from `lock` or `check` other than
//! `LockLeaseLost` after a clock advance; and under the fair schedule every node finishes
//! all its rounds within the bound. Any violation panics.
//!
//! `regressions/pool_lock/` keeps the inputs of gaps this target found in the lock, since
//! closed: a node stalled inside `lock` past its lease went on as if nobody had passed
//! over it, and a heartbeat of 0 read as no lock record at all.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use bi_core::line::LineSize;
use bi_core::mem::{EmulatedNode, Emulator, MemError, MemView};
use bi_core::region::RegionConfig;
use bi_core::runtime::{BiError, EmulatedClock, NodeRuntime, ReaderOrdering, RuntimeConfig};
use bi_fuzz::hardware::{self, Events, Skew};
use bytemuck::Pod;
use libfuzzer_sys::fuzz_target;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

const MAX_NODES: usize = 4;
const MAX_SCHEDULE: usize = 3000;
/// The node lease, in ticks.
const LEASE: u64 = 1 << 20;
/// Schedule bytes from this one up advance the clock instead of naming a node.
const ADVANCE_FROM: u8 = 0xF8;
/// Operations each node runs per turn under the fair schedule.
const FAIR_RUN: usize = 4;
/// Operations the fair schedule may take before a node that has not finished counts as
/// starved.
const FAIR_BOUND: u64 = 200_000;
/// Long enough never to expire: the schedule, not the wall clock, decides who waits.
const PATIENCE: Duration = Duration::from_secs(3600);

#[derive(Debug)]
struct Input {
    events: Events,
    skew: Skew,
    nodes: u8,
    /// Per node: rounds (scaled to 1 ..= 3) and operations held before committing.
    plans: [(u8, u8); MAX_NODES],
    schedule: Vec<u8>,
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let mut input = Input {
            events: u.arbitrary()?,
            skew: u.arbitrary()?,
            nodes: u.arbitrary()?,
            plans: u.arbitrary()?,
            schedule: Vec::new(),
        };
        // Every remaining byte is a scheduling choice.
        input.schedule = u.bytes(u.len().min(MAX_SCHEDULE))?.to_vec();
        Ok(input)
    }
}

thread_local! {
    /// The node a scheduled thread runs; `None` on threads the schedule does not own.
    static NODE: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Whose turn it is.
struct Turns {
    turn: usize,
    /// Operations left in the current node's run.
    left: usize,
    schedule: Vec<u8>,
    next: usize,
    done: Vec<bool>,
    /// Operations run under the fair schedule.
    fair_ops: u64,
}

struct Scheduler {
    turns: Mutex<Turns>,
    changed: Condvar,
    emu: Emulator,
    /// Nodes between a passed lease check and the end of their commit.
    inside: AtomicUsize,
    /// The clock was advanced (a lease may have run out).
    advanced: AtomicBool,
}

impl Scheduler {
    fn lock(&self) -> MutexGuard<'_, Turns> {
        self.turns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Picks the next run: from the input's schedule while it lasts, then round robin.
    fn choose(&self, t: &mut Turns) {
        let live: Vec<usize> = (0..t.done.len()).filter(|&n| !t.done[n]).collect();
        if live.is_empty() {
            return;
        }
        while let Some(&b) = t.schedule.get(t.next) {
            t.next += 1;
            if b >= ADVANCE_FROM {
                if self.may_advance() {
                    self.emu
                        .advance(u64::from(b - ADVANCE_FROM + 1) * LEASE / 4);
                    self.advanced.store(true, Ordering::SeqCst);
                }
                continue;
            }
            t.turn = live[usize::from(b) % live.len()];
            t.left = 1 + usize::from(b / 64);
            return;
        }
        t.turn = live
            .iter()
            .copied()
            .find(|&n| n > t.turn)
            .unwrap_or(live[0]);
        t.left = FAIR_RUN;
    }

    /// Whether the clock may jump now. Never while a node commits (no lease check can
    /// cover a stall after it); at any other moment, inside `lock` too.
    fn may_advance(&self) -> bool {
        self.inside.load(Ordering::SeqCst) == 0
    }

    /// Called by a scheduled thread before each memory operation: runs it now if its
    /// run goes on, otherwise hands the turn on and waits for it to come back.
    fn step(&self) {
        let Some(me) = NODE.get() else { return };
        let mut t = self.lock();
        if t.next >= t.schedule.len() {
            t.fair_ops += 1;
            assert!(
                t.fair_ops <= FAIR_BOUND,
                "no progress: nodes {:?} have not finished after {FAIR_BOUND} operations of a fair schedule",
                (0..t.done.len())
                    .filter(|&n| !t.done[n])
                    .collect::<Vec<_>>()
            );
        }
        t.left = t.left.saturating_sub(1);
        if t.left == 0 {
            self.choose(&mut t);
            self.changed.notify_all();
        }
        while t.turn != me {
            t = self.changed.wait(t).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A scheduled thread starts: it waits for its first turn.
    fn enter(&self, me: usize) {
        NODE.set(Some(me));
        let mut t = self.lock();
        while t.turn != me {
            t = self.changed.wait(t).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A scheduled thread is done: the others go on without it.
    fn leave(&self, me: usize) {
        let mut t = self.lock();
        t.done[me] = true;
        self.choose(&mut t);
        self.changed.notify_all();
        NODE.set(None);
    }
}

/// A node's view of memory, each operation taken in its turn.
#[derive(Clone)]
struct Scheduled {
    node: EmulatedNode,
    scheduler: Arc<Scheduler>,
}

impl MemView for Scheduled {
    fn size(&self) -> usize {
        self.node.size()
    }

    fn line_size(&self) -> LineSize {
        self.node.line_size()
    }

    fn load<T: Pod>(&self, offset: usize) -> Result<T, MemError> {
        self.scheduler.step();
        self.node.load(offset)
    }

    fn store<T: Pod>(&self, offset: usize, value: &T) -> Result<(), MemError> {
        self.scheduler.step();
        self.node.store(offset, value)
    }

    fn writeback(&self, offset: usize, len: usize) -> Result<(), MemError> {
        self.scheduler.step();
        self.node.writeback(offset, len)
    }

    fn invalidate(&self, offset: usize, len: usize) -> Result<(), MemError> {
        self.scheduler.step();
        self.node.invalidate(offset, len)
    }

    fn flush(&self, offset: usize, len: usize) -> Result<(), MemError> {
        self.scheduler.step();
        self.node.flush(offset, len)
    }

    fn fence(&self) {
        self.scheduler.step();
        self.node.fence();
    }

    fn compare_exchange_u64(&self, offset: usize, current: u64, new: u64) -> Result<u64, MemError> {
        self.scheduler.step();
        self.node.compare_exchange_u64(offset, current, new)
    }

    fn note_reuse(&self, offset: usize, len: usize) -> Result<(), MemError> {
        self.scheduler.step();
        self.node.note_reuse(offset, len)
    }
}

/// One node's part: take the lock `rounds` times; each time spend `hold` operations
/// holding it, check the lease and, if it still holds, commit an increment.
fn node_main(
    rt: &NodeRuntime<Scheduled>,
    scheduler: &Scheduler,
    rounds: usize,
    hold: usize,
    counter: usize,
    scratch: usize,
    commits: &AtomicUsize,
) {
    let view = rt.view();
    for _ in 0..rounds {
        let guard = rt
            .lock(PATIENCE)
            .unwrap_or_else(|e| panic!("node {}: lock: {e}", rt.node()));
        for _ in 0..hold {
            let _: u64 = view.load(scratch).expect("scratch line");
        }
        match guard.check() {
            Ok(()) => {}
            Err(BiError::LockLeaseLost { .. }) if scheduler.advanced.load(Ordering::SeqCst) => {
                continue;
            }
            Err(e) => panic!("node {}: check: {e}", rt.node()),
        }
        let others = scheduler.inside.fetch_add(1, Ordering::SeqCst);
        assert_eq!(
            others,
            0,
            "node {} committed while another node was committing",
            rt.node()
        );
        view.invalidate(counter, 8).expect("counter");
        view.fence();
        let n: u64 = view.load(counter).expect("counter");
        view.store(counter, &(n + 1)).expect("counter");
        view.writeback(counter, 8).expect("counter");
        view.fence();
        commits.fetch_add(1, Ordering::SeqCst);
        scheduler.inside.fetch_sub(1, Ordering::SeqCst);
        drop(guard);
    }
}

fn run(input: &Input) {
    let nodes = 2 + usize::from(input.nodes % 3);
    let (region, emu) = hardware::machine(
        RegionConfig::new(0)
            .with_readers_per_node(1)
            .with_log_ring_entries(8)
            .with_root_entries(1)
            .with_size(1 << 16),
        nodes,
        &input.events,
        |c| c.clock_skew(input.skew.ticks()).cache_lines(64),
    );
    let layout = *region.layout();
    let line = layout.line_size().get();
    let scheduler = Arc::new(Scheduler {
        turns: Mutex::new(Turns {
            turn: 0,
            left: 0,
            schedule: input.schedule.clone(),
            next: 0,
            done: vec![false; nodes],
            fair_ops: 0,
        }),
        changed: Condvar::new(),
        emu: emu.clone(),
        inside: AtomicUsize::new(0),
        advanced: AtomicBool::new(false),
    });
    scheduler.choose(&mut scheduler.lock());
    let config = RuntimeConfig::default()
        .node_lease(LEASE)
        .reader_lease(LEASE)
        .skew(input.skew.bound())
        .reader_ordering(ReaderOrdering::Emulated);
    // Built on this thread, which the schedule does not own: no operation here waits.
    let runtimes: Vec<NodeRuntime<Scheduled>> = (0..nodes)
        .map(|n| {
            let view = Scheduled {
                node: emu.node(n),
                scheduler: scheduler.clone(),
            };
            let clock = Arc::new(EmulatedClock::new(emu.node(n)));
            NodeRuntime::new(view, layout, n, config.clone(), clock).expect("runtime")
        })
        .collect();
    let heap = layout.heap().offset;
    let counter = heap;
    let commits = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let threads: Vec<_> = runtimes
            .iter()
            .enumerate()
            .map(|(n, rt)| {
                let (rounds, hold) = input.plans[n];
                let (scheduler, commits) = (&*scheduler, &commits);
                scope.spawn(move || {
                    scheduler.enter(n);
                    node_main(
                        rt,
                        scheduler,
                        1 + usize::from(rounds % 3),
                        usize::from(hold % 8),
                        counter,
                        heap + (1 + n) * line,
                        commits,
                    );
                    scheduler.leave(n);
                })
            })
            .collect();
        // Joined one by one (the scope's own wait ends before a thread's thread-local
        // destructors have run, which the leak check would count against this input).
        for t in threads {
            t.join().expect("node thread");
        }
    });
    assert_eq!(
        emu.peek::<u64>(counter).expect("counter"),
        commits.load(Ordering::SeqCst) as u64,
        "an increment made under the lock was lost"
    );
}

fuzz_target!(|input: Input| run(&input));
