//! Where a channel's words lie in shared memory.
//!
//! Both endpoints compute every offset from the same [`ChannelLayout`], so the layout is
//! pure arithmetic, checked once when it is built: after that, no offset it hands out can
//! overflow or leave the channel's extent.

use super::error::ChannelError;
use crate::line::LineSize;
use crate::mem::{MemView, check_range};
use bytemuck::Pod;
use std::fmt;
use std::marker::PhantomData;

/// The placement of a channel of `T` in shared memory: a head line, a tail line, then
/// `capacity` entry slots of `size_of::<T>()` bytes each, the whole padded to a line
/// boundary.
///
/// ```text
/// offset              offset + L          offset + 2L
/// | head (consumer)   | tail (producer)   | slot 0 | slot 1 | ... | slot cap-1 | pad |
/// ```
///
/// ```
/// use bi_core::channel::ChannelLayout;
/// use bi_core::line::LineSize;
///
/// let layout = ChannelLayout::<u32>::new(128, 64, LineSize::X86).unwrap();
/// assert_eq!(layout.head_offset(), 128);
/// assert_eq!(layout.tail_offset(), 192);
/// assert_eq!(layout.entries_offset(), 256);
/// assert_eq!(layout.len(), 2 * 64 + 64 * 4);
/// assert_eq!(layout.end(), 128 + layout.len());
/// assert_eq!(layout.slot_offset(65), 256 + 4); // index 65 is slot 1
/// ```
pub struct ChannelLayout<T> {
    offset: usize,
    capacity: usize,
    line: LineSize,
    len: usize,
    _entries: PhantomData<fn() -> T>,
}

impl<T> Clone for ChannelLayout<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ChannelLayout<T> {}

impl<T> PartialEq for ChannelLayout<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.offset, self.capacity, self.line) == (other.offset, other.capacity, other.line)
    }
}

impl<T> Eq for ChannelLayout<T> {}

impl<T> fmt::Debug for ChannelLayout<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelLayout")
            .field("offset", &self.offset)
            .field("capacity", &self.capacity)
            .field("line", &self.line.get())
            .field("entry_size", &size_of::<T>())
            .field("len", &self.len)
            .finish()
    }
}

impl<T: Pod> ChannelLayout<T> {
    /// Places a channel of `capacity` entries (a non-zero power of two) at `offset` (a
    /// multiple of `line`).
    ///
    /// ```
    /// use bi_core::channel::{ChannelError, ChannelLayout};
    /// use bi_core::line::LineSize;
    ///
    /// let line = LineSize::new(32).unwrap();
    /// assert!(ChannelLayout::<u64>::new(64, 8, line).is_ok());
    /// assert_eq!(
    ///     ChannelLayout::<u64>::new(16, 8, line),
    ///     Err(ChannelError::Misaligned { offset: 16, line: 32 })
    /// );
    /// assert!(matches!(
    ///     ChannelLayout::<u64>::new(0, 0, line),
    ///     Err(ChannelError::BadCapacity { capacity: 0 })
    /// ));
    /// assert!(matches!(
    ///     ChannelLayout::<[u8; 4096]>::new(0, 1 << 60, line),
    ///     Err(ChannelError::TooLarge { .. })
    /// ));
    /// ```
    pub fn new(offset: usize, capacity: usize, line: LineSize) -> Result<Self, ChannelError> {
        if !capacity.is_power_of_two() {
            return Err(ChannelError::BadCapacity { capacity });
        }
        if offset != line.align_down(offset) {
            return Err(ChannelError::Misaligned {
                offset,
                line: line.get(),
            });
        }
        let too_large = ChannelError::TooLarge {
            offset,
            capacity,
            entry_size: size_of::<T>(),
        };
        let len = capacity
            .checked_mul(size_of::<T>())
            .and_then(|entries| line.align_up(entries))
            .and_then(|entries| entries.checked_add(2 * line.get()))
            .ok_or(too_large)?;
        offset.checked_add(len).ok_or(too_large)?;
        Ok(ChannelLayout {
            offset,
            capacity,
            line,
            len,
            _entries: PhantomData,
        })
    }
}

impl<T> ChannelLayout<T> {
    /// The first byte of the channel (its head line).
    ///
    /// ```
    /// use bi_core::channel::ChannelLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let l = ChannelLayout::<u64>::new(4096, 8, LineSize::X86).unwrap();
    /// assert_eq!((l.offset(), l.head_offset()), (4096, 4096));
    /// ```
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// How many entries the ring holds.
    ///
    /// ```
    /// use bi_core::channel::ChannelLayout;
    /// use bi_core::line::LineSize;
    ///
    /// assert_eq!(ChannelLayout::<u64>::new(0, 16, LineSize::X86).unwrap().capacity(), 16);
    /// ```
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The line size the layout was computed with.
    ///
    /// ```
    /// use bi_core::channel::ChannelLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let line = LineSize::new(128).unwrap();
    /// assert_eq!(ChannelLayout::<u64>::new(0, 4, line).unwrap().line_size(), line);
    /// ```
    pub fn line_size(&self) -> LineSize {
        self.line
    }

    /// Bytes the channel occupies from [`offset`](Self::offset): always a multiple of the
    /// line size and never zero, so the next structure can start at [`end`](Self::end).
    ///
    /// ```
    /// use bi_core::channel::ChannelLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let l = ChannelLayout::<u64>::new(0, 16, LineSize::X86).unwrap();
    /// assert_eq!(l.len(), 2 * 64 + 16 * 8); // head line, tail line, entries
    /// let tiny = ChannelLayout::<u8>::new(0, 1, LineSize::X86).unwrap();
    /// assert_eq!(tiny.len(), 3 * 64); // entries rounded up to whole lines
    /// ```
    #[allow(clippy::len_without_is_empty)] // a channel always has its two control lines
    pub fn len(&self) -> usize {
        self.len
    }

    /// One past the channel's last byte.
    ///
    /// ```
    /// use bi_core::channel::ChannelLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let a = ChannelLayout::<u64>::new(0, 8, LineSize::X86).unwrap();
    /// let b = ChannelLayout::<u64>::new(a.end(), 8, LineSize::X86).unwrap(); // right after
    /// assert_eq!(a.end(), a.offset() + a.len());
    /// assert!(b.offset() >= a.end());
    /// ```
    pub fn end(&self) -> usize {
        self.offset + self.len
    }

    /// The head counter (a `u64` at the start of the first line; written only by the
    /// consumer).
    ///
    /// ```
    /// use bi_core::channel::ChannelLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let l = ChannelLayout::<u64>::new(256, 8, LineSize::X86).unwrap();
    /// assert_eq!(l.head_offset(), 256);
    /// assert_eq!(l.tail_offset() - l.head_offset(), 64); // a line apart: two writers
    /// ```
    pub fn head_offset(&self) -> usize {
        self.offset
    }

    /// The tail counter (a `u64` at the start of the second line; written only by the
    /// producer).
    ///
    /// ```
    /// use bi_core::channel::ChannelLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let l = ChannelLayout::<u64>::new(0, 8, LineSize::new(32).unwrap()).unwrap();
    /// assert_eq!(l.tail_offset(), 32);
    /// ```
    pub fn tail_offset(&self) -> usize {
        self.offset + self.line.get()
    }

    /// The first entry slot.
    ///
    /// ```
    /// use bi_core::channel::ChannelLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let l = ChannelLayout::<u64>::new(0, 8, LineSize::X86).unwrap();
    /// assert_eq!(l.entries_offset(), 128);
    /// assert_eq!(l.slot_offset(0), l.entries_offset());
    /// ```
    pub fn entries_offset(&self) -> usize {
        self.offset + 2 * self.line.get()
    }

    /// Where message number `index` (a head or tail counter value) is stored: slot
    /// `index % capacity`.
    ///
    /// ```
    /// use bi_core::channel::ChannelLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let l = ChannelLayout::<u32>::new(0, 4, LineSize::X86).unwrap();
    /// assert_eq!(l.slot_offset(1), l.entries_offset() + 4);
    /// assert_eq!(l.slot_offset(5), l.slot_offset(1)); // wraps at the capacity
    /// ```
    pub fn slot_offset(&self, index: u64) -> usize {
        // The capacity is a power of two, so the mask keeps the slot below it and the
        // product inside the extent checked by `new`.
        let slot = (index & (self.capacity as u64 - 1)) as usize;
        self.entries_offset() + slot * size_of::<T>()
    }

    /// The byte ranges `(offset, len)` holding the `n` (at most `capacity`) entries from
    /// message `index` on: one range, or two when they wrap past the last slot (the second
    /// is then empty otherwise).
    pub(super) fn entry_ranges(&self, index: u64, n: usize) -> [(usize, usize); 2] {
        let size = size_of::<T>();
        let slot = (index & (self.capacity as u64 - 1)) as usize;
        let first = n.min(self.capacity - slot);
        [
            (self.slot_offset(index), first * size),
            (self.entries_offset(), (n - first) * size),
        ]
    }

    /// Checks that the channel fits in `view` and that the view's lines are no larger than
    /// the layout's (otherwise the head and the tail would share a line).
    ///
    /// ```
    /// use bi_core::channel::{ChannelError, ChannelLayout};
    /// use bi_core::line::LineSize;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1024, 1));
    /// let fits = ChannelLayout::<u64>::new(0, 16, LineSize::X86).unwrap();
    /// assert!(fits.check(&emu.node(0)).is_ok());
    /// let small_lines = ChannelLayout::<u64>::new(0, 16, LineSize::new(32).unwrap()).unwrap();
    /// assert_eq!(
    ///     small_lines.check(&emu.node(0)),
    ///     Err(ChannelError::LineSize { layout: 32, view: 64 })
    /// );
    /// let too_big = ChannelLayout::<u64>::new(0, 128, LineSize::X86).unwrap();
    /// assert!(matches!(too_big.check(&emu.node(0)), Err(ChannelError::Mem(_))));
    /// ```
    pub fn check<V: MemView>(&self, view: &V) -> Result<(), ChannelError> {
        let view_line = view.line_size().get();
        if view_line > self.line.get() {
            return Err(ChannelError::LineSize {
                layout: self.line.get(),
                view: view_line,
            });
        }
        check_range(self.offset, self.len, view.size())?;
        Ok(())
    }

    /// Makes the memory an empty channel: zero head and tail, written back and fenced.
    ///
    /// Call it once, from one node, before either endpoint attaches and while no endpoint
    /// of this channel exists anywhere; the entry slots need no initialisation.
    ///
    /// ```
    /// use bi_core::channel::ChannelLayout;
    /// use bi_core::line::LineSize;
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// emu.node(0).store(64, &99u64).unwrap(); // leftovers
    /// let layout = ChannelLayout::<u64>::new(0, 8, LineSize::X86).unwrap();
    /// layout.init(&emu.node(0)).unwrap();
    /// assert_eq!(emu.peek::<u64>(layout.tail_offset()).unwrap(), 0);
    /// ```
    pub fn init<V: MemView>(&self, view: &V) -> Result<(), ChannelError> {
        self.check(view)?;
        view.store(self.head_offset(), &0u64)?;
        view.store(self.tail_offset(), &0u64)?;
        view.writeback(self.head_offset(), 2 * self.line.get())?;
        view.fence();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_split_at_the_wrap() {
        let l = ChannelLayout::<[u8; 24]>::new(0, 8, LineSize::X86).unwrap();
        assert_eq!(l.len(), 128 + 192);
        assert_eq!(l.entry_ranges(0, 8), [(128, 192), (128, 0)]);
        assert_eq!(l.entry_ranges(6, 3), [(128 + 6 * 24, 48), (128, 24)]);
        assert_eq!(l.entry_ranges(13, 0), [(128 + 5 * 24, 0), (128, 0)]);
        assert_eq!(l.entry_ranges(u64::MAX, 2), [(128 + 7 * 24, 24), (128, 24)]);
    }

    #[test]
    fn len_pads_to_a_line_and_zero_sized_entries_work() {
        let l = ChannelLayout::<[u8; 3]>::new(64, 4, LineSize::X86).unwrap();
        assert_eq!((l.len(), l.end()), (192, 256));
        let z = ChannelLayout::<()>::new(0, 1, LineSize::X86).unwrap();
        assert_eq!(z.len(), 128);
        assert_eq!(z.entry_ranges(5, 1), [(128, 0), (128, 0)]);
    }

    #[test]
    fn overflow_is_an_error() {
        let line = LineSize::X86;
        assert!(matches!(
            ChannelLayout::<u64>::new(usize::MAX - 63, 1, line),
            Err(ChannelError::TooLarge { .. })
        ));
        assert!(matches!(
            ChannelLayout::<u16>::new(0, 1 << (usize::BITS - 1), line),
            Err(ChannelError::TooLarge { .. })
        ));
    }
}
