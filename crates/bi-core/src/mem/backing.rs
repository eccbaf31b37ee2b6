//! The bytes that all nodes share: heap memory for tests, or a mapped file.

use super::{MemError, check_range};
use crate::primitive::sync::atomic::{AtomicU64, Ordering};
use std::fs::File;

/// Shared memory, held as 8-byte atomic words.
///
/// Backing memory is accessed only through word-sized atomic operations. That makes a
/// concurrent write by another thread a well-defined race (it is one in practice: another
/// node may write any line at any time), lets Miri and loom run the code that uses it, and
/// costs nothing on x86_64, where aligned atomic loads and stores are plain moves.
///
/// Two sources:
/// - [`Backing::anonymous`]: zeroed heap memory private to this process (tests, the
///   emulator);
/// - [`Backing::map_file`]: a file mapped shared with memmap2 (`/dev/shm/...`, a DAX or CXL
///   device), so several processes see the same bytes.
///
/// ```
/// use bi_core::mem::Backing;
///
/// let mem = Backing::anonymous(4096).unwrap();
/// mem.store_bytes(10, b"hello").unwrap();
/// let mut out = [0u8; 5];
/// mem.load_bytes(10, &mut out).unwrap();
/// assert_eq!(&out, b"hello");
/// assert!(mem.load_bytes(4094, &mut out).is_err()); // runs past the end
/// ```
pub struct Backing {
    kind: Kind,
    size: usize,
}

enum Kind {
    Heap(Box<[AtomicU64]>),
    #[cfg_attr(any(miri, loom), allow(dead_code))]
    Mapped(memmap2::MmapMut),
}

impl std::fmt::Debug for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::Heap(_) => "heap",
            Kind::Mapped(_) => "mapped",
        };
        f.debug_struct("Backing")
            .field("kind", &kind)
            .field("size", &self.size)
            .finish()
    }
}

impl Backing {
    /// Zeroed memory of `size` bytes; `size` must be a non-zero multiple of 8.
    ///
    /// ```
    /// use bi_core::mem::Backing;
    ///
    /// let mem = Backing::anonymous(4096).unwrap();
    /// assert_eq!(mem.size(), 4096);
    /// assert!(Backing::anonymous(0).is_err());
    /// assert!(Backing::anonymous(12).is_err()); // not a multiple of 8
    /// ```
    pub fn anonymous(size: usize) -> Result<Backing, MemError> {
        check_size(size)?;
        // One zeroed allocation, not a word at a time: the allocator hands out zero pages
        // without touching them (and Miri checks it at once).
        #[cfg(not(loom))]
        let words = bytemuck::allocation::zeroed_slice_box::<AtomicU64>(size / 8);
        // loom's atomics are model objects with no all-zero representation.
        #[cfg(loom)]
        let words = (0..size / 8).map(|_| AtomicU64::new(0)).collect();
        Ok(Backing {
            kind: Kind::Heap(words),
            size,
        })
    }

    /// Maps `size` bytes of `file` shared (changes reach the file and every other process
    /// that maps it). The file (or device) must already hold at least `size` bytes.
    ///
    /// ```
    /// use bi_core::mem::Backing;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let file = std::fs::OpenOptions::new().read(true).write(true).create(true)
    ///     .truncate(true).open(dir.path().join("mem")).unwrap();
    /// file.set_len(4096).unwrap();
    /// let a = Backing::map_file(&file, 4096).unwrap();
    /// let b = Backing::map_file(&file, 4096).unwrap();
    /// a.store_bytes(0, b"shared").unwrap();
    /// let mut got = [0u8; 6];
    /// b.load_bytes(0, &mut got).unwrap(); // the same memory through another mapping
    /// assert_eq!(&got, b"shared");
    /// ```
    pub fn map_file(file: &File, size: usize) -> std::io::Result<Backing> {
        check_size(size).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        // loom's atomics are model objects, not the machine's words: a mapping cannot be
        // viewed as them, so model-checked builds have heap memory only.
        if cfg!(loom) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "file-backed memory is not available in loom builds",
            ));
        }
        let file_len = match crate::region::device::extent_of(file)? {
            crate::region::device::Extent::File(n) | crate::region::device::Extent::Device(n) => n,
        };
        if file_len < size as u64 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("file holds {file_len} bytes, {size} needed"),
            ));
        }
        // SAFETY: a shared file mapping may be changed by other processes at any time; we
        // never form references to its bytes, only access them through atomic words (see
        // `words`), so such changes are races between atomics, not undefined behaviour. The
        // caller keeps the file's length stable while it is mapped (truncating a mapped file
        // is the one thing a mapping cannot defend against; region files are never shrunk).
        let map = unsafe { memmap2::MmapOptions::new().len(size).map_mut(file)? };
        Ok(Backing {
            kind: Kind::Mapped(map),
            size,
        })
    }

    /// Size in bytes.
    ///
    /// ```
    /// use bi_core::mem::Backing;
    ///
    /// assert_eq!(Backing::anonymous(1 << 16).unwrap().size(), 1 << 16);
    /// ```
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// The memory as atomic words.
    ///
    /// ```
    /// use bi_core::mem::Backing;
    ///
    /// let mem = Backing::anonymous(64).unwrap();
    /// assert_eq!(mem.words().len(), 8);
    /// ```
    #[inline]
    pub fn words(&self) -> &[AtomicU64] {
        match &self.kind {
            Kind::Heap(words) => words,
            // Never built: `map_file` refuses under loom.
            #[cfg(loom)]
            Kind::Mapped(_) => &[],
            #[cfg(not(loom))]
            Kind::Mapped(map) => {
                let ptr = map.as_ptr() as *const AtomicU64;
                // SAFETY: the mapping is page-aligned (so 8-aligned), `size` bytes long and
                // `size` is a multiple of 8; AtomicU64 has the size and alignment of u64 and
                // permits shared mutation, and the mapping lives as long as `self`.
                unsafe { std::slice::from_raw_parts(ptr, self.size / 8) }
            }
        }
    }

    /// The aligned word at byte `offset`, if `offset` is a multiple of 8 inside the memory.
    ///
    /// ```
    /// use bi_core::mem::Backing;
    /// use std::sync::atomic::Ordering;
    ///
    /// let mem = Backing::anonymous(64).unwrap();
    /// mem.word(8).unwrap().store(42, Ordering::Relaxed);
    /// let mut b = [0u8; 8];
    /// mem.load_bytes(8, &mut b).unwrap();
    /// assert_eq!(u64::from_ne_bytes(b), 42);
    /// assert!(mem.word(4).is_none() && mem.word(64).is_none());
    /// ```
    #[inline]
    pub fn word(&self, offset: usize) -> Option<&AtomicU64> {
        if offset.is_multiple_of(8) {
            self.words().get(offset / 8)
        } else {
            None
        }
    }

    /// The address of byte 0 in this process (for cache instructions; never dereference it
    /// except through [`Backing::words`]).
    ///
    /// ```
    /// use bi_core::mem::Backing;
    ///
    /// let mem = Backing::anonymous(64).unwrap();
    /// assert_eq!(mem.base_ptr(), mem.words().as_ptr().cast::<u8>());
    /// ```
    #[inline]
    pub fn base_ptr(&self) -> *const u8 {
        self.words().as_ptr() as *const u8
    }

    /// Copies `dst.len()` bytes starting at `offset` out of memory.
    ///
    /// ```
    /// use bi_core::mem::Backing;
    ///
    /// let mem = Backing::anonymous(64).unwrap();
    /// mem.store_bytes(3, &[1, 2, 3]).unwrap();
    /// let mut out = [9u8; 5];
    /// mem.load_bytes(2, &mut out).unwrap();
    /// assert_eq!(out, [0, 1, 2, 3, 0]);
    /// assert!(mem.load_bytes(60, &mut out).is_err());
    /// ```
    #[inline]
    pub fn load_bytes(&self, offset: usize, dst: &mut [u8]) -> Result<(), MemError> {
        check_range(offset, dst.len(), self.size)?;
        let words = self.words();
        let mut done = 0;
        if offset.is_multiple_of(8) {
            // The common case (aligned objects): whole words as fixed-size copies, which
            // compile to plain moves instead of a variable-length copy per word.
            let (whole, _) = dst.as_chunks_mut::<8>();
            for (k, chunk) in whole.iter_mut().enumerate() {
                *chunk = words[offset / 8 + k].load(Ordering::Acquire).to_ne_bytes();
            }
            done = whole.len() * 8;
        }
        while done < dst.len() {
            let at = offset + done;
            let (w, skip) = (at / 8, at % 8);
            let take = (8 - skip).min(dst.len() - done);
            let bytes = words[w].load(Ordering::Acquire).to_ne_bytes();
            dst[done..done + take].copy_from_slice(&bytes[skip..skip + take]);
            done += take;
        }
        Ok(())
    }

    /// Copies `src` into memory starting at `offset`.
    ///
    /// Whole aligned words are single atomic stores (so an aligned 8-byte value, such as
    /// an offset pointer, is never seen torn); a partial word is merged with a
    /// compare-and-swap so neighbouring bytes written by other threads are kept.
    ///
    /// ```
    /// use bi_core::mem::Backing;
    ///
    /// let mem = Backing::anonymous(64).unwrap();
    /// mem.store_bytes(0, &[0xFF; 8]).unwrap();
    /// mem.store_bytes(1, &[0]).unwrap(); // a partial word keeps its neighbours
    /// let mut out = [0u8; 3];
    /// mem.load_bytes(0, &mut out).unwrap();
    /// assert_eq!(out, [0xFF, 0, 0xFF]);
    /// ```
    pub fn store_bytes(&self, offset: usize, src: &[u8]) -> Result<(), MemError> {
        check_range(offset, src.len(), self.size)?;
        let words = self.words();
        let mut done = 0;
        if offset.is_multiple_of(8) {
            // As in `load_bytes`: whole words as fixed-size copies, plain moves.
            let (whole, _) = src.as_chunks::<8>();
            for (k, chunk) in whole.iter().enumerate() {
                words[offset / 8 + k].store(u64::from_ne_bytes(*chunk), Ordering::Release);
            }
            done = whole.len() * 8;
        }
        while done < src.len() {
            let at = offset + done;
            let (w, skip) = (at / 8, at % 8);
            let take = (8 - skip).min(src.len() - done);
            if take == 8 {
                let v = u64::from_ne_bytes(src[done..done + 8].try_into().expect("8 bytes"));
                words[w].store(v, Ordering::Release);
            } else {
                let mut cur = words[w].load(Ordering::Relaxed);
                loop {
                    let mut bytes = cur.to_ne_bytes();
                    bytes[skip..skip + take].copy_from_slice(&src[done..done + take]);
                    let new = u64::from_ne_bytes(bytes);
                    match words[w].compare_exchange_weak(
                        cur,
                        new,
                        Ordering::Release,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => break,
                        Err(seen) => cur = seen,
                    }
                }
            }
            done += take;
        }
        Ok(())
    }
}

fn check_size(size: usize) -> Result<(), MemError> {
    if size == 0 || !size.is_multiple_of(8) {
        return Err(MemError::BadSize {
            requested: size,
            reason: "size must be a non-zero multiple of 8",
        });
    }
    if size > isize::MAX as usize {
        return Err(MemError::BadSize {
            requested: size,
            reason: "larger than the address space",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_sizes() {
        assert!(matches!(
            Backing::anonymous(0),
            Err(MemError::BadSize { .. })
        ));
        assert!(matches!(
            Backing::anonymous(12),
            Err(MemError::BadSize { .. })
        ));
    }

    #[test]
    fn unaligned_round_trip_keeps_neighbours() {
        let mem = Backing::anonymous(64).unwrap();
        mem.store_bytes(0, &[0xAA; 64]).unwrap();
        mem.store_bytes(3, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
            .unwrap();
        let mut all = [0u8; 64];
        mem.load_bytes(0, &mut all).unwrap();
        assert_eq!(&all[..3], &[0xAA; 3]);
        assert_eq!(&all[3..14], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert_eq!(&all[14..], &[0xAA; 50]);
    }

    #[test]
    fn out_of_bounds_is_an_error() {
        let mem = Backing::anonymous(64).unwrap();
        let e = mem.store_bytes(60, &[0; 8]).unwrap_err();
        assert_eq!(
            e,
            MemError::OutOfBounds {
                offset: 60,
                len: 8,
                size: 64
            }
        );
        assert!(mem.load_bytes(usize::MAX, &mut [0; 2]).is_err());
        assert!(mem.load_bytes(64, &mut []).is_ok()); // empty access at the end is fine
    }
}
