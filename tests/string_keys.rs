//! String keys across processes: a writer process fills a map of `String -> Vec<u8>` and
//! a tree of `String -> u64` in a region file; this process, another node, reads every
//! key by `&str` and every value byte for byte, and walks the tree in order. Then a
//! second writer process adopts both, replaces and removes some keys (retiring their
//! strings), and the reader sees exactly that.
//!
//! The child is this test binary again, selected by an environment variable and an exact
//! test-name filter. Miri can neither map files nor spawn processes.

use bi::{Pool, PoolConfig};
use std::path::Path;
use std::time::Duration;

mod common;

const CHILD_ENV: &str = "BI_STRING_KEYS_CHILD";
const ROUND_ENV: &str = "BI_STRING_KEYS_ROUND";
const TREE_ENV: &str = "BI_STRING_KEYS_TREE";
const CHILD_TEST: &str = "string_writer_process";
const KEYS: usize = 400;

fn config(node: usize) -> PoolConfig {
    common::pool_config(2, node, Duration::from_millis(300))
}

/// Key `i`: 0 to 80 bytes, many sharing a long prefix.
fn key(i: usize) -> String {
    let long = "a shared prefix longer than any line's payload, then: ";
    match i % 4 {
        0 => String::new() + &"k".repeat(i % 9), // short: inside the word
        1 => format!("{long}{i}"),
        2 => format!("user:{i:08}"),
        _ => format!("{i:x}").repeat(1 + i % 7),
    }
}

/// Value of key `i` in round `round`: 0 to 1,000 bytes.
fn value(i: usize, round: u8) -> Vec<u8> {
    (0..(i * 37) % 1001)
        .map(|j| (i + j) as u8 ^ round)
        .collect()
}

/// Opens the pool as node 1, waiting for the previous writer process's claim to lapse.
fn open_writer_pool(path: &Path) -> Pool {
    common::open_when_free(|| Pool::open_or_create(path, config(1)))
}

/// The writer process (of the map, or with the tree variable set of the tree; a node
/// has one writer): round 1 inserts every key; round 2 adopts, replaces the values of
/// the even keys and removes every key divisible by 3.
#[test]
fn string_writer_process() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return; // not the child
    };
    let round: u8 = std::env::var(ROUND_ENV).unwrap().parse().unwrap();
    let pool = open_writer_pool(Path::new(&path));
    if std::env::var(TREE_ENV).is_ok() {
        let mut tree = pool.tree_writer::<String, u64>("index").unwrap();
        for i in 0..KEYS {
            if round == 1 {
                tree.insert(key(i), i as u64).unwrap();
            } else if i % 3 == 0 {
                tree.remove(key(i).as_str()).unwrap();
            } else if i % 2 == 0 {
                tree.insert(key(i), 1000 + i as u64).unwrap();
            }
        }
    } else {
        let mut map = pool.map_writer::<String, Vec<u8>>("blobs").unwrap();
        for i in 0..KEYS {
            if round == 1 {
                map.insert(key(i), value(i, 1)).unwrap();
            } else if i % 3 == 0 {
                map.remove(key(i).as_str()).unwrap();
            } else if i % 2 == 0 {
                map.insert(key(i), value(i, 2)).unwrap();
            }
        }
    }
    println!("wrote round {round}");
}

fn run_writer(path: &Path, round: u8) {
    for tree in [false, true] {
        run_one_writer(path, round, tree);
    }
}

fn run_one_writer(path: &Path, round: u8, tree: bool) {
    let mut cmd = common::child(CHILD_TEST);
    cmd.env(CHILD_ENV, path).env(ROUND_ENV, round.to_string());
    if tree {
        cmd.env(TREE_ENV, "1");
    }
    let out = cmd.output().expect("run the writer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(&format!("wrote round {round}")),
        "writer round {round}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[cfg_attr(miri, ignore)]
fn strings_written_by_one_process_are_read_by_another() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strings.bi");
    let pool = Pool::open_or_create(&path, config(0)).unwrap();
    let map = pool.map_reader::<String, Vec<u8>>("blobs").unwrap();
    let tree = pool.tree_reader::<String, u64>("index").unwrap();
    // Keys repeat (key(i) for several i): the model is the last write of each.
    let mut want = std::collections::BTreeMap::new();
    for i in 0..KEYS {
        want.insert(key(i), (value(i, 1), i as u64));
    }
    run_writer(&path, 1);
    for (k, (v, n)) in &want {
        assert_eq!(map.get(k.as_str()).unwrap().as_ref(), Some(v), "map {k:?}");
        assert_eq!(tree.get(k.as_str()).unwrap(), Some(*n), "tree {k:?}");
    }
    run_writer(&path, 2);
    for i in 0..KEYS {
        if i % 3 == 0 {
            want.remove(&key(i));
        } else if i % 2 == 0 {
            want.insert(key(i), (value(i, 2), 1000 + i as u64));
        }
    }
    // Values read before the second round may still be cached here: wait for passes.
    let (before, _) = pool.passes();
    while pool.passes().0 < before + 3 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    for (k, (v, n)) in &want {
        assert_eq!(map.get(k.as_str()).unwrap().as_ref(), Some(v), "map {k:?}");
        assert_eq!(tree.get(k.as_str()).unwrap(), Some(*n), "tree {k:?}");
    }
    let in_order: Vec<(String, u64)> = want.iter().map(|(k, (_, n))| (k.clone(), *n)).collect();
    assert_eq!(tree.enter().iter().unwrap(), in_order);
    assert_eq!(map.enter().len().unwrap(), want.len());
}
