//! What can go wrong setting up or using delegation.
//!
//! The delegation area is shared memory that other nodes write, so every word read from
//! it is input from outside this process: a client attached to the wrong index, a layout
//! that disagrees between the two sides or a crashed peer can leave values that no correct
//! run produces. Each is reported with the numbers that disagree, never acted on.

use std::fmt;

/// What a client was waiting for when its patience ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitingFor {
    /// Room in its channel: the server has not drained it.
    ChannelSpace,
    /// Its acknowledgement word to reach a sequence number: the server has not applied
    /// the operation (or has not published that it did).
    Acknowledgement,
}

impl fmt::Display for WaitingFor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WaitingFor::ChannelSpace => "room in the channel",
            WaitingFor::Acknowledgement => "the acknowledgement",
        })
    }
}

/// Why a delegation layout, client or server refused to work.
///
/// It travels inside [`CollectionError::Delegation`](crate::CollectionError::Delegation).
///
/// ```
/// use bi_collections::delegate::{DelegationError, DelegationLayout};
/// use bi_collections::CollectionError;
/// use bi_core::line::LineSize;
///
/// let err = DelegationLayout::<u64, u64>::new(0..64, 0, 8, LineSize::X86).unwrap_err();
/// assert!(matches!(err, CollectionError::Delegation(DelegationError::NoClients)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DelegationError {
    /// A layout was asked for zero clients.
    NoClients,
    /// The range given for the delegation area does not start on a line boundary.
    Misaligned {
        /// The start asked for.
        offset: usize,
        /// The line size it must be a multiple of.
        line: usize,
    },
    /// The range given for the delegation area is shorter than the layout needs (or
    /// its end is before its start).
    RangeTooSmall {
        /// The start of the range.
        offset: usize,
        /// Its length in bytes (zero if the range is reversed).
        len: usize,
        /// The bytes the layout needs.
        required: usize,
    },
    /// The number of clients and the capacity give an area larger than the address
    /// space.
    TooLarge {
        /// The clients asked for.
        clients: usize,
        /// The per-client capacity asked for.
        capacity: usize,
    },
    /// A client index at or past the layout's number of clients.
    NoSuchClient {
        /// The index asked for.
        index: usize,
        /// The number of clients of the layout.
        clients: usize,
    },
    /// The area's header is not the one a server writes for this layout: the server has
    /// not initialised it yet, or the two sides disagree about the layout.
    HeaderMismatch {
        /// Which header field disagrees.
        field: &'static str,
        /// The value this side's layout implies.
        expected: u64,
        /// The value found in memory.
        found: u64,
    },
    /// The server read a record whose sequence number is not the next one of its
    /// client: a stale slot, or two clients attached to the same index.
    SequenceGap {
        /// The client's index.
        client: usize,
        /// The sequence number due.
        expected: u64,
        /// The one found.
        found: u64,
    },
    /// The server read a record of an unknown kind.
    BadRecord {
        /// The client's index.
        client: usize,
        /// The kind word found.
        kind: u64,
    },
    /// A client read an acknowledgement that went backwards or is ahead of what it has
    /// sent.
    BadAcknowledgement {
        /// The client's index.
        client: usize,
        /// The acknowledgement read.
        ack: u64,
        /// The last one the client had read.
        previous: u64,
        /// Operations the client has sent.
        sent: u64,
    },
    /// A client was asked to wait for an operation it has not sent.
    NotSent {
        /// The sequence number asked for.
        seq: u64,
        /// Operations the client has sent.
        sent: u64,
    },
    /// A client waited longer than its configured timeout (see
    /// [`ClientConfig`](super::ClientConfig)); the server is gone, stopped or
    /// overloaded. The operation stays in the channel: a live server applies it later;
    /// a server that takes the area over from a dead one reports it failed
    /// ([`WriterDied`](Self::WriterDied)) and never applies it; the dead one may have
    /// applied it before dying.
    Timeout {
        /// What the client was waiting for.
        waiting_for: WaitingFor,
        /// The sequence number waited on (the next one to send, for channel space).
        seq: u64,
        /// The acknowledgement last read.
        applied: u64,
    },
    /// While the client waited, its watch ([`DelegationClient::watch_server`]) found that
    /// no live process serves the area any more (the writer's process is gone, or gave
    /// the role up): it stopped waiting then instead of at the timeout. What it sent
    /// and was not acknowledged is as after a [`Timeout`](Self::Timeout): a successor
    /// reports it failed and never applies it; the dead writer may have applied some.
    ///
    /// [`DelegationClient::watch_server`]: super::DelegationClient::watch_server
    ServerGone {
        /// What the client was waiting for.
        waiting_for: WaitingFor,
        /// The sequence number waited on (the next one to send, for channel space).
        seq: u64,
        /// The acknowledgement last read.
        applied: u64,
    },
    /// The thread carrying a combined batch ([`NodeCombiner`](super::NodeCombiner)) died
    /// with it (it panicked), or an earlier one did and the node's channel is no longer
    /// used. The operation was sent once or not at all, and is never sent again.
    CombinerDied,
    /// The combined batch that carried the operation failed with an error that is not a
    /// delegation error (a memory access of the channel): the operation was sent once
    /// or not at all, and is never sent again.
    BatchFailed,
    /// The writer that received operations `first..=last` of this client died before
    /// acknowledging them, and the writer that took over reported them failed
    /// ([`Outcome::Failed`](super::Outcome::Failed)): no writer applies them from now on.
    /// The dead one may have applied some of them before dying; read the structure to
    /// find out, and send again what is missing.
    WriterDied {
        /// The first operation reported failed.
        first: u64,
        /// The last one.
        last: u64,
    },
    /// The writer's heap had no room for some of this client's operations up to `upto`
    /// ([`Outcome::NoRoom`](super::Outcome::NoRoom)): nothing of those was written; the
    /// others were applied. Send them again once room is freed (an insert sent twice
    /// leaves what one leaves).
    NoRoom {
        /// The last operation the report covers.
        upto: u64,
    },
    /// An operation's old value was asked for, but the server's structure does not
    /// report old values ([`ApplyBatch::old_values`](crate::ApplyBatch::old_values)); it
    /// was applied.
    NoOldValues {
        /// The operation's sequence number.
        seq: u64,
    },
    /// A result slot held an outcome no server writes.
    BadResult {
        /// The client's index.
        client: usize,
        /// The operation's sequence number.
        seq: u64,
    },
    /// A key or value of the operation is longer than what crosses between a client
    /// and the writer (the parcel and reply areas of the delegation area,
    /// [`DelegationLayout::parcel_bytes`](super::DelegationLayout::parcel_bytes)):
    /// nothing was sent or written. Write it from the writer's own handle, whose
    /// structure holds strings of any length its heap has room for. Also what a remote
    /// write gets when the value at its key is longer than a reply carries (the writer's
    /// own handle put it there): the writer refused the operation, and the value stays.
    ItemTooLarge {
        /// The item's length in bytes.
        len: usize,
        /// The longest item that crosses.
        limit: usize,
    },
    /// The server read a record whose word names bytes outside its client's parcel
    /// area.
    BadParcel {
        /// The client's index.
        client: usize,
    },
}

impl fmt::Display for DelegationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DelegationError::NoClients => {
                f.write_str("a delegation area needs at least one client")
            }
            DelegationError::Misaligned { offset, line } => write!(
                f,
                "delegation area offset {offset} is not a multiple of the {line}-byte line"
            ),
            DelegationError::RangeTooSmall {
                offset,
                len,
                required,
            } => write!(
                f,
                "delegation area at offset {offset} has {len} bytes but needs {required}"
            ),
            DelegationError::TooLarge { clients, capacity } => write!(
                f,
                "{clients} clients of capacity {capacity} do not fit in the address space"
            ),
            DelegationError::NoSuchClient { index, clients } => {
                write!(f, "client index {index} is not below the {clients} clients")
            }
            DelegationError::HeaderMismatch {
                field,
                expected,
                found,
            } => write!(
                f,
                "delegation header field `{field}` is {found}, expected {expected} \
                 (not initialised by the server, or a different layout)"
            ),
            DelegationError::SequenceGap {
                client,
                expected,
                found,
            } => write!(
                f,
                "client {client} sent sequence number {found} where {expected} was due"
            ),
            DelegationError::BadRecord { client, kind } => {
                write!(f, "client {client} sent a record of unknown kind {kind}")
            }
            DelegationError::BadAcknowledgement {
                client,
                ack,
                previous,
                sent,
            } => write!(
                f,
                "client {client} read acknowledgement {ack} after {previous} with {sent} sent"
            ),
            DelegationError::NotSent { seq, sent } => {
                write!(f, "cannot wait for operation {seq}: only {sent} were sent")
            }
            DelegationError::Timeout {
                waiting_for,
                seq,
                applied,
            } => write!(
                f,
                "timed out waiting for {waiting_for} (sequence {seq}, applied up to {applied})"
            ),
            DelegationError::ServerGone {
                waiting_for,
                seq,
                applied,
            } => write!(
                f,
                "no live process serves the writes any more: stopped waiting for \
                 {waiting_for} (sequence {seq}, applied up to {applied})"
            ),
            DelegationError::CombinerDied => f.write_str(
                "the thread carrying this node's combined batch died; the operation was \
                 applied once or not at all",
            ),
            DelegationError::BatchFailed => f.write_str(
                "the combined batch carrying the operation failed; it was applied once or \
                 not at all",
            ),
            DelegationError::NoRoom { upto } => write!(
                f,
                "the writer's heap had no room for some operations up to {upto}; nothing \
                 of those was written"
            ),
            DelegationError::WriterDied { first, last } => write!(
                f,
                "the writer died before acknowledging operations {first}..={last}; its \
                 successor reported them failed and never applies them (the dead writer \
                 may have)"
            ),
            DelegationError::NoOldValues { seq } => write!(
                f,
                "operation {seq} was applied, but the structure does not report old values"
            ),
            DelegationError::ItemTooLarge { len, limit } => write!(
                f,
                "an item of {len} bytes is longer than the {limit} bytes a delegated write \
                 carries; nothing was written (write it from the writer's own handle)"
            ),
            DelegationError::BadParcel { client } => write!(
                f,
                "client {client} sent a record naming bytes outside its parcel area"
            ),
            DelegationError::BadResult { client, seq } => {
                write!(
                    f,
                    "client {client} read a malformed result for operation {seq}"
                )
            }
        }
    }
}

impl std::error::Error for DelegationError {}
