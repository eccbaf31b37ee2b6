//! What the fuzz targets share: the emulated hardware an input chooses
//! ([`hardware`]) and the decoding of an input's sequence of steps ([`steps`]).

pub mod hardware;

use arbitrary::{Arbitrary, Unstructured};

/// Decodes steps until the data runs out or `max` of them are read.
///
/// Every remaining byte feeds a step: a derived `Vec` would end the sequence at random,
/// after two steps on average.
pub fn steps<'a, T: Arbitrary<'a>>(
    u: &mut Unstructured<'a>,
    max: usize,
) -> arbitrary::Result<Vec<T>> {
    let mut steps = Vec::new();
    while !u.is_empty() && steps.len() < max {
        steps.push(u.arbitrary()?);
    }
    Ok(steps)
}
