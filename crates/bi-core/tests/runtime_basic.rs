//! The runtime's API under the emulator: publication and lookup across nodes, nested
//! guards, a non-blocking `synchronize`, back-pressure from a full log, leases for readers
//! and for nodes, and the background pass thread; plus a smoke test on real hardware.

use bi_core::heap::{BumpHeap, Heap};
use bi_core::mem::{EmulatedNode, MemView};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::{Setup, fill_modified_ring};
use bi_core::runtime::{BiError, Link, RuntimeConfig, Unpublished, Writer};
mod common;

use common::Val;
use std::time::Duration;

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .node_lease(1_000_000)
        .reader_lease(1_000_000)
}

#[test]
fn publish_then_lookup_on_another_node_after_its_pass() {
    let rounds = if cfg!(miri) { 8 } else { 40 };
    for seed in bi_kit::seeds(4, 1) {
        let s = Setup::with(
            RegionConfig::new(1 << 18).with_nodes(3),
            |c| {
                c.seed(seed)
                    .eviction_rate(0.02)
                    .adjacent_prefetch_rate(0.3)
                    .random_prefetch_rate(0.05)
                    .clock_skew(20)
            },
            config().skew(40),
        );
        let mut w = s.writer(0);
        let readers: Vec<_> = (1..3).map(|n| s.nodes[n].reader().unwrap()).collect();
        for id in 1..=rounds {
            let b = w.alloc(Val::new(id)).unwrap();
            let old = w.publish(s.slot(0), b).unwrap();
            if !old.is_null() {
                w.retire(old).unwrap();
            }
            s.quiesce_all().unwrap();
            for r in &readers {
                let g = r.enter();
                let v = g.load::<Val>(s.slot(0)).unwrap().unwrap();
                assert!(v.valid(), "torn or reused object observed");
                assert_eq!(v.id, id, "seed {seed}: not fresh after the node's pass");
            }
            w.reclaim().unwrap();
        }
        assert_eq!(s.emu.total_stats().reuse_hazards, 0, "seed {seed}");
        assert!(w.heap().stats().reuses > 0, "blocks were reused");
    }
}

type TestWriter = Writer<EmulatedNode, BumpHeap>;

/// Node 0's writer after it published `Val(1)` in slot 0 and every node passed.
fn one_value_published(s: &Setup) -> TestWriter {
    let mut w = s.writer(0);
    let b = w.alloc(Val::new(1)).unwrap();
    w.publish(s.slot(0), b).unwrap();
    s.quiesce_all().unwrap();
    w
}

/// Blocks `w` gives back after `passes` passes of every node.
fn reclaimed_after(s: &Setup, w: &mut TestWriter, passes: usize) -> usize {
    for _ in 0..passes {
        s.quiesce_all().unwrap();
    }
    w.reclaim().unwrap().freed_blocks
}

/// Replaces the value in slot 0 and retires `old`.
fn replace_and_retire(s: &Setup, w: &mut TestWriter, old: Link<Val>) {
    let b = w.alloc(Val::new(2)).unwrap();
    w.publish(s.slot(0), b).unwrap();
    w.retire(old).unwrap();
}

/// A section lasts until its last guard drops, in whatever order the guards drop: the
/// guard that opened it dropped first leaves it open for a guard entered inside it, and
/// for one entered after that; memory retired meanwhile waits for the last of them.
#[test]
fn a_section_outlives_its_opening_guard_while_nested_ones_live() {
    let s = Setup::new(2, 0);
    let mut w = one_value_published(&s);
    let r = s.nodes[1].reader().unwrap();
    let opener = r.enter();
    let first = opener.load::<Val>(s.slot(0)).unwrap().unwrap().link();
    let nested = r.enter();
    drop(opener);
    assert!(r.is_active(), "a nested guard keeps the section open");
    let late = r.enter(); // inside the same section, though its opener is gone
    replace_and_retire(&s, &mut w, first);
    assert_eq!(
        reclaimed_after(&s, &mut w, 4),
        0,
        "reclaimed under a live guard"
    );
    drop(nested);
    assert!(r.is_active(), "the late guard keeps it open");
    assert_eq!(
        reclaimed_after(&s, &mut w, 4),
        0,
        "reclaimed under a live guard"
    );
    drop(late);
    assert!(!r.is_active());
    assert_eq!(reclaimed_after(&s, &mut w, 2), 1);
    // And the next section is one of its own: opened and closed by one guard.
    drop(r.enter());
    assert!(!r.is_active());
}

#[test]
fn nested_guards_count_as_one_section() {
    let s = Setup::new(2, 0);
    let mut w = one_value_published(&s);
    let r = s.nodes[1].reader().unwrap();
    let outer = r.enter();
    let first = outer.load::<Val>(s.slot(0)).unwrap().unwrap().link();
    {
        let inner = r.enter();
        assert_eq!(inner.load::<Val>(s.slot(0)).unwrap().unwrap().id, 1);
    }
    assert!(
        r.is_active(),
        "dropping the inner guard keeps the section open"
    );
    // Replace and retire while the outer guard is held: not reclaimable.
    replace_and_retire(&s, &mut w, first);
    assert_eq!(reclaimed_after(&s, &mut w, 4), 0);
    drop(outer);
    assert!(!r.is_active());
    assert_eq!(reclaimed_after(&s, &mut w, 2), 1);
}

#[test]
fn synchronize_never_blocks_even_with_a_reader_inside() {
    let s = Setup::new(2, 1);
    let mut w = s.writer(0);
    let b = w.alloc(7u64).unwrap();
    w.publish(s.slot(0), b).unwrap();
    let r = s.nodes[1].reader().unwrap();
    let g = r.enter();
    let link = g.load::<u64>(s.slot(0)).unwrap().unwrap().link();
    let b = w.alloc(8u64).unwrap();
    w.publish(s.slot(0), b).unwrap();
    w.retire(link).unwrap();
    let t = std::time::Instant::now();
    for _ in 0..if cfg!(miri) { 4 } else { 100 } {
        s.quiesce_all().unwrap();
        let _ = w.synchronize().unwrap();
    }
    if !cfg!(miri) {
        assert!(t.elapsed() < Duration::from_secs(20));
    }
    assert_eq!(w.reclaim().unwrap().freed_blocks, 0);
    // The retired object is marked FREED: the guard refuses it rather than hand it out.
    assert!(matches!(g.follow(link), Err(BiError::StaleLink { .. })));
    drop(g);
}

#[test]
fn a_full_log_pushes_back_and_loses_nothing() {
    let s = Setup::with(
        RegionConfig::new(1 << 18)
            .with_nodes(2)
            .with_log_ring_entries(8),
        |c| c.seed(3),
        config().log_full_timeout(Duration::from_millis(5)),
    );
    s.quiesce_all().unwrap();
    let mut w = s.writer(0);
    let mut published = 0u64;
    let mut last = 0u64;
    // Two entries per publication (slot and object): 4 fit.
    let pending = loop {
        let b = w.alloc(last + 1).unwrap();
        match w.try_publish(s.slot(0), b) {
            Ok(_) => {
                published += 1;
                last += 1;
            }
            Err(Unpublished {
                error: BiError::LogFull { capacity, .. },
                bibox,
            }) => {
                assert_eq!(capacity, 8);
                break bibox;
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(published, 4);
    // The blocking variant waits, then reports the same back-pressure.
    let t = std::time::Instant::now();
    let back = match w.publish(s.slot(0), pending) {
        Err(Unpublished {
            error: BiError::LogFull { .. },
            bibox,
        }) => bibox,
        other => panic!("expected LogFull, got {other:?}"),
    };
    assert!(t.elapsed() >= Duration::from_millis(5));
    // Every node passes: space comes back and the very same box goes out.
    let reports = s.quiesce_all().unwrap();
    assert_eq!(reports[1].modified, 8, "node 1 consumed every logged entry");
    w.try_publish(s.slot(0), back).unwrap();
    s.quiesce_all().unwrap();
    let r = s.nodes[1].reader().unwrap();
    assert_eq!(*r.enter().load::<u64>(s.slot(0)).unwrap().unwrap(), 5);
}

#[test]
fn a_reader_stopped_in_its_section_stalls_reclamation_until_its_lease_expires() {
    let s = Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        |c| c.seed(4),
        config().reader_lease(50_000),
    );
    let mut w = s.writer(0);
    let stuck = s.nodes[1].reader().unwrap();
    let other = s.nodes[1].reader().unwrap();
    let b = w.alloc(Val::new(1)).unwrap();
    w.publish(s.slot(0), b).unwrap();
    s.quiesce_all().unwrap();
    let g = stuck.enter();
    let seen = g.load::<Val>(s.slot(0)).unwrap().unwrap().link();
    for id in 2..10 {
        let b = w.alloc(Val::new(id)).unwrap();
        let old = w.publish(s.slot(0), b).unwrap();
        w.retire(old).unwrap();
        for rep in s.quiesce_all().unwrap() {
            assert!(rep.expired_readers.is_empty());
        }
        // Other readers come and go.
        let h = other.enter();
        assert_eq!(h.load::<Val>(s.slot(0)).unwrap().unwrap().id, id);
        drop(h);
    }
    assert_eq!(
        w.reclaim().unwrap().freed_blocks,
        0,
        "stalled by the reader"
    );
    s.emu.advance(50_001);
    let reports = s.quiesce_all().unwrap();
    assert_eq!(reports[1].expired_readers, vec![stuck.index()]);
    s.quiesce_all().unwrap();
    let rep = w.reclaim().unwrap();
    assert_eq!(rep.freed_blocks, 8, "resumes after the reader lease");
    assert!(rep.grace.lease_expired.is_empty());
    assert_eq!(s.nodes[1].record().unwrap().expired_readers, 2);
    // The stopped reader still never accepts a freed or reused object.
    match g.follow(seen) {
        Ok(Some(v)) => assert!(v.valid()),
        Ok(None) => unreachable!(),
        Err(BiError::StaleLink { .. }) => {}
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_node_that_stops_passing_is_excluded_after_the_node_lease() {
    let s = Setup::with(
        RegionConfig::new(1 << 18).with_nodes(3),
        |c| c.seed(5),
        config().node_lease(40_000),
    );
    let mut w = s.writer(0);
    s.quiesce_all().unwrap();
    let mut old = Link::null();
    for id in 1..6 {
        let b = w.alloc(Val::new(id)).unwrap();
        let prev = w.publish(s.slot(0), b).unwrap();
        if !prev.is_null() {
            w.retire(prev).unwrap();
        }
        old = prev;
        for n in 0..2 {
            s.nodes[n].quiesce().unwrap(); // node 2 is silent
        }
    }
    let _ = old;
    let rep = w.reclaim().unwrap();
    assert_eq!(rep.freed_blocks, 0, "node 2 has not passed");
    assert!(rep.grace.lease_expired.is_empty());
    s.emu.advance(40_001);
    for n in 0..2 {
        s.nodes[n].quiesce().unwrap();
        s.nodes[n].quiesce().unwrap();
    }
    let rep = w.reclaim().unwrap();
    assert_eq!(rep.grace.lease_expired, vec![2]);
    assert_eq!(rep.freed_blocks, 4);
    // When it comes back, it knows it may have been excluded and drops its whole heap.
    let back = s.nodes[2].quiesce().unwrap();
    assert!(back.whole_heap);
    let r = s.nodes[2].reader().unwrap();
    assert_eq!(r.enter().load::<Val>(s.slot(0)).unwrap().unwrap().id, 5);
    assert!(w.reclaim().unwrap().grace.lease_expired.is_empty());
}

#[test]
fn an_excluded_node_whose_log_was_overwritten_invalidates_everything() {
    let s = Setup::with(
        RegionConfig::new(1 << 18)
            .with_nodes(3)
            .with_log_ring_entries(8),
        |c| c.seed(7),
        config().node_lease(20_000),
    );
    let mut w = s.writer(0);
    s.quiesce_all().unwrap();
    let r = s.nodes[2].reader().unwrap();
    assert!(r.enter().load::<Val>(s.slot(0)).unwrap().is_none()); // node 2 caches the slot
    s.emu.advance(20_001); // node 2 falls silent past its lease
    for id in 1..=12 {
        let b = w.alloc(Val::new(id)).unwrap();
        let old = w.try_publish(s.slot(0), b).unwrap(); // never LogFull: node 2 is excluded
        if !old.is_null() {
            w.retire(old).unwrap();
        }
        s.nodes[0].quiesce().unwrap();
        s.nodes[1].quiesce().unwrap();
        w.reclaim().unwrap();
    }
    let back = s.nodes[2].quiesce().unwrap();
    assert!(back.overflow, "more than 8 unread entries");
    assert!(back.whole_heap);
    assert!(s.nodes[2].record().unwrap().overflows >= 1);
    assert_eq!(r.enter().load::<Val>(s.slot(0)).unwrap().unwrap().id, 12);
}

#[test]
#[cfg_attr(miri, ignore = "real time and threads: too slow under Miri")]
fn background_pass_thread_starts_and_stops_cleanly() {
    let s = Setup::new(2, 6);
    let mut w = s.writer(0);
    let bgs: Vec<_> = s
        .nodes
        .iter()
        .map(|n| n.start_background(Duration::from_millis(1)))
        .collect();
    let b = w.alloc(Val::new(1)).unwrap();
    w.publish(s.slot(0), b).unwrap();
    let r = s.nodes[1].reader().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = r.enter().load::<Val>(s.slot(0)).unwrap() {
            assert_eq!(v.id, 1);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never became visible");
        std::thread::sleep(Duration::from_millis(1));
    }
    for bg in bgs {
        assert!(bg.is_running());
        while bg.passes() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the thread does not pass"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // What a read's staleness is judged against: from one pass's start to the next one's end.
        assert!(bg.longest_span() > Duration::ZERO);
        assert_eq!(bg.stop(), 0);
    }
}

/// A 1 MiB anonymous region with the runtimes of its two nodes over real memory.
fn hardware_runtimes() -> (
    bi_core::region::Region,
    Vec<bi_core::runtime::NodeRuntime<bi_core::mem::Hardware>>,
) {
    use bi_core::runtime::{Clock, NodeRuntime, TickClock};
    let region =
        bi_core::region::Region::anonymous(RegionConfig::new(1 << 20).with_nodes(2)).unwrap();
    let layout = *region.layout();
    let clock: std::sync::Arc<dyn Clock> = std::sync::Arc::new(TickClock::new());
    let nodes = (0..2)
        .map(|n| {
            NodeRuntime::new(
                region.hardware(),
                layout,
                n,
                RuntimeConfig::default(),
                clock.clone(),
            )
            .unwrap()
        })
        .collect();
    (region, nodes)
}

#[test]
#[cfg_attr(
    miri,
    ignore = "membarrier, the system clock and real cache instructions"
)]
fn smoke_on_hardware_two_runtimes_real_threads() {
    use bi_core::heap::BumpHeap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let (region, nodes) = hardware_runtimes();
    let layout = *region.layout();
    let heap = layout.heap();
    let arena = heap.offset..heap.offset + heap.len / 2 / 64 * 64;
    let mut w = nodes[0]
        .writer(BumpHeap::new(arena, layout.line_size()).unwrap())
        .unwrap();
    let slot = layout.root_entry(0).unwrap().offset;
    let bgs: Vec<_> = nodes
        .iter()
        .map(|n| n.start_background(Duration::from_micros(200)))
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    // Readers that have seen a value: the writer keeps publishing until both have, so a
    // reader thread scheduled late on a busy machine still takes part.
    let seeing = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let node = nodes[1].clone();
            let done = done.clone();
            let seeing = seeing.clone();
            std::thread::spawn(move || {
                let r = node.reader().unwrap();
                let mut seen = 0u64;
                let mut last = 0;
                while !done.load(Ordering::Acquire) {
                    let g = r.enter();
                    match g.load::<Val>(slot) {
                        Ok(Some(v)) => {
                            assert!(v.valid());
                            assert!(v.id >= last, "went backwards");
                            last = v.id;
                            if seen == 0 {
                                seeing.fetch_add(1, Ordering::AcqRel);
                            }
                            seen += 1;
                        }
                        Ok(None) | Err(BiError::StaleLink { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
                seen
            })
        })
        .collect();
    let started = std::time::Instant::now();
    let mut id = 0;
    while id < 2000
        || (seeing.load(Ordering::Acquire) < 2 && started.elapsed() < Duration::from_secs(20))
    {
        id += 1;
        let b = w.alloc(Val::new(id)).unwrap();
        let old = w.publish(slot, b).unwrap();
        if !old.is_null() {
            w.retire(old).unwrap();
        }
        if id.is_multiple_of(16) {
            w.reclaim().unwrap();
        }
    }
    done.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while w.retired_blocks() > 0 {
        w.reclaim().unwrap();
        assert!(std::time::Instant::now() < deadline, "reclamation stuck");
        std::thread::sleep(Duration::from_millis(1));
    }
    for bg in bgs {
        assert_eq!(bg.stop(), 0);
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "membarrier, the system clock and real cache instructions"
)]
fn a_pass_pays_membarrier_only_when_its_node_has_a_reader() {
    use bi_core::runtime::ReaderOrdering;

    let (_region, nodes) = hardware_runtimes();
    let node = &nodes[0];
    let memb = node.reader_ordering() == ReaderOrdering::Membarrier;
    assert!(!node.quiesce().unwrap().barrier, "no reader: no barrier");
    let r = node.reader().unwrap();
    assert_eq!(node.quiesce().unwrap().barrier, memb);
    let second = node.reader().unwrap();
    drop(r);
    assert_eq!(node.quiesce().unwrap().barrier, memb, "one reader left");
    drop(second);
    assert!(!node.quiesce().unwrap().barrier, "every reader gone");
}

#[test]
fn a_bag_of_deferred_retirements_is_retired_with_one_ring_append() {
    use bi_core::runtime::RETIRE_BATCH;
    let s = Setup::new(1, 0);
    let mut w = s.writer(0);
    let links: Vec<Link<u64>> = (0..RETIRE_BATCH as u64)
        .map(|v| w.alloc_sealed(v).unwrap())
        .collect();
    let (_, freed_before) = w.ring_usage();
    for (i, &link) in links.iter().enumerate() {
        w.defer_retire([link]).unwrap();
        let full = i + 1 == RETIRE_BATCH;
        // Until the bag is full nothing is marked or logged; then all of it at once.
        assert_eq!(w.deferred(), if full { 0 } else { i + 1 });
        assert_eq!(w.retired_blocks(), if full { RETIRE_BATCH } else { 0 });
    }
    assert_eq!(w.ring_usage().1, freed_before + RETIRE_BATCH);
    // A link already retired is refused, and nothing else changes.
    assert!(matches!(
        w.defer_retire([links[0]]),
        Err(BiError::AlreadyRetired { .. })
    ));
    assert_eq!(w.deferred(), 0);
}

/// A writer stalled between storing a root slot and logging it (descheduled on a loaded
/// machine; here its host's clock is moved on at the slot's write-back) shows the stall
/// in its longest publish span: what another node's read may see the old slot for, on
/// top of the staleness bound. An update with no stall shows far less, and a span is
/// reported once.
#[test]
#[cfg_attr(
    miri,
    ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
)]
fn a_writer_stalled_inside_a_publication_shows_it_in_its_publish_span() {
    use bi_core::heap::BumpHeap;
    use bi_core::mem::{Access, Observed};
    use bi_core::runtime::{EmulatedClock, NodeRuntime};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    const STALL: u64 = 40_000_000; // 40 ms of the emulated clock
    let mut s = Setup::new(2, 0);
    drop(s.nodes.remove(0));
    let slot = s.slot(0);
    let stall = Arc::new(AtomicBool::new(false));
    let (host, armed) = (s.emu.node(0), stall.clone());
    let emu = s.emu.clone();
    let view = Observed::new(host.clone(), move |a| {
        if a == Access::WriteBack(slot, 8) && armed.swap(false, Ordering::SeqCst) {
            emu.advance(STALL);
        }
        Ok(())
    });
    let layout = *s.region.layout();
    let config = RuntimeConfig::default();
    let rt = NodeRuntime::new(view, layout, 0, config, Arc::new(EmulatedClock::new(host))).unwrap();
    let line = s.region.layout().line_size();
    let mut w = rt.writer(BumpHeap::new(s.arena(0), line).unwrap()).unwrap();
    let b = w.alloc(1u64).unwrap();
    w.publish(slot, b).unwrap();
    let quiet = rt.take_longest_publish_span();
    assert!(quiet < Duration::from_nanos(STALL / 4), "{quiet:?}");
    stall.store(true, Ordering::SeqCst);
    let b = w.alloc(2u64).unwrap();
    w.publish(slot, b).unwrap();
    assert!(rt.take_longest_publish_span() >= Duration::from_nanos(STALL));
    assert_eq!(rt.take_longest_publish_span(), Duration::ZERO);
}

/// Nodes that do not pass inside their lease (stopped, or too loaded) hold the writer's
/// ring entries: an ordinary rewrite gives up after the configured wait on a full log,
/// while a step of a takeover (`set_adopting`) waits on, and goes through once they pass.
#[test]
#[cfg_attr(
    miri,
    ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
)]
fn a_takeover_waits_out_a_node_that_holds_the_ring_inside_its_lease() {
    use bi_core::region::RegionConfig;
    let region = RegionConfig::new(1 << 18)
        .with_nodes(2)
        .with_log_ring_entries(8);
    let config = RuntimeConfig::default()
        .node_lease(10_000_000_000) // ten seconds: both nodes stay live throughout
        .log_full_timeout(Duration::from_millis(100));
    let s = Setup::with(region, |c| c, config);
    s.quiesce_all().unwrap();
    let mut w = s.writer(0);
    // Fill node 0's modified ring: no node passes meanwhile.
    let a = fill_modified_ring(&mut w, s.slot(0));
    assert!(matches!(
        w.rewrite_lines(&[(a, 0, 100)]),
        Err(BiError::LogFull { .. })
    ));
    w.set_adopting(true);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // Well past the ordinary wait: the nodes pass, the ring has room again.
            std::thread::sleep(Duration::from_millis(300));
            s.quiesce_all().unwrap();
        });
        w.rewrite_lines(&[(a, 0, 100)]).unwrap();
    });
    w.set_adopting(false);
    assert_eq!(w.read_own_line(a, 0).unwrap(), 100);
}

/// A node that holds the ring because it has not passed since its oldest entry, and whose
/// lease was renewed without a pass after the take-over began waiting (a process that
/// claimed the node and stopped before its first pass), is waited out until that lease
/// lapses, past the adoption's patience counted from the start of the wait. On the
/// hardware, for a clock that runs by itself.
#[test]
#[cfg_attr(
    miri,
    ignore = "cache instructions through inline asm, which Miri cannot run"
)]
fn a_takeover_waits_out_a_lease_renewed_after_it_began_waiting() {
    use bi_core::heap::BumpHeap;
    use bi_core::mem::MemView;
    use bi_core::region::Region;
    use bi_core::runtime::{Clock, NodeRecord, NodeRuntime, TickClock};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let lease = Duration::from_millis(400);
    let region = Region::anonymous(
        RegionConfig::new(1 << 20)
            .with_nodes(2)
            .with_log_ring_entries(8),
    )
    .unwrap();
    let layout = *region.layout();
    let config = RuntimeConfig::default()
        .node_lease(lease.as_nanos() as u64)
        .log_full_timeout(Duration::from_millis(50));
    let clock: Arc<dyn Clock> = Arc::new(TickClock::new());
    let nodes: Vec<_> = (0..2)
        .map(|n| NodeRuntime::new(region.hardware(), layout, n, config.clone(), clock.clone()))
        .collect::<Result<_, _>>()
        .unwrap();
    for n in &nodes {
        n.quiesce().unwrap();
    }
    let heap = layout.heap();
    let line = layout.line_size().get();
    let arena = heap.offset..heap.offset + heap.len / 2 / line * line;
    let mut w = nodes[0]
        .writer(BumpHeap::new(arena, layout.line_size()).unwrap())
        .unwrap();
    // Fill node 0's modified ring; node 1 never passes again.
    let a = fill_modified_ring(&mut w, layout.root_entry(0).unwrap().offset);
    // Node 1's lease renewed without a pass, as a claim renews it, and dated half a lease
    // ahead: a claim 200 ms into the wait. Node 1 now holds the ring until some 600 ms
    // into the wait, past the patience (50 ms and a 400 ms lease) counted from its start.
    let at = layout.node_record(1).unwrap().offset;
    let view = region.hardware();
    let record: NodeRecord = view.load_from_memory(at).unwrap();
    let heartbeat = clock.refresh() + lease.as_nanos() as u64 / 2;
    view.store_to_memory(
        at,
        &NodeRecord {
            heartbeat,
            ..record
        },
    )
    .unwrap();
    let done = AtomicBool::new(false);
    w.set_adopting(true);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // Node 0 passes all along: only node 1 holds the ring.
            while !done.load(Ordering::Acquire) {
                nodes[0].quiesce().unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let rewritten = w.rewrite_lines(&[(a, 0, 100)]);
        done.store(true, Ordering::Release);
        rewritten.unwrap();
    });
    w.set_adopting(false);
    assert_eq!(w.read_own_line(a, 0).unwrap(), 100);
    // Node 1's lease lapsed: it no longer holds anything back.
    assert_eq!(w.synchronize().unwrap().lease_expired, vec![1]);
}

/// Objects of every size, from one word to several lines, are read back whole by another
/// node whatever the line size: at 32 bytes an object of 40 bytes takes two lines, at
/// 128 one line holds 120 bytes (more than a 64-byte line's read path copies at once).
#[test]
fn objects_of_every_size_are_read_whole_at_every_line_size() {
    fn round<const N: usize>(
        s: &Setup,
        w: &mut bi_core::runtime::Writer<bi_core::mem::EmulatedNode, bi_core::heap::BumpHeap>,
        slot: usize,
    ) {
        let value: [u64; N] = std::array::from_fn(|i| (N * 1000 + i) as u64);
        let link = w.alloc_sealed(value).unwrap();
        w.publish_link(slot, link).unwrap();
        s.quiesce_all().unwrap();
        let r = s.nodes[1].reader().unwrap();
        let g = r.enter();
        let line = s.region.layout().line_size().get();
        let got = g.load::<[u64; N]>(slot).unwrap().unwrap();
        assert_eq!(*got, value, "{N} words, lines of {line}");
    }
    for line in [32, 64, 128] {
        let s = Setup::with(
            RegionConfig::new(1 << 20)
                .with_nodes(2)
                .with_line_size(line),
            |c| c.seed(line as u64),
            RuntimeConfig::default(),
        );
        let mut w = s.writer(0);
        let slot = s.slot(0);
        round::<1>(&s, &mut w, slot);
        round::<3>(&s, &mut w, slot);
        round::<4>(&s, &mut w, slot);
        round::<5>(&s, &mut w, slot);
        round::<7>(&s, &mut w, slot);
        round::<8>(&s, &mut w, slot);
        round::<15>(&s, &mut w, slot);
        round::<16>(&s, &mut w, slot);
        round::<40>(&s, &mut w, slot);
    }
}

/// A writer that retires only through bags, and never reclaims by itself, still gets its
/// memory back: each full bag gives back up to twice its size of blocks whose grace has
/// passed, so what is retired and not given back stays within a few bags however long
/// the updates go on, and the bytes it reports are those of the blocks it holds.
#[test]
fn memory_retired_through_bags_comes_back_without_a_reclaim() {
    use bi_core::runtime::RETIRE_BATCH;
    let s = Setup::new(2, 62);
    let mut w = s.writer(0);
    let line = s.region.layout().line_size().get();
    let mut old = w.alloc_sealed([0u64; 12]).unwrap(); // two lines
    w.publish_link(s.slot(0), old).unwrap();
    let mut most = 0;
    for i in 1..=3000u64 {
        let new = w.alloc_sealed([i; 12]).unwrap();
        w.publish_link(s.slot(0), new).unwrap();
        w.defer_retire([old]).unwrap();
        old = new;
        if i % 16 == 0 {
            s.emu.advance(10);
            s.quiesce_all().unwrap();
        }
        assert_eq!(w.retired_bytes(), w.retired_blocks() * 2 * line);
        most = most.max(w.retired_blocks() + w.deferred());
    }
    assert!(most <= 4 * RETIRE_BATCH, "{most} blocks held at most");
    // A reclaim after the grace period gives back every block held, and says so.
    w.flush_deferred().unwrap();
    let held = w.retired_blocks();
    for _ in 0..2 {
        s.emu.advance(10);
        s.quiesce_all().unwrap();
    }
    let report = w.reclaim().unwrap();
    assert_eq!(
        (report.freed_blocks, report.freed_bytes),
        (held, held * 2 * line)
    );
    assert_eq!((report.pending_blocks, w.retired_blocks()), (0, 0));
}

/// What a writer, a private box and a refused publication show when printed.
#[test]
fn writers_boxes_and_refusals_say_what_they_are() {
    let s = Setup::new(1, 63);
    let mut w = s.writer(0);
    let b = w.alloc(5u64).unwrap();
    let at = b.offset();
    let shown = format!("{b:?}");
    assert!(
        shown.starts_with("BiBox") && shown.contains(&at.to_string()),
        "{shown}"
    );
    let header = s.region.layout().header().offset;
    let refused = w.try_publish(header, b).unwrap_err();
    let (debug, display) = (format!("{refused:?}"), refused.to_string());
    assert!(
        debug.starts_with("Unpublished") && debug.contains("OutOfSection"),
        "{debug}"
    );
    assert!(display.starts_with("not published: "), "{display}");
    assert!(display.len() > "not published: ".len());
    let live = w.heap().stats().live;
    w.discard(refused.bibox).unwrap();
    assert!(
        w.heap().stats().live < live,
        "a discarded box goes back to the heap"
    );
    w.set_scope(bi_core::runtime::Scope::of_slot(s.slot(2)))
        .unwrap();
    assert_eq!(w.scope(), bi_core::runtime::Scope::of_slot(s.slot(2)));
    let shown = format!("{w:?}");
    assert!(
        shown.starts_with("Writer") && shown.contains("node: 0"),
        "{shown}"
    );
}

/// A full heap whose retired blocks have passed their grace period serves the next
/// allocation from them without a reclaim call; one whose retired blocks are still in
/// their grace period waits for the passes that end it (here another thread's, 20 ms
/// later), and refuses once the configured wait is over if no pass comes; one with
/// nothing retired refuses.
#[test]
fn a_full_heap_serves_allocations_from_what_its_grace_periods_give_back() {
    use bi_core::heap::{BumpHeap, HeapError};
    use std::sync::atomic::{AtomicBool, Ordering};
    let s = Setup::new(2, 64);
    let line = s.region.layout().line_size();
    let start = s.arena(0).start;
    let heap = BumpHeap::new(start..start + 8 * line.get(), line).unwrap();
    let mut w = s.nodes[0].writer(heap).unwrap();
    let fill = |w: &mut bi_core::runtime::Writer<_, BumpHeap>| -> Vec<Link<u64>> {
        let mut links = Vec::new();
        loop {
            match w.alloc_sealed(links.len() as u64) {
                Ok(l) => links.push(l),
                Err(BiError::Heap(HeapError::OutOfMemory { .. })) => return links,
                Err(e) => panic!("{e:?}"),
            }
        }
    };
    let links = fill(&mut w);
    assert_eq!(links.len(), 8);
    assert!(matches!(
        w.alloc_sealed(9u64),
        Err(BiError::Heap(HeapError::OutOfMemory { .. }))
    ));
    // Retired, and past their grace period: the allocation takes them back.
    w.retire_all(&links).unwrap();
    for _ in 0..2 {
        s.emu.advance(10);
        s.quiesce_all().unwrap();
    }
    let again = w.alloc_sealed(10u64).unwrap();
    assert_eq!(w.read_own(again).unwrap(), 10);
    // Fill again, retire, and let another thread end the grace period a little later.
    let links = fill(&mut w);
    w.retire_all(&links).unwrap();
    let passed = AtomicBool::new(false);
    std::thread::scope(|t| {
        t.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            passed.store(true, Ordering::SeqCst);
            for _ in 0..2 {
                s.emu.advance(10);
                s.quiesce_all().unwrap();
            }
        });
        let got = w.alloc_sealed(11u64);
        assert!(
            passed.load(Ordering::SeqCst),
            "served before the passes began"
        );
        assert_eq!(w.read_own(got.unwrap()).unwrap(), 11);
    });
    // Retired blocks whose grace period never ends (no node passes): the wait is bounded
    // by the configured wait on a full log, then the heap is out of memory.
    let links = fill(&mut w);
    w.retire_all(&links).unwrap();
    assert!(matches!(
        w.alloc_sealed(12u64),
        Err(BiError::Heap(HeapError::OutOfMemory { .. }))
    ));
}

/// A publication the modified ring has no room for is refused, and the box comes back
/// intact with nothing stored: a tracked object's publication logs two entries (its slot
/// and the object), so a ring with one entry left refuses it; an entry written anyway
/// would overwrite one some node has not read yet.
#[test]
fn a_publication_the_ring_has_no_room_for_is_refused_with_its_box() {
    let s = Setup::with(
        RegionConfig::new(1 << 18)
            .with_nodes(2)
            .with_log_ring_entries(8),
        |c| c,
        RuntimeConfig::default().log_full_timeout(Duration::ZERO),
    );
    let mut w = s.writer(0);
    let a = w.alloc_lines(&[0u64; 4]).unwrap();
    w.publish_lines(s.slot(0), a).unwrap();
    let mut i = 0;
    while w.ring_usage().0 < 7 {
        w.rewrite_lines(&[(a, i % 4, i as u64)]).unwrap();
        i += 1;
    }
    let b = w.alloc(7u64).unwrap();
    let refused = w.try_publish(s.slot(1), b).unwrap_err();
    assert!(
        matches!(refused.error, BiError::LogFull { .. }),
        "{:?}",
        refused.error
    );
    assert_eq!(*refused.bibox.get(), 7);
    assert_eq!(w.ring_usage().0, 7);
    // Nothing was stored: the slot, read on the writer's own node, is still empty.
    let here = s.nodes[0].reader().unwrap();
    assert!(here.enter().load::<u64>(s.slot(1)).unwrap().is_none());
    drop(here);
    s.emu.advance(10);
    s.quiesce_all().unwrap();
    w.publish(s.slot(1), refused.bibox).unwrap();
    s.quiesce_all().unwrap();
    let r = s.nodes[1].reader().unwrap();
    assert_eq!(*r.enter().load::<u64>(s.slot(1)).unwrap().unwrap(), 7);
}

/// Retiring a link again is `AlreadyRetired`; a link that names the retired object under
/// another generation (a copy of a link to an earlier object at that offset) is stale:
/// it never named what was retired.
#[test]
fn a_second_retirement_is_told_apart_from_a_stale_link() {
    use bi_core::runtime::LinkGeneration;
    let s = Setup::new(1, 65);
    let mut w = s.writer(0);
    let link = w.alloc_sealed(1u64).unwrap();
    w.retire(link).unwrap();
    assert!(matches!(
        w.retire(link),
        Err(BiError::AlreadyRetired { .. })
    ));
    let other: Link<u64> = Link::new(
        link.offset(),
        LinkGeneration::new(link.generation().get() + 1),
    );
    assert!(matches!(w.retire(other), Err(BiError::StaleLink { .. })));
}

/// A node's figures, published by its pass for whoever inspects the pool, show its
/// writer's retired bytes, the ring entries not yet consumed and the entries the writer
/// noted for its structure; they follow the writer as it retires and reclaims.
#[test]
fn a_nodes_figures_follow_its_writer() {
    let s = Setup::new(2, 66);
    let mut w = s.writer(0);
    let line = s.region.layout().line_size().get();
    let links: Vec<_> = (0..3u64).map(|v| w.alloc_sealed(v).unwrap()).collect();
    w.publish_link(s.slot(0), links[0]).unwrap();
    w.retire_all(&links[1..]).unwrap();
    w.note_entries(s.slot(0), 42);
    s.nodes[0].quiesce().unwrap();
    let f = s.nodes[0].figures().unwrap();
    assert_eq!(f.retired_bytes, 2 * line as u64);
    assert_eq!((f.modified_in_flight, f.freed_in_flight), (1, 2));
    assert_eq!((f.structure, f.entries), (s.slot(0) as u64, 42));
    for _ in 0..2 {
        s.emu.advance(10);
        s.quiesce_all().unwrap();
    }
    w.reclaim().unwrap();
    s.nodes[0].quiesce().unwrap();
    let f = s.nodes[0].figures().unwrap();
    assert_eq!(
        (f.retired_bytes, f.modified_in_flight, f.freed_in_flight),
        (0, 0, 0)
    );
}

/// A heap that breaks its contract (a block shorter than asked, or not on a line) is
/// refused, the block given back, and nothing is written: an object never lands
/// across another's lines because a heap said so.
#[test]
fn a_block_too_small_or_off_the_line_is_refused() {
    use bi_core::heap::{Block, BumpHeap, HeapError, HeapStats};
    use bi_core::line::LineSize;
    /// Hands out the inner heap's blocks shifted by `shift` bytes and cut by `cut`.
    struct Broken {
        inner: BumpHeap,
        shift: usize,
        cut: usize,
        freed: usize,
    }
    impl Heap for Broken {
        fn line_size(&self) -> LineSize {
            self.inner.line_size()
        }
        fn alloc(&mut self, bytes: usize) -> Result<Block, HeapError> {
            let b = self.inner.alloc(bytes)?;
            Ok(Block {
                offset: b.offset + self.shift,
                len: b.len - self.cut,
                reused: b.reused,
            })
        }
        fn free(&mut self, block: Block) -> Result<(), HeapError> {
            self.freed += 1;
            let _ = block;
            Ok(())
        }
        fn block_len(&self, offset: usize) -> Option<usize> {
            self.inner.block_len(offset)
        }
        fn stats(&self) -> HeapStats {
            self.inner.stats()
        }
    }
    let s = Setup::new(1, 67);
    let line = s.region.layout().line_size();
    for (shift, cut) in [(8, 0), (0, 8)] {
        let inner = BumpHeap::new(s.arena(0), line).unwrap();
        let heap = Broken {
            inner,
            shift,
            cut,
            freed: 0,
        };
        let mut w = s.nodes[0].writer(heap).unwrap();
        let refused = w.alloc([1u64; 7]);
        assert!(
            matches!(refused, Err(BiError::BadConfig { .. })),
            "{refused:?}"
        );
        assert_eq!(w.heap().freed, 1, "the block given back");
    }
}

/// A writer starts the line of an allocation a few from now on its way into its node's
/// cache, so that its stores there do not wait for memory: blocks given back and dropped
/// from the cache (as passes drop retired lines) are cached by the time the writer takes
/// them again, all but the first few.
#[test]
fn a_writer_prefetches_the_blocks_it_allocates_next() {
    let s = Setup::new(1, 0);
    let mut w = s.writer(0);
    let view = s.nodes[0].view();
    let given: Vec<_> = (0..12u64).map(|v| w.alloc_sealed(v).unwrap()).collect();
    for &link in &given {
        w.discard_link(link).unwrap();
        view.flush(link.offset(), 64).unwrap();
    }
    view.fence();
    assert!(given.iter().all(|l| !view.is_cached(l.offset())));
    let mut found_cached = 0;
    for v in 0..given.len() as u64 {
        let next = w.heap().upcoming(8, 0).expect("a block given back");
        found_cached += usize::from(view.is_cached(next));
        let link = w.alloc_sealed(v).unwrap();
        assert_eq!(link.offset(), next, "the heap hands out what it announced");
    }
    assert!(
        found_cached >= given.len() - 5,
        "{found_cached} of {} allocations found their line cached",
        given.len()
    );
}
