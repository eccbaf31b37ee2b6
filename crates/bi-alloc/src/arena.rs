//! Per-node arenas: which part of the heap section each node allocates in.
//!
//! # Why one arena per node
//!
//! Nodes share memory but not coherence: an atomic read-modify-write by one node is not
//! seen by another node's cache, so a free list or bump pointer that two nodes update is
//! not merely slow, it is wrong. Giving every node an arena of its own removes the
//! question: a node allocates and frees only in its arena, its heap state is touched only
//! by its own threads, and no allocator operation ever needs an atomic that crosses nodes.
//! Objects are still *read* by every node; only placement is private.
//!
//! # Why a pure function of the layout
//!
//! Every process that maps the region must agree on where each node's arena lies without
//! talking to the others, so the split is computed from the [`Layout`] alone (heap section,
//! line size, node count) and nothing is stored. Two processes with the same layout get
//! the same arenas.
//!
//! # How
//!
//! The heap section is cut into whole lines and the lines are dealt out in node order:
//! every node gets `lines / nodes` lines, and the first `lines % nodes` nodes one more, so
//! shares differ by at most one line and together cover the section exactly. Every arena
//! starts and ends on a line boundary, so two nodes never write one line. A node's arena
//! must hold at least `MIN_ARENA_LINES` lines; a smaller heap section is
//! [`AllocError::HeapTooSmall`].

use crate::error::AllocError;
use bi_core::line::LineSize;
use bi_core::region::{Layout, Section};
use std::ops::Range;

/// The fewest lines a node's arena may have.
pub(crate) const MIN_ARENA_LINES: usize = 8;

/// One node's share of the heap section: `offset .. offset + len`, whole lines.
///
/// ```
/// use bi_alloc::ArenaRange;
///
/// let a = ArenaRange { node: 1, offset: 4096, len: 1024 };
/// assert_eq!(a.range(), 4096..5120);
/// assert!(a.contains(4096, 1024));
/// assert!(!a.contains(5000, 200));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArenaRange {
    /// The node that owns this arena.
    pub node: usize,
    /// First byte (line-aligned region offset).
    pub offset: usize,
    /// Length in bytes (a whole number of lines).
    pub len: usize,
}

impl ArenaRange {
    /// The arena as a region [`Section`].
    ///
    /// ```
    /// use bi_alloc::ArenaRange;
    ///
    /// let a = ArenaRange { node: 0, offset: 4096, len: 1024 };
    /// let s = a.section();
    /// assert_eq!((s.offset, s.len), (4096, 1024));
    /// ```
    pub const fn section(&self) -> Section {
        Section {
            offset: self.offset,
            len: self.len,
        }
    }

    /// One past the last byte (saturating).
    ///
    /// ```
    /// use bi_alloc::ArenaRange;
    ///
    /// let a = ArenaRange { node: 0, offset: 4096, len: 1024 };
    /// assert_eq!(a.end(), 5120);
    /// let huge = ArenaRange { node: 0, offset: usize::MAX - 10, len: 100 };
    /// assert_eq!(huge.end(), usize::MAX); // saturating
    /// ```
    pub const fn end(&self) -> usize {
        self.section().end()
    }

    /// The arena as a range of region offsets.
    ///
    /// ```
    /// use bi_alloc::ArenaRange;
    ///
    /// let a = ArenaRange { node: 0, offset: 4096, len: 1024 };
    /// assert_eq!(a.range(), 4096..5120);
    /// assert_eq!(a.range().len(), a.len);
    /// ```
    pub const fn range(&self) -> Range<usize> {
        self.section().range()
    }

    /// Whether `offset .. offset + len` lies inside this arena.
    ///
    /// ```
    /// use bi_alloc::ArenaRange;
    ///
    /// let a = ArenaRange { node: 0, offset: 4096, len: 1024 };
    /// assert!(a.contains(4096, 1024)); // the whole arena
    /// assert!(a.contains(5119, 1));
    /// assert!(!a.contains(5119, 2)); // runs past the end
    /// assert!(!a.contains(4095, 1));
    /// ```
    pub const fn contains(&self, offset: usize, len: usize) -> bool {
        self.section().contains(offset, len)
    }
}

/// The heap section divided into one arena per node.
///
/// ```
/// use bi_alloc::Arenas;
/// use bi_core::region::{Layout, RegionConfig};
///
/// let layout = Layout::compute(&RegionConfig::new(1 << 20).with_nodes(3)).unwrap();
/// let arenas = Arenas::split(&layout).unwrap();
/// assert_eq!(arenas.len(), 3);
/// let heap = layout.heap();
/// assert_eq!(arenas.get(0).unwrap().offset, heap.offset);
/// assert_eq!(arenas.get(2).unwrap().end(), heap.end());
/// let mid = arenas.get(1).unwrap();
/// assert_eq!(arenas.node_of(mid.offset + 10), Some(1));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arenas {
    line: LineSize,
    arenas: Vec<ArenaRange>,
}

impl Arenas {
    /// Splits the heap section of `layout` among the layout's nodes.
    ///
    /// Errors: [`AllocError::HeapTooSmall`] when a node would get fewer than
    /// `MIN_ARENA_LINES` lines.
    ///
    /// ```
    /// use bi_alloc::Arenas;
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20).with_nodes(4)).unwrap();
    /// let arenas = Arenas::split(&layout).unwrap();
    /// assert_eq!(arenas.len(), 4);
    /// // Every process computes the same split from the layout alone.
    /// assert_eq!(arenas, Arenas::split(&layout).unwrap());
    /// ```
    pub fn split(layout: &Layout) -> Result<Arenas, AllocError> {
        Arenas::split_range(
            layout.heap().range(),
            layout.line_size(),
            layout.config().nodes() as usize,
        )
    }

    /// Splits the bytes `heap` among `nodes` nodes, using only the whole lines inside it
    /// (a misaligned start rounds up, a misaligned end rounds down).
    ///
    /// ```
    /// use bi_alloc::Arenas;
    /// use bi_core::line::LineSize;
    ///
    /// // 34 lines among 4 nodes: 9, 9, 8, 8 lines.
    /// let arenas = Arenas::split_range(0..34 * 64, LineSize::X86, 4).unwrap();
    /// let lens: Vec<usize> = arenas.iter().map(|a| a.len / 64).collect();
    /// assert_eq!(lens, [9, 9, 8, 8]);
    /// ```
    ///
    /// Errors: [`AllocError::NoNodes`] for `nodes == 0`, [`AllocError::HeapTooSmall`] when
    /// a node would get fewer than `MIN_ARENA_LINES` lines.
    pub fn split_range(
        heap: Range<usize>,
        line: LineSize,
        nodes: usize,
    ) -> Result<Arenas, AllocError> {
        if nodes == 0 {
            return Err(AllocError::NoNodes);
        }
        let start = line.align_up(heap.start).unwrap_or(usize::MAX);
        let end = line.align_down(heap.end);
        let lines = end.saturating_sub(start) / line.get();
        let needed_lines = nodes.saturating_mul(MIN_ARENA_LINES);
        if lines < needed_lines {
            return Err(AllocError::HeapTooSmall {
                heap_bytes: lines * line.get(),
                nodes,
                needed: needed_lines.saturating_mul(line.get()),
            });
        }
        let (share, extra) = (lines / nodes, lines % nodes);
        let mut at = start;
        let arenas = (0..nodes)
            .map(|node| {
                let len = (share + usize::from(node < extra)) * line.get();
                let arena = ArenaRange {
                    node,
                    offset: at,
                    len,
                };
                at += len;
                arena
            })
            .collect();
        Ok(Arenas { line, arenas })
    }

    /// The line size the arenas are aligned to.
    ///
    /// ```
    /// use bi_alloc::Arenas;
    /// use bi_core::line::LineSize;
    ///
    /// let arenas = Arenas::split_range(0..32 * 64, LineSize::X86, 2).unwrap();
    /// assert_eq!(arenas.line_size(), LineSize::X86);
    /// assert!(arenas.iter().all(|a| a.offset % arenas.line_size().get() == 0));
    /// ```
    pub fn line_size(&self) -> LineSize {
        self.line
    }

    /// Number of arenas (one per node).
    ///
    /// ```
    /// use bi_alloc::Arenas;
    /// use bi_core::line::LineSize;
    ///
    /// let arenas = Arenas::split_range(0..32 * 64, LineSize::X86, 2).unwrap();
    /// assert_eq!(arenas.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.arenas.len()
    }

    /// Always `false`: a split has at least one node.
    ///
    /// ```
    /// use bi_alloc::Arenas;
    /// use bi_core::line::LineSize;
    ///
    /// let arenas = Arenas::split_range(0..32 * 64, LineSize::X86, 2).unwrap();
    /// assert!(!arenas.is_empty());
    /// assert!(Arenas::split_range(0..32 * 64, LineSize::X86, 0).is_err()); // never zero nodes
    /// ```
    pub fn is_empty(&self) -> bool {
        self.arenas.is_empty()
    }

    /// The arena of `node`, if the split has that node.
    ///
    /// ```
    /// use bi_alloc::Arenas;
    /// use bi_core::line::LineSize;
    ///
    /// let arenas = Arenas::split_range(0..32 * 64, LineSize::X86, 2).unwrap();
    /// assert_eq!(arenas.get(1).unwrap().offset, 16 * 64);
    /// assert_eq!(arenas.get(2), None);
    /// ```
    pub fn get(&self, node: usize) -> Option<ArenaRange> {
        self.arenas.get(node).copied()
    }

    /// The arena of `node`, or [`AllocError::NoSuchNode`].
    ///
    /// ```
    /// use bi_alloc::{AllocError, Arenas};
    /// use bi_core::line::LineSize;
    ///
    /// let arenas = Arenas::split_range(0..32 * 64, LineSize::X86, 2).unwrap();
    /// assert_eq!(arenas.node(0).unwrap().len, 16 * 64);
    /// assert!(matches!(arenas.node(5), Err(AllocError::NoSuchNode { node: 5, nodes: 2 })));
    /// ```
    pub fn node(&self, node: usize) -> Result<ArenaRange, AllocError> {
        self.get(node).ok_or_else(|| AllocError::NoSuchNode {
            node,
            nodes: self.len(),
        })
    }

    /// All arenas, in node (and address) order.
    ///
    /// ```
    /// use bi_alloc::Arenas;
    /// use bi_core::line::LineSize;
    ///
    /// let arenas = Arenas::split_range(0..32 * 64, LineSize::X86, 2).unwrap();
    /// let nodes: Vec<usize> = arenas.as_slice().iter().map(|a| a.node).collect();
    /// assert_eq!(nodes, [0, 1]);
    /// ```
    pub fn as_slice(&self) -> &[ArenaRange] {
        &self.arenas
    }

    /// Iterates over the arenas in node order.
    ///
    /// ```
    /// use bi_alloc::Arenas;
    /// use bi_core::line::LineSize;
    ///
    /// let arenas = Arenas::split_range(0..32 * 64, LineSize::X86, 2).unwrap();
    /// let total: usize = arenas.iter().map(|a| a.len).sum();
    /// assert_eq!(total, 32 * 64); // the arenas cover the heap exactly
    /// ```
    pub fn iter(&self) -> std::slice::Iter<'_, ArenaRange> {
        self.arenas.iter()
    }

    /// The node whose arena holds byte `offset`, or `None` outside the heap.
    ///
    /// ```
    /// use bi_alloc::Arenas;
    /// use bi_core::line::LineSize;
    ///
    /// let arenas = Arenas::split_range(0..32 * 64, LineSize::X86, 2).unwrap();
    /// assert_eq!(arenas.node_of(0), Some(0));
    /// assert_eq!(arenas.node_of(16 * 64), Some(1));
    /// assert_eq!(arenas.node_of(32 * 64), None); // past the heap
    /// ```
    pub fn node_of(&self, offset: usize) -> Option<usize> {
        let i = self.arenas.partition_point(|a| a.end() <= offset);
        self.arenas
            .get(i)
            .filter(|a| a.contains(offset, 1))
            .map(|a| a.node)
    }
}

impl<'a> IntoIterator for &'a Arenas {
    type Item = &'a ArenaRange;
    type IntoIter = std::slice::Iter<'a, ArenaRange>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bi_core::region::RegionConfig;

    fn check(arenas: &Arenas, heap: Range<usize>, line: usize) {
        assert!(!arenas.is_empty());
        let mut at = heap.start;
        let (mut min, mut max) = (usize::MAX, 0);
        for (i, a) in arenas.iter().enumerate() {
            assert_eq!(a.node, i);
            assert_eq!(a.offset, at, "arenas are contiguous and disjoint");
            assert_eq!(a.offset % line, 0);
            assert_eq!(a.len % line, 0);
            assert!(a.len / line >= MIN_ARENA_LINES);
            assert_eq!(arenas.node_of(a.offset), Some(i));
            assert_eq!(arenas.node_of(a.end() - 1), Some(i));
            min = min.min(a.len);
            max = max.max(a.len);
            at = a.end();
        }
        assert_eq!(at, heap.end, "arenas cover the heap section");
        assert!(max - min <= line, "shares differ by at most one line");
        assert_eq!(arenas.node_of(heap.end), None);
        assert_eq!(arenas.node_of(heap.start.wrapping_sub(1)), None);
    }

    #[test]
    fn splits_layouts_for_1_2_7_nodes_and_3_line_sizes() {
        for line in [32usize, 64, 128] {
            for nodes in [1u32, 2, 7] {
                for size in [1usize << 20, (1 << 20) + 5 * line] {
                    let config = RegionConfig::new(size)
                        .with_line_size(line)
                        .with_nodes(nodes);
                    let layout = Layout::compute(&config).unwrap();
                    let arenas = Arenas::split(&layout).unwrap();
                    assert_eq!(arenas.len(), nodes as usize);
                    assert_eq!(arenas.line_size().get(), line);
                    check(&arenas, layout.heap().range(), line);
                    // A pure function: the same layout gives the same split.
                    assert_eq!(arenas, Arenas::split(&layout).unwrap());
                }
            }
        }
    }

    #[test]
    fn heap_too_small_for_the_node_count_is_an_error() {
        // The smallest region for 7 nodes with 128-byte lines has a 4096-byte heap: 32
        // lines, fewer than 7 x MIN_ARENA_LINES.
        let config = RegionConfig::new(0).with_line_size(128).with_nodes(7);
        let config = config.with_size(config.min_size().unwrap());
        let layout = Layout::compute(&config).unwrap();
        assert_eq!(
            Arenas::split(&layout),
            Err(AllocError::HeapTooSmall {
                heap_bytes: layout.heap().len,
                nodes: 7,
                needed: 7 * MIN_ARENA_LINES * 128,
            })
        );
        // One node fits in the same heap.
        let one = RegionConfig::new(0).with_line_size(128).with_nodes(1);
        let one = Layout::compute(&one.with_size(one.min_size().unwrap())).unwrap();
        assert_eq!(Arenas::split(&one).unwrap().len(), 1);
    }

    #[test]
    fn split_range_edges() {
        let l = LineSize::X86;
        assert_eq!(
            Arenas::split_range(0..1 << 20, l, 0),
            Err(AllocError::NoNodes)
        );
        let exact = MIN_ARENA_LINES * 64 * 3;
        check(&Arenas::split_range(0..exact, l, 3).unwrap(), 0..exact, 64);
        assert!(matches!(
            Arenas::split_range(0..exact - 64, l, 3),
            Err(AllocError::HeapTooSmall { .. })
        ));
        // Misaligned ends shrink to whole lines.
        let a = Arenas::split_range(10..exact + 128 + 10, l, 3).unwrap();
        check(&a, 64..exact + 128, 64);
        // Degenerate ranges do not panic.
        assert!(
            Arenas::split_range(
                Range {
                    start: 100,
                    end: 50
                },
                l,
                1
            )
            .is_err()
        );
        assert!(Arenas::split_range(usize::MAX - 10..usize::MAX, l, 1).is_err());
        assert!(Arenas::split_range(0..1 << 20, l, usize::MAX).is_err());
        assert_eq!(a.node(3), Err(AllocError::NoSuchNode { node: 3, nodes: 3 }));
        assert_eq!(a.node(2).unwrap(), a.as_slice()[2]);
        assert_eq!((&a).into_iter().count(), 3);
    }
}
