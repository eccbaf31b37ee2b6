//! A line half-rewritten by a killed process: a map's writer rewrites bucket lines in
//! place (invalid stamp, new words, new stamp). When its process is killed in the middle
//! while its host goes on, every store it made stays (the host's caches are coherent),
//! so memory holds a line that no read accepts, and the process that takes the map over
//! cannot read it.
//!
//! The schedule: node 0's process takes the writer role of a named map and inserts keys;
//! its view refuses every access from its `n`th store on (the process is killed; the
//! node's cache keeps what it stored), for every `n` over the workload; node 1 passes
//! while node 0's lease runs out, and a new process on node 0 takes the map over.
//! Broken ([`Fault::RewriteJournal`]): the writer does not journal a line before it
//! rewrites it, and the successor finds the half-written line unreadable. BI: the
//! successor finishes the line from the dead writer's journal. Counted: takeovers that
//! failed, and keys a reader on node 1 then read otherwise than the new writer.

use super::Hazard;
use bi_alloc::NodeHeap;
use bi_collections::map::BiHashMap;
use bi_core::mem::{Access, MemError, Observed};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{EmulatedClock, Fault, NodeRuntime, RuntimeConfig};
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub(super) const HAZARD: Hazard = Hazard {
    name: "line_half_rewritten_by_a_killed_process",
    fault: Fault::RewriteJournal,
    counts: "takeovers that failed, and keys then read otherwise than the new writer",
    run,
};

const LEASE: u64 = 1_000_000;
const KEYS: u64 = 1;
const KILLED: MemError = MemError::BadSize {
    requested: 0,
    reason: "the process was killed",
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let config = config.node_lease(LEASE).reader_lease(LEASE);
    // Kill points: every sixth store of the workload after its setup (a line's rewrite
    // is nine stores, so each line's is hit), shifted by the seed.
    over_kill_points(160 + seed as usize % 6, 6, |n| kill_at(&config, seed, n))
}

/// Runs `kill_at` at kill points `first`, `first + step`, ... until one finds the
/// workload ended before it; sums what went wrong (`kill_at` returns the count and
/// whether the workload ended).
pub(super) fn over_kill_points(
    first: usize,
    step: usize,
    mut kill_at: impl FnMut(usize) -> (u64, bool),
) -> u64 {
    let mut failures = 0;
    for n in (first..).step_by(step) {
        let (count, finished) = kill_at(n);
        failures += count;
        if finished {
            break;
        }
    }
    failures
}

/// One run killed before store `n`: the count of what went wrong, and whether the
/// workload ended before store `n`.
fn kill_at(config: &RuntimeConfig, seed: u64, n: usize) -> (u64, bool) {
    let mut s = Setup::with(
        RegionConfig::new(1 << 20).with_nodes(2),
        |c| c.seed(seed),
        config.clone(),
    );
    let (_, killed) = writer_killed_at_store(&mut s, config, n, KEYS);
    let finished = !killed;
    for _ in 0..4 {
        s.emu.advance(LEASE / 2);
        s.nodes[0].quiesce().expect("pass");
    }
    let fresh =
        NodeRuntime::emulated(s.emu.node(0), *s.region.layout(), config.clone()).expect("runtime");
    s.nodes.insert(0, fresh);
    let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).expect("arena");
    let taken = s.nodes[0]
        .writer(heap)
        .map_err(Into::into)
        .and_then(|writer| {
            s.quiesce_all().expect("pass");
            BiHashMap::<u64, u64>::named(&s.region, &s.nodes[0], "m")?
                .take_writer(&s.nodes[0], writer)
        });
    let Ok(w) = taken else {
        return (1, finished);
    };
    s.quiesce_all().expect("pass");
    s.quiesce_all().expect("pass");
    let map = BiHashMap::<u64, u64>::named(&s.region, &s.nodes[1], "m").expect("map");
    let r = map.read_handle(&s.nodes[1]).expect("reader");
    let wrong = (0..KEYS)
        .filter(|k| r.get(k).ok() != Some(w.get(k)))
        .count();
    (wrong as u64, finished)
}

/// Node 0's process takes the writer role of the named map "m" and inserts keys
/// `0..keys` (`k -> k`), and is killed right before its `n`th store: its view refuses
/// every access from then on, and node 0's cache keeps what it stored (its host lives
/// on). Node 0's runtime is left out of `s.nodes`. Returns the keys whose insert
/// returned, and whether the kill came before the workload ended.
pub(super) fn writer_killed_at_store(
    s: &mut Setup,
    config: &RuntimeConfig,
    n: usize,
    keys: u64,
) -> (Vec<u64>, bool) {
    drop(s.nodes.remove(0));
    let host = s.emu.node(0);
    let stores = |a: &Access| matches!(a, Access::Store(..) | Access::CompareExchange(..));
    let (view, dead) = Observed::dying(host.clone(), n, stores, KILLED, || {});
    let clock = Arc::new(EmulatedClock::new(host));
    let mut acked = Vec::new();
    if let Ok(node0) = NodeRuntime::new(view, *s.region.layout(), 0, config.clone(), clock) {
        let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).expect("arena");
        let taken = BiHashMap::<u64, u64>::named(&s.region, &node0, "m")
            .and_then(|map| map.take_writer(&node0, node0.writer(heap)?));
        if let Ok(mut w) = taken {
            for k in 0..keys {
                if w.insert(k, k).is_err() {
                    break;
                }
                acked.push(k);
            }
            std::mem::forget(w); // a killed process runs no destructor
        }
        std::mem::forget(node0);
    }
    (acked, dead.load(Ordering::SeqCst))
}
