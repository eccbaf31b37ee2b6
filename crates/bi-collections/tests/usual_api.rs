//! The usual collection API against a `BTreeMap` model, with string keys, under
//! adversarial emulated hardware: `extend`, `retain`, `clear`, ordered scans of ranges
//! with every kind of bound (checked against `BTreeMap::range`), and `Debug` showing the
//! contents exactly as a `BTreeMap` shows them; a reader on another node agrees.

use bi_collections::map::BiHashMap;
use bi_collections::tree::BiTree;
use bi_core::region::RegionConfig;
use bi_core::runtime::RuntimeConfig;
use bi_core::runtime::testing::Setup;
use std::collections::BTreeMap;
use std::ops::Bound;

fn machine(seed: u64) -> Setup {
    Setup::with(
        RegionConfig::new(8 << 20).with_nodes(2),
        |c| c.seed(seed).eviction_rate(0.02).adjacent_prefetch_rate(0.2),
        RuntimeConfig::default(),
    )
}

fn key(i: u32) -> String {
    // Lengths 1 to 40, many sharing a prefix.
    format!("{}{i}", "k".repeat((i % 37) as usize))
}

#[test]
fn tree_scans_retain_clear_and_debug_agree_with_a_model() {
    let s = machine(3);
    let tree = BiTree::<String, u32>::at(s.slot(0));
    let mut w = tree.write_handle(s.writer(0)).unwrap();
    let mut model: BTreeMap<String, u32> = (0..300).map(|i| (key(i), i)).collect();
    let report = w.extend((0..300).map(|i| (key(i), i))).unwrap();
    assert_eq!((report.inserted, report.replaced), (300, 0));
    let r = tree.read_handle(&s.nodes[1]).unwrap();
    s.quiesce_all().unwrap();
    let bounds = |i: u32| {
        let k = key(i);
        match i % 3 {
            0 => Bound::Included(k),
            1 => Bound::Excluded(k),
            _ => Bound::Unbounded,
        }
    };
    {
        let view = r.enter();
        for (a, b) in [(0, 7), (5, 5), (11, 290), (2, 1), (30, 31), (299, 4)] {
            let (lo, hi) = (bounds(a), bounds(b));
            if let (
                Bound::Included(x) | Bound::Excluded(x),
                Bound::Included(y) | Bound::Excluded(y),
            ) = (&lo, &hi)
                && x > y
            {
                continue; // BTreeMap::range panics on reversed bounds
            }
            let want: Vec<(String, u32)> = model
                .range::<String, _>((lo.clone(), hi.clone()))
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            let as_str = (
                lo.as_ref().map(String::as_str),
                hi.as_ref().map(String::as_str),
            );
            let got: Vec<(String, u32)> = view
                .scan::<str, _>(as_str)
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert_eq!(got, want, "scan {lo:?}..{hi:?}");
            assert_eq!(
                view.range::<str, _>(as_str).unwrap(),
                want,
                "range {lo:?}..{hi:?}"
            );
        }
        assert_eq!(format!("{view:?}"), format!("{model:?}"));
    }
    let removed = w.retain(|k, v| k.len() % 2 == 0 || v % 5 == 0).unwrap();
    let before = model.len();
    model.retain(|k, v| k.len() % 2 == 0 || *v % 5 == 0);
    assert_eq!(removed, before - model.len());
    w.check_invariants().unwrap();
    s.quiesce_all().unwrap();
    assert_eq!(format!("{:?}", r.enter()), format!("{model:?}"));
    w.clear().unwrap();
    assert!(w.is_empty());
    s.quiesce_all().unwrap();
    assert_eq!(format!("{:?}", r.enter()), "{}");
    assert!(r.enter().scan::<str, _>(..).unwrap().next().is_none());
}

#[test]
fn map_extend_retain_clear_and_debug_agree_with_a_model() {
    let s = machine(4);
    let map = BiHashMap::<String, Vec<u8>>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    let value = |i: u32| vec![i as u8; (i % 90) as usize];
    let mut model: BTreeMap<String, Vec<u8>> = (0..300).map(|i| (key(i), value(i))).collect();
    w.extend((0..300).map(|i| (key(i), value(i)))).unwrap();
    let sorted = |mut v: Vec<(String, Vec<u8>)>| {
        v.sort();
        v
    };
    let want = |m: &BTreeMap<String, Vec<u8>>| m.clone().into_iter().collect::<Vec<_>>();
    assert_eq!(sorted(w.entries().unwrap()), want(&model));
    let removed = w.retain(|k, _| k.len() > 20).unwrap();
    let before = model.len();
    model.retain(|k, _| k.len() > 20);
    assert_eq!(removed, before - model.len());
    assert_eq!(sorted(w.entries().unwrap()), want(&model));
    let r = map.read_handle(&s.nodes[1]).unwrap();
    s.quiesce_all().unwrap();
    let seen: Vec<_> = r.enter().iter().map(Result::unwrap).collect();
    assert_eq!(sorted(seen), want(&model));
    let shown = format!("{:?}", r.enter());
    assert!(
        shown.starts_with('{') && shown.matches(": [").count() == model.len(),
        "{shown}"
    );
    w.clear().unwrap();
    assert_eq!((w.len(), w.entries().unwrap().len()), (0, 0));
    s.quiesce_all().unwrap();
    assert_eq!(format!("{:?}", r.enter()), "{}");
}
