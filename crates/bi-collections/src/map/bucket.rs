//! Bucket lines: one bucket's keys and values in one line, rewritten in place.
//!
//! A bucket line is the 56-byte record of a runtime [line array](bi_core::runtime::lines):
//!
//! ```text
//! word 0      link of the next (overflow) line of the chain | bitmap of used entries
//! words 1..7  up to six entries of ENTRY_BYTES each
//! ```
//!
//! Lines sit at line-aligned offsets, so the low six bits of a link are free for the
//! bitmap. An entry holds the key and the value themselves when both fit 48 bytes
//! ([`Format::INLINE`]): a hit reads the bucket's one line. Larger entries hold the
//! key's hash and the link of an immutable [`Pair`] (a hit reads one more line).
//!
//! Line 0 of a bucket array is the header, written once: the bucket count, the array's
//! layout and the entry format ([`code`], so a reader opening the map with
//! other types is refused). Every lookup reads it, so nothing that changes lives there:
//! the line after the buckets holds the counters (the length, and the sum of the stamps
//! of the lines for snapshot reads), rewritten with each commit, and the
//! [tag lines](super::tags) come last.

use bi_core::runtime::{Lines, Link};
use bytemuck::{Pod, Zeroable};
use std::marker::PhantomData;

/// Bytes of a line available to entries (words 1..7).
const ENTRY_SPACE: usize = 48;
/// Most entries in one line (the bits of the bitmap).
const MAX_PER_LINE: usize = 6;
const USED_MASK: u64 = (1 << MAX_PER_LINE) - 1;

/// Header word: the bucket count.
pub(crate) const HEADER_BUCKETS: usize = 0;
/// Header word: the array's layout, [`ARRAY_LAYOUT`].
pub(crate) const HEADER_LAYOUT: usize = 1;
/// Header word: the entry format.
pub(crate) const HEADER_FORMAT: usize = 2;
/// The layout word of arrays whose buckets are any count, whose counters line follows
/// the buckets and records failed grows, and whose tag lines follow the counters
/// ([`tags`](super::tags)) ("BIMAP" 4).
pub(crate) const ARRAY_LAYOUT: u64 = u64::from_le_bytes(*b"BIMAP\0\x04\0");
/// Counters word: the number of keys.
pub(crate) const COUNTERS_LEN: usize = 0;
/// Counters word: the sum (wrapping) of the stamps of the bucket lines and of every
/// overflow line linked from them. A reader that finds the lines it read summing to
/// another value read a mix of versions ([`snapshot`](super::snapshot)).
pub(crate) const COUNTERS_SUM: usize = 1;
/// Counters word: how many times the partition needed a larger table and the heap could
/// not hold one, since the map was made (it then lives on with longer chains).
pub(crate) const COUNTERS_FAILED_GROWS: usize = 2;

/// The index of the counters line of an array of `buckets` buckets: after the buckets.
pub(crate) const fn counters_line(buckets: usize) -> usize {
    1 + buckets
}

/// The record of one line of a bucket array or overflow line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(transparent)]
pub(crate) struct BucketLine(pub(crate) [u64; 7]);

/// A link to a bucket array, or to an overflow line (an array of one line).
pub(crate) type LineLink = Link<Lines<BucketLine>>;

/// One key and its value, immutable once sealed: the target of an entry that does not
/// fit a line.
///
/// `packed` so that the layout has no padding whatever `K` and `V` are (which is what
/// makes the manual [`Pod`] implementation sound); fields are read by copy.
#[repr(C, packed)]
pub(crate) struct Pair<K, V> {
    pub(crate) key: K,
    pub(crate) value: V,
}

impl<K: Copy, V: Copy> Clone for Pair<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: Copy, V: Copy> Copy for Pair<K, V> {}

// SAFETY: `Pair` is `repr(C, packed)`, so it has no padding bytes; its fields are
// `K: Pod` and `V: Pod`, for each of which the all-zero bit pattern is valid.
unsafe impl<K: Pod, V: Pod> Zeroable for Pair<K, V> {}

// SAFETY: no padding (`packed`), both fields are `Pod` (every bit pattern is valid, no
// reference or interior mutability), the type is `Copy` and `'static` (as `K: Pod` and
// `V: Pod` are); `Pod` does not require alignment.
unsafe impl<K: Pod, V: Pod> Pod for Pair<K, V> {}

/// The header's format word of a map of `K -> V`: the types' codes (a plain type's is its
/// size), so a reader opening the map with other types is refused.
pub(crate) fn code<K: crate::Stored, V: crate::Stored>() -> u64 {
    u64::from(K::CODE) | (u64::from(V::CODE) << 32)
}

/// The words of a map of `K -> V` in its lines.
pub(crate) type Words<K, V> = Format<<K as crate::Stored>::Word, <V as crate::Stored>::Word>;

/// How entries of `K -> V` are laid out in a line.
pub(crate) struct Format<K, V>(PhantomData<fn() -> (K, V)>);

impl<K: Pod, V: Pod> Format<K, V> {
    /// Whether key and value sit in the line itself.
    pub(crate) const INLINE: bool = size_of::<K>() + size_of::<V>() <= ENTRY_SPACE;
    /// Bytes of one entry: the key and value, or a hash and a [`Pair`] link.
    const ENTRY_BYTES: usize = if Self::INLINE {
        let b = size_of::<K>() + size_of::<V>();
        if b == 0 { 1 } else { b }
    } else {
        16
    };
    /// Entries in one line.
    pub(crate) const PER_LINE: usize = if ENTRY_SPACE / Self::ENTRY_BYTES > MAX_PER_LINE {
        MAX_PER_LINE
    } else {
        ENTRY_SPACE / Self::ENTRY_BYTES
    };

    /// Whether a partition of `buckets` buckets holding `keys` keys is past its grow
    /// point: half its entries used, where a bucket's line rarely overflows (one bucket
    /// in fifteen; one in five at three quarters, which would cost hits a line more).
    pub(crate) const fn past_grow_point(keys: usize, buckets: usize) -> bool {
        keys.saturating_mul(2) > buckets.saturating_mul(Self::PER_LINE)
    }

    /// The fewest buckets that hold `keys` keys without passing the grow point.
    pub(crate) const fn buckets_for(keys: usize) -> usize {
        keys.saturating_mul(2).div_ceil(Self::PER_LINE)
    }

    /// Byte of entry `j` within the line's payload.
    const fn at(j: usize) -> usize {
        8 + j * Self::ENTRY_BYTES
    }
}

impl BucketLine {
    /// A header line.
    pub(crate) fn header(buckets: usize, code: u64) -> BucketLine {
        let mut h = BucketLine::default();
        h.0[HEADER_BUCKETS] = buckets as u64;
        h.0[HEADER_LAYOUT] = ARRAY_LAYOUT;
        h.0[HEADER_FORMAT] = code;
        h
    }

    /// A counters line.
    pub(crate) fn counters(len: usize, sum: u64, failed_grows: u64) -> BucketLine {
        let mut c = BucketLine::default();
        c.0[COUNTERS_LEN] = len as u64;
        c.0[COUNTERS_SUM] = sum;
        c.0[COUNTERS_FAILED_GROWS] = failed_grows;
        c
    }

    /// The next line of the chain (null at the end).
    #[inline(always)]
    pub(crate) fn next(&self) -> LineLink {
        Link::from_raw(self.0[0] & !USED_MASK)
    }

    pub(crate) fn set_next(&mut self, next: LineLink) {
        self.0[0] = next.raw() | (self.0[0] & USED_MASK);
    }

    #[inline(always)]
    fn used(&self) -> u64 {
        self.0[0] & USED_MASK
    }

    /// Whether entry `j` is in use.
    #[inline(always)]
    pub(crate) fn is_used(&self, j: usize) -> bool {
        self.used() & (1 << j) != 0
    }

    /// Entries in use.
    pub(crate) fn entries(&self) -> usize {
        self.used().count_ones() as usize
    }

    /// Whether no entry is in use.
    pub(crate) fn is_empty(&self) -> bool {
        self.used() == 0
    }

    /// The entries in use.
    pub(crate) fn used_entries<K: Pod, V: Pod>(&self) -> impl Iterator<Item = usize> + '_ {
        (0..Format::<K, V>::PER_LINE).filter(|&j| self.is_used(j))
    }

    /// A free entry, if any.
    pub(crate) fn free_entry<K: Pod, V: Pod>(&self) -> Option<usize> {
        (0..Format::<K, V>::PER_LINE).find(|&j| !self.is_used(j))
    }

    fn bytes(&self) -> &[u8] {
        bytemuck::bytes_of(&self.0)
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::bytes_of_mut(&mut self.0)
    }

    /// The key of inline entry `j`.
    #[inline(always)]
    pub(crate) fn key<K: Pod, V: Pod>(&self, j: usize) -> K {
        let at = Format::<K, V>::at(j);
        bytemuck::pod_read_unaligned(&self.bytes()[at..at + size_of::<K>()])
    }

    /// The value of inline entry `j`.
    #[inline(always)]
    pub(crate) fn value<K: Pod, V: Pod>(&self, j: usize) -> V {
        let at = Format::<K, V>::at(j) + size_of::<K>();
        bytemuck::pod_read_unaligned(&self.bytes()[at..at + size_of::<V>()])
    }

    /// The hash and pair link of linked entry `j`.
    #[inline(always)]
    pub(crate) fn linked<K: Pod, V: Pod>(&self, j: usize) -> (u64, Link<Pair<K, V>>) {
        let w = Format::<K, V>::at(j) / 8;
        (self.0[w], Link::from_raw(self.0[w + 1]))
    }

    /// Puts key and value into inline entry `j`.
    pub(crate) fn put<K: Pod, V: Pod>(&mut self, j: usize, key: K, value: V) {
        let at = Format::<K, V>::at(j);
        let k = size_of::<K>();
        let bytes = self.bytes_mut();
        bytes[at..at + k].copy_from_slice(bytemuck::bytes_of(&key));
        bytes[at + k..at + k + size_of::<V>()].copy_from_slice(bytemuck::bytes_of(&value));
        self.0[0] |= 1 << j;
    }

    /// Puts a hash and a pair link into linked entry `j`.
    pub(crate) fn put_linked<K: Pod, V: Pod>(
        &mut self,
        j: usize,
        hash: u64,
        pair: Link<Pair<K, V>>,
    ) {
        let w = Format::<K, V>::at(j) / 8;
        self.0[w] = hash;
        self.0[w + 1] = pair.raw();
        self.0[0] |= 1 << j;
    }

    /// Empties entry `j` (its bytes too, so equal contents mean equal lines).
    pub(crate) fn clear<K: Pod, V: Pod>(&mut self, j: usize) {
        let at = Format::<K, V>::at(j);
        let n = Format::<K, V>::ENTRY_BYTES;
        self.bytes_mut()[at..at + n].fill(0);
        self.0[0] &= !(1 << j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_fit_the_line() {
        assert_eq!(Format::<u64, u64>::PER_LINE, 3);
        const { assert!(Format::<u64, u64>::INLINE) };
        assert_eq!(Format::<u32, [u64; 2]>::PER_LINE, 2);
        assert_eq!(Format::<u8, u8>::PER_LINE, 6);
        assert_eq!(Format::<u64, [u64; 5]>::PER_LINE, 1);
        const { assert!(!Format::<u64, [u64; 6]>::INLINE) };
        assert_eq!(Format::<u64, [u64; 6]>::PER_LINE, 3);
        assert_eq!(Format::<(), ()>::PER_LINE, 6);
    }

    #[test]
    fn entries_round_trip_and_leave_the_link_alone() {
        let next: LineLink = Link::new(64 * 1000, bi_core::runtime::LinkGeneration::new(0xBEEF));
        let mut l = BucketLine::default();
        l.set_next(next);
        l.put::<u32, [u64; 2]>(1, 7, [8, 9]);
        assert_eq!(l.next(), next);
        assert_eq!(l.free_entry::<u32, [u64; 2]>(), Some(0));
        assert_eq!(l.key::<u32, [u64; 2]>(1), 7);
        assert_eq!(l.value::<u32, [u64; 2]>(1), [8, 9]);
        l.put::<u32, [u64; 2]>(0, 1, [2, 3]);
        assert_eq!(l.free_entry::<u32, [u64; 2]>(), None);
        l.clear::<u32, [u64; 2]>(1);
        assert_eq!(l.used_entries::<u32, [u64; 2]>().collect::<Vec<_>>(), [0]);
        assert_eq!(l.next(), next);
        l.clear::<u32, [u64; 2]>(0);
        let mut only_link = BucketLine::default();
        only_link.set_next(next);
        assert_eq!(l, only_link);
    }

    #[test]
    fn linked_entries_round_trip() {
        type Big = [u64; 8];
        let mut l = BucketLine::default();
        let pair: Link<Pair<u64, Big>> = Link::new(4096, bi_core::runtime::LinkGeneration::new(3));
        l.put_linked::<u64, Big>(2, 0xABCD, pair);
        assert_eq!(l.linked::<u64, Big>(2), (0xABCD, pair));
        assert!(l.is_used(2) && !l.is_used(0));
    }
}
