//! Errors of the shared collections.

use crate::delegate::DelegationError;
use bi_core::channel::ChannelError;
use bi_core::heap::HeapError;
use bi_core::runtime::BiError;
use std::fmt;

/// Why an operation on a shared collection failed. Nothing is lost on an error: the
/// structure a reader sees is the last one published.
///
/// ```
/// use bi_collections::tree::BiTree;
/// use bi_collections::CollectionError;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(1, 0);
/// let tree = BiTree::<u64, u64>::at(s.slot(0));
/// // A tree named by a bare slot has no writer record to take.
/// let err = tree.take_writer(&s.nodes[0], s.writer(0)).unwrap_err();
/// assert!(matches!(err, CollectionError::Corrupt { .. }));
/// assert!(err.to_string().starts_with("corrupt structure"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum CollectionError {
    /// The runtime refused (heap exhausted, log full past its timeout, offset out of the
    /// region, ...).
    Runtime(BiError),
    /// A delegation channel failed (bad layout, corrupt indices).
    Channel(ChannelError),
    /// The structure's bytes in shared memory are not what this type expects.
    Corrupt {
        /// What was wrong.
        reason: &'static str,
    },
    /// No structure of that name exists, and this process cannot make one: it joined a
    /// node another process of its host runs, and reads only.
    NotFound {
        /// The name asked for.
        name: String,
    },
    /// Delegation failed: a bad layout or range, a client index out of range, a corrupt
    /// record or acknowledgement, or a client that timed out waiting for its server.
    Delegation(DelegationError),
    /// A snapshot read of a map found its writer committing during each of its attempts
    /// (every attempt reads the partition twice from memory). Try again later, or read
    /// key by key ([`MapRef::iter_live`](crate::map::MapRef::iter_live)).
    Contended {
        /// The attempts made.
        attempts: usize,
    },
}

/// The answer a search step carries through a walk: its error boxed, so that the answer
/// is small enough for the walk's loop to keep in registers instead of memory.
pub(crate) type StepAnswer<T> = Result<T, Box<CollectionError>>;

impl CollectionError {
    /// Whether the heap had no room for what the operation needed (nothing of the
    /// operation was written; it may go through once room is freed).
    pub(crate) fn is_no_room(&self) -> bool {
        matches!(
            self,
            CollectionError::Runtime(BiError::Heap(
                HeapError::OutOfMemory { .. } | HeapError::NoExtent { .. }
            ))
        )
    }
}

impl fmt::Display for CollectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectionError::Runtime(e) => write!(f, "runtime: {e}"),
            CollectionError::Channel(e) => write!(f, "delegation channel: {e}"),
            CollectionError::Corrupt { reason } => write!(f, "corrupt structure: {reason}"),
            CollectionError::Delegation(e) => write!(f, "delegation: {e}"),
            CollectionError::Contended { attempts } => write!(
                f,
                "the writer changed the map during each of {attempts} snapshot reads"
            ),
            CollectionError::NotFound { name } => write!(
                f,
                "no structure named {name:?} yet (a process that joined a node opens only \
                 what exists)"
            ),
        }
    }
}

impl std::error::Error for CollectionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CollectionError::Runtime(e) => Some(e),
            CollectionError::Channel(e) => Some(e),
            CollectionError::Corrupt { .. }
            | CollectionError::NotFound { .. }
            | CollectionError::Contended { .. } => None,
            CollectionError::Delegation(e) => Some(e),
        }
    }
}

impl From<BiError> for CollectionError {
    fn from(e: BiError) -> Self {
        CollectionError::Runtime(e)
    }
}

impl From<ChannelError> for CollectionError {
    fn from(e: ChannelError) -> Self {
        CollectionError::Channel(e)
    }
}

impl From<DelegationError> for CollectionError {
    fn from(e: DelegationError) -> Self {
        CollectionError::Delegation(e)
    }
}

#[cfg(test)]
mod tests {
    use super::CollectionError;
    use bi_core::heap::HeapError;
    use bi_core::runtime::BiError;

    #[test]
    fn only_a_heap_without_room_is_no_room() {
        let full = CollectionError::Runtime(BiError::Heap(HeapError::OutOfMemory {
            requested: 64,
            free: 0,
        }));
        assert!(full.is_no_room());
        assert!(!CollectionError::Corrupt { reason: "x" }.is_no_room());
    }
}
