//! Free runs of whole lines, coalesced, handed out first-fit.
//!
//! Blocks above the largest size class are exact runs of lines. When one is freed its run
//! merges with free neighbours, so a steady mix of large objects does not splinter the
//! arena into pieces too small to reuse; allocation takes the lowest run that fits
//! (first-fit), which keeps live data packed towards the start of the arena. The same
//! runs also feed size-class refills, so memory a large object gave back can serve small
//! objects too.
//!
//! Offsets and lengths are bytes; the node heap only ever inserts whole, line-aligned
//! runs, so everything here stays line-aligned without knowing the line size.

use std::collections::BTreeMap;

/// A set of disjoint, non-adjacent free runs (adjacent runs are always merged).
#[derive(Debug, Default)]
pub(crate) struct FreeRuns {
    /// Start offset -> length in bytes.
    runs: BTreeMap<usize, usize>,
    /// Sum of all lengths.
    total: usize,
}

impl FreeRuns {
    /// Adds the free run `offset .. offset + len`, merging it with the runs it touches.
    ///
    /// The run must not overlap a free run already present (the heap only gives back
    /// blocks it verified as live).
    pub(crate) fn insert(&mut self, offset: usize, len: usize) {
        debug_assert!(len > 0);
        let (mut start, mut end) = (offset, offset + len);
        if let Some((&s, &l)) = self.runs.range(..offset).next_back() {
            debug_assert!(s + l <= offset, "free runs overlap");
            if s + l == offset {
                self.runs.remove(&s);
                start = s;
            }
        }
        if let Some(&l) = self.runs.get(&end) {
            self.runs.remove(&end);
            end += l;
        }
        debug_assert!(
            self.runs.range(offset..end).next().is_none(),
            "free runs overlap"
        );
        self.runs.insert(start, end - start);
        self.total += len;
    }

    /// Takes `len` bytes from the front of the lowest run that holds them.
    pub(crate) fn take_first_fit(&mut self, len: usize) -> Option<usize> {
        let (&start, &run) = self.runs.iter().find(|&(_, &l)| l >= len)?;
        self.runs.remove(&start);
        if run > len {
            self.runs.insert(start + len, run - len);
        }
        self.total -= len;
        Some(start)
    }

    /// Removes and returns the run that ends exactly at `end`, if any.
    pub(crate) fn remove_ending_at(&mut self, end: usize) -> Option<(usize, usize)> {
        let (&s, &l) = self.runs.range(..end).next_back()?;
        if s + l != end {
            return None;
        }
        self.runs.remove(&s);
        self.total -= l;
        Some((s, l))
    }

    /// Total free bytes.
    pub(crate) fn total(&self) -> usize {
        self.total
    }

    /// Number of runs.
    pub(crate) fn count(&self) -> usize {
        self.runs.len()
    }

    /// The runs in address order (for checks).
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.runs.iter().map(|(&s, &l)| (s, l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesces_both_sides() {
        let mut r = FreeRuns::default();
        r.insert(0, 64);
        r.insert(128, 64);
        assert_eq!(r.count(), 2);
        r.insert(64, 64); // fills the hole: one run
        assert_eq!(r.iter().collect::<Vec<_>>(), [(0, 192)]);
        assert_eq!(r.total(), 192);
        r.insert(256, 64);
        assert_eq!(r.iter().collect::<Vec<_>>(), [(0, 192), (256, 64)]);
    }

    #[test]
    fn first_fit_splits_from_the_front() {
        let mut r = FreeRuns::default();
        r.insert(0, 64);
        r.insert(128, 256);
        assert_eq!(r.take_first_fit(128), Some(128));
        assert_eq!(r.iter().collect::<Vec<_>>(), [(0, 64), (256, 128)]);
        assert_eq!(r.take_first_fit(64), Some(0));
        assert_eq!(r.take_first_fit(256), None);
        assert_eq!(r.take_first_fit(128), Some(256));
        assert_eq!((r.total(), r.count()), (0, 0));
    }

    #[test]
    fn removes_the_run_ending_at_a_point() {
        let mut r = FreeRuns::default();
        r.insert(64, 128);
        assert_eq!(r.remove_ending_at(128), None);
        assert_eq!(r.remove_ending_at(64), None);
        assert_eq!(r.remove_ending_at(192), Some((64, 128)));
        assert_eq!(r.total(), 0);
        assert_eq!(r.remove_ending_at(192), None);
    }
}
