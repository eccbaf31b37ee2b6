//! Opens a region from arbitrary bytes. Every input must give `Ok` or `Err`: a panic, an
//! out-of-bounds access or an allocation the input did not pay for is a bug.
//!
//! Raw bytes almost never carry a valid checksum, so half of the inputs are read as a
//! recipe instead: a small valid configuration, then byte patches to the header and the
//! root directory, then an optional re-seal of the checksum and a truncation. That drives
//! the decoder past the checksum into the parameter, section-table and root checks.

#![no_main]

use bi_core::region::{HEADER_LEN, Header, Region, RegionConfig, header};
use libfuzzer_sys::fuzz_target;

fn open(data: &[u8]) {
    // The prefix decoder with a claimed length far beyond the data must not trust it.
    let _ = Header::decode_prefix(data, u64::MAX);
    let Ok(header) = Header::decode(data) else {
        return;
    };
    assert!(header.layout().size() <= data.len());
    let Ok(region) = Region::from_bytes(data) else {
        return;
    };
    // A valid header: the root directory is still arbitrary bytes. Look-ups may fail, but
    // only with an error.
    let view = region.hardware();
    let _ = region.roots(&view);
    if let Ok(Some(ptr)) = region.root::<[u64; 4], _>(&view, "root") {
        let _ = region.load(&view, ptr);
    }
}

fn recipe(data: &[u8]) {
    let mut p = [0u8; 8];
    let n = data.len().min(8);
    p[..n].copy_from_slice(&data[..n]);
    let config = RegionConfig::new(0)
        .with_line_size(8 << (p[0] % 6))
        .with_nodes(1 + u32::from(p[1] % 4))
        .with_readers_per_node(1 + u32::from(p[2] % 4))
        .with_log_ring_entries(2 << (p[3] % 5))
        .with_root_entries(1 + u32::from(p[4] % 8));
    let Ok(min) = config.min_size() else { return };
    let Ok(region) = Region::anonymous(config.with_size(min + usize::from(p[5] % 3) * 4096)) else {
        return;
    };
    let mut bytes = region.to_bytes();
    let roots = region.layout().root_directory();
    let patches = data.get(8..).unwrap_or_default();
    for patch in patches.as_chunks::<3>().0 {
        let pos = usize::from(u16::from_le_bytes([patch[0], patch[1]]));
        // Even positions land in the header, odd ones in the root directory.
        let at = if pos % 2 == 0 {
            (pos / 2) % HEADER_LEN
        } else {
            roots.offset + (pos / 2) % roots.len
        };
        bytes[at] = patch[2];
    }
    if p[6] & 1 == 1 {
        header::seal(&mut bytes);
    }
    let cut = usize::from(p[7] % 4) * 37;
    bytes.truncate(bytes.len().saturating_sub(cut));
    open(&bytes);
}

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((mode, rest)) if mode % 2 == 1 => recipe(rest),
        _ => open(data),
    }
});
