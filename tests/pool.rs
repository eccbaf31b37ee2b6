//! The pool facade on real hardware (processes are played by pools of one process, each
//! a node): one-call setup, a second writer refused, a restarted writer adopting its map,
//! readers before any writer, bad files refused without being touched.

use bi::collections::CollectionError;
use bi::core::region::RegionError;
use bi::core::runtime::BiError;
use bi::{Pool, PoolConfig, PoolError};

fn small() -> PoolConfig {
    let mut c = PoolConfig::default();
    c.region = c.region.with_size(8 << 20).with_nodes(4);
    c
}

#[test]
#[cfg_attr(miri, ignore)] // maps files, runs a pass thread on real time
fn a_restarted_writer_adopts_its_map_and_a_second_writer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.bi");
    let reader_pool = Pool::open(&path, small()).unwrap();
    // A reader that starts before any writer sees an empty map.
    let reader = reader_pool.map_reader::<u64, u64>("m").unwrap();
    assert_eq!(reader.get(&1).unwrap(), None);

    let writer_pool = Pool::open(&path, small()).unwrap();
    let mut w = writer_pool.map_writer::<u64, u64>("m").unwrap();
    for k in 0..1000 {
        w.insert(k, k * 2).unwrap();
    }
    // A second writer (another node) is refused; nothing is wiped.
    let other = Pool::open(&path, small()).unwrap();
    assert!(matches!(
        other.map_writer::<u64, u64>("m"),
        Err(PoolError::Collection(CollectionError::Runtime(
            BiError::WriterAlive { .. }
        )))
    ));
    // Other types under the name are refused.
    assert!(other.map_reader::<u32, u64>("m").is_err());
    assert_eq!(reader.get(&999).unwrap(), Some(1998));

    // The writer process ends. Another node cannot adopt the map (its lines lie in the
    // arena of the writer's node): a typed error, and nothing changes.
    let writer_node = writer_pool.node();
    drop(w);
    drop(writer_pool);
    assert!(matches!(
        other.map_writer::<u64, u64>("m"),
        Err(PoolError::Collection(CollectionError::Runtime(
            BiError::BadConfig { .. }
        )))
    ));
    assert_eq!(reader.get(&999).unwrap(), Some(1998));
    // A new process for the writer's node becomes the writer and finds every key.
    let mut again = small();
    again.node = Some(writer_node);
    let restarted = Pool::open(&path, again).unwrap();
    let mut w = restarted.map_writer::<u64, u64>("m").unwrap();
    assert_eq!(w.len(), 1000);
    assert_eq!(w.get(&500), Some(1000));
    w.insert(1000, 1).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while reader.get(&1000).unwrap() != Some(1) {
        assert!(
            std::time::Instant::now() < deadline,
            "the reader never saw the new key"
        );
        std::thread::yield_now();
    }
    // One writer handle per pool.
    assert!(matches!(
        restarted.tree_writer::<u64, u64>("t"),
        Err(PoolError::WriterTaken)
    ));
}

#[test]
#[cfg_attr(miri, ignore)]
fn nodes_are_claimed_once_and_bad_files_are_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.bi");
    let mut one = small();
    one.node = Some(2);
    let a = Pool::open(&path, one.clone()).unwrap();
    assert_eq!(a.node(), 2);
    assert!(matches!(
        Pool::open(&path, one),
        Err(PoolError::Runtime(BiError::NodeTaken { node: 2 }))
    ));
    let pools: Vec<_> = (0..3)
        .map(|_| Pool::open(&path, small()).unwrap())
        .collect();
    let mut nodes: Vec<_> = pools.iter().map(Pool::node).collect();
    nodes.sort();
    assert_eq!(nodes, [0, 1, 3]);
    assert!(matches!(
        Pool::open(&path, small()),
        Err(PoolError::NoFreeNode { nodes: 4 })
    ));

    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"not a region").unwrap();
    assert!(matches!(
        Pool::open(&junk, small()),
        Err(PoolError::Region(
            RegionError::Truncated { .. } | RegionError::BadMagic { .. }
        ))
    ));
    assert_eq!(std::fs::read(&junk).unwrap(), b"not a region");
}
