//! Failures leave the published tree intact: heap exhaustion in single operations and in
//! the middle of a batch, with nothing leaked beyond the retired nodes still in their
//! grace period.

use bi_collections::testing::small_heap_writer;
use bi_collections::tree::BiTree;
use bi_collections::{ApplyBatch, CollectionError, Op};
use bi_core::heap::{Heap, HeapError};
use bi_core::runtime::BiError;
use bi_core::runtime::testing::Setup;
use std::collections::BTreeMap;

const BLOCK: usize = 64; // a u64 -> u64 node: one line (one stamp word, 36 bytes of payload)

fn is_exhausted(e: &CollectionError) -> bool {
    matches!(
        e,
        CollectionError::Runtime(BiError::Heap(HeapError::OutOfMemory { .. }))
    )
}

#[test]
fn heap_exhaustion_leaves_the_tree_intact_and_recovers_after_reclaim() {
    let s = Setup::new(2, 21);
    let tree = BiTree::<u64, u64>::at(s.slot(0));
    let mut w = tree.write_handle(small_heap_writer(&s, 16 * 1024)).unwrap();
    let r = tree.read_handle(&s.nodes[1]).unwrap();
    let mut model = BTreeMap::new();
    let mut failed = None;
    for k in 0..1000u64 {
        match w.insert(k, k * 3) {
            Ok(old) => assert_eq!(old, model.insert(k, k * 3)),
            Err(e) => {
                failed = Some((k, e));
                break;
            }
        }
    }
    let (k, e) = failed.expect("a 16 KiB heap fills up");
    assert!(is_exhausted(&e), "{e}");
    // The failed insert changed nothing, on the writer or elsewhere.
    w.check_invariants().unwrap();
    assert_eq!(w.len(), model.len());
    assert_eq!(w.try_get(&k).unwrap(), None);
    // Nothing leaked: the heap holds the tree plus the replaced nodes, in the bag or
    // retired and waiting for their grace.
    let live = w.writer().heap().stats().live;
    let waiting = w.unretired() * BLOCK + w.writer().retired_bytes();
    assert_eq!(live, model.len() * BLOCK + waiting);
    s.quiesce_all().unwrap();
    let all: Vec<_> = model.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(r.enter().iter().unwrap(), all);
    // Removals fail too while the heap is full (they copy a path); once the grace
    // period has passed, the retired nodes come back and writes succeed again.
    w.writer().flush_deferred().unwrap();
    for _ in 0..3 {
        s.quiesce_all().unwrap();
    }
    w.reclaim().unwrap();
    assert_eq!(w.writer().heap().stats().live, model.len() * BLOCK);
    assert_eq!(w.insert(k, 1).unwrap(), None);
    model.insert(k, 1);
    assert_eq!(w.remove(&0).unwrap(), model.remove(&0));
    w.check_invariants().unwrap();
    s.quiesce_all().unwrap();
    assert_eq!(r.get(&k).unwrap(), Some(1));
    assert_eq!(r.get(&0).unwrap(), None);
}

#[test]
fn a_batch_that_exhausts_the_heap_publishes_a_prefix_and_leaks_nothing() {
    let s = Setup::new(2, 22);
    let tree = BiTree::<u64, u64>::at(s.slot(0));
    let mut w = tree.write_handle(small_heap_writer(&s, 16 * 1024)).unwrap();
    let ops: Vec<Op<u64, u64>> = (0..500u64).map(|k| Op::Insert(k * 7 % 500, k)).collect();
    let e = w.apply_batch(&ops).unwrap_err();
    assert!(is_exhausted(&e), "{e}");
    w.check_invariants().unwrap();
    // The published tree is the model after some prefix of the batch.
    let n = w.len();
    assert!(n > 0 && n < ops.len());
    let mut model = BTreeMap::new();
    for op in &ops[..n] {
        if let Op::Insert(k, v) = *op {
            model.insert(k, v);
        }
    }
    let all: Vec<_> = model.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(w.iter().unwrap(), all);
    s.quiesce_all().unwrap();
    let r = tree.read_handle(&s.nodes[1]).unwrap();
    assert_eq!(r.enter().iter().unwrap(), all);
    // Superseded nodes of the batch were given back at once; the rest is the tree and the
    // retired path copies of the published tree (none: it was empty).
    assert_eq!(w.writer().retired_bytes(), 0);
    assert_eq!(w.writer().heap().stats().live, n * BLOCK);
}

/// A publication the modified ring refuses (no node passes, so it stays full) publishes
/// nothing and keeps nothing: the batch's nodes and its value's string go back to the
/// heap at once, and the writer's count of nodes still agrees with the tree. Once the
/// nodes pass, the same insert is published.
#[test]
fn a_publication_the_full_ring_refuses_leaks_nothing() {
    use bi_core::region::RegionConfig;
    use bi_core::runtime::RuntimeConfig;
    use bi_core::runtime::testing::fill_modified_ring;
    use std::time::Duration;

    let region = RegionConfig::new(1 << 20)
        .with_nodes(2)
        .with_log_ring_entries(8);
    let config = RuntimeConfig::default().log_full_timeout(Duration::from_millis(10));
    let s = Setup::with(region, |c| c, config);
    let tree = BiTree::<u64, String>::at(s.slot(0));
    let mut w = tree.write_handle(small_heap_writer(&s, 64 * 1024)).unwrap();
    let value = |k: u64| format!("the value of key {k}, out of line");
    for k in 0..20 {
        w.insert(k, value(k)).unwrap();
        s.quiesce_all().unwrap(); // room in the ring for the next publication
    }
    fill_modified_ring(w.writer(), s.slot(1));
    let live = w.writer().heap().stats().live;
    let e = w.insert(100, value(100)).unwrap_err();
    assert!(
        matches!(e, CollectionError::Runtime(BiError::LogFull { .. })),
        "{e}"
    );
    w.check_invariants().unwrap();
    assert_eq!(w.writer().heap().stats().live, live);
    assert_eq!((w.len(), w.try_get(&100).unwrap()), (20, None));
    s.quiesce_all().unwrap();
    assert_eq!(w.insert(100, value(100)).unwrap(), None);
    w.check_invariants().unwrap();
    s.quiesce_all().unwrap();
    let r = tree.read_handle(&s.nodes[1]).unwrap();
    assert_eq!(r.get(&100).unwrap(), Some(value(100)));
}
