//! The kinds of object structures are built of, each with its layout, its reads and its
//! writes in one file: line arrays whose lines are records rewritten in place
//! ([`lines`]), arrays of slots updated in place ([`slots`]) and byte strings
//! ([`bytes`]). The rule that splits the guard's and the writer's methods across files:
//! a method that reads or writes one kind of object lives with that kind.
//!
//! # Trade-offs
//!
//! - **One file a kind, not one file a type.** [`BiGuard`](super::BiGuard)'s and
//!   [`Writer`](super::Writer)'s methods for a kind sit with the kind's layout, so a kind
//!   is read whole in one place, at the price of each type's methods spreading over
//!   several files.

pub mod bytes;
pub mod lines;
pub mod slots;
