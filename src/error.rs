//! The one error type of the front door.
//!
//! Every call of the facade ([`Pool`](crate::Pool), [`SharedMap`](crate::SharedMap),
//! [`SharedTree`](crate::SharedTree)) fails with an [`Error`]: what a service decides on
//! is its [`kind`](Error::kind), a small enum; what happened, layer by layer, is its
//! [`source`](std::error::Error::source) chain (the pool's [`PoolError`], then the
//! collection's, the runtime's, the region's). Its message names the structure and the
//! Rust types asked for, never the fingerprints the region stores.
//!
//! ```
//! use bi::{ErrorKind, Pool, PoolConfig};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let pool = Pool::open_or_create(dir.path().join("pool.bi"), PoolConfig::default()).unwrap();
//! let _sessions = pool.map::<u64, String>("sessions").unwrap();
//! let err = pool.map::<u64, u64>("sessions").unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::WrongTypes);
//! assert!(err.to_string().contains("u64 -> u64"), "{err}");
//! assert!(!err.to_string().contains("0x"), "{err}");
//! ```

use bi_alloc::AllocError;
use bi_collections::CollectionError;
use bi_collections::delegate::DelegationError;
use bi_core::heap::HeapError;
use bi_core::region::RegionError;
use bi_core::runtime::BiError;
use std::fmt;

/// What kind of failure an [`Error`] is: what a caller decides on. More kinds may come.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// No structure of that name (for a process that only reads), or no such file.
    NotFound,
    /// The name holds a structure of another kind or other key and value types.
    WrongTypes,
    /// Another live process holds the writer role, or this pool's writer is handed out.
    WriterAlive,
    /// No process serves the structure's writes: none opened a shared handle yet, or
    /// the writer died before it answered (its successor reported the write failed and
    /// never applies it; the dead writer may have applied it before it died).
    NoWriter,
    /// The writer did not answer within the pool's
    /// [`write_timeout`](crate::PoolConfig::write_timeout); what became of the write
    /// is in the source ([`DelegationError::Timeout`]).
    Timeout,
    /// The pool's heap (or a log ring) has no room for the write: nothing was written.
    HeapExhausted,
    /// An item too large for the path it takes (a remote write's parcel, a line).
    TooLarge,
    /// No free node, reader record or lock: everything of that kind is in use.
    Busy,
    /// The region or a channel holds what no writer of this version writes.
    Corrupt,
    /// The operating system refused (open, map, set the length of a file).
    Io,
    /// A setting, argument or environment variable that cannot be used.
    InvalidInput,
    /// None of the above (the source says what).
    Other,
}

/// A failure of the front door: a [`kind`](Self::kind), a message that names the
/// structure and its types, and the layers of what happened as its source.
///
/// One word wide (the details are boxed), so a `Result` of a lookup stays as small as
/// its value allows: `Result<Option<u64>, bi::Error>` is 16 bytes.
///
/// ```
/// assert_eq!(size_of::<Result<Option<u64>, bi::Error>>(), 16);
/// ```
pub struct Error(Box<Inner>);

struct Inner {
    kind: ErrorKind,
    /// The structure and the types asked for, when the call named them.
    about: Option<String>,
    cause: PoolError,
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The pool's own error, with every layer below it.
    pub fn cause(&self) -> &PoolError {
        &self.0.cause
    }

    /// The same error, about `what` (a structure and its types).
    pub(crate) fn about(mut self, what: impl FnOnce() -> String) -> Error {
        self.0.about = Some(what());
        self
    }
}

/// How an error names a structure: `map "sessions" of u64 -> alloc::string::String`.
pub(crate) fn structure<K, V>(kind: &str, name: &str) -> String {
    format!(
        "{kind} {name:?} of {} -> {}",
        std::any::type_name::<K>(),
        std::any::type_name::<V>()
    )
}

impl From<PoolError> for Error {
    fn from(cause: PoolError) -> Error {
        Error(Box::new(Inner {
            kind: kind_of(&cause),
            about: None,
            cause,
        }))
    }
}

macro_rules! through_pool_error {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Error {
                Error::from(PoolError::from(e))
            }
        }
    )*};
}
through_pool_error!(RegionError, BiError, AllocError, CollectionError);

impl From<bi_core::mem::MemError> for Error {
    fn from(e: bi_core::mem::MemError) -> Error {
        Error::from(BiError::Mem(e))
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.0.kind)
            .field("about", &self.0.about)
            .field("cause", &self.0.cause)
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(about) = &self.0.about {
            write!(f, "{about}: ")?;
        }
        match self.0.kind {
            // The region knows only fingerprints; the message names the types asked for.
            ErrorKind::WrongTypes => f.write_str(
                "the pool holds a structure of another kind or other key and value types \
                 under this name",
            ),
            _ => leaf(&self.0.cause, f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0.cause)
    }
}

/// Writes the innermost of our own layers of `e`: what happened, without the path
/// through the crates that carried it.
fn leaf(e: &PoolError, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    fn bi(e: &BiError, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match e {
            BiError::Region(e) => write!(f, "{e}"),
            BiError::Heap(e) => write!(f, "{e}"),
            BiError::Mem(e) => write!(f, "{e}"),
            e => write!(f, "{e}"),
        }
    }
    match e {
        PoolError::Region(e) => write!(f, "{e}"),
        PoolError::Runtime(e) => bi(e, f),
        PoolError::Alloc(AllocError::Heap(e)) => write!(f, "{e}"),
        PoolError::Collection(CollectionError::Runtime(e)) => bi(e, f),
        PoolError::Collection(CollectionError::Delegation(e)) => write!(f, "{e}"),
        PoolError::Collection(CollectionError::Channel(e)) => write!(f, "{e}"),
        e => write!(f, "{e}"),
    }
}

fn kind_of(e: &PoolError) -> ErrorKind {
    match e {
        PoolError::Region(e) => region_kind(e),
        PoolError::Runtime(e) => runtime_kind(e),
        PoolError::Alloc(e) => match e {
            AllocError::Heap(e) => heap_kind(e),
            AllocError::HeapTooSmall { .. } => ErrorKind::HeapExhausted,
            _ => ErrorKind::InvalidInput,
        },
        PoolError::Collection(e) => collection_kind(e),
        PoolError::NoFreeNode { .. } => ErrorKind::Busy,
        PoolError::WriterTaken => ErrorKind::WriterAlive,
        PoolError::NoWriterYet => ErrorKind::NoWriter,
        PoolError::BadEnvironment { .. } => ErrorKind::InvalidInput,
    }
}

fn region_kind(e: &RegionError) -> ErrorKind {
    match e {
        RegionError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            ErrorKind::NotFound
        }
        RegionError::Io { .. } => ErrorKind::Io,
        RegionError::StructureTypeMismatch { .. } | RegionError::RootTypeMismatch { .. } => {
            ErrorKind::WrongTypes
        }
        RegionError::InvalidParameter { .. }
        | RegionError::BadLineSize { .. }
        | RegionError::RootNameEmpty
        | RegionError::RootNameTooLong { .. }
        | RegionError::ViewMismatch { .. }
        | RegionError::AlreadyExists { .. } => ErrorKind::InvalidInput,
        RegionError::RootDirectoryFull { .. } => ErrorKind::HeapExhausted,
        RegionError::RootTypeTooLarge { .. } => ErrorKind::TooLarge,
        RegionError::Emulator(_) | RegionError::Mem(_) => ErrorKind::Other,
        _ => ErrorKind::Corrupt,
    }
}

fn heap_kind(e: &HeapError) -> ErrorKind {
    match e {
        HeapError::OutOfMemory { .. } | HeapError::NoExtent { .. } => ErrorKind::HeapExhausted,
        HeapError::BadSize { .. } => ErrorKind::TooLarge,
        _ => ErrorKind::Corrupt,
    }
}

fn runtime_kind(e: &BiError) -> ErrorKind {
    match e {
        BiError::Region(e) => region_kind(e),
        BiError::Heap(e) => heap_kind(e),
        BiError::LogFull { .. } => ErrorKind::HeapExhausted,
        BiError::NoReaderSlot { .. }
        | BiError::NodeTaken { .. }
        | BiError::LockTimeout { .. }
        | BiError::LockLeaseLost { .. } => ErrorKind::Busy,
        BiError::WriterTaken { .. } | BiError::WriterAlive { .. } => ErrorKind::WriterAlive,
        BiError::RoleLost { .. } => ErrorKind::NoWriter,
        BiError::TooLarge { .. } => ErrorKind::TooLarge,
        BiError::BadConfig { .. } | BiError::BadNode { .. } => ErrorKind::InvalidInput,
        BiError::LinkCycle { .. } => ErrorKind::Corrupt,
        _ => ErrorKind::Other,
    }
}

fn collection_kind(e: &CollectionError) -> ErrorKind {
    match e {
        CollectionError::Runtime(e) => runtime_kind(e),
        CollectionError::NotFound { .. } => ErrorKind::NotFound,
        CollectionError::Corrupt { .. } | CollectionError::Channel(_) => ErrorKind::Corrupt,
        CollectionError::Contended { .. } => ErrorKind::Busy,
        CollectionError::Delegation(e) => match e {
            DelegationError::Timeout { .. } => ErrorKind::Timeout,
            DelegationError::WriterDied { .. }
            | DelegationError::ServerGone { .. }
            | DelegationError::CombinerDied => ErrorKind::NoWriter,
            DelegationError::NoRoom { .. } => ErrorKind::HeapExhausted,
            DelegationError::ItemTooLarge { .. } | DelegationError::TooLarge { .. } => {
                ErrorKind::TooLarge
            }
            DelegationError::HeaderMismatch { .. }
            | DelegationError::SequenceGap { .. }
            | DelegationError::BadRecord { .. }
            | DelegationError::BadAcknowledgement { .. }
            | DelegationError::BadResult { .. }
            | DelegationError::BadParcel { .. } => ErrorKind::Corrupt,
            _ => ErrorKind::Other,
        },
        _ => ErrorKind::Other,
    }
}

/// Why a pool could not be opened or used: the [`cause`](crate::Error::cause) of a
/// [`bi::Error`](crate::Error), each variant carrying the error of the layer that failed.
/// Match on [`Error::kind`](crate::Error::kind) to decide; on this for the details.
///
/// ```
/// use bi::core::region::RegionConfig;
/// use bi::{ErrorKind, Pool, PoolConfig, PoolError};
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("one-node.bi");
/// let region = RegionConfig::new(4 << 20).with_nodes(1);
/// let config = PoolConfig { region, ..PoolConfig::default() };
/// let pool = Pool::open_or_create(&path, config.clone()).unwrap();
/// // The only node is run by a live process (this one).
/// let err = Pool::open_or_create(&path, config).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Busy);
/// assert!(matches!(err.cause(), PoolError::NoFreeNode { nodes: 1 }));
/// let _w = pool.map_writer::<u64, u64>("a").unwrap();
/// let err = pool.tree_writer::<u64, u64>("b").unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::WriterAlive);
/// assert!(matches!(err.cause(), PoolError::WriterTaken));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum PoolError {
    /// The region file could not be opened, created or validated.
    Region(RegionError),
    /// The runtime refused (a node taken, a bad configuration, ...).
    Runtime(BiError),
    /// The node's heap could not be set up.
    Alloc(AllocError),
    /// Opening a structure failed (another type under that name, a live writer, ...).
    Collection(CollectionError),
    /// Every node of the region is run by a live process.
    NoFreeNode {
        /// Nodes in the region.
        nodes: usize,
    },
    /// This pool's node writer is already handed out (one writer handle per pool).
    WriterTaken,
    /// A live process writes the structure but has not served it through a shared
    /// handle ([`Pool::map`](crate::Pool::map)) yet, so there is nowhere to send writes: open the
    /// writer's handle with `map` or `tree`, then this one.
    NoWriterYet,
    /// An environment variable the program reads has a value it cannot use
    /// ([`Emulation::from_env`](crate::Emulation::from_env)).
    BadEnvironment {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it should hold.
        expected: &'static str,
    },
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::Region(e) => write!(f, "region: {e}"),
            PoolError::Runtime(e) => write!(f, "runtime: {e}"),
            PoolError::Alloc(e) => write!(f, "heap: {e}"),
            PoolError::Collection(e) => write!(f, "{e}"),
            PoolError::NoFreeNode { nodes } => {
                write!(
                    f,
                    "all {nodes} nodes of the region are run by live processes"
                )
            }
            PoolError::WriterTaken => {
                write!(
                    f,
                    "this pool's node already has a writer handle (one per pool)"
                )
            }
            PoolError::NoWriterYet => f.write_str(
                "the structure's writer serves no other process yet (it opened no shared \
                 handle)",
            ),
            PoolError::BadEnvironment {
                var,
                value,
                expected,
            } => write!(f, "{var}={value:?}: expected {expected}"),
        }
    }
}

impl std::error::Error for PoolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PoolError::Region(e) => Some(e),
            PoolError::Runtime(e) => Some(e),
            PoolError::Alloc(e) => Some(e),
            PoolError::Collection(e) => Some(e),
            PoolError::NoFreeNode { .. }
            | PoolError::WriterTaken
            | PoolError::NoWriterYet
            | PoolError::BadEnvironment { .. } => None,
        }
    }
}

impl From<RegionError> for PoolError {
    fn from(e: RegionError) -> Self {
        PoolError::Region(e)
    }
}

impl From<BiError> for PoolError {
    fn from(e: BiError) -> Self {
        PoolError::Runtime(e)
    }
}

impl From<AllocError> for PoolError {
    fn from(e: AllocError) -> Self {
        PoolError::Alloc(e)
    }
}

impl From<CollectionError> for PoolError {
    fn from(e: CollectionError) -> Self {
        PoolError::Collection(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_see_through_every_layer() {
        let deep = PoolError::Collection(CollectionError::Runtime(BiError::Region(
            RegionError::StructureTypeMismatch {
                name: "sessions".into(),
                stored: 1,
                requested: 2,
            },
        )));
        let e = Error::from(deep).about(|| structure::<u64, String>("map", "sessions"));
        assert_eq!(e.kind(), ErrorKind::WrongTypes);
        let text = e.to_string();
        assert!(text.starts_with("map \"sessions\" of u64 -> alloc::string::String: "));
        assert!(!text.contains("fingerprint"), "{text}");
        assert!(std::error::Error::source(&e).is_some());
        let timeout = Error::from(CollectionError::Delegation(DelegationError::CombinerDied));
        assert_eq!(timeout.kind(), ErrorKind::NoWriter);
        assert_eq!(
            Error::from(PoolError::WriterTaken).kind(),
            ErrorKind::WriterAlive
        );
        assert_eq!(
            Error::from(BiError::NoReaderSlot { node: 0 }).kind(),
            ErrorKind::Busy
        );
    }
}
