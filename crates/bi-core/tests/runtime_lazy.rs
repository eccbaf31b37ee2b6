//! The lookup loop every structure runs (`runtime::lazy`), by what it is for: a hit is one
//! search through the node's cache with no cache operation; `bounded` trusts a cached
//! miss (at most one staleness bound old) where `lazy` and `fresh` find everything
//! published before the call; a link that stays stale is reported, not followed forever.

use bi_core::mem::EmulatedNode;
use bi_core::runtime::lazy::{FRESH_ATTEMPTS, STALE_PATIENCE};
use bi_core::runtime::object::Fetch;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, BiGuard, Link, Search, Via};

/// The simplest structure: one `u64` behind the root slot `slot`.
fn search(g: &BiGuard<'_, EmulatedNode>, slot: usize, entry: Via) -> Result<Search<u64>, BiError> {
    let link = Link::<u64>::from_raw(g.slot_word(slot, entry)?);
    Ok(match g.fetch(link)? {
        Fetch::Value(v) => Search::Found(*v),
        Fetch::Null => Search::Missing,
        Fetch::Stale => Search::Stale,
    })
}

#[test]
fn a_hit_is_one_search_through_the_cache_and_no_cache_operation() {
    let s = Setup::new(2, 5);
    let slot = s.slot(0);
    let mut w = s.writer(0);
    let b = w.alloc(5u64).unwrap();
    w.publish(slot, b).unwrap();
    s.quiesce_all().unwrap();
    let r = s.nodes[1].reader().unwrap();
    let g = r.enter();
    // The first read brings the lines into node 1's cache.
    assert_eq!(g.lazy(|e| search(&g, slot, e)).unwrap(), Some(5));
    let invalidated = s.emu.stats(1).lines_invalidated;
    let mut tries = Vec::new();
    let lazy = g.lazy(|e| {
        tries.push(e);
        search(&g, slot, e)
    });
    assert_eq!(lazy.unwrap(), Some(5));
    let bounded = g.bounded(|e| {
        tries.push(e);
        search(&g, slot, e)
    });
    assert_eq!(bounded.unwrap(), Some(5));
    assert_eq!(tries, [Via::Cached, Via::Cached], "a hit searches once");
    assert_eq!(
        s.emu.stats(1).lines_invalidated,
        invalidated,
        "a hit drops no line"
    );
}

#[test]
fn a_value_published_after_the_last_pass_is_found_by_lazy_and_fresh_and_later_by_bounded() {
    let s = Setup::new(2, 6);
    let slot = s.slot(0);
    let r = s.nodes[1].reader().unwrap();
    let g = r.enter();
    // Node 1 caches the empty slot.
    assert_eq!(g.bounded(|e| search(&g, slot, e)).unwrap(), None);
    let mut w = s.writer(0);
    let b = w.alloc_sealed(7u64).unwrap();
    w.publish_link(slot, b).unwrap();
    // Before node 1's pass: the cached miss stands for `bounded`, not for the others.
    assert_eq!(g.bounded(|e| search(&g, slot, e)).unwrap(), None);
    assert_eq!(g.fresh(|e| search(&g, slot, e)).unwrap(), Some(7));
    assert_eq!(g.lazy(|e| search(&g, slot, e)).unwrap(), Some(7));
    assert_eq!(g.slot_word(slot, Via::Fresh).unwrap(), b.raw());
    drop(g);
    s.quiesce_all().unwrap();
    let g = r.enter();
    assert_eq!(g.bounded(|e| search(&g, slot, e)).unwrap(), Some(7));
    assert_eq!(g.slot_word(slot, Via::Cached).unwrap(), b.raw());
}

#[test]
fn a_fresh_search_ends_at_a_fresh_miss() {
    let s = Setup::new(1, 7);
    let r = s.nodes[0].reader().unwrap();
    let g = r.enter();
    let mut tries = Vec::new();
    let found = g.lazy(|e| {
        tries.push(e);
        search(&g, s.slot(0), e)
    });
    assert_eq!(found.unwrap(), None);
    assert_eq!(tries, [Via::Cached, Via::Fresh]);
}

#[test]
fn a_link_that_stays_stale_is_reported_once_patience_runs_out() {
    let s = Setup::new(1, 8);
    let r = s.nodes[0].reader().unwrap();
    let g = r.enter();
    let mut fresh = 0;
    let start = std::time::Instant::now();
    let found = g.lazy(|e| {
        fresh += usize::from(e == Via::Fresh);
        Ok::<_, BiError>(Search::<u64>::Stale)
    });
    assert!(matches!(found, Err(BiError::StaleLink { .. })), "{found:?}");
    assert!(fresh > FRESH_ATTEMPTS, "{fresh} fresh attempts");
    assert!(
        start.elapsed() >= STALE_PATIENCE,
        "not before the patience ran out"
    );
}

#[test]
fn a_link_stale_for_a_while_is_followed_to_its_new_target() {
    let s = Setup::new(1, 9);
    let r = s.nodes[0].reader().unwrap();
    let g = r.enter();
    let mut tries = 0;
    let found = g.lazy(|_| {
        tries += 1;
        Ok::<_, BiError>(if tries < 3 * FRESH_ATTEMPTS {
            Search::Stale
        } else {
            Search::Found(tries)
        })
    });
    assert_eq!(found.unwrap(), Some(3 * FRESH_ATTEMPTS));
}

/// The guard's own fresh reads: `load_fresh` reads the slot from memory where `load`
/// trusts the node's cached copy until a pass, and `invalidate_path` drops what a
/// caller found stale, so that the next `load` reads it anew. A copy prints its value
/// and the link it came through.
#[test]
fn a_guard_reads_a_slot_fresh_when_asked_and_after_dropping_its_path() {
    let s = Setup::new(2, 0);
    let slot = s.slot(0);
    let r = s.nodes[1].reader().unwrap();
    let g = r.enter();
    assert!(g.load::<u64>(slot).unwrap().is_none()); // node 1 caches the empty slot
    let mut w = s.writer(0);
    let link = w.alloc_sealed(3u64).unwrap();
    w.publish_link(slot, link).unwrap();
    assert!(g.load::<u64>(slot).unwrap().is_none(), "stale until a pass");
    let fresh = g.load_fresh::<u64>(slot).unwrap().unwrap();
    assert_eq!((*fresh, fresh.link()), (3, link));
    let shown = format!("{fresh:?}");
    assert!(
        shown.contains("value: 3") && shown.contains("link"),
        "{shown}"
    );
    // Published again: the cached slot word is the old link until node 1 drops it.
    let newer = w.alloc_sealed(4u64).unwrap();
    w.publish_link(slot, newer).unwrap();
    assert_eq!(*g.load::<u64>(slot).unwrap().unwrap(), 3);
    g.invalidate_path(&[slot]).unwrap();
    assert_eq!(*g.load::<u64>(slot).unwrap().unwrap(), 4);
}
