//! Offset pointers: [`ShPtr`], a reference into a region that means the same thing in
//! every process.
//!
//! # Why offsets
//!
//! Each process maps a shared region wherever its address space has room, so a raw
//! address written by one process is garbage in another. A [`ShPtr<T>`] stores the byte
//! offset of a `T` from the start of the region instead. It is itself plain data (8 bytes,
//! [`bytemuck::Pod`]), so it can be stored in shared memory, inside the very structures it
//! links together.
//!
//! # Why checked
//!
//! An offset read from shared memory is input: another process may have written nonsense,
//! or a stale cache line may hold an old value. Resolving a `ShPtr` therefore checks that it
//! is not null, that `offset + size_of::<T>()` lies inside the memory (or the heap section,
//! for [`Region::load`](crate::region::Region::load)) and that the offset is aligned for
//! `T`; a failure is a [`PtrError`], never a wild access. Offset 0 is the region header,
//! which never holds an object, so it doubles as the null pointer.

use crate::mem::{MemError, MemView};
use bytemuck::{Pod, Zeroable};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::ops::Range;

/// A pointer that cannot be resolved.
///
/// ```
/// use bi_core::ptr::{PtrError, ShPtr};
///
/// assert_eq!(ShPtr::<u64>::null().check(0..4096), Err(PtrError::Null));
/// let odd: ShPtr<u64> = ShPtr::new(12);
/// assert_eq!(odd.check(0..4096), Err(PtrError::Misaligned { offset: 12, align: 8 }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PtrError {
    /// The pointer is null.
    Null,
    /// `offset .. offset + len` is not inside `bounds`.
    OutOfBounds {
        /// The pointer's offset.
        offset: u64,
        /// Size of the pointed-to type.
        len: usize,
        /// The range the object had to lie in.
        bounds: Range<usize>,
    },
    /// The offset is not a multiple of the type's alignment.
    Misaligned {
        /// The pointer's offset.
        offset: u64,
        /// Alignment of the pointed-to type.
        align: usize,
    },
    /// The memory view refused the access.
    Mem(MemError),
}

impl fmt::Display for PtrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PtrError::Null => write!(f, "null shared pointer"),
            PtrError::OutOfBounds {
                offset,
                len,
                bounds,
            } => write!(
                f,
                "shared pointer to {len} bytes at offset {offset} is outside {}..{}",
                bounds.start, bounds.end
            ),
            PtrError::Misaligned { offset, align } => {
                write!(
                    f,
                    "shared pointer at offset {offset} is not aligned to {align} bytes"
                )
            }
            PtrError::Mem(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PtrError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PtrError::Mem(e) => Some(e),
            _ => None,
        }
    }
}

impl From<MemError> for PtrError {
    fn from(e: MemError) -> Self {
        PtrError::Mem(e)
    }
}

/// The offset of a `T` in shared memory; 0 is null.
///
/// `ShPtr` is `Copy`, compares and hashes by offset, and is [`Pod`] so it can be stored in
/// shared memory. The type parameter only records what the offset points to: `ShPtr<T>`
/// owns nothing, is `Send` and `Sync` whatever `T` is, and never dereferences by itself.
/// Resolve it through a [`MemView`] with [`ShPtr::load`] and [`ShPtr::store`], which check
/// every access.
///
/// ```
/// use bi_core::mem::{Backing, Hardware};
/// use bi_core::ptr::{PtrError, ShPtr};
/// use std::sync::Arc;
///
/// let view = Hardware::new(Arc::new(Backing::anonymous(4096).unwrap()));
/// let p: ShPtr<u64> = ShPtr::new(128);
/// p.store(&view, &7).unwrap();
/// assert_eq!(p.load(&view).unwrap(), 7);
///
/// assert_eq!(ShPtr::<u64>::null().load(&view), Err(PtrError::Null));
/// assert!(matches!(ShPtr::<u64>::new(4092).load(&view), Err(PtrError::OutOfBounds { .. })));
/// assert!(matches!(ShPtr::<u64>::new(130).load(&view), Err(PtrError::Misaligned { .. })));
/// ```
#[repr(transparent)]
pub struct ShPtr<T> {
    offset: u64,
    _type: PhantomData<fn() -> T>,
}

impl<T> ShPtr<T> {
    /// The null pointer (offset 0).
    ///
    /// ```
    /// use bi_core::ptr::ShPtr;
    ///
    /// let p = ShPtr::<u64>::null();
    /// assert!(p.is_null());
    /// assert_eq!(p.offset(), 0);
    /// ```
    pub const fn null() -> ShPtr<T> {
        ShPtr {
            offset: 0,
            _type: PhantomData,
        }
    }

    /// A pointer to the `T` at byte `offset` (0 makes a null pointer).
    ///
    /// ```
    /// use bi_core::ptr::ShPtr;
    ///
    /// let p: ShPtr<u32> = ShPtr::new(4096);
    /// assert_eq!(p.offset(), 4096);
    /// assert!(!p.is_null());
    /// ```
    pub const fn new(offset: u64) -> ShPtr<T> {
        ShPtr {
            offset,
            _type: PhantomData,
        }
    }

    /// The byte offset from the start of the shared memory.
    ///
    /// ```
    /// use bi_core::ptr::ShPtr;
    ///
    /// assert_eq!(ShPtr::<u8>::new(77).offset(), 77);
    /// ```
    pub const fn offset(self) -> u64 {
        self.offset
    }

    /// Whether this is the null pointer.
    ///
    /// ```
    /// use bi_core::ptr::ShPtr;
    ///
    /// assert!(ShPtr::<u64>::new(0).is_null()); // offset 0 is the header, never an object
    /// assert!(!ShPtr::<u64>::new(8).is_null());
    /// ```
    pub const fn is_null(self) -> bool {
        self.offset == 0
    }

    /// The same offset, as a pointer to a `U`.
    ///
    /// ```
    /// use bi_core::ptr::ShPtr;
    ///
    /// let p: ShPtr<[u8; 16]> = ShPtr::new(256);
    /// assert_eq!(p.cast::<u64>().offset(), 256);
    /// ```
    pub const fn cast<U>(self) -> ShPtr<U> {
        ShPtr {
            offset: self.offset,
            _type: PhantomData,
        }
    }

    /// A pointer `count` elements of `T` further on, or `None` on overflow (or if the
    /// result would be null).
    ///
    /// ```
    /// use bi_core::ptr::ShPtr;
    ///
    /// let p: ShPtr<u64> = ShPtr::new(256);
    /// assert_eq!(p.checked_add(3).unwrap().offset(), 280);
    /// assert!(ShPtr::<u64>::new(u64::MAX - 4).checked_add(1).is_none());
    /// ```
    pub fn checked_add(self, count: u64) -> Option<ShPtr<T>> {
        let step = u64::try_from(size_of::<T>()).ok()?.checked_mul(count)?;
        let offset = self.offset.checked_add(step)?;
        (offset != 0).then_some(ShPtr::new(offset))
    }

    /// Checks that a `T` at this offset lies inside `bounds` and is aligned, and returns
    /// the offset as a `usize`.
    ///
    /// ```
    /// use bi_core::ptr::{PtrError, ShPtr};
    ///
    /// let p: ShPtr<u32> = ShPtr::new(64);
    /// assert_eq!(p.check(0..68), Ok(64));
    /// assert!(matches!(p.check(0..67), Err(PtrError::OutOfBounds { .. })));
    /// assert!(matches!(p.check(128..256), Err(PtrError::OutOfBounds { .. })));
    /// ```
    pub fn check(self, bounds: Range<usize>) -> Result<usize, PtrError> {
        if self.is_null() {
            return Err(PtrError::Null);
        }
        let len = size_of::<T>();
        let out = || PtrError::OutOfBounds {
            offset: self.offset,
            len,
            bounds: bounds.clone(),
        };
        let start = usize::try_from(self.offset).map_err(|_| out())?;
        let end = start.checked_add(len).ok_or_else(out)?;
        if start < bounds.start || end > bounds.end {
            return Err(out());
        }
        let align = align_of::<T>();
        if start % align != 0 {
            return Err(PtrError::Misaligned {
                offset: self.offset,
                align,
            });
        }
        Ok(start)
    }
}

impl<T: Pod> ShPtr<T> {
    /// Reads the `T` this pointer designates, through `view`'s cache.
    ///
    /// Errors: [`PtrError::Null`], [`PtrError::OutOfBounds`] if the `T` does not lie
    /// inside the view's memory, [`PtrError::Misaligned`].
    ///
    /// ```
    /// use bi_core::ptr::{PtrError, ShPtr};
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let view = region.hardware();
    /// let p: ShPtr<u64> = ShPtr::new(region.layout().heap().offset as u64);
    /// assert_eq!(p.load(&view).unwrap(), 0); // fresh memory is zeroed
    /// let past: ShPtr<u64> = ShPtr::new(1 << 16);
    /// assert!(matches!(past.load(&view), Err(PtrError::OutOfBounds { .. })));
    /// ```
    pub fn load<V: MemView>(self, view: &V) -> Result<T, PtrError> {
        let at = self.check(0..view.size())?;
        Ok(view.load(at)?)
    }

    /// Writes `value` to the `T` this pointer designates, into `view`'s cache (write it
    /// back to make it visible to other nodes). Errors as for [`ShPtr::load`].
    ///
    /// ```
    /// use bi_core::mem::MemView;
    /// use bi_core::ptr::ShPtr;
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let view = region.hardware();
    /// let p: ShPtr<[u32; 2]> = ShPtr::new(region.layout().heap().offset as u64);
    /// p.store(&view, &[1, 2]).unwrap();
    /// view.writeback(p.offset() as usize, 8).unwrap(); // visible to other nodes
    /// assert_eq!(p.load(&view).unwrap(), [1, 2]);
    /// ```
    pub fn store<V: MemView>(self, view: &V, value: &T) -> Result<(), PtrError> {
        let at = self.check(0..view.size())?;
        Ok(view.store(at, value)?)
    }
}

impl<T> Clone for ShPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ShPtr<T> {}

impl<T> PartialEq for ShPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.offset == other.offset
    }
}

impl<T> Eq for ShPtr<T> {}

impl<T> PartialOrd for ShPtr<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for ShPtr<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.offset.cmp(&other.offset)
    }
}

impl<T> Hash for ShPtr<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.offset.hash(state);
    }
}

impl<T> Default for ShPtr<T> {
    /// The null pointer.
    fn default() -> Self {
        ShPtr::null()
    }
}

impl<T> fmt::Debug for ShPtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_null() {
            write!(f, "ShPtr<{}>(null)", std::any::type_name::<T>())
        } else {
            write!(
                f,
                "ShPtr<{}>({:#x})",
                std::any::type_name::<T>(),
                self.offset
            )
        }
    }
}

// SAFETY: `ShPtr<T>` is `repr(transparent)` over a `u64` (the `PhantomData` is a
// zero-sized, alignment-1 marker), so its bytes are exactly those of a `u64`, and the
// all-zero `u64` is a valid `ShPtr` (the null pointer).
unsafe impl<T: 'static> Zeroable for ShPtr<T> {}

// SAFETY: as above, the representation is exactly one `u64`: no padding, no invalid bit
// patterns (every offset is a valid, if possibly unresolvable, pointer value), no interior
// references (`PhantomData<fn() -> T>` holds no `T`). It is `Copy`, and `'static` because
// `T: 'static`. Reading an arbitrary `ShPtr` from memory is therefore sound; resolving it
// is checked separately.
unsafe impl<T: 'static> Pod for ShPtr<T> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::{Backing, Hardware};
    use std::sync::Arc;

    #[test]
    fn is_a_u64_in_memory() {
        assert_eq!(size_of::<ShPtr<[u8; 100]>>(), 8);
        assert_eq!(align_of::<ShPtr<u8>>(), 8);
        let p: ShPtr<u32> = ShPtr::new(0x1234);
        assert_eq!(bytemuck::bytes_of(&p), &0x1234u64.to_ne_bytes());
        let z: ShPtr<u32> = Zeroable::zeroed();
        assert!(z.is_null());
        assert_eq!(ShPtr::<u32>::default(), ShPtr::null());
        assert_eq!(format!("{:?}", ShPtr::<u32>::null()), "ShPtr<u32>(null)");
        assert_eq!(format!("{p:?}"), "ShPtr<u32>(0x1234)");
    }

    #[test]
    fn bounds_are_checked() {
        let view = Hardware::new(Arc::new(Backing::anonymous(256).unwrap()));
        let p: ShPtr<[u64; 4]> = ShPtr::new(224);
        p.store(&view, &[1, 2, 3, 4]).unwrap();
        assert_eq!(p.load(&view).unwrap(), [1, 2, 3, 4]);
        for bad in [232u64, 256, u64::MAX, u64::MAX - 7, 1 << 40] {
            let q: ShPtr<[u64; 4]> = ShPtr::new(bad);
            assert!(q.load(&view).is_err(), "{bad}");
            assert!(q.store(&view, &[0; 4]).is_err(), "{bad}");
        }
        assert_eq!(ShPtr::<u64>::null().store(&view, &1), Err(PtrError::Null));
        assert_eq!(
            ShPtr::<u64>::new(4).load(&view),
            Err(PtrError::Misaligned {
                offset: 4,
                align: 8
            })
        );
        // A pointer stored in shared memory and read back.
        let slot: ShPtr<ShPtr<u64>> = ShPtr::new(8);
        slot.store(&view, &ShPtr::new(16)).unwrap();
        assert_eq!(slot.load(&view).unwrap().offset(), 16);
    }
}
