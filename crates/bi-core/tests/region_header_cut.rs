//! Region headers cut short: a crash after the first `k` bytes of a header write reached
//! the file, for every `k` from 0 to `HEADER_LEN`, over a new file's zeros and over the
//! header of a region of another configuration. Every cut opens as exactly the old
//! region or exactly the new one, and only when the file's first `HEADER_LEN` bytes are
//! that region's whole header; every other cut is refused with the error the first
//! broken field calls for, never a panic, an I/O error or a mixture of the two layouts.
//! `Header::decode`, `Region::from_bytes` and `Region::open` on a file agree on each.
//!
//! Miri cannot map files, so every test here is ignored under it.

use bi_core::region::{HEADER_LEN, Header, Layout, Region, RegionConfig, RegionError};
use std::path::Path;

fn temp_dir() -> tempfile::TempDir {
    bi_kit::region_dir("bi-header-cut")
}

fn small() -> Layout {
    Layout::compute(
        &RegionConfig::new(1 << 17)
            .with_nodes(2)
            .with_readers_per_node(4)
            .with_root_entries(8),
    )
    .unwrap()
}

fn large() -> Layout {
    Layout::compute(
        &RegionConfig::new(1 << 18)
            .with_line_size(128)
            .with_nodes(3)
            .with_readers_per_node(2)
            .with_log_ring_entries(32),
    )
    .unwrap()
}

/// The image of a whole region of `layout`: its header, then zeros.
fn image(layout: Layout) -> Vec<u8> {
    let mut bytes = vec![0u8; layout.size()];
    bytes[..HEADER_LEN].copy_from_slice(&Header::new(layout).encode());
    bytes
}

/// What each way of opening `bytes` gives: `Header::decode`, `Region::from_bytes` and
/// `Region::open` on a file holding them, which must agree.
fn open_all(bytes: &[u8], path: &Path) -> Result<Layout, RegionError> {
    let decoded = Header::decode(bytes).map(|h| *h.layout());
    let copied = Region::from_bytes(bytes).map(|r| *r.layout());
    std::fs::write(path, bytes).unwrap();
    let opened = Region::open(path).map(|r| *r.layout());
    for (how, other) in [("from_bytes", &copied), ("open", &opened)] {
        match (&decoded, other) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{how} opened another layout"),
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string(), "{how} refused differently")
            }
            (a, b) => panic!("decode gave {a:?}, {how} gave {b:?}"),
        }
    }
    decoded
}

/// Writes the first `k` bytes of `new`'s header over `before` for every `k`, opens each
/// result, and returns what each `k` gave.
fn cut_at_every_byte(new: Layout, before: &[u8]) -> Vec<Result<Layout, RegionError>> {
    let dir = temp_dir();
    let path = dir.path().join("cut.bi");
    let header = Header::new(new).encode();
    (0..=HEADER_LEN)
        .map(|k| {
            let mut bytes = before.to_vec();
            bytes[..k].copy_from_slice(&header[..k]);
            open_all(&bytes, &path)
        })
        .collect()
}

/// The smallest `k` from which the cut file's header equals `new`'s whole header: the
/// header's last bytes may happen to equal what was there before.
fn whole_from(new: Layout, before: &[u8]) -> usize {
    let header = Header::new(new).encode();
    (0..=HEADER_LEN)
        .find(|&k| header[k..] == before[k..HEADER_LEN])
        .unwrap()
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot map files")]
fn a_header_cut_over_a_new_files_zeros_opens_only_when_whole() {
    for new in [small(), large()] {
        let zeros = vec![0u8; new.size()];
        let whole = whole_from(new, &zeros);
        assert!(
            whole > HEADER_LEN - 8,
            "only checksum bytes can match the zeros"
        );
        for (k, got) in cut_at_every_byte(new, &zeros).into_iter().enumerate() {
            match got {
                Ok(layout) => {
                    assert!(k >= whole, "cut at {k} opened");
                    assert_eq!(layout, new);
                }
                // Part of the magic.
                Err(RegionError::BadMagic { .. }) if k < 8 => {}
                // The magic, and the version's low byte not yet.
                Err(RegionError::UnsupportedVersion { found: 0, .. }) if k == 8 => {}
                // Everything the checksum covers may be there; the checksum is not.
                Err(RegionError::ChecksumMismatch { .. }) if (9..whole).contains(&k) => {}
                Err(e) => panic!("cut at {k}: {e}"),
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot map files")]
fn a_header_cut_over_another_regions_header_opens_as_one_of_them_never_a_mixture() {
    for (new, old) in [(small(), large()), (large(), small())] {
        // The file keeps the larger length of the two: both regions fit in it.
        let mut before = image(old);
        before.resize(old.size().max(new.size()), 0);
        let old_header = Header::new(old).encode();
        let new_header = Header::new(new).encode();
        // Up to here the new header writes the bytes the old one already has.
        let same = (0..HEADER_LEN)
            .find(|&i| old_header[i] != new_header[i])
            .unwrap();
        assert!(same >= 16, "magic, version and header length are common");
        let whole = whole_from(new, &before);
        assert!(whole > same);
        for (k, got) in cut_at_every_byte(new, &before).into_iter().enumerate() {
            match got {
                Ok(layout) if k <= same => assert_eq!(layout, old, "cut at {k}"),
                Ok(layout) if k >= whole => assert_eq!(layout, new, "cut at {k}"),
                Ok(layout) => panic!("cut at {k} opened as {layout:?}: a mixture"),
                Err(RegionError::ChecksumMismatch { .. }) if same < k && k < whole => {}
                Err(e) => panic!("cut at {k}: {e}"),
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot map files")]
fn a_file_cut_short_is_refused_at_every_length_up_to_the_header() {
    let dir = temp_dir();
    let path = dir.path().join("short.bi");
    for new in [small(), large()] {
        let full = image(new);
        for len in 0..=HEADER_LEN {
            match open_all(&full[..len], &path) {
                Err(RegionError::Truncated { available, needed }) => {
                    let want = if len < HEADER_LEN {
                        HEADER_LEN
                    } else {
                        new.size()
                    };
                    assert_eq!((available, needed), (len as u64, want as u64));
                }
                other => panic!("a file of {len} bytes: {other:?}"),
            }
        }
        // One byte short of the region, and whole.
        let short = open_all(&full[..new.size() - 1], &path);
        assert!(
            matches!(short, Err(RegionError::Truncated { .. })),
            "{short:?}"
        );
        assert_eq!(open_all(&full, &path).unwrap(), new);
    }
}
