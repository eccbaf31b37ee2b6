//! The rewrite journal (`runtime::journal`) by what it is for: a writer's process killed
//! inside the rewrite of a line in place leaves that line half-written in memory (its
//! stamp invalid, its host alive); the successor that takes the structure over
//! finishes it from the journal the structure's slot names, so every reader reads the
//! line again, with the new words. The same when the writer's whole host dies after the
//! hardware wrote the half-written line back.

use bi_core::heap::BumpHeap;
use bi_core::mem::EmulatedNode;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{Fetch, Lines, Link, NodeRuntime, RuntimeConfig, Via};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const LEASE: u64 = 1_000_000;
const BEFORE: [u64; 4] = [1, 2, 3, 4];
const REWRITTEN: usize = 2;
const NEW: u64 = 30;

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .node_lease(LEASE)
        .reader_lease(LEASE)
}

/// What the killed process got done.
#[derive(Debug, Default)]
struct Done {
    /// The array it published in slot 0.
    published: Option<Link<Lines<u64>>>,
    /// Its rewrite of line [`REWRITTEN`] returned.
    rewritten: bool,
    /// It was killed.
    killed: bool,
}

/// A process on node 0, killed right before its `n`th store (its host lives on, so
/// every store it made stays, as on a coherent machine), keeps a rewrite journal for
/// slot 0, publishes an array of four lines there and rewrites one line in place. Its
/// node's lease then runs out and a new process runs node 0.
fn killed_before_store(s: &mut Setup, n: usize) -> Done {
    let (done, killed) = s.kill_process_at_store(0, n, config(), |s, node0| {
        rewrite_one_line(s, node0, |_| {})
    });
    Done {
        killed,
        ..done.unwrap_or_default()
    }
}

/// As [`killed_before_store`], but the host dies: right before, the hardware writes the
/// line being rewritten back to memory (an eviction may come at any moment), and then
/// the host's cache is lost.
fn host_died_before_store(s: &mut Setup, n: usize) -> Done {
    let rewritten_line = Arc::new(AtomicUsize::new(0));
    let target = rewritten_line.clone();
    let evict = move |host: &EmulatedNode| {
        let at = target.load(Ordering::SeqCst);
        if at != 0 {
            host.evict(at).unwrap();
        }
    };
    let (done, killed) = s.kill_host_at_store(0, n, config(), evict, |s, node0| {
        rewrite_one_line(s, node0, |at| rewritten_line.store(at, Ordering::SeqCst))
    });
    Done {
        killed,
        ..done.unwrap_or_default()
    }
}

/// The killed process's work: keeps a rewrite journal for slot 0, publishes an array
/// of four lines there and rewrites one in place (whose offset it shows `rewriting`).
fn rewrite_one_line<V: bi_core::mem::MemView>(
    s: &Setup,
    node0: &NodeRuntime<V>,
    rewriting: impl FnOnce(usize),
) -> Done {
    let (line, slot) = (s.region.layout().line_size(), s.slot(0));
    let mut done = Done::default();
    let Ok(mut w) = node0.writer(BumpHeap::new(s.arena(0), line).unwrap()) else {
        return done;
    };
    let wrote = w.keep_rewrite_journal(slot).and_then(|()| {
        let a = w.alloc_lines(&BEFORE)?;
        w.publish_lines(slot, a)?;
        done.published = Some(a);
        rewriting(a.offset() + REWRITTEN * line.get());
        w.rewrite_lines(&[(a, REWRITTEN, NEW)])
    });
    done.rewritten = wrote.is_ok();
    std::mem::forget(w); // a killed process runs no destructor
    done
}

/// Line `i` of `array` as node 1 reads it from memory.
fn read_on_node_1(s: &Setup, array: Link<Lines<u64>>, i: usize) -> Fetch<u64> {
    let r = s.nodes[1].reader().unwrap();
    let g = r.enter();
    g.fetch_via(Via::Fresh, g.line(array, i).unwrap(), |v| *v)
        .unwrap()
}

/// Killed before every store in turn: the successor (on the same host) finishes the
/// line from the journal exactly when the rewrite had begun and not ended, and then
/// node 1 reads every line of the array, the rewritten one with its new value whenever
/// the rewrite had begun.
#[test]
fn a_line_its_writers_process_was_killed_rewriting_is_finished_from_the_journal() {
    killed_at_every_store(killed_before_store);
}

/// The host dies before every store in turn, the line being rewritten written back just
/// before: once the rewrite has begun, memory holds the line with its stamp invalid, and
/// only a journal that reached memory first lets the successor finish it.
#[test]
fn a_line_its_writers_host_died_rewriting_is_finished_from_the_journal() {
    killed_at_every_store(host_died_before_store);
}

/// Kills the writer (by `kill`) before every store in turn, until one run is not
/// killed, and checks what the successor and node 1 then see.
fn killed_at_every_store(kill: fn(&mut Setup, usize) -> Done) {
    let mut finished_any = false;
    for n in 1.. {
        let mut s = Setup::with(
            RegionConfig::new(1 << 18).with_nodes(2),
            |c| c.seed(n as u64),
            config(),
        );
        let done = kill(&mut s, n);
        let heap = BumpHeap::new(s.arena(1), s.region.layout().line_size()).unwrap();
        let mut successor = s.nodes[0].writer(heap).unwrap();
        let finished = successor.finish_from_journal(s.slot(0)).unwrap();
        finished_any |= finished;
        s.quiesce_all().unwrap();
        if let Some(a) = done.published {
            for (i, &before) in BEFORE.iter().enumerate() {
                let read = read_on_node_1(&s, a, i);
                if i != REWRITTEN {
                    assert_eq!(read, Fetch::Value(before), "line {i}, killed at store {n}");
                } else if done.rewritten || finished {
                    assert_eq!(read, Fetch::Value(NEW), "killed at store {n}");
                } else {
                    assert!(
                        matches!(read, Fetch::Value(v) if v == before || v == NEW),
                        "line {i}, killed at store {n}: {read:?}"
                    );
                }
            }
        } else {
            assert!(!finished, "nothing was published (killed at store {n})");
        }
        if !done.killed {
            assert!(done.rewritten && !finished);
            break;
        }
    }
    assert!(finished_any, "some kill fell inside the rewrite");
}
