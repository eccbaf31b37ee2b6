//! Retired memory stays bounded under steady updates with no call to `reclaim`: every
//! bag of replaced nodes the writer retires also gives back what has passed its grace.
//!
//! The bound: a node replaced by an update waits in the writer's bag (fewer than
//! `RETIRE_BATCH`), then for a grace period (the passes of every node twice), then for
//! the next bag to give it back (up to `RECLAIM_STEP` per bag). With a pass of every node
//! after each `PERIOD` updates, at most the nodes replaced over three periods, plus one
//! bag and one step, are retired or waiting.

use bi_alloc::NodeHeap;
use bi_collections::tree::BiTree;
use bi_core::heap::Heap;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{RECLAIM_STEP, RETIRE_BATCH};

const KEYS: u64 = 256;
const PERIOD: usize = 16;
/// The most nodes one update of a tree of `KEYS` keys replaces: its path (a
/// weight-balanced tree of 256 keys is at most 16 deep) and three per rotation.
const PER_UPDATE: usize = 16 + 3 * 2;

#[test]
fn retired_nodes_stay_bounded_without_reclaim() {
    let s = Setup::new(2, 5);
    let arena = s.arena(0);
    let heap = NodeHeap::new(arena.clone(), s.region.layout().line_size()).unwrap();
    let tree = BiTree::<u64, u64>::at(s.slot(0));
    let mut w = tree.write_handle(s.nodes[0].writer(heap).unwrap()).unwrap();
    let bound = 3 * PERIOD * PER_UPDATE + RETIRE_BATCH + RECLAIM_STEP;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut most = 0;
    for i in 0..4000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = x % KEYS;
        if x >> 63 == 0 {
            w.insert(k, i).unwrap();
        } else {
            w.remove(&k).unwrap();
        }
        if i % PERIOD as u64 == PERIOD as u64 - 1 {
            s.quiesce_all().unwrap();
        }
        let waiting = w.writer().retired_blocks() + w.unretired();
        most = most.max(waiting);
        assert!(
            waiting <= bound,
            "update {i}: {waiting} nodes waiting, bound {bound}"
        );
        // The heap holds the tree and what waits, nothing else.
        let live = w.writer().heap().stats().live;
        assert_eq!(live, (w.len() + waiting) * 64, "update {i}");
    }
    assert!(most > RETIRE_BATCH, "the test retires whole bags");
}
