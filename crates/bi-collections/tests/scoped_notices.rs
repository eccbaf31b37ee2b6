//! Write notices are scoped per structure: a node pays for the updates of the structures
//! its readers read, not for every structure of the pool, and a structure read only on
//! its writer's node costs no invalidation anywhere.

use bi_alloc::NodeHeap;
use bi_collections::map::BiHashMap;
use bi_collections::tree::BiTree;
use bi_core::region::RegionConfig;
use bi_core::runtime::RuntimeConfig;
use bi_core::runtime::testing::Setup;
use std::collections::BTreeMap;

#[test]
fn nodes_invalidate_only_the_structures_their_readers_read() {
    // Node 0 writes (and reads) a tree; node 1 writes a map; node 2 reads the map only.
    let s = Setup::with(
        RegionConfig::new(4 << 20).with_nodes(3),
        |c| c.seed(9),
        RuntimeConfig::default()
            .node_lease(1_000_000)
            .reader_lease(1_000_000),
    );
    let heap = |n: usize| NodeHeap::new(s.arena(n), s.region.layout().line_size()).unwrap();
    let tree = BiTree::<u64, u64>::at(s.slot(0));
    let map = BiHashMap::<u64, u64>::at(s.slot(8));
    let mut tw = tree
        .write_handle(s.nodes[0].writer(heap(0)).unwrap())
        .unwrap();
    let mut mw = map
        .write_handle(s.nodes[1].writer(heap(1)).unwrap())
        .unwrap();
    let tree_reader = tree.read_handle(&s.nodes[0]).unwrap();
    let map_reader = map.read_handle(&s.nodes[2]).unwrap();
    s.quiesce_all().unwrap();
    s.quiesce_all().unwrap();

    let mut model = BTreeMap::new();
    for k in 0..200u64 {
        tw.insert(k * 7 % 200, k).unwrap();
        model.insert(k * 7 % 200, k);
        if k % 3 == 0 {
            tw.remove(&(k / 2)).unwrap();
            model.remove(&(k / 2));
        }
    }
    tw.writer().flush_deferred().unwrap();
    // Nobody but the writer's own node reads the tree: the other nodes skip it all.
    for n in [1, 2] {
        let pass = s.nodes[n].quiesce().unwrap();
        assert!(pass.skipped > 200, "node {n}: {pass:?}");
        assert_eq!(pass.skipped, pass.modified + pass.freed, "node {n}");
    }
    assert_eq!(s.nodes[0].quiesce().unwrap().skipped, 0);

    for k in 0..100u64 {
        mw.insert(k, k + 1).unwrap();
    }
    // The map's readers are on node 2: it invalidates the map's notices; node 0 skips them.
    let pass = s.nodes[2].quiesce().unwrap();
    assert_eq!(pass.skipped, 0, "{pass:?}");
    assert!(pass.modified > 0);
    let pass = s.nodes[0].quiesce().unwrap();
    assert_eq!(pass.skipped, pass.modified + pass.freed);
    assert_eq!(map_reader.get(&42).unwrap(), Some(43));

    // A reader of the tree on node 2 declares it, dropping what node 2's passes skipped,
    // and reads exactly what the writer published.
    let late = tree.read_handle(&s.nodes[2]).unwrap();
    let seen: Vec<_> = (0..200).map(|k| late.get(&k).unwrap()).collect();
    let want: Vec<_> = (0..200).map(|k| model.get(&k).copied()).collect();
    assert_eq!(seen, want);
    assert_eq!(tree_reader.len().unwrap(), model.len());
    // From now on node 2 pays for the tree's updates too.
    tw.insert(1000, 1).unwrap();
    let pass = s.nodes[2].quiesce().unwrap();
    assert_eq!((pass.skipped, pass.modified > 0), (0, true));
}
