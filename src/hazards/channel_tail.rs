//! A spinning reader that never invalidates: it polls a line another node updates, but its
//! cached copy keeps answering, so it waits forever.
//!
//! Node 0 sends sixteen messages over a channel, one per poll of node 1's consumer, which
//! polls a thousand times. A spinning loop keeps its line hot, so the schedule has no
//! random eviction that could rescue it. Broken ([`Fault::ChannelTail`]): the channel's
//! [`Receiver`] reads the tail from its cache, which holds the tail it read when it
//! attached. BI: it invalidates the tail line and fences before every poll that could
//! come back empty. Counted: messages sent but never received.

use super::{Hazard, adversarial};
use bi_core::channel::{ChannelLayout, Receiver, Sender};
use bi_core::mem::Emulator;
use bi_core::runtime::{Fault, RuntimeConfig};

pub(super) const HAZARD: Hazard = Hazard {
    name: "spinning_reader",
    fault: Fault::ChannelTail,
    counts: "messages never received by a polling consumer",
    run,
};

const MESSAGES: u64 = 16;

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let emu = Emulator::new(adversarial(4096, 2, seed).eviction_rate(0.0));
    let layout = ChannelLayout::<u64>::new(0, 32, emu.line_size()).expect("valid layout");
    layout.init(&emu.node(0)).expect("in bounds");
    let mut tx = Sender::new(emu.node(0), layout).expect("valid channel");
    let mut rx = Receiver::new(emu.node(1), layout)
        .expect("valid channel")
        .with_faults(config.faults());
    let mut received = 0;
    for poll in 0..1_000u64 {
        if poll < MESSAGES {
            tx.try_send(&poll).expect("room");
        }
        received += u64::from(rx.try_recv().expect("valid channel").is_some());
    }
    MESSAGES - received
}
