//! Single-producer single-consumer channels over non-coherent shared memory.
//!
//! A structure with one writer needs a way for every other node to hand that writer its
//! updates, and a message-passing baseline needs a way to ship values between nodes at
//! all. Both are a ring of entries in shared memory with a producer on one node and a
//! consumer on another, which is simple on coherent memory and subtly different here.
//!
//! # Why it is built this way
//!
//! **Head and tail live on separate lines.** Caches move whole lines. If the head (written
//! by the consumer) and the tail (written by the producer) shared a line, each node would
//! hold a dirty copy of it, and whichever wrote its copy back second would overwrite the
//! other's counter with the stale value its copy still held: a lost update, exactly the
//! hazard the emulator counts as `lost_writes`. With one line per writer, every line of the
//! channel has exactly one node that ever stores to it (the entries belong to the
//! producer), so no write-back can clobber anyone.
//!
//! **The consumer invalidates the tail before it polls.** Nothing pushes a new tail into
//! the consumer's cache. A consumer that loads the tail from a cached line sees the same
//! value forever (a spinning loop keeps the line hot, so not even eviction rescues it);
//! every poll that could come back empty therefore drops the tail line, fences and reloads
//! it from memory. The same goes for the entries: their slots are reused, so the
//! consumer's cache may hold a slot's previous message (or a neighbour line brought in by
//! a prefetch before the producer wrote it), and it invalidates exactly the entries it is
//! about to read, after it has seen a tail that covers them. The producer does the same
//! for the head, but only when its cached head says the ring is full: a stale head only
//! underestimates the free space, which is safe.
//!
//! **One fence per batch.** Write-backs and invalidations only *start* an operation; the
//! fence is what waits for them. The producer must not publish a tail before the entries it
//! covers have reached memory (otherwise the consumer can read a slot's old bytes: a torn
//! or stale message), so it writes back all entries of a batch, fences once, and only then
//! stores and writes back the tail, with a second fence so the tail is visible promptly.
//! Fencing after each entry would cost a full round trip to memory per message for no
//! additional guarantee. The consumer likewise invalidates the whole range it reads, fences
//! once, reads, and publishes its new head once per poll.
//!
//! # How
//!
//! - A [`ChannelLayout`] places the channel at a line-aligned offset: the head line, the
//!   tail line, then `capacity` slots (a power of two) of `size_of::<T>()` bytes; entries
//!   may span lines. [`ChannelLayout::init`] makes the memory an empty channel.
//! - Head and tail are `u64` message counters that only grow (they never wrap in
//!   practice); message `i` lives in slot `i % capacity`. Every counter read from memory is
//!   checked against what this endpoint knows, and an impossible value (the tail behind
//!   the head, more than `capacity` outstanding, a counter going backwards) is a
//!   [`ChannelError::Corrupt`], never an out-of-range access or a panic.
//! - A [`Sender`] and a [`Receiver`] each hold one node's [`MemView`] and their private
//!   copies of both counters. A consumer of many channels at once (a delegated
//!   structure's writer) takes the [`Consumer`]'s steps for each under shared fences. Neither is `Clone`: one producer and one consumer per
//!   channel is what makes the single-writer-per-line argument hold (a second endpoint
//!   attached to the same layout elsewhere breaks it; it shows up as corruption only if a
//!   counter is seen going backwards).
//!
//! ```
//! use bi_core::channel::{ChannelLayout, Receiver, Sender};
//! use bi_core::mem::{Emulator, EmulatorConfig};
//!
//! let emu = Emulator::new(EmulatorConfig::new(4096, 2).seed(1).eviction_rate(0.05));
//! let layout = ChannelLayout::<u64>::new(0, 8, emu.line_size())?;
//! layout.init(&emu.node(0))?;
//! let mut tx = Sender::new(emu.node(0), layout)?;
//! let mut rx = Receiver::new(emu.node(1), layout)?;
//!
//! assert_eq!(tx.send_batch(&[1, 2, 3])?, 3);
//! assert!(tx.try_send(&4)?);
//! let mut got = Vec::new();
//! assert_eq!(rx.recv_batch(&mut got, 3)?, 3);
//! assert_eq!(rx.try_recv()?, Some(4));
//! assert_eq!(rx.try_recv()?, None);
//! assert_eq!(got, [1, 2, 3]);
//! assert_eq!(emu.total_stats().lost_writes, 0);
//! # Ok::<(), bi_core::channel::ChannelError>(())
//! ```

mod consumer;
mod error;
mod layout;
mod receiver;
mod sender;

pub use consumer::Consumer;
pub use error::{ChannelError, Corruption};
pub use layout::ChannelLayout;
pub use receiver::Receiver;
pub use sender::Sender;

use crate::mem::MemView;

/// Reads both counters from memory (dropping any cached copy first) and checks that they
/// describe a possible ring.
fn attach<V: MemView, T: bytemuck::Pod>(
    view: &V,
    layout: &ChannelLayout<T>,
) -> Result<(u64, u64), ChannelError> {
    layout.check(view)?;
    view.invalidate(layout.head_offset(), 2 * layout.line_size().get())?;
    view.fence();
    let head = view.load::<u64>(layout.head_offset())?;
    let tail = view.load::<u64>(layout.tail_offset())?;
    check_outstanding(head, tail, layout.capacity())?;
    Ok((head, tail))
}

/// `tail - head`, if it is a possible number of outstanding messages.
fn check_outstanding(head: u64, tail: u64, capacity: usize) -> Result<usize, ChannelError> {
    let corrupt = |reason| ChannelError::Corrupt { reason, head, tail };
    let n = tail
        .checked_sub(head)
        .ok_or_else(|| corrupt(Corruption::TailBehindHead))?;
    if n > capacity as u64 {
        return Err(corrupt(Corruption::Overfull));
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::line::LineSize;
    use crate::mem::{Emulator, EmulatorConfig};

    fn rig(capacity: usize) -> (Emulator, ChannelLayout<u32>) {
        let emu = Emulator::new(EmulatorConfig::new(1024, 2));
        let layout = ChannelLayout::new(64, capacity, LineSize::X86).unwrap();
        layout.init(&emu.node(0)).unwrap();
        (emu, layout)
    }

    #[test]
    fn endpoints_are_send_and_not_clone() {
        fn send<T: Send>() {}
        send::<Sender<crate::mem::EmulatedNode, u64>>();
        send::<Receiver<crate::mem::EmulatedNode, u64>>();
    }

    #[test]
    fn fills_drains_and_wraps() {
        let (emu, layout) = rig(4);
        let mut tx = Sender::new(emu.node(0), layout).unwrap();
        let mut rx = Receiver::new(emu.node(1), layout).unwrap();
        let mut out = Vec::new();
        let mut next = 0u32;
        for round in 0..5 {
            // Partial batches first, then fill to the brim.
            assert_eq!(tx.send_batch(&[next, next + 1]).unwrap(), 2);
            assert_eq!(tx.send_batch(&[next + 2, next + 3, next + 4]).unwrap(), 2);
            assert!(!tx.try_send(&99).unwrap(), "round {round}: full");
            assert_eq!(tx.free(), 0);
            assert_eq!(rx.recv_batch(&mut out, 3).unwrap(), 3);
            assert_eq!(rx.try_recv().unwrap(), Some(next + 3));
            assert_eq!(rx.try_recv().unwrap(), None);
            assert_eq!(rx.recv_batch(&mut out, 0).unwrap(), 0);
            next += 4;
        }
        assert_eq!(out.len(), 15);
        assert_eq!((tx.sent(), rx.received()), (20, 20));
        let s = emu.total_stats();
        assert_eq!((s.lost_writes, s.reuse_hazards), (0, 0));
    }

    #[test]
    fn batch_fences_once_for_all_entries() {
        let (emu, layout) = rig(16);
        let mut tx = Sender::new(emu.node(0), layout).unwrap();
        let mut rx = Receiver::new(emu.node(1), layout).unwrap();
        let before = emu.node(0).stats().fences;
        assert_eq!(tx.send_batch(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap(), 8);
        // Entries, one fence; tail, one fence.
        assert_eq!(emu.node(0).stats().fences - before, 2);
        // Tail poll, entries, head: one fence each.
        let before = emu.node(1).stats().fences;
        let mut out = Vec::new();
        assert_eq!(rx.recv_batch(&mut out, 8).unwrap(), 8);
        assert_eq!(emu.node(1).stats().fences - before, 3);
    }

    #[test]
    fn attach_rejects_impossible_counters() {
        let (emu, layout) = rig(4);
        let a = emu.node(0);
        let corrupt = |head: u64, tail: u64| {
            a.store(layout.head_offset(), &head).unwrap();
            a.store(layout.tail_offset(), &tail).unwrap();
            a.writeback(layout.offset(), 128).unwrap();
            a.fence();
            (
                Sender::new(emu.node(0), layout).map(|_| ()),
                Receiver::new(emu.node(1), layout).map(|_| ()),
            )
        };
        let (s, r) = corrupt(5, 3);
        let behind = ChannelError::Corrupt {
            reason: Corruption::TailBehindHead,
            head: 5,
            tail: 3,
        };
        assert_eq!((s, r), (Err(behind), Err(behind)));
        let (s, _) = corrupt(0, 5);
        assert!(matches!(
            s,
            Err(ChannelError::Corrupt {
                reason: Corruption::Overfull,
                ..
            })
        ));
        assert_eq!(corrupt(7, 11), (Ok(()), Ok(())));
    }

    #[test]
    fn counters_at_the_top_of_u64_overflow_into_an_error() {
        let (emu, layout) = rig(4);
        let a = emu.node(0);
        let top = u64::MAX - 1;
        a.store(layout.head_offset(), &top).unwrap();
        a.store(layout.tail_offset(), &top).unwrap();
        a.writeback(layout.offset(), 128).unwrap();
        a.fence();
        let mut tx = Sender::new(emu.node(0), layout).unwrap();
        assert!(tx.try_send(&1).unwrap());
        assert_eq!(
            tx.send_batch(&[2, 3]),
            Err(ChannelError::Corrupt {
                reason: Corruption::Overflow,
                head: top,
                tail: u64::MAX,
            })
        );
        let mut rx = Receiver::new(emu.node(1), layout).unwrap();
        assert_eq!(rx.try_recv().unwrap(), Some(1));
        assert_eq!(rx.try_recv().unwrap(), None);
    }

    #[test]
    fn errors_display_and_chain() {
        use std::error::Error;
        let e = ChannelError::from(crate::mem::MemError::OutOfBounds {
            offset: 1,
            len: 2,
            size: 3,
        });
        assert!(e.source().is_some());
        assert!(e.to_string().starts_with("channel memory"));
        let c = ChannelError::Corrupt {
            reason: Corruption::WentBack,
            head: 1,
            tail: 2,
        };
        assert!(c.source().is_none());
        assert_eq!(
            c.to_string(),
            "corrupt channel (head 1, tail 2): a counter moved backwards"
        );
        for e in [
            ChannelError::Misaligned {
                offset: 1,
                line: 64,
            },
            ChannelError::LineSize {
                layout: 32,
                view: 64,
            },
            ChannelError::TooLarge {
                offset: 0,
                capacity: 1,
                entry_size: 1,
            },
        ] {
            assert!(!e.to_string().is_empty());
        }
        assert!(!Corruption::Overflow.to_string().is_empty());
    }
}
