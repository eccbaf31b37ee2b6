//! File-backed regions: create, open, every open error from a crafted file, and roots seen
//! through two mappings of one file.
//!
//! Miri cannot map files, so every test here is ignored under it.

use bi_core::mem::MemView;
use bi_core::ptr::ShPtr;
use bi_core::region::header::{offsets, seal};
use bi_core::region::{HEADER_LEN, Region, RegionConfig, RegionError, SectionKind};
use std::path::PathBuf;

fn temp_dir() -> tempfile::TempDir {
    bi_kit::region_dir("bi-region-test")
}

fn config() -> RegionConfig {
    RegionConfig::new(1 << 17)
        .with_nodes(2)
        .with_readers_per_node(4)
        .with_root_entries(8)
}

/// Creates a valid region file, applies `edit` to its bytes (resealing the header if
/// `reseal`), and opens it.
fn open_edited(edit: impl FnOnce(&mut Vec<u8>), reseal: bool) -> Result<Region, RegionError> {
    let dir = temp_dir();
    let path = dir.path().join("r.bi");
    drop(Region::create(&path, config()).unwrap());
    let mut bytes = std::fs::read(&path).unwrap();
    edit(&mut bytes);
    if reseal {
        seal(&mut bytes);
    }
    std::fs::write(&path, &bytes).unwrap();
    Region::open(&path)
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot map files")]
fn create_then_open_round_trip() {
    let dir = temp_dir();
    let path = dir.path().join("round.bi");
    let region = Region::create(&path, config()).unwrap();
    assert_eq!(region.path(), Some(path.as_path()));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 17);
    let view = region.hardware();
    let p: ShPtr<[u64; 3]> = ShPtr::new(region.layout().heap().offset as u64 + 64);
    region.store(&view, p, &[1, 2, 3]).unwrap();
    view.writeback(p.offset() as usize, 24).unwrap();
    view.fence();
    region.set_root(&view, "triple", p).unwrap();
    drop(region);

    let again = Region::open(&path).unwrap();
    assert_eq!(again.layout().config(), &config());
    let view = again.hardware();
    let q = again.root::<[u64; 3], _>(&view, "triple").unwrap().unwrap();
    assert_eq!(again.load(&view, q).unwrap(), [1, 2, 3]);
}

/// Emulated nodes over two mappings of one region file are one machine: a store one
/// writes back is stale in the other's cache, and the other's stale read is counted,
/// because both keep the oracle's history in one file beside the region (made as long as
/// the region's lines need).
#[test]
#[cfg_attr(miri, ignore = "Miri cannot map files")]
fn emulated_nodes_over_two_mappings_share_one_history() {
    use bi_core::mem::{Emulator, EmulatorConfig};
    let dir = temp_dir();
    let path = dir.path().join("emulated.bi");
    let region = Region::create(&path, config()).unwrap();
    let other = Region::open(&path).unwrap();
    let a = region.emulated(0, |c| c.seed(1)).unwrap();
    let b = other.emulated(1, |c| c.seed(2)).unwrap();
    let layout = region.layout();
    let history = std::fs::metadata(dir.path().join("emulated.bi.history")).unwrap();
    let cfg = EmulatorConfig::new(layout.size(), 2).line_size(layout.line_size());
    assert!(history.len() >= Emulator::history_bytes(&cfg) as u64);
    let at = layout.heap().offset;
    let _: u64 = b.load(at).unwrap(); // node 1 caches the line
    a.store(at, &9u64).unwrap();
    a.writeback(at, 8).unwrap();
    a.fence();
    assert_eq!(b.load::<u64>(at).unwrap(), 0);
    assert_eq!(b.stats().stale_reads, 1);
    b.invalidate(at, 8).unwrap();
    b.fence();
    assert_eq!(b.load::<u64>(at).unwrap(), 9);
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot map files")]
fn two_mappings_see_each_others_roots() {
    let dir = temp_dir();
    let path = dir.path().join("two.bi");
    let a = Region::create(&path, config()).unwrap();
    let b = Region::open(&path).unwrap();
    let (va, vb) = (a.hardware(), b.hardware());
    let p: ShPtr<u64> = ShPtr::new(a.layout().heap().offset as u64);
    a.store(&va, p, &0xfeed).unwrap();
    va.writeback(p.offset() as usize, 8).unwrap();
    va.fence();
    a.set_root(&va, "x", p).unwrap();
    let q = b.root::<u64, _>(&vb, "x").unwrap().unwrap();
    vb.invalidate(q.offset() as usize, 8).unwrap();
    vb.fence();
    assert_eq!(b.load(&vb, q).unwrap(), 0xfeed);
    assert!(b.remove_root(&vb, "x").unwrap());
    assert_eq!(a.root::<u64, _>(&va, "x").unwrap(), None);
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot map files")]
fn io_errors_name_the_path() {
    let dir = temp_dir();
    let missing: PathBuf = dir.path().join("missing.bi");
    let err = Region::open(&missing).unwrap_err();
    match &err {
        RegionError::Io { path, op, source } => {
            assert_eq!(path, &missing);
            assert_eq!(*op, "open");
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
    assert!(err.to_string().contains("missing.bi"), "{err}");
    assert!(std::error::Error::source(&err).is_some());

    let in_missing_dir = dir.path().join("no/such/dir/r.bi");
    assert!(matches!(
        Region::create(&in_missing_dir, config()),
        Err(RegionError::Io { op: "create", .. })
    ));
    // Bad configurations are refused before any file is touched.
    let bad = dir.path().join("bad.bi");
    assert!(matches!(
        Region::create(&bad, config().with_nodes(0)),
        Err(RegionError::InvalidParameter { name: "nodes", .. })
    ));
    assert!(!bad.exists());
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot map files")]
fn every_open_error_from_a_crafted_file() {
    use RegionError as E;
    let put32 =
        |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let put64 =
        |b: &mut Vec<u8>, at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());

    let r = open_edited(|b| b[..8].copy_from_slice(b"NOTAREGN"), false);
    assert!(matches!(r, Err(E::BadMagic { .. })), "{r:?}");
    // A file written by format version 3 (no extent table) is refused.
    let r = open_edited(|b| put32(b, offsets::VERSION, 3), false);
    assert!(
        matches!(
            r,
            Err(E::UnsupportedVersion {
                found: 3,
                supported: 4
            })
        ),
        "{r:?}"
    );
    let r = open_edited(|b| b.truncate(100), false);
    assert!(
        matches!(
            r,
            Err(E::Truncated {
                available: 100,
                needed: 152
            })
        ),
        "{r:?}"
    );
    let r = open_edited(|b| b.truncate(0), false);
    assert!(matches!(r, Err(E::Truncated { available: 0, .. })), "{r:?}");
    let r = open_edited(|b| b.truncate(1 << 16), false);
    assert!(
        matches!(
            r,
            Err(E::Truncated {
                available: 65536,
                needed: 131072
            })
        ),
        "file shorter than the declared size: {r:?}"
    );
    let r = open_edited(|b| put64(b, offsets::SIZE, 8192), true);
    assert!(matches!(r, Err(E::TooSmall { size: 8192, .. })), "{r:?}");
    let r = open_edited(|b| put32(b, offsets::ROOT_ENTRIES, 9), true);
    assert!(
        matches!(
            r,
            Err(E::LayoutMismatch {
                section: SectionKind::RootDirectory,
                ..
            })
        ),
        "{r:?}"
    );
    let r = open_edited(|b| put32(b, offsets::LINE_SIZE, 100), true);
    assert!(matches!(r, Err(E::BadLineSize { found: 100 })), "{r:?}");
    let r = open_edited(|b| b[HEADER_LEN - 9] ^= 0x10, false);
    assert!(matches!(r, Err(E::ChecksumMismatch { .. })), "{r:?}");
    let r = open_edited(|b| b[offsets::CHECKSUM] ^= 1, false);
    assert!(matches!(r, Err(E::ChecksumMismatch { .. })), "{r:?}");
    // A section that starts inside the one before it.
    let r = open_edited(
        |b| {
            let at = offsets::SECTIONS + 16; // reader table offset
            let off = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
            put64(b, at, off - 64);
        },
        true,
    );
    assert!(
        matches!(
            r,
            Err(E::BadSection {
                section: SectionKind::ReaderTable,
                ..
            })
        ),
        "{r:?}"
    );
    // A longer file than the region is fine: only the declared size is mapped.
    let r = open_edited(|b| b.extend_from_slice(&[0; 4096]), false);
    assert_eq!(r.unwrap().layout().size(), 1 << 17);
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot map files")]
fn error_messages_are_informative() {
    let e = open_edited(|b| b[8] = 7, false).unwrap_err();
    assert_eq!(
        e.to_string(),
        "region format version 7 is not supported (this build reads version 4)"
    );
    let e = open_edited(|b| b.truncate(4096), false).unwrap_err();
    assert_eq!(
        e.to_string(),
        "region is truncated: 4096 bytes available, at least 131072 needed"
    );
}

#[test]
#[cfg_attr(miri, ignore)] // maps files
fn processes_opening_or_creating_one_file_at_once_all_get_the_region() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("race{round}.region"));
        let layouts: Vec<_> = std::thread::scope(|s| {
            let opens: Vec<_> = (0..6)
                .map(|_| s.spawn(|| Region::open_or_create(&path, config()).map(|r| *r.layout())))
                .collect();
            opens.into_iter().map(|t| t.join().unwrap()).collect()
        });
        for l in &layouts {
            assert_eq!(
                l.as_ref().unwrap(),
                layouts[0].as_ref().unwrap(),
                "round {round}"
            );
        }
    }
}

/// A process that opens a region file at any moment finds it whole or absent, never half
/// made (a file at the path whose length or header is not yet written), so a process
/// opening a pool another is creating never fails on its header.
#[test]
#[cfg_attr(miri, ignore)] // maps files
fn a_region_file_is_whole_from_the_moment_it_appears() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("appear{round}.region"));
        // The watcher looks once before the creation starts, then as often as it can.
        let started = std::sync::Barrier::new(2);
        let looks = std::thread::scope(|s| {
            let watcher = s.spawn(|| {
                let mut looks = 0u64;
                loop {
                    looks += 1;
                    if looks == 2 {
                        started.wait();
                    }
                    match Region::open(&path) {
                        Ok(region) => return (looks, *region.layout()),
                        Err(RegionError::Io { source, .. })
                            if source.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => panic!("round {round}, look {looks}: a region half made: {e}"),
                    }
                }
            });
            started.wait();
            let made = Region::create(&path, config()).unwrap();
            let (looks, layout) = watcher.join().unwrap();
            assert_eq!(layout, *made.layout());
            looks
        });
        assert!(looks > 1, "round {round}: the watcher looked only once");
        // Nothing left beside the region.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [path.file_name().unwrap()], "round {round}");
    }
}

/// A region made in place (on a file system without hard links, where the link step
/// falls back to it) on a path another process took first is refused as taken, and the
/// file there is left as it was.
#[test]
#[cfg_attr(miri, ignore)] // maps files
fn a_region_made_in_place_on_a_taken_path_is_refused_as_taken() {
    let dir = temp_dir();
    let path = dir.path().join("taken.region");
    std::fs::write(&path, b"someone else's").unwrap();
    let made = Region::create_stepwise(&path, config(), false, &mut || {});
    assert!(
        matches!(&made, Err(RegionError::AlreadyExists { path: p }) if *p == path),
        "{made:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"someone else's");
}

/// Runs `test` with a loop device over a file of `len` bytes, and detaches it after.
fn with_loop_device(len: u64, test: impl FnOnce(&str) + std::panic::UnwindSafe) {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("disk.img");
    std::fs::File::create(&image).unwrap().set_len(len).unwrap();
    let out = std::process::Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&image)
        .output()
        .expect("losetup runs");
    assert!(out.status.success(), "losetup: {out:?}");
    let device = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let result = std::panic::catch_unwind(|| test(&device));
    let _ = std::process::Command::new("losetup")
        .arg("-d")
        .arg(&device)
        .status();
    result.unwrap();
}

/// A region on a block device: made as large as the device (not the configured size),
/// found again by `open`, never remade over by a creation, and made anew by `fresh`; a
/// device that is not a whole number of lines gets the whole lines it holds. Needs root
/// and a free loop device, so it is run by hand:
/// `cargo test -p bi-core --test region_file -- --ignored`.
#[test]
#[ignore = "needs root and losetup"]
fn a_region_on_a_loop_device_takes_the_device_size() {
    with_loop_device(8 << 20, |device| {
        let config = RegionConfig::new(1 << 20).with_nodes(2);
        let made = Region::open_or_create(device, config).unwrap();
        assert_eq!(
            made.layout().size(),
            8 << 20,
            "the device's size, not the config's"
        );
        drop(made);
        let opened = Region::open(device).unwrap();
        assert_eq!(opened.layout().size(), 8 << 20);
        assert!(matches!(
            Region::create(device, config),
            Err(RegionError::AlreadyExists { .. })
        ));
        // Made anew over what it held, still as large as the device.
        let fresh = Region::fresh(Some(std::path::Path::new(device)), config).unwrap();
        assert_eq!(fresh.layout().size(), 8 << 20);
    });
    // Half a line past 8 MiB (loop devices are whole 512-byte sectors).
    with_loop_device((8 << 20) + 512, |device| {
        let config = RegionConfig::new(1 << 20)
            .with_nodes(2)
            .with_line_size(1024);
        let made = Region::open_or_create(device, config).unwrap();
        assert_eq!(made.layout().size(), 8 << 20);
    });
}

/// A file that is not a region (its magic is wrong) is reported by `open_or_create`
/// after a bounded wait for a header that might still be coming, and left as it was: it
/// is neither created over nor formatted like a device.
#[test]
#[cfg_attr(miri, ignore = "Miri cannot map files")]
fn open_or_create_reports_a_file_that_is_not_a_region_and_leaves_it_alone() {
    let dir = temp_dir();
    let path = dir.path().join("r.bi");
    drop(Region::create(&path, config()).unwrap());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[..8].copy_from_slice(b"notaregn");
    std::fs::write(&path, &bytes).unwrap();
    let err = Region::open_or_create(&path, config()).unwrap_err();
    assert!(matches!(err, RegionError::BadMagic { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the file was changed");
}

/// A region file whose header another process has not finished writing yet is opened
/// once the header is whole: `open_or_create` reads it again for a while rather than
/// reporting the half-written header.
#[test]
#[cfg_attr(miri, ignore = "Miri cannot map files")]
fn open_or_create_waits_for_a_header_being_written() {
    let dir = temp_dir();
    let path = dir.path().join("r.bi");
    let whole = Region::create(&path, config()).unwrap();
    let layout = *whole.layout();
    drop(whole);
    let bytes = std::fs::read(&path).unwrap();
    let mut half = bytes.clone();
    half[..HEADER_LEN].fill(0);
    std::fs::write(&path, &half).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            // In place, as the creating process writes it: the file never shrinks.
            let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            std::io::Write::write_all(&mut file, &bytes[..HEADER_LEN]).unwrap();
        });
        let opened = Region::open_or_create(&path, config()).unwrap();
        assert_eq!(*opened.layout(), layout);
    });
}
