//! The consuming end's counters and steps, with the fences left to the caller.
//!
//! A [`Receiver`](super::Receiver) polls one channel and fences for it alone. A consumer
//! of many channels (a delegated structure's writer serves every client's channel) polls
//! them all under one fence per step: it drops every tail line, fences once, reads every
//! tail; drops every range of entries it will read, fences once, reads them; publishes
//! every head it moved, fences once. [`Consumer`] is one channel's part of that: the
//! counters, their checks and the lines each step touches, written once for both.

use super::error::{ChannelError, Corruption};
use super::layout::ChannelLayout;
use crate::mem::{MemError, MemView};
use bytemuck::Pod;

/// One channel's consuming end without a view of its own: the head it published, the
/// tail it last read, and the steps of a poll. Each step says which fence must come
/// between it and the next.
///
/// ```
/// use bi_core::channel::{ChannelLayout, Consumer, Sender};
/// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
///
/// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
/// let layout = ChannelLayout::<u64>::new(0, 8, emu.line_size()).unwrap();
/// layout.init(&emu.node(0)).unwrap();
/// Sender::new(emu.node(0), layout).unwrap().send_batch(&[5, 6]).unwrap();
/// let v = emu.node(1);
/// let mut c = Consumer::new(layout, 0);
/// c.drop_tail(&v).unwrap();
/// v.fence();
/// assert_eq!(c.read_tail(&v).unwrap(), 2); // two more than known
/// c.drop_entries(&v, 2).unwrap();
/// v.fence();
/// let got: Vec<u64> = (0..2).map(|i| v.load(layout.slot_offset(c.head() + i)).unwrap()).collect();
/// c.publish_head(&v, 2).unwrap();
/// v.fence();
/// assert_eq!((got, c.head(), c.available()), (vec![5, 6], 2, 0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Consumer<T> {
    layout: ChannelLayout<T>,
    /// Messages consumed and published (the head in memory).
    head: u64,
    /// The producer's tail as last read from memory (never ahead of the real one).
    tail: u64,
}

impl<T> Consumer<T> {
    /// The channel's layout.
    pub fn layout(&self) -> &ChannelLayout<T> {
        &self.layout
    }

    /// Messages consumed and published so far (the head counter).
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The tail as last read.
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// Published messages this consumer knows of and has not consumed: a lower bound.
    pub fn available(&self) -> usize {
        // `tail - head <= capacity` is kept by every update of either field.
        (self.tail - self.head) as usize
    }

    /// Forgets what the tail promised: the next [`read_tail`](Self::read_tail) takes any
    /// tail from the head on (for a producer that starts again after sending something
    /// the consumer refused).
    pub fn forget_tail(&mut self) {
        self.tail = self.head;
    }
}

impl<T: Pod> Consumer<T> {
    /// The consumer of the channel at `layout` whose head in memory is `head`, knowing
    /// of nothing published past it yet.
    pub fn new(layout: ChannelLayout<T>, head: u64) -> Self {
        Consumer {
            layout,
            head,
            tail: head,
        }
    }

    /// The consumer whose counters [`attach`](super::attach) read from memory.
    pub(super) fn attached(layout: ChannelLayout<T>, head: u64, tail: u64) -> Self {
        Consumer { layout, head, tail }
    }

    /// Takeover, step 1: drops this node's copy of the head line, which a consumer before
    /// this one (now gone) may have moved. Fence before [`read_head`](Self::read_head).
    pub fn drop_head<V: MemView>(&self, view: &V) -> Result<(), MemError> {
        view.invalidate(self.layout.head_offset(), size_of::<u64>())
    }

    /// Takeover, step 2: goes on from the head the consumer before this one published,
    /// knowing of nothing past it yet.
    pub fn read_head<V: MemView>(&mut self, view: &V) -> Result<(), MemError> {
        self.head = view.load::<u64>(self.layout.head_offset())?;
        self.tail = self.head;
        Ok(())
    }

    /// Poll step 1: drops this node's copy of the tail line. Fence before
    /// [`read_tail`](Self::read_tail).
    pub fn drop_tail<V: MemView>(&self, view: &V) -> Result<(), MemError> {
        view.invalidate(self.layout.tail_offset(), size_of::<u64>())
    }

    /// Poll step 2: reads the tail and checks it against what this consumer knows: never
    /// behind the tail read before, never more than a capacity ahead of the head. Returns
    /// how many messages it published since the last read. On an error the tail known
    /// stays as it was.
    pub fn read_tail<V: MemView>(&mut self, view: &V) -> Result<u64, ChannelError> {
        let tail = view.load::<u64>(self.layout.tail_offset())?;
        if tail < self.tail {
            return Err(ChannelError::Corrupt {
                reason: Corruption::WentBack,
                head: self.head,
                tail,
            });
        }
        super::check_outstanding(self.head, tail, self.layout.capacity())?;
        let new = tail - self.tail;
        self.tail = tail;
        Ok(new)
    }

    /// Read step: drops this node's copies of the next `n` entries (at most
    /// [`available`](Self::available)): their slots may hold a previous lap's messages,
    /// or lines prefetched before the producer wrote them. Fence before loading them
    /// (message `i` at [`ChannelLayout::slot_offset`]).
    pub fn drop_entries<V: MemView>(&self, view: &V, n: usize) -> Result<(), MemError> {
        for (offset, len) in self.layout.entry_ranges(self.head, n.min(self.available())) {
            view.invalidate(offset, len)?;
        }
        Ok(())
    }

    /// Last step: moves the head past `n` more messages (at most
    /// [`available`](Self::available)), stores it and starts its write-back, freeing
    /// their slots for the producer. Fence to make it visible.
    pub fn publish_head<V: MemView>(&mut self, view: &V, n: usize) -> Result<(), MemError> {
        let head = self.head + n.min(self.available()) as u64;
        view.store(self.layout.head_offset(), &head)?;
        view.writeback(self.layout.head_offset(), size_of::<u64>())?;
        self.head = head;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::Sender;
    use crate::line::LineSize;
    use crate::mem::{Emulator, EmulatorConfig};

    fn rig() -> (Emulator, ChannelLayout<u32>) {
        let emu = Emulator::new(EmulatorConfig::new(1024, 3));
        let layout = ChannelLayout::new(64, 4, LineSize::X86).unwrap();
        layout.init(&emu.node(0)).unwrap();
        (emu, layout)
    }

    /// One poll with the steps in order: what the producer published, then consumed.
    fn poll(c: &mut Consumer<u32>, v: &impl MemView) -> Vec<u32> {
        c.drop_tail(v).unwrap();
        v.fence();
        c.read_tail(v).unwrap();
        let n = c.available();
        c.drop_entries(v, n).unwrap();
        v.fence();
        let got = (c.head()..c.head() + n as u64)
            .map(|i| v.load(c.layout().slot_offset(i)).unwrap())
            .collect();
        c.publish_head(v, n).unwrap();
        v.fence();
        got
    }

    /// A consumer that takes over from a gone one goes on from the head it published,
    /// though this node's cache still holds the head line from before.
    #[test]
    fn a_takeover_goes_on_from_the_head_the_gone_consumer_published() {
        let (emu, layout) = rig();
        let (first, next) = (emu.node(1), emu.node(2));
        let mut tx = Sender::new(emu.node(0), layout).unwrap();
        // The next consumer's node caches the head line while it is still 0.
        assert_eq!(next.load::<u64>(layout.head_offset()).unwrap(), 0);
        tx.send_batch(&[1, 2, 3]).unwrap();
        let mut gone = Consumer::new(layout, 0);
        assert_eq!(poll(&mut gone, &first), [1, 2, 3]);
        let mut taker = Consumer::new(layout, 0);
        taker.drop_head(&next).unwrap();
        next.fence();
        taker.read_head(&next).unwrap();
        assert_eq!((taker.head(), taker.tail(), taker.available()), (3, 3, 0));
        tx.send_batch(&[4]).unwrap();
        assert_eq!(poll(&mut taker, &next), [4]);
    }

    /// A consumer that forgets the tail it was promised accepts a producer starting
    /// again from the head; one that remembers it takes the lower tail for corruption.
    #[test]
    fn a_forgotten_tail_lets_the_producer_start_again_from_the_head() {
        let (emu, layout) = rig();
        let (p, v) = (emu.node(0), emu.node(1));
        let publish_tail = |tail: u64| {
            p.store(layout.tail_offset(), &tail).unwrap();
            p.writeback(layout.tail_offset(), 8).unwrap();
            p.fence();
        };
        let mut c = Consumer::new(layout, 0);
        publish_tail(3);
        c.drop_tail(&v).unwrap();
        v.fence();
        assert_eq!(c.read_tail(&v).unwrap(), 3);
        assert_eq!((c.tail(), c.available()), (3, 3));
        let mut remembers = c;
        c.forget_tail();
        assert_eq!((c.head(), c.tail(), c.available()), (0, 0, 0));
        publish_tail(1);
        c.drop_tail(&v).unwrap();
        remembers.drop_tail(&v).unwrap();
        v.fence();
        assert_eq!(c.read_tail(&v).unwrap(), 1);
        assert_eq!(
            remembers.read_tail(&v),
            Err(ChannelError::Corrupt {
                reason: Corruption::WentBack,
                head: 0,
                tail: 1
            })
        );
        assert_eq!(remembers.tail(), 3, "an error keeps the tail known");
    }
}
