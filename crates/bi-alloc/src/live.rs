//! Which blocks of an arena are handed out: one tag byte per line.
//!
//! The heap must answer "is a live block starting here, and how long is it?" on every
//! free and every retirement check. A hash map answers it with a hash, a probe and a miss
//! into a table that grows with the live set; here the answer is one byte at index
//! `(offset - arena start) / line`, a page map in the manner of tcmalloc's. The table costs
//! one byte per line of the memory the heap was ever given (1/64 of it with 64-byte
//! lines), in pages allocated when a first block starts in them (a heap that grows over a
//! large pool pays only for what it got), and never rehashes. Large runs, which are few,
//! keep their exact length in a small map beside it.

use std::collections::HashMap;

/// The tag of a line at which no live block starts.
const NONE: u8 = 0;
/// The tag of a line at which a live large run starts (its length is in `large`).
const LARGE: u8 = u8::MAX;

/// Where a live block came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A slot of size class `c`.
    Class(usize),
    /// A large run of this many bytes.
    Large(usize),
}

/// Lines per page of tags.
const PAGE_LINES: usize = 4096;

/// The live blocks of one arena.
#[derive(Debug)]
pub(crate) struct LiveMap {
    start: usize,
    lines: usize,
    line_shift: u32,
    /// Per line: `NONE`, `class + 1`, or `LARGE`; in pages of `PAGE_LINES`, empty until
    /// a block starts in them.
    pages: Vec<Box<[u8]>>,
    large: HashMap<usize, usize>,
}

impl LiveMap {
    /// An empty map over `lines` lines starting at `start`; `line` is a power of two.
    pub(crate) fn new(start: usize, lines: usize, line: usize) -> LiveMap {
        LiveMap {
            start,
            lines,
            line_shift: line.trailing_zeros(),
            pages: (0..lines.div_ceil(PAGE_LINES))
                .map(|_| Box::default())
                .collect(),
            large: HashMap::new(),
        }
    }

    fn index(&self, offset: usize) -> Option<usize> {
        let rel = offset.checked_sub(self.start)?;
        if rel & ((1 << self.line_shift) - 1) != 0 {
            return None;
        }
        let i = rel >> self.line_shift;
        (i < self.lines).then_some(i)
    }

    /// The live block starting at `offset`, if any.
    #[inline]
    pub(crate) fn get(&self, offset: usize) -> Option<Kind> {
        let i = self.index(offset)?;
        match *self.pages[i / PAGE_LINES].get(i % PAGE_LINES)? {
            NONE => None,
            LARGE => self.large.get(&offset).map(|&len| Kind::Large(len)),
            tag => Some(Kind::Class(usize::from(tag) - 1)),
        }
    }

    /// Records a live block at `offset` (a line of the arena where none is live).
    #[inline]
    pub(crate) fn insert(&mut self, offset: usize, kind: Kind) {
        let Some(i) = self.index(offset) else {
            return;
        };
        let page = &mut self.pages[i / PAGE_LINES];
        if page.is_empty() {
            *page = vec![NONE; PAGE_LINES].into_boxed_slice();
        }
        page[i % PAGE_LINES] = match kind {
            // Class indices are below `CLASSES` (12), far below `LARGE`.
            Kind::Class(c) => (c + 1) as u8,
            Kind::Large(len) => {
                self.large.insert(offset, len);
                LARGE
            }
        };
    }

    /// Forgets the live block at `offset`.
    #[inline]
    pub(crate) fn remove(&mut self, offset: usize) {
        if let Some(i) = self.index(offset)
            && let Some(tag) = self.pages[i / PAGE_LINES].get_mut(i % PAGE_LINES)
        {
            if *tag == LARGE {
                self.large.remove(&offset);
            }
            *tag = NONE;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_only_for_block_starts() {
        let mut m = LiveMap::new(1024, 16, 64);
        m.insert(1024 + 64, Kind::Class(3));
        m.insert(1024 + 5 * 64, Kind::Large(640));
        assert_eq!(m.get(1024 + 64), Some(Kind::Class(3)));
        assert_eq!(m.get(1024 + 5 * 64), Some(Kind::Large(640)));
        for bad in [0, 1024, 1024 + 65, 1024 + 16 * 64, usize::MAX] {
            assert_eq!(m.get(bad), None, "{bad}");
        }
        m.remove(1024 + 5 * 64);
        assert_eq!(m.get(1024 + 5 * 64), None);
        assert!(m.large.is_empty());
    }
}
