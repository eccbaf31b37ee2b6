//! Batched writes: sealed objects linked before one publication, one fence for the whole
//! batch, and batched retirement that is all-or-nothing.

use bi_core::heap::Heap;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, Link};

/// A chain node: a value and the raw link of the next node.
type Cell = [u64; 2];

fn chain(
    w: &mut bi_core::runtime::Writer<bi_core::mem::EmulatedNode, bi_core::heap::BumpHeap>,
    values: &[u64],
) -> Vec<Link<Cell>> {
    let mut next = Link::<Cell>::null();
    let mut links = Vec::new();
    for &v in values.iter().rev() {
        next = w.alloc_sealed([v, next.raw()]).unwrap();
        links.push(next);
    }
    links.reverse();
    links
}

fn read_chain(s: &Setup, node: usize) -> Vec<u64> {
    let r = s.nodes[node].reader().unwrap();
    let g = r.enter();
    let mut out = Vec::new();
    let mut at = g.load::<Cell>(s.slot(0)).unwrap();
    while let Some(c) = at {
        out.push(c[0]);
        at = g.follow(Link::<Cell>::from_raw(c[1])).unwrap();
    }
    out
}

#[test]
fn a_sealed_chain_is_seen_whole_on_another_node() {
    let s = Setup::new(2, 3);
    let mut w = s.writer(0);
    let links = chain(&mut w, &[1, 2, 3, 4]);
    let fences = s.emu.node(0).stats().fences;
    w.publish_link(s.slot(0), links[0]).unwrap();
    // The slot store fenced once for all four sealed objects before storing.
    let used = s.emu.node(0).stats().fences - fences;
    assert!(used <= 4, "publication used {used} fences");
    s.quiesce_all().unwrap();
    assert_eq!(read_chain(&s, 1), vec![1, 2, 3, 4]);
}

#[test]
fn retire_all_is_all_or_nothing_and_reclaims_every_block() {
    let s = Setup::new(2, 5);
    let mut w = s.writer(0);
    let old = chain(&mut w, &[1, 2, 3]);
    w.publish_link(s.slot(0), old[0]).unwrap();
    let new = chain(&mut w, &[9]);
    w.publish_link(s.slot(0), new[0]).unwrap();
    // A duplicate makes the whole batch fail, and nothing is retired.
    let dup = [old[0], old[1], old[0]];
    assert!(matches!(
        w.try_retire_all(&dup),
        Err(BiError::AlreadyRetired { .. })
    ));
    assert_eq!(w.retired_blocks(), 0);
    w.try_retire_all(&old).unwrap();
    assert_eq!(w.retired_blocks(), 3);
    assert!(matches!(
        w.try_retire_all(&old[..1]),
        Err(BiError::AlreadyRetired { .. })
    ));
    for _ in 0..3 {
        s.quiesce_all().unwrap();
    }
    let report = w.reclaim().unwrap();
    assert_eq!(report.freed_blocks, 3);
    assert_eq!(read_chain(&s, 1), vec![9]);
}

#[test]
fn a_sealed_object_never_published_can_be_given_back_at_once() {
    let s = Setup::new(1, 7);
    let mut w = s.writer(0);
    let used = w.heap().stats().live;
    let l = chain(&mut w, &[5]);
    assert!(w.heap().stats().live > used);
    w.discard_link(l[0]).unwrap();
    assert_eq!(w.heap().stats().live, used);
    assert!(matches!(
        w.discard_link(l[0]),
        Err(BiError::StaleLink { .. })
    ));
}
