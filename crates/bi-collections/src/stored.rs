//! How keys and values sit in shared memory: plain types as their bytes, strings and
//! byte strings behind a link.
//!
//! A tree node or a bucket entry holds a fixed-size **word** per key and per value
//! ([`Stored::Word`]):
//!
//! - a [`Plain`] type (integers, floats, arrays of them, your own `Pod` types) is its own
//!   word: stored and compared as itself, at no cost;
//! - a string or byte string (`String`, `Box<str>`, `Vec<u8>`, `Box<[u8]>`) is a 24-byte
//!   [`BytesWord`]: the length, the first 8 bytes and the last 4, with
//!   the bytes themselves in the word when there are at most 16 of them, and otherwise in
//!   a [byte string](bi_core::runtime::bytes) of their own (up to 3.6 MB with 64-byte
//!   lines), which lives and dies with its entry.
//!
//! Lookups take the borrowed form of a key ([`Query`]: `&str` for a `String` key, `&[u8]`
//! for a `Vec<u8>` key, the key itself for a plain key). Comparing with a stored byte
//! string reads it line by line under the stamp protocol only when the length, the first
//! 8 bytes and (for equality) the last 4 could not decide; a torn or reused string is
//! never read as a key or returned as a value.
//!
//! To store a type of your own, derive `bytemuck::Pod` for it and implement [`Plain`]:
//!
//! ```
//! use bi_collections::{BiTree, Plain};
//! use bi_core::runtime::testing::Setup;
//!
//! #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
//! #[repr(C)]
//! struct Order {
//!     qty: u32,
//!     price: u32,
//! }
//! impl Plain for Order {}
//!
//! let s = Setup::new(2, 0);
//! let tree = BiTree::<String, Order>::at(s.slot(0));
//! let mut w = tree.write_handle(s.writer(0)).unwrap();
//! w.insert("apples".to_string(), Order { qty: 3, price: 120 }).unwrap();
//! let r = tree.read_handle(&s.nodes[1]).unwrap();
//! assert_eq!(r.get("apples").unwrap(), Some(Order { qty: 3, price: 120 }));
//! ```

use crate::CollectionError;
use bi_core::heap::Heap;
use bi_core::mem::MemView;
use bi_core::runtime::{BiError, BiGuard, Bytes, Fetch, Link, Writer};
use bytemuck::{Pod, Zeroable};
use std::cmp::Ordering;

/// A `Pod` type stored as its own bytes: the marker that makes it a key or value of
/// [`BiTree`](crate::BiTree) and [`BiHashMap`](crate::BiHashMap). Implemented here for
/// the integers, floats, `()` and arrays of plain types; implement it for your own `Pod`
/// types (see the [module docs](self)).
///
/// ```
/// use bi_collections::Plain;
///
/// fn plain<T: Plain>() {}
/// plain::<u64>();
/// plain::<[u8; 40]>(); // any length
/// plain::<[[u32; 2]; 3]>();
/// ```
pub trait Plain: Pod + Send + Sync {}

macro_rules! plain {
    ($($t:ty),*) => { $(impl Plain for $t {})* };
}
plain!(
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    ()
);
impl<T: Plain, const N: usize> Plain for [T; N] {}

/// Where stored byte strings are read: a reader's guard (validated reads), or the
/// writer's own cache.
pub trait ByteSource {
    /// Copies the byte string `link` names into `out`. `len` is the length the word
    /// that links to it records: a source may use it to read in one step, never trust
    /// it (the caller checks the length read against it).
    fn read_bytes_into(
        &self,
        link: Link<Bytes>,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CollectionError>;
    /// `probe.cmp(stored)`, reading only as far as the first difference.
    fn compare_bytes_with(
        &self,
        link: Link<Bytes>,
        probe: &[u8],
    ) -> Result<Ordering, CollectionError>;
}

fn stale(link: Link<Bytes>) -> CollectionError {
    CollectionError::Runtime(BiError::StaleLink {
        offset: link.offset(),
    })
}

/// A reader's byte strings: a string that does not validate after one invalidation is a
/// stale link (the search that reached it starts again from fresh entry points).
impl<M: MemView> ByteSource for BiGuard<'_, M> {
    fn read_bytes_into(
        &self,
        link: Link<Bytes>,
        _: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CollectionError> {
        match self.read_bytes(link, out)? {
            Fetch::Value(()) => Ok(()),
            Fetch::Null | Fetch::Stale => Err(stale(link)),
        }
    }

    #[inline]
    fn compare_bytes_with(
        &self,
        link: Link<Bytes>,
        probe: &[u8],
    ) -> Result<Ordering, CollectionError> {
        match self.compare_bytes(link, probe)? {
            Fetch::Value(o) => Ok(o),
            Fetch::Null | Fetch::Stale => Err(stale(link)),
        }
    }
}

impl<M: MemView, H: Heap> ByteSource for Writer<M, H> {
    fn read_bytes_into(
        &self,
        link: Link<Bytes>,
        _: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CollectionError> {
        *out = self.read_own_bytes(link)?;
        Ok(())
    }

    fn compare_bytes_with(
        &self,
        link: Link<Bytes>,
        probe: &[u8],
    ) -> Result<Ordering, CollectionError> {
        Ok(self.compare_own_bytes(link, probe)?)
    }
}

/// A key or value type of [`BiTree`](crate::BiTree) and [`BiHashMap`](crate::BiHashMap):
/// every [`Plain`] type, and `String`, `Box<str>`, `Vec<u8>`, `Box<[u8]>` (see the
/// [module docs](self)). Implemented by this crate only.
///
/// ```
/// use bi_collections::Stored;
///
/// assert_eq!(<u64 as Stored>::CODE, 8);
/// assert_ne!(<String as Stored>::CODE, <Vec<u8> as Stored>::CODE);
/// assert!(!<u64 as Stored>::OUT_OF_LINE && <String as Stored>::OUT_OF_LINE);
/// ```
pub trait Stored: Clone + 'static + sealed::Sealed {
    /// What a node or bucket entry holds for one item.
    type Word: Pod + Send + Sync;
    /// Names the type in a map's header (a map opened with other types is refused).
    const CODE: u32;
    /// Whether words may link to byte strings of their own.
    const OUT_OF_LINE: bool;
    /// The word for this item; `alloc` writes a byte string when the bytes do not fit the
    /// word.
    fn to_word(
        &self,
        alloc: impl FnOnce(&[u8]) -> Result<Link<Bytes>, CollectionError>,
    ) -> Result<Self::Word, CollectionError>;
    /// The item a word holds.
    fn from_word(word: &Self::Word, src: &impl ByteSource) -> Result<Self, CollectionError>;
    /// The byte string a word owns (retired with the entry that held the word).
    fn owned_bytes(word: &Self::Word) -> Option<Link<Bytes>>;
    /// Whether `self` is the item `word` holds.
    fn matches_word(
        &self,
        word: &Self::Word,
        src: &impl ByteSource,
    ) -> Result<bool, CollectionError>
    where
        Self: Eq;
    /// `self.cmp(item)` for the item `word` holds.
    fn order_word(
        &self,
        word: &Self::Word,
        src: &impl ByteSource,
    ) -> Result<Ordering, CollectionError>
    where
        Self: Ord;
    /// Whether `a` and `b` have the same bytes: how a writer compares the value a
    /// [`Condition::Equals`](crate::Condition) expects with the one it finds (so a float `NaN`
    /// equals itself and `0.0` differs from `-0.0`, as with a hardware
    /// compare-and-swap).
    ///
    /// ```
    /// use bi_collections::Stored;
    ///
    /// assert!(f64::same(&f64::NAN, &f64::NAN) && !f64::same(&0.0, &-0.0));
    /// assert!(String::same(&"ab".to_string(), &"ab".to_string()));
    /// ```
    fn same(a: &Self, b: &Self) -> bool;
}

/// The borrowed form a lookup takes for keys of type `K`: `K` itself for a [`Plain`] key,
/// `str` for `String` and `Box<str>`, `[u8]` for `Vec<u8>` and `Box<[u8]>` (and the owned
/// forms too).
///
/// ```
/// use bi_collections::{BiTree, Query};
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(1, 0);
/// let tree = BiTree::<Vec<u8>, u32>::at(s.slot(0));
/// let mut w = tree.write_handle(s.writer(0)).unwrap();
/// w.insert(b"key".to_vec(), 1).unwrap();
/// let r = tree.read_handle(&s.nodes[0]).unwrap();
/// assert_eq!(r.get(&b"key"[..]).unwrap(), Some(1)); // by &[u8]
/// assert_eq!(r.get(&b"key".to_vec()).unwrap(), Some(1)); // by &Vec<u8>
/// ```
pub trait Query<K: Stored> {
    /// Whether this is the key `word` holds.
    fn matches(&self, word: &K::Word, src: &impl ByteSource) -> Result<bool, CollectionError>
    where
        K: Eq;
    /// `self.cmp(key)` for the key `word` holds.
    fn order(&self, word: &K::Word, src: &impl ByteSource) -> Result<Ordering, CollectionError>
    where
        K: Ord;
}

mod sealed {
    pub trait Sealed {}
    impl<T: super::Plain> Sealed for T {}
    impl Sealed for String {}
    impl Sealed for Box<str> {}
    impl Sealed for Vec<u8> {}
    impl Sealed for Box<[u8]> {}
}

impl<T: Plain> Stored for T {
    type Word = T;
    const CODE: u32 = size_of::<T>() as u32;
    const OUT_OF_LINE: bool = false;

    #[inline(always)]
    fn to_word(
        &self,
        _: impl FnOnce(&[u8]) -> Result<Link<Bytes>, CollectionError>,
    ) -> Result<T, CollectionError> {
        Ok(*self)
    }

    #[inline(always)]
    fn from_word(word: &T, _: &impl ByteSource) -> Result<T, CollectionError> {
        Ok(*word)
    }

    #[inline(always)]
    fn owned_bytes(_: &T) -> Option<Link<Bytes>> {
        None
    }

    #[inline(always)]
    fn matches_word(&self, word: &T, _: &impl ByteSource) -> Result<bool, CollectionError>
    where
        T: Eq,
    {
        Ok(self == word)
    }

    #[inline(always)]
    fn order_word(&self, word: &T, _: &impl ByteSource) -> Result<Ordering, CollectionError>
    where
        T: Ord,
    {
        Ok(self.cmp(word))
    }

    #[inline(always)]
    fn same(a: &T, b: &T) -> bool {
        crate::delegate::same_bytes(a, b)
    }
}

impl<K: Stored> Query<K> for K {
    #[inline(always)]
    fn matches(&self, word: &K::Word, src: &impl ByteSource) -> Result<bool, CollectionError>
    where
        K: Eq,
    {
        self.matches_word(word, src)
    }

    #[inline(always)]
    fn order(&self, word: &K::Word, src: &impl ByteSource) -> Result<Ordering, CollectionError>
    where
        K: Ord,
    {
        self.order_word(word, src)
    }
}

/// Bytes of `item` that do not fit its word (kept in a byte string of their own when
/// stored): zero for plain items and strings of up to 16 bytes.
pub(crate) fn out_of_line_len<T: Stored>(item: &T) -> usize {
    let mut len = 0;
    // Counting only: the word is not kept.
    let _ = item.to_word(|bytes| {
        len = bytes.len();
        Ok(Link::from_raw(0))
    });
    len
}

/// Bytes kept in a [`BytesWord`] itself.
const INLINE_BYTES: usize = 16;

/// The word of a string or byte string (see the [module docs](self)).
///
/// ```
/// use bi_collections::stored::BytesWord;
///
/// assert_eq!(size_of::<BytesWord>(), 24);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct BytesWord {
    /// The length in bytes.
    len: u32,
    /// The last 4 bytes (0 when all the bytes are in the word).
    check: u32,
    /// The first 8 bytes, zero-padded.
    head: [u8; 8],
    /// Bytes 8..16 when the length is at most 16; otherwise the raw link of the byte
    /// string holding them all.
    tail: [u8; 8],
}

impl BytesWord {
    fn split(bytes: &[u8]) -> ([u8; 8], [u8; 8]) {
        let (mut head, mut tail) = ([0u8; 8], [0u8; 8]);
        let h = bytes.len().min(8);
        head[..h].copy_from_slice(&bytes[..h]);
        if bytes.len() <= INLINE_BYTES {
            tail[..bytes.len() - h].copy_from_slice(&bytes[h..]);
        }
        (head, tail)
    }

    /// The last 4 bytes of a string longer than [`INLINE_BYTES`]: together with the
    /// length and the first 8 bytes, they tell most different keys apart (numbered and
    /// prefixed keys differ at the end) without reading the stored string, at the cost
    /// of no hashing.
    fn check_of(bytes: &[u8]) -> u32 {
        let n = bytes.len();
        bytes
            .get(n.saturating_sub(4)..)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_ne_bytes)
    }

    fn is_inline(&self) -> bool {
        self.len as usize <= INLINE_BYTES
    }

    fn link(&self) -> Link<Bytes> {
        Link::from_raw(u64::from_ne_bytes(self.tail))
    }

    fn new(
        bytes: &[u8],
        alloc: impl FnOnce(&[u8]) -> Result<Link<Bytes>, CollectionError>,
    ) -> Result<BytesWord, CollectionError> {
        let len =
            u32::try_from(bytes.len()).map_err(|_| BiError::TooLarge { bytes: bytes.len() })?;
        let (head, mut tail) = Self::split(bytes);
        let mut check = 0;
        if bytes.len() > INLINE_BYTES {
            tail = alloc(bytes)?.raw().to_ne_bytes();
            check = Self::check_of(bytes);
        }
        Ok(BytesWord {
            len,
            check,
            head,
            tail,
        })
    }

    fn bytes(&self, src: &impl ByteSource) -> Result<Vec<u8>, CollectionError> {
        if self.is_inline() {
            let mut all = [0u8; INLINE_BYTES];
            all[..8].copy_from_slice(&self.head);
            all[8..].copy_from_slice(&self.tail);
            return Ok(all[..self.len as usize].to_vec());
        }
        let mut out = Vec::new();
        src.read_bytes_into(self.link(), self.len as usize, &mut out)?;
        if out.len() != self.len as usize {
            return Err(CollectionError::Corrupt {
                reason: "a stored byte string's length differs from its key's",
            });
        }
        Ok(out)
    }

    #[inline]
    fn matches(&self, probe: &[u8], src: &impl ByteSource) -> Result<bool, CollectionError> {
        if self.len as usize != probe.len() {
            return Ok(false);
        }
        let (head, tail) = Self::split(probe);
        if head != self.head {
            return Ok(false);
        }
        if self.is_inline() {
            return Ok(tail == self.tail);
        }
        if Self::check_of(probe) != self.check {
            return Ok(false);
        }
        Ok(src.compare_bytes_with(self.link(), probe)? == Ordering::Equal)
    }

    #[inline]
    fn order(&self, probe: &[u8], src: &impl ByteSource) -> Result<Ordering, CollectionError> {
        // Zero padding orders correctly: where padded heads differ, either both strings
        // have a byte there or the shorter one ended where the other has a non-zero byte.
        let (head, _) = Self::split(probe);
        match head.cmp(&self.head) {
            Ordering::Equal => {}
            o => return Ok(o),
        }
        if self.is_inline() {
            // Equal padded heads: the first bytes agree (a shorter string's missing bytes
            // being zeros of the other), so the rests and then the lengths decide.
            let stored = self.len as usize;
            let rest = &self.tail[..stored.saturating_sub(8)];
            let mine = probe.get(8..).unwrap_or_default();
            return Ok(mine.cmp(rest).then(probe.len().cmp(&stored)));
        }
        src.compare_bytes_with(self.link(), probe)
    }
}

/// The bytes of a string or byte string, owned or borrowed.
trait Raw {
    fn raw(&self) -> &[u8];
}

macro_rules! raw {
    ($($t:ty),*) => { $(impl Raw for $t { fn raw(&self) -> &[u8] { AsRef::<[u8]>::as_ref(&**self) } })* };
}
raw!(String, Box<str>, Vec<u8>, Box<[u8]>);
impl Raw for str {
    fn raw(&self) -> &[u8] {
        self.as_bytes()
    }
}
impl Raw for [u8] {
    fn raw(&self) -> &[u8] {
        self
    }
}

macro_rules! stored_bytes {
    ($owned:ty, $borrowed:ty, $code:expr, |$b:ident| $from:expr) => {
        impl Stored for $owned {
            type Word = BytesWord;
            const CODE: u32 = $code;
            const OUT_OF_LINE: bool = true;

            fn to_word(
                &self,
                alloc: impl FnOnce(&[u8]) -> Result<Link<Bytes>, CollectionError>,
            ) -> Result<BytesWord, CollectionError> {
                BytesWord::new(self.raw(), alloc)
            }

            fn from_word(word: &BytesWord, src: &impl ByteSource) -> Result<Self, CollectionError> {
                let $b = word.bytes(src)?;
                $from
            }

            fn owned_bytes(word: &BytesWord) -> Option<Link<Bytes>> {
                (!word.is_inline()).then(|| word.link())
            }

            fn matches_word(
                &self,
                word: &BytesWord,
                src: &impl ByteSource,
            ) -> Result<bool, CollectionError> {
                word.matches(self.raw(), src)
            }

            fn order_word(
                &self,
                word: &BytesWord,
                src: &impl ByteSource,
            ) -> Result<Ordering, CollectionError> {
                word.order(self.raw(), src)
            }

            fn same(a: &Self, b: &Self) -> bool {
                a.raw() == b.raw()
            }
        }

        impl Query<$owned> for $borrowed {
            fn matches(
                &self,
                word: &BytesWord,
                src: &impl ByteSource,
            ) -> Result<bool, CollectionError>
            where
                $owned: Eq,
            {
                word.matches(self.raw(), src)
            }

            fn order(
                &self,
                word: &BytesWord,
                src: &impl ByteSource,
            ) -> Result<Ordering, CollectionError>
            where
                $owned: Ord,
            {
                word.order(self.raw(), src)
            }
        }
    };
}

/// Names text in a map's header; no plain type is this large.
const TEXT: u32 = 0x8000_0001;
/// Names byte strings in a map's header.
const BYTES: u32 = 0x8000_0002;

fn text(bytes: Vec<u8>) -> Result<String, CollectionError> {
    String::from_utf8(bytes).map_err(|_| CollectionError::Corrupt {
        reason: "a stored string is not UTF-8",
    })
}

stored_bytes!(String, str, TEXT, |b| text(b));
stored_bytes!(Box<str>, str, TEXT, |b| text(b).map(String::into_boxed_str));
stored_bytes!(Vec<u8>, [u8], BYTES, |b| Ok(b));
stored_bytes!(Box<[u8]>, [u8], BYTES, |b| Ok(b.into_boxed_slice()));

#[cfg(test)]
mod tests {
    use super::*;
    use bi_core::runtime::testing::Setup;

    #[test]
    fn only_bytes_past_the_word_are_out_of_line() {
        assert_eq!(out_of_line_len(&7u64), 0);
        assert_eq!(out_of_line_len(&"sixteen bytes ok".to_string()), 0);
        assert_eq!(out_of_line_len(&vec![0u8; 17]), 17);
    }

    /// Every pair of strings orders and matches as `str` does, inline or not.
    #[test]
    fn words_order_and_match_as_the_bytes_do() {
        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let samples: Vec<Vec<u8>> = [
            &b""[..],
            b"a",
            b"a\0",
            b"ab",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefghi",
            b"abcdefghijklmnop",
            b"abcdefghijklmnopq",
            b"abcdefghijklmnoq",
            b"abcdefghijklmnopqrstuvwxyz0123456789",
            b"abcdefghijklmnopqrstuvwxyz0123456788",
            b"b",
            b"\xff\xff",
        ]
        .iter()
        .map(|b| b.to_vec())
        .collect();
        let words: Vec<BytesWord> = samples
            .iter()
            .map(|b| BytesWord::new(b, |bytes| Ok(w.alloc_bytes(bytes)?)).unwrap())
            .collect();
        for (a, probe) in samples.iter().enumerate() {
            for (b, stored) in samples.iter().enumerate() {
                let word = &words[b];
                assert_eq!(
                    word.order(probe, &w).unwrap(),
                    probe.cmp(stored),
                    "{a} vs {b}"
                );
                assert_eq!(
                    word.matches(probe, &w).unwrap(),
                    probe == stored,
                    "{a} vs {b}"
                );
            }
            assert_eq!(&words[a].bytes(&w).unwrap(), probe);
            assert_eq!(
                <Vec<u8> as Stored>::owned_bytes(&words[a]).is_some(),
                probe.len() > INLINE_BYTES
            );
        }
    }

    #[test]
    fn text_that_is_not_utf8_is_corrupt_not_a_panic() {
        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let word = BytesWord::new(&[0xff; 30], |b| Ok(w.alloc_bytes(b)?)).unwrap();
        assert!(matches!(
            <String as Stored>::from_word(&word, &w),
            Err(CollectionError::Corrupt { .. })
        ));
        assert_eq!(
            <Vec<u8> as Stored>::from_word(&word, &w).unwrap(),
            vec![0xff; 30]
        );
    }
}
