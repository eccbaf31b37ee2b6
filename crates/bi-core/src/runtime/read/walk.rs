//! Walking a linked path: the inner loop of every search.
//!
//! A tree lookup and a hash-chain lookup are the same loop: read the object a link names,
//! look at it, stop or follow one of its links. [`BiGuard::walk`] is that loop, written
//! once. Its hit path is a tight loop over the validated read of each object: the view,
//! the heap's bounds and the line size are arguments of one function, so they stay in
//! registers for the whole walk instead of being fetched again through the guard after
//! every load of shared memory. A stale copy leaves the loop for the guard's invalidate-and-read-again path
//! and then the walk goes on.

use crate::mem::MemView;
use crate::runtime::BiError;
use crate::runtime::lazy::Search;
use crate::runtime::object::{Fetch, Link, Objects, fetch_with, object_lines};
use crate::runtime::reader::BiGuard;
use bytemuck::Pod;

/// What a walk does after looking at one object.
///
/// ```
/// use bi_core::runtime::{Link, Search, testing::Setup, walk::Step};
///
/// let s = Setup::new(1, 0);
/// let mut w = s.writer(0);
/// let tail = w.alloc_sealed([2u64, 0]).unwrap();
/// let head = w.alloc_sealed([1u64, tail.raw()]).unwrap();
/// let r = s.nodes[0].reader().unwrap();
/// let g = r.enter();
/// let count = std::cell::Cell::new(0);
/// let end = g.walk(head, |n: &[u64; 2]| -> Step<[u64; 2], ()> {
///     count.set(count.get() + 1);
///     Step::Next(Link::from_raw(n[1]))
/// });
/// assert_eq!((end.unwrap(), count.get()), (Search::Missing, 2)); // ran off the end
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step<T, R> {
    /// Stop with this answer.
    Found(R),
    /// Go on to the object this link names (null: the path ends, the answer is missing).
    Next(Link<T>),
}

/// Where a walk left its tight loop.
enum Exit<T, R> {
    Done(Search<R>),
    /// The copy of the object this link names was stale.
    Stale(Link<T>),
}

/// The tight loop: the view, the heap's bounds and the line size are its arguments
/// (locals once inlined), so the compiler keeps them in registers across the walk's loads
/// of shared memory instead of fetching them again through the guard after each one.
#[inline(always)]
fn walk_from<V: MemView, T: Pod, R>(
    view: &V,
    objects: Objects,
    mut link: Link<T>,
    f: &impl Fn(&T) -> Step<T, R>,
) -> Result<Exit<T, R>, BiError> {
    loop {
        link = match fetch_with(view, objects, link, f)? {
            Fetch::Value(Step::Found(r)) => return Ok(Exit::Done(Search::Found(r))),
            Fetch::Value(Step::Next(next)) => next,
            Fetch::Null => return Ok(Exit::Done(Search::Missing)),
            Fetch::Stale => return Ok(Exit::Stale(link)),
        };
    }
}

impl<V: MemView> BiGuard<'_, V> {
    /// Walks from `start`: reads each object (validated, as [`fetch`](Self::fetch)),
    /// hands it to `f`, and follows the link `f` returns until `f` finds the answer
    /// ([`Search::Found`]) or the path ends at a null link ([`Search::Missing`]). A copy
    /// that is still stale after one invalidation means a link on the path is stale
    /// ([`Search::Stale`]): start again from fresh entry points ([`lazy`](Self::lazy)).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use bi_core::runtime::walk::Step;
    /// use bi_core::runtime::{Link, Search};
    ///
    /// // A chain of (value, next) pairs: 30 -> 20 -> 10.
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let mut next = Link::<[u64; 2]>::null();
    /// for v in [10u64, 20, 30] {
    ///     next = w.alloc_sealed([v, next.raw()]).unwrap();
    /// }
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// let find = |want: u64| {
    ///     g.walk(next, |n: &[u64; 2]| {
    ///         if n[0] == want { Step::Found(n[0]) } else { Step::Next(Link::from_raw(n[1])) }
    ///     })
    /// };
    /// assert_eq!(find(10).unwrap(), Search::Found(10));
    /// assert_eq!(find(15).unwrap(), Search::Missing);
    /// ```
    #[inline]
    pub fn walk<T: Pod, R>(
        &self,
        start: Link<T>,
        f: impl Fn(&T) -> Step<T, R>,
    ) -> Result<Search<R>, BiError> {
        let inner = self.inner();
        let objects = inner.objects();
        let mut link = start;
        loop {
            link = match walk_from(&inner.view, objects, link, &f)? {
                Exit::Done(found) => return Ok(found),
                // The tight loop's read was the first one: straight to the second, after
                // invalidating the object's lines.
                Exit::Stale(stale) => match self.read_again(
                    || fetch_with(&inner.view, objects, stale, &f),
                    || object_lines(stale, objects.line),
                )? {
                    Fetch::Value(Step::Found(r)) => return Ok(Search::Found(r)),
                    Fetch::Value(Step::Next(next)) => next,
                    Fetch::Null => return Ok(Search::Missing),
                    Fetch::Stale => return Ok(Search::Stale),
                },
            };
        }
    }
}
