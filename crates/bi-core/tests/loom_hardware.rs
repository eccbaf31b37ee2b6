//! The real reader/pass ordering under the loom model checker: the shipped runtime over
//! the hardware view, not the emulator.
//!
//! Over the emulator every memory operation of a node goes through the machine's lock,
//! so a reader's store of its state is ordered before a pass's load of it by that lock.
//! Over the hardware view nothing is: the reader stores its state word, fences, then
//! loads the slot; the pass fences, then loads every reader's state word, and the
//! writer frees a block only once every pass since its retirement found no reader
//! inside from before. Whether that is enough is a question about the memory model,
//! which loom answers: built with `--cfg loom`, region memory is loom's atomics, so loom
//! explores the interleavings *and* the values relaxed loads may return under the C11
//! model. (The pass's `membarrier`, which lets readers skip their fence, is a system
//! call loom cannot model; under loom the runtime runs the `Fence` ordering, which
//! readers also use wherever `membarrier` is refused.)
//!
//! One node, so the caches are coherent and only the ordering matters. A reader thread
//! reads the object a slot names and, later in the same section, looks at the first
//! word of that object's block; meanwhile the writer publishes a replacement, retires
//! the old object, passes and reclaims, and when the block comes free writes a new
//! object into it. The promise checked: the block of an object read in a section is not
//! reused before the section ends (its first line still carries the object's
//! generation). With the reader's record switched off (`Fault::ReaderRecord`) loom finds
//! the interleaving where the block is reused under the reader.
//!
//! With three preemptions the model is some 1,700 interleavings (half a second in release
//! mode).
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 \
//!     cargo test -p bi-core --test loom_hardware --release --target-dir target/loom -- --nocapture
//! ```
#![cfg(loom)]

use bi_core::heap::BumpHeap;
use bi_core::mem::MemView;
use bi_core::region::{Region, RegionConfig};
use bi_core::runtime::{Clock, Fault, NodeRuntime, ReaderOrdering, RuntimeConfig, Stamp};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};
use std::time::Instant;

/// A clock that moves one tick per reading: deterministic, so loom can replay a schedule.
///
/// It is a loom atomic read-modified with `SeqCst`: the protocol assumes what a clock of
/// the machine gives, that a reading taken after another (a larger tick) is taken after
/// the memory operations that preceded the other one and a fence. A clock loom could not
/// see would let loom show a reader a slot from before a write that happened, by the
/// clock, long before the reader entered: no hardware clock allows that.
struct Ticks(AtomicU64);

impl Clock for Ticks {
    fn now(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
}

type Value = [u64; 4];

fn model(config: RuntimeConfig) -> u64 {
    static ITERATIONS: StdAtomicU64 = StdAtomicU64::new(0);
    static REUSED: StdAtomicU64 = StdAtomicU64::new(0);
    ITERATIONS.store(0, StdOrdering::Relaxed);
    REUSED.store(0, StdOrdering::Relaxed);
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        // Three: with two, loom finds no interleaving of the negative control that fails.
        builder.preemption_bound = Some(3);
    }
    builder.max_branches = 1_000_000;
    let start = Instant::now();
    builder.check(move || {
        ITERATIONS.fetch_add(1, StdOrdering::Relaxed);
        let region = RegionConfig::new(0)
            .with_line_size(64)
            .with_nodes(1)
            .with_readers_per_node(1)
            .with_log_ring_entries(8)
            .with_root_entries(1);
        let size = region.min_size().expect("minimal region") + 4096;
        let region = Region::anonymous(region.with_size(size)).expect("region");
        let layout = *region.layout();
        let config = config
            .clone()
            .node_lease(1 << 40)
            .reader_lease(1 << 40)
            .reader_ordering(ReaderOrdering::Fence);
        let clock: std::sync::Arc<dyn Clock> = std::sync::Arc::new(Ticks(AtomicU64::new(0)));
        let rt = NodeRuntime::new(region.hardware(), layout, 0, config, clock).expect("runtime");
        let heap = BumpHeap::new(layout.heap().range(), layout.line_size()).expect("heap");
        let mut w = rt.writer(heap).expect("writer");
        let slot = layout.root_directory().offset;
        let first = w.alloc([1u64; 4]).expect("alloc");
        let old = first.link();
        w.publish(slot, first).expect("publish");
        rt.quiesce().expect("pass"); // the first pass, before the model proper
        let reader = rt.reader().expect("reader");

        let view = region.hardware();
        let reading = thread::spawn(move || {
            let g = reader.enter();
            let first = g.load::<Value>(slot).expect("read").expect("published");
            let v: Value = *first;
            assert!(v == [1; 4] || v == [2; 4], "a section read {v:?}");
            // The block of an object read in a section is not reused before the section
            // ends: its first line still carries the object's generation (marked FREED
            // once retired, which is why the runtime's own reads would refuse it now).
            let link = first.link();
            let stamp = Stamp::from_raw(view.load_u64(link.offset()).expect("in the heap"));
            assert_eq!(
                stamp.generation().link_bits(),
                link.generation(),
                "the block was reused under a section that read its object"
            );
        });

        let next = w.alloc([2u64; 4]).expect("alloc");
        w.publish(slot, next).expect("publish");
        w.retire(old).expect("retire");
        for _ in 0..3 {
            rt.quiesce().expect("pass");
            if w.reclaim().expect("reclaim").freed_blocks == 1 {
                REUSED.fetch_add(1, StdOrdering::Relaxed);
                let reuse = w.alloc([3u64; 4]).expect("alloc");
                assert_eq!(reuse.offset(), old.offset(), "the freed block is reused");
                w.discard(reuse).expect("discard");
                break;
            }
            thread::yield_now();
        }
        reading.join().expect("reader");
    });
    let (n, reused) = (
        ITERATIONS.load(StdOrdering::Relaxed),
        REUSED.load(StdOrdering::Relaxed),
    );
    eprintln!(
        "reader against pass over the hardware view: {n} interleavings ({reused} reusing the block) in {:.1?}",
        start.elapsed()
    );
    reused
}

#[test]
fn a_block_is_never_reused_under_a_reader() {
    let reused = model(RuntimeConfig::default());
    assert!(reused > 0, "no interleaving reached the reuse");
}

/// Negative control: a section that does not record itself is not waited for.
#[test]
#[should_panic(expected = "reused under a section")]
fn without_the_reader_record_a_block_is_reused_under_a_reader() {
    model(RuntimeConfig::default().fault(Fault::ReaderRecord));
}
