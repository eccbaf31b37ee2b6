//! `Debug` that shows contents, as the standard collections' does: every handle prints
//! its entries as a map (`{1: 10, 2: 20}`), and a handle whose entries cannot be read
//! (a corrupt region, a reader with no free record) says why instead.

use crate::CollectionError;
use std::fmt;

/// Writes `entries` as a map, or the error that kept them from being read.
pub(crate) fn entries<K: fmt::Debug, V: fmt::Debug>(
    f: &mut fmt::Formatter<'_>,
    entries: Result<impl IntoIterator<Item = (K, V)>, CollectionError>,
) -> fmt::Result {
    match entries {
        Ok(entries) => f.debug_map().entries(entries).finish(),
        Err(e) => write!(f, "<unreadable: {e}>"),
    }
}
