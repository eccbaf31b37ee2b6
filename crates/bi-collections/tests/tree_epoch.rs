//! The coherent baseline (`EpochBonsai`, crossbeam-epoch) gives the same answers as
//! `BTreeMap`, alone and with concurrent readers.

use bi_collections::tree::EpochBonsai;
use bi_collections::{ApplyBatch, Op};
use rand::Rng;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn same_answers_as_btreemap_with_invariants_after_every_operation() {
    let mut t = EpochBonsai::<u32, u64>::new();
    let mut model = BTreeMap::new();
    let mut rng = bi_kit::rng(1, "operations");
    for i in 0..if cfg!(miri) { 60 } else { 4000 } {
        let k = rng.random_range(0..200);
        match rng.random_range(0..10) {
            0..=5 => assert_eq!(t.insert(k, i), model.insert(k, i)),
            6..=8 => assert_eq!(t.remove(&k), model.remove(&k)),
            _ => {
                let ops: Vec<_> = (0..5)
                    .map(|j| {
                        if j % 2 == 0 {
                            Op::Insert(k + j, i)
                        } else {
                            Op::Remove(k + j - 1)
                        }
                    })
                    .collect();
                for op in &ops {
                    match *op {
                        Op::Insert(k, v) => {
                            model.insert(k, v);
                        }
                        Op::Remove(k) => {
                            model.remove(&k);
                        }
                    }
                }
                assert_eq!(t.apply_batch(&ops).unwrap().applied, 5);
            }
        }
        t.check_invariants().unwrap();
        assert_eq!(t.len(), model.len());
        assert_eq!(t.get(&k), model.get(&k).copied());
    }
    let all: Vec<_> = model.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(t.iter(), all);
    assert_eq!(
        t.range(50..=60),
        model
            .range(50..=60)
            .map(|(k, v)| (*k, *v))
            .collect::<Vec<_>>()
    );
    assert_eq!(t.first(), model.first_key_value().map(|(k, v)| (*k, *v)));
    assert_eq!(t.last(), model.last_key_value().map(|(k, v)| (*k, *v)));
}

/// Values carry their key in the high half, so a reader can tell a torn or misplaced
/// value; the writer only grows the version, so a reader never sees it go backwards.
#[test]
fn concurrent_readers_see_consistent_values_and_the_end_state_matches() {
    let t = Arc::new(EpochBonsai::<u64, u64>::new());
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (t, done) = (t.clone(), done.clone());
            std::thread::spawn(move || {
                let mut last = vec![0u64; 64];
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) || reads < if cfg!(miri) { 5 } else { 1000 } {
                    let k = (reads * 13 + r) % 64;
                    if let Some(v) = t.get(&k) {
                        assert_eq!(v >> 32, k, "value of another key");
                        assert!(v & 0xFFFF_FFFF >= last[k as usize], "went backwards");
                        last[k as usize] = v & 0xFFFF_FFFF;
                    }
                    let all = t.range(10..20);
                    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
                    reads += 1;
                }
            })
        })
        .collect();
    let mut model = BTreeMap::new();
    let mut rng = bi_kit::rng(2, "writes");
    for i in 1..if cfg!(miri) { 50 } else { 20_000 } {
        let k = rng.random_range(0..64u64);
        if rng.random_bool(0.8) {
            let v = (k << 32) | i;
            t.insert(k, v);
            model.insert(k, v);
        } else {
            t.remove(&k);
            model.remove(&k);
        }
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.join().unwrap();
    }
    let all: Vec<_> = model.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(t.iter(), all);
    t.check_invariants().unwrap();
}
