//! The producer's end: writes entries, then publishes the tail.

use super::error::{ChannelError, Corruption};
use super::layout::ChannelLayout;
use crate::mem::MemView;
use bytemuck::Pod;
use std::fmt;

/// The producing end of a channel, on one node.
///
/// It owns the tail: it is the only code that stores to the tail line or to the entry
/// slots, and it keeps its own copy of the tail, so it never reads either back. It also
/// keeps a cached head, which can only lag behind the consumer's; it refreshes it from
/// memory (invalidate, fence, load) only when that cached head says there is not enough
/// room.
///
/// Not `Clone`: a channel has exactly one producer.
///
/// ```
/// use bi_core::channel::{ChannelLayout, Sender};
/// use bi_core::mem::{Emulator, EmulatorConfig};
///
/// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
/// let layout = ChannelLayout::<[u16; 3]>::new(0, 4, emu.line_size()).unwrap();
/// layout.init(&emu.node(0)).unwrap();
/// let mut tx = Sender::new(emu.node(0), layout).unwrap();
/// assert_eq!(tx.send_batch(&[[1, 2, 3]; 6]).unwrap(), 4); // only four fit
/// assert!(!tx.try_send(&[0; 3]).unwrap());
/// assert_eq!((tx.sent(), tx.free()), (4, 0));
/// ```
pub struct Sender<V, T> {
    view: V,
    layout: ChannelLayout<T>,
    /// Messages published so far (the tail in memory).
    tail: u64,
    /// The consumer's head as last read from memory (never ahead of the real one).
    head: u64,
}

impl<V, T> fmt::Debug for Sender<V, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("offset", &self.layout.offset())
            .field("capacity", &self.layout.capacity())
            .field("tail", &self.tail)
            .field("cached_head", &self.head)
            .finish_non_exhaustive()
    }
}

impl<V: MemView, T: Pod> Sender<V, T> {
    /// Attaches the producer to the channel at `layout` through `view`, reading both
    /// counters from memory.
    ///
    /// The channel must have been initialised ([`ChannelLayout::init`]); a layout that does
    /// not fit the view, or counters that no ring can have, are errors.
    ///
    /// ```
    /// use bi_core::channel::{ChannelError, ChannelLayout, Sender};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(256, 1));
    /// let layout = ChannelLayout::<u64>::new(0, 32, emu.line_size()).unwrap();
    /// let err = Sender::new(emu.node(0), layout).unwrap_err();
    /// assert!(matches!(err, ChannelError::Mem(_))); // 384 bytes do not fit in 256
    /// ```
    pub fn new(view: V, layout: ChannelLayout<T>) -> Result<Self, ChannelError> {
        let (head, tail) = super::attach(&view, &layout)?;
        Ok(Sender {
            view,
            layout,
            tail,
            head,
        })
    }

    /// Sends one message if there is room: `Ok(true)` if it was published, `Ok(false)` if
    /// the ring is full.
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Receiver, Sender};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let layout = ChannelLayout::<u8>::new(0, 1, emu.line_size()).unwrap();
    /// layout.init(&emu.node(0)).unwrap();
    /// let mut tx = Sender::new(emu.node(0), layout).unwrap();
    /// let mut rx = Receiver::new(emu.node(1), layout).unwrap();
    /// assert!(tx.try_send(&7).unwrap());
    /// assert!(!tx.try_send(&8).unwrap());
    /// assert_eq!(rx.try_recv().unwrap(), Some(7));
    /// assert!(tx.try_send(&8).unwrap()); // the consumer's head freed the slot
    /// ```
    pub fn try_send(&mut self, value: &T) -> Result<bool, ChannelError> {
        Ok(self.send_batch(std::slice::from_ref(value))? == 1)
    }

    /// Sends as many of `values`, in order, as there is room for, and returns how many.
    ///
    /// All entries are written back under one fence, then the tail is published once.
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Receiver, Sender};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let layout = ChannelLayout::<u32>::new(0, 4, emu.line_size()).unwrap();
    /// layout.init(&emu.node(0)).unwrap();
    /// let mut tx = Sender::new(emu.node(0), layout).unwrap();
    /// let mut rx = Receiver::new(emu.node(1), layout).unwrap();
    /// let values = [10, 11, 12, 13, 14, 15];
    /// let sent = tx.send_batch(&values).unwrap();
    /// assert_eq!(sent, 4);
    /// let mut got = Vec::new();
    /// rx.recv_batch(&mut got, usize::MAX).unwrap();
    /// assert_eq!(tx.send_batch(&values[sent..]).unwrap(), 2);
    /// rx.recv_batch(&mut got, usize::MAX).unwrap();
    /// assert_eq!(got, values);
    /// ```
    pub fn send_batch(&mut self, values: &[T]) -> Result<usize, ChannelError> {
        let n = self.send_batch_unfenced(values)?;
        if n > 0 {
            self.view.fence();
        }
        Ok(n)
    }

    /// [`send_batch`](Self::send_batch) without its last fence: the tail's write-back
    /// is started, and completes at this node's next fence. For a sender that fences
    /// right after anyway (one waiting for an answer invalidates and fences before
    /// reading it), which saves one fence per send; the entries are still fenced before
    /// the tail is stored, so a receiver never sees a tail ahead of its entries.
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Receiver, Sender};
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let layout = ChannelLayout::<u32>::new(0, 4, emu.line_size()).unwrap();
    /// layout.init(&emu.node(0)).unwrap();
    /// let mut tx = Sender::new(emu.node(0), layout).unwrap();
    /// let mut rx = Receiver::new(emu.node(1), layout).unwrap();
    /// assert_eq!(tx.send_batch_unfenced(&[7]).unwrap(), 1);
    /// emu.node(0).fence(); // the sender's next fence publishes the tail
    /// let mut got = Vec::new();
    /// rx.recv_batch(&mut got, 1).unwrap();
    /// assert_eq!(got, [7]);
    /// ```
    pub fn send_batch_unfenced(&mut self, values: &[T]) -> Result<usize, ChannelError> {
        if values.is_empty() {
            return Ok(0);
        }
        if self.free() < values.len() {
            self.refresh_head()?;
        }
        let n = self.free().min(values.len());
        if n == 0 {
            return Ok(0);
        }
        let new_tail = self
            .tail
            .checked_add(n as u64)
            .ok_or_else(|| ChannelError::Corrupt {
                reason: Corruption::Overflow,
                head: self.head,
                tail: self.tail,
            })?;
        let v = &self.view;
        // `tail + i < new_tail`, which did not overflow (an open range would step past it).
        for (i, value) in values[..n].iter().enumerate() {
            v.store(self.layout.slot_offset(self.tail + i as u64), value)?;
        }
        for (offset, len) in self.layout.entry_ranges(self.tail, n) {
            v.writeback(offset, len)?;
        }
        // The entries must be in memory before any tail that covers them is.
        v.fence();
        v.store(self.layout.tail_offset(), &new_tail)?;
        v.writeback(self.layout.tail_offset(), size_of::<u64>())?;
        self.tail = new_tail;
        Ok(n)
    }

    /// Sends all of `values`, in order, calling `wait` each time the ring is full before
    /// trying again (pass [`std::hint::spin_loop`], a yield, or a back-off).
    ///
    /// It returns only once everything is sent or on an error, so it spins forever if the
    /// consumer never drains the ring.
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Receiver, Sender};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    /// use std::thread;
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let layout = ChannelLayout::<u64>::new(0, 2, emu.line_size()).unwrap();
    /// layout.init(&emu.node(0)).unwrap();
    /// let mut tx = Sender::new(emu.node(0), layout).unwrap();
    /// let mut rx = Receiver::new(emu.node(1), layout).unwrap();
    /// let producer = thread::spawn(move || tx.send_all(&[1, 2, 3, 4, 5], thread::yield_now));
    /// let mut got = Vec::new();
    /// while got.len() < 5 {
    ///     rx.recv_batch(&mut got, 5).unwrap();
    /// }
    /// producer.join().unwrap().unwrap();
    /// assert_eq!(got, [1, 2, 3, 4, 5]);
    /// ```
    pub fn send_all(&mut self, values: &[T], mut wait: impl FnMut()) -> Result<(), ChannelError> {
        let mut sent = 0;
        while sent < values.len() {
            let n = self.send_batch(&values[sent..])?;
            if n == 0 {
                wait();
            }
            sent += n;
        }
        Ok(())
    }

    /// Free slots as far as this producer knows: a lower bound, since the consumer may
    /// have drained more since the head was last read.
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Receiver, Sender};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let layout = ChannelLayout::<u64>::new(0, 4, emu.line_size()).unwrap();
    /// layout.init(&emu.node(0)).unwrap();
    /// let mut tx = Sender::new(emu.node(0), layout).unwrap();
    /// let mut rx = Receiver::new(emu.node(1), layout).unwrap();
    /// tx.send_batch(&[1, 2, 3, 4]).unwrap();
    /// rx.try_recv().unwrap();
    /// assert_eq!(tx.free(), 0); // the producer has not reread the head
    /// assert!(tx.try_send(&5).unwrap()); // a full ring rereads it
    /// ```
    pub fn free(&self) -> usize {
        // `tail - head <= capacity` is kept by every update of either field.
        self.layout.capacity() - (self.tail - self.head) as usize
    }

    /// Messages published so far (the tail counter).
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Sender};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let layout = ChannelLayout::<u64>::new(0, 4, emu.line_size()).unwrap();
    /// layout.init(&emu.node(0)).unwrap();
    /// let mut tx = Sender::new(emu.node(0), layout).unwrap();
    /// tx.try_send(&1).unwrap();
    /// assert_eq!(tx.sent(), 1);
    /// ```
    pub fn sent(&self) -> u64 {
        self.tail
    }

    /// The channel's layout.
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Sender};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let layout = ChannelLayout::<u64>::new(0, 4, emu.line_size()).unwrap();
    /// layout.init(&emu.node(0)).unwrap();
    /// let tx = Sender::new(emu.node(0), layout).unwrap();
    /// assert_eq!(tx.layout().capacity(), 4);
    /// ```
    pub fn layout(&self) -> &ChannelLayout<T> {
        &self.layout
    }

    /// The view this producer works through.
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Sender};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let layout = ChannelLayout::<u64>::new(0, 4, emu.line_size()).unwrap();
    /// layout.init(&emu.node(1)).unwrap();
    /// let tx = Sender::new(emu.node(1), layout).unwrap();
    /// assert_eq!(tx.view().id(), 1);
    /// ```
    pub fn view(&self) -> &V {
        &self.view
    }

    /// Drops the cached head line, fences, and reloads the head, checking that it moved
    /// forward and stayed at or behind the tail.
    fn refresh_head(&mut self) -> Result<(), ChannelError> {
        let at = self.layout.head_offset();
        self.view.invalidate(at, size_of::<u64>())?;
        self.view.fence();
        let head = self.view.load::<u64>(at)?;
        let corrupt = |reason| ChannelError::Corrupt {
            reason,
            head,
            tail: self.tail,
        };
        if head < self.head {
            return Err(corrupt(Corruption::WentBack));
        }
        if head > self.tail {
            return Err(corrupt(Corruption::TailBehindHead));
        }
        self.head = head;
        Ok(())
    }
}
