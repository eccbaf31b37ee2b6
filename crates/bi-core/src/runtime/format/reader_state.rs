//! The protocol word of a reader record ([`Reader`](crate::runtime::Reader)): written by the
//! reader's own thread, read by its node's pass.

/// The first word of a reader record: whether the reader is inside a read section and,
/// if so, the clock tick at which it entered.
///
/// ```
/// use bi_core::runtime::ReaderState;
///
/// let s = ReaderState::inside(42);
/// assert_eq!((s.is_inside(), s.enter_tick()), (true, Some(42)));
/// assert_eq!(ReaderState::from_raw(s.raw()), s);
/// assert!(!ReaderState::OUTSIDE.is_inside());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct ReaderState(u64);

impl ReaderState {
    /// Not in a section.
    pub const OUTSIDE: ReaderState = ReaderState(0);

    /// Inside a section entered at `tick` (ticks past 2^63 wrap; clocks never get there).
    ///
    /// ```
    /// use bi_core::runtime::ReaderState;
    ///
    /// assert_eq!(ReaderState::inside(7).enter_tick(), Some(7));
    /// ```
    #[inline(always)]
    pub const fn inside(tick: u64) -> ReaderState {
        ReaderState((tick << 1) | 1)
    }

    /// From the stored word.
    ///
    /// ```
    /// use bi_core::runtime::ReaderState;
    ///
    /// assert_eq!(ReaderState::from_raw(0), ReaderState::OUTSIDE);
    /// ```
    pub const fn from_raw(raw: u64) -> ReaderState {
        ReaderState(raw)
    }

    /// The stored word.
    ///
    /// ```
    /// use bi_core::runtime::ReaderState;
    ///
    /// let s = ReaderState::inside(5);
    /// assert_ne!(s.raw(), 0);
    /// assert_eq!(ReaderState::from_raw(s.raw()), s);
    /// ```
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// Whether the reader is inside a section.
    ///
    /// ```
    /// use bi_core::runtime::ReaderState;
    ///
    /// assert!(ReaderState::inside(0).is_inside()); // tick 0 is still inside
    /// assert!(!ReaderState::OUTSIDE.is_inside());
    /// ```
    pub const fn is_inside(self) -> bool {
        self.0 & 1 == 1
    }

    /// The tick at which the current section began, if inside one.
    ///
    /// ```
    /// use bi_core::runtime::ReaderState;
    ///
    /// assert_eq!(ReaderState::OUTSIDE.enter_tick(), None);
    /// assert_eq!(ReaderState::inside(9).enter_tick(), Some(9));
    /// ```
    pub const fn enter_tick(self) -> Option<u64> {
        if self.is_inside() {
            Some(self.0 >> 1)
        } else {
            None
        }
    }
}
