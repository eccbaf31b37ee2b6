//! What the tree's writer reads and checks itself: its own lookups against a model
//! through a mix of writes, the read-modify-write calls built on them, the invariant
//! check on every shape the writes leave, and a sorted load that a reader on another
//! node finds whole and balanced.

use bi_collections::tree::BiTree;
use bi_core::region::RegionConfig;
use bi_core::runtime::RuntimeConfig;
use bi_core::runtime::testing::Setup;
use std::collections::BTreeMap;
use std::ops::Bound;

/// Two nodes on 8 MiB: room for every path copy (the test heap never reuses memory).
fn setup(seed: u64) -> Setup {
    Setup::with(
        RegionConfig::new(8 << 20).with_nodes(2),
        |c| c.seed(seed),
        RuntimeConfig::default()
            .node_lease(1_000_000)
            .reader_lease(1_000_000),
    )
}

/// The writer's `get`, `contains_key`, `is_empty` and the calls that read before they
/// write (`update`, `compute`, `get_or_insert_with`) agree with a `BTreeMap` through a
/// mix of inserts, replacements and removals; after each step the invariants hold and
/// a reader on node 1 (after the passes) finds the same entries.
#[test]
fn the_writers_own_reads_agree_with_a_model_through_every_write() {
    let s = setup(21);
    let tree = BiTree::<u64, u64>::at(s.slot(0));
    let mut w = tree.write_handle(s.writer(0)).unwrap();
    let mut model = BTreeMap::new();
    assert!(w.is_empty());
    w.check_invariants().unwrap();
    for step in 0..400u64 {
        let key = (step * 37) % 61;
        match step % 5 {
            0 | 1 => assert_eq!(w.insert(key, step).unwrap(), model.insert(key, step)),
            2 => {
                let old = model.get(&key).copied();
                if let Some(v) = old {
                    model.insert(key, v + 1);
                }
                assert_eq!(w.update(key, |v| v + 1).unwrap(), old, "update {key}");
            }
            3 => {
                // Removes an even value, counts an odd one up, inserts an absent one.
                let old = model.get(&key).copied();
                let new = match old {
                    Some(v) if v % 2 == 0 => None,
                    Some(v) => Some(v + 2),
                    None => Some(key),
                };
                match new {
                    Some(v) => model.insert(key, v),
                    None => model.remove(&key),
                };
                assert_eq!(w.compute(key, |_| new).unwrap(), old, "compute {key}");
            }
            _ => {
                let v = *model.entry(key).or_insert(step * 3);
                assert_eq!(w.get_or_insert_with(key, || step * 3).unwrap(), v);
            }
        }
        for probe in [key, key + 61] {
            assert_eq!(w.get(&probe), model.get(&probe).copied(), "get {probe}");
            assert_eq!(w.contains_key(&probe).unwrap(), model.contains_key(&probe));
        }
        assert_eq!(w.is_empty(), model.is_empty());
        assert_eq!(w.len(), model.len());
        w.check_invariants().unwrap();
    }
    s.quiesce_all().unwrap();
    let r = tree.read_handle(&s.nodes[1]).unwrap();
    // Ranges of every kind of bound, on the writer and on a reader of another node.
    let bounds = |k: u64| [Bound::Included(k), Bound::Excluded(k), Bound::Unbounded];
    for a in (0..64).step_by(7) {
        for b in (a..66).step_by(9) {
            for (lo, hi) in bounds(a)
                .into_iter()
                .flat_map(|lo| bounds(b).map(|hi| (lo, hi)))
            {
                if a == b && matches!((lo, hi), (Bound::Excluded(_), Bound::Excluded(_))) {
                    continue; // a range std refuses
                }
                let expected: Vec<(u64, u64)> =
                    model.range((lo, hi)).map(|(&k, &v)| (k, v)).collect();
                assert_eq!(w.range((lo, hi)).unwrap(), expected, "{lo:?}..{hi:?}");
                assert_eq!(
                    r.enter().range((lo, hi)).unwrap(),
                    expected,
                    "{lo:?}..{hi:?}"
                );
            }
        }
    }
    let expected: Vec<(u64, u64)> = model.into_iter().collect();
    assert_eq!(r.enter().iter().unwrap(), expected);
    w.clear().unwrap();
    assert!(w.is_empty() && w.get(&expected[0].0).is_none());
    w.check_invariants().unwrap();
}

/// A sorted load publishes every entry at once as a tree a reader on another node finds
/// whole, in order and balanced (a scan's first path is at most as deep as a perfectly
/// balanced tree of that size); a load into a tree that is not empty, or of keys not
/// strictly increasing, is refused and changes nothing.
#[test]
fn a_sorted_load_is_whole_balanced_and_refused_on_bad_input() {
    for n in [1u64, 2, 3, 7, 100, 1000] {
        let s = setup(22);
        let tree = BiTree::<u64, u64>::at(s.slot(0));
        let mut w = tree.write_handle(s.writer(0)).unwrap();
        let entries: Vec<(u64, u64)> = (0..n).map(|k| (k * 2, k + 1)).collect();
        let mut unsorted = entries.clone();
        if n > 1 {
            unsorted.swap(0, 1);
            assert!(w.load_sorted(&unsorted).is_err(), "unsorted, n = {n}");
            let mut repeated = entries.clone();
            repeated[1].0 = repeated[0].0;
            assert!(w.load_sorted(&repeated).is_err(), "a repeated key, n = {n}");
            assert!(w.is_empty());
        }
        w.load_sorted(&entries).unwrap();
        w.check_invariants().unwrap();
        assert_eq!(w.len() as u64, n);
        for &(k, v) in &entries {
            assert_eq!(w.get(&k), Some(v));
            assert_eq!(w.get(&(k + 1)), None);
        }
        assert!(
            w.load_sorted(&[(u64::MAX, 0)]).is_err(),
            "not empty, n = {n}"
        );
        assert_eq!(w.len() as u64, n);
        s.quiesce_all().unwrap();
        let r = tree.read_handle(&s.nodes[1]).unwrap();
        let v = r.enter();
        assert_eq!(v.iter().unwrap(), entries);
        let scan = v.scan(..).unwrap();
        let shown = format!("{scan:?}");
        let depth: u32 = shown
            .strip_prefix("Scan { depth: ")
            .and_then(|rest| rest.strip_suffix(", .. }"))
            .and_then(|d| d.parse().ok())
            .unwrap_or_else(|| panic!("{shown}"));
        let perfect = u64::BITS - n.leading_zeros(); // levels of a perfect tree of n
        assert!(
            depth <= perfect,
            "n = {n}: {shown}, a perfect tree has {perfect} levels"
        );
        // Inserting and removing go on from the loaded shape.
        w.insert(1, 1).unwrap();
        w.remove(&0).unwrap();
        w.check_invariants().unwrap();
    }
}

/// The writer shows its entries as a map does, and keeps the bound on its values'
/// lengths that a delegation server sizes its replies by: the longest out-of-line part
/// of any value it stored, by insert or by a sorted load.
#[test]
fn the_writer_shows_its_entries_and_bounds_its_values() {
    use bi_collections::ApplyBatch;
    let s = setup(23);
    let mut w = BiTree::<u64, String>::at(s.slot(0))
        .write_handle(s.writer(0))
        .unwrap();
    assert_eq!(w.longest_value(), Some(0));
    let long = "a value longer than sixteen bytes".to_string();
    w.load_sorted(&[(1, "short".into()), (2, long.clone())])
        .unwrap();
    assert_eq!(w.longest_value(), Some(long.len()));
    let longer = "x".repeat(100);
    w.insert(3, longer.clone()).unwrap();
    w.insert(4, "y".into()).unwrap();
    assert_eq!(w.longest_value(), Some(100));
    let model: BTreeMap<u64, String> =
        [(1, "short".into()), (2, long), (3, longer), (4, "y".into())]
            .into_iter()
            .collect();
    assert_eq!(format!("{w:?}"), format!("{model:?}"));
}
