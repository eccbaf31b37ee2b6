//! The consumer's end: polls the tail, reads entries, then publishes the head.

use super::consumer::Consumer;
use super::error::ChannelError;
use super::layout::ChannelLayout;
use crate::mem::MemView;
use crate::runtime::{Fault, Faults};
use bytemuck::Pod;
use std::fmt;

/// The consuming end of a channel, on one node.
///
/// It owns the head: it is the only code that stores to the head line, and it keeps its
/// own copy of it. It also keeps the tail as last read from memory; whenever that cached
/// tail does not cover what a call asks for, the call invalidates the tail line, fences
/// and reloads it (a tail read from the cache would never move). The counters and the
/// steps of a poll are a [`Consumer`]'s; a receiver adds the view and the fences.
///
/// Not `Clone`: a channel has exactly one consumer.
///
/// ```
/// use bi_core::channel::{ChannelLayout, Receiver, Sender};
/// use bi_core::mem::{Emulator, EmulatorConfig};
///
/// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
/// let layout = ChannelLayout::<u64>::new(0, 8, emu.line_size()).unwrap();
/// layout.init(&emu.node(0)).unwrap();
/// let mut rx = Receiver::new(emu.node(1), layout).unwrap();
/// assert_eq!(rx.try_recv().unwrap(), None); // nothing yet; the next poll re-reads the tail
/// Sender::new(emu.node(0), layout).unwrap().send_batch(&[5, 6]).unwrap();
/// assert_eq!(rx.try_recv().unwrap(), Some(5));
/// assert_eq!((rx.received(), rx.available()), (1, 1));
/// ```
pub struct Receiver<V, T> {
    view: V,
    consumer: Consumer<T>,
    /// The mechanisms switched off (none outside tests; see [`Fault`]).
    faults: Faults,
}

impl<V, T> fmt::Debug for Receiver<V, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("offset", &self.consumer.layout().offset())
            .field("capacity", &self.consumer.layout().capacity())
            .field("head", &self.consumer.head())
            .field("cached_tail", &self.consumer.tail())
            .finish_non_exhaustive()
    }
}

impl<V: MemView, T: Pod> Receiver<V, T> {
    /// Attaches the consumer to the channel at `layout` through `view`, reading both
    /// counters from memory.
    ///
    /// The channel must have been initialised ([`ChannelLayout::init`]); a layout that does
    /// not fit the view, or counters that no ring can have, are errors.
    ///
    /// ```
    /// use bi_core::channel::{ChannelError, ChannelLayout, Receiver};
    /// use bi_core::line::LineSize;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let layout = ChannelLayout::<u64>::new(0, 8, LineSize::new(32).unwrap()).unwrap();
    /// let err = Receiver::new(emu.node(1), layout).unwrap_err();
    /// assert_eq!(err, ChannelError::LineSize { layout: 32, view: 64 });
    /// ```
    pub fn new(view: V, layout: ChannelLayout<T>) -> Result<Self, ChannelError> {
        let (head, tail) = super::attach(&view, &layout)?;
        Ok(Receiver {
            view,
            consumer: Consumer::attached(layout, head, tail),
            faults: Faults::default(),
        })
    }

    /// The same consumer without the mechanisms `faults` switches off (for tests that
    /// show a mechanism is needed; feature `faults`). The channel reads only
    /// [`Fault::ChannelTail`].
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Receiver, Sender};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    /// use bi_core::runtime::{Fault, RuntimeConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let layout = ChannelLayout::<u64>::new(0, 8, emu.line_size()).unwrap();
    /// layout.init(&emu.node(0)).unwrap();
    /// let faults = RuntimeConfig::default().fault(Fault::ChannelTail).faults();
    /// let mut rx = Receiver::new(emu.node(1), layout).unwrap().with_faults(faults);
    /// Sender::new(emu.node(0), layout).unwrap().try_send(&5).unwrap();
    /// assert_eq!(rx.try_recv().unwrap(), None); // its cached tail never moves
    /// ```
    #[cfg(feature = "faults")]
    pub fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// Takes the next message, if one has been published.
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Receiver, Sender};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let layout = ChannelLayout::<i32>::new(0, 2, emu.line_size()).unwrap();
    /// layout.init(&emu.node(0)).unwrap();
    /// let mut tx = Sender::new(emu.node(0), layout).unwrap();
    /// let mut rx = Receiver::new(emu.node(1), layout).unwrap();
    /// tx.try_send(&-1).unwrap();
    /// assert_eq!(rx.try_recv().unwrap(), Some(-1));
    /// assert_eq!(rx.try_recv().unwrap(), None);
    /// ```
    pub fn try_recv(&mut self) -> Result<Option<T>, ChannelError> {
        let mut got = None;
        self.take(1, |v| got = Some(v))?;
        Ok(got)
    }

    /// Appends up to `max` published messages, in order, to `out` and returns how many.
    ///
    /// One poll: at most one tail read, one invalidation of the entries read under one
    /// fence, and one head update.
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Receiver, Sender};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let layout = ChannelLayout::<u16>::new(0, 8, emu.line_size()).unwrap();
    /// layout.init(&emu.node(0)).unwrap();
    /// let mut tx = Sender::new(emu.node(0), layout).unwrap();
    /// let mut rx = Receiver::new(emu.node(1), layout).unwrap();
    /// tx.send_batch(&[1, 2, 3, 4, 5]).unwrap();
    /// let mut out = vec![0];
    /// assert_eq!(rx.recv_batch(&mut out, 3).unwrap(), 3);
    /// assert_eq!(rx.recv_batch(&mut out, 3).unwrap(), 2);
    /// assert_eq!(out, [0, 1, 2, 3, 4, 5]);
    /// ```
    pub fn recv_batch(&mut self, out: &mut Vec<T>, max: usize) -> Result<usize, ChannelError> {
        let start = out.len();
        let r = self.take(max, |v| out.push(v));
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    /// Published messages this consumer already knows of (without polling): a lower bound.
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Receiver, Sender};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let layout = ChannelLayout::<u64>::new(0, 8, emu.line_size()).unwrap();
    /// layout.init(&emu.node(0)).unwrap();
    /// let mut tx = Sender::new(emu.node(0), layout).unwrap();
    /// let mut rx = Receiver::new(emu.node(1), layout).unwrap();
    /// tx.send_batch(&[1, 2, 3]).unwrap();
    /// assert_eq!(rx.available(), 0); // not polled yet
    /// assert_eq!(rx.try_recv().unwrap(), Some(1)); // polls: sees all three
    /// assert_eq!(rx.available(), 2);
    /// ```
    pub fn available(&self) -> usize {
        self.consumer.available()
    }

    /// Messages consumed so far (the head counter).
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
    /// tx.send_batch(&[7, 8]).unwrap();
    /// let mut out = Vec::new();
    /// rx.recv_batch(&mut out, 10).unwrap();
    /// assert_eq!((out, rx.received()), (vec![7, 8], 2));
    /// ```
    pub fn received(&self) -> u64 {
        self.consumer.head()
    }

    /// The channel's layout.
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Receiver};
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let layout = ChannelLayout::<u64>::new(64, 4, emu.line_size()).unwrap();
    /// layout.init(&emu.node(0)).unwrap();
    /// let rx = Receiver::new(emu.node(1), layout).unwrap();
    /// assert_eq!(*rx.layout(), layout);
    /// ```
    pub fn layout(&self) -> &ChannelLayout<T> {
        self.consumer.layout()
    }

    /// The view this consumer works through.
    ///
    /// ```
    /// use bi_core::channel::{ChannelLayout, Receiver, Sender};
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// // Two hardware views of one region (as two processes mapping one file would have).
    /// let region = Region::anonymous(RegionConfig::new(1 << 20)).unwrap();
    /// let at = region.layout().heap().offset;
    /// let layout = ChannelLayout::<u64>::new(at, 8, region.layout().line_size()).unwrap();
    /// layout.init(&region.hardware()).unwrap();
    /// let mut tx = Sender::new(region.hardware(), layout).unwrap();
    /// let mut rx = Receiver::new(region.hardware(), layout).unwrap();
    /// tx.try_send(&5).unwrap();
    /// assert_eq!(rx.try_recv().unwrap(), Some(5));
    /// assert!(std::sync::Arc::ptr_eq(rx.view().backing(), region.backing()));
    /// ```
    pub fn view(&self) -> &V {
        &self.view
    }

    /// One poll: hands up to `max` messages to `sink` in order and publishes the new head.
    /// On an error nothing is consumed (the head does not move).
    fn take(&mut self, max: usize, mut sink: impl FnMut(T)) -> Result<usize, ChannelError> {
        if max == 0 {
            return Ok(0);
        }
        let (v, c) = (&self.view, &mut self.consumer);
        if c.available() < max {
            if !self.faults.has(Fault::ChannelTail) {
                c.drop_tail(v)?;
                v.fence();
            }
            c.read_tail(v)?;
        }
        let n = c.available().min(max);
        if n == 0 {
            return Ok(0);
        }
        c.drop_entries(v, n)?;
        v.fence();
        for i in c.head()..c.head() + n as u64 {
            sink(v.load::<T>(c.layout().slot_offset(i))?);
        }
        c.publish_head(v, n)?;
        v.fence();
        Ok(n)
    }
}
