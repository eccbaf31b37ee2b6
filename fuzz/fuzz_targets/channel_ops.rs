//! Drives one single-producer single-consumer channel (`bi_core::channel`) on an emulated
//! two-node machine: the producer on node 0, the consumer on node 1, and a queue of what
//! was sent and not yet received as the model.
//!
//! The input chooses the emulator seed, the rates of evictions, adjacent and random
//! prefetch and late write-backs, the size of each node's cache, the line size, the
//! channel's capacity (1 to 32), its offset and the size of its messages (8, 20 or 72
//! bytes, so entries share lines, straddle them or span several), then up to a few
//! hundred steps: single sends, batches (empty, partial, more than the capacity), batches
//! whose tail is left unfenced, fences on the producer's node, single and batched receives
//! (up to more than the capacity, and zero), an endpoint dropped and attached again, and
//! evictions and prefetches of the channel's lines on either node at chosen moments.
//!
//! Rules: every message received is the oldest one sent and not yet received (nothing
//! lost, duplicated, reordered or torn); a send takes exactly as many messages as the ring
//! has room for (`Ok(false)` or a short count when full, never an error); a receive gets
//! at most what was sent, and at least what was published under a fence (capped by its
//! maximum); no call returns an error (`ChannelError::Corrupt` least of all) while the
//! producer is honest; after a last fence everything left is received in order; and no
//! write-back ever overwrote another node's bytes (the emulator's `lost_writes` is zero).
//! Any violation panics.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use bi_core::channel::{ChannelLayout, Receiver, Sender};
use bi_core::line::LineSize;
use bi_core::mem::{EmulatedNode, Emulator, EmulatorConfig, MemView};
use bi_fuzz::hardware::Events;
use bytemuck::Pod;
use libfuzzer_sys::fuzz_target;
use std::collections::VecDeque;
use std::fmt::Debug;

const MAX_STEPS: usize = 300;
const PRODUCER: usize = 0;
const CONSUMER: usize = 1;

#[derive(Debug)]
struct Input {
    events: Events,
    cache_lines: u8,
    line: u8,
    capacity: u8,
    offset_lines: u8,
    message: u8,
    steps: Vec<Step>,
}

/// The machine's and the channel's parameters, then steps until the data runs out.
impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Input {
            events: u.arbitrary()?,
            cache_lines: u.arbitrary()?,
            line: u.arbitrary()?,
            capacity: u.arbitrary()?,
            offset_lines: u.arbitrary()?,
            message: u.arbitrary()?,
            steps: bi_fuzz::steps(u, MAX_STEPS)?,
        })
    }
}

#[derive(Arbitrary, Debug)]
enum Step {
    Send,
    /// Sends this many messages (scaled to up to twice the capacity, plus one).
    SendBatch(u8),
    /// The same, leaving the tail's write-back to the producer's next fence.
    SendUnfenced(u8),
    FenceProducer,
    Recv,
    /// Receives at most this many (scaled like a batch; zero included).
    RecvBatch(u8),
    /// Drops the sender and attaches a new one on the same node.
    ReattachSender,
    /// Drops the receiver and attaches a new one on the same node.
    ReattachReceiver,
    /// The hardware evicts (writing back if dirty) one of the channel's lines on a node.
    Evict(bool, u8),
    /// The hardware prefetches one of the channel's lines (or the one after) on a node.
    Prefetch(bool, u8),
}

/// A message that carries its sequence number in every word, so a torn or stale entry
/// cannot pass for the right one.
trait Message: Pod + Eq + Debug {
    fn numbered(n: u64) -> Self;
}

impl Message for u64 {
    fn numbered(n: u64) -> Self {
        n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA5A5
    }
}

/// 20 bytes: entries straddle line boundaries.
impl Message for [u32; 5] {
    fn numbered(n: u64) -> Self {
        let n = n as u32;
        [n, !n, n ^ 0x5555_5555, n.rotate_left(7), n.wrapping_mul(3)]
    }
}

/// 72 bytes: every entry spans at least two lines.
impl Message for [u64; 9] {
    fn numbered(n: u64) -> Self {
        std::array::from_fn(|i| n ^ ((i as u64) << 56) ^ 0x0123_4567)
    }
}

/// What the model knows: messages sent and not yet received (by sequence number), and
/// how many of all sent are certainly visible to the consumer (published under a fence).
struct Model {
    queue: VecDeque<u64>,
    sent: u64,
    received: u64,
    fenced: u64,
}

impl Model {
    fn outstanding(&self) -> usize {
        (self.sent - self.received) as usize
    }
}

fn batch_len(n: u8, capacity: usize) -> usize {
    usize::from(n) % (2 * capacity + 2)
}

fn run<T: Message>(input: &Input) {
    let line = 32usize << (input.line % 3);
    let capacity = 1usize << (input.capacity % 6);
    let offset = usize::from(input.offset_lines % 4) * line;
    let layout = ChannelLayout::<T>::new(offset, capacity, LineSize::new(line).unwrap())
        .expect("channel layout");
    // One spare line after the channel, so adjacent prefetch can reach past its end.
    let size = layout.end() + line;
    let emu = Emulator::new(
        input.events.apply(
            EmulatorConfig::new(size, 2)
                .line_size(LineSize::new(line).unwrap())
                .cache_lines(1 + usize::from(input.cache_lines % 16)),
        ),
    );
    layout.init(&emu.node(PRODUCER)).expect("init");
    let attach_sender = || Sender::<EmulatedNode, T>::new(emu.node(PRODUCER), layout);
    let attach_receiver = || Receiver::<EmulatedNode, T>::new(emu.node(CONSUMER), layout);
    let mut tx = attach_sender().expect("sender");
    let mut rx = attach_receiver().expect("receiver");
    let mut m = Model {
        queue: VecDeque::new(),
        sent: 0,
        received: 0,
        fenced: 0,
    };
    let lines = layout.len() / line;

    // Sends `n` fresh messages; checks the count against the room the model says there is.
    let send = |tx: &mut Sender<EmulatedNode, T>, m: &mut Model, n: usize, fenced: bool| {
        let values: Vec<T> = (m.sent..m.sent + n as u64).map(T::numbered).collect();
        let got = match fenced {
            true => tx.send_batch(&values),
            false => tx.send_batch_unfenced(&values),
        }
        .unwrap_or_else(|e| panic!("send of {n}: {e}"));
        let room = capacity - m.outstanding();
        assert_eq!(got, n.min(room), "sent {got} of {n} with room for {room}");
        // A call that sent anything fenced before its tail store, and a call that found
        // the ring full fenced to reread the head: either way earlier tails are in memory.
        if n > 0 {
            m.fenced = m.sent;
        }
        m.queue.extend(m.sent..m.sent + got as u64);
        m.sent += got as u64;
        if fenced && got > 0 {
            m.fenced = m.sent;
        }
        assert_eq!(tx.sent(), m.sent);
        got
    };
    // Receives at most `max`; checks the count against what was sent and fenced, and
    // every message against the queue's front.
    let recv = |rx: &mut Receiver<EmulatedNode, T>, m: &mut Model, max: usize| {
        let mut out = Vec::new();
        let got = rx
            .recv_batch(&mut out, max)
            .unwrap_or_else(|e| panic!("receive of up to {max}: {e}"));
        assert_eq!(got, out.len());
        let most = max.min(m.outstanding());
        let least = max.min(m.fenced.saturating_sub(m.received) as usize);
        assert!(
            (least..=most).contains(&got),
            "received {got}, expected {least} to {most}"
        );
        for v in out {
            let n = m.queue.pop_front().expect("more received than sent");
            assert_eq!(v, T::numbered(n), "message {n}");
        }
        m.received += got as u64;
        assert_eq!(rx.received(), m.received);
        got
    };

    for step in input.steps.iter().take(MAX_STEPS) {
        match *step {
            Step::Send => {
                let full = m.outstanding() == capacity;
                let value = T::numbered(m.sent);
                let ok = tx
                    .try_send(&value)
                    .unwrap_or_else(|e| panic!("try_send: {e}"));
                assert_eq!(ok, !full, "try_send with {} of {capacity}", m.outstanding());
                m.fenced = m.sent;
                if ok {
                    m.queue.push_back(m.sent);
                    m.sent += 1;
                    m.fenced = m.sent;
                }
            }
            Step::SendBatch(n) => {
                send(&mut tx, &mut m, batch_len(n, capacity), true);
            }
            Step::SendUnfenced(n) => {
                send(&mut tx, &mut m, batch_len(n, capacity), false);
            }
            Step::FenceProducer => {
                emu.node(PRODUCER).fence();
                m.fenced = m.sent;
            }
            Step::Recv => {
                let most = m.outstanding().min(1);
                let least = usize::from(m.fenced > m.received);
                match rx.try_recv().unwrap_or_else(|e| panic!("try_recv: {e}")) {
                    Some(v) => {
                        assert_eq!(most, 1, "received from an empty channel");
                        let n = m.queue.pop_front().unwrap();
                        assert_eq!(v, T::numbered(n), "message {n}");
                        m.received += 1;
                    }
                    None => assert_eq!(least, 0, "a published message was not received"),
                }
            }
            Step::RecvBatch(n) => {
                recv(&mut rx, &mut m, batch_len(n, capacity));
            }
            Step::ReattachSender => {
                drop(tx);
                tx = attach_sender().unwrap_or_else(|e| panic!("sender reattach: {e}"));
                // Attaching invalidated and fenced: the old tail is in memory.
                m.fenced = m.sent;
                assert_eq!(tx.sent(), m.sent);
            }
            Step::ReattachReceiver => {
                drop(rx);
                rx = attach_receiver().unwrap_or_else(|e| panic!("receiver reattach: {e}"));
                assert_eq!(rx.received(), m.received);
            }
            Step::Evict(consumer, l) => {
                let node = emu.node(usize::from(consumer));
                node.evict(layout.offset() + usize::from(l) % lines * line)
                    .expect("evict");
            }
            Step::Prefetch(consumer, l) => {
                let node = emu.node(usize::from(consumer));
                node.prefetch(layout.offset() + usize::from(l) % (lines + 1) * line)
                    .expect("prefetch");
            }
        }
        assert_eq!(m.queue.len(), m.outstanding());
    }

    // Everything sent is received, in order, once the producer's node has fenced.
    emu.node(PRODUCER).fence();
    m.fenced = m.sent;
    let left = m.outstanding();
    assert_eq!(recv(&mut rx, &mut m, usize::MAX), left);
    assert!(m.queue.is_empty());
    assert_eq!(rx.try_recv().expect("last poll"), None);
    let stats = emu.total_stats();
    assert_eq!(
        stats.lost_writes, 0,
        "a write-back overwrote another node's bytes"
    );
}

fuzz_target!(|input: Input| {
    match input.message % 3 {
        0 => run::<u64>(&input),
        1 => run::<[u32; 5]>(&input),
        _ => run::<[u64; 9]>(&input),
    }
});
