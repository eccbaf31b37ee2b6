//! Shared regions: the pool of memory that all nodes map, with a versioned header, a fixed
//! layout of runtime tables and named roots.
//!
//! # Why a region
//!
//! Nodes that share memory without coherence still have to agree on *where* things are:
//! which lines hold node 2's clock, which hold reader 5's timing record, where the log
//! rings and the heap start. A [`Region`] fixes that once, in a header at offset 0 that
//! every process validates before touching anything else, so that a wrong, old, truncated
//! or corrupt file is a [`RegionError`] at open time instead of silent misreads later.
//!
//! # What is in it
//!
//! ```text
//! 0        header         magic, version, size, line size, parameters, section table, checksum
//!          node table     one record per node
//!          reader table   one record per reader per node
//!          log rings      modified/freed rings per node
//!          root directory named roots
//!          heap           objects, up to the end of the region
//! ```
//!
//! Every section starts on a line boundary and spans whole lines ([`layout`]); the header
//! format is in [`header`]; the root directory in [`roots`].
//!
//! # Sources
//!
//! - [`Region::anonymous`]: zeroed heap memory of this process, for tests, Miri and the
//!   emulator;
//! - [`Region::create`] / [`Region::open`]: a file mapped shared (`/dev/shm/...`, a DAX or
//!   CXL device), which every process mapping it sees;
//! - [`Region::from_bytes`]: validate an image held in memory and copy it into an
//!   anonymous region (fuzzing, snapshots).
//!
//! Shared bytes are only ever accessed through a [`MemView`], so the same code runs on
//! the hardware and in the emulator.
//!
//! ```
//! use bi_core::ptr::ShPtr;
//! use bi_core::region::{Region, RegionConfig};
//!
//! let region = Region::anonymous(RegionConfig::new(1 << 17).with_nodes(2)).unwrap();
//! let view = region.hardware();
//! let heap = region.layout().heap();
//! let answer: ShPtr<u64> = ShPtr::new(heap.offset as u64);
//! region.store(&view, answer, &42).unwrap();
//! region.set_root(&view, "answer", answer).unwrap();
//!
//! let found = region.root::<u64, _>(&view, "answer").unwrap().unwrap();
//! assert_eq!(region.load(&view, found).unwrap(), 42);
//! ```

pub(crate) mod device;
mod error;
pub mod header;
pub mod layout;
pub mod roots;
mod section;

pub use error::RegionError;
pub use header::{FORMAT_VERSION, HEADER_LEN, Header, MAGIC};
pub use layout::{
    EXTENT_ENTRY_BYTES, Layout, MIN_EXTENT_LINES, RegionConfig, RingKind, TARGET_EXTENTS,
};
pub use roots::RootInfo;
pub use section::{Section, SectionKind};

use crate::mem::{Backing, ClockSource, EmulatedNode, Emulator, EmulatorConfig, Hardware, MemView};
use crate::ptr::ShPtr;
use bytemuck::Pod;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A shared region: validated layout plus the memory it describes.
///
/// `Region` is `Send + Sync`; share it between a node's threads by reference or in an
/// `Arc`. Dropping it unmaps the memory (for a file, the file stays).
///
/// ```
/// use bi_core::mem::MemView;
/// use bi_core::region::{Region, RegionConfig};
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("pool.bi");
/// let a = Region::create(&path, RegionConfig::new(1 << 20).with_nodes(2)).unwrap();
/// let b = Region::open(&path).unwrap(); // as another process would
/// let at = a.layout().heap().offset;
/// a.hardware().store(at, &7u64).unwrap();
/// a.hardware().writeback(at, 8).unwrap();
/// assert_eq!(b.hardware().load_from_memory::<u64>(at).unwrap(), 7); // one file, one memory
/// ```
#[derive(Debug)]
pub struct Region {
    backing: Arc<Backing>,
    layout: Layout,
    path: Option<PathBuf>,
    /// Serialises root directory updates made by this process. Not a cross-process lock,
    /// and not part of any modelled kernel, so it is the standard library's.
    roots_lock: Mutex<()>,
}

/// Turns an I/O error of `op` on the file at `path` into the region's error.
fn io_error<'a>(
    path: &'a Path,
    op: &'static str,
) -> impl FnOnce(std::io::Error) -> RegionError + 'a {
    move |source| RegionError::Io {
        path: path.to_owned(),
        op,
        source,
    }
}

impl Region {
    /// A region in zeroed heap memory of this process, with a fresh header.
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig, RegionError};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// assert_eq!(region.layout().size(), 1 << 16);
    /// assert!(matches!(
    ///     Region::anonymous(RegionConfig::new(1024)),
    ///     Err(RegionError::TooSmall { .. })
    /// ));
    /// ```
    pub fn anonymous(config: RegionConfig) -> Result<Region, RegionError> {
        let layout = Layout::compute(&config)?;
        let backing = Arc::new(Backing::anonymous(layout.size())?);
        backing.store_bytes(0, &Header::new(layout).encode())?;
        Ok(Region::assemble(backing, layout, None))
    }

    /// Creates the file at `path` (which must not exist: an existing region is never
    /// overwritten, [`RegionError::AlreadyExists`]): makes a file of the configured size
    /// beside it, maps it shared, writes the header and writes it back to memory, then
    /// links it to `path`, so that no process finds a region half made there.
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig, RegionError};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let config = RegionConfig::new(1 << 20).with_nodes(2);
    /// Region::create(&path, config).unwrap();
    /// assert!(matches!(Region::create(&path, config), Err(RegionError::AlreadyExists { .. })));
    /// assert!(Region::open(&path).is_ok());
    /// ```
    pub fn create(path: impl AsRef<Path>, config: RegionConfig) -> Result<Region, RegionError> {
        Region::create_with(path.as_ref(), config, false, true, &mut || {})
    }

    /// [`create`](Self::create) with its link step on (`linked`) or off (made in place,
    /// as on a file system without hard links), calling `between_steps` after each step
    /// of the creation: for the hazard catalog, which looks at `path` at those moments.
    #[cfg(feature = "faults")]
    #[doc(hidden)]
    pub fn create_stepwise(
        path: impl AsRef<Path>,
        config: RegionConfig,
        linked: bool,
        between_steps: &mut dyn FnMut(),
    ) -> Result<Region, RegionError> {
        Region::create_with(path.as_ref(), config, false, linked, between_steps)
    }

    /// [`create`](Self::create), truncating a file already at `path`. Whatever region it
    /// held is lost, and a process that still maps it faults: for tests and tools that
    /// mean to start over.
    pub(crate) fn create_replacing(
        path: impl AsRef<Path>,
        config: RegionConfig,
    ) -> Result<Region, RegionError> {
        Region::create_with(path.as_ref(), config, true, true, &mut || {})
    }

    /// A fresh region: in the file or device at `path` when there is one (truncating what
    /// it held: a process that still maps it faults), else in anonymous memory
    /// ([`anonymous`](Self::anonymous)). For programs told where their shared memory
    /// lives, if anywhere.
    /// ```
    /// use bi_core::region::{Region, RegionConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let config = RegionConfig::new(1 << 20).with_nodes(1);
    /// assert!(Region::fresh(None, config).unwrap().path().is_none());
    /// assert_eq!(Region::fresh(Some(&path), config).unwrap().path(), Some(path.as_path()));
    /// ```
    pub fn fresh(path: Option<&Path>, config: RegionConfig) -> Result<Region, RegionError> {
        match path {
            Some(path) => Region::create_replacing(path, config),
            None => Region::anonymous(config),
        }
    }

    /// Opens the region at `path`, or creates it with `config` if there is no file there
    /// (if another process creates it at the same moment, opens that one: a region file
    /// is made whole under another name and then linked to `path`, so it is never seen
    /// half made; on a file system without hard links it is made in place, and an opener
    /// waits up to 200 ms for its header to be whole). A file whose header is wrong is the
    /// typed error it is, and is left untouched. A device (a DAX or CXL character
    /// device, a block device) that holds no region yet (its first bytes are not a
    /// region's magic) is made one, as large as the device.
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let config = RegionConfig::new(1 << 20).with_nodes(2);
    /// let a = Region::open_or_create(&path, config).unwrap();
    /// let b = Region::open_or_create(&path, config.with_nodes(3)).unwrap(); // opened
    /// assert_eq!(a.layout(), b.layout());
    /// ```
    pub fn open_or_create(
        path: impl AsRef<Path>,
        config: RegionConfig,
    ) -> Result<Region, RegionError> {
        let path = path.as_ref();
        let on_device = std::fs::metadata(path)
            .map(|m| m.file_type().is_char_device() || m.file_type().is_block_device())
            .unwrap_or(false);
        match Region::open(path) {
            Err(RegionError::BadMagic { .. }) if on_device => {
                Region::create_on_device(path, config, false)
            }
            Err(RegionError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                match Region::create(path, config) {
                    Err(RegionError::AlreadyExists { .. }) => Region::open_when_written(path),
                    r => r,
                }
            }
            // Another process may be creating it right now: its header is not whole yet.
            Err(e) if !matches!(e, RegionError::Io { .. }) => Region::open_when_written(path),
            r => r,
        }
    }

    /// Opens a region another process is creating right now: its file may still be
    /// shorter than the region, or its header not yet written, for a moment.
    fn open_when_written(path: &Path) -> Result<Region, RegionError> {
        let mut tries = 0;
        loop {
            match Region::open(path) {
                // A header not yet whole reads as any of the header's errors.
                Err(e) if !matches!(e, RegionError::Io { .. }) && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                r => return r,
            }
        }
    }

    /// Makes the region file at `path` (or the device there): truncating a file there if
    /// `replace`, else whole under another name and linked into place if `linked` (and
    /// the file system can), else in place; `between_steps` runs after each step.
    fn create_with(
        path: &Path,
        config: RegionConfig,
        replace: bool,
        linked: bool,
        between_steps: &mut dyn FnMut(),
    ) -> Result<Region, RegionError> {
        let io = |op| io_error(path, op);
        if let Ok(meta) = std::fs::metadata(path) {
            let kind = meta.file_type();
            if kind.is_char_device() || kind.is_block_device() {
                return Region::create_on_device(path, config, replace);
            }
        }
        let layout = Layout::compute(&config)?;
        if !replace && linked {
            match Region::create_linked(path, layout, between_steps) {
                Err(RegionError::Io { op: "link", .. }) => {}
                made => return made,
            }
        }
        // Replacing, or on a file system without hard links: made where it will stay.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(replace)
            .truncate(replace)
            .create_new(!replace)
            .open(path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => RegionError::AlreadyExists {
                    path: path.to_owned(),
                },
                _ => io("create")(e),
            })?;
        between_steps();
        file.set_len(layout.size() as u64)
            .map_err(io("set the length of"))?;
        between_steps();
        let region = Region::format(path, &file, layout)?;
        between_steps();
        Ok(region)
    }

    /// Makes the region whole under a name of its own beside `path` (length set, header
    /// written back), then links it to `path`: a file at `path` is never a region half
    /// made, so a process that opens it at any moment finds it whole or absent, and of
    /// several processes creating it at once exactly one links (for the others the link
    /// fails, and so does their creation in place: [`RegionError::AlreadyExists`]). A
    /// process killed before the link leaves its `.NAME.PID-N.creating` file beside
    /// `path`.
    fn create_linked(
        path: &Path,
        layout: Layout,
        between_steps: &mut dyn FnMut(),
    ) -> Result<Region, RegionError> {
        // Names the temporary files of this process's creations apart (threads may race
        // too); not shared memory, so the standard library's.
        use std::sync::atomic::{AtomicU64, Ordering};
        static MADE: AtomicU64 = AtomicU64::new(0);
        let io = |op| io_error(path, op);
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let temp = path.with_file_name(format!(
            ".{}.{}-{}.creating",
            name.unwrap_or_default(),
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        ));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(io("create"))?;
        between_steps();
        let made = file
            .set_len(layout.size() as u64)
            .map_err(io("set the length of"))
            .and_then(|()| {
                between_steps();
                Region::format(path, &file, layout)
            })
            .and_then(|region| {
                between_steps();
                // A path taken meanwhile fails the link; the caller's creation in place
                // then reports it taken.
                std::fs::hard_link(&temp, path)
                    .map(|()| region)
                    .map_err(io("link"))
            });
        let _ = std::fs::remove_file(&temp);
        between_steps();
        made
    }

    /// Maps `file` (at `path`, at least `layout.size()` bytes) and writes the header of
    /// `layout` at its start, through to memory.
    fn format(path: &Path, file: &File, layout: Layout) -> Result<Region, RegionError> {
        let backing =
            Arc::new(
                Backing::map_file(file, layout.size()).map_err(|source| RegionError::Io {
                    path: path.to_owned(),
                    op: "map",
                    source,
                })?,
            );
        backing.store_bytes(0, &Header::new(layout).encode())?;
        let region = Region::assemble(backing, layout, Some(path.to_owned()));
        let view = region.hardware();
        view.writeback(0, layout.header().len)?;
        view.fence();
        Ok(region)
    }

    /// Makes a region on the device at `path` (a DAX or CXL character device, or a block
    /// device), as large as the device (whole lines); `config`'s size is ignored. A
    /// device that already holds a valid region is left alone
    /// ([`RegionError::AlreadyExists`]) unless `replace`.
    fn create_on_device(
        path: &Path,
        config: RegionConfig,
        replace: bool,
    ) -> Result<Region, RegionError> {
        let io = |op| io_error(path, op);
        if !replace && Region::open(path).is_ok() {
            return Err(RegionError::AlreadyExists {
                path: path.to_owned(),
            });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io("open"))?;
        let size = match device::extent_of(&file).map_err(io("inspect"))? {
            device::Extent::Device(n) | device::Extent::File(n) => n,
        };
        let line = config.line_size().max(1);
        let size = usize::try_from(size - size % line).unwrap_or(usize::MAX);
        let layout = Layout::compute(&config.with_size(size))?;
        Region::format(path, &file, layout)
    }

    /// Maps the region file at `path` and validates its header.
    ///
    /// Errors: [`RegionError::Io`] (with the path) if the file cannot be opened, read or
    /// mapped; otherwise whatever [`Header::decode_prefix`] finds wrong, with the file's
    /// length as the bytes available.
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig, RegionError};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// assert!(matches!(Region::open(&path), Err(RegionError::Io { .. }))); // no file
    /// let config = RegionConfig::new(1 << 20).with_nodes(3);
    /// Region::create(&path, config).unwrap();
    /// assert_eq!(*Region::open(&path).unwrap().layout().config(), config);
    /// std::fs::write(&path, b"not a region").unwrap();
    /// assert!(Region::open(&path).is_err());
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Region, RegionError> {
        let path = path.as_ref();
        let io = |op| io_error(path, op);
        let mut file: File = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io("open"))?;
        let file_len = match device::extent_of(&file).map_err(io("inspect"))? {
            device::Extent::File(n) | device::Extent::Device(n) => n,
        };
        let mut prefix = Vec::with_capacity(HEADER_LEN);
        (&mut file)
            .take(HEADER_LEN as u64)
            .read_to_end(&mut prefix)
            .map_err(io("read"))?;
        let header = Header::decode_prefix(&prefix, file_len)?;
        let layout = *header.layout();
        let backing = Arc::new(Backing::map_file(&file, layout.size()).map_err(io("map"))?);
        let region = Region::assemble(backing, layout, Some(path.to_owned()));
        // The mapping must still hold the header we validated (the file could have been
        // re-created between the read and the map). Read it from memory, not the cache.
        let view = region.hardware();
        view.invalidate(0, layout.header().len)?;
        view.fence();
        let mut mapped = [0u8; HEADER_LEN];
        region.backing.load_bytes(0, &mut mapped)?;
        let again = Header::decode_prefix(&mapped, layout.size() as u64)?;
        if again != header {
            return Err(RegionError::Io {
                path: path.to_owned(),
                op: "map",
                source: std::io::Error::other("the header changed while the file was opened"),
            });
        }
        Ok(region)
    }

    /// Validates the region image `bytes` (its length is the bytes available) and copies
    /// it into a new anonymous region.
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig, RegionError};
    ///
    /// let original = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let image = original.to_bytes();
    /// let copy = Region::from_bytes(&image).unwrap();
    /// assert_eq!(copy.layout(), original.layout());
    /// assert!(matches!(Region::from_bytes(&image[..100]), Err(RegionError::Truncated { .. })));
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Region, RegionError> {
        let header = Header::decode(bytes)?;
        let layout = *header.layout();
        let backing = Arc::new(Backing::anonymous(layout.size())?);
        backing.store_bytes(0, &bytes[..layout.size()])?;
        Ok(Region::assemble(backing, layout, None))
    }

    fn assemble(backing: Arc<Backing>, layout: Layout, path: Option<PathBuf>) -> Region {
        Region {
            backing,
            layout,
            path,
            roots_lock: Mutex::new(()),
        }
    }

    /// A copy of the region's bytes as they are in memory.
    ///
    /// ```
    /// use bi_core::region::{MAGIC, Region, RegionConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let bytes = region.to_bytes();
    /// assert_eq!(bytes.len(), 1 << 16);
    /// assert_eq!(bytes[..8], MAGIC);
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.layout.size()];
        // Cannot fail: the buffer is exactly the backing's size.
        let _ = self.backing.load_bytes(0, &mut out);
        out
    }

    /// The validated layout.
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 20).with_nodes(2)).unwrap();
    /// assert_eq!(region.layout().config().nodes(), 2);
    /// assert_eq!(region.layout().size(), 1 << 20);
    /// ```
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The memory, for building views ([`Hardware::new`], or an emulator over it).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 20).with_nodes(2)).unwrap();
    /// assert_eq!(region.backing().size(), 1 << 20);
    /// let config = EmulatorConfig::new(1 << 20, 2);
    /// let emu = Emulator::over(region.backing().clone(), config).unwrap();
    /// assert_eq!(emu.node(1).id(), 1);
    /// ```
    pub fn backing(&self) -> &Arc<Backing> {
        &self.backing
    }

    /// The file the region is mapped from, if any.
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let region = Region::create(&path, RegionConfig::new(1 << 20)).unwrap();
    /// assert_eq!(region.path(), Some(path.as_path()));
    /// assert!(Region::anonymous(RegionConfig::new(1 << 20)).unwrap().path().is_none());
    /// ```
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// A hardware view of the region's memory.
    ///
    /// ```
    /// use bi_core::mem::MemView;
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 20)).unwrap();
    /// let view = region.hardware();
    /// assert_eq!(view.size(), region.layout().size());
    /// assert_eq!(view.line_size(), region.layout().line_size());
    /// ```
    pub fn hardware(&self) -> Hardware {
        Hardware::new(self.backing.clone())
    }

    /// Node `node`'s view of this region through a non-coherence emulator: this process
    /// keeps the node's cache, memory is the region's, and for a region mapped from a
    /// file the oracle's history of every line lives in a companion file (the region's
    /// path with `.history` appended, made zeroed when missing), so the views of several
    /// processes over one region count each other's write-backs and reuses
    /// ([`Emulator::over_shared`]). Such views use the host's clock as true time
    /// ([`ClockSource::Host`]), the only one processes share; run their runtimes with a
    /// clock of the host too ([`TickClock`](crate::runtime::TickClock)).
    ///
    /// `configure` adjusts the machine (seed, event rates, cache shape) from one of the
    /// region's size, line size and node count. Each process's oracle counts
    /// ([`EmulatedNode::stats`]) are its own.
    ///
    /// Errors: [`RegionError::Io`] when the companion file cannot be made or mapped,
    /// [`RegionError::Emulator`] for a configuration the emulator refuses or a node the
    /// region does not have.
    ///
    /// ```
    /// use bi_core::mem::MemView;
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("pool.bi");
    /// let region = Region::create(&path, RegionConfig::new(1 << 20).with_nodes(2)).unwrap();
    /// // Two processes in real use; here two mappings of one process.
    /// let other = Region::open(&path).unwrap();
    /// let a = region.emulated(0, |c| c.seed(1)).unwrap();
    /// let b = other.emulated(1, |c| c.seed(2)).unwrap();
    /// let at = region.layout().heap().offset;
    /// let _: u64 = b.load(at).unwrap(); // node 1 caches the line
    /// a.store(at, &9u64).unwrap();
    /// a.writeback(at, 8).unwrap();
    /// a.fence();
    /// assert_eq!(b.load::<u64>(at).unwrap(), 0); // stale: no coherence between them
    /// assert_eq!(b.stats().stale_reads, 1); // and counted, across the two mappings
    /// b.invalidate(at, 8).unwrap();
    /// b.fence();
    /// assert_eq!(b.load::<u64>(at).unwrap(), 9);
    /// assert!(dir.path().join("pool.bi.history").exists());
    /// ```
    pub fn emulated(
        &self,
        node: usize,
        configure: impl FnOnce(EmulatorConfig) -> EmulatorConfig,
    ) -> Result<EmulatedNode, RegionError> {
        let layout = &self.layout;
        let nodes = layout.config().nodes() as usize;
        let base = EmulatorConfig::new(layout.size(), nodes).line_size(layout.line_size());
        let emulator = match &self.path {
            None => Emulator::over(self.backing.clone(), configure(base)),
            Some(path) => {
                let cfg = configure(base).clock(ClockSource::Host);
                let history = history_file(path, Emulator::history_bytes(&cfg))?;
                Emulator::over_shared(self.backing.clone(), Arc::new(history), cfg)
            }
        };
        Ok(emulator?.try_node(node)?)
    }

    /// Reads the `T` that `ptr` designates, which must lie inside the heap.
    ///
    /// ```
    /// use bi_core::ptr::{PtrError, ShPtr};
    /// use bi_core::region::{Region, RegionConfig, RegionError};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let view = region.hardware();
    /// let in_header: ShPtr<u64> = ShPtr::new(8);
    /// assert!(in_header.load(&view).is_ok()); // inside the memory...
    /// assert!(matches!(
    ///     region.load(&view, in_header), // ...but not inside the heap
    ///     Err(RegionError::Ptr(PtrError::OutOfBounds { .. }))
    /// ));
    /// ```
    pub fn load<T: Pod, V: MemView>(&self, view: &V, ptr: ShPtr<T>) -> Result<T, RegionError> {
        let at = ptr.check(self.layout.heap().range())?;
        Ok(view.load(at)?)
    }

    /// Writes `value` to the `T` that `ptr` designates, which must lie inside the heap.
    ///
    /// ```
    /// use bi_core::ptr::ShPtr;
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let view = region.hardware();
    /// let p: ShPtr<u64> = ShPtr::new(region.layout().heap().offset as u64);
    /// region.store(&view, p, &5).unwrap();
    /// assert_eq!(region.load(&view, p).unwrap(), 5);
    /// assert!(region.store(&view, ShPtr::<u64>::new(8), &5).is_err()); // the header
    /// ```
    pub fn store<T: Pod, V: MemView>(
        &self,
        view: &V,
        ptr: ShPtr<T>,
        value: &T,
    ) -> Result<(), RegionError> {
        let at = ptr.check(self.layout.heap().range())?;
        Ok(view.store(at, value)?)
    }
}

#[cfg(test)]
mod tests;

/// The emulator's history file for the region at `path`, at least `len` bytes (made
/// zeroed, or lengthened, when shorter), mapped shared.
fn history_file(path: &Path, len: usize) -> Result<Backing, RegionError> {
    let mut name = path.as_os_str().to_owned();
    name.push(".history");
    let history = PathBuf::from(name);
    let io = |op: &'static str| {
        let path = history.clone();
        move |source| RegionError::Io { path, op, source }
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&history)
        .map_err(io("open"))?;
    let have = file.metadata().map_err(io("read the length of"))?.len();
    if have < len as u64 {
        file.set_len(len as u64).map_err(io("set the length of"))?;
    }
    Backing::map_file(&file, len).map_err(io("map"))
}
