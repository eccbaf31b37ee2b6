//! Write notices scoped per structure (`runtime::scope`): a node skips what was logged for
//! structures none of its readers declared, and acts on what was logged for the others.

use bi_core::heap::BumpHeap;
use bi_core::mem::{EmulatedNode, MemView};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{Policy, RuntimeConfig, Scope, Writer};

fn setup(runtime: RuntimeConfig) -> Setup {
    Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        |c| c.seed(3),
        runtime.node_lease(1_000_000).reader_lease(1_000_000),
    )
}

type NodeWriter = Writer<EmulatedNode, BumpHeap>;

/// Node 0's writer publishes `versions` values of one structure into `slot`, retiring
/// each old one, and node 0 runs its pass.
fn publish_versions(
    s: &Setup,
    w: &mut NodeWriter,
    slot: usize,
    scope: Scope,
    versions: std::ops::Range<u64>,
) {
    w.set_scope(scope).unwrap();
    for v in versions {
        let b = w.alloc(v).unwrap();
        let old = w.publish(slot, b).unwrap();
        if !old.is_null() {
            w.retire(old).unwrap();
        }
    }
    s.nodes[0].quiesce().unwrap();
}

/// Node 1 reads `slot` once (as a reader that has not declared anything would), so its
/// cache holds the slot's line and the object it names.
fn read(s: &Setup, slot: usize) -> u64 {
    let r = s.nodes[1].reader().unwrap();
    let g = r.enter();
    g.load::<u64>(slot).unwrap().map_or(0, |v| *v)
}

#[test]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own: the emulator paths it runs are the other runtime tests'"
)]
fn undeclared_structures_cost_a_node_no_invalidation() {
    let s = setup(RuntimeConfig::default());
    let mut w = s.writer(0);
    let (slot, scope) = (s.slot(0), Scope::of_slot(s.slot(0)));
    publish_versions(&s, &mut w, slot, scope, 1..11);
    let pass = s.nodes[1].quiesce().unwrap();
    // Ten slot stores (each with its object) and nine retirements, all skipped.
    assert_eq!(pass.modified + pass.freed, pass.skipped);
    assert!(pass.skipped >= 19, "{pass:?}");
    // Node 0 wrote them: its own pass never invalidates them either.
    assert_eq!(s.nodes[0].quiesce().unwrap().skipped, 0);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own: the emulator paths it runs are the other runtime tests'"
)]
fn declared_and_unscoped_notices_are_invalidated() {
    let s = setup(RuntimeConfig::default());
    let mut w = s.writer(0);
    let (slot, scope) = (s.slot(0), Scope::of_slot(s.slot(0)));
    assert!(s.nodes[1].use_scope(scope).unwrap());
    publish_versions(&s, &mut w, slot, scope, 1..5);
    let pass = s.nodes[1].quiesce().unwrap();
    assert_eq!((pass.skipped, pass.modified > 0), (0, true));
    assert_eq!(read(&s, slot), 4);
    // A writer that never set a scope logs under `Scope::ALL`: invalidated everywhere.
    publish_versions(&s, &mut w, s.slot(1), Scope::ALL, 1..3);
    assert_eq!(s.nodes[1].quiesce().unwrap().skipped, 0);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own: the emulator paths it runs are the other runtime tests'"
)]
fn the_modified_policy_ignores_scopes() {
    let s = setup(RuntimeConfig::default());
    let mut w = s.writer(0);
    s.nodes[1].set_policy(Policy::Modified);
    publish_versions(&s, &mut w, s.slot(0), Scope::of_slot(s.slot(0)), 1..5);
    let pass = s.nodes[1].quiesce().unwrap();
    assert_eq!(pass.skipped, 0);
    assert!(pass.modified > 0 && pass.freed > 0);
}

/// A first declaration drops the root slots a node cached while it skipped their
/// notices, not only the heap: a slot read stale names an older object, and when the
/// writer keeps that object live (a snapshot it still serves, a subtree the new version
/// shares) nothing in the object tells the reader it is not the newest.
#[test]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own: the emulator paths it runs are the other runtime tests'"
)]
fn a_first_declaration_drops_root_slots_cached_while_skipping() {
    let s = setup(RuntimeConfig::default());
    let mut w = s.writer(0);
    let (slot, scope) = (s.slot(0), Scope::of_slot(s.slot(0)));
    w.set_scope(scope).unwrap();
    let first = w.alloc(1u64).unwrap();
    w.publish(slot, first).unwrap();
    s.nodes[0].quiesce().unwrap();
    // A node's first pass drops its whole cache, and again once its readers then inside
    // left: both before node 1 caches the slot.
    for _ in 0..2 {
        s.nodes[1].quiesce().unwrap();
    }
    assert_eq!(read(&s, slot), 1);
    // Newer versions; every older one stays live (never retired).
    for v in 2..6u64 {
        let b = w.alloc(v).unwrap();
        w.publish(slot, b).unwrap();
    }
    s.nodes[0].quiesce().unwrap();
    let pass = s.nodes[1].quiesce().unwrap();
    assert!(pass.skipped > 0, "node 1 skipped the notices: {pass:?}");
    assert!(s.nodes[1].use_scope(scope).unwrap());
    assert_eq!(read(&s, slot), 5, "the slot as node 1 cached it before");
}

/// With `extents_only` (how a pool runs), a whole-heap invalidation (here: a node's
/// first declaration of a structure) drops the root directory and every line of the
/// extents the table marks granted (two adjacent ones and a third apart), reading the
/// table from memory (a copy the node cached before the grants does not hide them), and
/// leaves the lines of never-granted extents alone, also one between granted ones;
/// without it, every line of the heap goes. A pass's report counts those lines.
#[test]
fn a_whole_heap_invalidation_covers_the_granted_extents_only() {
    for extents_only in [false, true] {
        let s = Setup::with(
            RegionConfig::new(4 << 20).with_nodes(2),
            |c| c.seed(3),
            RuntimeConfig::default().extents_only(extents_only),
        );
        let layout = *s.region.layout();
        assert!(layout.extents() >= 6, "{} extents", layout.extents());
        let (n0, n1) = (s.emu.node(0), s.emu.node(1));
        let line = layout.line_size().get();
        let owner_word = |i: usize| layout.extent_table().offset + 8 * i;
        // Node 1 caches the table while every extent is free, then node 0 grants three.
        assert_eq!(n1.load::<u64>(owner_word(1)).unwrap(), 0);
        let granted = [1, 2, 4];
        for i in granted {
            n0.store(owner_word(i), &1u64).unwrap();
            n0.writeback(owner_word(i), 8).unwrap();
        }
        n0.fence();
        // Node 1 caches the first and the last line of extents 1 to 5.
        let ends = |i: usize| {
            let e = layout.extent(i).unwrap();
            [e.offset, e.offset + e.len - line]
        };
        for i in 1..=5 {
            for at in ends(i) {
                n1.load::<u64>(at).unwrap();
            }
        }
        let dir = layout.root_directory().offset;
        n1.load::<u64>(dir).unwrap();
        let r = s.nodes[1].reader().unwrap();
        assert!(r.use_scope(Scope::of_slot(s.slot(0))).unwrap());
        assert!(!n1.is_cached(dir), "extents_only: {extents_only}");
        for i in 1..=5 {
            for at in ends(i) {
                let kept = extents_only && !granted.contains(&i);
                assert_eq!(
                    n1.is_cached(at),
                    kept,
                    "extent {i} at {at}, extents_only: {extents_only}"
                );
            }
        }
        // Node 1's first pass drops the same lines again, and counts them.
        let pass = s.nodes[1].quiesce().unwrap();
        assert!(pass.whole_heap);
        let heap_bytes: usize = if extents_only {
            granted.iter().map(|&i| layout.extent(i).unwrap().len).sum()
        } else {
            layout.heap().len
        };
        assert_eq!(
            pass.invalidated_lines * line,
            layout.root_directory().len + heap_bytes,
            "extents_only: {extents_only}"
        );
    }
}
