//! The byte strings one batch of writes makes and drops.
//!
//! A key or value that does not fit its word lives in a byte string of its own
//! ([`Stored`]), which lives and dies with its entry: written when the entry is, retired
//! when the entry is replaced or removed, once the batch that dropped it is published.
//! A batch that is abandoned gives back what it wrote; a string a batch both wrote and
//! dropped never became reachable and is given back at once.

use crate::CollectionError;
use crate::stored::Stored;
use bi_core::heap::Heap;
use bi_core::mem::MemView;
use bi_core::runtime::{Bytes, Link, Writer};

/// The strings of one batch (see the [module docs](self)).
#[derive(Debug, Default)]
pub(crate) struct Strings {
    written: Vec<Link<Bytes>>,
    dropped: Vec<Link<Bytes>>,
}

impl Strings {
    /// Whether the batch wrote and dropped no string.
    pub(crate) fn is_empty(&self) -> bool {
        self.written.is_empty() && self.dropped.is_empty()
    }

    /// The word of `item`, writing a byte string if its bytes do not fit the word.
    pub(crate) fn word<T: Stored, M: MemView, H: Heap>(
        &mut self,
        w: &mut Writer<M, H>,
        item: &T,
    ) -> Result<T::Word, CollectionError> {
        item.to_word(|bytes| {
            let link = w.alloc_bytes(bytes)?;
            self.written.push(link);
            Ok(link)
        })
    }

    /// The words of an entry.
    pub(crate) fn words<K: Stored, V: Stored, M: MemView, H: Heap>(
        &mut self,
        w: &mut Writer<M, H>,
        key: &K,
        value: &V,
    ) -> Result<(K::Word, V::Word), CollectionError> {
        let k = self.word(w, key)?;
        match self.word(w, value) {
            Ok(v) => Ok((k, v)),
            Err(e) => {
                self.unused::<K, M, H>(w, &k);
                Err(e)
            }
        }
    }

    /// A word this batch made and did not use: its string is given back.
    pub(crate) fn unused<T: Stored, M: MemView, H: Heap>(
        &mut self,
        w: &mut Writer<M, H>,
        word: &T::Word,
    ) {
        if let Some(link) = T::owned_bytes(word) {
            self.written.retain(|&l| l != link);
            // Best effort: the string reached nothing.
            let _ = w.discard_bytes(link);
        }
    }

    /// A word of an entry the batch replaced or removed: its string goes with the batch.
    pub(crate) fn dropped<T: Stored>(&mut self, word: &T::Word) {
        self.dropped.extend(T::owned_bytes(word));
    }

    /// The batch will not be published: gives back the strings it wrote.
    pub(crate) fn abandon<M: MemView, H: Heap>(&mut self, w: &mut Writer<M, H>) {
        self.dropped.clear();
        for link in self.written.drain(..) {
            // Best effort: the first error is the one reported.
            let _ = w.discard_bytes(link);
        }
    }

    /// The batch was published: retires the strings of the entries it dropped, and gives
    /// back at once those it wrote itself.
    pub(crate) fn settle<M: MemView, H: Heap>(
        &mut self,
        w: &mut Writer<M, H>,
    ) -> Result<(), CollectionError> {
        let mut retired = Vec::new();
        for link in self.dropped.drain(..) {
            if let Some(i) = self.written.iter().position(|&l| l == link) {
                self.written.swap_remove(i);
                w.discard_bytes(link)?;
            } else {
                retired.push(link);
            }
        }
        self.written.clear();
        Ok(w.defer_retire(retired)?)
    }
}
