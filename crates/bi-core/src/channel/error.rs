//! What can go wrong building or using a channel.
//!
//! A channel's control words live in memory another node writes, so they are input from
//! outside this process: a crashed peer, a second producer attached by mistake, or a layout
//! that disagrees between the two sides can leave values no correct protocol produces.
//! Each such value is reported as [`ChannelError::Corrupt`] with the numbers that disagree,
//! never acted on.

use crate::mem::MemError;
use std::fmt;

/// An error building a [`ChannelLayout`](super::ChannelLayout), attaching an endpoint or
/// moving messages.
///
/// ```
/// use bi_core::channel::{ChannelError, ChannelLayout};
/// use bi_core::line::LineSize;
///
/// let err = ChannelLayout::<u64>::new(0, 3, LineSize::X86).unwrap_err();
/// assert_eq!(err, ChannelError::BadCapacity { capacity: 3 });
/// assert_eq!(err.to_string(), "channel capacity 3 is not a non-zero power of two");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChannelError {
    /// The capacity is zero or not a power of two.
    BadCapacity {
        /// The capacity asked for.
        capacity: usize,
    },
    /// The channel's offset is not on a line boundary.
    Misaligned {
        /// The offset asked for.
        offset: usize,
        /// The line size it must be a multiple of.
        line: usize,
    },
    /// The channel's extent does not fit in the address space.
    TooLarge {
        /// The offset asked for.
        offset: usize,
        /// The capacity asked for.
        capacity: usize,
        /// The size of one entry in bytes.
        entry_size: usize,
    },
    /// The view's lines are larger than the layout's, so the head and the tail (or an
    /// entry and a neighbouring structure) would share a line.
    LineSize {
        /// The line size the layout was computed with.
        layout: usize,
        /// The line size of the view.
        view: usize,
    },
    /// The memory refused an access (for example, the channel lies outside the view).
    Mem(MemError),
    /// A control word read from shared memory is impossible under the protocol.
    Corrupt {
        /// What is wrong with it.
        reason: Corruption,
        /// The head counter involved (read from memory or held by this endpoint).
        head: u64,
        /// The tail counter involved (read from memory or held by this endpoint).
        tail: u64,
    },
}

/// Why a pair of channel counters is impossible.
///
/// ```
/// use bi_core::channel::Corruption;
///
/// assert_eq!(Corruption::Overfull.to_string(), "more entries outstanding than the capacity");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Corruption {
    /// The tail is behind the head: more messages consumed than produced.
    TailBehindHead,
    /// The tail is more than the capacity ahead of the head.
    Overfull,
    /// A counter moved backwards since this endpoint last read it.
    WentBack,
    /// Advancing a counter would wrap around `u64`.
    Overflow,
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Corruption::TailBehindHead => "the tail is behind the head",
            Corruption::Overfull => "more entries outstanding than the capacity",
            Corruption::WentBack => "a counter moved backwards",
            Corruption::Overflow => "a counter would wrap around",
        })
    }
}

impl fmt::Display for ChannelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ChannelError::BadCapacity { capacity } => {
                write!(
                    f,
                    "channel capacity {capacity} is not a non-zero power of two"
                )
            }
            ChannelError::Misaligned { offset, line } => {
                write!(
                    f,
                    "channel offset {offset} is not a multiple of the {line}-byte line"
                )
            }
            ChannelError::TooLarge {
                offset,
                capacity,
                entry_size,
            } => write!(
                f,
                "a channel of {capacity} entries of {entry_size} bytes at offset {offset} \
                 does not fit in the address space"
            ),
            ChannelError::LineSize { layout, view } => write!(
                f,
                "the channel layout assumes {layout}-byte lines but the view uses {view}-byte lines"
            ),
            ChannelError::Mem(e) => write!(f, "channel memory: {e}"),
            ChannelError::Corrupt { reason, head, tail } => {
                write!(f, "corrupt channel (head {head}, tail {tail}): {reason}")
            }
        }
    }
}

impl std::error::Error for ChannelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ChannelError::Mem(e) => Some(e),
            _ => None,
        }
    }
}

impl From<MemError> for ChannelError {
    fn from(e: MemError) -> ChannelError {
        ChannelError::Mem(e)
    }
}
