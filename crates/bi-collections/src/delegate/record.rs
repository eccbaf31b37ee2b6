//! An operation as it travels through a channel: a plain record of words.
//!
//! A channel carries `Pod` values, and [`Op`] is an enum whose layout Rust does not fix,
//! so each operation is flattened into an [`OpRecord`]: a tag word (kind, condition and the
//! client's sequence number), the key, the value (zero for a removal) and the value a
//! condition expects (zero unless it is [`Condition::Equals`]). The sequence number is what lets
//! the server refuse a record it should never see: a slot still holding the previous
//! lap's record (a stale line) carries a number one capacity too small.

use crate::{Condition, Op, Stored};
use bytemuck::{Pod, Zeroable};
use std::fmt;

/// The tag's low bits: the sequence number, modulo 2^56 (a client would need years of
/// operations at a billion a second to wrap it, and a wrapped number still compares
/// equal through [`OpRecord::carries`]).
const SEQ_BITS: u32 = 56;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// The tag's kind nibble (bits 56..60): zero is no kind, so zeroed memory never decodes.
const KIND_INSERT: u64 = 1;
const KIND_REMOVE: u64 = 2;
/// The tag's condition nibble (bits 60..64).
const CONDITION_ALWAYS: u64 = 0;
const CONDITION_ABSENT: u64 = 1;
const CONDITION_PRESENT: u64 = 2;
const CONDITION_EQUALS: u64 = 3;

/// A record's first word, stored as itself: the condition in bits 60..64, the kind of
/// operation in bits 56..60 and the client's sequence number, modulo 2^56, below them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(transparent)]
struct Tag(u64);

impl Tag {
    fn new(kind: u64, condition: u64, seq: u64) -> Tag {
        Tag(condition << 60 | kind << SEQ_BITS | seq & SEQ_MASK)
    }

    fn seq(self) -> u64 {
        self.0 & SEQ_MASK
    }

    /// The kind in the low nibble, the condition in the high one.
    fn kind_and_condition(self) -> u64 {
        self.0 >> SEQ_BITS
    }

    fn kind(self) -> u64 {
        self.kind_and_condition() & 0xf
    }

    fn condition(self) -> u64 {
        self.kind_and_condition() >> 4
    }
}

/// One delegated operation in shared memory: tag (kind, condition, sequence number), key,
/// value, expected value.
///
/// `repr(C, packed)`: the fields lie back to back with no padding, whatever `K` and `V`
/// are, which is what makes the record `Pod` for every `Pod` key and value.
///
/// ```
/// use bi_collections::{Condition, Op};
/// use bi_collections::delegate::OpRecord;
///
/// let rec = OpRecord::new(7, Op::Insert(1u32, 2u16));
/// assert_eq!(size_of::<OpRecord<u32, u16>>(), 8 + 4 + 2 + 2);
/// assert_eq!(rec.seq(), 7);
/// assert_eq!(rec.request(), Some((Op::Insert(1, 2), Condition::Always)));
/// let cas = OpRecord::conditional(8, Op::Insert(1u32, 3u16), Condition::Equals(2));
/// assert_eq!(cas.request(), Some((Op::Insert(1, 3), Condition::Equals(2))));
/// ```
#[repr(C, packed)]
pub struct OpRecord<K, V> {
    tag: Tag,
    key: K,
    value: V,
    expected: V,
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
    /// The record of the unconditional `op` with sequence number `seq`.
    ///
    /// ```
    /// use bi_collections::Op;
    /// use bi_collections::delegate::OpRecord;
    ///
    /// let r = OpRecord::new(3, Op::Insert(1u32, 10u32));
    /// assert_eq!((r.seq(), r.kind(), r.op()), (3, 1, Some(Op::Insert(1, 10))));
    /// ```
    pub fn new(seq: u64, op: Op<K, V>) -> Self {
        Self::conditional(seq, op, Condition::Always)
    }

    /// The record of `op` under `condition` with sequence number `seq`.
    ///
    /// ```
    /// use bi_collections::{Condition, Op};
    /// use bi_collections::delegate::OpRecord;
    ///
    /// let r = OpRecord::conditional(4, Op::Insert(1u32, 10u32), Condition::Absent);
    /// assert_eq!(r.request(), Some((Op::Insert(1, 10), Condition::Absent)));
    /// ```
    pub fn conditional(seq: u64, op: Op<K, V>, condition: Condition<V>) -> Self {
        let (kind, key, value) = match op {
            Op::Insert(key, value) => (KIND_INSERT, key, value),
            Op::Remove(key) => (KIND_REMOVE, key, V::zeroed()),
        };
        let (condition, expected) = match condition {
            Condition::Always => (CONDITION_ALWAYS, V::zeroed()),
            Condition::Absent => (CONDITION_ABSENT, V::zeroed()),
            Condition::Present => (CONDITION_PRESENT, V::zeroed()),
            Condition::Equals(v) => (CONDITION_EQUALS, v),
        };
        OpRecord {
            tag: Tag::new(kind, condition, seq),
            key,
            value,
            expected,
        }
    }

    /// The sequence number (the client's count of operations including this one),
    /// modulo 2^56.
    ///
    /// ```
    /// use bi_collections::Op;
    /// use bi_collections::delegate::OpRecord;
    ///
    /// assert_eq!(OpRecord::new(9, Op::<u32, u32>::Remove(1)).seq(), 9);
    /// ```
    pub fn seq(&self) -> u64 {
        let tag = self.tag;
        tag.seq()
    }

    /// Whether this is the record of operation number `seq` (compared modulo 2^56).
    ///
    /// ```
    /// use bi_collections::Op;
    /// use bi_collections::delegate::OpRecord;
    ///
    /// let r = OpRecord::new(9, Op::<u32, u32>::Remove(1));
    /// assert!(r.carries(9) && !r.carries(8) && r.carries(9 + (1 << 56)));
    /// ```
    pub fn carries(&self, seq: u64) -> bool {
        self.seq() == seq & SEQ_MASK
    }

    /// The kind and condition bits of the tag (kind 1 insert, 2 remove, in the low nibble;
    /// condition 0 always, 1 absent, 2 present, 3 equals, in the high nibble); anything else
    /// is corrupt.
    ///
    /// ```
    /// use bi_collections::{Condition, Op};
    /// use bi_collections::delegate::OpRecord;
    ///
    /// assert_eq!(OpRecord::new(1, Op::Insert(1u32, 1u32)).kind(), 1);
    /// assert_eq!(OpRecord::new(1, Op::<u32, u32>::Remove(1)).kind(), 2);
    /// assert_eq!(OpRecord::conditional(1, Op::<u32, u32>::Remove(1), Condition::Equals(1)).kind(), 0x32);
    /// ```
    pub fn kind(&self) -> u64 {
        let tag = self.tag;
        tag.kind_and_condition()
    }

    /// The operation, or `None` if the tag is not one [`OpRecord::conditional`] writes.
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
        self.request().map(|(op, _)| op)
    }

    /// The operation and its condition, or `None` if the tag is not one
    /// [`OpRecord::conditional`] writes.
    ///
    /// ```
    /// use bi_collections::{Condition, Op};
    /// use bi_collections::delegate::OpRecord;
    ///
    /// let r = OpRecord::conditional(2, Op::<u32, u32>::Remove(4), Condition::Equals(7));
    /// assert_eq!(r.request(), Some((Op::Remove(4), Condition::Equals(7))));
    /// ```
    pub fn request(&self) -> Option<(Op<K, V>, Condition<V>)> {
        // Fields are copied out by value: a packed field may not be borrowed.
        let (tag, key, value, expected) = (self.tag, self.key, self.value, self.expected);
        let op = match tag.kind() {
            KIND_INSERT => Op::Insert(key, value),
            KIND_REMOVE => Op::Remove(key),
            _ => return None,
        };
        let condition = match tag.condition() {
            CONDITION_ALWAYS => Condition::Always,
            CONDITION_ABSENT => Condition::Absent,
            CONDITION_PRESENT => Condition::Present,
            CONDITION_EQUALS => Condition::Equals(expected),
            _ => return None,
        };
        Some((op, condition))
    }
}

impl<K: Pod + fmt::Debug, V: Pod + fmt::Debug> fmt::Debug for OpRecord<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (key, value, expected) = (self.key, self.value, self.expected);
        f.debug_struct("OpRecord")
            .field("kind", &self.kind())
            .field("seq", &self.seq())
            .field("key", &key)
            .field("value", &value)
            .field("expected", &expected)
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
    /// absent), which is also the value its condition found.
    Replaced(Option<V>),
    /// Applied by a structure that does not report old values
    /// ([`ApplyBatch::old_values`](crate::ApplyBatch::old_values)).
    Applied,
    /// Not applied: its [`Condition`] refused the value found at the key (`None`: absent),
    /// which is that value.
    Refused(Option<V>),
    /// Not applied: it has a [`Condition`] and the structure cannot tell what is at a key
    /// ([`ApplyBatch::old_values`](crate::ApplyBatch::old_values)).
    Undecided,
    /// Never applied by the current writer, and never will be: the writer that received
    /// it died first. It may have applied the operation before dying (the outcome of a
    /// request to a dead process is unknown), but no later writer applies it again.
    Failed,
    /// Not applied: the value at the key is `len` bytes long, more than a reply to a
    /// client carries (a delegated operation reports the value it finds, and that one
    /// the writer's own handle put there): the writer refused the operation.
    TooLarge {
        /// The length of the value found, in bytes.
        len: usize,
    },
    /// Not applied: the writer's heap had no room for it, and nothing of it was
    /// written. It may go through once room is freed.
    NoRoom,
}

impl<V> Outcome<V> {
    /// The outcome of an operation under `condition` that a structure applied or skipped:
    /// `found` is the value the structure found at the key, `None` if it cannot tell.
    /// What the delegation server reports, and what a writer's own conditional call returns.
    ///
    /// ```
    /// use bi_collections::Condition;
    /// use bi_collections::delegate::Outcome;
    ///
    /// let same = |a: &u8, b: &u8| a == b;
    /// assert_eq!(Outcome::decide(&Condition::Absent, Some(Some(1u8)), same), Outcome::Refused(Some(1)));
    /// assert_eq!(Outcome::decide(&Condition::Equals(1), Some(Some(1u8)), same), Outcome::Replaced(Some(1)));
    /// assert_eq!(Outcome::decide(&Condition::Always, None, same), Outcome::<u8>::Applied);
    /// assert_eq!(Outcome::decide(&Condition::Present, None, same), Outcome::<u8>::Undecided);
    /// ```
    pub fn decide(
        condition: &Condition<V>,
        found: Option<Option<V>>,
        same: impl Fn(&V, &V) -> bool,
    ) -> Self {
        match found {
            Some(found) if condition.admits(found.as_ref(), same) => Outcome::Replaced(found),
            Some(found) => Outcome::Refused(found),
            None if condition.is_always() => Outcome::Applied,
            None => Outcome::Undecided,
        }
    }
}

impl<V> Outcome<V> {
    /// The value the operation found at its key: `Ok` if it applied (the value it
    /// replaced or removed), `Err` if its condition refused it; `None` if the outcome does
    /// not tell ([`Applied`](Self::Applied), [`Undecided`](Self::Undecided),
    /// [`Failed`](Self::Failed)).
    ///
    /// ```
    /// use bi_collections::delegate::Outcome;
    ///
    /// assert_eq!(Outcome::Replaced(Some(1u8)).found(), Some(Ok(Some(1))));
    /// assert_eq!(Outcome::Refused(None::<u8>).found(), Some(Err(None)));
    /// assert_eq!(Outcome::<u8>::Failed.found(), None);
    /// ```
    pub fn found(self) -> Option<Result<Option<V>, Option<V>>> {
        match self {
            Outcome::Replaced(v) => Some(Ok(v)),
            Outcome::Refused(v) => Some(Err(v)),
            Outcome::Applied
            | Outcome::Undecided
            | Outcome::Failed
            | Outcome::TooLarge { .. }
            | Outcome::NoRoom => None,
        }
    }

    /// The same outcome with its value mapped by `f` (the first error of `f` if any).
    pub(crate) fn try_map<W, E>(self, f: impl FnOnce(V) -> Result<W, E>) -> Result<Outcome<W>, E> {
        Ok(match self {
            Outcome::Replaced(v) => Outcome::Replaced(v.map(f).transpose()?),
            Outcome::Refused(v) => Outcome::Refused(v.map(f).transpose()?),
            Outcome::Applied => Outcome::Applied,
            Outcome::Undecided => Outcome::Undecided,
            Outcome::Failed => Outcome::Failed,
            Outcome::TooLarge { len } => Outcome::TooLarge { len },
            Outcome::NoRoom => Outcome::NoRoom,
        })
    }
}

/// The two words beside a client's acknowledgement, which only the server writes: the
/// operations a takeover reported failed (`from + 1 ..= to`, [`Outcome::Failed`]), and,
/// in the top 16 bits of the first word, how many of the client's operations the server
/// refused for lack of heap ([`Outcome::NoRoom`]), wrapping. A client that finds the
/// count changed across a wait knows that some of what it sent in between was refused,
/// whichever outcome it read last.
///
/// ```ignore
/// let w = FailedWords { from: 7, to: 9, refused: 3 };
/// assert_eq!(FailedWords::from_words(w.words()), w);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FailedWords {
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) refused: u16,
}

impl FailedWords {
    const REFUSED_SHIFT: u32 = 48;
    const RANGE_MASK: u64 = (1 << Self::REFUSED_SHIFT) - 1;

    pub(crate) fn from_words([first, to]: [u64; 2]) -> FailedWords {
        FailedWords {
            from: first & Self::RANGE_MASK,
            to,
            refused: (first >> Self::REFUSED_SHIFT) as u16,
        }
    }

    pub(crate) fn words(self) -> [u64; 2] {
        let first = (self.from & Self::RANGE_MASK) | u64::from(self.refused) << Self::REFUSED_SHIFT;
        [first, self.to]
    }
}

/// The record of an operation on keys `K` and values `V` as it travels: their words.
pub(crate) type WireRecord<K, V> = OpRecord<<K as Stored>::Word, <V as Stored>::Word>;

/// The outcome of an operation on values `V` as it travels: the word of the value.
pub(crate) type WireResult<V> = ResultRecord<<V as Stored>::Word>;

/// Whether two `Pod` values have the same bytes: how the delegation server compares the
/// value a condition expects with the value it finds (so a float `NaN` equals itself and
/// `0.0` differs from `-0.0`, as with a hardware compare-and-swap).
pub(crate) fn same_bytes<V: Pod>(a: &V, b: &V) -> bool {
    bytemuck::bytes_of(a) == bytemuck::bytes_of(b)
}

/// The state word of a result slot.
const RESULT_ABSENT: u64 = 1;
const RESULT_PRESENT: u64 = 2;
const RESULT_APPLIED: u64 = 3;
const RESULT_FAILED: u64 = 4;
const RESULT_REFUSED_ABSENT: u64 = 5;
const RESULT_REFUSED_PRESENT: u64 = 6;
const RESULT_UNDECIDED: u64 = 7;
/// With the value's length in the bits above [`RESULT_KIND`].
const RESULT_TOO_LARGE: u64 = 8;
const RESULT_KIND: u64 = 0xFF;
const RESULT_NO_ROOM: u64 = 9;

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
            Outcome::Refused(None) => (RESULT_REFUSED_ABSENT, V::zeroed()),
            Outcome::Refused(Some(v)) => (RESULT_REFUSED_PRESENT, v),
            Outcome::Undecided => (RESULT_UNDECIDED, V::zeroed()),
            Outcome::TooLarge { len } => (RESULT_TOO_LARGE | (len as u64) << 8, V::zeroed()),
            Outcome::NoRoom => (RESULT_NO_ROOM, V::zeroed()),
        };
        ResultRecord { seq, state, value }
    }

    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// The outcome, or `None` for a state word no server writes.
    pub(crate) fn outcome(&self) -> Option<Outcome<V>> {
        let value = self.value;
        // Only the too-large state carries bits above the kind.
        let kind = match self.state & RESULT_KIND {
            RESULT_TOO_LARGE => RESULT_TOO_LARGE,
            _ => self.state,
        };
        match kind {
            RESULT_TOO_LARGE => Some(Outcome::TooLarge {
                len: usize::try_from(self.state >> 8).ok()?,
            }),
            RESULT_ABSENT => Some(Outcome::Replaced(None)),
            RESULT_PRESENT => Some(Outcome::Replaced(Some(value))),
            RESULT_APPLIED => Some(Outcome::Applied),
            RESULT_FAILED => Some(Outcome::Failed),
            RESULT_REFUSED_ABSENT => Some(Outcome::Refused(None)),
            RESULT_REFUSED_PRESENT => Some(Outcome::Refused(Some(value))),
            RESULT_UNDECIDED => Some(Outcome::Undecided),
            RESULT_NO_ROOM => Some(Outcome::NoRoom),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_compare_by_their_bytes_as_a_hardware_compare_does() {
        assert!(same_bytes(&f64::NAN, &f64::NAN));
        assert!(!same_bytes(&0.0f64, &-0.0));
        assert!(same_bytes(&7u32, &7u32) && !same_bytes(&7u32, &8u32));
    }

    #[test]
    fn records_round_trip_through_bytes() {
        let conditions = [
            Condition::Always,
            Condition::Absent,
            Condition::Present,
            Condition::Equals(7),
        ];
        for (op, condition) in [
            Op::Insert([1u8, 2, 3], 0xdead_beef_u32),
            Op::Remove([4, 5, 6]),
        ]
        .into_iter()
        .flat_map(|op| conditions.map(|g| (op, g)))
        {
            let rec = OpRecord::conditional(u64::MAX, op, condition);
            let bytes = bytemuck::bytes_of(&rec).to_vec();
            assert_eq!(bytes.len(), 8 + 3 + 4 + 4);
            let back: OpRecord<[u8; 3], u32> = bytemuck::pod_read_unaligned(&bytes);
            assert_eq!(back.seq(), SEQ_MASK);
            assert!(back.carries(u64::MAX));
            assert_eq!(back.request(), Some((op, condition)));
            assert_eq!(back.op(), Some(op));
        }
    }

    /// What a record shows of itself (a server's log and a client's errors print it).
    #[test]
    fn a_record_shows_its_fields() {
        let rec = OpRecord::conditional(3, Op::Insert(1u32, 10u32), Condition::Equals(9));
        assert_eq!(
            format!("{rec:?}"),
            "OpRecord { kind: 49, seq: 3, key: 1, value: 10, expected: 9 }"
        );
    }

    /// The value an outcome found at its key: what a client reads back from a
    /// conditional operation, applied or refused; nothing for outcomes that do not tell.
    #[test]
    fn outcomes_tell_the_value_they_found_and_only_those_that_know_it() {
        assert_eq!(Outcome::Replaced(Some(1u8)).found(), Some(Ok(Some(1))));
        assert_eq!(Outcome::Replaced(None::<u8>).found(), Some(Ok(None)));
        assert_eq!(Outcome::Refused(Some(2u8)).found(), Some(Err(Some(2))));
        assert_eq!(Outcome::Refused(None::<u8>).found(), Some(Err(None)));
        for silent in [
            Outcome::<u8>::Applied,
            Outcome::Undecided,
            Outcome::Failed,
            Outcome::TooLarge { len: 9 },
            Outcome::NoRoom,
        ] {
            assert_eq!(silent.found(), None, "{silent:?}");
        }
    }

    #[test]
    fn zeroed_and_unknown_kinds_do_not_decode() {
        assert_eq!(OpRecord::<u64, u64>::zeroed().op(), None);
        let rec = OpRecord::new(1, Op::<u64, u64>::Remove(3));
        for (kind, condition) in [(3, 0), (0, 1), (1, 4), (2, 15)] {
            let mut bad = rec;
            bad.tag = Tag::new(kind, condition, 1);
            assert_eq!(bad.request(), None, "kind {kind} condition {condition}");
            assert_eq!(bad.kind(), condition << 4 | kind);
        }
    }

    #[test]
    fn failed_words_round_trip() {
        let w = FailedWords {
            from: 7,
            to: 9,
            refused: 65535,
        };
        assert_eq!(FailedWords::from_words(w.words()), w);
        assert_eq!(FailedWords::from_words([7, 9]).refused, 0); // what a takeover wrote
    }

    #[test]
    fn results_round_trip_and_zeroed_ones_do_not_decode() {
        for outcome in [
            Outcome::Replaced(None),
            Outcome::Replaced(Some(9u32)),
            Outcome::Applied,
            Outcome::Failed,
            Outcome::Refused(None),
            Outcome::Refused(Some(3)),
            Outcome::Undecided,
            Outcome::NoRoom,
        ] {
            let rec = ResultRecord::new(5, outcome);
            let back: ResultRecord<u32> = bytemuck::pod_read_unaligned(bytemuck::bytes_of(&rec));
            assert_eq!((back.seq(), back.outcome()), (5, Some(outcome)));
        }
        assert_eq!(ResultRecord::<u32>::zeroed().outcome(), None);
    }
}
