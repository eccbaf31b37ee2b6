//! Opens region files whose header write was cut short: a crash after the first `k`
//! bytes of a new header reached the file, for any `k` from 0 to the whole header.
//!
//! The input chooses the new region's configuration (line size, nodes, readers, log ring
//! entries, root entries, size), what the file held before (zeros, as a file just created
//! and sized; or the image of a valid region of another configuration the input also
//! chooses, as when a header is rewritten in place), the file's length (the old image's,
//! the new region's, or cut short at one of several points) and `k`. The bytes are opened
//! with `Header::decode`, `Region::from_bytes` and, as users do, `Region::open` on a file.
//!
//! Rules: no input panics; an open that succeeds gives exactly the old layout or exactly
//! the new one (never a mixture), and only when the file's first `HEADER_LEN` bytes are
//! that layout's whole header and the file is long enough for it; every other file is
//! refused with a `RegionError` (never an I/O error: the file is there and readable); the
//! three ways of opening agree. Any violation panics.

#![no_main]

use arbitrary::Arbitrary;
use bi_core::region::{HEADER_LEN, Header, Layout, Region, RegionConfig, RegionError};
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;

#[derive(Arbitrary, Debug)]
struct Input {
    new: Shape,
    old: Option<Shape>,
    /// How many bytes of the new header reached the file (scaled to 0 ..= `HEADER_LEN`).
    written: u8,
    length: Length,
}

/// A small region configuration.
#[derive(Arbitrary, Debug)]
struct Shape {
    line: u8,
    nodes: u8,
    readers: u8,
    ring: u8,
    roots: u8,
    extra_pages: u8,
}

/// The file's length after the crash.
#[derive(Arbitrary, Debug)]
enum Length {
    /// The old contents' length (the new region's, for a new file).
    Old,
    /// Sized for the new region first (shorter old contents are zero-extended).
    New,
    /// Cut to this many bytes after the header write (scaled to the file's length).
    Cut(u16),
    /// One byte short of the new region.
    NewLessOne,
}

fn layout(shape: &Shape) -> Option<Layout> {
    let config = RegionConfig::new(0)
        .with_line_size(32 << (shape.line % 3))
        .with_nodes(1 + u32::from(shape.nodes % 4))
        .with_readers_per_node(1 + u32::from(shape.readers % 4))
        .with_log_ring_entries(2 << (shape.ring % 5))
        .with_root_entries(1 + u32::from(shape.roots % 8));
    let size = config.min_size().ok()? + usize::from(shape.extra_pages % 3) * 4096;
    Layout::compute(&config.with_size(size)).ok()
}

/// A file of this process's own, in memory when the machine has `/dev/shm`.
fn scratch_path() -> PathBuf {
    let dir = PathBuf::from("/dev/shm");
    let dir = if dir.is_dir() {
        dir
    } else {
        std::env::temp_dir()
    };
    dir.join(format!("bi-fuzz-header-cut-{}.bi", std::process::id()))
}

/// What opening `image` may give: the layout whose whole header the image starts with,
/// if the image is long enough for that region.
fn expected(image: &[u8], candidates: &[Layout]) -> Option<Layout> {
    candidates.iter().copied().find(|l| {
        image.len() >= l.size() && image.get(..HEADER_LEN) == Some(&Header::new(*l).encode()[..])
    })
}

fn check(how: &str, got: Result<Layout, RegionError>, want: Option<Layout>, k: usize) {
    match (got, want) {
        (Ok(l), Some(w)) => assert_eq!(l, w, "{how}: cut at {k} opened as another layout"),
        (Ok(l), None) => panic!("{how}: cut at {k} opened as {l:?}, a mixture"),
        (Err(RegionError::Io { .. }), _) if how == "open" => {
            panic!("{how}: cut at {k}: an I/O error for a readable file")
        }
        (Err(e), Some(w)) => panic!("{how}: cut at {k} refused ({e}) a whole header of {w:?}"),
        (Err(_), None) => {}
    }
}

fn run(input: &Input) {
    let Some(new) = layout(&input.new) else {
        return;
    };
    let old = input.old.as_ref().and_then(layout);
    let mut image = match old {
        // A previous region, whole (its own header valid).
        Some(old) => Region::anonymous(*old.config())
            .expect("a computed layout makes a region")
            .to_bytes(),
        // A file just created and sized for the new region.
        None => vec![0u8; new.size()],
    };
    if let Length::New = input.length {
        image.resize(image.len().max(new.size()), 0);
    }
    // Every region is longer than its header.
    let k = usize::from(input.written) % (HEADER_LEN + 1);
    image[..k].copy_from_slice(&Header::new(new).encode()[..k]);
    match input.length {
        Length::Old | Length::New => {}
        Length::Cut(at) => image.truncate(usize::from(at) % (image.len() + 1)),
        Length::NewLessOne => image.resize(new.size() - 1, 0),
    }

    let candidates: Vec<Layout> = std::iter::once(new).chain(old).collect();
    let want = expected(&image, &candidates);
    check(
        "decode",
        Header::decode(&image).map(|h| *h.layout()),
        want,
        k,
    );
    check(
        "from_bytes",
        Region::from_bytes(&image).map(|r| *r.layout()),
        want,
        k,
    );
    let path = scratch_path();
    std::fs::write(&path, &image).expect("write the scratch file");
    let opened = Region::open(&path);
    if let Ok(region) = &opened {
        assert_eq!(region.backing().size(), region.layout().size());
    }
    check("open", opened.map(|r| *r.layout()), want, k);
    let _ = std::fs::remove_file(&path);
}

fuzz_target!(|input: Input| run(&input));
