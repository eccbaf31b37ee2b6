//! Size classes: the slot sizes small objects are rounded up to.
//!
//! # Why line-padded slots
//!
//! Every slot is a whole number of lines and starts on a line boundary. Cache operations
//! work on whole lines, so an object that shared a line with a neighbour would be written
//! back (or dropped by an invalidate) together with that neighbour; if the neighbour
//! belonged to another node, two nodes would write one line and one of the writes would be
//! lost on write-back. Padding to lines makes every object's lines its own.
//!
//! # Why these sizes
//!
//! Classes are counted in lines, not bytes, so they mean the same thing for every line
//! size. They grow geometrically in small steps (two per doubling after four lines):
//! `1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64` lines. Rounding a request up to its class
//! wastes less than a third of the slot beyond the line padding itself, and the table stays
//! short enough that a node keeps one free list per class. Requests above
//! [`LARGEST_CLASS_LINES`] get an exact run of whole lines instead,
//! from a coalescing first-fit free list (see [`NodeHeap`](crate::NodeHeap)).

/// Slot sizes in lines, smallest first.
pub const CLASS_LINES: [usize; 12] = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64];

/// The largest class, in lines; longer requests are served as runs of whole lines.
pub const LARGEST_CLASS_LINES: usize = CLASS_LINES[CLASS_LINES.len() - 1];

/// Number of size classes.
pub(crate) const CLASSES: usize = CLASS_LINES.len();

/// The index of the smallest class that holds `lines` lines, or `None` if `lines` is zero
/// or above [`LARGEST_CLASS_LINES`].
///
/// ```
/// use bi_alloc::class::{CLASS_LINES, class_of};
///
/// assert_eq!(class_of(1), Some(0));
/// assert_eq!(CLASS_LINES[class_of(5).unwrap()], 6);
/// assert_eq!(CLASS_LINES[class_of(64).unwrap()], 64);
/// assert_eq!(class_of(65), None);
/// assert_eq!(class_of(0), None);
/// ```
pub fn class_of(lines: usize) -> Option<usize> {
    if lines == 0 {
        return None;
    }
    let i = CLASS_LINES.partition_point(|&c| c < lines);
    (i < CLASSES).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_increasing_with_small_steps() {
        assert_eq!(CLASS_LINES[0], 1);
        for w in CLASS_LINES.windows(2) {
            assert!(w[0] < w[1]);
            // Growth of at most 2x (1 -> 2) and at most 1.5x from four lines on.
            assert!(w[1] <= 2 * w[0]);
            if w[0] >= 4 {
                assert!(2 * w[1] <= 3 * w[0]);
            }
        }
    }

    #[test]
    fn every_size_maps_to_the_smallest_class_that_fits() {
        for lines in 1..=LARGEST_CLASS_LINES {
            let c = class_of(lines).unwrap();
            assert!(CLASS_LINES[c] >= lines);
            assert!(c == 0 || CLASS_LINES[c - 1] < lines);
            // Waste beyond line padding is under a third of the slot.
            assert!(3 * (CLASS_LINES[c] - lines) < CLASS_LINES[c]);
        }
        assert_eq!(class_of(0), None);
        assert_eq!(class_of(LARGEST_CLASS_LINES + 1), None);
        assert_eq!(class_of(usize::MAX), None);
    }
}
