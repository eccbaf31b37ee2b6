//! Property tests of the header validator and of shared-pointer bounds checks.
//!
//! The decoder is the gate between untrusted bytes and every offset the runtime computes,
//! so: it never panics on anything, it accepts what the encoder writes for any valid
//! configuration, and it rejects every single-byte corruption and every change of a field
//! (even with the checksum recomputed to match).

use bi_core::ptr::{PtrError, ShPtr};
use bi_core::region::header::{offsets, seal};
use bi_core::region::{HEADER_LEN, Header, Layout, RegionConfig, RegionError};
use proptest::prelude::*;

fn config_strategy() -> impl Strategy<Value = RegionConfig> {
    (
        prop::sample::select(vec![8usize, 16, 32, 64, 128, 256]),
        1u32..=4,
        1u32..=8,
        1u32..=6,
        1u32..=16,
        0usize..=4,
    )
        .prop_map(|(line, nodes, readers, ring_log2, roots, extra_pages)| {
            let c = RegionConfig::new(0)
                .with_line_size(line)
                .with_nodes(nodes)
                .with_readers_per_node(readers)
                .with_log_ring_entries(1 << ring_log2)
                .with_root_entries(roots);
            let min = c.min_size().unwrap();
            c.with_size(min + extra_pages * 4096)
        })
}

/// A region image: a valid header followed by zeroes.
fn image(config: &RegionConfig) -> Vec<u8> {
    let layout = Layout::compute(config).unwrap();
    let mut bytes = vec![0u8; layout.size()];
    bytes[..HEADER_LEN].copy_from_slice(&Header::new(layout).encode());
    bytes
}

/// Header fields as (offset, width in bytes).
const FIELDS: &[(usize, usize)] = &[
    (offsets::HEADER_LEN, 4),
    (offsets::SIZE, 8),
    (offsets::LINE_SIZE, 4),
    (offsets::NODES, 4),
    (offsets::READERS_PER_NODE, 4),
    (offsets::LOG_RING_ENTRIES, 4),
    (offsets::ROOT_ENTRIES, 4),
    (offsets::EXTENT_LINES, 4),
    (offsets::SECTIONS, 8),
    (offsets::SECTIONS + 8, 8),
    (offsets::SECTIONS + 16, 8),
    (offsets::SECTIONS + 24, 8),
    (offsets::SECTIONS + 32, 8),
    (offsets::SECTIONS + 40, 8),
    (offsets::SECTIONS + 48, 8),
    (offsets::SECTIONS + 56, 8),
    (offsets::SECTIONS + 64, 8),
    (offsets::SECTIONS + 72, 8),
    (offsets::SECTIONS + 80, 8),
    (offsets::SECTIONS + 88, 8),
];

proptest! {
    // Under Miri a handful of cases stands in for the full run.
    #![proptest_config(bi_kit::prop::config(512, 4))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = Header::decode(&bytes);
        let _ = bi_core::region::Region::from_bytes(&bytes);
    }

    #[test]
    fn random_bytes_behind_a_valid_magic_never_panic(
        mut bytes in prop::collection::vec(any::<u8>(), HEADER_LEN..1024),
        reseal in any::<bool>(),
    ) {
        bytes[..8].copy_from_slice(&bi_core::region::MAGIC);
        bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        if reseal {
            seal(&mut bytes);
        }
        let _ = Header::decode(&bytes);
        let _ = Header::decode_prefix(&bytes, u64::MAX);
    }

    #[test]
    fn valid_configurations_round_trip(config in config_strategy()) {
        let bytes = image(&config);
        let header = Header::decode(&bytes).unwrap();
        prop_assert_eq!(header.layout().config(), &config);
        let region = bi_core::region::Region::from_bytes(&bytes).unwrap();
        prop_assert_eq!(region.layout(), header.layout());
        // One byte fewer than declared is a truncated region.
        let short = Header::decode(&bytes[..bytes.len() - 1]);
        let is_truncated = matches!(short, Err(RegionError::Truncated { .. }));
        prop_assert!(is_truncated);
    }

    #[test]
    fn single_byte_mutations_are_rejected(
        config in config_strategy(),
        at in 0..HEADER_LEN,
        delta in 1u8..=255,
    ) {
        let mut bytes = image(&config);
        bytes[at] = bytes[at].wrapping_add(delta);
        prop_assert!(Header::decode(&bytes).is_err());
    }

    #[test]
    fn field_mutations_are_rejected_even_when_resealed(
        config in config_strategy(),
        field in 0..FIELDS.len(),
        value in prop_oneof![any::<u64>(), 0u64..4096, Just(0u64), Just(u64::MAX)],
    ) {
        let mut bytes = image(&config);
        let (at, width) = FIELDS[field];
        let old = bytes[at..at + width].to_vec();
        let new = value.to_le_bytes();
        prop_assume!(old[..] != new[..width]);
        bytes[at..at + width].copy_from_slice(&new[..width]);
        seal(&mut bytes);
        let r = Header::decode(&bytes);
        prop_assert!(r.is_err(), "field at {} set to {} accepted", at, value);
    }

    #[test]
    fn shptr_check_matches_arithmetic(
        offset in prop_oneof![any::<u64>(), 0u64..600],
        start in 0usize..300,
        len in 0usize..300,
    ) {
        let bounds = start..start + len;
        let p: ShPtr<[u32; 4]> = ShPtr::new(offset);
        let fits = offset != 0
            && offset >= start as u64
            && offset.checked_add(16).is_some_and(|end| end <= (start + len) as u64);
        match p.check(bounds.clone()) {
            Ok(at) => {
                prop_assert!(fits);
                prop_assert_eq!(at as u64, offset);
                prop_assert_eq!(at % 4, 0);
            }
            Err(PtrError::Misaligned { .. }) => prop_assert!(fits && offset % 4 != 0),
            Err(PtrError::Null) => prop_assert_eq!(offset, 0),
            Err(_) => prop_assert!(!fits),
        }
    }
}
