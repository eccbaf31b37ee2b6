//! The pool lock (`runtime::lock`): mutual exclusion between nodes whose caches are not
//! coherent, under adversarial emulated hardware, with leases for nodes that die holding
//! it.
//!
//! Miri skips these (threads spinning on real time; the lock has no `unsafe` code): loom
//! checks the lock's interleavings instead (`loom_lock`).

use bi_core::mem::{Emulator, MemView};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, RuntimeConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const NODES: usize = 3;
const ROUNDS: usize = 25;

fn machine(seed: u64, runtime: RuntimeConfig) -> Setup {
    Setup::with(
        RegionConfig::new(1 << 18).with_nodes(NODES as u32),
        |c| {
            c.seed(seed)
                .cache_lines(64)
                .eviction_rate(0.01)
                .adjacent_prefetch_rate(0.2)
                .random_prefetch_rate(0.05)
        },
        runtime,
    )
}

fn patient() -> RuntimeConfig {
    RuntimeConfig::default()
        .node_lease(u64::MAX / 4)
        .reader_lease(u64::MAX / 4)
}

/// What went wrong in one run: sections that overlapped another (seen through a
/// coherent counter the lock does not know about) and increments of a counter in shared
/// memory that were lost (each section reads it from memory, adds one, writes it back).
#[derive(Debug, Default, PartialEq, Eq)]
struct Violations {
    overlaps: usize,
    lost: u64,
    timeouts: usize,
}

/// `threads` threads per node take the lock `ROUNDS` times each.
fn contend(s: &Setup, timeout: Duration, threads: usize) -> Violations {
    let counter = s.slot(0);
    let inside = AtomicUsize::new(0);
    let overlaps = AtomicUsize::new(0);
    let (timeouts, entered) = (AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|scope| {
        for rt in s
            .nodes
            .iter()
            .flat_map(|rt| std::iter::repeat_n(rt, threads))
        {
            let (inside, overlaps) = (&inside, &overlaps);
            let (timeouts, entered) = (&timeouts, &entered);
            scope.spawn(move || {
                let view = rt.view();
                for _ in 0..ROUNDS {
                    let guard = match rt.lock(timeout) {
                        Ok(g) => g,
                        Err(BiError::LockTimeout { .. }) => {
                            timeouts.fetch_add(1, Ordering::SeqCst);
                            continue;
                        }
                        Err(e) => panic!("lock: {e}"),
                    };
                    entered.fetch_add(1, Ordering::SeqCst);
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    view.invalidate(counter, 8).unwrap();
                    view.fence();
                    let n: u64 = view.load(counter).unwrap();
                    std::thread::yield_now();
                    view.store(counter, &(n + 1)).unwrap();
                    view.writeback(counter, 8).unwrap();
                    view.fence();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    drop(guard);
                }
            });
        }
    });
    let view = s.nodes[0].view();
    view.invalidate(counter, 8).unwrap();
    view.fence();
    let n: u64 = view.load(counter).unwrap();
    Violations {
        overlaps: overlaps.into_inner(),
        lost: entered.into_inner() as u64 - n,
        timeouts: timeouts.into_inner(),
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn threads_of_one_process_take_the_lock_one_at_a_time() {
    // Two threads per node: a node has one lock record, which two threads taking the
    // bakery at once would both write.
    let v = contend(&machine(9, patient()), Duration::from_secs(60), 2);
    assert_eq!(v, Violations::default());
}

#[test]
#[cfg_attr(miri, ignore)]
fn only_one_node_holds_the_lock_under_adversarial_hardware() {
    for seed in bi_kit::seeds(4, 4) {
        let v = contend(&machine(seed, patient()), Duration::from_secs(60), 1);
        assert_eq!(v, Violations::default(), "seed {seed}");
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_dead_holder_is_passed_over_after_its_lease() {
    // Long enough that the waits below (some thousand emulated ticks) stay within it.
    let lease = 1_000_000;
    let s = machine(
        7,
        RuntimeConfig::default()
            .node_lease(lease)
            .reader_lease(lease),
    );
    // Node 0 takes the lock and dies holding it (its guard never runs).
    std::mem::forget(s.nodes[0].lock(Duration::from_secs(1)).unwrap());
    match s.nodes[1].lock(Duration::from_millis(20)) {
        Err(BiError::LockTimeout { node: 1, holder: 0 }) => {}
        other => panic!("expected a timeout behind node 0, got {other:?}"),
    }
    advance(&s.emu, 2 * lease);
    let guard = s.nodes[1].lock(Duration::from_millis(20)).unwrap();
    guard.check().unwrap();
    // And the guard says when its own lease no longer covers it.
    advance(&s.emu, lease);
    assert!(matches!(
        guard.check(),
        Err(BiError::LockLeaseLost { node: 1 })
    ));
}

#[test]
#[cfg_attr(miri, ignore = "spawns a process and asks the kernel about it")]
fn a_holder_whose_process_is_gone_is_passed_over_at_once() {
    let lease = 1_000_000;
    let s = machine(
        8,
        RuntimeConfig::default()
            .node_lease(lease)
            .reader_lease(lease),
    );
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    // Node 0 runs in the child (as its share record says) and dies holding the lock.
    assert!(s.run_node_in(0, child.id()).unwrap());
    std::mem::forget(s.nodes[0].lock(Duration::from_secs(1)).unwrap());
    match s.nodes[1].lock(Duration::from_millis(20)) {
        Err(BiError::LockTimeout { node: 1, holder: 0 }) => {}
        other => panic!("the child lives: expected a timeout behind node 0, got {other:?}"),
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The emulated clock stands still: no lease ran out, yet the lock is free.
    let guard = s.nodes[1].lock(Duration::from_millis(20)).unwrap();
    guard.check().unwrap();
}

fn advance(emu: &Emulator, ticks: u64) {
    emu.advance(ticks);
}

/// A node stalled inside the pool lock past half its lease, while it takes a writer
/// role, has written nothing: the step runs again with the lock taken anew and the role
/// is taken, instead of failing its caller with a lost lease (as a loaded machine's
/// scheduler stalls a process now and then).
#[test]
fn a_step_stalled_inside_the_lock_runs_again_and_succeeds() {
    use bi_core::mem::{Access, Observed};
    use bi_core::runtime::role::WRITER_RECORD_OFFSET;
    use bi_core::runtime::{EmulatedClock, NodeRuntime};
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    const LEASE: u64 = 1_000_000;
    let config = RuntimeConfig::default()
        .node_lease(LEASE)
        .reader_lease(LEASE);
    let mut s = Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        |c| c.seed(3),
        config.clone(),
    );
    // Node 0 runs over an observed view (its plain runtime gives the node up first).
    drop(s.nodes.remove(0));
    let record = s.slot(0) + WRITER_RECORD_OFFSET;
    let stalls = Arc::new(AtomicUsize::new(0));
    let armed = Arc::new(AtomicBool::new(true));
    let (arm, stalled, emu) = (armed.clone(), stalls.clone(), s.emu.clone());
    let view = Observed::new(s.emu.node(0), move |access| {
        // The role's record is read under the lock, before the check that guards the
        // store: the node stalls there, once, for most of a lease.
        if let Access::Load(at) = access
            && at == record
            && arm.swap(false, Ordering::SeqCst)
        {
            emu.advance(LEASE * 3 / 4);
            stalled.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    });
    let clock = Arc::new(EmulatedClock::new(s.emu.node(0)));
    let rt = NodeRuntime::new(view, *s.region.layout(), 0, config, clock).unwrap();
    let role = rt.take_writer_role(s.slot(0), Duration::from_millis(100));
    assert_eq!(stalls.load(Ordering::SeqCst), 1, "the schedule ran");
    let role = role.expect("the role, taken on the second try");
    assert!(role.is_held().unwrap());
    // The other node finds the role held: one holder.
    assert!(matches!(
        s.nodes[0].take_writer_role(s.slot(0), Duration::from_millis(100)),
        Err(BiError::WriterAlive { node: 0 })
    ));
}

/// The doorway's purpose: a node that read the others' tickets but has not yet written
/// its own is *choosing*, and every other node waits for it. Scripted: node 0 stops right
/// after it read node 1's record (ticket 0) and before it writes its ticket; node 1 then
/// takes a ticket (1) and must wait. Once node 0 goes on it takes ticket 1 too and goes
/// first (lower node id), so a node 1 that had not waited would be inside with it.
#[test]
fn a_node_waits_while_another_is_choosing_its_ticket() {
    use bi_core::mem::{Access, Observed};
    use bi_core::runtime::{EmulatedClock, NodeRuntime};
    use std::sync::atomic::AtomicU8;
    use std::sync::{Arc, Mutex, mpsc};

    let mut s = Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        |c| c.seed(5),
        patient(),
    );
    let lock_record = |node: usize| {
        let layout = s.region.layout();
        layout.node_record(node).unwrap().offset + layout.slot_size()
    };
    let theirs = lock_record(1);
    // Node 0 runs over an observed view (its plain runtime gives the node up first).
    drop(s.nodes.remove(0));
    let (paused_tx, paused) = mpsc::channel::<()>();
    let (go, go_rx) = mpsc::channel::<()>();
    let (paused_tx, go_rx) = (Mutex::new(paused_tx), Mutex::new(go_rx));
    // 0: waiting for node 0 to read node 1's record; 1: read; 2: stopped once, done.
    let step = AtomicU8::new(0);
    let view = Observed::new(s.emu.node(0), move |access| {
        match (step.load(Ordering::SeqCst), access) {
            (0, Access::Load(at)) if at == theirs => step.store(1, Ordering::SeqCst),
            (1, _) => {
                step.store(2, Ordering::SeqCst);
                paused_tx.lock().unwrap().send(()).unwrap();
                go_rx.lock().unwrap().recv().unwrap();
            }
            _ => {}
        }
        Ok(())
    });
    let clock = Arc::new(EmulatedClock::new(s.emu.node(0)));
    let node0 = NodeRuntime::new(view, *s.region.layout(), 0, patient(), clock).unwrap();
    let node1 = &s.nodes[0];
    let (inside, overlaps) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let section = |held: Duration| {
        if inside.fetch_add(1, Ordering::SeqCst) != 0 {
            overlaps.fetch_add(1, Ordering::SeqCst);
        }
        std::thread::sleep(held);
        inside.fetch_sub(1, Ordering::SeqCst);
    };
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let _guard = node0.lock(Duration::from_secs(30)).unwrap();
            section(Duration::from_millis(50));
        });
        paused.recv().unwrap(); // node 0 is choosing
        scope.spawn(|| {
            let _guard = node1.lock(Duration::from_secs(30)).unwrap();
            section(Duration::from_millis(300));
        });
        // Time for node 1 to go in, if it did not wait.
        std::thread::sleep(Duration::from_millis(100));
        go.send(()).unwrap();
    });
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "both nodes held the lock"
    );
}

/// A waiting node keeps its own record live while it waits, so it keeps its place in
/// line: node 1 waits behind node 0's holder, node 2 comes after it, and node 1 goes
/// first when node 0 leaves, even though by then it has waited more than half a lease
/// (past which a node whose record was not renewed must withdraw and take a new ticket,
/// behind node 2's). The clock moves in jumps of 3/8 of the lease: a waiter that renews
/// more than a quarter lease after its last heartbeat stays live; one that does not
/// lapses at the second jump, and node 2 (which came a jump later) does not.
#[test]
#[cfg_attr(miri, ignore)]
fn a_waiter_past_half_its_lease_keeps_its_place_in_line() {
    use std::sync::Mutex;

    // Far above the ticks the emulated operations of the waiting loops add themselves.
    const LEASE: u64 = 1 << 30;
    let s = machine(
        9,
        RuntimeConfig::default()
            .node_lease(LEASE)
            .reader_lease(LEASE),
    );
    let record = |node: usize| lock_record(&s, node);
    let waiting = |node: usize| waiting(&s, node);
    let fresh = |node: usize| s.emu.now().saturating_sub(record(node).heartbeat) <= LEASE / 4;
    let holder = s.nodes[0].lock(Duration::from_secs(1)).unwrap();
    let order = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        let enter = |node: usize| {
            let order = &order;
            let runtime = &s.nodes[node];
            move || {
                let _guard = runtime.lock(Duration::from_secs(10)).unwrap();
                order.lock().unwrap().push(node);
            }
        };
        scope.spawn(enter(1));
        wait_for(&|| waiting(1));
        advance(&s.emu, LEASE * 3 / 8);
        wait_for(&|| fresh(1));
        scope.spawn(enter(2));
        wait_for(&|| waiting(2));
        assert!(
            record(2).ticket > record(1).ticket,
            "node 2 came after node 1"
        );
        advance(&s.emu, LEASE * 3 / 8);
        wait_for(&|| fresh(1) && fresh(2));
        drop(holder);
    });
    assert_eq!(
        *order.lock().unwrap(),
        [1, 2],
        "the node that waited longer lost its place in line"
    );
}

/// Node `node`'s lock record, as in memory.
fn lock_record(s: &Setup, node: usize) -> bi_core::runtime::LockRecord {
    let layout = s.region.layout();
    let at = layout.node_record(node).unwrap().offset + layout.slot_size();
    s.nodes[0].view().load_from_memory(at).unwrap()
}

/// Whether node `node` holds a ticket and has finished choosing it.
fn waiting(s: &Setup, node: usize) -> bool {
    let r = lock_record(s, node);
    r.ticket != 0 && r.choosing == 0
}

/// Waits until `done` holds, for at most two seconds (boundedly: a step that never
/// comes is what some tests are about, and they then fail on what follows).
fn wait_for(done: &dyn Fn() -> bool) {
    let since = std::time::Instant::now();
    while !done() && since.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A guard reports its place in line: node 1, which took its ticket while node 0 held
/// the lock, enters with the next one, and says so in its `Debug` form too.
#[test]
#[cfg_attr(miri, ignore)]
fn a_guard_reports_the_ticket_it_entered_with() {
    let s = machine(10, patient());
    let first = s.nodes[0].lock(Duration::from_secs(1)).unwrap();
    assert_eq!(first.ticket(), 1);
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let guard = s.nodes[1].lock(Duration::from_secs(10)).unwrap();
            (guard.ticket(), format!("{guard:?}"))
        });
        wait_for(&|| waiting(&s, 1));
        drop(first);
        let (ticket, shown) = waiter.join().unwrap();
        assert_eq!(ticket, 2);
        assert!(shown.contains("node: 1, ticket: 2"), "{shown}");
    });
}
