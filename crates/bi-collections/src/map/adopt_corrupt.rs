//! Adopting a map whose memory is corrupt (a stray write, a bad device, a bug in another
//! version): the adopter refuses it with `Corrupt` instead of decoding lines past its
//! array or walking a chain for ever, publishes nothing, and once the damage is undone
//! another adoption finds every entry.

use super::bucket::{
    ARRAY_LAYOUT, BucketLine, HEADER_BUCKETS, HEADER_FORMAT, HEADER_LAYOUT, LineLink, code,
};
use super::tags::array_lines;
use super::{BiHashMap, MapWriteHandle};
use crate::CollectionError;
use crate::testing::refused_while_corrupt;
use bi_alloc::NodeHeap;
use bi_core::heap::Heap;
use bi_core::mem::EmulatedNode;
use bi_core::runtime::Link;
use bi_core::runtime::testing::Setup;

/// Wide enough that every entry links to a pair of its own (three entries a line).
type Value = [u64; 6];
const KEYS: u64 = 200;

fn take(
    s: &Setup,
    n: usize,
) -> Result<MapWriteHandle<u64, Value, EmulatedNode, NodeHeap>, CollectionError> {
    let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
    let map = BiHashMap::named(&s.region, &s.nodes[n], "m")?;
    map.take_writer(&s.nodes[n], s.nodes[n].writer(heap)?)
}

/// A map of `KEYS` keys written on node 0, whose writer then left; its partition's slot.
fn left_behind(seed: u64) -> (Setup, usize) {
    let s = Setup::new(2, seed);
    let mut w = take(&s, 0).unwrap();
    for k in 0..KEYS {
        w.insert(k, [k; 6]).unwrap();
    }
    drop(w);
    let map = BiHashMap::<u64, Value>::named(&s.region, &s.nodes[0], "m").unwrap();
    (s, map.partition_slot(0))
}

fn array(s: &Setup, slot: usize) -> LineLink {
    Link::from_raw(s.emu.peek(slot).unwrap())
}

/// Where word `w` of record `i` of `array` is in memory (after the line's stamp).
fn record_word(s: &Setup, array: LineLink, i: usize, w: usize) -> usize {
    array.offset() + i * s.region.layout().line_size().get() + 8 + 8 * w
}

/// Writes `bad` over the word at `offset`: node 1's adoption is refused as corrupt and
/// leaves the partition's slot as it was; with the word restored, node 0 adopts the map
/// whole.
fn refused_then_adopted(s: &Setup, slot: usize, offset: usize, bad: u64, what: &str) {
    let w = refused_while_corrupt(s, slot, offset, &bad.to_ne_bytes(), what, |n| take(s, n));
    assert_eq!(w.len(), KEYS as usize, "{what}");
    for k in 0..KEYS {
        assert_eq!(w.get(&k), Some([k; 6]), "{what}: key {k}");
    }
}

#[test]
#[cfg_attr(miri, ignore = "protocol test: slow interpreted")]
fn a_header_that_does_not_fit_the_map_is_refused() {
    let (s, _) = left_behind(1);
    let line = s.region.layout().line_size();
    let most = NodeHeap::new(s.arena(0), line).unwrap().stats().capacity / line.get();
    let cases = [
        (
            HEADER_FORMAT,
            code::<u64, [u64; 5]>(),
            "another entry format",
        ),
        (HEADER_BUCKETS, 0, "no bucket"),
        (
            HEADER_BUCKETS,
            most as u64 + 1,
            "more buckets than the arena has lines",
        ),
    ];
    for (word, bad, what) in cases {
        let (s, slot) = left_behind(1);
        let header = |w| record_word(&s, array(&s, slot), 0, w);
        assert_eq!(
            s.emu.peek::<u64>(header(HEADER_LAYOUT)).unwrap(),
            ARRAY_LAYOUT
        );
        refused_then_adopted(&s, slot, header(word), bad, what);
    }
}

/// A bucket line whose chain links back to itself: the walk stops when it has found
/// more lines than the arena holds.
#[test]
#[cfg_attr(miri, ignore = "protocol test: slow interpreted")]
fn a_chain_that_links_back_to_itself_is_refused() {
    let (s, slot) = left_behind(2);
    let a = array(&s, slot);
    let bucket = (1..)
        .find(|&i| {
            let line: BucketLine = s.emu.peek(record_word(&s, a, i, 0)).unwrap();
            line.entries() > 0 && line.next().is_null()
        })
        .unwrap();
    let at = record_word(&s, a, bucket, 0);
    let mut cycle: BucketLine = s.emu.peek(at).unwrap();
    let line = s.region.layout().line_size().get();
    cycle.set_next(Link::new(a.offset() + bucket * line, a.generation()));
    refused_then_adopted(&s, slot, at, cycle.0[0], "a chain that is a cycle");
}

/// The control: a sound map is adopted as it is, without rewriting any line of its array
/// (its tag lines and counters already describe its buckets), so its readers' copies
/// stay good.
#[test]
#[cfg_attr(miri, ignore = "protocol test: slow interpreted")]
fn a_sound_map_is_adopted_without_a_rewrite() {
    let (s, slot) = left_behind(3);
    let a = array(&s, slot);
    let header: BucketLine = s.emu.peek(record_word(&s, a, 0, 0)).unwrap();
    let lines = array_lines::<u64, Value>(header.0[HEADER_BUCKETS] as usize);
    let bytes = lines * s.region.layout().line_size().get();
    let image = |s: &Setup| {
        let mut out = vec![0u8; bytes];
        s.emu.backing().load_bytes(a.offset(), &mut out).unwrap();
        out
    };
    let before = image(&s);
    let w = take(&s, 1).unwrap();
    assert_eq!(w.len(), KEYS as usize);
    assert!(image(&s) == before, "a line of the array was rewritten");
}
