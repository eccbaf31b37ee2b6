//! The pool facade on real hardware (processes are played by pools of one process, each
//! a node): one-call setup, a second writer refused, a restarted writer adopting its map,
//! a writer on another node adopting it, structures written one after the other by one
//! node kept apart, one writer using most of the heap, readers before any writer, bad
//! files refused without being touched.

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
    let reader_pool = Pool::open_or_create(&path, small()).unwrap();
    // A reader that starts before any writer sees an empty map.
    let reader = reader_pool.map_reader::<u64, u64>("m").unwrap();
    assert_eq!(reader.get(&1).unwrap(), None);

    let writer_pool = Pool::open_or_create(&path, small()).unwrap();
    let mut w = writer_pool.map_writer::<u64, u64>("m").unwrap();
    for k in 0..1000 {
        w.insert(k, k * 2).unwrap();
    }
    // A second writer (another node) is refused; nothing is wiped.
    let other = Pool::open_or_create(&path, small()).unwrap();
    assert!(matches!(
        other
            .map_writer::<u64, u64>("m")
            .as_ref()
            .map(drop)
            .map_err(bi::Error::cause),
        Err(PoolError::Collection(CollectionError::Runtime(
            BiError::WriterAlive { .. }
        )))
    ));
    // Other types under the name are refused.
    assert!(other.map_reader::<u32, u64>("m").is_err());
    assert_eq!(reader.get(&999).unwrap(), Some(1998));

    // The writer process ends; another node becomes the writer and adopts the map: its
    // memory is the map's extents, not the old node's.
    let writer_node = writer_pool.node();
    drop(w);
    drop(writer_pool);
    let mut w = other.map_writer::<u64, u64>("m").unwrap();
    assert_eq!(w.len(), 1000);
    w.insert(1000, 1).unwrap();
    drop(w);
    drop(other);
    // A new process for the first writer's node takes the map back and finds every key.
    let mut again = small();
    again.node = Some(writer_node);
    let restarted = Pool::open_or_create(&path, again).unwrap();
    let mut w = restarted.map_writer::<u64, u64>("m").unwrap();
    assert_eq!(w.len(), 1001);
    assert_eq!(w.get(&500), Some(1000));
    w.insert(1001, 1).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while reader.get(&1001).unwrap() != Some(1) {
        assert!(
            std::time::Instant::now() < deadline,
            "the reader never saw the new key"
        );
        std::thread::yield_now();
    }
    assert_eq!(reader.get(&1000).unwrap(), Some(1));
    // One writer handle per pool.
    assert!(matches!(
        restarted
            .tree_writer::<u64, u64>("t")
            .as_ref()
            .map(drop)
            .map_err(bi::Error::cause),
        Err(PoolError::WriterTaken)
    ));
}

/// Waits until the background passes have run `n` more times on `pool`.
fn passes(pool: &Pool, n: u64) {
    let start = pool.passes().0;
    while pool.passes().0 < start + n {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn adopting_one_structure_leaves_the_others_of_its_node_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.bi");
    // One process writes a map, then a tree, then ends.
    let first = Pool::open_or_create(&path, small()).unwrap();
    let mut a = first.map_writer::<u64, u64>("a").unwrap();
    for k in 0..500 {
        a.insert(k, k).unwrap();
    }
    drop(a);
    let mut b = first.tree_writer::<u64, u64>("b").unwrap();
    for k in 0..500 {
        b.insert(k, k + 1).unwrap();
    }
    drop(b);
    let node = first.node();
    drop(first);
    // Its successor adopts the map and writes on, long enough for what the adoption
    // set aside to be reused: none of it is the tree's.
    let mut config = small();
    config.node = Some(node);
    let second = Pool::open_or_create(&path, config).unwrap();
    let mut a = second.map_writer::<u64, u64>("a").unwrap();
    for round in 0..20 {
        for k in 0..500 {
            a.insert(k, k + round).unwrap();
        }
        passes(&second, 2);
    }
    let reader = second.tree_reader::<u64, u64>("b").unwrap();
    for k in 0..500 {
        assert_eq!(reader.get(&k).unwrap(), Some(k + 1), "tree key {k}");
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn the_only_writer_can_use_most_of_the_heap() {
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::open_or_create(dir.path().join("p.bi"), small()).unwrap();
    let heap = pool.region().layout().heap().len;
    let mut w = pool.tree_writer::<u64, [u64; 8]>("big").unwrap();
    // Each key takes a 128-byte node (its 64-byte value and the node's links): half the
    // heap in all, far more than an even share of four nodes.
    let keys = heap / 2 / 128;
    for k in 0..keys as u64 {
        w.insert(k, [k; 8]).unwrap();
    }
    assert_eq!(w.len(), keys);
    let owned: usize = w.writer().heap().owned().iter().map(|r| r.len()).sum();
    assert!(owned > heap / 4, "owned {owned} of a heap of {heap}");
}

#[test]
#[cfg_attr(miri, ignore)]
fn nodes_are_claimed_once_and_bad_files_are_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.bi");
    let mut one = small();
    one.node = Some(2);
    let a = Pool::open_or_create(&path, one.clone()).unwrap();
    assert_eq!(a.node(), 2);
    assert!(matches!(
        Pool::open_or_create(&path, one)
            .as_ref()
            .map(drop)
            .map_err(bi::Error::cause),
        Err(PoolError::Runtime(BiError::NodeTaken { node: 2 }))
    ));
    let pools: Vec<_> = (0..3)
        .map(|_| Pool::open_or_create(&path, small()).unwrap())
        .collect();
    let mut nodes: Vec<_> = pools.iter().map(Pool::node).collect();
    nodes.sort();
    assert_eq!(nodes, [0, 1, 3]);
    assert!(matches!(
        Pool::open_or_create(&path, small())
            .as_ref()
            .map(drop)
            .map_err(bi::Error::cause),
        Err(PoolError::NoFreeNode { nodes: 4 })
    ));

    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"not a region").unwrap();
    assert!(matches!(
        Pool::open_or_create(&junk, small())
            .as_ref()
            .map(drop)
            .map_err(bi::Error::cause),
        Err(PoolError::Region(
            RegionError::Truncated { .. } | RegionError::BadMagic { .. }
        ))
    ));
    assert_eq!(std::fs::read(&junk).unwrap(), b"not a region");
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_second_process_of_a_host_joins_a_running_node_and_reads_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.bi");
    let writer_pool = Pool::open_or_create(&path, small()).unwrap();
    let mut w = writer_pool.map_writer::<u64, u64>("m").unwrap();
    w.insert(1, 10).unwrap();
    let runner = Pool::open_or_create(&path, small()).unwrap();
    let join = |node| {
        let mut c = small();
        c.join = Some(node);
        Pool::open_or_create(&path, c)
    };
    // A node nobody runs cannot be joined.
    assert!(matches!(
        join(3).as_ref().map(drop).map_err(bi::Error::cause),
        Err(PoolError::Runtime(BiError::NodeNotRunning { node: 3 }))
    ));
    let joined = join(runner.node()).unwrap();
    assert_eq!(joined.node(), runner.node());
    let reader = joined.map_reader::<u64, u64>("m").unwrap();
    assert_eq!(reader.get(&1).unwrap(), Some(10));
    w.insert(2, 20).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while reader.get(&2).unwrap() != Some(20) {
        assert!(
            std::time::Instant::now() < deadline,
            "the joined reader never saw key 2"
        );
        std::thread::yield_now();
    }
    // It reads only, and makes nothing.
    assert!(matches!(
        joined
            .map_writer::<u64, u64>("m")
            .as_ref()
            .map(drop)
            .map_err(bi::Error::cause),
        Err(PoolError::Runtime(BiError::NotRunner { .. }))
    ));
    assert!(matches!(
        joined
            .tree_reader::<u64, u64>("absent")
            .as_ref()
            .map(drop)
            .map_err(bi::Error::cause),
        Err(PoolError::Collection(CollectionError::NotFound { .. }))
    ));
    // Its end leaves the runner running its node.
    drop(reader);
    drop(joined);
    assert!(runner.runtime().holds_claim().unwrap());
}

#[test]
#[cfg_attr(miri, ignore)]
fn nodes_opening_one_name_at_once_find_one_structure() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.bi");
    Pool::open_or_create(&path, small()).unwrap(); // the file exists before the race
    for round in 0..10 {
        let name = format!("m{round}");
        let slots: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|_| {
                    let (path, name) = (&path, &name);
                    s.spawn(move || {
                        let pool = Pool::open_or_create(path, small()).unwrap();
                        let map = bi::collections::map::BiHashMap::<u64, u64>::named(
                            pool.region(),
                            pool.runtime(),
                            name,
                        )
                        .unwrap();
                        map.slot()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(slots.windows(2).all(|w| w[0] == w[1]), "{name}: {slots:?}");
    }
}

/// `Pool::open` refuses a path that holds no pool (a typo must not make an empty pool);
/// `Pool::open_or_create` from several openers at once makes one pool they all share.
#[test]
#[cfg_attr(miri, ignore)]
fn open_refuses_a_missing_pool_and_racing_creators_share_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool.bi");
    let err = Pool::open(&path, small()).unwrap_err();
    assert_eq!(err.kind(), bi::ErrorKind::NotFound, "{err}");
    let joined = PoolConfig {
        join: Some(0),
        ..small()
    };
    assert_eq!(
        Pool::open(&path, joined).unwrap_err().kind(),
        bi::ErrorKind::NotFound
    );
    assert!(!path.exists());
    let pools: Vec<Pool> = std::thread::scope(|t| {
        let openers: Vec<_> = (0..3)
            .map(|_| t.spawn(|| Pool::open_or_create(&path, small()).unwrap()))
            .collect();
        openers.into_iter().map(|o| o.join().unwrap()).collect()
    });
    let mut nodes: Vec<usize> = pools.iter().map(Pool::node).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, [0, 1, 2]);
    pools[0]
        .map::<u64, u64>("m")
        .unwrap()
        .insert(1, 10)
        .unwrap();
    let reader = pools[2].map::<u64, u64>("m").unwrap();
    assert_eq!(reader.get_fresh(&1).unwrap(), Some(10));
    // An existing pool opens with `open`.
    drop(pools);
    assert!(Pool::open(&path, small()).is_ok());
}

/// Processes that open one structure at the same moment each get a handle: one takes the
/// writer role, and the others wait for its delegation area (named a moment after the
/// role is taken) instead of failing with `NoWriter`; every one of them writes.
#[test]
#[cfg_attr(miri, ignore = "maps files and starts serving threads")]
fn racing_openers_of_one_structure_all_get_a_handle_that_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool.bi");
    for round in 0..25u64 {
        let name = format!("m{round}");
        let pools: Vec<Pool> = (0..3)
            .map(|_| Pool::open_or_create(&path, small()).unwrap())
            .collect();
        let barrier = std::sync::Barrier::new(pools.len());
        // Every handle lives until all have written (a writer that drops its handle
        // gives the role up, failing what was sent to it and not yet applied).
        let handles: Vec<_> = std::thread::scope(|t| {
            let openers: Vec<_> = pools
                .iter()
                .enumerate()
                .map(|(i, pool)| {
                    let (barrier, name) = (&barrier, &name);
                    t.spawn(move || {
                        barrier.wait();
                        let map = pool.map::<u64, u64>(name).unwrap();
                        map.insert(i as u64, round).unwrap();
                        map
                    })
                })
                .collect();
            openers.into_iter().map(|o| o.join().unwrap()).collect()
        });
        assert_eq!(handles.iter().filter(|m| m.is_writer()).count(), 1);
        let map = pools[0].map::<u64, u64>(&name).unwrap();
        for i in 0..3 {
            assert_eq!(
                map.get_fresh(&i).unwrap(),
                Some(round),
                "round {round}, opener {i}"
            );
        }
    }
}

/// A recorder that keeps the last value of every gauge, by name and labels.
#[derive(Default)]
struct Gauges(
    std::sync::Mutex<
        std::collections::BTreeMap<String, std::sync::Arc<std::sync::atomic::AtomicU64>>,
    >,
);

impl Gauges {
    fn value(&self, name: &str) -> Option<f64> {
        let all = self.0.lock().unwrap();
        let bits = all.get(name)?.load(std::sync::atomic::Ordering::Acquire);
        Some(f64::from_bits(bits))
    }
}

impl metrics::Recorder for Gauges {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::noop()
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        let mut all = self.0.lock().unwrap();
        metrics::Gauge::from_arc(all.entry(name).or_default().clone())
    }
}

#[test]
#[cfg_attr(miri, ignore)] // maps files, runs a pass thread on real time
fn a_pools_figures_are_published_as_gauges() {
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::open_or_create(dir.path().join("pool.bi"), small()).unwrap();
    let orders = pool.map::<u64, u64>("orders").unwrap();
    for k in 0..500 {
        orders.insert(k, k).unwrap();
    }
    for k in 0..100 {
        orders.remove(&k).unwrap();
    }
    passes(&pool, 2); // the writer's node publishes its figures
    let report = pool.stats().unwrap();
    let gauges = Gauges::default();
    metrics::with_local_recorder(&gauges, || report.publish());
    let node = pool.node();
    let s = report
        .structures
        .iter()
        .find(|s| s.name == "orders")
        .unwrap();
    assert_eq!(s.entries, 400);
    assert_eq!(
        gauges.value("bi_structure_entries{structure=orders}"),
        Some(400.0)
    );
    assert_eq!(
        gauges.value("bi_structure_heap_bytes{structure=orders}"),
        Some(s.heap_bytes as f64)
    );
    assert!(
        gauges
            .value("bi_structure_lease_age_ns{structure=orders}")
            .is_some()
    );
    let n = &report.nodes[node];
    let label = |name: &str| format!("{name}{{node={node}}}");
    assert_eq!(gauges.value(&label("bi_node_live")), Some(1.0));
    assert_eq!(
        gauges.value(&label("bi_node_passes")),
        Some(n.passes as f64)
    );
    assert_eq!(
        gauges.value(&label("bi_node_invalidated_lines")),
        Some(n.invalidated_lines as f64)
    );
    assert!(n.readers >= 1 && gauges.value(&label("bi_node_readers")) == Some(n.readers as f64));
    assert!(gauges.value(&label("bi_node_longest_pass_ns")).unwrap() >= n.last_pass_ns as f64);
}

/// Pools on an emulated machine with skewed node clocks (`BI_EMULATE`'s machine) run
/// each node on its own clock, offset from the others' as the machine says, and allow
/// for the skew: a write on one node reaches the other.
#[test]
#[cfg_attr(miri, ignore)] // maps files
fn emulated_nodes_keep_skewed_clocks_and_still_share_writes() {
    use bi::Emulation;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skewed.bi");
    let machine = Emulation { seed: 11 }.machine();
    let a = Pool::open_emulated(&path, small(), machine).unwrap();
    let b = Pool::open_emulated(&path, small(), machine).unwrap();
    let (skew_a, skew_b) = (
        a.runtime().view().clock_skew(),
        b.runtime().view().clock_skew(),
    );
    assert_ne!(
        skew_a, skew_b,
        "seed 11 gives the two nodes different offsets"
    );
    assert!(skew_a.unsigned_abs().max(skew_b.unsigned_abs()) <= Emulation::CLOCK_SKEW_NS);
    // b's clock read between two readings of a's is off a's by their offsets' difference.
    let (ca, cb) = (a.runtime().clock(), b.runtime().clock());
    let (t0, t1, t2) = (ca.refresh(), cb.refresh(), ca.refresh());
    let mid = (t0 as i128 + t2 as i128) / 2;
    let off = t1 as i128 - mid;
    let want = i128::from(skew_b) - i128::from(skew_a);
    assert!(
        (off - want).abs() <= (t2 - t0) as i128 / 2 + 1,
        "b is {off} ns off a, its offsets say {want}"
    );
    assert_eq!(a.runtime().config().skew_bound(), Emulation::skew_bound());
    let writes = a.map::<u64, u64>("m").unwrap();
    writes.insert(1, 10).unwrap();
    let reads = b.map_reader::<u64, u64>("m").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while reads.get(&1).unwrap() != Some(10) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(reads.get(&1).unwrap(), Some(10));
}
