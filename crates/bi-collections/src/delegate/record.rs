//! An operation as it travels through a channel: a plain record of words.
//!
//! A channel carries `Pod` values, and [`Op`] is an enum whose layout Rust does not fix,
//! so each operation is flattened into an [`OpRecord`]: a kind word, the client's
//! sequence number, the key and the value (zero for a removal). The sequence number is
//! what lets the server refuse a record it should never see: a slot still holding the
//! previous lap's record (a stale line) carries a number one capacity too small.

use crate::Op;
use bytemuck::{Pod, Zeroable};
use std::fmt;

/// The kind word of an insertion. Zero is no kind, so zeroed memory never decodes.
const KIND_INSERT: u64 = 1;
/// The kind word of a removal.
const KIND_REMOVE: u64 = 2;

/// One delegated operation in shared memory: kind, sequence number, key, value.
///
/// `repr(C, packed)`: the fields lie back to back with no padding, whatever `K` and `V`
/// are, which is what makes the record `Pod` for every `Pod` key and value.
///
/// ```
/// use bi_collections::Op;
/// use bi_collections::delegate::OpRecord;
///
/// let rec = OpRecord::new(7, Op::Insert(1u32, 2u16));
/// assert_eq!(size_of::<OpRecord<u32, u16>>(), 8 + 8 + 4 + 2);
/// assert_eq!(rec.seq(), 7);
/// assert_eq!(rec.op(), Some(Op::Insert(1, 2)));
/// assert_eq!(OpRecord::new(8, Op::<u32, u16>::Remove(1)).op(), Some(Op::Remove(1)));
/// ```
#[repr(C, packed)]
pub struct OpRecord<K, V> {
    kind: u64,
    seq: u64,
    key: K,
    value: V,
}

impl<K: Copy, V: Copy> Clone for OpRecord<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: Copy, V: Copy> Copy for OpRecord<K, V> {}

// SAFETY: every field is `Zeroable` (`u64`, and `K`, `V` are `Pod`, hence `Zeroable`), and
// a packed struct has no padding, so the all-zero bit pattern is a valid `OpRecord`.
unsafe impl<K: Pod, V: Pod> Zeroable for OpRecord<K, V> {}

// SAFETY: `Pod` asks for `Copy + 'static` (implemented above; `K, V: Pod` are
// `'static`), no padding bytes and every bit pattern valid. `repr(C, packed)` lays the
// four fields out in order with alignment 1, so there is no padding between them or at
// the end (the size is exactly the sum of the field sizes); each field is `u64` or
// `Pod`, so any bytes are a valid value of each field and hence of the record. No field
// is a reference or has interior mutability.
unsafe impl<K: Pod, V: Pod> Pod for OpRecord<K, V> {}

impl<K: Pod, V: Pod> OpRecord<K, V> {
    /// The record of `op` with sequence number `seq`.
    ///
    /// ```
    /// use bi_collections::Op;
    /// use bi_collections::delegate::OpRecord;
    ///
    /// let r = OpRecord::new(3, Op::Insert(1u32, 10u32));
    /// assert_eq!((r.seq(), r.kind(), r.op()), (3, 1, Some(Op::Insert(1, 10))));
    /// ```
    pub fn new(seq: u64, op: Op<K, V>) -> Self {
        match op {
            Op::Insert(key, value) => OpRecord {
                kind: KIND_INSERT,
                seq,
                key,
                value,
            },
            Op::Remove(key) => OpRecord {
                kind: KIND_REMOVE,
                seq,
                key,
                value: V::zeroed(),
            },
        }
    }

    /// The sequence number (the client's count of operations including this one).
    ///
    /// ```
    /// use bi_collections::Op;
    /// use bi_collections::delegate::OpRecord;
    ///
    /// assert_eq!(OpRecord::new(9, Op::<u32, u32>::Remove(1)).seq(), 9);
    /// ```
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The kind word (1 insert, 2 remove, anything else is corrupt).
    ///
    /// ```
    /// use bi_collections::Op;
    /// use bi_collections::delegate::OpRecord;
    ///
    /// assert_eq!(OpRecord::new(1, Op::Insert(1u32, 1u32)).kind(), 1);
    /// assert_eq!(OpRecord::new(1, Op::<u32, u32>::Remove(1)).kind(), 2);
    /// ```
    pub fn kind(&self) -> u64 {
        self.kind
    }

    /// The operation, or `None` if the kind word is not one an `OpRecord::new` writes.
    ///
    /// ```
    /// use bi_collections::Op;
    /// use bi_collections::delegate::OpRecord;
    ///
    /// let r = OpRecord::new(1, Op::<u32, u32>::Remove(4));
    /// assert_eq!(r.op(), Some(Op::Remove(4)));
    /// let zeroed: OpRecord<u32, u32> = bytemuck::Zeroable::zeroed(); // kind 0: not a record
    /// assert_eq!(zeroed.op(), None);
    /// ```
    pub fn op(&self) -> Option<Op<K, V>> {
        // Fields are copied out by value: a packed field may not be borrowed.
        let (key, value) = (self.key, self.value);
        match self.kind {
            KIND_INSERT => Some(Op::Insert(key, value)),
            KIND_REMOVE => Some(Op::Remove(key)),
            _ => None,
        }
    }
}

impl<K: Pod + fmt::Debug, V: Pod + fmt::Debug> fmt::Debug for OpRecord<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, seq, key, value) = (self.kind, self.seq, self.key, self.value);
        f.debug_struct("OpRecord")
            .field("kind", &kind)
            .field("seq", &seq)
            .field("key", &key)
            .field("value", &value)
            .finish()
    }
}

/// What became of one delegated operation, as the server reports it in the client's
/// result slot.
///
/// ```
/// use bi_collections::delegate::Outcome;
///
/// let done: Outcome<u64> = Outcome::Replaced(Some(7));
/// assert_ne!(done, Outcome::Failed);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome<V> {
    /// Applied; the value the operation replaced or removed (`None`: the key was
    /// absent).
    Replaced(Option<V>),
    /// Applied by a structure that does not report old values
    /// ([`ApplyBatch::old_values`](crate::ApplyBatch::old_values)).
    Applied,
    /// Never applied by the current writer, and never will be: the writer that received
    /// it died first. It may have applied the operation before dying (the outcome of a
    /// request to a dead process is unknown), but no later writer applies it again.
    Failed,
}

/// The state word of a result slot.
const RESULT_ABSENT: u64 = 1;
const RESULT_PRESENT: u64 = 2;
const RESULT_APPLIED: u64 = 3;
const RESULT_FAILED: u64 = 4;

/// One operation's outcome in shared memory: the operation's sequence number, a state
/// word and the old value (zero unless the state says present). Written by the server
/// only, read by the client that sent the operation.
#[repr(C, packed)]
pub(crate) struct ResultRecord<V> {
    seq: u64,
    state: u64,
    value: V,
}

impl<V: Copy> Clone for ResultRecord<V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V: Copy> Copy for ResultRecord<V> {}

// SAFETY: both `u64` fields and `V: Pod` are `Zeroable`, and a packed struct has no
// padding, so the all-zero bit pattern is a valid `ResultRecord`.
unsafe impl<V: Pod> Zeroable for ResultRecord<V> {}

// SAFETY: as for `OpRecord`: `Copy + 'static`, `repr(C, packed)` (no padding, the size
// is the sum of the fields'), every field `u64` or `Pod`, no reference or interior
// mutability.
unsafe impl<V: Pod> Pod for ResultRecord<V> {}

impl<V: Pod> ResultRecord<V> {
    pub(crate) fn new(seq: u64, outcome: Outcome<V>) -> Self {
        let (state, value) = match outcome {
            Outcome::Replaced(None) => (RESULT_ABSENT, V::zeroed()),
            Outcome::Replaced(Some(v)) => (RESULT_PRESENT, v),
            Outcome::Applied => (RESULT_APPLIED, V::zeroed()),
            Outcome::Failed => (RESULT_FAILED, V::zeroed()),
        };
        ResultRecord { seq, state, value }
    }

    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// The outcome, or `None` for a state word no server writes.
    pub(crate) fn outcome(&self) -> Option<Outcome<V>> {
        let value = self.value;
        match self.state {
            RESULT_ABSENT => Some(Outcome::Replaced(None)),
            RESULT_PRESENT => Some(Outcome::Replaced(Some(value))),
            RESULT_APPLIED => Some(Outcome::Applied),
            RESULT_FAILED => Some(Outcome::Failed),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_bytes() {
        let rec = OpRecord::new(u64::MAX, Op::Insert([1u8, 2, 3], 0xdead_beef_u32));
        let bytes = bytemuck::bytes_of(&rec).to_vec();
        assert_eq!(bytes.len(), 8 + 8 + 3 + 4);
        let back: OpRecord<[u8; 3], u32> = bytemuck::pod_read_unaligned(&bytes);
        assert_eq!(back.seq(), u64::MAX);
        assert_eq!(back.op(), Some(Op::Insert([1, 2, 3], 0xdead_beef)));
    }

    #[test]
    fn zeroed_and_unknown_kinds_do_not_decode() {
        assert_eq!(OpRecord::<u64, u64>::zeroed().op(), None);
        let mut rec = OpRecord::new(1, Op::<u64, u64>::Remove(3));
        rec.kind = 3;
        assert_eq!(rec.op(), None);
        assert_eq!(rec.kind(), 3);
    }

    #[test]
    fn results_round_trip_and_zeroed_ones_do_not_decode() {
        for outcome in [
            Outcome::Replaced(None),
            Outcome::Replaced(Some(9u32)),
            Outcome::Applied,
            Outcome::Failed,
        ] {
            let rec = ResultRecord::new(5, outcome);
            let back: ResultRecord<u32> = bytemuck::pod_read_unaligned(bytemuck::bytes_of(&rec));
            assert_eq!((back.seq(), back.outcome()), (5, Some(outcome)));
        }
        assert_eq!(ResultRecord::<u32>::zeroed().outcome(), None);
    }
}
