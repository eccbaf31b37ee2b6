//! What a map lookup costs and reads, counted by the emulator: a refresh drops a key's
//! whole path, a batch asks for its lines before it reads them, a live iteration stays
//! in the cache, and a linked entry is fetched only when its hash matches.

use bi_collections::map::{BiHashMap, bucket_of, key_hash};
use bi_core::runtime::testing::Setup;
use refresh_rounds::write_then_refresh;

mod refresh_rounds;

/// The first `n` keys whose hash puts them in bucket 0 of every table of up to 1,024
/// buckets: one chain, however the table grows.
fn one_bucket_keys(n: usize) -> Vec<u64> {
    let keys: Vec<u64> = (0u64..)
        .filter(|k| key_hash(k) & 0xffff_ffff < 1 << 22)
        .take(n)
        .collect();
    assert!(keys.iter().all(|k| bucket_of(key_hash(k), 1024) == 0));
    keys
}

/// Whether `k` shares bucket 0 (the long chain) of some table of 16 buckets or more.
fn in_bucket_0(k: u64) -> bool {
    key_hash(&k) & 0xffff_ffff < 1 << 28
}

/// A process that wrote through another node's writer drops its node's copies of the
/// key's path and reads its write at once (the node never passes here): for new keys,
/// new values and removals, for a key at the end of a chain too long to drop line by line,
/// and across the growths that put new arrays in the root slot. Off that long chain, a
/// refresh costs one fence (the long chain, shared by whichever keys land in bucket 0,
/// is read again from memory instead).
#[test]
fn a_refresh_reads_the_write_at_once_on_every_path_under_one_fence() {
    let s = Setup::new(2, 5);
    let map = BiHashMap::<u64, u64>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    let r = map.read_handle(&s.nodes[1]).unwrap();
    assert!(r.enter().is_empty().unwrap());
    let mut keys = one_bucket_keys(20); // seven lines of three entries by the end
    keys.extend(1_000_000..1_000_100); // the table grows several times on the way
    let get = |k| r.get(&k).unwrap();
    write_then_refresh(&s, &keys, &mut w, &r, get, |k| !in_bucket_0(k));
}

/// `get_many` asks for every key's tag and bucket lines before it reads any, so none of
/// its reads waits for memory: once the root slot and the header are cached, a batch
/// misses no line, and it asks for no line it does not read.
#[test]
fn a_batch_asks_for_every_line_it_reads_before_reading_one() {
    let s = Setup::new(2, 6);
    let map = BiHashMap::<u64, u64>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    for k in 0..400 {
        w.insert(k, k + 1).unwrap();
        if k % 100 == 99 {
            s.quiesce_all().unwrap(); // the writer's log of modified lines drains
        }
    }
    s.quiesce_all().unwrap();
    let r = map.read_handle(&s.nodes[1]).unwrap();
    assert_eq!(r.get(&0).unwrap(), Some(1)); // the root slot and the header now cached
    let keys: Vec<u64> = (1..=16).map(|i| i * 23).collect();
    let before = s.emu.stats(1);
    let mut out = Vec::new();
    r.get_many(&keys, &mut out).unwrap();
    let after = s.emu.stats(1);
    let want: Vec<Option<u64>> = keys.iter().map(|k| Some(k + 1)).collect();
    assert_eq!(out, want);
    assert_eq!(after.misses - before.misses, 0, "a line read unasked for");
    // Each key's bucket line and, shared by 28 buckets, its tag line: a line asked for
    // that the batch does not read (the search asks for its bucket line again) would
    // bring the count past two a key.
    let asked = after.prefetches - before.prefetches;
    assert!(
        (keys.len() as u64 + 1..=2 * keys.len() as u64).contains(&asked),
        "{asked} lines asked for"
    );
}

/// `iter_live` reads through the node's cache: once the map is cached, it reads no line
/// from memory and drops none, where a snapshot (`iter`) reads from memory.
#[test]
fn a_live_iteration_reads_through_the_cache_and_a_snapshot_from_memory() {
    let s = Setup::new(2, 7);
    let map = BiHashMap::<u64, u64>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    for k in 0..200 {
        w.insert(k, k * 2).unwrap();
    }
    s.quiesce_all().unwrap();
    let r = map.read_handle(&s.nodes[1]).unwrap();
    let m = r.enter();
    let want: Vec<(u64, u64)> = (0..200).map(|k| (k, k * 2)).collect();
    let read = |live: bool| {
        let before = s.emu.stats(1);
        let entries = if live { m.iter_live() } else { m.iter() };
        let mut all: Vec<(u64, u64)> = entries.collect::<Result<_, _>>().unwrap();
        all.sort();
        assert_eq!(all, want);
        let after = s.emu.stats(1);
        (
            after.misses - before.misses,
            after.lines_invalidated - before.lines_invalidated,
        )
    };
    let mut partitions = m.iter_live();
    assert_eq!(format!("{partitions:?}"), "Iter { partition: 0, .. }");
    partitions.next();
    assert_eq!(format!("{partitions:?}"), "Iter { partition: 1, .. }");
    read(true); // brings the map into node 1's cache
    assert_eq!(read(true), (0, 0));
    let (misses, dropped) = read(false);
    assert!(misses > 0 && dropped > 0, "a snapshot read from the cache");
}

/// Entries whose key and value do not fit a line link to a pair and keep the key's hash
/// beside the link: a lookup fetches only the pairs whose hash matches, so each of three
/// keys of one bucket line costs the same loads, wherever it lies in the line.
#[test]
fn a_linked_entry_is_fetched_only_when_its_hash_matches() {
    let s = Setup::new(2, 8);
    let map = BiHashMap::<u64, [u64; 6]>::at(s.slot(0));
    let mut w = map.write_handle(s.writer(0)).unwrap();
    let keys = one_bucket_keys(3);
    for &k in &keys {
        w.insert(k, [k; 6]).unwrap();
    }
    s.quiesce_all().unwrap();
    let r = map.read_handle(&s.nodes[1]).unwrap();
    let m = r.enter();
    let loads: Vec<u64> = keys
        .iter()
        .map(|k| {
            assert_eq!(m.get(k).unwrap(), Some([*k; 6])); // cached now
            let before = s.emu.stats(1).loads;
            assert_eq!(m.get(k).unwrap(), Some([*k; 6]));
            s.emu.stats(1).loads - before
        })
        .collect();
    assert!(
        loads.iter().all(|&l| l == loads[0]),
        "loads per key {loads:?}"
    );
}
