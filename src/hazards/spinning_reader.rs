//! A spinning reader that never invalidates: it polls a line another node updates, but its
//! cached copy keeps answering, so it waits forever.
//!
//! Broken: a consumer that loads the channel's tail from its cache. BI: the channel's
//! [`Receiver`](bi_core::channel::Receiver), which invalidates the tail before it polls.
//! Counted: messages sent but never received within a bounded number of polls.

use super::{Hazard, Variant, adversarial};
use bi_core::channel::{ChannelLayout, Receiver, Sender};
use bi_core::mem::{Emulator, MemView};

pub(super) const HAZARD: Hazard = Hazard {
    name: "spinning_reader",
    counts: "messages never received by a polling consumer",
    run,
};

const MESSAGES: u64 = 16;

fn run(variant: Variant, seed: u64) -> u64 {
    // A spinning loop keeps its line hot: no random eviction rescues it.
    let emu = Emulator::new(adversarial(4096, 2, seed).eviction_rate(0.0));
    let layout = ChannelLayout::<u64>::new(0, 32, emu.line_size()).expect("valid layout");
    layout.init(&emu.node(0)).expect("in bounds");
    let mut tx = Sender::new(emu.node(0), layout).expect("valid channel");
    let consumer = emu.node(1);
    match variant {
        Variant::Broken => {
            let mut head = 0u64;
            let mut got = 0;
            for poll in 0..1_000u64 {
                if poll < MESSAGES {
                    tx.try_send(&poll).expect("room");
                }
                let tail: u64 = consumer.load(layout.tail_offset()).expect("in bounds");
                got += tail.saturating_sub(head);
                head = head.max(tail);
            }
            MESSAGES - got.min(MESSAGES)
        }
        Variant::Bi => {
            let mut rx = Receiver::new(consumer, layout).expect("valid channel");
            let mut got = 0;
            for poll in 0..1_000u64 {
                if poll < MESSAGES {
                    tx.try_send(&poll).expect("room");
                }
                got += u64::from(rx.try_recv().expect("valid channel").is_some());
            }
            MESSAGES - got
        }
    }
}
