//! The delegation area of a named structure: found by the structure's name, in memory
//! the structure's writer was granted from the pool's heap.
//!
//! The area has a root directory entry of its own, `"<name>.rq"` (its types fingerprint
//! names the record types), and owns the extents granted to that entry, so it is never
//! part of the structure's heap: a writer adopting the structure never counts it, and
//! it lives as long as the region. The first writer grants it; every later writer, and
//! every client, finds it by the same name.

use super::layout::DelegationLayout;
use crate::naming::{fingerprint, open_slot};
use crate::{CollectionError, Stored};
use bi_alloc::{Extents, Grow};
use bi_core::mem::MemView;
use bi_core::region::Region;
use bi_core::runtime::{BiError, NodeRuntime};

/// Records per client channel of a named structure's area.
pub(crate) const NAMED_CAPACITY: usize = 64;

/// The name of the area of the structure named `name`.
fn area_name(name: &str) -> String {
    format!("{name}.rq")
}

impl<K: Stored, V: Stored> DelegationLayout<K, V> {
    /// The delegation area of the structure named `name`, with `clients` clients of
    /// `NAMED_CAPACITY` records each: granted now if `grant` (the structure's writer
    /// does) and there is none yet; `None` if there is none and `grant` is false (no
    /// writer has served the structure yet). An area granted for another client count
    /// or record type is refused when its header is checked.
    ///
    /// ```
    /// use bi_collections::delegate::DelegationLayout;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 1);
    /// let (region, rt) = (&s.region, &s.nodes[0]);
    /// assert_eq!(DelegationLayout::<u64, u64>::named(region, rt, "orders", 2, false).unwrap(), None);
    /// let made = DelegationLayout::<u64, u64>::named(region, rt, "orders", 2, true).unwrap();
    /// let found = DelegationLayout::<u64, u64>::named(region, &s.nodes[1], "orders", 2, false);
    /// assert_eq!(found.unwrap(), made);
    /// ```
    pub fn named<M: MemView + 'static>(
        region: &Region,
        rt: &NodeRuntime<M>,
        name: &str,
        clients: usize,
        grant: bool,
    ) -> Result<Option<Self>, CollectionError> {
        let area = area_name(name);
        let types = fingerprint::<K, V>("DelegationArea");
        let slot = open_slot(region, rt, &area, types)?;
        let line = region.layout().line_size();
        let need = Self::required_bytes(clients, NAMED_CAPACITY, line)?;
        let heap = |e| CollectionError::Runtime(BiError::Heap(e));
        let mut extents = Extents::new(rt.clone(), slot as u64).map_err(heap)?;
        let range = match extents.owned().map_err(heap)?.into_iter().next() {
            Some(range) => range,
            None if grant => extents.grow(need).map_err(heap)?,
            None => return Ok(None),
        };
        Self::new(range, clients, NAMED_CAPACITY, line).map(Some)
    }
}
