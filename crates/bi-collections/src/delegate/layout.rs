//! Where the delegation area's words lie: pure arithmetic, checked once.
//!
//! ```text
//! offset
//! | header | client 0: channel (head, tail, slots) | results 0 | ack 0 | parcels 0 | replies 0 | client 1: ...
//! ```
//!
//! Every line has a single writer: the header, the result slots and the acknowledgement
//! lines belong to the server, each channel's tail and slots to its client, each
//! channel's head to the server. Where an outcome fits the acknowledgement's line beside
//! the acknowledgement and the failed range (values up to 24 bytes with 64-byte lines),
//! the latest one sits there and a client has no result slots. Otherwise result slot `i`
//! of a client holds the outcome of its operation `i` modulo the capacity: a client reads
//! it once the operation is acknowledged, before it can send the operation that reuses
//! the slot. Where keys or values may be strings too long for their word, each client
//! also has a parcel area it writes and, for such values, a reply area the server
//! writes ([`parcel`](super::parcel)). Both sides compute every offset from the same [`DelegationLayout`], built
//! from the same range, client count, capacity and line size.

use super::error::DelegationError;
use super::mem;
use super::record::{WireRecord, WireResult};
use crate::{CollectionError, Stored};
use bi_core::channel::ChannelLayout;
use bi_core::line::LineSize;
use bi_core::mem::MemView;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;

/// The header's first word: "BIDELEG4" read as a little-endian `u64` (2: records carry a
/// condition and its expected value; 3: no result slots where outcomes fit the
/// acknowledgement's line; 4: parcel and reply areas).
const MAGIC: u64 = u64::from_le_bytes(*b"BIDELEG4");

/// Bytes of each parcel and reply area of a layout made by [`DelegationLayout::new`]:
/// the longest string a delegated write carries is 8 bytes shorter.
pub const DEFAULT_PARCEL_BYTES: usize = 256 << 10;

/// Words before the inline outcome on an acknowledgement line: the acknowledgement and
/// the failed range.
const ACK_WORDS: usize = 3;

/// Whether an outcome of values `V` fits an acknowledgement line of `line` bytes.
fn outcome_fits_ack<V: Stored>(line: LineSize) -> bool {
    ACK_WORDS * size_of::<u64>() + size_of::<WireResult<V>>() <= line.get()
}

/// The placement of a delegation area with `clients` clients, each with a channel of
/// `capacity` records and an acknowledgement line.
///
/// ```
/// use bi_collections::delegate::DelegationLayout;
/// use bi_core::line::LineSize;
///
/// let line = LineSize::X86;
/// let need = DelegationLayout::<u64, u64>::required_bytes(2, 4, line).unwrap();
/// // header + 2 * (head + tail + 4 records of 32 bytes + ack, which holds the outcome)
/// assert_eq!(need, 64 + 2 * (64 + 64 + 128 + 64));
/// let layout = DelegationLayout::<u64, u64>::new(4096..4096 + need, 2, 4, line).unwrap();
/// assert_eq!(layout.channel(1).unwrap().offset(), 4096 + 64 + 320);
/// assert_eq!(layout.ack_offset(0).unwrap(), 4096 + 64 + 256);
/// // Outcomes of 40-byte values do not fit the acknowledgement's line: 4 records of 96
/// // bytes, then 4 result slots of 56 bytes (four lines).
/// let slots = DelegationLayout::<u64, [u64; 5]>::required_bytes(2, 4, line).unwrap();
/// assert_eq!(slots, 64 + 2 * (64 + 64 + 4 * 96 + 4 * 64 + 64));
/// assert!(layout.channel(2).is_err());
/// ```
pub struct DelegationLayout<K, V> {
    offset: usize,
    clients: usize,
    capacity: usize,
    line: LineSize,
    /// Bytes of each parcel area and each reply area (zero where there are none).
    parcels: usize,
    replies: usize,
    /// Bytes of one client's block: its channel, its acknowledgement line, its parcel
    /// and reply areas.
    stride: usize,
    /// Bytes of the whole area (header and every block).
    len: usize,
    _records: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for DelegationLayout<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, V> Copy for DelegationLayout<K, V> {}

impl<K, V> PartialEq for DelegationLayout<K, V> {
    fn eq(&self, other: &Self) -> bool {
        (
            self.offset,
            self.clients,
            self.capacity,
            self.parcels,
            self.line,
        ) == (
            other.offset,
            other.clients,
            other.capacity,
            other.parcels,
            other.line,
        )
    }
}

impl<K, V> Eq for DelegationLayout<K, V> {}

impl<K, V> fmt::Debug for DelegationLayout<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelegationLayout")
            .field("offset", &self.offset)
            .field("clients", &self.clients)
            .field("capacity", &self.capacity)
            .field("parcels", &self.parcels)
            .field("replies", &self.replies)
            .field("line", &self.line.get())
            .field("len", &self.len)
            .finish()
    }
}

impl<K: Stored, V: Stored> DelegationLayout<K, V> {
    /// Bytes an area for `clients` clients with channels of `capacity` records (a
    /// non-zero power of two) needs, laid out for `line`-byte lines.
    ///
    /// ```
    /// use bi_collections::delegate::DelegationLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let need = DelegationLayout::<u32, u32>::required_bytes(2, 16, LineSize::X86).unwrap();
    /// let layout = DelegationLayout::<u32, u32>::new(0..need, 2, 16, LineSize::X86).unwrap();
    /// assert_eq!(layout.len(), need);
    /// assert!(DelegationLayout::<u32, u32>::new(0..need - 64, 2, 16, LineSize::X86).is_err());
    /// assert!(DelegationLayout::<u32, u32>::required_bytes(2, 15, LineSize::X86).is_err());
    /// ```
    pub fn required_bytes(
        clients: usize,
        capacity: usize,
        line: LineSize,
    ) -> Result<usize, CollectionError> {
        Self::required_bytes_with_parcels(clients, capacity, DEFAULT_PARCEL_BYTES, line)
    }

    /// [`required_bytes`](Self::required_bytes) with parcel and reply areas of
    /// `parcel_bytes` each (rounded up to whole lines), where the types need them.
    ///
    /// ```
    /// use bi_collections::delegate::DelegationLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let line = LineSize::X86;
    /// let need = |plain, strings| match (plain, strings) {
    ///     (true, _) => DelegationLayout::<u64, u64>::required_bytes_with_parcels(1, 4, 4096, line),
    ///     (false, false) => DelegationLayout::<String, u64>::required_bytes_with_parcels(1, 4, 4096, line),
    ///     (false, true) => DelegationLayout::<String, String>::required_bytes_with_parcels(1, 4, 4096, line),
    /// };
    /// let (plain, keys, both) = (need(true, false).unwrap(), need(false, false).unwrap(), need(false, true).unwrap());
    /// // String keys: a parcel area (and longer records); string values: a reply area too.
    /// assert!(keys >= plain + 4096 && both >= keys + 4096);
    /// ```
    pub fn required_bytes_with_parcels(
        clients: usize,
        capacity: usize,
        parcel_bytes: usize,
        line: LineSize,
    ) -> Result<usize, CollectionError> {
        Ok(Self::sizes(clients, capacity, parcel_bytes, line)?.3)
    }

    /// `(parcels, replies, stride, len)`: one client's parcel and reply areas, its block
    /// and the whole area.
    fn sizes(
        clients: usize,
        capacity: usize,
        parcel_bytes: usize,
        line: LineSize,
    ) -> Result<(usize, usize, usize, usize), CollectionError> {
        if clients == 0 {
            return Err(DelegationError::NoClients.into());
        }
        // A channel placed at 0 has the length of one placed anywhere (line-aligned).
        let channel = ChannelLayout::<WireRecord<K, V>>::new(0, capacity, line)?;
        let too_large = DelegationError::TooLarge { clients, capacity };
        let area = parcel_bytes
            .checked_next_multiple_of(line.get())
            .ok_or(too_large)?;
        let parcels = if K::OUT_OF_LINE || V::OUT_OF_LINE {
            area
        } else {
            0
        };
        let replies = if V::OUT_OF_LINE { area } else { 0 };
        let slots = if outcome_fits_ack::<V>(line) {
            0
        } else {
            capacity
        };
        let results = slots
            .checked_mul(size_of::<WireResult<V>>())
            .map(|bytes| bytes.next_multiple_of(line.get()))
            .ok_or(too_large)?;
        let stride = [results, line.get(), parcels, replies]
            .into_iter()
            .try_fold(channel.len(), usize::checked_add)
            .ok_or(too_large)?;
        let len = stride
            .checked_mul(clients)
            .and_then(|blocks| blocks.checked_add(line.get()))
            .ok_or(too_large)?;
        Ok((parcels, replies, stride, len))
    }

    /// Places an area for `clients` clients with channels of `capacity` records at the
    /// start of `range`, which must begin on a line boundary and hold at least
    /// [`required_bytes`](Self::required_bytes).
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationError, DelegationLayout};
    /// use bi_collections::CollectionError;
    /// use bi_core::line::LineSize;
    ///
    /// let line = LineSize::X86;
    /// let err = DelegationLayout::<u64, u64>::new(8..100_000, 1, 4, line).unwrap_err();
    /// assert!(matches!(err, CollectionError::Delegation(DelegationError::Misaligned { .. })));
    /// let err = DelegationLayout::<u64, u64>::new(0..256, 1, 4, line).unwrap_err();
    /// assert!(matches!(
    ///     err,
    ///     CollectionError::Delegation(DelegationError::RangeTooSmall { required: 384, .. })
    /// ));
    /// let err = DelegationLayout::<u64, u64>::new(0..4096, 1, 3, line).unwrap_err();
    /// assert!(matches!(err, CollectionError::Channel(_))); // capacity not a power of two
    /// ```
    pub fn new(
        range: Range<usize>,
        clients: usize,
        capacity: usize,
        line: LineSize,
    ) -> Result<Self, CollectionError> {
        Self::with_parcels(range, clients, capacity, DEFAULT_PARCEL_BYTES, line)
    }

    /// [`new`](Self::new) with parcel and reply areas of `parcel_bytes` each (rounded up
    /// to whole lines), where the types need them: a delegated write carries strings of
    /// up to `parcel_bytes - 8` bytes ([`parcel_bytes`](Self::parcel_bytes)).
    ///
    /// ```
    /// use bi_collections::delegate::DelegationLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let line = LineSize::X86;
    /// let need = DelegationLayout::<String, String>::required_bytes_with_parcels(2, 8, 4096, line);
    /// let layout = DelegationLayout::<String, String>::with_parcels(0..need.unwrap(), 2, 8, 4096, line);
    /// assert_eq!(layout.unwrap().parcel_bytes(), 4096);
    /// ```
    pub fn with_parcels(
        range: Range<usize>,
        clients: usize,
        capacity: usize,
        parcel_bytes: usize,
        line: LineSize,
    ) -> Result<Self, CollectionError> {
        let offset = range.start;
        if offset != line.align_down(offset) {
            return Err(DelegationError::Misaligned {
                offset,
                line: line.get(),
            }
            .into());
        }
        let (parcels, replies, stride, len) = Self::sizes(clients, capacity, parcel_bytes, line)?;
        let available = range.end.saturating_sub(range.start);
        if available < len {
            return Err(DelegationError::RangeTooSmall {
                offset,
                len: available,
                required: len,
            }
            .into());
        }
        // `offset + len <= range.end`, so no offset handed out below can overflow.
        Ok(DelegationLayout {
            offset,
            clients,
            capacity,
            line,
            parcels,
            replies,
            stride,
            len,
            _records: PhantomData,
        })
    }

    /// The channel of client `index`.
    ///
    /// ```
    /// use bi_collections::delegate::DelegationLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let range = 4096..4096 + (1 << 14);
    /// let layout = DelegationLayout::<u32, u32>::new(range, 2, 16, LineSize::X86).unwrap();
    /// let (a, b) = (layout.channel(0).unwrap(), layout.channel(1).unwrap());
    /// assert!(a.offset() < b.offset()); // one channel per client, apart
    /// assert!(layout.channel(2).is_err());
    /// ```
    pub fn channel(
        &self,
        index: usize,
    ) -> Result<ChannelLayout<WireRecord<K, V>>, CollectionError> {
        let block = self.block(index)?;
        Ok(ChannelLayout::new(block, self.capacity, self.line)?)
    }

    /// The word a server naps on and clients of its host ring
    /// ([`MemView::wait_doorbell`]): the area's magic, which stays as it is while the
    /// area is served.
    pub(super) fn doorbell(&self) -> usize {
        self.offset
    }

    /// The acknowledgement word of client `index` (the first word of its own line).
    ///
    /// ```
    /// use bi_collections::delegate::DelegationLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let range = 4096..4096 + (1 << 14);
    /// let layout = DelegationLayout::<u32, u32>::new(range, 2, 16, LineSize::X86).unwrap();
    /// let ack = layout.ack_offset(0).unwrap();
    /// assert_eq!(ack % 64, 0); // a line of its own
    /// assert!(ack > layout.offset() && ack < layout.end());
    /// assert!(layout.ack_offset(2).is_err());
    /// ```
    pub fn ack_offset(&self, index: usize) -> Result<usize, CollectionError> {
        Ok(self.block(index)? + self.stride - self.parcels - self.replies - self.line.get())
    }

    /// The parcel area of client `index` (empty where keys and values are plain).
    pub(crate) fn parcel_area(&self, index: usize) -> Result<Range<usize>, CollectionError> {
        let start = self.ack_offset(index)? + self.line.get();
        Ok(start..start + self.parcels)
    }

    /// The reply area of client `index` (empty where values are plain).
    pub(crate) fn reply_area(&self, index: usize) -> Result<Range<usize>, CollectionError> {
        let start = self.parcel_area(index)?.end;
        Ok(start..start + self.replies)
    }

    /// The two words beside client `index`'s acknowledgement, `(from, to)`: the last
    /// writer that took over reported the client's operations `from + 1..=to` failed
    /// ([`Outcome::Failed`](super::Outcome::Failed)); both zero if none did.
    pub(crate) fn failed_offset(&self, index: usize) -> Result<usize, CollectionError> {
        Ok(self.ack_offset(index)? + size_of::<u64>())
    }

    /// Where the outcome of client `index`'s latest acknowledged operation is repeated
    /// on its acknowledgement line (after the acknowledgement and the failed range),
    /// when it fits there: a client waiting for one operation reads both with one
    /// invalidation.
    pub(crate) fn inline_result_offset(
        &self,
        index: usize,
    ) -> Result<Option<usize>, CollectionError> {
        let at = self.ack_offset(index)? + ACK_WORDS * size_of::<u64>();
        Ok(outcome_fits_ack::<V>(self.line).then_some(at))
    }

    /// The result slot of client `index`'s operation `seq` (sequence numbers start at
    /// one); an error where outcomes fit the acknowledgement's line (there are no slots).
    pub(crate) fn result_offset(&self, index: usize, seq: u64) -> Result<usize, CollectionError> {
        if outcome_fits_ack::<V>(self.line) {
            return Err(CollectionError::Corrupt {
                reason: "outcomes of these values sit on the acknowledgement line, in no slot",
            });
        }
        let results = self.block(index)? + self.channel(index)?.len();
        let slot = (seq.wrapping_sub(1) % self.capacity as u64) as usize;
        Ok(results + slot * size_of::<WireResult<V>>())
    }

    /// Checks that the area fits in `view` and that the view's lines are no larger than
    /// the layout's (otherwise two single-writer words would share a line).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    /// use bi_collections::delegate::DelegationLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let range = 4096..4096 + (1 << 14);
    /// let layout = DelegationLayout::<u32, u32>::new(range, 2, 16, LineSize::X86).unwrap();
    /// let fits = Emulator::new(EmulatorConfig::new(1 << 15, 1));
    /// assert!(layout.check(&fits.node(0)).is_ok());
    /// let short = Emulator::new(EmulatorConfig::new(4096, 1)); // ends where the area starts
    /// assert!(layout.check(&short.node(0)).is_err());
    /// ```
    pub fn check<Vw: MemView>(&self, view: &Vw) -> Result<(), CollectionError> {
        self.channel(0)?.check(view)?;
        if self.end() > view.size() {
            return Err(DelegationError::RangeTooSmall {
                offset: self.offset,
                len: view.size().saturating_sub(self.offset),
                required: self.len,
            }
            .into());
        }
        Ok(())
    }

    /// Makes the memory an idle delegation area: empty channels, zero acknowledgements,
    /// then the header, each step written back and fenced, so that a client that sees
    /// the header sees the rest initialised.
    pub(super) fn init<Vw: MemView>(&self, view: &Vw) -> Result<(), CollectionError> {
        self.check(view)?;
        // Hide an old header first: a client attaching during initialisation must not
        // find one and trust the channels behind it.
        view.store(self.offset, &0u64).map_err(mem)?;
        view.writeback(self.offset, 8).map_err(mem)?;
        view.fence();
        for index in 0..self.clients {
            let channel = self.channel(index)?;
            let ack = self.ack_offset(index)?;
            view.store(channel.head_offset(), &0u64).map_err(mem)?;
            view.store(channel.tail_offset(), &0u64).map_err(mem)?;
            view.store(ack, &0u64).map_err(mem)?;
            view.store(self.failed_offset(index)?, &[0u64; 2])
                .map_err(mem)?;
            view.writeback(channel.head_offset(), 2 * self.line.get())
                .map_err(mem)?;
            view.writeback(ack, 24).map_err(mem)?;
        }
        view.fence();
        for (i, word) in self.header().into_iter().enumerate().skip(1) {
            view.store(self.offset + 8 * i, &word.1).map_err(mem)?;
        }
        view.writeback(self.offset, self.line.get()).map_err(mem)?;
        view.fence();
        // The magic last, so that it covers a complete header.
        view.store(self.offset, &MAGIC).map_err(mem)?;
        view.writeback(self.offset, 8).map_err(mem)?;
        view.fence();
        Ok(())
    }

    /// Reads the header from memory (invalidate, fence, load) and compares it with this
    /// layout.
    pub(super) fn verify_header<Vw: MemView>(&self, view: &Vw) -> Result<(), CollectionError> {
        self.check(view)?;
        view.invalidate(self.offset, self.line.get()).map_err(mem)?;
        view.fence();
        for (i, (field, expected)) in self.header().into_iter().enumerate() {
            let found = view.load::<u64>(self.offset + 8 * i).map_err(mem)?;
            if found != expected {
                return Err(DelegationError::HeaderMismatch {
                    field,
                    expected,
                    found,
                }
                .into());
            }
        }
        Ok(())
    }

    /// The header's words, in order, with their names.
    fn header(&self) -> [(&'static str, u64); 7] {
        [
            ("magic", MAGIC),
            ("clients", self.clients as u64),
            ("capacity", self.capacity as u64),
            ("record_size", size_of::<WireRecord<K, V>>() as u64),
            ("result_size", size_of::<WireResult<V>>() as u64),
            ("line", self.line.get() as u64),
            ("parcel_bytes", self.parcels as u64),
        ]
    }

    fn block(&self, index: usize) -> Result<usize, CollectionError> {
        if index >= self.clients {
            return Err(DelegationError::NoSuchClient {
                index,
                clients: self.clients,
            }
            .into());
        }
        // `index < clients`, and `new` checked that `offset + line + clients * stride`
        // does not overflow.
        Ok(self.offset + self.line.get() + index * self.stride)
    }
}

impl<K, V> DelegationLayout<K, V> {
    /// Bytes of each client's parcel area (and reply area, where values may be
    /// strings): a delegated write carries keys and values of up to this many bytes less
    /// 8. Zero where keys and values are plain types, which always fit their record.
    ///
    /// ```
    /// use bi_collections::delegate::{DelegationLayout, DEFAULT_PARCEL_BYTES};
    /// use bi_core::line::LineSize;
    ///
    /// let strings = DelegationLayout::<String, u64>::new(0..1 << 20, 2, 8, LineSize::X86).unwrap();
    /// assert_eq!(strings.parcel_bytes(), DEFAULT_PARCEL_BYTES);
    /// let plain = DelegationLayout::<u64, u64>::new(0..1 << 20, 2, 8, LineSize::X86).unwrap();
    /// assert_eq!(plain.parcel_bytes(), 0);
    /// ```
    pub fn parcel_bytes(&self) -> usize {
        self.parcels
    }

    /// The first byte of the area (its header line).
    ///
    /// ```
    /// use bi_collections::delegate::DelegationLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let range = 4096..4096 + (1 << 14);
    /// let layout = DelegationLayout::<u32, u32>::new(range, 2, 16, LineSize::X86).unwrap();
    /// assert_eq!(layout.offset(), 4096);
    /// ```
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Bytes the area occupies from [`offset`](Self::offset) (at most the range given).
    ///
    /// ```
    /// use bi_collections::delegate::DelegationLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let range = 4096..4096 + (1 << 14);
    /// let layout = DelegationLayout::<u32, u32>::new(range, 2, 16, LineSize::X86).unwrap();
    /// assert!(layout.len() <= 1 << 14); // at most the range given
    /// assert_eq!(layout.offset() + layout.len(), layout.end());
    /// ```
    #[allow(clippy::len_without_is_empty)] // an area always has its header
    pub fn len(&self) -> usize {
        self.len
    }

    /// One past the area's last byte.
    ///
    /// ```
    /// use bi_collections::delegate::DelegationLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let range = 4096..4096 + (1 << 14);
    /// let layout = DelegationLayout::<u32, u32>::new(range, 2, 16, LineSize::X86).unwrap();
    /// assert!(layout.end() <= 4096 + (1 << 14));
    /// ```
    pub fn end(&self) -> usize {
        self.offset + self.len
    }

    /// How many clients the area serves.
    ///
    /// ```
    /// use bi_collections::delegate::DelegationLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let range = 4096..4096 + (1 << 14);
    /// let layout = DelegationLayout::<u32, u32>::new(range, 2, 16, LineSize::X86).unwrap();
    /// assert_eq!(layout.clients(), 2);
    /// ```
    pub fn clients(&self) -> usize {
        self.clients
    }

    /// Records each client's channel holds.
    ///
    /// ```
    /// use bi_collections::delegate::DelegationLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let range = 4096..4096 + (1 << 14);
    /// let layout = DelegationLayout::<u32, u32>::new(range, 2, 16, LineSize::X86).unwrap();
    /// assert_eq!(layout.capacity(), 16);
    /// ```
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The line size the layout was computed with.
    ///
    /// ```
    /// use bi_collections::delegate::DelegationLayout;
    /// use bi_core::line::LineSize;
    ///
    /// let range = 4096..4096 + (1 << 14);
    /// let layout = DelegationLayout::<u32, u32>::new(range, 2, 16, LineSize::X86).unwrap();
    /// assert_eq!(layout.line_size(), LineSize::X86);
    /// ```
    pub fn line_size(&self) -> LineSize {
        self.line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bi_core::mem::{Emulator, EmulatorConfig};

    #[test]
    fn blocks_do_not_overlap_and_acks_have_their_own_line() {
        let line = LineSize::X86;
        let l = DelegationLayout::<u64, [u8; 41]>::new(128..16384, 3, 8, line).unwrap();
        let mut prev_end = l.offset() + 64;
        for i in 0..3 {
            let ch = l.channel(i).unwrap();
            assert_eq!(ch.offset(), prev_end);
            let ack = l.ack_offset(i).unwrap();
            // Eight results of 8 + 8 + 41 bytes (too many for the acknowledgement's
            // line): eight lines.
            assert_eq!(l.inline_result_offset(i).unwrap(), None);
            let results = l.result_offset(i, 1).unwrap();
            assert_eq!(results, ch.end());
            assert_eq!(l.result_offset(i, 9).unwrap(), results); // a lap later
            assert_eq!(l.result_offset(i, 8).unwrap(), results + 7 * 57);
            assert_eq!(ack, results + 8 * 64);
            assert_eq!(ack % 64, 0);
            assert_eq!(l.failed_offset(i).unwrap(), ack + 8);
            prev_end = ack + 64;
        }
        assert_eq!(prev_end, l.end());
        assert_eq!(
            l.ack_offset(3).unwrap_err().to_string(),
            "delegation: client index 3 is not below the 3 clients"
        );
    }

    #[test]
    fn outcomes_that_fit_the_acknowledgement_line_have_no_slots() {
        let line = LineSize::X86;
        // 8 + 8 + 40 bytes after the acknowledgement's three words: 80 > 64.
        assert!(!outcome_fits_ack::<[u8; 40]>(line));
        // 8 + 8 + 16 after three words: 56 <= 64.
        assert!(outcome_fits_ack::<[u8; 16]>(line));
        let l = DelegationLayout::<u64, [u8; 16]>::new(128..8192, 2, 8, line).unwrap();
        for i in 0..2 {
            let ack = l.ack_offset(i).unwrap();
            assert_eq!(ack, l.channel(i).unwrap().end());
            assert_eq!(l.inline_result_offset(i).unwrap(), Some(ack + 24));
            assert!(l.result_offset(i, 1).is_err());
        }
    }

    #[test]
    fn overflow_and_reversed_ranges_are_errors() {
        let line = LineSize::X86;
        assert!(matches!(
            DelegationLayout::<u64, u64>::required_bytes(usize::MAX / 64, 1, line),
            Err(CollectionError::Delegation(
                DelegationError::TooLarge { .. }
            ))
        ));
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 4096..0;
        assert!(matches!(
            DelegationLayout::<u64, u64>::new(reversed, 1, 1, line),
            Err(CollectionError::Delegation(
                DelegationError::RangeTooSmall { len: 0, .. }
            ))
        ));
    }

    #[test]
    fn header_is_checked_field_by_field() {
        let emu = Emulator::new(EmulatorConfig::new(8192, 2));
        let line = emu.line_size();
        let l = DelegationLayout::<u64, u64>::new(0..8192, 2, 4, line).unwrap();
        assert!(matches!(
            l.verify_header(&emu.node(1)),
            Err(CollectionError::Delegation(
                DelegationError::HeaderMismatch {
                    field: "magic",
                    found: 0,
                    ..
                }
            ))
        ));
        l.init(&emu.node(0)).unwrap();
        l.verify_header(&emu.node(1)).unwrap();
        let other = DelegationLayout::<u64, u64>::new(0..8192, 2, 8, line).unwrap();
        assert!(matches!(
            other.verify_header(&emu.node(1)),
            Err(CollectionError::Delegation(
                DelegationError::HeaderMismatch {
                    field: "capacity",
                    expected: 8,
                    found: 4
                }
            ))
        ));
        let too_big = DelegationLayout::<u64, u64>::new(4096..20_000, 2, 64, line).unwrap();
        assert!(too_big.check(&emu.node(0)).is_err());
    }
}
