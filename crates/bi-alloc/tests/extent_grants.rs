//! Extent grants (`bi_alloc::Extents`) made by writers on different nodes: the table is
//! shared by nodes whose caches are not coherent, so each grant must read it from memory
//! under the pool lock. No extent is ever granted to two owners.

use bi_alloc::{Extents, Grow};
use bi_core::heap::HeapError;
use bi_core::region::RegionConfig;
use bi_core::runtime::RuntimeConfig;
use bi_core::runtime::testing::Setup;
use std::ops::Range;

/// Two structures, written on two nodes, take turns growing. Each node has read the
/// table before (its cache may hold it), and the other node's grants since then are only
/// in memory: a grant from the cached table would hand out the other's extents again.
#[test]
fn writers_on_two_nodes_never_get_the_same_extent() {
    let s = Setup::with(
        RegionConfig::new(1 << 20).with_nodes(2),
        |c| c.seed(9),
        RuntimeConfig::default(),
    );
    let owners = [s.slot(0) as u64, s.slot(1) as u64];
    let mut extents = [0, 1].map(|n| Extents::new(s.nodes[n].clone(), owners[n]).unwrap());
    let mut granted: Vec<(usize, Range<usize>)> = Vec::new();
    for _ in 0..6 {
        for (n, e) in extents.iter_mut().enumerate() {
            granted.push((n, e.grow(100).unwrap()));
        }
    }
    for (i, (n, a)) in granted.iter().enumerate() {
        for (m, b) in &granted[i + 1..] {
            assert!(
                a.end <= b.start || b.end <= a.start,
                "node {n}'s grant {a:?} overlaps node {m}'s grant {b:?}"
            );
        }
    }
    // Memory's table agrees with what each owner was given, read from either node.
    for (n, &owner) in owners.iter().enumerate() {
        let mine: usize = granted
            .iter()
            .filter(|(m, _)| *m == n)
            .map(|(_, r)| r.len())
            .sum();
        for reader in &s.nodes {
            let owned = Extents::new(reader.clone(), owner)
                .unwrap()
                .owned()
                .unwrap();
            assert_eq!(owned.iter().map(|r| r.len()).sum::<usize>(), mine);
        }
    }
}

/// A grant of a run longer than one line of the table (eight owner words) reaches memory
/// whole: another node granting next finds every extent of it taken, and reads it back
/// as one range.
#[test]
fn a_run_of_many_extents_is_granted_once_and_read_back_whole() {
    let s = Setup::new(2, 0);
    let layout = *s.region.layout();
    let owners = [s.slot(0) as u64, s.slot(1) as u64];
    let mut first = Extents::new(s.nodes[0].clone(), owners[0]).unwrap();
    let mut second = Extents::new(s.nodes[1].clone(), owners[1]).unwrap();
    let run = first.grow(20 * layout.extent_bytes()).unwrap();
    assert_eq!(run.len(), 20 * layout.extent_bytes());
    let next = second.grow(1).unwrap();
    assert!(
        next.start >= run.end || next.end <= run.start,
        "{next:?} inside {run:?}"
    );
    let seen = Extents::new(s.nodes[1].clone(), owners[0])
        .unwrap()
        .owned()
        .unwrap();
    assert_eq!(seen, [run]);
}

/// A request that no free run holds is refused, and the error says how much is free.
#[test]
fn a_request_no_free_run_holds_is_refused_with_what_is_free() {
    let s = Setup::new(2, 0);
    let layout = *s.region.layout();
    let extent = layout.extent_bytes();
    let everything = layout.extents() * extent;
    let free = |e: &mut Extents<_>| match e.grow(everything + 1) {
        Err(HeapError::OutOfMemory { requested, free }) => {
            assert_eq!(requested, everything + 1);
            free
        }
        other => panic!("{other:?}"),
    };
    let mut first = Extents::new(s.nodes[0].clone(), s.slot(0) as u64).unwrap();
    let before = free(&mut first);
    assert!(before > 0 && before <= everything);
    first.grow(extent).unwrap();
    let mut second = Extents::new(s.nodes[1].clone(), s.slot(1) as u64).unwrap();
    assert_eq!(free(&mut second), before - extent);
}

/// A pool found too full for a request stays so (extents are never given back): a
/// longer request is refused at once, even while another node holds the pool lock, and
/// one that a free run may still hold waits for the lock as before.
#[test]
fn a_request_longer_than_the_free_runs_is_refused_without_the_pool_lock() {
    // A lease longer than the grant's wait for the lock: the holder stays live.
    let hour = 3_600_000_000_000;
    let s = Setup::with(
        RegionConfig::new(1 << 20).with_nodes(2),
        |c| c,
        RuntimeConfig::default().node_lease(hour).reader_lease(hour),
    );
    let layout = *s.region.layout();
    let extent = layout.extent_bytes();
    let everything = layout.extents() * extent;
    let mut extents = Extents::new(s.nodes[0].clone(), s.slot(0) as u64).unwrap();
    assert!(matches!(
        extents.grow(everything + 1),
        Err(HeapError::OutOfMemory { .. })
    ));
    // Taken to the lock, the request would wait out the grant's wait for it and fail
    // with `NoExtent`.
    let held = s.nodes[1].lock(std::time::Duration::from_secs(1)).unwrap();
    match extents.grow(everything) {
        Err(HeapError::OutOfMemory { requested, free }) => {
            assert_eq!(requested, everything);
            assert!(free > 0 && free <= everything);
        }
        other => panic!("{other:?}"),
    }
    // The longest free run itself (every extent: none is granted yet) still fits, and
    // is granted through the lock once its holder lets go.
    drop(held);
    let longest: usize = (0..layout.extents())
        .filter_map(|i| layout.extent(i))
        .map(|e| e.len)
        .sum();
    assert_eq!(extents.grow(longest).map(|r| r.len()).ok(), Some(longest));
}
