//! How the engine touches shared memory: fixed-size word encodings of program values,
//! word sources for the hot loops, and a view wrapper that counts cache-line operations.

use bi_core::line::LineSize;
use bi_core::mem::{MemError, MemView};
use bytemuck::Pod;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The largest program value (data, gather, aggregate) in bytes.
pub(crate) const MAX_VALUE_BYTES: usize = 16;

/// Words a value of type `T` occupies.
pub(crate) const fn words_of<T>() -> usize {
    size_of::<T>().div_ceil(8)
}

/// `value` as (up to) two words, zero padded.
#[inline]
pub(crate) fn encode<T: Pod>(value: &T) -> [u64; 2] {
    let mut w = [0u64; 2];
    bytemuck::bytes_of_mut(&mut w)[..size_of::<T>()].copy_from_slice(bytemuck::bytes_of(value));
    w
}

/// The value `encode` produced.
#[inline]
pub(crate) fn decode<T: Pod>(w: &[u64; 2]) -> T {
    bytemuck::pod_read_unaligned(&bytemuck::bytes_of(w)[..size_of::<T>()])
}

/// Somewhere the hot loops read words from, by word index.
pub(crate) trait WordSource {
    /// The word at index `i`.
    fn word(&self, i: usize) -> Result<u64, MemError>;

    /// The `T` stored from word `i` on.
    #[inline]
    fn value<T: Pod>(&self, i: usize) -> Result<T, MemError> {
        let mut w = [self.word(i)?, 0];
        if words_of::<T>() > 1 {
            w[1] = self.word(i + 1)?;
        }
        Ok(decode(&w))
    }
}

/// Reads a slot from word `base`: `words` value words, then its meta word when the slot
/// has one.
#[inline]
pub(crate) fn read_slot<S: WordSource>(
    src: &S,
    base: usize,
    words: usize,
    meta: bool,
) -> Result<(Option<u64>, [u64; 2]), MemError> {
    let mut w = [0u64; 2];
    for (k, x) in w.iter_mut().enumerate().take(words) {
        *x = src.word(base + k)?;
    }
    let meta = if meta {
        Some(src.word(base + words)?)
    } else {
        None
    };
    Ok((meta, w))
}

pub(crate) fn out_of_bounds(i: usize, words: usize) -> MemError {
    MemError::OutOfBounds {
        offset: i.saturating_mul(8),
        len: 8,
        size: words.saturating_mul(8),
    }
}

/// A partition's private memory (stock mode's replica copies).
#[derive(Clone, Copy)]
pub(crate) struct LocalWords<'a>(pub &'a [u64]);

impl WordSource for LocalWords<'_> {
    #[inline]
    fn word(&self, i: usize) -> Result<u64, MemError> {
        self.0
            .get(i)
            .copied()
            .ok_or_else(|| out_of_bounds(i, self.0.len()))
    }
}

/// Shared memory read directly (the hardware backend: plain loads, as through the view).
#[cfg_attr(loom, allow(dead_code))]
pub(crate) struct DirectWords<'a>(pub &'a [AtomicU64]);

impl WordSource for DirectWords<'_> {
    #[inline]
    fn word(&self, i: usize) -> Result<u64, MemError> {
        self.0
            .get(i)
            .map(|w| w.load(Ordering::Relaxed))
            .ok_or_else(|| out_of_bounds(i, self.0.len()))
    }
}

/// Shared memory read through a node's view (the emulator), word `i` being the view's
/// word `base + i`.
pub(crate) struct ViewWords<'a, V> {
    pub view: &'a V,
    pub base: usize,
}

impl<V: MemView> WordSource for ViewWords<'_, V> {
    #[inline]
    fn word(&self, i: usize) -> Result<u64, MemError> {
        self.view
            .load_u64(self.base.saturating_add(i).saturating_mul(8))
    }
}

/// Lines written back and invalidated, shared by every view of one run.
#[derive(Debug, Default)]
pub(crate) struct LineCounters {
    pub written_back: AtomicU64,
    pub invalidated: AtomicU64,
}

/// What [`LineCounters`] counted.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LineTotals {
    pub written_back: u64,
    pub invalidated: u64,
}

impl LineCounters {
    pub fn totals(&self) -> LineTotals {
        LineTotals {
            written_back: self.written_back.load(Ordering::Relaxed),
            invalidated: self.invalidated.load(Ordering::Relaxed),
        }
    }
}

/// A view that counts the lines its cache operations cover.
#[derive(Clone, Debug)]
pub(crate) struct Counted<V> {
    inner: V,
    counters: Arc<LineCounters>,
}

impl<V: MemView> Counted<V> {
    pub fn new(inner: V, counters: Arc<LineCounters>) -> Self {
        Counted { inner, counters }
    }

    fn lines(&self, offset: usize, len: usize) -> u64 {
        if len == 0 {
            return 0;
        }
        let line = self.inner.line_size();
        let last = offset.saturating_add(len - 1);
        (line.line_of(last) - line.line_of(offset) + 1) as u64
    }
}

impl<V: MemView> MemView for Counted<V> {
    #[inline]
    fn size(&self) -> usize {
        self.inner.size()
    }
    #[inline]
    fn line_size(&self) -> LineSize {
        self.inner.line_size()
    }
    #[inline]
    fn load<T: Pod>(&self, offset: usize) -> Result<T, MemError> {
        self.inner.load(offset)
    }
    #[inline]
    fn store<T: Pod>(&self, offset: usize, value: &T) -> Result<(), MemError> {
        self.inner.store(offset, value)
    }
    #[inline]
    fn load_u64(&self, offset: usize) -> Result<u64, MemError> {
        self.inner.load_u64(offset)
    }
    #[inline]
    fn store_u64(&self, offset: usize, value: u64) -> Result<(), MemError> {
        self.inner.store_u64(offset, value)
    }
    fn writeback(&self, offset: usize, len: usize) -> Result<(), MemError> {
        self.inner.writeback(offset, len)?;
        let n = self.lines(offset, len);
        self.counters.written_back.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }
    fn invalidate(&self, offset: usize, len: usize) -> Result<(), MemError> {
        self.inner.invalidate(offset, len)?;
        let n = self.lines(offset, len);
        self.counters.invalidated.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }
    fn flush(&self, offset: usize, len: usize) -> Result<(), MemError> {
        self.inner.flush(offset, len)?;
        let n = self.lines(offset, len);
        self.counters.written_back.fetch_add(n, Ordering::Relaxed);
        self.counters.invalidated.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }
    #[inline]
    fn fence(&self) {
        self.inner.fence();
    }
    fn note_reuse(&self, offset: usize, len: usize) -> Result<(), MemError> {
        self.inner.note_reuse(offset, len)
    }
    fn write_back_node(&self, node: usize) -> Result<(), MemError> {
        self.inner.write_back_node(node)
    }
    fn compare_exchange_u64(&self, offset: usize, current: u64, new: u64) -> Result<u64, MemError> {
        self.inner.compare_exchange_u64(offset, current, new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_words() {
        assert_eq!(decode::<f64>(&encode(&1.5f64)), 1.5);
        assert_eq!(decode::<u32>(&encode(&7u32)), 7);
        assert_eq!(decode::<[f64; 2]>(&encode(&[1.0f64, -2.0])), [1.0, -2.0]);
        assert_eq!(words_of::<u32>(), 1);
        assert_eq!(words_of::<[f64; 2]>(), 2);
        let local = LocalWords(&[1u64, 2, 3]);
        assert_eq!(local.word(2), Ok(3));
        assert!(local.word(3).is_err());
    }
}
