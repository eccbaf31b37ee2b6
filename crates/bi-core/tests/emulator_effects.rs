//! The effects of non-coherence, each reproduced in the emulator and counted by its oracle.
//!
//! Every test stages one thing a non-coherent machine does to a program (a stale copy, a
//! store that stays private, stores seen out of order, a lost update on a shared line, a
//! prefetch undoing an invalidate, a read of reused memory) and asserts both the values
//! the program sees and the counts the oracle reports.

use bi_core::line::LineSize;
use bi_core::mem::{ClockSource, Emulator, EmulatorConfig, MemError, MemView, NodeStats};
use std::thread;

fn machine(nodes: usize) -> Emulator {
    Emulator::new(EmulatorConfig::new(4096, nodes))
}

/// 1. A reader keeps its stale copy after the writer publishes, until it invalidates.
#[test]
fn stale_until_invalidate() {
    let emu = machine(2);
    let (a, b) = (emu.node(0), emu.node(1));
    assert_eq!(b.load::<u64>(0).unwrap(), 0);
    a.store(0, &7u64).unwrap();
    a.writeback(0, 8).unwrap();
    a.fence();
    assert_eq!(
        emu.peek::<u64>(0).unwrap(),
        7,
        "the write-back reached memory"
    );
    emu.advance(5);
    for _ in 0..3 {
        assert_eq!(
            b.load::<u64>(0).unwrap(),
            0,
            "b still reads its cached copy"
        );
    }
    let before = b.stats();
    assert_eq!(before.stale_reads, 3);
    assert!(
        before.max_staleness > 5,
        "staleness counts from the write-back"
    );
    b.invalidate(0, 8).unwrap();
    b.fence();
    assert_eq!(b.load::<u64>(0).unwrap(), 7);
    let after = b.stats();
    assert_eq!(after.stale_reads, 3, "a fresh copy is not stale");
    assert_eq!(
        (after.lines_invalidated, after.misses, after.hits),
        (1, 2, 3)
    );
    assert_eq!(a.stats().stale_reads, 0);
}

/// 2. A store that is never written back stays private until an eviction writes it.
#[test]
fn unwritten_store_is_invisible_until_evicted() {
    // Explicit eviction.
    let emu = machine(2);
    let (a, b) = (emu.node(0), emu.node(1));
    a.store(64, &11u64).unwrap();
    a.fence();
    assert_eq!(b.load::<u64>(64).unwrap(), 0);
    assert_eq!(emu.peek::<u64>(64).unwrap(), 0);
    a.evict(64).unwrap();
    assert_eq!(emu.peek::<u64>(64).unwrap(), 11);
    b.invalidate(64, 8).unwrap();
    assert_eq!(b.load::<u64>(64).unwrap(), 11);
    let s = a.stats();
    assert_eq!(
        (s.evictions, s.dirty_evictions, s.lines_written_back),
        (1, 1, 1)
    );

    // Capacity eviction: a one-line cache must give the line up at a's next miss.
    let emu = Emulator::new(EmulatorConfig::new(4096, 2).cache_lines(1));
    let (a, b) = (emu.node(0), emu.node(1));
    a.store(0, &5u64).unwrap();
    assert_eq!(b.load::<u64>(0).unwrap(), 0);
    b.invalidate(0, 8).unwrap();
    a.load::<u64>(128).unwrap(); // unrelated miss evicts line 0
    assert_eq!(b.load::<u64>(0).unwrap(), 5);
    assert_eq!(a.stats().dirty_evictions, 1);
    assert!(!a.is_cached(0));
}

/// 3. Two stores, a0 then a1, are seen by another node in the opposite order.
#[test]
fn stores_seen_in_the_opposite_order() {
    let emu = machine(2);
    let (a, b) = (emu.node(0), emu.node(1));
    let (a0, a1) = (0, 64); // different lines
    b.load::<u64>(a0).unwrap(); // b happens to hold a0's line
    a.store(a0, &1u64).unwrap();
    a.writeback(a0, 8).unwrap();
    a.fence();
    a.store(a1, &1u64).unwrap();
    a.writeback(a1, 8).unwrap();
    a.fence();
    // b misses on a1 and sees the second store, hits a0 and misses the first.
    assert_eq!(b.load::<u64>(a1).unwrap(), 1);
    assert_eq!(b.load::<u64>(a0).unwrap(), 0);
    assert_eq!(b.stats().stale_reads, 1);
    // Once a0's line leaves b's cache (here: the hardware evicts it), the first store shows.
    b.evict(a0).unwrap();
    assert_eq!(b.load::<u64>(a0).unwrap(), 1);
    assert_eq!(b.stats().stale_reads, 1);
}

/// 3b. With late write-backs, two write-backs with no fence between them land in either
/// order (a publication needs the fence between object and pointer); a fence lands both,
/// and a host that dies first loses the ones still in flight.
#[test]
#[cfg_attr(miri, ignore = "200 seeded machines; no unsafe code of its own")]
fn late_writebacks_land_in_any_order_until_a_fence() {
    let (data, flag) = (0, 64); // different lines
    let mut orders = [0; 2]; // [flag first, data first]
    for seed in bi_kit::seeds(200, 200) {
        let emu = Emulator::new(EmulatorConfig::new(4096, 2).seed(seed).late_writebacks(0.3));
        let (a, b) = (emu.node(0), emu.node(1));
        a.store(data, &1u64).unwrap();
        a.writeback(data, 8).unwrap();
        a.store(flag, &1u64).unwrap();
        a.writeback(flag, 8).unwrap();
        // Node 0 keeps working (its own loads draw its events) while node 1 polls.
        let mut seen = None;
        for _ in 0..50 {
            a.load::<u64>(2048).unwrap();
            b.invalidate(0, 128).unwrap();
            b.fence();
            let (d, f) = (b.load::<u64>(data).unwrap(), b.load::<u64>(flag).unwrap());
            if seen.is_none() && d + f == 1 {
                seen = Some(f == 1);
            }
        }
        if let Some(flag_first) = seen {
            orders[usize::from(!flag_first)] += 1;
        }
        a.fence();
        b.invalidate(0, 128).unwrap();
        b.fence();
        assert_eq!(
            (b.load::<u64>(data).unwrap(), b.load::<u64>(flag).unwrap()),
            (1, 1)
        );
        assert!(a.stats().early_landings <= 2);
    }
    assert!(
        orders[0] > 0 && orders[1] > 0,
        "both orders seen: {orders:?}"
    );

    let emu = Emulator::new(EmulatorConfig::new(4096, 2).late_writebacks(0.0001));
    let (a, b) = (emu.node(0), emu.node(1));
    a.store(data, &1u64).unwrap();
    a.writeback(data, 8).unwrap();
    assert_eq!(a.crash(), 1); // still in flight, so lost with the dirty line
    assert_eq!(b.load::<u64>(data).unwrap(), 0);
}

/// 4. Two nodes write different bytes of one line: the later write-back loses the other's.
#[test]
fn shared_line_loses_an_update() {
    let emu = machine(2);
    let (a, b) = (emu.node(0), emu.node(1));
    a.store(0, &1u64).unwrap(); // bytes 0..8
    b.store(8, &2u64).unwrap(); // bytes 8..16 of the same line
    a.writeback(0, 64).unwrap();
    b.writeback(0, 64).unwrap(); // whole line, with b's stale copy of bytes 0..8
    a.fence();
    b.fence();
    assert_eq!(
        emu.peek::<[u64; 2]>(0).unwrap(),
        [0, 2],
        "a's store was overwritten"
    );
    assert_eq!(a.stats().lost_writes, 0);
    assert_eq!(b.stats().lost_writes, 1);
    assert_eq!(emu.version(0).unwrap(), 2);

    // Negative control: lines of their own, nothing lost.
    let emu = machine(2);
    let (a, b) = (emu.node(0), emu.node(1));
    a.store(0, &1u64).unwrap();
    b.store(64, &2u64).unwrap();
    a.writeback(0, 128).unwrap();
    b.writeback(0, 128).unwrap();
    assert_eq!(
        emu.peek::<[u64; 9]>(0).unwrap()[..],
        [1, 0, 0, 0, 0, 0, 0, 0, 2]
    );
    assert_eq!(emu.total_stats().lost_writes, 0);
}

/// 5. A prefetch refills a line right after it was invalidated, before the writer's
///    write-back lands, so the reader sees the old value despite invalidating.
#[test]
fn prefetch_after_invalidate_brings_back_the_old_value() {
    let emu = machine(2);
    let (a, b) = (emu.node(0), emu.node(1));
    assert_eq!(b.load::<u64>(0).unwrap(), 0);
    a.store(0, &3u64).unwrap();
    b.invalidate(0, 8).unwrap(); // b does the right thing...
    b.prefetch(0).unwrap(); // ...but the prefetcher refills the line at once
    a.writeback(0, 8).unwrap(); // and only now does a's write-back land
    a.fence();
    assert_eq!(b.load::<u64>(0).unwrap(), 0);
    let s = b.stats();
    assert_eq!((s.prefetches, s.stale_reads, s.hits), (1, 1, 1));

    // The same hazard from the random event: with the rate at 1, b's next operation
    // refills the line it just invalidated.
    let emu = Emulator::new(EmulatorConfig::new(4096, 2).random_prefetch_rate(1.0));
    let (a, b) = (emu.node(0), emu.node(1));
    b.load::<u64>(0).unwrap();
    a.store(0, &3u64).unwrap();
    b.invalidate(0, 8).unwrap();
    b.load::<u64>(256).unwrap(); // any operation: the refill of line 0 happens here
    assert!(b.is_cached(0));
    a.writeback(0, 8).unwrap();
    assert_eq!(b.load::<u64>(0).unwrap(), 0);
    assert_eq!(b.stats().prefetches, 1);
    assert_eq!(b.stats().stale_reads, 1);
}

/// 6. A copy from before the heap reused the memory is a reuse hazard.
#[test]
fn reuse_hazard_after_incarnation_bump() {
    let emu = machine(3);
    let (a, b, c) = (emu.node(0), emu.node(1), emu.node(2));
    a.store(128, &0xAAAAu64).unwrap(); // the old object
    a.flush(128, 8).unwrap();
    a.fence();
    assert_eq!(b.load::<u64>(128).unwrap(), 0xAAAA); // b caches it
    // The object is freed and its memory reused for a new one.
    emu.bump_incarnation(128, 64).unwrap();
    a.store(128, &0xBBBBu64).unwrap();
    a.writeback(128, 8).unwrap();
    a.fence();
    // Long after: no pass is due to drop a copy of a dead incarnation, so its age is no
    // staleness of the passes'; the hazard is that a read uses it.
    emu.advance(5_000);
    assert_eq!(
        b.load::<u64>(128).unwrap(),
        0xAAAA,
        "b reads the dead object"
    );
    let s = b.stats();
    assert_eq!((s.reuse_hazards, s.stale_reads), (1, 1));
    assert_eq!(
        s.max_staleness, 0,
        "a dead incarnation's copy counts no staleness"
    );
    // Negative control: a node that invalidates before reading sees the new object.
    c.invalidate(128, 8).unwrap();
    c.fence();
    assert_eq!(c.load::<u64>(128).unwrap(), 0xBBBB);
    assert_eq!(c.stats().reuse_hazards, 0);
    // Even without any new write, the old copy is from a dead incarnation.
    emu.bump_incarnation(128, 1).unwrap();
    c.load::<u64>(128).unwrap();
    assert_eq!(c.stats().reuse_hazards, 1);
    assert_eq!(c.stats().stale_reads, 0);
    // Positive control: a stale copy of the live incarnation, as old, counts.
    b.invalidate(128, 8).unwrap();
    b.fence();
    let live = b.load::<u64>(128).unwrap();
    a.store(128, &(live + 1)).unwrap();
    a.writeback(128, 8).unwrap();
    a.fence();
    emu.advance(5_000);
    assert_eq!(b.load::<u64>(128).unwrap(), live, "b's copy is stale");
    assert!(b.stats().max_staleness >= 5_000);
}

/// Runs a fixed pseudo-random program of loads, stores and cache operations on two nodes
/// and returns what it observed.
fn scripted_run(seed: u64, ops: usize) -> (Vec<NodeStats>, Vec<u64>, Vec<u64>) {
    let cfg = EmulatorConfig::new(2048, 2)
        .seed(seed)
        .cache_geometry(2, 2)
        .eviction_rate(0.1)
        .adjacent_prefetch_rate(0.3)
        .random_prefetch_rate(0.2);
    let emu = Emulator::new(cfg);
    let nodes = [emu.node(0), emu.node(1)];
    let mut seen = Vec::new();
    let mut x = 0x1234_5678_u64; // the program itself is fixed: its own tiny generator
    for i in 0..ops {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let node = &nodes[(x & 1) as usize];
        let off = ((x >> 8) % 64) as usize * 8; // 8 lines: a busy working set
        match (x >> 4) % 6 {
            0 | 1 => seen.push(node.load::<u64>(off).unwrap()),
            2 | 3 => node.store(off, &(i as u64)).unwrap(),
            4 => node.writeback(off, 8).unwrap(),
            _ => node.invalidate(off, 8).unwrap(),
        }
    }
    let memory = (0..256).map(|w| emu.peek::<u64>(w * 8).unwrap()).collect();
    (vec![emu.stats(0), emu.stats(1)], seen, memory)
}

#[test]
fn same_seed_same_run() {
    let ops = if cfg!(miri) { 400 } else { 5_000 };
    let first = scripted_run(42, ops);
    assert_eq!(first, scripted_run(42, ops));
    let total = first.0.iter().fold(NodeStats::default(), |mut t, s| {
        t += *s;
        t
    });
    assert!(
        total.evictions > 0 && total.prefetches > 0 && total.stale_reads > 0,
        "{total}"
    );
    assert_ne!(
        first.0,
        scripted_run(43, ops).0,
        "another seed, another schedule"
    );
}

#[test]
fn works_with_32_64_and_128_byte_lines() {
    for size in [32, 64, 128] {
        let line = LineSize::new(size).unwrap();
        let emu = Emulator::new(EmulatorConfig::new(4096, 2).line_size(line));
        let (a, b) = (emu.node(0), emu.node(1));
        assert_eq!(a.line_size(), line);
        // b caches lines 0 and 1; a writes the last word of line 0 and the first of line 1.
        b.load::<u64>(0).unwrap();
        b.load::<u64>(size).unwrap();
        a.store(size - 8, &1u64).unwrap();
        a.store(size, &2u64).unwrap();
        a.writeback(size - 1, 1).unwrap(); // one byte: rounds out to all of line 0
        assert_eq!(emu.peek::<u64>(size - 8).unwrap(), 1);
        assert_eq!(emu.peek::<u64>(size).unwrap(), 0, "line 1 not written back");
        assert!(a.is_dirty(size) && !a.is_dirty(0));
        a.writeback(size, size).unwrap();
        assert_eq!(a.stats().lines_written_back, 2);
        // Invalidating the last byte of line 0 and the first of line 1 drops both lines.
        b.invalidate(size - 1, 2).unwrap();
        assert!(!b.is_cached(0) && !b.is_cached(size));
        assert_eq!(b.stats().lines_invalidated, 2);
        assert_eq!(b.load::<[u64; 2]>(size - 8).unwrap(), [1, 2]);
        // Empty ranges touch nothing.
        a.invalidate(0, 0).unwrap();
        assert!(a.is_cached(0));
    }
}

#[test]
fn misaligned_loads_span_lines() {
    let emu = machine(2);
    let (a, b) = (emu.node(0), emu.node(1));
    let off = 60; // bytes 60..68: the last 4 of line 0, the first 4 of line 1
    a.store(off, &0x1111_2222_3333_4444u64).unwrap();
    assert_eq!(a.stats().misses, 2);
    a.writeback(off, 8).unwrap();
    assert_eq!(a.stats().lines_written_back, 2);
    assert_eq!(b.load::<u64>(off).unwrap(), 0x1111_2222_3333_4444);
    assert_eq!((b.stats().loads, b.stats().misses), (1, 2));

    // A reader holding only one of the two lines sees a value torn across the lines.
    let c = emu.node(1);
    c.invalidate(64, 64).unwrap();
    a.store(off, &u64::MAX).unwrap();
    a.writeback(off, 8).unwrap();
    let torn = c.load::<u64>(off).unwrap();
    let mut expect = 0x1111_2222_3333_4444u64.to_ne_bytes();
    expect[4..].copy_from_slice(&[0xFF; 4]);
    assert_eq!(torn, u64::from_ne_bytes(expect));
    assert_eq!(c.stats().stale_reads, 1);
}

#[test]
fn out_of_bounds_is_an_error_never_a_panic() {
    let emu = machine(1);
    let a = emu.node(0);
    let oob = |offset, len| MemError::OutOfBounds {
        offset,
        len,
        size: 4096,
    };
    assert_eq!(a.load::<u64>(4092), Err(oob(4092, 8)));
    assert_eq!(a.store(4096, &1u8), Err(oob(4096, 1)));
    assert_eq!(a.writeback(4000, 100), Err(oob(4000, 100)));
    assert_eq!(a.invalidate(usize::MAX, 2), Err(oob(usize::MAX, 2)));
    assert_eq!(a.flush(1, 4096), Err(oob(1, 4096)));
    assert_eq!(a.prefetch(4096), Err(oob(4096, 1)));
    assert_eq!(a.evict(5000), Err(oob(5000, 1)));
    assert_eq!(emu.bump_incarnation(4095, 2), Err(oob(4095, 2)));
    assert!(emu.peek::<u64>(4089).is_err());
    assert!(emu.version(4096).is_err() && emu.incarnation(4096).is_err());
    assert!(!a.is_cached(4096) && !a.is_dirty(usize::MAX));
    assert_eq!(
        a.writeback(4096, 0),
        Ok(()),
        "an empty range at the end is fine"
    );
    assert_eq!(a.load::<[u8; 0]>(4096), Ok([]));
    assert!(Emulator::try_new(EmulatorConfig::new(4096, 1).cache_geometry(0, 8)).is_err());
    assert!(emu.try_node(1).is_err());
    assert_eq!(
        a.stats(),
        NodeStats {
            loads: 1,
            fences: 0,
            ..NodeStats::default()
        }
    );
}

#[test]
fn clock_skew_and_time_sources() {
    let emu = Emulator::new(EmulatorConfig::new(4096, 4).clock_skew(1_000).seed(9));
    emu.advance(10_000);
    let skews: Vec<i64> = (0..4).map(|n| emu.node(n).clock_skew()).collect();
    assert!(skews.iter().all(|s| s.abs() <= 1_000));
    assert!(skews.iter().any(|&s| s != 0));
    for n in 0..4 {
        let node = emu.node(n);
        assert_eq!(
            node.local_time() as i64 - emu.now() as i64,
            node.clock_skew()
        );
    }
    // Real time: a stale copy ages in nanoseconds.
    let emu = Emulator::new(EmulatorConfig::new(4096, 2).clock(ClockSource::Real));
    let (a, b) = (emu.node(0), emu.node(1));
    b.load::<u64>(0).unwrap();
    a.store(0, &1u64).unwrap();
    a.writeback(0, 8).unwrap();
    emu.advance(1_000);
    b.load::<u64>(0).unwrap();
    assert!(b.stats().max_staleness >= 1_000);
}

#[test]
fn stats_reset_and_total() {
    let emu = machine(2);
    emu.node(0).load::<u64>(0).unwrap();
    emu.node(1).store(0, &1u64).unwrap();
    emu.node(1).fence();
    let t = emu.total_stats();
    assert_eq!((t.loads, t.stores, t.misses, t.fences), (1, 1, 2, 1));
    emu.reset_stats();
    assert_eq!(emu.total_stats(), NodeStats::default());
    assert!(
        emu.node(1).is_dirty(0),
        "resetting counters leaves caches alone"
    );
}

/// Two threads per node, each owning its own lines, with random evictions and prefetches
/// on: the run finishes, and once every node has written back and invalidated, memory and
/// every node agree on each thread's last values.
#[test]
fn two_threads_per_node_smoke() {
    const NODES: usize = 2;
    const THREADS: usize = 2;
    const SLOTS: usize = 4; // lines owned per thread
    let rounds: u64 = if cfg!(miri) { 8 } else { 2_000 };
    let cfg = EmulatorConfig::new(NODES * THREADS * SLOTS * 64 + 64 * 8, NODES)
        .cache_geometry(2, 2)
        .eviction_rate(0.05)
        .adjacent_prefetch_rate(0.2)
        .random_prefetch_rate(0.05)
        .seed(5);
    let emu = Emulator::new(cfg);
    let slot_of = |n: usize, t: usize, s: usize| ((n * THREADS + t) * SLOTS + s) * 64;
    thread::scope(|scope| {
        for n in 0..NODES {
            for t in 0..THREADS {
                let node = emu.node(n);
                scope.spawn(move || {
                    for r in 1..=rounds {
                        for s in 0..SLOTS {
                            let off = slot_of(n, t, s);
                            assert_eq!(node.load::<u64>(off).unwrap(), r - 1, "own slot");
                            node.store(off, &r).unwrap();
                            // Glance at another node's slot: any earlier value is allowed.
                            let other = slot_of((n + 1) % NODES, t, s);
                            assert!(node.load::<u64>(other).unwrap() <= rounds);
                        }
                        if r % 3 == 0 {
                            node.writeback(slot_of(n, t, 0), SLOTS * 64).unwrap();
                            node.fence();
                        }
                        if r % 5 == 0 {
                            node.invalidate(slot_of((n + 1) % NODES, 0, 0), THREADS * SLOTS * 64)
                                .unwrap();
                        }
                    }
                });
            }
        }
    });
    let size = emu.size();
    for n in 0..NODES {
        emu.node(n).writeback(0, size).unwrap();
        emu.node(n).fence();
    }
    for n in 0..NODES {
        emu.node(n).invalidate(0, size).unwrap();
        emu.node(n).fence();
    }
    for n in 0..NODES {
        for t in 0..THREADS {
            for s in 0..SLOTS {
                let off = slot_of(n, t, s);
                assert_eq!(emu.peek::<u64>(off).unwrap(), rounds);
                for reader in 0..NODES {
                    assert_eq!(emu.node(reader).load::<u64>(off).unwrap(), rounds);
                }
            }
        }
    }
    let total = emu.total_stats();
    assert_eq!(total.lost_writes, 0, "no line has two writers");
    assert_eq!(total.reuse_hazards, 0);
    assert!(total.stores == NODES as u64 * THREADS as u64 * SLOTS as u64 * rounds);
}

mod single_writer {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Load(usize),
        Store(usize, u32),
        WriteBack(usize, usize),
        Invalidate(usize, usize),
        Evict(usize),
        Prefetch(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let off = 0..1020usize;
        prop_oneof![
            off.clone().prop_map(Op::Load),
            (off.clone(), any::<u32>()).prop_map(|(o, v)| Op::Store(o, v)),
            (off.clone(), 0..200usize).prop_map(|(o, l)| Op::WriteBack(o, l)),
            (off.clone(), 0..200usize).prop_map(|(o, l)| Op::Invalidate(o, l)),
            off.clone().prop_map(Op::Evict),
            off.prop_map(Op::Prefetch),
        ]
    }

    proptest! {
        #![proptest_config(bi_kit::prop::config(64, 2))]

        /// Whatever the hardware does (evictions, prefetches, any cache shape), a node that
        /// is the only writer reads back its own latest stores, and after it writes
        /// everything back, memory holds them too. Misaligned 4-byte accesses included.
        #[test]
        fn a_lone_writer_is_coherent_with_itself(
            ops in prop::collection::vec(op(), 1..if cfg!(miri) { 20 } else { 200 }),
            seed in any::<u64>(),
            ways in 1..4usize,
        ) {
            let cfg = EmulatorConfig::new(1024, 2)
                .line_size(LineSize::new(32).unwrap())
                .seed(seed)
                .cache_geometry(2, ways)
                .eviction_rate(0.2)
                .adjacent_prefetch_rate(0.5)
                .random_prefetch_rate(0.3);
            let emu = Emulator::new(cfg);
            let (a, b) = (emu.node(0), emu.node(1));
            let mut model = vec![0u8; 1024];
            for op in ops {
                match op {
                    Op::Load(o) => {
                        let want = u32::from_ne_bytes(model[o..o + 4].try_into().unwrap());
                        prop_assert_eq!(a.load::<u32>(o).unwrap(), want);
                    }
                    Op::Store(o, v) => {
                        a.store(o, &v).unwrap();
                        model[o..o + 4].copy_from_slice(&v.to_ne_bytes());
                    }
                    Op::WriteBack(o, l) => a.writeback(o, l.min(1024 - o)).unwrap(),
                    Op::Invalidate(o, l) => a.invalidate(o, l.min(1024 - o)).unwrap(),
                    Op::Evict(o) => a.evict(o).unwrap(),
                    Op::Prefetch(o) => a.prefetch(o).unwrap(),
                }
            }
            a.writeback(0, 1024).unwrap();
            a.fence();
            b.invalidate(0, 1024).unwrap();
            prop_assert_eq!(&emu.peek::<[u8; 1024]>(0).unwrap()[..], &model[..]);
            prop_assert_eq!(&b.load::<[u8; 1024]>(0).unwrap()[..], &model[..]);
            let s = emu.total_stats();
            prop_assert_eq!((s.stale_reads, s.lost_writes, s.reuse_hazards), (0, 0, 0));
        }
    }
}
