//! Lazy invalidation: the one loop every shared structure's lookup runs.
//!
//! A reader searches a structure through its node's cache, which may hold a version up to
//! one staleness bound old. That is fine for a key the cached version has, but a miss may
//! only mean "not yet seen here": a key whose insertion was published *before* the lookup
//! began must be found. And a walk may meet a stale link (a node the writer has retired
//! since this node's copy of its parent was fetched). In both cases the answer is the
//! same: read the structure's entry points (root slot, bucket slot) again from memory and
//! search once more. [`BiGuard::lazy`] is that loop, written once for every structure;
//! the structure supplies one search, told whether to read its entry points from the
//! cache or from memory.

use crate::mem::MemView;
use crate::runtime::BiError;
use crate::runtime::reader::BiGuard;

/// How many times a lookup starts over at once from entry points read fresh from memory
/// when a link it follows turns out stale. Each attempt follows a newer publication.
pub const FRESH_ATTEMPTS: usize = 16;

/// How long a lookup keeps starting over (yielding the processor between attempts) once
/// [`FRESH_ATTEMPTS`] were stale. A line rewritten in place ([`lines`](crate::runtime::lines))
/// matches nothing while its writer is between the first and the last store of the
/// rewrite, and a writer descheduled there holds every fresh reader of that line until
/// it runs again: a scheduling delay, not an error. Only a link that stays stale this
/// long is reported ([`BiError::StaleLink`]).
pub const STALE_PATIENCE: std::time::Duration = std::time::Duration::from_millis(200);

/// Where a search reads its entry points (root and bucket slots) from.
///
/// ```
/// use bi_core::runtime::{Via, testing::Setup};
///
/// let s = Setup::new(2, 0);
/// let r = s.nodes[1].reader().unwrap();
/// let g = r.enter();
/// assert_eq!(g.slot_word(s.slot(0), Via::Cached).unwrap(), 0); // now cached
/// let mut w = s.writer(0);
/// let link = w.alloc_sealed(1u64).unwrap();
/// w.publish_link(s.slot(0), link).unwrap();
/// assert_eq!(g.slot_word(s.slot(0), Via::Cached).unwrap(), 0); // no pass yet
/// assert_eq!(g.slot_word(s.slot(0), Via::Fresh).unwrap(), link.raw());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Through this node's cache (the hit path: no cache operation).
    Cached,
    /// From memory: invalidate the slot's line and fence first.
    Fresh,
}

/// What one search of a structure found.
///
/// ```
/// use bi_core::runtime::{BiError, Search, testing::Setup};
///
/// let s = Setup::new(1, 0);
/// let r = s.nodes[0].reader().unwrap();
/// let g = r.enter();
/// let mut tries = Vec::new();
/// let found = g.lazy(|entry| {
///     tries.push(entry);
///     Ok::<_, BiError>(Search::<u64>::Missing)
/// });
/// assert_eq!(found.unwrap(), None);
/// assert_eq!(tries.len(), 2); // through the cache, then from memory
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search<T> {
    /// The answer.
    Found(T),
    /// The version searched does not have it.
    Missing,
    /// A link on the way did not validate: start again from fresh entry points.
    Stale,
}

impl<V: MemView> BiGuard<'_, V> {
    /// Runs `search` through the cache; on a miss or a stale link, again from entry points
    /// read fresh from memory, until it finds the answer or misses in a fresh version.
    /// After [`FRESH_ATTEMPTS`] stale attempts in a row it yields between attempts, and
    /// reports [`BiError::StaleLink`] once they have stayed stale for
    /// [`STALE_PATIENCE`].
    ///
    /// So a key whose insertion was published before the call is always found, and the
    /// hit path costs one search with no cache operation.
    ///
    /// ```
    /// use bi_core::runtime::lazy::{Via, Search};
    /// use bi_core::runtime::object::Fetch;
    /// use bi_core::runtime::testing::Setup;
    /// use bi_core::runtime::{BiError, Link};
    ///
    /// let s = Setup::new(2, 3);
    /// let mut w = s.writer(0);
    /// let b = w.alloc(5u64).unwrap();
    /// w.publish(s.slot(0), b).unwrap();
    /// // Node 1 has not run a pass, yet the value published before the lookup is found.
    /// let r = s.nodes[1].reader().unwrap();
    /// let g = r.enter();
    /// let found = g.lazy(|entry| {
    ///     let link = Link::<u64>::from_raw(g.slot_word(s.slot(0), entry)?);
    ///     Ok::<_, BiError>(match g.fetch(link)? {
    ///         Fetch::Value(v) => Search::Found(*v),
    ///         Fetch::Null => Search::Missing,
    ///         Fetch::Stale => Search::Stale,
    ///     })
    /// });
    /// assert_eq!(found.unwrap(), Some(5));
    /// ```
    #[inline]
    pub fn lazy<T, E: From<BiError>>(
        &self,
        search: impl FnMut(Via) -> Result<Search<T>, E>,
    ) -> Result<Option<T>, E> {
        search_until_answered(Via::Cached, false, search)
    }

    /// Runs `search` through the cache, and trusts a miss: the answer is that of the
    /// version this node's cache holds, at most one staleness bound old (a key inserted
    /// since this node's last pass may not be found yet, exactly as a value replaced since
    /// may still show). Only a stale link sends the search to fresh entry points, as
    /// [`lazy`](Self::lazy) does. A miss then costs what a hit costs: one search, no cache
    /// operation; [`lazy`](Self::lazy) is the read that finds everything published
    /// before the call.
    ///
    /// ```
    /// use bi_core::runtime::lazy::{Via, Search};
    /// use bi_core::runtime::object::Fetch;
    /// use bi_core::runtime::testing::Setup;
    /// use bi_core::runtime::{BiError, Link};
    ///
    /// let s = Setup::new(2, 3);
    /// let r = s.nodes[1].reader().unwrap();
    /// let search = |g: &bi_core::runtime::BiGuard<'_, _>, entry| {
    ///     let link = Link::<u64>::from_raw(g.slot_word(s.slot(0), entry)?);
    ///     Ok::<_, BiError>(match g.fetch(link)? {
    ///         Fetch::Value(v) => Search::Found(*v),
    ///         Fetch::Null => Search::Missing,
    ///         Fetch::Stale => Search::Stale,
    ///     })
    /// };
    /// let g = r.enter();
    /// assert_eq!(g.bounded(|e| search(&g, e)).unwrap(), None); // node 1 caches the empty slot
    /// let mut w = s.writer(0);
    /// let b = w.alloc(5u64).unwrap();
    /// w.publish(s.slot(0), b).unwrap();
    /// assert_eq!(g.bounded(|e| search(&g, e)).unwrap(), None); // not before node 1's pass
    /// assert_eq!(g.lazy(|e| search(&g, e)).unwrap(), Some(5)); // the fresh read finds it
    /// drop(g);
    /// s.quiesce_all().unwrap();
    /// let g = r.enter();
    /// assert_eq!(g.bounded(|e| search(&g, e)).unwrap(), Some(5));
    /// ```
    #[inline]
    pub fn bounded<T, E: From<BiError>>(
        &self,
        search: impl FnMut(Via) -> Result<Search<T>, E>,
    ) -> Result<Option<T>, E> {
        search_until_answered(Via::Cached, true, search)
    }

    /// Runs `search` from entry points read fresh from memory (its lines invalidated
    /// and fenced before they are read), until it finds the answer or misses; a stale
    /// link starts it over, as in [`lazy`](Self::lazy). What it reads stays in this
    /// node's cache, so later reads through the cache see that version or a newer one.
    ///
    /// ```
    /// use bi_core::runtime::lazy::{Via, Search};
    /// use bi_core::runtime::testing::Setup;
    /// use bi_core::runtime::BiError;
    ///
    /// let s = Setup::new(1, 0);
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// let mut tries = Vec::new();
    /// let found = g.fresh(|entry| {
    ///     tries.push(entry);
    ///     Ok::<_, BiError>(Search::<u64>::Missing)
    /// });
    /// assert_eq!((found.unwrap(), tries), (None, vec![Via::Fresh]));
    /// ```
    #[inline(never)]
    pub fn fresh<T, E: From<BiError>>(
        &self,
        search: impl FnMut(Via) -> Result<Search<T>, E>,
    ) -> Result<Option<T>, E> {
        search_until_answered(Via::Fresh, false, search)
    }

    /// The word in the 8-byte slot at `slot`, through the cache or from memory.
    ///
    /// ```
    /// use bi_core::runtime::{Via, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_sealed(1u64).unwrap();
    /// w.publish_link(s.slot(0), link).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// assert_eq!(g.slot_word(s.slot(0), Via::Fresh).unwrap(), link.raw());
    /// assert!(g.slot_word(s.slot(0) + 1, Via::Cached).is_err()); // not 8-byte aligned
    /// ```
    #[inline(always)]
    pub fn slot_word(&self, slot: usize, entry: Via) -> Result<u64, BiError> {
        match entry {
            Via::Cached => self.cached_slot_word(slot),
            Via::Fresh => self.fresh_slot_word(slot),
        }
    }
}

/// The loop of [`lazy`](BiGuard::lazy), [`bounded`](BiGuard::bounded) and
/// [`fresh`](BiGuard::fresh): `search` from entry points read through `first`, then
/// fresh from memory until it finds the answer or misses in a fresh version (or, with
/// `trust_cached_miss`, in the cached one). `search` is called from this one place, so a
/// structure's search is inlined into its lookup whole.
#[inline(always)]
fn search_until_answered<T, E: From<BiError>>(
    first: Via,
    trust_cached_miss: bool,
    mut search: impl FnMut(Via) -> Result<Search<T>, E>,
) -> Result<Option<T>, E> {
    let mut via = first;
    let mut stale = StaleAttempts::default();
    loop {
        match search(via)? {
            Search::Found(v) => return Ok(Some(v)),
            Search::Missing if via == Via::Fresh || trust_cached_miss => return Ok(None),
            Search::Missing => {}
            Search::Stale if via == Via::Cached => {}
            Search::Stale => stale.one_more()?,
        }
        via = Via::Fresh;
    }
}

/// The fresh attempts of one lookup that met a stale link: the first
/// [`FRESH_ATTEMPTS`] start over at once, later ones after yielding, until
/// [`STALE_PATIENCE`] has passed.
#[derive(Default)]
struct StaleAttempts {
    count: usize,
    since: Option<std::time::Instant>,
}

impl StaleAttempts {
    /// Counts one more stale fresh attempt: `Ok` to start over, the lookup's error once
    /// the attempts have stayed stale too long.
    #[cold]
    #[inline(never)]
    fn one_more(&mut self) -> Result<(), BiError> {
        self.count += 1;
        if self.count <= FRESH_ATTEMPTS {
            return Ok(());
        }
        let since = *self.since.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() > STALE_PATIENCE {
            return Err(BiError::StaleLink { offset: 0 });
        }
        crate::primitive::thread::yield_now();
        Ok(())
    }
}
