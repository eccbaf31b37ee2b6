//! A named map's writer dies (its host loses its cache) after every step of a scripted
//! workload, with keys inline in bucket lines and keys behind links; a restarted process
//! adopts the map. Every acknowledged write is there after each restart, on the writer's
//! handle and for a reader on another node, and no node uses reused memory (a copy of it
//! that a prefetcher brought in is refused on its stamp).

use bi_alloc::NodeHeap;
use bi_collections::Stored;
use bi_collections::map::{BiHashMap, MapWriteHandle};
use bi_collections::testing::check_reuse_hazards;
use bi_core::mem::EmulatedNode;
use bi_core::region::RegionConfig;
use bi_core::runtime::RuntimeConfig;
use bi_core::runtime::testing::Setup;
use std::collections::HashMap;
use std::hash::Hash;

const LEASE: u64 = 1_000_000;

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .node_lease(LEASE)
        .reader_lease(LEASE)
}

fn machine(seed: u64) -> Setup {
    Setup::with(
        RegionConfig::new(1 << 20).with_nodes(2),
        |c| c.seed(seed).eviction_rate(0.01).adjacent_prefetch_rate(0.2),
        config(),
    )
}

/// Node 0's process takes the writer role of the map "m" (adopting it if it exists), and
/// both nodes pass twice (the grace for what a dead writer left).
fn writer<K: Stored + Eq + Hash, V: Stored>(
    s: &Setup,
) -> MapWriteHandle<K, V, EmulatedNode, NodeHeap> {
    let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
    let map = BiHashMap::<K, V>::named(&s.region, &s.nodes[0], "m").unwrap();
    let w = map
        .take_writer(&s.nodes[0], s.nodes[0].writer(heap).unwrap())
        .unwrap();
    for _ in 0..2 {
        s.quiesce_all().unwrap();
    }
    w
}

/// Runs `steps` operations (inserts, replacements, removes, enough keys to grow the
/// array), kills the writer, adopts, checks, goes on, checks again.
fn survive<K: Stored + Eq + Hash, V: Stored + PartialEq + std::fmt::Debug>(
    steps: u64,
    key: impl Fn(u64) -> K,
    value: impl Fn(u64) -> V,
) {
    let mut s = machine(steps);
    let mut model = HashMap::new();
    let mut w = writer::<K, V>(&s);
    let apply = |w: &mut MapWriteHandle<K, V, _, _>, model: &mut HashMap<u64, u64>, i: u64| {
        let k = key((i * 37) % 97);
        if i % 5 == 4 {
            w.remove(&k).unwrap();
            model.remove(&((i * 37) % 97));
        } else {
            w.insert(k, value(i)).unwrap();
            model.insert((i * 37) % 97, i);
        }
    };
    for i in 0..steps {
        apply(&mut w, &mut model, i);
    }
    std::mem::forget(w);
    s.crash_and_restart(0, config());
    let mut w = writer::<K, V>(&s);
    let check = |s: &Setup, w: &MapWriteHandle<K, V, _, _>, model: &HashMap<u64, u64>| {
        let map = BiHashMap::<K, V>::named(&s.region, &s.nodes[1], "m").unwrap();
        let r = map.read_handle(&s.nodes[1]).unwrap();
        assert_eq!(w.len(), model.len());
        for n in 0..97 {
            let want = model.get(&n).map(|&i| value(i));
            assert_eq!(w.get(&key(n)), want, "writer, key {n} after {steps} steps");
            assert_eq!(r.get(&key(n)).unwrap(), want, "reader, key {n}");
        }
        // The adjacent prefetcher may fill a line of a free block that is then reused:
        // every load of such a copy must be one a stamp refused.
        check_reuse_hazards(s, false).unwrap_or_else(|v| panic!("{v}"));
    };
    check(&s, &w, &model);
    for i in steps..steps + 60 {
        apply(&mut w, &mut model, i);
    }
    s.quiesce_all().unwrap();
    check(&s, &w, &model);
}

#[test]
fn an_inline_map_survives_a_writer_death_after_every_step() {
    for steps in 1..=60 {
        survive(steps, |n| n, |i| i * 3);
    }
}

#[test]
fn a_map_of_wide_values_survives_a_writer_death_after_every_step() {
    // 40-byte values with a u64 key still fit a bucket entry (48 bytes), one per line;
    // `host_death` covers maps whose pairs are objects of their own.
    for steps in (1..=60).step_by(3) {
        survive(steps, |n| n, |i| [i; 5]);
    }
}

/// The writer's host dies in the middle of an operation: after its `n`th write-back of a
/// workload of inserts that grows the bucket array several times, for every `n` up to
/// the workload's end (scripted over an observed view). The adopter finds every insert
/// that returned, whatever the dead writer was doing (rewriting a bucket line, moving a
/// partition to a larger array, logging), and a reader on another node reads every key
/// as the adopter does.
#[test]
fn a_map_survives_its_writer_dying_inside_any_write_back() {
    dying_inside_any_write_back(0, false);
}

/// The same, with the other node reading the map as it is written (and passing): the
/// lines the dead writer wrote back without logging them, which that node may cache in
/// an older version, are dropped there by the adoption's log entries, which cover every
/// block the map owns.
#[test]
fn a_map_survives_its_writer_dying_inside_any_write_back_under_a_reader() {
    dying_inside_any_write_back(0, true);
}

/// The same, adopted on the other node, which read the map while it was written and
/// did not pass before the death: its cache holds old versions of lines, and those the
/// dead writer wrote back without logging them are dropped by no pass. The adopter
/// drops its node's copy of the heap before it reads the map; otherwise it would go on
/// from a line older than the one memory and every other node hold.
#[test]
fn a_map_survives_its_writer_dying_inside_any_write_back_adopted_on_a_node_that_read_it() {
    dying_inside_any_write_back(1, true);
}

/// Node 0's host dies at each write-back of a workload in turn; the map is adopted on
/// node `adopter`, and a reader on the other node checks it. With `reading`, node 1
/// reads each key as it is inserted (and passes), so its cache holds old versions of
/// lines written later.
fn dying_inside_any_write_back(adopter: usize, reading: bool) {
    use bi_core::mem::{Access, MemError, Observed};
    use bi_core::runtime::{EmulatedClock, NodeRuntime};
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    const KEYS: u64 = 300;
    const DEAD: MemError = MemError::BadSize {
        requested: 0,
        reason: "the host is dead",
    };
    let mut n = 1;
    loop {
        let mut s = machine(n as u64);
        drop(s.nodes.remove(0));
        let host = s.emu.node(0);
        let dying = host.clone();
        let write_backs = |a: &Access| matches!(a, Access::WriteBack(..));
        let (view, dead) = Observed::dying(host.clone(), n, write_backs, DEAD, move || {
            dying.crash();
        });
        let clock = Arc::new(EmulatedClock::new(host));
        let mut acked = Vec::new();
        // The host may die anywhere from its node claim on.
        if let Ok(node0) = NodeRuntime::new(view, *s.region.layout(), 0, config(), clock) {
            let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
            let taken = BiHashMap::<u64, u64>::named(&s.region, &node0, "m")
                .and_then(|map| map.take_writer(&node0, node0.writer(heap)?));
            if let Ok(mut w) = taken {
                let map = BiHashMap::<u64, u64>::named(&s.region, &s.nodes[0], "m");
                let reader = map.and_then(|m| m.read_handle(&s.nodes[0]));
                for k in 0..KEYS {
                    if w.insert(k, k * 7).is_err() {
                        break;
                    }
                    acked.push(k);
                    if let (true, Ok(r)) = (reading, &reader) {
                        // Node 1 keeps its lease (a pass that finds it lapsed would drop
                        // its whole cache) and caches the key's lines as they are now.
                        s.nodes[0].quiesce().unwrap();
                        let _ = r.get(&k);
                    }
                }
            }
        }
        let finished = !dead.load(Ordering::SeqCst);
        // Node 0's lease runs out while node 1 passes; a new process starts there.
        for _ in 0..4 {
            s.emu.advance(LEASE / 2);
            s.nodes[0].quiesce().unwrap();
        }
        let fresh = NodeRuntime::emulated(s.emu.node(0), *s.region.layout(), config()).unwrap();
        s.nodes.insert(0, fresh);
        let w = if adopter == 0 {
            writer::<u64, u64>(&s)
        } else {
            let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
            let map = BiHashMap::<u64, u64>::named(&s.region, &s.nodes[1], "m").unwrap();
            map.take_writer(&s.nodes[1], s.nodes[1].writer(heap).unwrap())
                .unwrap()
        };
        for &k in &acked {
            assert_eq!(
                w.get(&k),
                Some(k * 7),
                "key {k}: the host died at write-back {n}"
            );
        }
        // What the dead writer left half-written (a bucket line without its tag line, or
        // the other way round) is what the adopter goes on from, for readers too.
        let other = 1 - adopter;
        let map = BiHashMap::<u64, u64>::named(&s.region, &s.nodes[other], "m").unwrap();
        let r = map.read_handle(&s.nodes[other]).unwrap();
        for k in 0..KEYS {
            assert_eq!(
                r.get(&k).unwrap(),
                w.get(&k),
                "key {k}: a reader and the adopter disagree (the host died at write-back {n})"
            );
        }
        if finished {
            break; // the workload ended before the n-th write-back
        }
        n += 1;
    }
    assert!(n > 100, "the workload wrote back {n} times");
}

/// A process on node 0 that is killed right before its `n`th store (its host lives on:
/// every store it made stays in the host's cache, as on a coherent machine): from then
/// on every access it makes fails. It takes the writer role of the map "m" (adopting it
/// when it exists) and inserts `keys` (key `k` -> `k * 7`), and no destructor of it
/// runs. Returns the keys whose insert returned, and whether it was killed.
fn process_killed_at_store(
    s: &mut Setup,
    n: usize,
    keys: std::ops::Range<u64>,
) -> (Vec<u64>, bool) {
    let (acked, killed) = s.kill_process_at_store(0, n, config(), |s, node0| {
        let mut acked = Vec::new();
        let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
        let taken = BiHashMap::<u64, u64>::named(&s.region, node0, "m")
            .and_then(|map| map.take_writer(node0, node0.writer(heap)?));
        if let Ok(mut w) = taken {
            for k in keys {
                if w.insert(k, k * 7).is_err() {
                    break;
                }
                acked.push(k);
            }
            std::mem::forget(w); // a killed process runs no destructor
        }
        acked
    });
    (acked.unwrap_or_default(), killed)
}

/// Adopts the map on node 0 and checks that every key of `acked` is there, and that a
/// reader on node 1 reads keys `0..keys` as the adopter does.
fn adopt_and_check(s: &Setup, acked: &[u64], keys: u64, what: &str) {
    let w = writer::<u64, u64>(s);
    for &k in acked {
        assert_eq!(w.get(&k), Some(k * 7), "key {k}: {what}");
    }
    let map = BiHashMap::<u64, u64>::named(&s.region, &s.nodes[1], "m").unwrap();
    let r = map.read_handle(&s.nodes[1]).unwrap();
    for k in 0..keys {
        assert_eq!(
            r.get(&k).unwrap(),
            w.get(&k),
            "key {k}: a reader and the adopter disagree ({what})"
        );
    }
}

/// The writer's process is killed right before its `n`th store, for every third `n` of
/// a workload of inserts; a new process on the same node adopts the map. The adopter
/// finds every insert that returned, and a reader on another node reads every key as the
/// adopter does. A process killed inside the rewrite of a line in place leaves the line's
/// invalid stamp and part of its new words in memory (host death does not: the
/// half-written line dies with the cache); the adopter finishes it from the dead
/// writer's journal ([`bi_core::runtime::journal`]).
#[test]
fn a_map_survives_its_writers_process_killed_before_any_store() {
    const KEYS: u64 = 12;
    let mut n = 1;
    loop {
        let mut s = machine(n as u64);
        let (acked, killed) = process_killed_at_store(&mut s, n, 0..KEYS);
        adopt_and_check(&s, &acked, KEYS, &format!("killed before store {n}"));
        if !killed {
            break;
        }
        // A line's rewrite is nine stores (stamp, seven words, stamp): every third store
        // lands inside each one.
        n += 3;
    }
    assert!(n > 100, "the workload stored {n} times");
}

/// The same, and then the processes that adopt the map are killed too: the first right
/// before its first store, the next before its second, and so on until one adopts it
/// (each goes on from what the one before left). An adopter rewrites the lines its
/// predecessor left inconsistent (a bucket line whose tag line was not rewritten yet) in
/// place: killed inside such a rewrite, it leaves a half-written line the next adopter
/// must finish from the journal.
#[test]
fn a_map_survives_its_adopters_killed_at_every_store() {
    const KEYS: u64 = 12;
    let mut n = 1;
    loop {
        let mut s = machine(n as u64);
        let (acked, killed) = process_killed_at_store(&mut s, n, 0..KEYS);
        let mut adopter = 1;
        while process_killed_at_store(&mut s, adopter, 0..0).1 {
            adopter += 1;
        }
        let what = format!("writer killed before store {n}, then {adopter} adopters");
        adopt_and_check(&s, &acked, KEYS, &what);
        if !killed {
            break;
        }
        n += 7;
    }
    assert!(n > 100, "the workload stored {n} times");
}

/// A process that makes a named map while another node holds this node's modified ring
/// inside its lease (stopped, or too loaded to pass) waits for ring room as a take-over
/// does, and makes it once the nodes pass, instead of failing after a write's wait.
#[test]
#[cfg_attr(
    miri,
    ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
)]
fn making_a_map_waits_out_a_node_that_holds_the_ring_inside_its_lease() {
    use bi_core::heap::BumpHeap;
    use bi_core::runtime::BiError;
    use std::time::Duration;
    let config = RuntimeConfig::default()
        .node_lease(10_000_000_000) // ten seconds: both nodes stay live throughout
        .log_full_timeout(Duration::from_millis(100));
    let s = Setup::with(
        RegionConfig::new(1 << 20)
            .with_nodes(2)
            .with_log_ring_entries(8),
        |c| c,
        config,
    );
    s.quiesce_all().unwrap();
    let line = s.region.layout().line_size();
    let map = BiHashMap::<u64, u64>::named(&s.region, &s.nodes[0], "m").unwrap();
    // Another writer of node 0 (over node 1's arena) fills the ring; no node passes.
    let mut filler = s.nodes[0]
        .writer(BumpHeap::new(s.arena(1), line).unwrap())
        .unwrap();
    let a = bi_core::runtime::testing::fill_modified_ring(&mut filler, s.slot(0));
    assert!(matches!(
        filler.rewrite_lines(&[(a, 0, 100)]),
        Err(BiError::LogFull { .. })
    ));
    drop(filler);
    let heap = NodeHeap::new(s.arena(0), line).unwrap();
    let mut w = std::thread::scope(|scope| {
        scope.spawn(|| {
            // Well past a write's wait: the nodes pass, the ring has room again.
            std::thread::sleep(Duration::from_millis(300));
            s.quiesce_all().unwrap();
        });
        map.take_writer(&s.nodes[0], s.nodes[0].writer(heap).unwrap())
            .unwrap()
    });
    // The take-over is over: a write waits a write's wait again.
    w.insert(1, 10).unwrap();
    assert_eq!(w.get(&1), Some(10));
}

/// The writer's process on node 0 is killed right before its `n`th store, for every
/// third `n` of a workload of inserts; its host lives on and keeps in its cache what the
/// process stored and had not written back yet. Node 0 runs on this host (its record
/// names a process of this host, now gone), so node 1 takes the map over at once; the
/// adopter inserts more keys, and then node 0's cache writes back everything it holds,
/// as it may at any moment (an eviction, a new process there). A later adopter finds
/// every insert that returned, of the dead writer and of the first adopter: the takeover
/// made node 0's cache write the dead process's stores back first.
#[test]
#[cfg_attr(
    miri,
    ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
)]
fn a_map_survives_its_writers_process_killed_and_adopted_on_another_node() {
    use bi_core::mem::{Access, MemError, MemView, Observed};
    use bi_core::runtime::{EmulatedClock, NodeRuntime};
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    const KEYS: u64 = 12;
    const KILLED: MemError = MemError::BadSize {
        requested: 0,
        reason: "the process was killed",
    };
    // Node 0's runtime is out of `s.nodes` from the kill on: node 1's is first.
    let take_on_1 = |s: &Setup| {
        let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
        let map = BiHashMap::<u64, u64>::named(&s.region, &s.nodes[0], "m").unwrap();
        map.take_writer(&s.nodes[0], s.nodes[0].writer(heap).unwrap())
    };
    let mut n = 1;
    loop {
        let mut s = machine(n as u64);
        drop(s.nodes.remove(0));
        let host = s.emu.node(0);
        let stores = |a: &Access| matches!(a, Access::Store(..) | Access::CompareExchange(..));
        let (view, dead) = Observed::dying(host.clone(), n, stores, KILLED, || {});
        let clock = Arc::new(EmulatedClock::new(host.clone()));
        let mut acked = Vec::new();
        if let Ok(node0) = NodeRuntime::new(view, *s.region.layout(), 0, config(), clock) {
            let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
            let taken = BiHashMap::<u64, u64>::named(&s.region, &node0, "m")
                .and_then(|map| map.take_writer(&node0, node0.writer(heap)?));
            if let Ok(mut w) = taken {
                for k in 0..KEYS {
                    if w.insert(k, k * 7).is_err() {
                        break;
                    }
                    acked.push(k);
                }
                std::mem::forget(w);
            }
            std::mem::forget(node0);
        }
        let killed = dead.load(Ordering::SeqCst);
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        assert!(s.run_node_in(0, child.id()).unwrap());
        child.kill().unwrap();
        child.wait().unwrap();
        let what = format!("killed before store {n}");
        if let Ok(mut w) = take_on_1(&s) {
            for k in KEYS..2 * KEYS {
                w.insert(k, k * 7).unwrap();
                acked.push(k);
            }
        } else if !killed {
            panic!("{what}: the map could not be adopted");
        }
        // Node 0's host writes back what the killed process left in its cache.
        let heap = s.region.layout().heap();
        host.writeback(heap.offset, heap.len).unwrap();
        let w = take_on_1(&s).unwrap_or_else(|e| panic!("{what}: adopting again: {e}"));
        for &k in &acked {
            assert_eq!(w.get(&k), Some(k * 7), "key {k}: {what}");
        }
        if !killed {
            break;
        }
        n += 3;
    }
    assert!(n > 100, "the workload stored {n} times");
}
