//! A line half-rewritten when its writer's host died: a writer rewrites a published line
//! in place (invalid stamp, new words, new stamp), and the hardware may write the line
//! back at any moment (an eviction). When the host dies after such a write-back, memory
//! holds the line with its stamp invalid and the cache that held the rest is gone, so
//! no read accepts the line again unless the successor can finish it from a journal
//! that reached memory before the line's first store.
//!
//! The schedule: node 0's process keeps a rewrite journal for a slot, publishes an
//! array of lines there and rewrites one of them in place; its host dies right before
//! its `n`th store, for every `n` over the workload, and just before, the line being
//! rewritten is written back. Node 1 passes while node 0's lease runs out; a new
//! process on node 0 finishes the line from the journal if it can, and node 1 reads
//! the array from memory. Broken ([`Fault::JournalWriteBack`]): the journal is only
//! stored, and dies with the host's cache. BI: the journal is written back and fenced
//! before the line's first store. Counted: lines node 1 cannot read after the
//! successor's takeover.

use super::Hazard;
use super::rewrite_journal::over_kill_points;
use bi_core::heap::BumpHeap;
use bi_core::mem::EmulatedNode;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{Fault, Fetch, RuntimeConfig, Via};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

pub(super) const HAZARD: Hazard = Hazard {
    name: "line_half_rewritten_when_its_host_died",
    fault: Fault::JournalWriteBack,
    counts: "lines unreadable after the successor took over",
    run,
};

const LEASE: u64 = 1_000_000;
const BEFORE: [u64; 4] = [1, 2, 3, 4];
const REWRITTEN: usize = 1;

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let config = config.node_lease(LEASE).reader_lease(LEASE);
    // Every store of the workload is a death point.
    over_kill_points(1, 1, |n| die_at(&config, seed, n))
}

/// One run whose host dies before store `n`: the lines node 1 cannot read afterwards,
/// and whether the workload ended before store `n`.
fn die_at(config: &RuntimeConfig, seed: u64, n: usize) -> (u64, bool) {
    let mut s = Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        |c| c.seed(seed),
        config.clone(),
    );
    let (line, slot) = (s.region.layout().line_size(), s.slot(0));
    let rewriting = Arc::new(AtomicUsize::new(0));
    let target = rewriting.clone();
    let evict = move |host: &EmulatedNode| {
        let at = target.load(Ordering::SeqCst);
        if at != 0 {
            let _ = host.evict(at);
        }
    };
    let (published, killed) = s.kill_host_at_store(0, n, config.clone(), evict, |s, node0| {
        let Ok(mut w) = node0.writer(BumpHeap::new(s.arena(0), line).expect("arena")) else {
            return None;
        };
        let mut published = None;
        let _ = w.keep_rewrite_journal(slot).and_then(|()| {
            let a = w.alloc_lines(&BEFORE)?;
            w.publish_lines(slot, a)?;
            published = Some(a);
            rewriting.store(a.offset() + REWRITTEN * line.get(), Ordering::SeqCst);
            w.rewrite_lines(&[(a, REWRITTEN, 10)])
        });
        std::mem::forget(w); // a dead process runs no destructor
        published
    });
    let Some(array) = published.flatten() else {
        return (0, !killed);
    };
    let heap = BumpHeap::new(s.arena(1), line).expect("arena");
    let mut successor = s.nodes[0].writer(heap).expect("writer");
    let _ = successor.finish_from_journal(slot);
    s.quiesce_all().expect("pass");
    let r = s.nodes[1].reader().expect("reader");
    let g = r.enter();
    let unreadable = (0..BEFORE.len())
        .filter(|&i| {
            let read = g
                .line(array, i)
                .and_then(|l| g.fetch_via(Via::Fresh, l, |v: &u64| *v));
            !matches!(read, Ok(Fetch::Value(_)))
        })
        .count();
    (unreadable as u64, !killed)
}
