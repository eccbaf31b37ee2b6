//! The protocol words of a reader record ([`Reader`](crate::runtime::Reader)): its state,
//! written by the reader's own thread and read by its node's pass, and its holder, taken
//! by the process that uses the record.

/// The first word of a reader record: whether the reader is inside a read section and,
/// if so, the clock tick at which it entered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct ReaderState(u64);

impl ReaderState {
    /// Not in a section.
    pub(crate) const OUTSIDE: ReaderState = ReaderState(0);

    /// Inside a section entered at `tick` (ticks past 2^63 wrap; clocks never get there).
    #[inline(always)]
    pub(crate) const fn inside(tick: u64) -> ReaderState {
        ReaderState((tick << 1) | 1)
    }

    /// From the stored word.
    pub(crate) const fn from_raw(raw: u64) -> ReaderState {
        ReaderState(raw)
    }

    /// The stored word.
    pub(crate) const fn raw(self) -> u64 {
        self.0
    }

    /// Whether the reader is inside a section.
    pub(crate) const fn is_inside(self) -> bool {
        self.0 & 1 == 1
    }

    /// The tick at which the current section began, if inside one.
    pub(crate) const fn enter_tick(self) -> Option<u64> {
        if self.is_inside() {
            Some(self.0 >> 1)
        } else {
            None
        }
    }
}

/// The holder word of a reader record, stored as itself: the process that holds the
/// record in the high half (so that another process can ask the kernel whether it is
/// still there), the low half of the holder's token below it; never 0, which is a free
/// record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct ReaderHolder(u64);

impl ReaderHolder {
    /// The holder word of process `pid` taking records with `token`.
    pub(crate) fn new(pid: u32, token: u64) -> ReaderHolder {
        ReaderHolder((u64::from(pid) << 32) | (token & 0xffff_ffff) | 1)
    }

    /// From the stored word.
    pub(crate) const fn from_word(word: u64) -> ReaderHolder {
        ReaderHolder(word)
    }

    /// The stored word.
    pub(crate) const fn word(self) -> u64 {
        self.0
    }

    /// The holding process.
    pub(crate) const fn pid(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::ReaderState;

    #[test]
    fn a_state_inside_carries_its_enter_tick_through_the_stored_word() {
        let s = ReaderState::inside(42);
        assert_eq!((s.is_inside(), s.enter_tick()), (true, Some(42)));
        assert_ne!(s.raw(), 0);
        assert_eq!(ReaderState::from_raw(s.raw()), s);
        // Tick 0 is still inside: the flag, not the tick, says so.
        assert!(ReaderState::inside(0).is_inside());
        assert_eq!(ReaderState::inside(0).enter_tick(), Some(0));
    }

    #[test]
    fn the_zero_word_is_outside_with_no_enter_tick() {
        assert_eq!(ReaderState::from_raw(0), ReaderState::OUTSIDE);
        assert!(!ReaderState::OUTSIDE.is_inside());
        assert_eq!(ReaderState::OUTSIDE.enter_tick(), None);
        assert!(!ReaderState::from_raw(ReaderState::inside(9).raw() - 1).is_inside());
    }
}
