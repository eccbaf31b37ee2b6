//! Named roots: how a second process finds a structure the first one built.
//!
//! # Why
//!
//! A process that maps an existing region knows its layout but not where anything in the
//! heap is. The root directory is a small, fixed table of `name -> ShPtr` entries, so a
//! structure published under `"orders"` can be found by name in every process.
//!
//! # How, on memory that is not coherent
//!
//! Each entry fills one slot (one line on 64-byte-line machines), so updating one root
//! never touches the line of another. A writer stores the whole entry, writes it back and
//! fences: after [`Region::set_root`] returns, the entry is in memory. Roots are looked up
//! rarely and may have been written by another process since this one last looked, so
//! [`Region::root`] invalidates the directory's lines before reading them: it never trusts
//! a cached copy.
//!
//! An entry may also name a *structure* ([`Region::structure`]): then the object it points
//! at is the entry's own second slot (the structure's root word and its writer record, on
//! a line of their own), and the entry records a fingerprint of the structure's kind and
//! types, checked by every opener.
//!
//! An entry carries a checksum over its other fields. A reader that catches an entry
//! halfway through an update (the entry spans several words, which reach memory one by
//! one) sees a checksum mismatch, invalidates the entry and reads it again; an entry that
//! stays inconsistent is reported as [`RegionError::CorruptRoot`]. Entries also record
//! `size_of` and `align_of` of the type the root was set with, so looking a root up as the
//! wrong type is an error rather than a misread.
//!
//! Updates are meant to be rare (setup, occasional re-publication) and come from one
//! process at a time; within a process they are serialised by a lock. Two processes setting
//! new roots at the same moment may pick the same free entry: coordinate them as any other
//! single-writer data.
//!
//! # Entry format (native byte order)
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 1 | state: 0 free, 1 used |
//! | 1 | 1 | name length in bytes (1..=40) |
//! | 2 | 1 | log2 of `align_of` of the type |
//! | 3 | 1 | reserved, zero |
//! | 4 | 4 | `size_of` of the type |
//! | 8 | 8 | offset of the object |
//! | 16 | 8 | fingerprint of a structure's kind and types; 0 for a plain root |
//! | 24 | 32 | name, UTF-8, zero padded |
//! | 56 | 8 | 64-bit FNV-1a of bytes 0..56 |

use super::error::RegionError;
use super::header::fnv1a;
use super::{Region, Section};
use crate::mem::MemView;
use crate::ptr::ShPtr;
use bytemuck::{Pod, Zeroable};

/// Longest root name, in bytes of UTF-8.
pub(crate) const MAX_ROOT_NAME: usize = 32;

/// Size of a root directory entry's contents in bytes (an entry occupies one slot).
pub(crate) const ROOT_ENTRY_BYTES: usize = 64;

const STATE_FREE: u8 = 0;
const STATE_USED: u8 = 1;
/// How many times a lookup re-reads an entry whose checksum does not match.
const TORN_RETRIES: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct RootEntry {
    state: u8,
    name_len: u8,
    align_log2: u8,
    reserved: u8,
    size: u32,
    offset: u64,
    types: u64,
    /// Stored as words of bytes only because bytemuck has no `Pod` for `[u8; 32]`.
    name: [[u8; 8]; MAX_ROOT_NAME / 8],
    check: u64,
}

const _: () = assert!(size_of::<RootEntry>() == ROOT_ENTRY_BYTES);

impl RootEntry {
    fn sum(&self) -> u64 {
        fnv1a(&bytemuck::bytes_of(self)[..ROOT_ENTRY_BYTES - 8])
    }

    /// Stores `name` (checked) and seals the entry with its checksum.
    fn set_name(&mut self, name: &str) {
        bytemuck::bytes_of_mut(&mut self.name)[..name.len()].copy_from_slice(name.as_bytes());
        self.check = self.sum();
    }

    fn name(&self) -> &[u8] {
        &bytemuck::bytes_of(&self.name)[..(self.name_len as usize).min(MAX_ROOT_NAME)]
    }
}

/// One used entry of the root directory, as listed by [`Region::roots`].
///
/// ```
/// use bi_core::ptr::ShPtr;
/// use bi_core::region::{Region, RegionConfig};
///
/// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
/// let view = region.hardware();
/// let at = region.layout().heap().offset as u64;
/// region.set_root(&view, "config", ShPtr::<[u32; 3]>::new(at)).unwrap();
/// let info = &region.roots(&view).unwrap()[0];
/// assert_eq!((info.name.as_str(), info.offset, info.size, info.align), ("config", at, 12, 4));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootInfo {
    /// The root's name.
    pub name: String,
    /// Offset of the object.
    pub offset: u64,
    /// `size_of` of the type it was set with.
    pub size: u64,
    /// `align_of` of the type it was set with.
    pub align: u64,
}

/// The result of a directory scan.
struct Found {
    /// Index and contents of the entry with the name looked for.
    named: Option<(usize, RootEntry)>,
    /// The first free entry seen before it (or anywhere, if the name is absent).
    free: Option<usize>,
}

fn check_name(name: &str) -> Result<(), RegionError> {
    if name.is_empty() {
        Err(RegionError::RootNameEmpty)
    } else if name.len() > MAX_ROOT_NAME {
        Err(RegionError::RootNameTooLong {
            len: name.len(),
            max: MAX_ROOT_NAME,
        })
    } else {
        Ok(())
    }
}

impl Region {
    fn check_view<V: MemView>(&self, view: &V) -> Result<(), RegionError> {
        if view.size() != self.layout().size() {
            return Err(RegionError::ViewMismatch {
                view_size: view.size(),
                region_size: self.layout().size(),
            });
        }
        Ok(())
    }

    /// Drops this node's cached copy of the whole directory so it is read from memory.
    fn refresh_directory<V: MemView>(&self, view: &V) -> Result<(), RegionError> {
        let dir = self.layout().root_directory();
        view.invalidate(dir.offset, dir.len)?;
        view.fence();
        Ok(())
    }

    /// Where root entry `index` lives.
    fn entry_slot(&self, index: usize) -> Result<Section, RegionError> {
        self.layout()
            .root_entry(index)
            .ok_or_else(|| RegionError::CorruptRoot {
                index,
                reason: "no such entry",
            })
    }

    /// Reads entry `index`, re-reading it from memory while its checksum is wrong.
    fn read_entry<V: MemView>(&self, view: &V, index: usize) -> Result<RootEntry, RegionError> {
        let slot = self.entry_slot(index)?;
        for _ in 0..TORN_RETRIES {
            let e: RootEntry = view.load(slot.offset)?;
            if e.state == STATE_FREE {
                return Ok(e);
            }
            if e.state == STATE_USED && e.check == e.sum() {
                return self.validate_entry(index, e);
            }
            view.invalidate(slot.offset, ROOT_ENTRY_BYTES)?;
            view.fence();
        }
        Err(RegionError::CorruptRoot {
            index,
            reason: "checksum mismatch",
        })
    }

    fn validate_entry(&self, index: usize, e: RootEntry) -> Result<RootEntry, RegionError> {
        let bad = |reason| Err(RegionError::CorruptRoot { index, reason });
        if e.name_len == 0 || e.name_len as usize > MAX_ROOT_NAME {
            return bad("name length out of range");
        }
        if std::str::from_utf8(e.name()).is_err() {
            return bad("name is not UTF-8");
        }
        if e.align_log2 >= 32 {
            return bad("alignment out of range");
        }
        if e.types != 0 {
            let own = self.layout().root_slot(index).map(|s| s.offset as u64);
            return match own == Some(e.offset) && e.size == 8 && e.align_log2 == 3 {
                true => Ok(e),
                false => bad("a structure entry must point at its own slot"),
            };
        }
        let heap = self.layout().heap();
        let fits = usize::try_from(e.offset).ok().is_some_and(|off| {
            off % (1usize << e.align_log2) == 0 && heap.contains(off, e.size as usize)
        });
        if !fits {
            return bad("object lies outside the heap or is misaligned");
        }
        Ok(e)
    }

    /// Finds the entry named `name`, or else the first free entry.
    fn find<V: MemView>(&self, view: &V, name: &str) -> Result<Found, RegionError> {
        let mut free = None;
        for index in 0..self.layout().config().root_entries() as usize {
            let e = self.read_entry(view, index)?;
            if e.state == STATE_FREE {
                free = free.or(Some(index));
            } else if e.name() == name.as_bytes() {
                return Ok(Found {
                    named: Some((index, e)),
                    free,
                });
            }
        }
        Ok(Found { named: None, free })
    }

    fn write_entry<V: MemView>(
        &self,
        view: &V,
        index: usize,
        entry: &RootEntry,
    ) -> Result<(), RegionError> {
        let slot = self.entry_slot(index)?;
        view.store(slot.offset, entry)?;
        view.writeback(slot.offset, ROOT_ENTRY_BYTES)?;
        view.fence();
        Ok(())
    }

    /// Publishes `ptr` under `name`, replacing any root of that name.
    ///
    /// The entry is written back and fenced before this returns, so any process that
    /// looks the name up afterwards finds it. `ptr` must designate a `T` inside the heap.
    ///
    /// Errors: [`RegionError::RootNameEmpty`], [`RegionError::RootNameTooLong`],
    /// [`RegionError::RootDirectoryFull`], [`RegionError::Ptr`] for a null, out-of-heap or
    /// misaligned pointer, [`RegionError::ViewMismatch`] for a view of another memory size.
    ///
    /// ```
    /// use bi_core::ptr::ShPtr;
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let view = region.hardware();
    /// let counter: ShPtr<u64> = ShPtr::new(region.layout().heap().offset as u64);
    /// counter.store(&view, &41).unwrap();
    /// region.set_root(&view, "counter", counter).unwrap();
    ///
    /// let found = region.root::<u64, _>(&view, "counter").unwrap().unwrap();
    /// assert_eq!(found.load(&view).unwrap(), 41);
    /// assert!(region.root::<u32, _>(&view, "counter").is_err()); // wrong type
    /// assert!(region.root::<u64, _>(&view, "missing").unwrap().is_none());
    /// ```
    pub fn set_root<T: Pod, V: MemView>(
        &self,
        view: &V,
        name: &str,
        ptr: ShPtr<T>,
    ) -> Result<(), RegionError> {
        check_name(name)?;
        self.check_view(view)?;
        ptr.check(self.layout().heap().range())?;
        let size = u32::try_from(size_of::<T>()).map_err(|_| RegionError::RootTypeTooLarge {
            size: size_of::<T>(),
        })?;
        let mut entry = RootEntry {
            state: STATE_USED,
            name_len: name.len() as u8,
            align_log2: align_of::<T>().trailing_zeros() as u8,
            reserved: 0,
            size,
            offset: ptr.offset(),
            types: 0,
            name: [[0; 8]; MAX_ROOT_NAME / 8],
            check: 0,
        };
        entry.set_name(name);

        let _serial = self.roots_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.refresh_directory(view)?;
        let index = match self.find(view, name)? {
            Found {
                named: Some((index, _)),
                ..
            } => index,
            Found {
                named: None,
                free: Some(free),
            } => free,
            Found {
                named: None,
                free: None,
            } => {
                return Err(RegionError::RootDirectoryFull {
                    entries: self.layout().config().root_entries() as usize,
                });
            }
        };
        self.write_entry(view, index, &entry)
    }

    /// Looks up the root named `name`, reading the directory from memory (not from this
    /// node's cache). `Ok(None)` if there is no such root.
    ///
    /// Errors: [`RegionError::RootTypeMismatch`] if the root was set with a type of another
    /// size or alignment than `T`; name errors as for [`Region::set_root`];
    /// [`RegionError::CorruptRoot`] for an entry that does not hold together.
    ///
    /// ```
    /// use bi_core::ptr::ShPtr;
    /// use bi_core::region::{Region, RegionConfig, RegionError};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let view = region.hardware();
    /// let p: ShPtr<u64> = ShPtr::new(region.layout().heap().offset as u64);
    /// region.set_root(&view, "head", p).unwrap();
    /// assert_eq!(region.root::<u64, _>(&view, "head").unwrap(), Some(p));
    /// let wrong = region.root::<[u8; 8], _>(&view, "head"); // same size, other alignment
    /// assert!(matches!(wrong, Err(RegionError::RootTypeMismatch { .. })));
    /// ```
    pub fn root<T: Pod, V: MemView>(
        &self,
        view: &V,
        name: &str,
    ) -> Result<Option<ShPtr<T>>, RegionError> {
        check_name(name)?;
        self.check_view(view)?;
        self.refresh_directory(view)?;
        let Some((_, e)) = self.find(view, name)?.named else {
            return Ok(None);
        };
        if e.types != 0 {
            return Err(RegionError::StructureTypeMismatch {
                name: name.to_owned(),
                stored: e.types,
                requested: 0,
            });
        }
        let stored = (u64::from(e.size), 1u64 << e.align_log2);
        let requested = (size_of::<T>() as u64, align_of::<T>() as u64);
        if stored != requested {
            return Err(RegionError::RootTypeMismatch {
                name: name.to_owned(),
                stored,
                requested,
            });
        }
        Ok(Some(ShPtr::new(e.offset)))
    }

    /// The slot of the structure named `name` (its root word, followed by its writer
    /// record, on a line of their own in the root directory), after checking that the
    /// entry was made with the same `types` fingerprint (nonzero: the structure's kind and
    /// its key and value types). With `create`, a missing entry is made (its slot zeroed:
    /// a null root word and no writer); returns the slot's offset and whether it was made
    /// now. Entries are made under this process's roots lock; processes of other nodes
    /// must be kept out by the caller (the runtime's pool lock).
    ///
    /// Errors: [`RegionError::StructureTypeMismatch`] for another fingerprint (or a plain
    /// root of that name), [`RegionError::RootDirectoryFull`], name errors as for
    /// [`Region::set_root`].
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig, RegionError};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let view = region.hardware();
    /// let (slot, made) = region.structure(&view, "orders", 0xABC, true).unwrap().unwrap();
    /// assert!(made);
    /// assert_eq!(region.structure(&view, "orders", 0xABC, false).unwrap(), Some((slot, false)));
    /// assert!(matches!(
    ///     region.structure(&view, "orders", 0xDEF, false),
    ///     Err(RegionError::StructureTypeMismatch { .. })
    /// ));
    /// assert_eq!(region.structure(&view, "absent", 0xABC, false).unwrap(), None);
    /// ```
    pub fn structure<V: MemView>(
        &self,
        view: &V,
        name: &str,
        types: u64,
        create: bool,
    ) -> Result<Option<(usize, bool)>, RegionError> {
        check_name(name)?;
        self.check_view(view)?;
        let mismatch = |stored| RegionError::StructureTypeMismatch {
            name: name.to_owned(),
            stored,
            requested: types,
        };
        if types == 0 {
            return Err(mismatch(0));
        }
        let _serial = self.roots_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.refresh_directory(view)?;
        let found = self.find(view, name)?;
        if let Some((index, e)) = found.named {
            let slot = self.layout().root_slot(index).map(|s| s.offset);
            return match (e.types == types, slot) {
                (true, Some(slot)) => Ok(Some((slot, false))),
                _ => Err(mismatch(e.types)),
            };
        }
        let (true, Some(index)) = (create, found.free) else {
            return match create {
                false => Ok(None),
                true => Err(RegionError::RootDirectoryFull {
                    entries: self.layout().config().root_entries() as usize,
                }),
            };
        };
        let slot = self.entry_slot(index)?;
        let own = self
            .layout()
            .root_slot(index)
            .ok_or_else(|| RegionError::CorruptRoot {
                index,
                reason: "no such entry",
            })?;
        // The slot first: whoever finds the entry finds a null root and no writer.
        view.store(own.offset, &[0u64; 8])?;
        view.writeback(own.offset, 64)?;
        let mut entry = RootEntry {
            state: STATE_USED,
            name_len: name.len() as u8,
            align_log2: 3,
            reserved: 0,
            size: 8,
            offset: own.offset as u64,
            types,
            name: [[0; 8]; MAX_ROOT_NAME / 8],
            check: 0,
        };
        entry.set_name(name);
        debug_assert_eq!(slot.offset + self.layout().slot_size(), own.offset);
        self.write_entry(view, index, &entry)?;
        Ok(Some((own.offset, true)))
    }

    /// Removes the root named `name`; `Ok(false)` if there was none. The freed entry is
    /// written back and fenced before this returns.
    ///
    /// ```
    /// use bi_core::ptr::ShPtr;
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let view = region.hardware();
    /// let p: ShPtr<u64> = ShPtr::new(region.layout().heap().offset as u64);
    /// region.set_root(&view, "a", p).unwrap();
    /// assert!(region.remove_root(&view, "a").unwrap());
    /// assert!(!region.remove_root(&view, "a").unwrap());
    /// assert!(region.root::<u64, _>(&view, "a").unwrap().is_none());
    /// ```
    pub fn remove_root<V: MemView>(&self, view: &V, name: &str) -> Result<bool, RegionError> {
        check_name(name)?;
        self.check_view(view)?;
        let _serial = self.roots_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.refresh_directory(view)?;
        match self.find(view, name)?.named {
            Some((index, _)) => {
                self.write_entry(view, index, &RootEntry::zeroed())?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Lists every root in the directory, in entry order, reading it from memory.
    ///
    /// ```
    /// use bi_core::ptr::ShPtr;
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let view = region.hardware();
    /// assert!(region.roots(&view).unwrap().is_empty());
    /// let p: ShPtr<u64> = ShPtr::new(region.layout().heap().offset as u64);
    /// region.set_root(&view, "a", p).unwrap();
    /// region.set_root(&view, "b", p).unwrap();
    /// let names: Vec<String> = region.roots(&view).unwrap().into_iter().map(|r| r.name).collect();
    /// assert_eq!(names, ["a", "b"]);
    /// ```
    pub fn roots<V: MemView>(&self, view: &V) -> Result<Vec<RootInfo>, RegionError> {
        self.check_view(view)?;
        self.refresh_directory(view)?;
        let mut out = Vec::new();
        for index in 0..self.layout().config().root_entries() as usize {
            let e = self.read_entry(view, index)?;
            if e.state == STATE_USED {
                out.push(RootInfo {
                    name: String::from_utf8_lossy(e.name()).into_owned(),
                    offset: e.offset,
                    size: e.size.into(),
                    align: 1u64 << e.align_log2,
                });
            }
        }
        Ok(out)
    }
}
