//! Seeds for randomized tests: which ones a test runs, and a generator for each named
//! stream of a seed.

use rand::SeedableRng;
use rand::rngs::SmallRng;
use std::ops::Range;

/// The environment variable that pins every randomized test to one seed.
const VAR: &str = "BI_SEED";

/// The seeds a randomized test runs: `0..full` normally, `0..miri` under Miri (every
/// run is interpreted there), and only `k` when the environment sets `BI_SEED=k`, to
/// rerun the seed a failure named. So a failing run should name its seed, as in
/// `"seed {seed}: ..."` in its assertion messages: `BI_SEED=<seed> cargo test <name>`
/// then reruns that seed alone.
///
/// Assertions over all the seeds together (some seed saw an effect) need the whole
/// range; with one seed only the per-seed assertions mean anything.
///
/// # Panics
///
/// If `BI_SEED` is set to anything but a number below `u64::MAX`.
///
/// ```
/// use rand::Rng;
///
/// let seeds = bi_kit::seeds(24, 2);
/// if std::env::var_os("BI_SEED").is_none() {
///     assert_eq!(seeds, if cfg!(miri) { 0..2 } else { 0..24 });
/// }
/// for seed in seeds {
///     let batch = bi_kit::rng(seed, "batches").random_range(1..=8);
///     assert!(batch <= 8, "seed {seed}: a batch of {batch}");
/// }
/// ```
#[track_caller]
pub fn seeds(full: u64, miri: u64) -> Range<u64> {
    match std::env::var_os(VAR) {
        None => 0..crate::under_miri(full, miri),
        Some(v) => match v.to_str().and_then(parse) {
            Some(k) => k..k + 1,
            None => panic!("{VAR}={v:?}: expected a seed, a number such as 3"),
        },
    }
}

/// A seed from `BI_SEED`'s value; `u64::MAX` has no range of one after it.
fn parse(v: &str) -> Option<u64> {
    v.parse().ok().filter(|&k| k < u64::MAX)
}

/// The generator of one named stream of `seed` (`rng(seed, "producer")`,
/// `rng(seed, "consumer")`): two streams of a seed, or one stream of two seeds, never
/// share a sequence, and no test has to invent constants to keep them apart.
///
/// The same seed and stream give the same sequence on every run on one platform and
/// version of rand (all that `SmallRng` promises), which is what rerunning a seed needs.
///
/// ```
/// use rand::Rng;
///
/// let draw = |seed, stream| -> [u64; 4] {
///     let mut rng = bi_kit::rng(seed, stream);
///     std::array::from_fn(|_| rng.random())
/// };
/// assert_eq!(draw(7, "producer"), draw(7, "producer"));
/// assert_ne!(draw(7, "producer"), draw(7, "consumer"));
/// assert_ne!(draw(7, "producer"), draw(8, "producer"));
/// ```
pub fn rng(seed: u64, stream: &str) -> SmallRng {
    SmallRng::seed_from_u64(mix(seed) ^ fnv1a(stream.as_bytes()))
}

/// 64-bit FNV-1a: a hash of a stream's name that, unlike std's `DefaultHasher`, stays
/// the same across releases.
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    h
}

/// SplitMix64's finalizer, a bijection: neighbouring seeds end up far apart, so a small
/// seed of one stream does not meet a small seed of another.
const fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bi_seed_values() {
        assert_eq!(parse("3"), Some(3));
        assert_eq!(parse("0"), Some(0));
        for bad in ["", " 3", "-1", "0x3", "three", "18446744073709551615"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn fnv1a_matches_the_reference_values() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn streams_and_seeds_give_distinct_generator_seeds() {
        let mut all = std::collections::HashSet::new();
        for seed in 0..64 {
            for stream in ["", "a", "b", "producer", "consumer", "client 0", "client 1"] {
                assert!(all.insert(mix(seed) ^ fnv1a(stream.as_bytes())));
            }
        }
    }
}
