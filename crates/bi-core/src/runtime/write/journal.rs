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
//! The host dying is no safer: its cache may write the line back at any moment (an
//! eviction), so memory can hold the invalid stamp over a mix of words when the host
//! dies, and the cache that held the rest is gone.
//!
//! So before each line it rewrites, a writer that keeps a journal stores the line's new
//! image there: the words, then where the line is and its new stamp, then a check word
//! over all of it; then it writes the journal back and fences, so the journal is in
//! memory before the line's first store whatever dies afterwards, the process or its
//! host. A successor that takes the structure over reads the journal from memory before
//! anything else; if the line it names still carries the invalid stamp, the journal is
//! complete (it reached memory before the line's first store) and the successor
//! finishes the line from it. A journal whose check fails was being written when the
//! process died, before the line was touched.
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
    /// one: the words first, the check word last; then writes the journal back and
    /// fences, so that it is in memory before the line's first store.
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
        if !self.inner.config.faults.has(Fault::JournalWriteBack) {
            view.writeback(j, 2 * line)?;
            view.store_fence();
        }
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
        // Room in the ring first: the finished line is logged as soon as it is written
        // back, as a publication's lines are, so no node's copy of its half-written
        // image outlives the staleness bound while this writer waits for room.
        self.wait_up_to(self.adoption_patience(), |w| {
            let inner = w.inner.clone();
            Self::reserve(&inner, &mut w.modified, 1)
        })?;
        self.start_publish_span();
        let view = &self.inner.view;
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
        self.fence_and_log_lines(&[target])?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::JOURNAL_OFFSET;
    use crate::heap::BumpHeap;
    use crate::mem::MemView;
    use crate::runtime::object::{Generation, Stamp};
    use crate::runtime::testing::Setup;

    /// The journal is named in its structure's slot, and in no other slot.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test, minutes interpreted: its object copies run in others"
    )]
    fn a_kept_journal_is_named_in_the_structure_slot() {
        let s = Setup::new(1, 0);
        let view = s.nodes[0].view();
        let words = |slot: usize| -> Vec<u64> {
            let size = s.region.layout().slot_size();
            (0..size / 8)
                .map(|i| view.load::<u64>(slot + 8 * i).unwrap())
                .collect()
        };
        let others = |from: usize| (from..8).map(|i| words(s.slot(i))).collect::<Vec<_>>();
        let before = others(1);
        let mut w = s.writer(0);
        w.keep_rewrite_journal(s.slot(0)).unwrap();
        assert_ne!(view.load::<u64>(s.slot(0) + JOURNAL_OFFSET).unwrap(), 0);
        assert_eq!(others(1), before, "another structure's slot changed");
    }

    /// A writer whose heap has no room for a journal keeps none, and its structure's
    /// slot stops naming the previous writer's: a successor must not take that one's
    /// lines for this writer's journal.
    #[test]
    fn a_writer_without_room_for_a_journal_names_none() {
        let s = Setup::new(1, 0);
        let slot = s.slot(0);
        let mut first = s.writer(0);
        first.keep_rewrite_journal(slot).unwrap();
        drop(first);
        let line = s.region.layout().line_size();
        let at = s.arena(0).end - line.get();
        let full = BumpHeap::new(at..at + line.get(), line).unwrap();
        let mut w = s.nodes[0].writer(full).unwrap();
        w.keep_rewrite_journal(slot).unwrap();
        let view = s.nodes[0].view();
        assert_eq!(view.load::<u64>(slot + JOURNAL_OFFSET).unwrap(), 0);
        assert!(!w.resume_rewrite_journal(slot).unwrap());
        assert!(!w.finish_from_journal(slot).unwrap());
    }

    /// A slot whose journal word names something that is not two lines of the heap (a
    /// corrupt slot) is not taken for a journal: neither resumed (the next rewrite would
    /// write there) nor read.
    #[test]
    fn a_journal_word_outside_the_heap_is_not_a_journal() {
        let s = Setup::new(1, 0);
        let slot = s.slot(0);
        let heap = s.region.layout().heap();
        let line = s.region.layout().line_size().get();
        let view = s.nodes[0].view();
        let mut w = s.writer(0);
        let near_the_end = [heap.end() - line - 8, heap.end() - line, heap.end() - 8];
        for bad in [8, heap.offset - line, heap.end() + line]
            .into_iter()
            .chain(near_the_end)
        {
            view.store_to_memory(slot + JOURNAL_OFFSET, &(bad as u64))
                .unwrap();
            assert!(!w.resume_rewrite_journal(slot).unwrap(), "journal at {bad}");
            assert!(!w.finish_from_journal(slot).unwrap(), "journal at {bad}");
        }
    }

    /// The line a journal finishes is logged as soon as it is in memory, as a
    /// publication's lines are: with no room in the modified ring (no node passes), the
    /// successor waits for room *before* writing, and gives up with the line as the host
    /// left it. Written back first and left unlogged, the new image would sit in memory
    /// while other nodes kept reading their copies of the half-written one, with no pass
    /// due to drop them; once a pass makes room, it is finished and logged.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn a_line_is_finished_from_the_journal_only_with_room_to_log_it() {
        use crate::region::RegionConfig;
        use crate::runtime::{BiError, RuntimeConfig, testing::fill_modified_ring};
        use std::time::Duration;
        let config = RuntimeConfig::default()
            .node_lease(1_000_000)
            .reader_lease(1_000_000)
            .log_full_timeout(Duration::from_millis(5));
        let s = Setup::with(RegionConfig::new(1 << 18).with_nodes(2), |c| c, config);
        let slot = s.slot(0);
        let line = s.region.layout().line_size().get();
        let view = s.nodes[0].view();
        let mut w = s.writer(0);
        w.keep_rewrite_journal(slot).unwrap();
        let a = fill_modified_ring(&mut w, slot);
        let target = a.offset() + line;
        let j = view.load_from_memory::<u64>(slot + JOURNAL_OFFSET).unwrap() as usize;
        let words = [0x5555u64; 2].map(u64::to_le_bytes).concat();
        let stamp = Stamp::new(Generation::new(9), false);
        w.journal_line(target, stamp, &words).unwrap();
        view.store_u64(target, Stamp::INVALID.raw()).unwrap();
        view.writeback(target, line).unwrap();
        view.writeback(j, 2 * line).unwrap();
        view.fence();
        let waited = w.finish_from_journal(slot);
        assert!(matches!(waited, Err(BiError::LogFull { .. })), "{waited:?}");
        let now: u64 = view.load_from_memory(target).unwrap();
        assert_eq!(
            now,
            Stamp::INVALID.raw(),
            "written with no log entry to announce it"
        );
        s.quiesce_all().unwrap();
        assert!(w.finish_from_journal(slot).unwrap());
        let now: u64 = view.load_from_memory(target).unwrap();
        assert_eq!(now, stamp.raw());
    }

    /// A host that dies inside a rewrite can leave in memory the line's invalid stamp and
    /// only part of the journal (here its first line, with the place, stamp and check,
    /// and not the line of words): the check refuses such a journal, so the line is not
    /// given words no writer wrote. A record longer than a line's payload is refused too.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn a_journal_torn_by_its_hosts_death_is_not_applied() {
        let s = Setup::new(1, 0);
        let slot = s.slot(0);
        let line = s.region.layout().line_size().get();
        let view = s.nodes[0].view();
        let mut w = s.writer(0);
        w.keep_rewrite_journal(slot).unwrap();
        let a = w.alloc_lines(&[[1u64; 3], [2u64; 3]]).unwrap();
        w.publish_lines(slot, a).unwrap();
        let target = a.offset() + line;
        let j = view.load_from_memory::<u64>(slot + JOURNAL_OFFSET).unwrap() as usize;
        let words: Vec<u8> = [0x5555_5555_5555_5555u64; 3]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let stamp = Stamp::new(Generation::new(9), false);
        w.journal_line(target, stamp, &words).unwrap();
        // As if the host died while the journal was written back, its first line in
        // memory and its line of words not: memory holds an older entry's words there.
        view.store_to_memory(j + line + 8, &[0u64; 3]).unwrap();
        view.store_u64(target, Stamp::INVALID.raw()).unwrap();
        view.writeback(target, line).unwrap(); // and the half-written line
        view.fence();
        s.emu.node(0).crash();
        assert!(!w.finish_from_journal(slot).unwrap());
        let now: u64 = view.load_from_memory(target).unwrap();
        assert_eq!(now, Stamp::INVALID.raw(), "the line is as the host left it");
        // The same journal whole is applied; one whose length is more than a line's
        // payload is not.
        for (len, applied) in [(line - 8, true), (line - 7, false), (0, false)] {
            let record = vec![0x77u8; len];
            w.journal_line(target, stamp, &record).unwrap();
            view.store_u64(target, Stamp::INVALID.raw()).unwrap();
            view.writeback(target, line).unwrap();
            view.writeback(j, 2 * line).unwrap();
            view.fence();
            assert_eq!(w.finish_from_journal(slot).unwrap(), applied, "len {len}");
            let now: u64 = view.load_from_memory(target).unwrap();
            assert_eq!(now == stamp.raw(), applied, "len {len}");
        }
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
