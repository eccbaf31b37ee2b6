//! Extent grants (`bi_alloc::Extents`) made by writers on different nodes: the table is
//! shared by nodes whose caches are not coherent, so each grant must read it from memory
//! under the pool lock. No extent is ever granted to two owners.

use bi_alloc::{Extents, Grow};
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
