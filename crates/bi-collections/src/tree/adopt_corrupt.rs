//! Adopting a tree whose memory is corrupt (a stray write, a bad device, a bug in another
//! version): the adopter refuses it with `Corrupt` instead of walking a cycle for ever or
//! going on from a tree that breaks its invariants, publishes nothing, and once the
//! damage is undone another adoption finds every entry.

use super::{BiTree, Node, TreeWriteHandle};
use crate::CollectionError;
use crate::testing::refused_while_corrupt;
use bi_alloc::NodeHeap;
use bi_core::heap::Heap;
use bi_core::mem::EmulatedNode;
use bi_core::runtime::Link;
use bi_core::runtime::testing::Setup;

type N = Node<u64, u64>;
const KEYS: u64 = 100;

fn take(
    s: &Setup,
    n: usize,
) -> Result<TreeWriteHandle<u64, u64, EmulatedNode, NodeHeap>, CollectionError> {
    let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
    let tree = BiTree::named(&s.region, &s.nodes[n], "t")?;
    tree.take_writer(&s.nodes[n], s.nodes[n].writer(heap)?)
}

/// A tree of `KEYS` keys written on node 0, whose writer then left; its root slot.
fn left_behind() -> (Setup, usize) {
    let s = Setup::new(2, 3);
    let mut w = take(&s, 0).unwrap();
    for k in 0..KEYS {
        w.insert(k, k * 2).unwrap();
    }
    drop(w);
    let tree = BiTree::<u64, u64>::named(&s.region, &s.nodes[0], "t").unwrap();
    (s, tree.slot())
}

/// Where the node `raw` links to is in memory (after its line's stamp).
fn node_at(raw: u64) -> usize {
    Link::<N>::from_raw(raw).offset() + 8
}

fn read(s: &Setup, raw: u64) -> N {
    s.emu.peek(node_at(raw)).unwrap()
}

/// Writes `bad` over the node `raw` links to: node 1's adoption is refused as corrupt and
/// leaves the root slot as it was; with the node restored, node 0 adopts the tree whole.
fn refused_then_adopted(s: &Setup, slot: usize, raw: u64, bad: N, what: &str) {
    let w = refused_while_corrupt(s, slot, node_at(raw), bytemuck::bytes_of(&bad), what, |n| {
        take(s, n)
    });
    w.check_invariants().unwrap();
    assert_eq!(w.len(), KEYS as usize, "{what}");
    for k in 0..KEYS {
        assert_eq!(w.get(&k), Some(k * 2), "{what}: key {k}");
    }
}

/// The leftmost leaf links back to the root: the walk stops once it has found more
/// nodes than the arena holds.
#[test]
#[cfg_attr(miri, ignore = "protocol test: slow interpreted")]
fn a_tree_with_a_cycle_is_refused() {
    let (s, slot) = left_behind();
    let root: u64 = s.emu.peek(slot).unwrap();
    let mut leaf = root;
    while read(&s, leaf).left() != 0 {
        leaf = read(&s, leaf).left();
    }
    let n = read(&s, leaf);
    let cycle = N::new(n.key(), n.value(), root, n.right(), n.size());
    refused_then_adopted(&s, slot, leaf, cycle, "a leaf linking to the root");
}

/// Nodes whose keys are out of order, or whose sizes do not count their subtrees: the
/// tree is adopted only if it keeps its invariants.
#[test]
#[cfg_attr(miri, ignore = "protocol test: slow interpreted")]
fn a_tree_that_breaks_its_invariants_is_refused() {
    let (s, slot) = left_behind();
    let root: u64 = s.emu.peek(slot).unwrap();
    let n = read(&s, root);
    let cases = [
        (
            N::new(KEYS + 1, n.value(), n.left(), n.right(), n.size()),
            "the root's key above its right subtree",
        ),
        (
            N::new(n.key(), n.value(), n.left(), n.right(), n.size() + 1),
            "the root's size one too many",
        ),
    ];
    for (bad, what) in cases {
        let (s, slot) = left_behind();
        refused_then_adopted(&s, slot, root, bad, what);
    }
}

/// The bound on the walk is the arena's room, not less: a sound tree whose nodes fill
/// the whole arena is adopted.
#[test]
#[cfg_attr(miri, ignore = "protocol test: slow interpreted")]
fn a_tree_that_fills_its_arena_is_adopted() {
    let s = Setup::new(2, 4);
    let line = s.region.layout().line_size();
    let most = NodeHeap::new(s.arena(0), line).unwrap().stats().capacity / line.get();
    let mut w = take(&s, 0).unwrap();
    let entries: Vec<(u64, u64)> = (0..most as u64).map(|k| (k, k)).collect();
    w.load_sorted(&entries).unwrap();
    assert_eq!(w.writer().heap().stats().live, most * line.get());
    drop(w);
    let w = take(&s, 1).unwrap();
    w.check_invariants().unwrap();
    assert_eq!(w.len(), most);
}
