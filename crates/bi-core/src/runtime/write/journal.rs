//! The rewrite journal: what lets a successor finish a line its writer's process was
//! killed in the middle of rewriting.
//!
//! A line rewritten in place ([`Writer::rewrite_lines`]) is written in the order that
//! keeps a half-written line from ever matching a link: its stamp becomes invalid, then
//! its words change, then the new stamp goes in. If the writer's *host* dies there, the
//! half-written line dies with its cache and memory keeps the line as it was. But if
//! only the writer's *process* is killed, its stores stay (the host's caches are
//! coherent and keep them): memory ends up with an invalid stamp over a mix of old and
//! new words, and no process can read that line again.
//!
//! So before each line it rewrites, a writer that keeps a journal stores the line's new
//! image there: the words, then where the line is and its new stamp, then a check word
//! over all of it. Stores only: no write-back and no fence, since the journal is for a
//! process that dies while its host goes on (every store it made before it died
//! reaches the other processes, in order on x86 and eventually everywhere). A
//! successor that takes the structure over reads the journal from memory before
//! anything else; if the line it names still carries the invalid stamp, the journal is
//! complete (it was written before the line's first store) and the successor finishes
//! the line from it. A journal whose check fails was being written when the process
//! died, before the line was touched.
//!
//! The journal is two lines of the writer's own heap; the structure's slot names it (in
//! the word after the writer record), so only named structures (whose slot is theirs)
//! keep one.

use crate::heap::Heap;
use crate::mem::MemView;
use crate::runtime::object::{Shape, Stamp, check_in, store_words, write_object};
use crate::runtime::role::{WRITER_RECORD_OFFSET, WriterRecord};
use crate::runtime::writer::Writer;
use crate::runtime::{BiError, Fault};

/// Where a named structure's slot holds the offset of its writer's journal (0: none),
/// after the root word and the writer record.
pub(crate) const JOURNAL_OFFSET: usize = WRITER_RECORD_OFFSET + size_of::<WriterRecord>();

/// Words of the journal's first line after its stamp: the line's offset, its new stamp,
/// the record's length in bytes, the check word.
const TARGET: usize = 8;
const STAMP: usize = 16;
const LEN: usize = 24;
const CHECK: usize = 32;

/// The check word of a journal entry: over its place, stamp, length and the record's
/// bytes taken as zero-padded words (any length: a line may be longer than 64 bytes).
fn check(target: u64, stamp: u64, len: u64, bytes: &[u8]) -> u64 {
    let mix = |h: u64, w: u64| (h ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    let h = [target, stamp, len]
        .into_iter()
        .fold(0x6a6f_7572_6e61_6c00, mix);
    bytes.chunks(8).fold(h, |h, chunk| {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        mix(h, u64::from_le_bytes(w))
    })
}

impl<V: MemView, H: Heap> Writer<V, H> {
    /// Keeps a rewrite journal from now on, named in the structure slot at `slot` (a
    /// named structure's, whose writer role this process holds). The journal is two
    /// lines of this writer's heap, allocated now if the heap has room and otherwise
    /// before a later rewrite (never waiting for room); until then lines are rewritten
    /// without one, as before.
    pub fn keep_rewrite_journal(&mut self, slot: usize) -> Result<(), BiError> {
        self.journal_slot = Some(slot);
        self.journal = None;
        self.open_journal()?;
        if self.journal.is_none() {
            // The slot must not go on naming the previous writer's journal, whose lines
            // are not this writer's.
            self.inner
                .view
                .store_to_memory(slot + JOURNAL_OFFSET, &0u64)?;
        }
        Ok(())
    }

    /// Goes on with the journal the structure's previous writer kept (named in its slot
    /// at `slot`), if any, until [`keep_rewrite_journal`](Self::keep_rewrite_journal)
    /// gives this writer its own: an adopter rewrites lines in place too (what a killed
    /// writer left inconsistent), and if it is killed in turn, its successor must find
    /// what it was rewriting where it looks, in the slot's journal. The journal's block
    /// is not reachable from the structure, so the adoption quarantines it: it is not
    /// reused before this writer stops using it. Call it after
    /// [`finish_from_journal`](Self::finish_from_journal).
    pub fn resume_rewrite_journal(&mut self, slot: usize) -> Result<bool, BiError> {
        let view = &self.inner.view;
        let heap = self.inner.objects().heap;
        let j = view.load_from_memory::<u64>(slot + JOURNAL_OFFSET)? as usize;
        if j == 0 || check_in(heap, j, 2 * self.inner.line, "heap").is_err() {
            return Ok(false);
        }
        self.journal = Some(j);
        self.journal_slot = Some(slot);
        Ok(true)
    }

    /// Allocates the journal if this writer is to keep one and has none yet, and names it
    /// in its slot; a heap without room leaves it for the next time.
    pub(in crate::runtime) fn open_journal(&mut self) -> Result<(), BiError> {
        let (None, Some(slot)) = (self.journal, self.journal_slot) else {
            return Ok(());
        };
        let Ok(block) = self.alloc_lines_with(&[[0u64; 7]; 2], false) else {
            return Ok(());
        };
        let at = block.offset();
        self.inner
            .view
            .store_to_memory(slot + JOURNAL_OFFSET, &(at as u64))?;
        self.journal = Some(at);
        Ok(())
    }

    /// Records the new image of the line at `at` in the journal, if this writer keeps
    /// one: the words first, the check word last.
    pub(in crate::runtime) fn journal_line(
        &self,
        at: usize,
        stamp: Stamp,
        bytes: &[u8],
    ) -> Result<(), BiError> {
        let Some(j) = self.journal else {
            return Ok(());
        };
        if self.inner.config.faults.has(Fault::RewriteJournal) {
            return Ok(());
        }
        let view = &self.inner.view;
        let line = self.inner.line;
        store_words(view, j + line + 8, bytes)?;
        let len = bytes.len() as u64;
        view.store_u64(j + TARGET, at as u64)?;
        view.store_u64(j + STAMP, stamp.raw())?;
        view.store_u64(j + LEN, len)?;
        view.store_u64(j + CHECK, check(at as u64, stamp.raw(), len, bytes))?;
        Ok(())
    }

    /// Finishes the line that the previous writer of the structure in slot `slot` was
    /// rewriting when its process died, if its journal says which and the line is still
    /// half-written: the journal's image is written in, written back, fenced and logged.
    /// Returns whether a line was finished. Everything is read from memory.
    pub fn finish_from_journal(&mut self, slot: usize) -> Result<bool, BiError> {
        let view = &self.inner.view;
        let line = self.inner.line;
        let heap = self.inner.objects().heap;
        let j = view.load_from_memory::<u64>(slot + JOURNAL_OFFSET)? as usize;
        if j == 0 || check_in(heap, j, 2 * line, "heap").is_err() {
            return Ok(false);
        }
        let head: [u64; 4] = view.load_from_memory(j + TARGET)?;
        let [target, stamp, len, stored_check] = head;
        let (target, len) = (target as usize, len as usize);
        if len == 0 || len > line - 8 || check_in(heap, target, line, "heap").is_err() {
            return Ok(false);
        }
        let mut bytes = vec![0u8; len.div_ceil(8) * 8];
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let w: u64 = view.load_from_memory(j + line + 8 + 8 * i)?;
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        if check(target as u64, stamp, len as u64, &bytes[..len]) != stored_check {
            return Ok(false);
        }
        let now = Stamp::from_raw(view.load_from_memory::<u64>(target)?);
        if !now.is_invalid() {
            return Ok(false);
        }
        let shape = Shape::new(len, line)?;
        let faults = self.inner.config.faults;
        write_object(
            view,
            target,
            &shape,
            Stamp::from_raw(stamp),
            &bytes[..len],
            faults,
        )?;
        view.writeback(target, line)?;
        Self::reserve(&self.inner, &mut self.modified, 1)?;
        self.fence_and_log_lines(&[target])?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::JOURNAL_OFFSET;
    use crate::mem::MemView;
    use crate::runtime::testing::Setup;

    #[test]
    fn a_kept_journal_is_named_in_the_structure_slot() {
        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        w.keep_rewrite_journal(s.slot(0)).unwrap();
        assert_ne!(
            s.nodes[0]
                .view()
                .load::<u64>(s.slot(0) + JOURNAL_OFFSET)
                .unwrap(),
            0
        );
    }

    #[test]
    fn a_successor_resumes_the_journal_its_predecessor_named() {
        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        w.keep_rewrite_journal(s.slot(0)).unwrap();
        let journal = s.nodes[0]
            .view()
            .load::<u64>(s.slot(0) + JOURNAL_OFFSET)
            .unwrap();
        drop(w);
        let mut next = s.writer(0);
        assert!(next.resume_rewrite_journal(s.slot(0)).unwrap());
        let named = s.nodes[0]
            .view()
            .load::<u64>(s.slot(0) + JOURNAL_OFFSET)
            .unwrap();
        assert_eq!(named, journal); // the same lines, until it keeps its own
    }
}
