//! Read-modify-write on the writer's handle (`update`, `get_or_insert_with`, `compute`)
//! against a `BTreeMap` model, for the tree and the map, under adversarial emulated
//! hardware; a reader on another node sees the model after a pass.

use bi_collections::map::BiHashMap;
use bi_collections::tree::BiTree;
use bi_core::region::RegionConfig;
use bi_core::runtime::RuntimeConfig;
use bi_core::runtime::testing::Setup;
use std::collections::BTreeMap;

fn machine(seed: u64) -> Setup {
    Setup::with(
        RegionConfig::new(1 << 20).with_nodes(2),
        |c| c.seed(seed).eviction_rate(0.01).adjacent_prefetch_rate(0.2),
        RuntimeConfig::default(),
    )
}

/// A deterministic stream of (operation, key, value).
fn ops(seed: u64, n: usize) -> impl Iterator<Item = (u64, u32, u32)> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n).map(move |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % 4, (x >> 8) as u32 % 40, (x >> 32) as u32 % 1000)
    })
}

/// Applies `op` through `rmw` (the handle's three methods) and to the model, checking
/// every returned value.
fn step(
    model: &mut BTreeMap<u32, u32>,
    (op, k, v): (u64, u32, u32),
    update: &mut dyn FnMut(u32, u32) -> Option<u32>,
    get_or_insert: &mut dyn FnMut(u32, u32) -> u32,
    compute: &mut dyn FnMut(u32, Option<u32>) -> Option<u32>,
) {
    match op {
        0 => {
            let old = model.get(&k).copied();
            assert_eq!(update(k, v), old, "update {k}");
            if let Some(o) = old {
                model.insert(k, o.wrapping_add(v));
            }
        }
        1 => {
            let want = *model.entry(k).or_insert(v);
            assert_eq!(get_or_insert(k, v), want, "get_or_insert_with {k}");
        }
        2 => {
            let old = model.insert(k, v);
            assert_eq!(compute(k, Some(v)), old, "compute(insert) {k}");
        }
        _ => {
            let old = model.remove(&k);
            assert_eq!(compute(k, None), old, "compute(remove) {k}");
        }
    }
}

#[test]
fn the_tree_matches_its_model() {
    for seed in 1..4 {
        let s = machine(seed);
        let tree = BiTree::<u32, u32>::at(s.slot(0));
        let w = std::cell::RefCell::new(tree.write_handle(s.writer(0)).unwrap());
        let mut model = BTreeMap::new();
        for (i, op) in ops(seed, 400).enumerate() {
            step(
                &mut model,
                op,
                &mut |k, v| w.borrow_mut().update(k, |o| o.wrapping_add(v)).unwrap(),
                &mut |k, v| w.borrow_mut().get_or_insert_with(k, || v).unwrap(),
                &mut |k, v| w.borrow_mut().compute(k, |_| v).unwrap(),
            );
            if i % 50 == 0 {
                s.quiesce_all().unwrap();
            }
        }
        s.quiesce_all().unwrap();
        let r = tree.read_handle(&s.nodes[1]).unwrap();
        let seen: BTreeMap<u32, u32> = r.enter().iter().unwrap().into_iter().collect();
        assert_eq!(seen, model, "seed {seed}");
        assert_eq!(s.emu.total_stats().reuse_hazards, 0);
    }
}

#[test]
fn the_map_matches_its_model() {
    for seed in 1..4 {
        let s = machine(seed);
        let map = BiHashMap::<u32, u32>::at(s.slot(0));
        let w = std::cell::RefCell::new(map.write_handle(s.writer(0)).unwrap());
        let mut model = BTreeMap::new();
        for (i, op) in ops(seed, 400).enumerate() {
            step(
                &mut model,
                op,
                &mut |k, v| w.borrow_mut().update(k, |o| o.wrapping_add(v)).unwrap(),
                &mut |k, v| w.borrow_mut().get_or_insert_with(k, || v).unwrap(),
                &mut |k, v| w.borrow_mut().compute(k, |_| v).unwrap(),
            );
            if i % 50 == 0 {
                s.quiesce_all().unwrap();
            }
        }
        s.quiesce_all().unwrap();
        let r = map.read_handle(&s.nodes[1]).unwrap();
        for k in 0..40 {
            assert_eq!(
                r.get(&k).unwrap(),
                model.get(&k).copied(),
                "seed {seed}, key {k}"
            );
        }
        assert_eq!(w.borrow().len(), model.len());
        assert_eq!(s.emu.total_stats().reuse_hazards, 0);
    }
}
