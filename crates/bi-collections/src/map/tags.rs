//! Tag lines: a few bits per entry of every bucket line, dense, so a miss is answered
//! from a line that stays in the cache.
//!
//! At a million keys the bucket lines do not fit a cache, and a lookup of an absent
//! key would pay a trip to memory for the one line that says "not here". The tags of
//! 28 `u64 -> u64` buckets fit one line instead, so the tag lines of a whole table
//! (two bytes per bucket) mostly stay cached, and a miss reads one of them.
//!
//! Each bucket has a *group*, a 16-bit word (32-bit for formats of more than three
//! entries a line): bits `j w .. (j + 1) w` hold the tag of entry `j` of its bucket line
//! (0 while the entry is empty; `w` is 5 for three entries a line), and the top bit says
//! whether the bucket has overflow lines. A tag is the low `w` bits of the hash's high
//! half, never 0. A lookup whose tag is in no entry's bits, in a bucket without
//! overflow lines, is absent from the version of the tag line it read; anything else
//! reads the bucket's lines as before. Tags only ever answer "absent", so a tag line
//! older or newer than the bucket line a lookup would read is harmless: the answer is
//! that of the tag line's version, which is at most one staleness bound old like any
//! line (the writer rewrites a tag line in the commit that rewrites its bucket's line,
//! so it is logged and every node's pass drops it).
//!
//! The tag lines follow the counters line in the bucket array:
//!
//! ```text
//! line 0                  header
//! lines 1 ..= B           bucket lines
//! line B + 1              counters
//! lines B + 2 ..          tag lines, GROUPS_PER_LINE buckets each
//! ```

use super::bucket::{BucketLine, Format, counters_line};
use bytemuck::Pod;

/// Bytes of one line available to groups (the record of a line, as for buckets).
const LINE_BYTES: usize = size_of::<BucketLine>();

/// One bucket's group: the tags of its line's entries and whether it has overflow lines,
/// as the bits of a 16-bit word (32-bit for formats of more than three entries a line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Group(u32);

impl Group {
    /// Bytes of a group for entries of `K -> V`: 2 for up to three entries a line, 4
    /// for more.
    pub(crate) const fn bytes<K: Pod, V: Pod>() -> usize {
        if Format::<K, V>::PER_LINE <= 3 { 2 } else { 4 }
    }

    /// Bits of one entry's tag: what the group has left after the overflow flag, shared
    /// out (5 bits for three `u64 -> u64` entries, 15 for one entry a line, the most).
    const fn tag_bits<K: Pod, V: Pod>() -> u32 {
        ((Self::bytes::<K, V>() * 8 - 1) / Format::<K, V>::PER_LINE) as u32
    }

    /// The overflow flag: the group's top bit.
    const fn chained_bit<K: Pod, V: Pod>() -> u32 {
        1 << (Self::bytes::<K, V>() * 8 - 1)
    }

    /// Groups in one tag line.
    pub(crate) const fn per_line<K: Pod, V: Pod>() -> usize {
        LINE_BYTES / Self::bytes::<K, V>()
    }

    /// The tag of hash `h`: the low bits of its high half (the bucket takes the low half,
    /// the partition the top bits), never 0, which marks an empty entry.
    #[inline(always)]
    pub(crate) fn tag<K: Pod, V: Pod>(h: u64) -> u32 {
        let mask = (1u32 << Self::tag_bits::<K, V>()) - 1;
        match (h >> 32) as u32 & mask {
            0 => 1,
            t => t,
        }
    }

    /// The group of bucket `b`, from its tag line.
    #[inline(always)]
    pub(crate) fn of<K: Pod, V: Pod>(line: &BucketLine, b: usize) -> Group {
        let n = Self::bytes::<K, V>();
        let at = (b % Self::per_line::<K, V>()) * n;
        let mut word = [0u8; 4];
        word[..n].copy_from_slice(&bytemuck::bytes_of(&line.0)[at..at + n]);
        Group(u32::from_le_bytes(word))
    }

    /// Writes this group as bucket `b`'s into its tag line.
    pub(crate) fn store<K: Pod, V: Pod>(&self, line: &mut BucketLine, b: usize) {
        let n = Self::bytes::<K, V>();
        let at = (b % Self::per_line::<K, V>()) * n;
        bytemuck::bytes_of_mut(&mut line.0)[at..at + n].copy_from_slice(&self.0.to_le_bytes()[..n]);
    }

    /// Sets entry `j`'s tag ([`tag`](Self::tag), or 0: empty).
    pub(crate) fn set<K: Pod, V: Pod>(&mut self, j: usize, tag: u32) {
        let bits = Self::tag_bits::<K, V>();
        let mask = ((1u32 << bits) - 1) << (j as u32 * bits);
        self.0 = (self.0 & !mask) | ((tag << (j as u32 * bits)) & mask);
    }

    /// Marks whether the bucket has overflow lines.
    pub(crate) fn set_chained<K: Pod, V: Pod>(&mut self, chained: bool) {
        let bit = Self::chained_bit::<K, V>();
        self.0 = if chained { self.0 | bit } else { self.0 & !bit };
    }

    /// Whether a key of tag `tag` may be in the bucket: an entry carries the tag, or the
    /// bucket goes on in overflow lines, whose keys have no tags here.
    #[inline(always)]
    pub(crate) fn may_hold<K: Pod, V: Pod>(&self, tag: u32) -> bool {
        let bits = Self::tag_bits::<K, V>();
        let mask = (1u32 << bits) - 1;
        self.0 & Self::chained_bit::<K, V>() != 0
            || (0..Format::<K, V>::PER_LINE as u32).any(|j| (self.0 >> (j * bits)) & mask == tag)
    }
}

/// The index in the array of the tag line holding bucket `b`'s group.
#[inline(always)]
pub(crate) fn tag_line<K: Pod, V: Pod>(buckets: usize, b: usize) -> usize {
    counters_line(buckets) + 1 + b / Group::per_line::<K, V>()
}

/// Tag lines of an array of `buckets` buckets.
pub(crate) fn tag_lines<K: Pod, V: Pod>(buckets: usize) -> usize {
    buckets.div_ceil(Group::per_line::<K, V>())
}

/// Lines of a whole array of `buckets` buckets: header, buckets, counters, tags.
pub(crate) fn array_lines<K: Pod, V: Pod>(buckets: usize) -> usize {
    counters_line(buckets) + 1 + tag_lines::<K, V>(buckets)
}

#[cfg(test)]
mod tests {
    use super::*;

    type U = u64;

    #[test]
    fn groups_fit_a_line_and_round_trip() {
        assert_eq!((Group::bytes::<U, U>(), Group::per_line::<U, U>()), (2, 28));
        assert_eq!(Group::tag_bits::<U, U>(), 5);
        assert_eq!(
            (Group::bytes::<u8, u8>(), Group::tag_bits::<u8, u8>()),
            (4, 5)
        );
        assert_eq!(Group::tag_bits::<u64, [u64; 5]>(), 15);
        let mut line = BucketLine::default();
        for b in 0..28 {
            let mut g = Group::default();
            g.set::<U, U>(0, b as u32 + 1);
            g.set::<U, U>(2, 31);
            g.set_chained::<U, U>(b % 3 == 0);
            g.store::<U, U>(&mut line, b);
        }
        for b in 0..28 {
            let mut g = Group::of::<U, U>(&line, b + 28); // the next line's bucket b
            assert!(g.may_hold::<U, U>(b as u32 + 1) && g.may_hold::<U, U>(31));
            assert_eq!(
                g.may_hold::<U, U>(30 - b as u32 % 2),
                b % 3 == 0,
                "bucket {b}"
            );
            g.set::<U, U>(2, 0);
            g.set_chained::<U, U>(false);
            assert!(!g.may_hold::<U, U>(31) && g.may_hold::<U, U>(b as u32 + 1));
        }
    }

    #[test]
    fn tags_are_never_the_empty_mark_and_stay_in_their_bits() {
        assert_eq!(Group::tag::<U, U>(0), 1);
        assert_eq!(Group::tag::<U, U>(0x0000_0007_0000_0000), 7);
        assert_eq!(Group::tag::<U, U>(0x1234_5660_ffff_ffff), 1);
        assert!((0..1000u64).all(|k| (1..32).contains(&Group::tag::<U, U>(k << 29))));
        let mut g = Group::default();
        g.set::<U, U>(1, 31);
        assert!(!g.may_hold::<U, U>(1) && g.may_hold::<U, U>(31));
    }

    #[test]
    fn tag_lines_follow_the_counters() {
        assert_eq!(tag_line::<U, U>(100, 0), 102);
        assert_eq!(tag_line::<U, U>(100, 27), 102);
        assert_eq!(tag_line::<U, U>(100, 28), 103);
        assert_eq!(tag_lines::<U, U>(100), 4);
        assert_eq!(array_lines::<U, U>(100), 106);
    }

    /// A partition grows to the largest power of two of buckets whose array is a line
    /// array: every entry format's array of that many buckets fits, twice as many do not.
    #[test]
    fn the_largest_table_is_the_largest_that_fits_a_line_array() {
        use super::super::write::MAX_BUCKETS;
        use bi_core::runtime::lines::MAX_LINES;
        assert!(MAX_BUCKETS.is_power_of_two());
        for (fits, doubled) in [
            (
                array_lines::<U, U>(MAX_BUCKETS),
                array_lines::<U, U>(2 * MAX_BUCKETS),
            ),
            (
                array_lines::<u8, u8>(MAX_BUCKETS),
                array_lines::<u8, u8>(2 * MAX_BUCKETS),
            ),
            (
                array_lines::<U, [U; 5]>(MAX_BUCKETS),
                array_lines::<U, [U; 5]>(2 * MAX_BUCKETS),
            ),
        ] {
            assert!(fits <= MAX_LINES && doubled > MAX_LINES, "{fits} {doubled}");
        }
    }
}
