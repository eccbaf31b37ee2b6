//! Region tests that run everywhere, Miri included (no files, no mappings).

use super::header::{offsets, seal};
use super::roots::MAX_ROOT_NAME;
use super::*;
use crate::line::LineSize;
use crate::mem::MemError;
use crate::ptr::PtrError;
use std::sync::Mutex as StdMutex;

/// What a [`TraceView`] was asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Load(usize),
    Store(usize),
    Writeback(usize, usize),
    Invalidate(usize, usize),
    Fence,
}

/// A coherent view that records every operation, to check the root protocol's order of
/// stores, write-backs, invalidations and fences.
#[derive(Clone)]
struct TraceView {
    mem: Arc<Backing>,
    ops: Arc<StdMutex<Vec<Op>>>,
}

impl TraceView {
    fn new(region: &Region) -> TraceView {
        TraceView {
            mem: region.backing().clone(),
            ops: Arc::default(),
        }
    }
    fn take(&self) -> Vec<Op> {
        std::mem::take(&mut *self.ops.lock().unwrap())
    }
    fn log(&self, op: Op) {
        self.ops.lock().unwrap().push(op);
    }
}

impl MemView for TraceView {
    fn size(&self) -> usize {
        self.mem.size()
    }
    fn line_size(&self) -> LineSize {
        LineSize::X86
    }
    fn load<T: Pod>(&self, offset: usize) -> Result<T, MemError> {
        self.log(Op::Load(offset));
        let mut v = T::zeroed();
        self.mem
            .load_bytes(offset, bytemuck::bytes_of_mut(&mut v))?;
        Ok(v)
    }
    fn store<T: Pod>(&self, offset: usize, value: &T) -> Result<(), MemError> {
        self.log(Op::Store(offset));
        self.mem.store_bytes(offset, bytemuck::bytes_of(value))
    }
    fn writeback(&self, offset: usize, len: usize) -> Result<(), MemError> {
        self.log(Op::Writeback(offset, len));
        crate::mem::check_range(offset, len, self.mem.size())
    }
    fn invalidate(&self, offset: usize, len: usize) -> Result<(), MemError> {
        self.log(Op::Invalidate(offset, len));
        crate::mem::check_range(offset, len, self.mem.size())
    }
    fn flush(&self, offset: usize, len: usize) -> Result<(), MemError> {
        self.invalidate(offset, len)
    }
    fn fence(&self) {
        self.log(Op::Fence);
    }
}

fn small() -> RegionConfig {
    RegionConfig::new(16 << 10)
        .with_nodes(2)
        .with_readers_per_node(2)
        .with_log_ring_entries(16)
        .with_root_entries(4)
}

fn heap_ptr<T>(region: &Region, index: u64) -> ShPtr<T> {
    ShPtr::new(region.layout().heap().offset as u64 + index * 64)
}

#[test]
#[cfg_attr(miri, ignore = "Miri runs isolated from the file system")]
fn create_replacing_starts_over_on_a_file_that_holds_a_region() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool.bi");
    Region::create(&path, RegionConfig::new(1 << 20)).unwrap();
    let again = Region::create_replacing(&path, RegionConfig::new(2 << 20)).unwrap();
    assert_eq!(again.layout().size(), 2 << 20);
    assert_eq!(Region::open(&path).unwrap().layout().size(), 2 << 20);
}

#[test]
fn anonymous_round_trip() {
    let region = Region::anonymous(small()).unwrap();
    let view = TraceView::new(&region);
    let p: ShPtr<[u64; 2]> = heap_ptr(&region, 1);
    region.store(&view, p, &[7, 8]).unwrap();
    region.set_root(&view, "pair", p).unwrap();

    let copy = Region::from_bytes(&region.to_bytes()).unwrap();
    assert_eq!(copy.layout(), region.layout());
    let cview = TraceView::new(&copy);
    let q = copy.root::<[u64; 2], _>(&cview, "pair").unwrap().unwrap();
    assert_eq!(q, p);
    assert_eq!(copy.load(&cview, q).unwrap(), [7, 8]);
}

/// The format version a decoded header reports (what `bi inspect` shows) is the one its
/// bytes carry, and a region is written in the current one.
#[test]
fn a_header_reports_the_format_version_its_bytes_carry() {
    let bytes = Region::anonymous(small()).unwrap().to_bytes();
    let stored = u32::from_le_bytes(
        bytes[offsets::VERSION..offsets::VERSION + 4]
            .try_into()
            .unwrap(),
    );
    assert_eq!(stored, FORMAT_VERSION);
    assert_eq!(Header::decode(&bytes).unwrap().version(), stored);
}

/// A valid image with one byte range replaced, resealed if `reseal`.
fn crafted(edit: impl FnOnce(&mut Vec<u8>), reseal: bool) -> Result<Region, RegionError> {
    let mut bytes = Region::anonymous(small()).unwrap().to_bytes();
    edit(&mut bytes);
    if reseal {
        seal(&mut bytes);
    }
    Region::from_bytes(&bytes)
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn every_open_error_from_crafted_bytes() {
    use RegionError as E;
    let r = crafted(|b| b[0] = b'X', false);
    assert!(
        matches!(r, Err(E::BadMagic { found }) if &found == b"XIREGION"),
        "{r:?}"
    );
    let r = crafted(|b| put_u32(b, offsets::VERSION, 9), false);
    assert!(
        matches!(
            r,
            Err(E::UnsupportedVersion {
                found: 9,
                supported: FORMAT_VERSION
            })
        ),
        "{r:?}"
    );
    // Regions written by versions 1 (objects with a 32-byte header) and 2 (ring entries
    // without a scope) are refused.
    for old in [1, 2, 3] {
        let r = crafted(|b| put_u32(b, offsets::VERSION, old), false);
        assert!(
            matches!(
                r,
                Err(E::UnsupportedVersion {
                    found,
                    supported: 4
                }) if found == old
            ),
            "{r:?}"
        );
    }
    let r = crafted(|b| b.truncate(HEADER_LEN - 1), false);
    assert!(
        matches!(
            r,
            Err(E::Truncated {
                available: 151,
                needed: 152
            })
        ),
        "{r:?}"
    );
    let r = crafted(|b| b.truncate(b.len() - 64), false);
    assert!(
        matches!(r, Err(E::Truncated { needed: 16384, .. })),
        "{r:?}"
    );
    let r = crafted(|b| b[offsets::NODES] ^= 4, false);
    assert!(matches!(r, Err(E::ChecksumMismatch { .. })), "{r:?}");
    let r = crafted(|b| put_u32(b, offsets::LINE_SIZE, 48), true);
    assert!(matches!(r, Err(E::BadLineSize { found: 48 })), "{r:?}");
    let r = crafted(|b| put_u64(b, offsets::SIZE, 4096), true);
    assert!(matches!(r, Err(E::TooSmall { size: 4096, .. })), "{r:?}");
    let r = crafted(|b| put_u32(b, offsets::NODES, 3), true);
    assert!(
        matches!(
            r,
            Err(E::LayoutMismatch {
                section: SectionKind::NodeTable,
                ..
            })
        ),
        "{r:?}"
    );
    let r = crafted(|b| put_u32(b, offsets::NODES, 0), true);
    assert!(
        matches!(r, Err(E::InvalidParameter { name: "nodes", .. })),
        "{r:?}"
    );
    let r = crafted(|b| put_u32(b, offsets::EXTENT_LINES, 3), true);
    assert!(
        matches!(
            r,
            Err(E::InvalidParameter {
                name: "extent_lines",
                ..
            })
        ),
        "{r:?}"
    );
    // The heap's stored length runs past the end of the region.
    let r = crafted(
        |b| put_u64(b, offsets::SECTIONS + 16 * 5 + 8, 1 << 20),
        true,
    );
    assert!(
        matches!(
            r,
            Err(E::BadSection {
                section: SectionKind::Heap,
                ..
            })
        ),
        "{r:?}"
    );
    for e in [
        E::BadMagic {
            found: *b"XIREGION",
        },
        E::RootNameEmpty,
    ] {
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn roots_set_get_overwrite_remove() {
    let region = Region::anonymous(small()).unwrap();
    let view = TraceView::new(&region);
    let a: ShPtr<u64> = heap_ptr(&region, 0);
    let b: ShPtr<u64> = heap_ptr(&region, 1);
    assert_eq!(region.root::<u64, _>(&view, "a").unwrap(), None);
    region.set_root(&view, "a", a).unwrap();
    region.set_root(&view, "b", b).unwrap();
    assert_eq!(region.root::<u64, _>(&view, "a").unwrap(), Some(a));
    assert_eq!(region.root::<u64, _>(&view, "b").unwrap(), Some(b));
    region.set_root(&view, "a", b).unwrap(); // overwrite in place
    assert_eq!(region.root::<u64, _>(&view, "a").unwrap(), Some(b));
    assert_eq!(region.roots(&view).unwrap().len(), 2);
    assert!(region.remove_root(&view, "a").unwrap());
    assert_eq!(region.root::<u64, _>(&view, "a").unwrap(), None);
    let names: Vec<_> = region
        .roots(&view)
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["b"]);
}

#[test]
fn root_errors() {
    use RegionError as E;
    let region = Region::anonymous(small()).unwrap();
    let view = TraceView::new(&region);
    let p: ShPtr<u64> = heap_ptr(&region, 0);
    assert!(matches!(
        region.set_root(&view, "", p),
        Err(E::RootNameEmpty)
    ));
    let long = "x".repeat(MAX_ROOT_NAME + 1);
    assert!(matches!(
        region.set_root(&view, &long, p),
        Err(E::RootNameTooLong { len: 33, max: 32 })
    ));
    assert!(matches!(
        region.root::<u64, _>(&view, &long),
        Err(E::RootNameTooLong { .. })
    ));
    let exact = "é".repeat(MAX_ROOT_NAME / 2); // 32 bytes of UTF-8
    region.set_root(&view, &exact, p).unwrap();
    assert_eq!(region.root::<u64, _>(&view, &exact).unwrap(), Some(p));

    for name in ["1", "2", "3"] {
        region.set_root(&view, name, p).unwrap();
    }
    assert!(matches!(
        region.set_root(&view, "5", p),
        Err(E::RootDirectoryFull { entries: 4 })
    ));
    region.set_root(&view, "3", p).unwrap(); // overwriting still works when full

    assert!(matches!(
        region.root::<u32, _>(&view, "1"),
        Err(E::RootTypeMismatch {
            stored: (8, 8),
            requested: (4, 4),
            ..
        })
    ));
    assert!(matches!(
        region.root::<[u32; 2], _>(&view, "1"),
        Err(E::RootTypeMismatch {
            stored: (8, 8),
            requested: (8, 4),
            ..
        })
    ));

    // Pointers that do not designate a heap object.
    assert!(matches!(
        region.set_root(&view, "n", ShPtr::<u64>::null()),
        Err(E::Ptr(PtrError::Null))
    ));
    let outside: ShPtr<u64> = ShPtr::new(64);
    assert!(matches!(
        region.set_root(&view, "n", outside),
        Err(E::Ptr(PtrError::OutOfBounds { .. }))
    ));
    let end: ShPtr<u64> = ShPtr::new(region.layout().size() as u64 - 4);
    assert!(matches!(region.set_root(&view, "n", end), Err(E::Ptr(_))));

    // A view of another memory.
    let other = Region::anonymous(small().with_size(32 << 10)).unwrap();
    assert!(matches!(
        region.root::<u64, _>(&TraceView::new(&other), "1"),
        Err(E::ViewMismatch { .. })
    ));
}

#[test]
fn set_root_writes_back_and_lookup_invalidates_first() {
    let region = Region::anonymous(small()).unwrap();
    let view = TraceView::new(&region);
    let dir = region.layout().root_directory();
    let p: ShPtr<u64> = heap_ptr(&region, 2);
    region.set_root(&view, "x", p).unwrap();
    let ops = view.take();
    let entry = region.layout().root_entry(0).unwrap().offset;
    let store = ops
        .iter()
        .position(|o| *o == Op::Store(entry))
        .expect("entry stored");
    assert_eq!(
        &ops[store..],
        &[Op::Store(entry), Op::Writeback(entry, 64), Op::Fence],
        "the entry is written back and fenced last"
    );

    region.root::<u64, _>(&view, "x").unwrap();
    let ops = view.take();
    assert_eq!(&ops[..2], &[Op::Invalidate(dir.offset, dir.len), Op::Fence]);
    assert!(ops[2..].iter().all(|o| matches!(o, Op::Load(_))));
}

#[test]
fn torn_or_corrupt_entries_are_errors() {
    let region = Region::anonymous(small()).unwrap();
    let view = TraceView::new(&region);
    let p: ShPtr<u64> = heap_ptr(&region, 0);
    region.set_root(&view, "x", p).unwrap();
    let entry = region.layout().root_entry(0).unwrap().offset;
    // Change the object offset without fixing the entry's checksum: a torn update.
    region
        .backing()
        .store_bytes(entry + 8, &999u64.to_ne_bytes())
        .unwrap();
    assert!(matches!(
        region.root::<u64, _>(&view, "x"),
        Err(RegionError::CorruptRoot {
            index: 0,
            reason: "checksum mismatch"
        })
    ));
    // A self-consistent entry whose object lies outside the heap.
    let mut raw = [0u8; 64];
    region.backing().load_bytes(entry, &mut raw).unwrap();
    raw[8..16].copy_from_slice(&64u64.to_ne_bytes());
    let sum = super::header::fnv1a(&raw[..56]);
    raw[56..].copy_from_slice(&sum.to_ne_bytes());
    region.backing().store_bytes(entry, &raw).unwrap();
    assert!(matches!(
        region.root::<u64, _>(&view, "x"),
        Err(RegionError::CorruptRoot { index: 0, .. })
    ));
}

/// An entry whose checksum is right but whose fields are not (a file written by
/// something else, or corrupted and resealed) is refused field by field: a name length
/// of 0 or past the limit, and a structure entry that does not describe its own slot
/// (elsewhere, another size, another alignment). The well-formed structure entry opens.
#[test]
fn sealed_root_entries_with_bad_fields_are_refused() {
    let region = Region::anonymous(small()).unwrap();
    let view = TraceView::new(&region);
    let (own, _) = region
        .structure(&view, "orders", 0xABC, true)
        .unwrap()
        .unwrap();
    let entry = region.layout().root_entry(0).unwrap().offset;
    let mut good = [0u8; 64];
    region.backing().load_bytes(entry, &mut good).unwrap();
    let reopened = |edit: &dyn Fn(&mut [u8; 64])| {
        let mut raw = good;
        edit(&mut raw);
        let sum = super::header::fnv1a(&raw[..56]);
        raw[56..].copy_from_slice(&sum.to_ne_bytes());
        region.backing().store_bytes(entry, &raw).unwrap();
        region.structure(&view, "orders", 0xABC, false)
    };
    assert_eq!(reopened(&|_| {}).unwrap(), Some((own, false)));
    let refused = |edit: &dyn Fn(&mut [u8; 64]), why: &str| match reopened(edit) {
        Err(RegionError::CorruptRoot { index: 0, reason }) => assert_eq!(reason, why),
        other => panic!("{why}: {other:?}"),
    };
    let length = "name length out of range";
    refused(&|raw| raw[1] = 0, length);
    refused(&|raw| raw[1] = MAX_ROOT_NAME as u8 + 1, length);
    let own_slot = "a structure entry must point at its own slot";
    refused(
        &|raw| raw[8..16].copy_from_slice(&(own as u64 + 64).to_ne_bytes()),
        own_slot,
    );
    refused(
        &|raw| raw[4..8].copy_from_slice(&4u32.to_ne_bytes()),
        own_slot,
    );
    refused(&|raw| raw[2] = 2, own_slot);
}

/// The listing a tool shows (`bi inspect`) gives each root's name, object, size and
/// alignment as set; and every section has a name of its own for error messages.
#[test]
fn roots_are_listed_as_set_and_sections_by_name() {
    let region = Region::anonymous(small()).unwrap();
    let view = TraceView::new(&region);
    let wide: ShPtr<[u64; 2]> = heap_ptr(&region, 2);
    let narrow: ShPtr<u16> = heap_ptr(&region, 0);
    region.set_root(&view, "wide", wide).unwrap();
    region.set_root(&view, "narrow", narrow).unwrap();
    let listed: Vec<_> = region
        .roots(&view)
        .unwrap()
        .into_iter()
        .map(|r| (r.name, r.offset, r.size, r.align))
        .collect();
    assert_eq!(
        listed,
        [
            ("wide".to_owned(), wide.offset(), 16, 8),
            ("narrow".to_owned(), narrow.offset(), 2, 2)
        ]
    );
    let names: std::collections::HashSet<_> =
        SectionKind::ALL.iter().map(|k| k.to_string()).collect();
    assert_eq!(names.len(), SectionKind::ALL.len());
    assert!(names.iter().all(|n| !n.is_empty()));
    let heap = Section {
        offset: 4096,
        len: 8192,
    };
    assert_eq!(heap.to_string(), "4096..12288 (8192 bytes)");
}

#[test]
fn line_sizes_other_than_64() {
    for line in [8usize, 32, 128] {
        let region = Region::anonymous(small().with_line_size(line)).unwrap();
        let view = TraceView::new(&region);
        let p: ShPtr<u64> = heap_ptr(&region, 0);
        region.set_root(&view, "x", p).unwrap();
        let copy = Region::from_bytes(&region.to_bytes()).unwrap();
        assert_eq!(copy.layout().line_size().get(), line);
        assert_eq!(
            copy.root::<u64, _>(&TraceView::new(&copy), "x").unwrap(),
            Some(p)
        );
    }
}

#[test]
fn region_and_pointers_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Region>();
    send_sync::<ShPtr<std::cell::Cell<u8>>>();
    send_sync::<RegionError>();
}
