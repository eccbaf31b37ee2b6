//! Items too long for a record: parcels the client writes beside its channel, and the
//! reply the server writes beside its acknowledgement.
//!
//! A record holds each key and value as its [word](crate::Stored::Word); a string of
//! more than 16 bytes does not fit one ([`BytesWord`](crate::stored::BytesWord)). On its
//! way to the writer, such an item's bytes go into the sending client's **parcel area**,
//! which that client alone writes, and its word names them by offset. The client writes
//! each parcel back as it puts it, before the record that names it is published (the
//! channel's fence orders both), and reuses the area only once every record it sent is
//! acknowledged. The value the writer found, on its way back, goes into the client's
//! **reply area**, which the server alone writes, written back before the
//! acknowledgement's fence. A client reads the outcome of the last operation it sent
//! only, and sends nothing before it has, so the server puts every reply at the start of
//! the area: the last one of a batch is the one that is read.
//!
//! Either side reads the other's area fresh (invalidate, fence, read: its cache may hold
//! the area's previous contents) and checks every offset and length against the area,
//! so a corrupt word is an error, never a read elsewhere.
//!
//! A parcel is its length (one 8-byte word) then its bytes, zero-padded to whole words.

use super::error::DelegationError;
use super::mem;
use crate::CollectionError;
use crate::stored::ByteSource;
use bi_core::mem::MemView;
use bi_core::runtime::{Bytes, Fault, Faults, Link};
use std::cmp::Ordering;
use std::ops::Range;

const WORD: usize = size_of::<u64>();

/// Bytes a parcel of `len` bytes takes in its area.
pub(crate) fn parcel_bytes(len: usize) -> Option<usize> {
    len.checked_next_multiple_of(WORD)?.checked_add(WORD)
}

/// Puts `bytes` as a parcel at `*cursor` (an offset into `area`), writes it back and
/// moves the cursor past it; the link names the parcel. [`DelegationError::ItemTooLarge`]
/// if it does not fit the rest of the area (nothing is written).
pub(crate) fn put<Vw: MemView>(
    view: &Vw,
    area: &Range<usize>,
    cursor: &mut usize,
    bytes: &[u8],
    faults: Faults,
) -> Result<Link<Bytes>, CollectionError> {
    let at = area.start + *cursor;
    let need = parcel_bytes(bytes.len());
    let end = need
        .and_then(|n| at.checked_add(n))
        .filter(|&e| e <= area.end);
    let Some(end) = end else {
        return Err(DelegationError::ItemTooLarge {
            len: bytes.len(),
            limit: capacity(area),
        }
        .into());
    };
    view.store_u64(at, bytes.len() as u64).map_err(mem)?;
    for (i, chunk) in bytes.chunks(WORD).enumerate() {
        let mut word = [0u8; WORD];
        word[..chunk.len()].copy_from_slice(chunk);
        view.store_u64(at + WORD * (i + 1), u64::from_ne_bytes(word))
            .map_err(mem)?;
    }
    if !faults.has(Fault::ParcelWriteback) {
        view.writeback(at, end - at).map_err(mem)?;
    }
    *cursor = end - area.start;
    Ok(Link::from_raw(at as u64))
}

/// The longest item a parcel area of this size carries.
pub(crate) fn capacity(area: &Range<usize>) -> usize {
    let bytes = area.end.saturating_sub(area.start);
    bytes.saturating_sub(WORD) / WORD * WORD
}

/// The parcels of one area as their reader sees them: read fresh from memory, checked
/// against the area. `bad` is the error a parcel outside the area or longer than it is.
pub(crate) struct Parcels<'a, Vw> {
    pub(crate) view: &'a Vw,
    pub(crate) area: Range<usize>,
    pub(crate) bad: DelegationError,
    pub(crate) faults: Faults,
}

impl<Vw: MemView> Parcels<'_, Vw> {
    /// The words of the parcel `link` names, read fresh, and its length in bytes. With
    /// the length its word records (`hint`), its lines are dropped and fetched in one
    /// step, and a parcel of another length is bad; without, the length word first.
    fn words(
        &self,
        link: Link<Bytes>,
        hint: Option<usize>,
    ) -> Result<(Vec<u64>, usize), CollectionError> {
        let at = usize::try_from(link.raw()).map_err(|_| self.bad)?;
        let inside = |start: usize, len: usize| {
            start >= self.area.start && start.checked_add(len).is_some_and(|e| e <= self.area.end)
        };
        if !inside(at, WORD) || !at.is_multiple_of(WORD) {
            return Err(self.bad.into());
        }
        let v = self.view;
        let fresh = !self.faults.has(Fault::ParcelInvalidate);
        let drop = |start: usize, len: usize| {
            if fresh {
                v.invalidate(start, len).map_err(mem)?;
                v.fence();
            }
            Ok::<_, CollectionError>(())
        };
        let hinted = hint
            .and_then(parcel_bytes)
            .filter(|&bytes| inside(at, bytes));
        drop(at, hinted.unwrap_or(WORD))?;
        let len = usize::try_from(v.load_u64(at).map_err(mem)?).map_err(|_| self.bad)?;
        let padded = len.checked_next_multiple_of(WORD).ok_or(self.bad)?;
        if !inside(at + WORD, padded) || hint.is_some_and(|h| h != len) {
            return Err(self.bad.into());
        }
        if hinted.is_none() {
            drop(at + WORD, padded)?;
        }
        let mut words = vec![0u64; padded / WORD];
        v.load_u64s(at + WORD, &mut words).map_err(mem)?;
        Ok((words, len))
    }
}

impl<Vw: MemView> ByteSource for Parcels<'_, Vw> {
    fn read_bytes_into(
        &self,
        link: Link<Bytes>,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CollectionError> {
        let (words, len) = self.words(link, Some(len))?;
        out.clear();
        out.extend_from_slice(&bytemuck::cast_slice::<u64, u8>(&words)[..len]);
        Ok(())
    }

    fn compare_bytes_with(
        &self,
        link: Link<Bytes>,
        probe: &[u8],
    ) -> Result<Ordering, CollectionError> {
        let (words, len) = self.words(link, None)?;
        Ok(probe.cmp(&bytemuck::cast_slice::<u64, u8>(&words)[..len]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stored;
    use bi_core::mem::{Emulator, EmulatorConfig};

    fn parcels<'a, Vw>(view: &'a Vw, area: &Range<usize>) -> Parcels<'a, Vw> {
        Parcels {
            view,
            area: area.clone(),
            bad: DelegationError::BadParcel { client: 0 },
            faults: Faults::default(),
        }
    }

    #[test]
    fn parcels_cross_between_nodes_and_stay_in_their_area() {
        let emu = Emulator::new(EmulatorConfig::new(1 << 12, 2));
        let (a, b) = (emu.node(0), emu.node(1));
        let area = 1024..2048;
        let mut cursor = 0;
        let long = "a string of more than sixteen bytes".to_string();
        let word = long
            .to_word(|bytes| put(&a, &area, &mut cursor, bytes, Faults::default()))
            .unwrap();
        a.fence();
        assert_eq!(cursor, parcel_bytes(long.len()).unwrap());
        assert_eq!(String::from_word(&word, &parcels(&b, &area)).unwrap(), long);
        // The area's other side reads nothing outside it.
        assert!(String::from_word(&word, &parcels(&b, &(1032..2048))).is_err());
        assert!(String::from_word(&word, &parcels(&b, &(1024..1056))).is_err());
        // An item longer than what is left is refused, and nothing is written.
        let big = vec![7u8; capacity(&area) + 1];
        let err = put(&a, &area, &mut cursor, &big, Faults::default()).unwrap_err();
        assert!(matches!(
            err,
            CollectionError::Delegation(DelegationError::ItemTooLarge { len, limit: 1016 })
                if len == big.len()
        ));
        let mut fresh = 0;
        let exact = vec![9u8; capacity(&area)];
        put(&a, &area, &mut fresh, &exact, Faults::default()).unwrap();
        assert_eq!(fresh, 1024);
    }
}
