//! Slot arrays: in-place slot publication seen across nodes, lazy invalidation of one
//! slot, reads of one slot validated against the array's incarnation, reuse rejected.

use bi_core::mem::MemView;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, Link};

#[test]
fn a_slot_published_in_place_reaches_other_nodes_after_their_pass() {
    let s = Setup::new(3, 11);
    let mut w = s.writer(0);
    let a = w.alloc_slots(40).unwrap();
    assert!(w.publish_slots(s.slot(0), a).unwrap().is_null());
    for i in (0..40).step_by(3) {
        let b = w.alloc(i as u64 * 10).unwrap();
        assert!(w.publish_in(a, i, b).unwrap().is_null());
    }
    s.quiesce_all().unwrap();
    let r = s.nodes[2].reader().unwrap();
    {
        let g = r.enter();
        let arr = g.load_slots(s.slot(0)).unwrap().unwrap();
        assert_eq!((arr.len(), arr.link()), (40, a));
        for i in 0..40 {
            let v = g.load_in::<u64>(&arr, i).unwrap();
            if i % 3 == 0 {
                assert_eq!(*v.unwrap(), i as u64 * 10);
            } else {
                assert!(v.is_none());
            }
        }
        assert!(matches!(
            g.load_in::<u64>(&arr, 40),
            Err(BiError::OutOfSection { .. })
        ));
    }
    // Replace slot 3 in place; node 2 cached the old line.
    let b = w.alloc(333u64).unwrap();
    let old = w.publish_in(a, 3, b).unwrap();
    w.retire(old).unwrap();
    {
        let g = r.enter();
        let arr = g.load_slots(s.slot(0)).unwrap().unwrap();
        // Without a pass, the cached line may still give the old value; a fresh read of
        // that one slot cannot.
        assert_eq!(*g.load_in_fresh::<u64>(&arr, 3).unwrap().unwrap(), 333);
    }
    s.quiesce_all().unwrap();
    let g = r.enter();
    let arr = g.load_slots(s.slot(0)).unwrap().unwrap();
    assert_eq!(*g.load_in::<u64>(&arr, 3).unwrap().unwrap(), 333);
    assert_eq!(s.emu.total_stats().reuse_hazards, 0);
}

#[test]
fn counters_are_published_and_read_as_plain_words() {
    let s = Setup::new(2, 3);
    let mut w = s.writer(0);
    let a = w.alloc_slots_from(&[7, 0, 9]).unwrap();
    w.publish_slots(s.slot(1), a).unwrap();
    assert_eq!(w.publish_word_in(a, 1, 5).unwrap(), 0);
    assert_eq!(w.word_in(a, 1).unwrap(), 5);
    s.quiesce_all().unwrap();
    let r = s.nodes[1].reader().unwrap();
    let g = r.enter();
    let arr = g.load_slots(s.slot(1)).unwrap().unwrap();
    let words: Vec<u64> = (0..3).map(|i| g.load_word_in(&arr, i).unwrap()).collect();
    assert_eq!(words, [7, 5, 9]);
}

#[test]
fn writer_refuses_arrays_it_does_not_own_and_double_retirement() {
    let s = Setup::new(2, 5);
    let mut w = s.writer(0);
    let a = w.alloc_slots(4).unwrap();
    w.publish_slots(s.slot(0), a).unwrap();
    let b = w.alloc(1u64).unwrap();
    assert!(w.publish_in(a, 4, b).is_err(), "index past the end");
    let forged = Link::new(a.offset(), a.generation().next());
    assert!(matches!(
        w.publish_link_in(forged, 0, Link::<u64>::null()),
        Err(BiError::StaleLink { .. })
    ));
    let next = w.alloc_slots(8).unwrap();
    assert_eq!(w.publish_slots(s.slot(0), next).unwrap(), a);
    w.retire_slots(a).unwrap();
    assert!(matches!(
        w.retire_slots(a),
        Err(BiError::AlreadyRetired { .. })
    ));
    assert!(
        w.publish_word_in(a, 0, 1).is_err(),
        "a retired array is read-only"
    );
}

/// A reader node caches every line of array `A`; `A` is retired, reclaimed and its block
/// reused by array `C` of the same size. Following `A`'s link is refused; reading `C`
/// through the stale cached lines is caught line by line and gives `C`'s values.
#[test]
fn a_reused_array_is_rejected_and_stale_lines_of_it_are_never_accepted() {
    let s = Setup::new(2, 9);
    let mut w = s.writer(0);
    let n = 64; // several lines at every line size
    let a = w.alloc_slots_from(&vec![1; n]).unwrap();
    w.publish_slots(s.slot(0), a).unwrap();
    s.quiesce_all().unwrap();
    let r = s.nodes[1].reader().unwrap();
    {
        let g = r.enter();
        let arr = g.load_slots(s.slot(0)).unwrap().unwrap();
        for i in 0..n {
            assert_eq!(g.load_word_in(&arr, i).unwrap(), 1);
        }
    }
    // Replace and retire A, let the grace period pass, reclaim.
    let b = w.alloc_slots(1).unwrap();
    w.publish_slots(s.slot(0), b).unwrap();
    w.retire_slots(a).unwrap();
    for _ in 0..3 {
        s.quiesce_all().unwrap();
    }
    assert_eq!(w.reclaim().unwrap().freed_blocks, 1);
    // Node 1 pulls A's old lines back into its cache (as a prefetcher could).
    let line = s.region.layout().line_size().get();
    let view = s.emu.node(1);
    let lines = (n * 8 + 32).div_ceil(line - 8) + 1;
    for l in 0..lines {
        let _: u64 = view.load(a.offset() + l * line).unwrap();
    }
    // The block is reused by C (same size, so the same block).
    let c = w.alloc_slots_from(&vec![2; n]).unwrap();
    assert_eq!(
        c.offset(),
        a.offset(),
        "the exact-size free list reuses A's block"
    );
    assert_ne!(c.generation(), a.generation());
    w.publish_slots(s.slot(1), c).unwrap();
    let g = r.enter();
    assert!(matches!(g.slots(a), Err(BiError::StaleLink { .. })));
    let before = s.nodes[1].mismatches();
    let arr = g.slots(c).unwrap().unwrap();
    for i in 0..n {
        assert_eq!(g.load_word_in(&arr, i).unwrap(), 2, "slot {i}");
    }
    assert!(s.nodes[1].mismatches() > before, "stale lines were caught");
    let st = s.emu.stats(1);
    assert!(
        st.reuse_hazards <= s.nodes[1].mismatches(),
        "every old-incarnation load was rejected: {st:?}"
    );
}

/// Negative control: without the stamp check, the stale cached line of the reused block
/// gives the old incarnation's word.
#[test]
fn without_the_stamp_check_a_stale_line_of_the_old_incarnation_is_read() {
    let s = Setup::new(2, 13);
    let mut w = s.writer(0);
    let n = 64;
    let a = w.alloc_slots_from(&vec![1; n]).unwrap();
    w.publish_slots(s.slot(0), a).unwrap();
    s.quiesce_all().unwrap();
    let view = s.emu.node(1);
    let line = s.region.layout().line_size().get();
    // The word of slot n - 1 sits in a later line; read it raw on node 1 (caching it).
    let last_line = a.offset() + ((n * 8 + 32) / line) * line;
    let _: u64 = view.load(last_line + 8).unwrap();
    let b = w.alloc_slots(1).unwrap();
    w.publish_slots(s.slot(0), b).unwrap();
    w.retire_slots(a).unwrap();
    for _ in 0..3 {
        s.quiesce_all().unwrap();
    }
    w.reclaim().unwrap();
    let _: u64 = view.load(last_line + 8).unwrap(); // refilled after the passes
    let c = w.alloc_slots_from(&vec![2; n]).unwrap();
    assert_eq!(c.offset(), a.offset());
    let raw: u64 = view.load(last_line + 8).unwrap();
    assert_eq!(raw, 1, "the raw load returns the old incarnation");
    assert!(s.emu.stats(1).reuse_hazards > 0, "the oracle counts it");
}

#[test]
fn a_batch_of_slot_stores_costs_one_fence_and_one_log_entry_per_line() {
    let s = Setup::new(2, 17);
    let mut w = s.writer(0);
    let a = w.alloc_slots(64).unwrap();
    w.publish_slots(s.slot(0), a).unwrap();
    let links: Vec<u64> = (0..4u64)
        .map(|v| w.alloc_sealed(v + 100).unwrap().raw())
        .collect();
    let (fences, (modified, _)) = (s.emu.node(0).stats().fences, w.ring_usage());
    // Slots 0 and 1 share line 0; 40 and 63 lie in later lines.
    let updates = [(0, links[0]), (1, links[1]), (40, links[2]), (63, links[3])];
    let old = w.try_publish_words_in(a, &updates).unwrap();
    assert_eq!(old, [0; 4]);
    let used = s.emu.node(0).stats().fences - fences;
    assert!(used <= 4, "a batch used {used} fences");
    let line = s.region.layout().line_size().get();
    let lines = if line >= 64 { 3 } else { 4 };
    assert!(
        w.ring_usage().0 - modified <= lines,
        "one entry per touched line"
    );
    // An index past the end refuses the whole batch.
    assert!(w.try_publish_words_in(a, &[(2, 1), (64, 1)]).is_err());
    assert_eq!(w.word_in(a, 2).unwrap(), 0);
    s.quiesce_all().unwrap();
    let r = s.nodes[1].reader().unwrap();
    let g = r.enter();
    let arr = g.load_slots(s.slot(0)).unwrap().unwrap();
    for (k, (i, _)) in updates.iter().enumerate() {
        assert_eq!(
            *g.load_in::<u64>(&arr, *i).unwrap().unwrap(),
            k as u64 + 100
        );
    }
}
