//! What a tree's read handle does beyond lookups: a refresh drops the node's copy of the
//! root, so a process reads its own write through another node's writer at once; a
//! string retired under a cached path sends a lookup back to memory; a scan shows where
//! it stands.

use bi_collections::CollectionError;
use bi_collections::tree::BiTree;
use bi_core::runtime::testing::Setup;
use refresh_rounds::write_then_refresh;

mod refresh_rounds;

/// Node 1 never passes: after each write by node 0's writer, a refresh on node 1 (one
/// fence) makes its next lookup read the new version, for new values and removals,
/// which a lookup through the cached root would not see (a hit is not checked again).
#[test]
fn a_refresh_reads_the_write_at_once_under_one_fence() {
    let s = Setup::new(2, 9);
    let tree = BiTree::<u64, u64>::at(s.slot(0));
    let mut w = tree.write_handle(s.writer(0)).unwrap();
    let r = tree.read_handle(&s.nodes[1]).unwrap();
    assert!(r.is_empty().unwrap() && r.enter().is_empty().unwrap());
    let keys: Vec<u64> = (0..40).collect();
    let get = |k| r.get(&k).unwrap();
    write_then_refresh(&s, &keys, &mut w, &r, get, |_| true);
}

/// A scan shows how deep its path stands: at the start, the path down to the smallest
/// key of the range; at the end, nothing.
#[test]
fn a_scan_shows_the_depth_of_its_path() {
    let s = Setup::new(2, 10);
    let tree = BiTree::<u64, u64>::at(s.slot(0));
    let mut w = tree.write_handle(s.writer(0)).unwrap();
    for k in 0..100 {
        w.insert(k, k).unwrap();
    }
    s.quiesce_all().unwrap();
    let r = tree.read_handle(&s.nodes[1]).unwrap();
    let v = r.enter();
    let mut scan = v.scan(..).unwrap();
    let shown = format!("{scan:?}");
    let depth: usize = shown
        .strip_prefix("Scan { depth: ")
        .and_then(|rest| rest.strip_suffix(", .. }"))
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| panic!("{shown}"));
    assert!((2..=14).contains(&depth), "{shown}"); // a balanced tree of 100 keys
    assert_eq!(scan.by_ref().count(), 100);
    assert_eq!(format!("{scan:?}"), "Scan { depth: 0, .. }");
}

/// A read that meets a real error reports it, rather than taking it for a stale link
/// and reading again: values written as bytes that are not UTF-8, read back as text, are
/// corrupt, to a lookup and to a whole-tree read, at once and every time.
#[test]
fn a_read_reports_what_is_corrupt_instead_of_reading_again() {
    let s = Setup::new(2, 11);
    let bytes = BiTree::<Vec<u8>, Vec<u8>>::at(s.slot(0));
    let mut w = bytes.write_handle(s.writer(0)).unwrap();
    w.insert(b"fine".to_vec(), b"one".to_vec()).unwrap();
    w.insert(b"bad".to_vec(), vec![0xff; 30]).unwrap();
    s.quiesce_all().unwrap();
    let text = BiTree::<String, String>::at(s.slot(0));
    let r = text.read_handle(&s.nodes[1]).unwrap();
    let v = r.enter();
    assert_eq!(v.get("fine").unwrap().as_deref(), Some("one"));
    assert!(v.is_empty().is_ok_and(|empty| !empty));
    for _ in 0..2 {
        let e = v.get("bad").unwrap_err();
        assert!(matches!(e, CollectionError::Corrupt { .. }), "{e:?}");
        let e = v.iter().unwrap_err();
        assert!(matches!(e, CollectionError::Corrupt { .. }), "{e:?}");
    }
}

/// A value's byte string retired under a reader that still caches the old path is read
/// again from the new version, not reported: node 1 caches the path to key 1 but not
/// its string (it looked up key 2, whose search only compares key 1); node 0 replaces
/// key 1's value and retires the old string (its FREED mark goes to memory). Node 1's
/// next lookup of key 1 follows the cached path to the old string, finds it freed, and
/// must search again from the root in memory, without passing.
#[test]
fn a_string_retired_under_the_cached_path_is_read_again_from_the_new_version() {
    let s = Setup::new(2, 12);
    let tree = BiTree::<u32, String>::at(s.slot(0));
    let mut w = tree.write_handle(s.writer(0)).unwrap();
    w.insert(1, "the old value of key one, kept out of line".into())
        .unwrap();
    w.insert(2, "two".into()).unwrap();
    s.quiesce_all().unwrap();
    let r = tree.read_handle(&s.nodes[1]).unwrap();
    let node1 = s.emu.node(1);
    let line = s.emu.line_size().get();
    for offset in (0..s.emu.size()).step_by(line) {
        node1.evict(offset).unwrap();
    }
    assert_eq!(r.enter().get(&2).unwrap().as_deref(), Some("two"));
    w.insert(1, "the new value of key one".into()).unwrap();
    w.reclaim().unwrap(); // retires the replaced nodes and the old string
    for _ in 0..2 {
        let v = r.enter();
        assert_eq!(
            v.get(&1).unwrap().as_deref(),
            Some("the new value of key one")
        );
        assert_eq!(
            r.get(&1).unwrap().as_deref(),
            Some("the new value of key one")
        );
    }
}
