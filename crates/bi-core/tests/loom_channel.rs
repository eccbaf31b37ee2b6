//! The channel protocol under the loom model checker, over the emulator itself.
//!
//! Built only with `RUSTFLAGS="--cfg loom"`, where the emulator's locks and atomics (its
//! per-node cache locks, the oracle's stripes and metadata, the backing words and the
//! clock) are loom's, so loom explores the interleavings of the producer's and the
//! consumer's emulated memory operations. A small machine without random events keeps the
//! state space small; the non-coherence itself (stale cached lines, write-backs) is still
//! fully modelled, since it is the emulator's deterministic behaviour, not an event.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test -p bi-core --test loom_channel --release --target-dir target/loom
//! ```
#![cfg(loom)]

use bi_core::channel::{ChannelLayout, Receiver, Sender};
use bi_core::line::LineSize;
use bi_core::mem::{Emulator, EmulatorConfig};
use loom::thread;

const LINE: usize = 8;

/// Producer on node 0 and consumer on node 1, `messages` values through a ring of
/// `capacity` slots: every interleaving delivers all of them, in order, once.
fn model(capacity: usize, messages: u64) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(move || {
        // Head line, tail line, entry lines, spare lines.
        let line = LineSize::new(LINE).unwrap();
        let emu = Emulator::new(
            EmulatorConfig::new(8 * LINE, 2)
                .line_size(line)
                .cache_lines(4),
        );
        let layout = ChannelLayout::<u64>::new(0, capacity, emu.line_size()).unwrap();
        layout.init(&emu.node(0)).unwrap();
        let mut tx = Sender::new(emu.node(0), layout).unwrap();
        let mut rx = Receiver::new(emu.node(1), layout).unwrap();
        let values: Vec<u64> = (1..=messages).collect();
        let expect = values.clone();
        let producer = thread::spawn(move || {
            tx.send_all(&values, thread::yield_now).unwrap();
        });
        let mut got = Vec::new();
        while (got.len() as u64) < messages {
            if rx.recv_batch(&mut got, capacity).unwrap() == 0 {
                thread::yield_now();
            }
        }
        producer.join().unwrap();
        assert_eq!(got, expect);
        assert_eq!(rx.try_recv().unwrap(), None);
        let stats = emu.total_stats();
        assert_eq!((stats.lost_writes, stats.reuse_hazards), (0, 0));
    });
}

#[test]
fn two_messages_through_a_roomy_ring() {
    model(4, 2);
}

#[test]
fn three_messages_through_a_ring_of_two() {
    model(2, 3);
}

#[test]
fn two_messages_through_a_single_slot() {
    model(1, 2);
}
