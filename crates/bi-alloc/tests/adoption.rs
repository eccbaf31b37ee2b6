//! A writer adopting what an earlier writer of its arena left (`Writer::adopt` over a
//! `NodeHeap`): what it keeps, what it quarantines, and what the memory it quarantined
//! carries once it is handed out again.

use bi_alloc::NodeHeap;
use bi_core::mem::EmulatedNode;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{AdoptReport, BiError, Fetch, Link, Via, Writer};

/// A writer on node 0 over a fresh heap of node 0's arena.
fn writer(s: &Setup) -> Writer<EmulatedNode, NodeHeap> {
    let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
    s.nodes[0].writer(heap).unwrap()
}

/// The dead writer's three one-line objects, in address order: the first and last
/// published (live), the middle one never published (a one-line gap between them).
fn three_objects(s: &Setup) -> [Link<u64>; 3] {
    let mut w = writer(s);
    let mut links = [1u64, 2, 3].map(|v| w.alloc_sealed(v).unwrap());
    links.sort_by_key(|l| l.offset());
    w.publish_link(s.slot(0), links[0]).unwrap();
    w.publish_link(s.slot(1), links[2]).unwrap();
    let line = s.region.layout().line_size().get();
    assert!(
        links[1].offset() == links[0].offset() + line
            && links[2].offset() == links[1].offset() + line,
        "the heap placed three one-line objects apart: {links:?}"
    );
    links
}

/// A new writer adopts the dead writer's [`three_objects`], keeping the first and last.
fn adopt_three(s: &Setup) -> ([Link<u64>; 3], Writer<EmulatedNode, NodeHeap>, AdoptReport) {
    let objects = three_objects(s);
    let mut w = writer(s);
    let bytes = w.object_bytes(8).unwrap();
    let mut live = [(objects[0].offset(), bytes), (objects[2].offset(), bytes)];
    let report = w.adopt(&mut live, &[s.slot(0), s.slot(1)]).unwrap();
    (objects, w, report)
}

/// The report says what was kept and what was quarantined: every byte of the arena is
/// one or the other.
#[test]
fn an_adoption_reports_the_objects_it_kept_and_the_gaps_it_quarantined() {
    let s = Setup::new(2, 0);
    let ([first, _, last], w, report) = adopt_three(&s);
    let bytes = w.object_bytes(8).unwrap();
    let arena = s.arena(0);
    let gaps = [
        first.offset() > arena.start,
        true, // the unpublished object between the two
        last.offset() + bytes < arena.end,
    ];
    assert_eq!(report.live_blocks, 2);
    assert_eq!(
        report.quarantined_blocks,
        gaps.iter().filter(|&&g| g).count()
    );
    assert_eq!(report.quarantined_bytes, arena.len() - 2 * bytes);
}

/// A link to an object the dead writer left unpublished (a reader may have kept one, or
/// a node may cache the line) never matches what the adopter later puts in that memory:
/// a quarantined one-line block goes back to the heap with the generation its stamp
/// carries, so the next object there is stamped above it.
#[test]
fn a_link_into_a_quarantined_line_never_matches_what_is_put_there_later() {
    let s = Setup::new(2, 0);
    let ([_, stale, _], mut w, _) = adopt_three(&s);
    let bytes = w.object_bytes(8).unwrap();
    // The grace period of the quarantine: every node passes, then the blocks come back.
    s.quiesce_all().unwrap();
    s.quiesce_all().unwrap();
    w.reclaim().unwrap();
    let lines = s.arena(0).len() / bytes;
    let reused = (0..lines)
        .map(|i| w.alloc_sealed(100 + i as u64).unwrap())
        .find(|l| l.offset() == stale.offset())
        .expect("the quarantined line is handed out again");
    assert!(
        reused.generation().get() > stale.generation().get(),
        "reused at generation {} under a link of generation {}",
        reused.generation().get(),
        stale.generation().get()
    );
    // Published (so written back), and every node has passed since.
    w.publish_link(s.slot(2), reused).unwrap();
    s.quiesce_all().unwrap();
    let r = s.nodes[1].reader().unwrap();
    let g = r.enter();
    let got = g.follow(stale).map(|v| v.map(|v| *v));
    assert!(
        matches!(got, Err(BiError::StaleLink { .. })),
        "{got:?} at generation {} (reused {})",
        stale.generation().get(),
        reused.generation().get()
    );
    assert!(g.follow(reused).unwrap().is_some());
}

/// Hands out nothing: the adopter's heap owns exactly the extents it was given.
struct NoMore;

impl bi_alloc::Grow for NoMore {
    fn grow(&mut self, bytes: usize) -> Result<std::ops::Range<usize>, bi_core::heap::HeapError> {
        Err(bi_core::heap::HeapError::OutOfMemory {
            requested: bytes,
            free: 0,
        })
    }
}

/// After an adoption, every node's next passes drop every line the structure owns, in
/// each of its heap's extents (here two, with another owner's memory between them): a
/// line the dead writer wrote back and died before logging is then read from memory
/// everywhere, not from an old copy a node kept.
#[test]
fn an_adoption_drops_every_line_the_structure_owns_on_every_node() {
    use bi_core::mem::MemView;
    let s = Setup::new(2, 0);
    let line = s.region.layout().line_size().get();
    let arena = s.arena(0);
    let first = arena.start..arena.start + 16 * line;
    let second = arena.start + 32 * line..arena.start + 48 * line;
    // The last line of each extent: node 1 caches it, the dead writer's host then
    // writes it back with a new value and logs nothing.
    let (dead, other) = (s.emu.node(0), s.emu.node(1));
    // Past its first pass, which drops everything a node caches (twice: once more when
    // its readers have left), node 1 drops only what it is told to.
    for _ in 0..3 {
        s.quiesce_all().unwrap();
    }
    let lines = [first.end - line, second.end - line];
    for &at in &lines {
        assert_eq!(other.load_u64(at + 8).unwrap(), 0);
        dead.store_u64(at + 8, 42).unwrap();
        dead.writeback(at, line).unwrap();
    }
    dead.fence();
    assert_eq!(
        other.load_u64(lines[1] + 8).unwrap(),
        0,
        "node 1 caches the old line"
    );
    let heap = NodeHeap::growing(
        arena.clone(),
        s.region.layout().line_size(),
        &[first, second],
        Box::new(NoMore),
    )
    .unwrap();
    let mut w = s.nodes[0].writer(heap).unwrap();
    let report = w.adopt(&mut [], &[]).unwrap();
    assert_eq!(report.quarantined_bytes, 32 * line);
    s.quiesce_all().unwrap();
    s.quiesce_all().unwrap();
    for at in lines {
        assert_eq!(
            other.load_u64(at + 8).unwrap(),
            42,
            "line at {at} on node 1"
        );
    }
}

/// A writer that takes over a node whose modified ring its predecessor filled finds
/// every entry counted as just written: room comes back only once every live node has
/// passed, which a node stalled inside its lease puts off. The adoption waits for that
/// instead of failing on the configured (short) wait on a full log.
#[test]
fn an_adoption_waits_for_room_in_a_ring_its_predecessor_filled() {
    use bi_core::region::RegionConfig;
    use bi_core::runtime::RuntimeConfig;
    use std::time::{Duration, Instant};

    let s = Setup::with(
        RegionConfig::new(1 << 18)
            .with_nodes(2)
            .with_log_ring_entries(8),
        |c| c,
        RuntimeConfig::default(),
    );
    // The dead writer publishes until its modified ring is full (no node passes).
    let mut dead = writer(&s);
    let link = dead.alloc_sealed(1u64).unwrap();
    let mut full = false;
    for _ in 0..64 {
        match dead.publish_link(s.slot(0), link) {
            Ok(_) => {}
            Err(BiError::LogFull { .. }) => {
                full = true;
                break;
            }
            Err(e) => panic!("publishing: {e}"),
        }
    }
    assert!(full, "the ring never filled");
    drop(dead);
    let mut w = writer(&s);
    let bytes = w.object_bytes(8).unwrap();
    let mut live = [(link.offset(), bytes)];
    // The other node passes only after several times the wait on a full log.
    let started = Instant::now();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(400));
            s.emu.advance(1);
            s.quiesce_all().unwrap();
        });
        let report = w.adopt(&mut live, &[s.slot(0)]);
        assert!(report.is_ok(), "adoption failed: {:?}", report.err());
    });
    assert!(started.elapsed() >= Duration::from_millis(400));
}

/// A line array whose block is longer than its records (the heap's size classes round
/// five lines up to six) owns every line of the block: the length the writer reports
/// counts them, and a line past the records is rewritten and read by another node like
/// any other, because every line of the block carries the array's stamp.
#[test]
fn every_line_of_an_array_block_is_the_arrays() {
    let s = Setup::new(2, 68);
    let mut w = writer(&s);
    // The class block is used twice: its last line carries the first array's stamp
    // until the second array is allocated there.
    let first = w.alloc_lines(&[[3u64; 7]; 6]).unwrap();
    w.discard_lines(first).unwrap();
    let a = w.alloc_lines(&[[1u64; 7]; 5]).unwrap();
    let len = w.lines_len(a).unwrap();
    assert_eq!(len, 6, "five lines in a six-line class block");
    w.publish_lines(s.slot(0), a).unwrap();
    w.rewrite_lines(&[(a, len - 1, [5u64; 7])]).unwrap();
    s.quiesce_all().unwrap();
    let r = s.nodes[1].reader().unwrap();
    let g = r.enter();
    let last = g.line(a, len - 1).unwrap();
    assert_eq!(
        g.fetch_via(Via::Cached, last, |v| *v).unwrap(),
        Fetch::Value([5u64; 7])
    );
}
