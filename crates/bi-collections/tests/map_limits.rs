//! `BiHashMap` at its limits: heap exhaustion, retired memory under steady updates,
//! partitions written from different nodes, and threads reading while a writer writes.

use bi_collections::map::{BiHashMap, MapConfig};
use bi_collections::testing::{StopOnDrop, small_heap_writer};
use bi_collections::{ApplyBatch, CollectionError, Op};
use bi_core::heap::Heap;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, RuntimeConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .node_lease(100_000_000)
        .reader_lease(100_000_000)
}

/// Every node passes three times, the clock moving on between passes: what was retired
/// before is past its grace period.
fn grace_passes(s: &Setup) {
    for _ in 0..3 {
        s.emu.advance(10);
        s.quiesce_all().unwrap();
    }
}

#[test]
fn heap_exhaustion_is_an_error_and_the_map_stays_readable() {
    let s = Setup::with(
        RegionConfig::new(1 << 17).with_nodes(2),
        |c| c.seed(4),
        config(),
    );
    let map = BiHashMap::<u64, [u64; 3]>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    let mut inserted = 0u64;
    let err = loop {
        match w.insert(inserted, [inserted; 3]) {
            Ok(None) => inserted += 1,
            Ok(Some(_)) => unreachable!("keys are new"),
            Err(e) => break e,
        }
        assert!(inserted < 100_000, "the heap never ran out");
    };
    assert!(
        matches!(err, CollectionError::Runtime(BiError::Heap(_))),
        "{err:?}"
    );
    assert!(inserted > 100);
    assert_eq!(w.len() as u64, inserted);
    assert_eq!(w.get(&inserted), None, "the failed insert left nothing");
    // Replacing values needs no memory: they are rewritten where they are.
    let batch: Vec<Op<u64, [u64; 3]>> = (0..10).map(|k| Op::Insert(k, [7; 3])).collect();
    assert_eq!(w.apply_batch(&batch).unwrap().replaced, 10);
    // A batch of new keys that cannot get its overflow lines reports the error; what it
    // did not apply left nothing behind.
    let batch: Vec<Op<u64, [u64; 3]>> = (inserted..inserted + 300)
        .map(|k| Op::Insert(k, [k; 3]))
        .collect();
    let live = w.writer().heap().stats().live;
    let r = w.apply_batch(&batch);
    assert!(
        matches!(r, Err(CollectionError::Runtime(BiError::Heap(_)))),
        "{r:?}"
    );
    // Nothing of it was published, and what it had taken was given back.
    assert_eq!(w.len() as u64, inserted);
    assert_eq!(w.writer().heap().stats().live, live);
    let total = w.len() as u64;
    assert!(total < inserted + 300);
    // Another node reads every key the writer holds.
    s.quiesce_all().unwrap();
    let reader = map.read_handle(&s.nodes[1]).unwrap();
    let m = reader.enter();
    assert_eq!(m.len().unwrap() as u64, total);
    for k in 0..inserted + 300 {
        let v = m.get(&k).unwrap();
        assert_eq!(v, w.get(&k), "key {k}");
        if let Some(v) = v {
            assert!(v == [k; 3] || (k < 10 && v == [7; 3]), "key {k}: {v:?}");
        }
    }
    let present: Vec<u64> = (0..inserted + 300).filter(|k| w.get(k).is_some()).collect();
    assert_eq!(present.len() as u64, total);
    drop(m);
    // Freeing keys (a removal rewrites a line in place: it needs no memory) and letting
    // the grace period pass makes room again.
    let removed = present.len() / 2;
    for k in &present[..removed] {
        assert!(w.remove(k).unwrap().is_some(), "key {k}");
        assert_eq!(w.get(k), None, "key {k}");
    }
    for _ in 0..4 {
        s.emu.advance(100);
        s.quiesce_all().unwrap();
        w.reclaim().unwrap();
    }
    assert_eq!(w.insert(1, [1; 3]).unwrap(), None);
    s.quiesce_all().unwrap();
    let m = reader.enter();
    assert_eq!(m.get(&1).unwrap(), Some([1; 3]));
    assert_eq!(m.get(&2).unwrap(), None);
    assert_eq!(m.len().unwrap(), present.len() - removed + 1);
}

#[test]
fn retired_memory_stays_bounded_under_steady_updates() {
    let s = Setup::with(
        RegionConfig::new(1 << 19)
            .with_nodes(3)
            .with_log_ring_entries(2048),
        |c| c.seed(8).eviction_rate(0.02).clock_skew(5),
        config().skew(10),
    );
    let map = BiHashMap::<u32, u64>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    let readers: Vec<_> = (1..3)
        .map(|n| map.read_handle(&s.nodes[n]).unwrap())
        .collect();
    let keys = 64u32;
    for k in 0..keys {
        w.insert(k, 0).unwrap();
    }
    let rounds = if cfg!(miri) { 200 } else { 6_000 };
    let mut max_retired = 0usize;
    for i in 0..rounds {
        let k = (i as u32 * 7) % keys;
        w.insert(k, i).unwrap();
        let r = &readers[i as usize % 2];
        let got = r.get(&k).unwrap().unwrap();
        assert!(got <= i);
        if i % 16 == 0 {
            s.quiesce_all().unwrap();
            w.reclaim().unwrap();
        }
        s.emu.advance(2);
        max_retired = max_retired.max(w.writer().retired_bytes());
    }
    // Two or three pass intervals' worth of replaced chains, not everything ever retired.
    let line = s.region.layout().line_size().get();
    let per_update = 4 * line; // a replaced prefix is a few nodes
    assert!(
        max_retired < 64 * per_update,
        "retired bytes peaked at {max_retired}"
    );
    for _ in 0..4 {
        s.emu.advance(100);
        s.quiesce_all().unwrap();
        w.reclaim().unwrap();
    }
    assert_eq!(w.writer().retired_bytes(), 0);
    assert_eq!(s.emu.total_stats().reuse_hazards, 0);
}

#[test]
fn partitions_written_from_different_nodes_are_read_as_one_map() {
    let s = Setup::with(
        RegionConfig::new(1 << 19).with_nodes(3),
        |c| c.seed(2).eviction_rate(0.01),
        config(),
    );
    let stride = s.slot(1) - s.slot(0);
    let map = BiHashMap::<u64, u64>::partitioned(s.slot(0), stride, 3).unwrap();
    let mut writers: Vec<_> = (0..3)
        .map(|n| {
            map.partition_write_handle(s.writer(n), n..n + 1, MapConfig::new())
                .unwrap()
        })
        .collect();
    let n = if cfg!(miri) { 30 } else { 600 };
    for k in 0..n {
        let p = map.partition_of(&k);
        assert!(
            writers[(p + 1) % 3].insert(k, k).is_err(),
            "not its partition"
        );
        assert_eq!(writers[p].insert(k, k * 3).unwrap(), None);
    }
    assert!(
        writers.iter().all(|w| w.len() > n as usize / 6),
        "keys spread"
    );
    let r = map.read_handle(&s.nodes[0]).unwrap();
    for k in 0..n {
        assert_eq!(r.get(&k).unwrap(), Some(k * 3));
    }
    s.quiesce_all().unwrap();
    let m = r.enter();
    assert_eq!(m.len().unwrap(), n as usize);
    assert_eq!(m.iter().count(), n as usize);
    assert!(BiHashMap::<u64, u64>::partitioned(s.slot(0), 0, 3).is_err());
    assert!(BiHashMap::<u64, u64>::partitioned(s.slot(0), stride, 0).is_err());
}

/// Real threads: a writer thread updates keys whose values check themselves, reader
/// threads on two other nodes read them, a pass thread runs every node's pass. No read
/// ever returns a torn or foreign value, and no reused block is ever accepted.
#[test]
fn threads_read_while_the_writer_writes() {
    let s = Arc::new(Setup::with(
        RegionConfig::new(1 << 20)
            .with_nodes(3)
            .with_log_ring_entries(4096),
        |c| c.seed(12).eviction_rate(0.01),
        config(),
    ));
    let map = BiHashMap::<u32, [u64; 2]>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let keys = 200u32;
    let check = |k: u32, v: [u64; 2]| v[1] == v[0].wrapping_mul(31) ^ u64::from(k);
    let mut threads = Vec::new();
    for node in 1..3 {
        let (s, stop, reads) = (s.clone(), stop.clone(), reads.clone());
        threads.push(std::thread::spawn(move || {
            let r = map.read_handle(&s.nodes[node]).unwrap();
            let mut k = node as u32;
            while !stop.load(Ordering::Relaxed) {
                if let Some(v) = r.get(&k).unwrap() {
                    assert!(check(k, v), "key {k}: {v:?}");
                }
                k = (k + 7) % keys;
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    {
        let (s, stop) = (s.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                s.quiesce_all().unwrap();
                s.emu.advance(50);
                std::thread::yield_now();
            }
        }));
    }
    let rounds = if cfg!(miri) { 50 } else { 3_000 };
    // At least `rounds` writes, and more until the readers have read a while beside the
    // writer (a reader thread may be scheduled late on a busy machine).
    let enough = |i: u64| i >= rounds && reads.load(Ordering::Relaxed) >= 100 || i >= 100 * rounds;
    for i in (0..).take_while(|&i| !enough(i)) {
        let k = (i * 13 % u64::from(keys)) as u32;
        if i % 5 == 4 {
            w.remove(&k).unwrap();
        } else {
            w.insert(k, [i, i.wrapping_mul(31) ^ u64::from(k)]).unwrap();
        }
        if i % 32 == 0 {
            w.reclaim().unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    assert!(reads.load(Ordering::Relaxed) > 0);
    assert_eq!(s.emu.total_stats().reuse_hazards, 0);
}

/// A node that cached the bucket array before a resize iterates after it, without a pass:
/// the old chains are retired, so the iterator must start the partition again from the new
/// array (found by the map fuzz target: iteration used to fail with a stale link).
#[test]
fn iteration_after_a_resize_the_node_has_not_seen_yet() {
    for seed in bi_kit::seeds(8, 1) {
        iterate_after_resize(seed);
    }
}

fn iterate_after_resize(seed: u64) {
    // Evictions make node 1 refetch some retired chain nodes (FREED) and keep others.
    let s = Setup::with(
        RegionConfig::new(1 << 18).with_nodes(3),
        |c| c.seed(seed).eviction_rate(0.3),
        config(),
    );
    let map = BiHashMap::<u64, u64>::at(s.slot(0));
    let mut w = map
        .write_handle_with(s.writer(0), MapConfig::new().initial_buckets(8))
        .unwrap();
    for k in 0..8 {
        w.insert(k, k).unwrap();
    }
    s.quiesce_all().unwrap();
    let r = map.read_handle(&s.nodes[1]).unwrap();
    assert_eq!(r.enter().iter().count(), 8); // node 1 caches the 8-bucket array
    let before = w.capacity();
    let ops: Vec<_> = (8..40).map(|k| Op::Insert(k, k * 10)).collect();
    w.apply_batch(&ops).unwrap();
    assert!(w.capacity() > before, "the batch should grow the table");
    let mut seen: Vec<(u64, u64)> = r.enter().iter().collect::<Result<_, _>>().unwrap();
    seen.sort();
    let keys: Vec<u64> = seen.iter().map(|&(k, _)| k).collect();
    let mut unique = keys.clone();
    unique.dedup();
    assert_eq!(keys, unique, "no key twice");
    // Between passes node 1 may see the old version or the new one, never a mix of a
    // key with a wrong value.
    assert!(
        seen.iter()
            .all(|&(k, v)| v == if k < 8 { k } else { k * 10 })
    );
    assert!(seen.len() == 8 || seen.len() == 40);
    s.quiesce_all().unwrap();
    let mut all: Vec<(u64, u64)> = r.enter().iter().collect::<Result<_, _>>().unwrap();
    all.sort();
    assert_eq!(all.len(), 40);
}

#[test]
fn a_grow_the_heap_cannot_hold_is_counted_where_every_node_sees_it() {
    let s = Setup::with(
        RegionConfig::new(1 << 17).with_nodes(2),
        |c| c.seed(5),
        config(),
    );
    let map = BiHashMap::<u64, u64>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    let mut k = 0u64;
    // Until a grow fails, every insert succeeds; the one that needed it too.
    while w.failed_grows() == 0 {
        assert_eq!(w.insert(k, k).unwrap(), None, "key {k}");
        k += 1;
        assert!(k < 100_000, "the heap never ran short");
    }
    assert_eq!(w.failed_grows(), 1);
    // The table holds more than it grows at (three entries a bucket, grown at half).
    assert!(
        w.len() > w.capacity() * 3 / 2,
        "{} keys, {} buckets",
        w.len(),
        w.capacity()
    );
    s.quiesce_all().unwrap();
    let r = map.read_handle(&s.nodes[1]).unwrap();
    assert_eq!(r.enter().failed_grows().unwrap(), 1);
    for j in 0..k {
        assert_eq!(r.get(&j).unwrap(), Some(j), "key {j}");
    }
    // Removals from the long chains (in place: no memory needed) leave every other key
    // where readers find it, in the buckets' lines and their overflow lines alike.
    for j in (0..k).filter(|j| j % 4 != 0) {
        assert_eq!(w.remove(&j).unwrap(), Some(j), "key {j}");
    }
    s.quiesce_all().unwrap();
    for j in 0..k {
        let kept = (j % 4 == 0).then_some(j);
        assert_eq!(r.get(&j).unwrap(), kept, "key {j}");
    }
    // The same keys in a heap large enough: no grow fails.
    let roomy = Setup::with(
        RegionConfig::new(1 << 22).with_nodes(2),
        |c| c.seed(5),
        config(),
    );
    let map = BiHashMap::<u64, u64>::at(roomy.slot(0));
    let mut w = map.write_handle(roomy.writer(0)).unwrap();
    for j in 0..k {
        w.insert(j, j).unwrap();
    }
    roomy.quiesce_all().unwrap();
    let r = map.read_handle(&roomy.nodes[1]).unwrap();
    assert_eq!(
        (w.failed_grows(), r.enter().failed_grows().unwrap()),
        (0, 0)
    );
}

/// Overflow lines a batch staged and emptied again are dropped before anything is
/// allocated: a batch that inserts keys into full buckets and removes them all again
/// takes no memory.
#[test]
fn a_batch_that_undoes_itself_allocates_nothing() {
    let s = Setup::new(2, 31);
    let map = BiHashMap::<u64, u64>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    for k in 0..64 {
        w.insert(k, k).unwrap();
    }
    w.reclaim().unwrap();
    let live = w.writer().heap().stats().live;
    let mut ops: Vec<_> = (100..400).map(|k| Op::Insert(k, k)).collect();
    ops.extend((100..400).map(Op::Remove));
    w.apply_batch(&ops).unwrap();
    assert_eq!(w.len(), 64);
    assert_eq!(w.writer().heap().stats().live, live);
}

/// A single write that fails for lack of heap gives back what it took before it failed
/// (its value's string, a pair): the heap holds exactly what it held before. Values of
/// several lengths fill the heap, so that writes fail at each of their allocations.
#[test]
fn a_write_that_finds_no_room_gives_back_what_it_took() {
    let s = Setup::new(2, 32);
    let map = BiHashMap::<String, String>::at(s.slot(0));
    let mut w = map.write_handle(small_heap_writer(&s, 16 * 1024)).unwrap();
    let mut failures = 0;
    for len in [300, 120, 40, 17] {
        for k in 0..1000 {
            let live = w.writer().heap().stats().live;
            match w.insert(format!("{len}-{k}"), "v".repeat(len)) {
                Ok(_) => {}
                Err(e) => {
                    assert!(
                        matches!(e, CollectionError::Runtime(BiError::Heap(_))),
                        "{e:?}"
                    );
                    assert_eq!(w.writer().heap().stats().live, live, "{len}-{k}");
                    failures += 1;
                    break;
                }
            }
        }
    }
    assert!(failures >= 3, "{failures} failures");
}

/// What a write handle tells of its map's shape follows the writes: empty or not, the
/// buckets of each partition it writes (and none of another's), growth up to the most
/// a partition grows to.
#[test]
fn a_write_handle_tells_the_shape_of_what_it_writes() {
    let s = Setup::new(2, 33);
    let map = BiHashMap::<u64, [u64; 8]>::partitioned(s.slot(0), s.slot(1) - s.slot(0), 2).unwrap();
    let mut w = map.write_handle(s.writer(0)).unwrap();
    assert!(w.is_empty());
    let start = w.buckets(0).unwrap();
    assert!(start > 1 && w.buckets(1) == Some(start) && w.buckets(2).is_none());
    assert!(w.max_buckets() > start);
    w.insert(1, [1; 8]).unwrap();
    assert!(!w.is_empty());
    w.insert(1, [2; 8]).unwrap(); // the old pair is retired at once: the ring has room
    assert_eq!(w.pending_retirements(), 0);
    for k in 0..20 * start as u64 {
        w.insert(k, [k; 8]).unwrap();
    }
    let grown = w.buckets(0).unwrap();
    assert!(grown > start && grown <= w.max_buckets());
    assert_eq!(w.capacity(), grown + w.buckets(1).unwrap());
    assert!(w.contains_key(&7) && !w.contains_key(&(20 * start as u64)));
    let shown = format!("{w:?}"); // the entries, as a map's
    assert!(
        shown.starts_with('{') && shown.contains("7: [7, 7,"),
        "{} bytes",
        shown.len()
    );
}

/// A string value replaced again and again is retired each time and its memory comes
/// back after the grace period: the heap holds what the map holds, not every value
/// the key ever had.
#[test]
fn replaced_strings_come_back_to_the_heap() {
    let s = Setup::new(2, 34);
    let map = BiHashMap::<u64, String>::at(s.slot(0));
    let mut w = map.write_handle(small_heap_writer(&s, 64 * 1024)).unwrap();
    w.insert(1, "v".repeat(200)).unwrap();
    let settle = |w: &mut bi_collections::map::MapWriteHandle<u64, String, _, _>| {
        grace_passes(&s);
        w.reclaim().unwrap();
    };
    settle(&mut w);
    let live = w.writer().heap().stats().live;
    for round in 0..500 {
        w.insert(1, format!("{round:>200}")).unwrap();
        if round % 50 == 49 {
            settle(&mut w);
        }
    }
    settle(&mut w);
    assert_eq!(w.writer().heap().stats().live, live);
}

/// Retirements wait for room in the freed ring while another node has not passed: a
/// batch that removes many keys with few line rewrites fills the ring, the rest shows as
/// pending, a reader on the lagging node still reads the removed keys' values whole, and
/// once that node passes the backlog drains and nothing was reused under the reader.
#[test]
fn retirements_the_freed_ring_has_no_room_for_show_as_pending() {
    let s = Setup::with(
        RegionConfig::new(1 << 20)
            .with_nodes(2)
            .with_log_ring_entries(256),
        |c| c.seed(35),
        config(),
    );
    let map = BiHashMap::<u64, [u64; 8]>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    w.extend((0..300).map(|k| (k, [k; 8]))).unwrap();
    for _ in 0..3 {
        s.emu.advance(100);
        s.quiesce_all().unwrap();
        w.reclaim().unwrap();
    }
    assert_eq!(w.pending_retirements(), 0);
    let reader = map.read_handle(&s.nodes[1]).unwrap();
    let inside = reader.enter();
    assert_eq!(inside.get(&7).unwrap(), Some([7; 8]));
    let removals: Vec<_> = (0..300).map(Op::Remove).collect();
    w.apply_batch(&removals).unwrap();
    let pending = w.pending_retirements();
    // Some 220 line rewrites and 300 retirements: the modified ring takes the rewrites,
    // the freed ring as many retirements as it holds.
    assert_eq!(w.writer().ring_usage().1, 256);
    assert!(pending > 0, "the freed ring took every retirement");
    // Node 1 has not passed: its reader may still follow the removed pairs.
    for k in 0..300 {
        if let Some(v) = inside.get(&k).unwrap() {
            assert_eq!(v, [k; 8], "key {k}");
        }
    }
    drop(inside);
    for _ in 0..4 {
        s.emu.advance(100);
        s.quiesce_all().unwrap();
        w.reclaim().unwrap();
    }
    assert_eq!(w.pending_retirements(), 0);
    assert_eq!(w.writer().retired_blocks(), 0);
    assert_eq!(s.emu.total_stats().reuse_hazards, 0);
}

/// A batch that fails for lack of heap after some of its buckets were made ready (their
/// strings staged, their new overflow lines allocated) gives all of it back: whatever
/// the batch's size, a failed batch leaves the heap holding what it held before.
#[test]
fn a_batch_that_finds_no_room_gives_back_every_bucket_it_readied() {
    let s = Setup::new(2, 36);
    let map = BiHashMap::<u64, String>::at(s.slot(0));
    let mut w = map.write_handle(small_heap_writer(&s, 24 * 1024)).unwrap();
    let (mut failures, mut next) = (0, 0u64);
    for size in [64, 32, 16, 8, 4, 2] {
        loop {
            let live = w.writer().heap().stats().live;
            let (len, before) = (w.len(), next);
            let batch: Vec<_> = (next..next + size)
                .map(|k| Op::Insert(k, format!("{k:>24}")))
                .collect();
            match w.apply_batch(&batch) {
                Ok(_) => next += size,
                Err(e) => {
                    assert!(
                        matches!(e, CollectionError::Runtime(BiError::Heap(_))),
                        "{e:?}"
                    );
                    assert_eq!(w.writer().heap().stats().live, live, "batch of {size}");
                    assert_eq!((w.len(), w.get(&before)), (len, None));
                    failures += 1;
                    break;
                }
            }
        }
    }
    assert_eq!(failures, 6);
    for k in (0..next).step_by(7) {
        assert_eq!(w.get(&k), Some(format!("{k:>24}")), "key {k}");
    }
}

/// A batch that rewrites more lines than the node's log rings hold is published in
/// pieces that fit, each once the other node has passed: on a ring of 64 entries, a
/// batch of 300 removals (some 220 lines) is applied whole and read back by that node.
/// (Pieces of the usual size could never be published on such a ring.)
#[test]
fn a_batch_larger_than_the_log_rings_is_published_in_pieces_that_fit() {
    let s = Setup::with(
        RegionConfig::new(1 << 20)
            .with_nodes(2)
            .with_log_ring_entries(64),
        |c| c.seed(37),
        config().log_full_timeout(std::time::Duration::from_secs(5)),
    );
    let map = BiHashMap::<u64, [u64; 8]>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    // Runs `w` while both nodes pass on another thread; the passes stop however `w`
    // ends (a failed assertion included, or the scope would wait for them forever).
    let passing = |w: &mut dyn FnMut()| {
        let stop = AtomicBool::new(false);
        std::thread::scope(|t| {
            t.spawn(|| {
                while !stop.load(Ordering::Acquire) {
                    s.emu.advance(10);
                    s.quiesce_all().unwrap();
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            });
            let _stop = StopOnDrop(&stop);
            w();
        });
    };
    let inserts: Vec<_> = (0..300).map(|k| Op::Insert(k, [k; 8])).collect();
    passing(&mut || assert_eq!(w.apply_batch(&inserts).unwrap().inserted, 300));
    s.quiesce_all().unwrap();
    let reader = map.read_handle(&s.nodes[1]).unwrap();
    assert_eq!(reader.get(&299).unwrap(), Some([299; 8]));
    let mut removals: Vec<_> = (0..300).filter(|k| k % 50 != 0).map(Op::Remove).collect();
    removals.push(Op::Insert(1000, [1000; 8]));
    passing(&mut || assert_eq!(w.apply_batch(&removals).unwrap().removed, 294));
    s.quiesce_all().unwrap();
    let m = reader.enter();
    assert_eq!(m.len().unwrap(), 7);
    for k in (0..300).chain([1000]) {
        let want = (k % 50 == 0 || k == 1000).then_some([k; 8]);
        assert_eq!(m.get(&k).unwrap(), want, "key {k}");
    }
}

/// One batch through a handle that writes two partitions: each key lands in its own
/// partition, and another node finds every one of them and counts both partitions.
#[test]
fn a_batch_across_partitions_lands_each_key_in_its_own() {
    let s = Setup::new(2, 38);
    let map = BiHashMap::<u64, u64>::partitioned(s.slot(0), s.slot(1) - s.slot(0), 2).unwrap();
    let mut w = map.write_handle(s.writer(0)).unwrap();
    for round in 0..3u64 {
        let batch: Vec<_> = (0..200).map(|k| Op::Insert(k, k + round)).collect();
        w.apply_batch(&batch).unwrap();
        s.quiesce_all().unwrap();
        let reader = map.read_handle(&s.nodes[1]).unwrap();
        let m = reader.enter();
        assert_eq!(m.len().unwrap(), 200);
        for k in 0..200 {
            assert_eq!(m.get(&k).unwrap(), Some(k + round), "key {k}");
        }
    }
}

/// A map that grew and then lost most of its keys gives its buckets back: under an
/// eighth full it shrinks to a quarter to half full, and the memory of the larger
/// arrays returns to the heap after the grace period.
#[test]
fn a_map_that_empties_gives_its_buckets_back() {
    let s = Setup::with(
        RegionConfig::new(1 << 23).with_nodes(2),
        |c| c.seed(39),
        config(),
    );
    let map = BiHashMap::<u64, u64>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    let start = w.capacity();
    let settle = |w: &mut bi_collections::map::MapWriteHandle<u64, u64, _, _>| {
        grace_passes(&s);
        w.reclaim().unwrap();
    };
    for chunk in 0..25 {
        w.extend((chunk * 200..(chunk + 1) * 200).map(|k| (k, k)))
            .unwrap();
        settle(&mut w);
    }
    let grown = w.capacity();
    assert!(grown >= 16 * start, "{start} -> {grown}");
    let live = w.writer().heap().stats().live;
    // Keep one key per eight buckets: under an eighth full for any bucket width. In
    // batches: the load jumps past the shrink point rather than landing on it.
    let keep = (grown / 8) as u64;
    for chunk in 0..25u64 {
        let from = (chunk * 200).max(keep);
        let removals: Vec<_> = (from..(chunk + 1) * 200).map(Op::Remove).collect();
        w.apply_batch(&removals).unwrap();
        settle(&mut w);
    }
    settle(&mut w);
    let shrunk = w.capacity();
    assert!(
        shrunk <= grown / 4,
        "{shrunk} buckets for {keep} keys, from {grown}"
    );
    let now = w.writer().heap().stats().live;
    assert!(
        now < live / 2,
        "{live} bytes live with 5,000 keys, {now} with {keep}"
    );
    for k in 0..keep {
        assert_eq!(w.get(&k), Some(k));
    }
}

/// A batch that writes a key twice makes a pair for each write, and the first is given
/// back with the batch's other new pairs when the batch finds no room. The batch writes
/// five entries to one bucket (the first key, a second, the first again, a third and a
/// fourth), so its chain needs an overflow line, allocated after the pairs: on the
/// largest heap that cannot hold the batch, the pairs fit and the line does not, and the
/// batch fails with nothing published. Every heap size on which nothing was published
/// is left as it was.
#[test]
fn a_batch_that_writes_a_key_twice_and_finds_no_room_gives_back_every_pair() {
    use bi_collections::map::{bucket_of, key_hash};
    let mut last_failure_published = None;
    for lines in 1..400 {
        let s = Setup::new(2, 37);
        let map = BiHashMap::<u64, [u64; 6]>::at(s.slot(0));
        let Ok(mut w) = map.write_handle(small_heap_writer(&s, lines * 64)) else {
            continue;
        };
        let buckets = w.buckets(0).unwrap();
        let keys: Vec<u64> = (0..)
            .filter(|k| bucket_of(key_hash(k), buckets) == 0)
            .take(4)
            .collect();
        let batch = [
            Op::Insert(keys[0], [1; 6]),
            Op::Insert(keys[1], [1; 6]),
            Op::Insert(keys[0], [2; 6]),
            Op::Insert(keys[2], [1; 6]),
            Op::Insert(keys[3], [1; 6]),
        ];
        let live = w.writer().heap().stats().live;
        match w.apply_batch(&batch) {
            Ok(_) => {
                assert_eq!((w.len(), w.get(&keys[0])), (4, Some([2; 6])));
                assert_eq!(last_failure_published, Some(false), "{lines} lines");
                return;
            }
            Err(e) => {
                assert!(
                    matches!(e, CollectionError::Runtime(BiError::Heap(_))),
                    "{e:?}"
                );
                if w.is_empty() {
                    assert_eq!(w.writer().heap().stats().live, live, "{lines} lines");
                }
                last_failure_published = Some(!w.is_empty());
            }
        }
    }
    panic!("no heap held the batch");
}
