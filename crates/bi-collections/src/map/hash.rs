//! The fixed hash that places keys: every process that maps the region must put a key in
//! the same partition and bucket, so the hash has fixed keys (no per-process random
//! state) and a pinned implementation.

use foldhash::fast::FixedState;
use std::hash::{BuildHasher, Hash};

/// Seed of the map's hash: part of the shared format, never change it.
pub(crate) const MAP_HASH_SEED: u64 = 0x6269_5f6d_6170_0001;

/// The 64-bit hash of `key`: foldhash's fast hasher with the fixed seed
/// `MAP_HASH_SEED` (foldhash is pinned to one version, whose output is stable for one
/// platform).
///
/// ```
/// use bi_collections::map::key_hash;
///
/// assert_eq!(key_hash(&42u64), key_hash(&42u64));
/// assert_ne!(key_hash(&1u64), key_hash(&2u64));
/// ```
pub fn key_hash<K: Hash + ?Sized>(key: &K) -> u64 {
    FixedState::with_seed(MAP_HASH_SEED).hash_one(key)
}

/// Partition of a hash among `partitions` (uses the high half, so it is independent of
/// the bucket, which uses the low bits).
pub(crate) fn partition_of(hash: u64, partitions: usize) -> usize {
    (((hash >> 32) * partitions as u64) >> 32) as usize
}

/// Bucket of a hash among `buckets` (any count up to 2^32): the low half of the hash,
/// scaled to the count by one multiplication (independent of the partition, which uses
/// the high half). Any count, not only powers of two, so a table sized for `n` keys
/// takes the lines `n` keys need and no more than that.
///
/// ```
/// use bi_collections::map::{bucket_of, key_hash};
///
/// let h = key_hash(&7u64);
/// assert!(bucket_of(h, 1000) < 1000);
/// assert_eq!(bucket_of(h, 1), 0);
/// ```
#[inline(always)]
pub fn bucket_of(hash: u64, buckets: usize) -> usize {
    (((hash & 0xffff_ffff) * buckets as u64) >> 32) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_and_buckets_stay_in_range_and_spread() {
        let mut counts = [0usize; 3];
        for k in 0..3000u64 {
            let h = key_hash(&k);
            let p = partition_of(h, 3);
            counts[p] += 1;
            assert!(bucket_of(h, 64) < 64);
            assert!(bucket_of(h, 699_051) < 699_051);
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
        // An uneven count spreads too: no bucket of 7 takes more than twice its share.
        let mut per = [0usize; 7];
        for k in 0..7000u64 {
            per[bucket_of(key_hash(&k), 7)] += 1;
        }
        assert!(per.iter().all(|&c| c > 500 && c < 2000), "{per:?}");
    }
}
