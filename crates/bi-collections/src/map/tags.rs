//! Tag lines: one byte per entry of every bucket line, dense, so a miss is answered
//! from a line that stays in the cache.
//!
//! At a million keys the bucket lines do not fit a cache, and a lookup of an absent
//! key would pay a trip to memory for the one line that says "not here". The tags of
//! fourteen `u64 -> u64` buckets fit one line instead, so the tag lines of a whole
//! table (a few bytes per bucket) mostly stay cached, and a miss reads one of them.
//!
//! Each bucket has a *group* of 2, 4 or 8 bytes: byte `j` is the tag of entry `j`
//! of its bucket line (0 while the entry is empty), and the group's last byte says
//! whether the bucket has overflow lines. The tag is the low byte of the hash's high
//! half, never 0. A lookup whose tag is in no entry's byte, in a bucket without
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

/// The tag of hash `h`: the low byte of its high half (the bucket takes the low half,
/// the partition the top bits), never 0, which marks an empty entry.
#[inline(always)]
pub(crate) fn tag_of(h: u64) -> u8 {
    match (h >> 32) as u8 {
        0 => 1,
        t => t,
    }
}

/// One bucket's group: the tags of its line's entries and whether it has overflow lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Group {
    tags: [u8; 8],
}

/// Bytes of one line available to groups (the record of a line, as for buckets).
const LINE_BYTES: usize = size_of::<BucketLine>();

impl Group {
    /// Bytes of a group for entries of `K -> V`: one per entry and one for the overflow
    /// flag, rounded up to a power of two so no group straddles a word.
    pub(crate) const fn bytes<K: Pod, V: Pod>() -> usize {
        (Format::<K, V>::PER_LINE + 1).next_power_of_two()
    }

    /// Groups in one tag line.
    pub(crate) const fn per_line<K: Pod, V: Pod>() -> usize {
        LINE_BYTES / Self::bytes::<K, V>()
    }

    /// The group of bucket `b`, from its tag line.
    #[inline(always)]
    pub(crate) fn of<K: Pod, V: Pod>(line: &BucketLine, b: usize) -> Group {
        let n = Self::bytes::<K, V>();
        let at = (b % Self::per_line::<K, V>()) * n;
        let mut tags = [0u8; 8];
        tags[..n].copy_from_slice(&bytemuck::bytes_of(&line.0)[at..at + n]);
        Group { tags }
    }

    /// Writes this group as bucket `b`'s into its tag line.
    pub(crate) fn store<K: Pod, V: Pod>(&self, line: &mut BucketLine, b: usize) {
        let n = Self::bytes::<K, V>();
        let at = (b % Self::per_line::<K, V>()) * n;
        bytemuck::bytes_of_mut(&mut line.0)[at..at + n].copy_from_slice(&self.tags[..n]);
    }

    /// Sets entry `j`'s tag (0: empty).
    pub(crate) fn set(&mut self, j: usize, tag: u8) {
        self.tags[j] = tag;
    }

    /// Marks whether the bucket has overflow lines (kept in the group's last byte).
    pub(crate) fn set_chained<K: Pod, V: Pod>(&mut self, chained: bool) {
        self.tags[Self::bytes::<K, V>() - 1] = u8::from(chained);
    }

    /// Whether a key of tag `tag` may be in the bucket: an entry carries the tag, or the
    /// bucket goes on in overflow lines, whose keys have no tags here.
    #[inline(always)]
    pub(crate) fn may_hold<K: Pod, V: Pod>(&self, tag: u8) -> bool {
        let per = Format::<K, V>::PER_LINE;
        self.tags[Self::bytes::<K, V>() - 1] != 0 || self.tags[..per].contains(&tag)
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

    #[test]
    fn groups_fit_a_line_and_round_trip() {
        assert_eq!(Group::bytes::<u64, u64>(), 4);
        assert_eq!(Group::per_line::<u64, u64>(), 14);
        assert_eq!(Group::bytes::<u8, u8>(), 8);
        assert_eq!(Group::bytes::<u64, [u64; 5]>(), 2);
        let mut line = BucketLine::default();
        for b in 0..14 {
            let mut g = Group::default();
            g.set(0, b as u8 + 1);
            g.set(2, 200);
            g.set_chained::<u64, u64>(b % 3 == 0);
            g.store::<u64, u64>(&mut line, b);
        }
        for b in 0..14 {
            let g = Group::of::<u64, u64>(&line, b + 14); // the next line's bucket b
            assert!(g.may_hold::<u64, u64>(b as u8 + 1));
            assert!(g.may_hold::<u64, u64>(200));
            assert_eq!(g.may_hold::<u64, u64>(99), b % 3 == 0, "bucket {b}");
        }
    }

    #[test]
    fn tags_are_never_the_empty_mark() {
        assert_eq!(tag_of(0), 1);
        assert_eq!(tag_of(0x0000_0007_0000_0000), 7);
        assert_eq!(tag_of(0x1234_5600_ffff_ffff), 1);
    }

    #[test]
    fn tag_lines_follow_the_counters() {
        assert_eq!(tag_line::<u64, u64>(100, 0), 102);
        assert_eq!(tag_line::<u64, u64>(100, 13), 102);
        assert_eq!(tag_line::<u64, u64>(100, 14), 103);
        assert_eq!(tag_lines::<u64, u64>(100), 8);
        assert_eq!(array_lines::<u64, u64>(100), 110);
    }
}
