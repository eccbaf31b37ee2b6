//! String keys and byte-string values, for the tree and the map, against a `BTreeMap`
//! model under adversarial emulated hardware (evictions, adjacent and random prefetch):
//! random lengths including 0, values over several lines and one of a megabyte; memory
//! reclaimed and reused as the run goes; a reader on another node reads every key by its
//! borrowed form (`&str`), and after a pass exactly the model; no reused memory is ever
//! accepted.

use bi_alloc::NodeHeap;
use bi_collections::map::BiHashMap;
use bi_collections::testing::check_reuse_hazards;
use bi_collections::tree::BiTree;
use bi_core::heap::Heap;
use bi_core::mem::EmulatedNode;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{RuntimeConfig, Writer};
use std::collections::BTreeMap;
use std::ops::Bound;

fn machine(seed: u64) -> Setup {
    Setup::with(
        RegionConfig::new(16 << 20).with_nodes(2),
        |c| {
            c.seed(seed)
                .eviction_rate(0.02)
                .adjacent_prefetch_rate(0.2)
                .random_prefetch_rate(0.05)
                .late_writebacks(0.05)
        },
        RuntimeConfig::default(),
    )
}

/// Node 0's writer over a heap that reuses memory.
fn writer(s: &Setup) -> Writer<EmulatedNode, NodeHeap> {
    let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
    s.nodes[0].writer(heap).unwrap()
}

/// A deterministic stream of random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A key over a two-letter alphabet, 0 to 40 bytes: many keys share their first 8
    /// or 16 bytes, so comparisons often need the stored bytes.
    fn key(&mut self) -> String {
        let len = self.below(41) as usize;
        (0..len)
            .map(|_| if self.below(2) == 0 { 'a' } else { 'b' })
            .collect()
    }

    /// A value of 0 to 300 bytes (up to six lines).
    fn value(&mut self) -> Vec<u8> {
        let len = self.below(301) as usize;
        let seed = self.next();
        (0..len)
            .map(|i| (seed >> (i % 56)) as u8 ^ i as u8)
            .collect()
    }
}

/// The operations a handle of either structure offers, for one driver.
trait Strings {
    fn insert(&mut self, k: String, v: Vec<u8>) -> Option<Vec<u8>>;
    fn remove(&mut self, k: &str) -> Option<Vec<u8>>;
    fn get(&self, k: &str) -> Option<Vec<u8>>;
    fn reclaim(&mut self);
}

/// Runs `steps` random operations through `w`, checking every answer against a model,
/// and what `read` (a reader on node 1) finds: every key of the model by its borrowed
/// form right away (a miss reads fresh), and after a pass exactly the model's contents.
fn drive(
    s: &Setup,
    seed: u64,
    steps: usize,
    w: &mut dyn Strings,
    read: &dyn Fn(&str) -> Option<Vec<u8>>,
    contents: &dyn Fn() -> Vec<(String, Vec<u8>)>,
) {
    let mut rng = Rng(seed | 1);
    let mut model = BTreeMap::new();
    for step in 0..steps {
        let k = rng.key();
        if rng.below(3) == 0 {
            assert_eq!(w.remove(&k), model.remove(&k), "step {step}: remove {k:?}");
        } else {
            let v = rng.value();
            assert_eq!(
                w.insert(k.clone(), v.clone()),
                model.insert(k.clone(), v),
                "step {step}"
            );
        }
        assert_eq!(
            w.get(&k),
            model.get(&k).cloned(),
            "step {step}: writer reads {k:?}"
        );
        if let Some(want) = model.get(&k) {
            // Published before the lookup: found (possibly an older value before a pass).
            assert!(read(&k).is_some(), "step {step}: reader misses {k:?}");
            let _ = want;
        }
        if step % 25 == 24 {
            s.quiesce_all().unwrap();
            w.reclaim();
            let got = contents();
            let want: Vec<(String, Vec<u8>)> = model.clone().into_iter().collect();
            assert_eq!(got, want, "step {step}: reader's contents after a pass");
            for (k, v) in &model {
                assert_eq!(read(k).as_ref(), Some(v), "step {step}: reader reads {k:?}");
            }
        }
    }
    check_reuse_hazards(s, false).unwrap();
}

impl<M: bi_core::mem::MemView, H: bi_core::heap::Heap> Strings
    for bi_collections::TreeWriteHandle<String, Vec<u8>, M, H>
{
    fn insert(&mut self, k: String, v: Vec<u8>) -> Option<Vec<u8>> {
        self.insert(k, v).unwrap()
    }
    fn remove(&mut self, k: &str) -> Option<Vec<u8>> {
        self.remove(k).unwrap()
    }
    fn get(&self, k: &str) -> Option<Vec<u8>> {
        self.try_get(k).unwrap()
    }
    fn reclaim(&mut self) {
        self.reclaim().unwrap();
    }
}

#[test]
fn tree_of_strings_agrees_with_a_model() {
    for seed in [1u64, 2, 3] {
        let s = machine(seed);
        let tree = BiTree::<String, Vec<u8>>::at(s.slot(0));
        let mut w = tree.write_handle(writer(&s)).unwrap();
        let r = tree.read_handle(&s.nodes[1]).unwrap();
        drive(&s, seed, 300, &mut w, &|k| r.get_fresh(k).unwrap(), &|| {
            r.enter().iter().unwrap()
        });
        w.check_invariants().unwrap();
        assert!(w.writer().heap().stats().reuses > 0, "memory was reused");
        // Ranges by borrowed bounds, in order.
        let view = r.enter();
        let all = view.iter().unwrap();
        let from_b: Vec<_> = all
            .iter()
            .filter(|(k, _)| k.as_str() >= "b")
            .cloned()
            .collect();
        assert_eq!(
            view.range::<str, _>((Bound::Included("b"), Bound::Unbounded))
                .unwrap(),
            from_b
        );
    }
}

#[test]
fn a_megabyte_value_round_trips_and_is_retired() {
    let s = machine(9);
    let tree = BiTree::<String, Vec<u8>>::at(s.slot(0));
    let mut w = tree.write_handle(writer(&s)).unwrap();
    let big: Vec<u8> = (0..1 << 20).map(|i: u32| ((i * 31) >> 3) as u8).collect();
    w.insert("big".into(), big.clone()).unwrap();
    let r = tree.read_handle(&s.nodes[1]).unwrap();
    assert_eq!(r.get("big").unwrap().as_ref(), Some(&big));
    let live = w.writer().heap().stats().live;
    assert_eq!(w.insert("big".into(), vec![1]).unwrap(), Some(big));
    for _ in 0..3 {
        s.quiesce_all().unwrap();
        w.reclaim().unwrap();
    }
    assert!(
        w.writer().heap().stats().live < live - (1 << 20),
        "the replaced megabyte was given back"
    );
    assert_eq!(r.get("big").unwrap(), Some(vec![1]));
    check_reuse_hazards(&s, false).unwrap();
}

impl<M: bi_core::mem::MemView, H: bi_core::heap::Heap> Strings
    for bi_collections::MapWriteHandle<String, Vec<u8>, M, H>
{
    fn insert(&mut self, k: String, v: Vec<u8>) -> Option<Vec<u8>> {
        self.insert(k, v).unwrap()
    }
    fn remove(&mut self, k: &str) -> Option<Vec<u8>> {
        self.remove(k).unwrap()
    }
    fn get(&self, k: &str) -> Option<Vec<u8>> {
        self.try_get(k).unwrap()
    }
    fn reclaim(&mut self) {
        self.reclaim().unwrap();
    }
}

#[test]
fn map_of_strings_agrees_with_a_model() {
    for seed in [4u64, 5, 6] {
        let s = machine(seed);
        let map = BiHashMap::<String, Vec<u8>>::at(s.slot(0));
        let mut w = map.write_handle(writer(&s)).unwrap();
        let r = map.read_handle(&s.nodes[1]).unwrap();
        let contents = || {
            let mut all: Vec<_> = r.enter().iter().map(Result::unwrap).collect();
            all.sort();
            all
        };
        drive(
            &s,
            seed,
            300,
            &mut w,
            &|k| r.get_fresh(k).unwrap(),
            &contents,
        );
        assert!(w.writer().heap().stats().reuses > 0, "memory was reused");
        assert_eq!(r.enter().len().unwrap(), contents().len());
    }
}

#[test]
fn map_of_strings_to_plain_values_uses_the_inline_format() {
    let s = machine(7);
    let map = BiHashMap::<String, u64>::at(s.slot(0));
    let mut w = map.write_handle(writer(&s)).unwrap();
    for i in 0..500u64 {
        w.insert(format!("key-{i:040}"), i).unwrap();
        if i % 200 == 199 {
            // Each insert logs three lines (bucket, tags, counters): the passes make room.
            s.quiesce_all().unwrap();
        }
    }
    let r = map.read_handle(&s.nodes[1]).unwrap();
    for i in (0..500u64).step_by(7) {
        assert_eq!(r.get(format!("key-{i:040}").as_str()).unwrap(), Some(i));
        assert_eq!(r.get(format!("key-{i:039}").as_str()).unwrap(), None);
    }
    // Opening the map's name with other types is refused: a String is not a [u8; 24].
    assert!(
        BiHashMap::<Vec<u8>, u64>::at(s.slot(0))
            .read_handle(&s.nodes[1])
            .unwrap()
            .get(&b"x"[..])
            .is_err()
    );
}
