//! Walking a linked path: the inner loop of every search.
//!
//! A tree lookup and a hash-chain lookup are the same loop: read the object a link names,
//! look at it, stop or follow one of its links. [`BiGuard::walk_via`] is that loop,
//! written once ([`BiGuard::walk`] is its form through the cache). Its hit path is a tight
//! loop over the validated read of each object: the view, the heap's bounds and the line
//! size are arguments of one function, so they stay in registers for the whole walk
//! instead of being fetched again through the guard after every load of shared memory. A
//! stale copy leaves the loop for the guard's invalidate-and-read-again path and then the
//! walk goes on; a walk from memory (a hash chain's lines after a miss) reads one object
//! at a time, each dropped from the cache first.

use crate::mem::MemView;
use crate::runtime::BiError;
use crate::runtime::lazy::{Search, Via};
use crate::runtime::object::{
    Fetch, Link, Objects, Stamp, copy_stamped, fetch_stamped, object_lines,
};
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

/// Most objects one walk reads before it reports the path corrupt: far more than any
/// structure's path (a balanced tree of 2^48 bytes is some 100 levels deep, a hash
/// chain a handful of lines), so only a cycle of links reaches it.
pub const MAX_WALK: usize = 1 << 20;

/// Where a walk left its tight loop.
enum Exit<T, R> {
    Done(Search<R>),
    /// The copy of the object this link names was stale.
    Stale(Link<T>),
}

/// The error of a walk that read [`MAX_WALK`] objects without an answer.
#[cold]
fn cycle(offset: usize) -> BiError {
    BiError::LinkCycle { offset }
}

/// The tight loop: the view, the heap's bounds and the line size are its arguments
/// (locals once inlined), so the compiler keeps them in registers across the walk's loads
/// of shared memory instead of fetching them again through the guard after each one.
#[inline(always)]
fn walk_from<V: MemView, T: Pod, R>(
    view: &V,
    objects: Objects,
    mut link: Link<T>,
    steps_left: &mut usize,
    f: &mut impl FnMut(&T, Stamp) -> Step<T, R>,
) -> Result<Exit<T, R>, BiError> {
    // Counted down in a local: the bound costs a decrement and a branch a step.
    let mut left = *steps_left;
    let exit = loop {
        if left == 0 {
            return Err(cycle(link.offset()));
        }
        left -= 1;
        if link.is_null() {
            break Exit::Done(Search::Missing);
        }
        link = match copy_stamped(view, objects, link, &mut *f)? {
            Some(Step::Found(r)) => break Exit::Done(Search::Found(r)),
            Some(Step::Next(next)) => next,
            None => break Exit::Stale(link),
        };
    };
    *steps_left = left;
    Ok(exit)
}

impl<V: MemView> BiGuard<'_, V> {
    /// Walks from `start`: reads each object (validated, as [`fetch`](Self::fetch)),
    /// hands it to `f`, and follows the link `f` returns until `f` finds the answer
    /// ([`Search::Found`]) or the path ends at a null link ([`Search::Missing`]). A copy
    /// that is still stale after one invalidation means a link on the path is stale
    /// ([`Search::Stale`]): start again from fresh entry points ([`lazy`](Self::lazy)).
    /// A path longer than [`MAX_WALK`] objects (a cycle) is an error.
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
        mut f: impl FnMut(&T) -> Step<T, R>,
    ) -> Result<Search<R>, BiError> {
        self.walk_cached(start, move |t, _| f(t))
    }

    /// [`walk`](Self::walk), reading the first object through `first` and every later
    /// one through `rest`, and handing `f` the stamp each copy validated under: objects
    /// rewritten in place (the lines of a [line array](crate::runtime::lines), a hash chain's
    /// bucket and overflow lines) are read [`Via::Fresh`] where the latest version must be
    /// seen, since an older version of such a line still validates. Through the cache
    /// ([`Via::Cached`] for both) it is [`walk`](Self::walk)'s tight loop.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use bi_core::runtime::walk::Step;
    /// use bi_core::runtime::{Link, Search, Via};
    ///
    /// // Two lines, the first linking to the second; node 1 caches both, then line 1 is
    /// // rewritten in place.
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[[1u64, 0], [2, 0]]).unwrap();
    /// let r = s.nodes[1].reader().unwrap();
    /// let g = r.enter();
    /// let second = g.line(a, 1).unwrap();
    /// w.rewrite_lines(&[(a, 0, [1, second.raw()])]).unwrap();
    /// let sum = |first, rest| {
    ///     let mut total = 0;
    ///     g.walk_via(first, rest, g.line(a, 0).unwrap(), |l: &[u64; 2], _| {
    ///         total += l[0];
    ///         Step::<[u64; 2], ()>::Next(Link::from_raw(l[1]))
    ///     })
    ///     .unwrap();
    ///     total
    /// };
    /// assert_eq!(sum(Via::Fresh, Via::Fresh), 3); // both lines, from memory
    /// w.rewrite_lines(&[(a, 1, [20, 0])]).unwrap();
    /// assert_eq!(sum(Via::Cached, Via::Cached), 3); // node 1 has not passed: its copies
    /// assert_eq!(sum(Via::Cached, Via::Fresh), 21); // line 1 read again from memory
    /// ```
    #[inline]
    pub fn walk_via<T: Pod, R>(
        &self,
        first: Via,
        rest: Via,
        start: Link<T>,
        f: impl FnMut(&T, Stamp) -> Step<T, R>,
    ) -> Result<Search<R>, BiError> {
        if (first, rest) != (Via::Cached, Via::Cached) {
            return self.walk_stepwise(first, rest, start, f);
        }
        self.walk_cached(start, f)
    }

    /// [`walk_via`](Self::walk_via) through the cache: the tight loop, left only for a
    /// stale copy's second read.
    #[inline(always)]
    fn walk_cached<T: Pod, R>(
        &self,
        start: Link<T>,
        mut f: impl FnMut(&T, Stamp) -> Step<T, R>,
    ) -> Result<Search<R>, BiError> {
        let inner = self.inner();
        let objects = inner.objects();
        let (mut link, mut steps_left) = (start, MAX_WALK);
        loop {
            link = match walk_from(&inner.view, objects, link, &mut steps_left, &mut f)? {
                Exit::Done(found) => return Ok(found),
                // The tight loop's read was the first one: straight to the second, after
                // invalidating the object's lines.
                Exit::Stale(stale) => match self.read_again(
                    || fetch_stamped(&inner.view, objects, stale, &mut f),
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

    /// [`walk_via`](Self::walk_via) where some object is read from memory: one object at
    /// a time, each read [`Via::Fresh`] dropped from this node's cache and fenced first.
    #[inline(never)]
    fn walk_stepwise<T: Pod, R>(
        &self,
        first: Via,
        rest: Via,
        mut link: Link<T>,
        mut f: impl FnMut(&T, Stamp) -> Step<T, R>,
    ) -> Result<Search<R>, BiError> {
        let inner = self.inner();
        let objects = inner.objects();
        let mut via = first;
        for _ in 0..MAX_WALK {
            if link.is_null() {
                return Ok(Search::Missing);
            }
            if via == Via::Fresh {
                let (at, len) = object_lines(link, objects.line)?;
                inner.view.invalidate(at, len)?;
                inner.view.fence();
            }
            let at = link;
            let mut read = || fetch_stamped(&inner.view, objects, at, &mut f);
            let first = read()?;
            link = match self.validated(first, read, || object_lines(at, objects.line))? {
                Fetch::Value(Step::Found(r)) => return Ok(Search::Found(r)),
                Fetch::Value(Step::Next(next)) => next,
                Fetch::Null => return Ok(Search::Missing),
                Fetch::Stale => return Ok(Search::Stale),
            };
            via = rest;
        }
        Err(cycle(link.offset()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::testing::Setup;

    type Pair = [u64; 2];

    /// Follows `(value, next)` pairs from `start`, summing the values it reads.
    fn sum<M: MemView>(g: &BiGuard<'_, M>, first: Via, rest: Via, start: Link<Pair>) -> u64 {
        let mut total = 0;
        let end = g.walk_via(first, rest, start, |l: &Pair, _| {
            total += l[0];
            Step::<Pair, ()>::Next(Link::from_raw(l[1]))
        });
        assert_eq!(end.unwrap(), Search::Missing);
        total
    }

    /// Lines rewritten in place after a node cached them: a walk through the cache reads
    /// the node's copies, a walk from memory reads each line as memory has it, and a walk
    /// that enters through the cache and goes on from memory mixes the two.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn a_walk_reads_each_object_through_the_way_it_is_told() {
        let s = Setup::new(2, 0);
        let mut w = s.writer(0);
        let a = w.alloc_lines(&[[1u64, 0], [2, 0], [4, 0]]).unwrap();
        let r = s.nodes[1].reader().unwrap();
        let g = r.enter();
        let line = |i| g.line(a, i).unwrap();
        w.rewrite_lines(&[(a, 0, [1, line(1).raw()]), (a, 1, [2, line(2).raw()])])
            .unwrap();
        assert_eq!(sum(&g, Via::Cached, Via::Cached, line(0)), 7); // now cached
        w.rewrite_lines(&[(a, 0, [10, line(1).raw()]), (a, 1, [20, line(2).raw()])])
            .unwrap();
        w.rewrite_lines(&[(a, 2, [40, 0])]).unwrap();
        assert_eq!(sum(&g, Via::Cached, Via::Cached, line(0)), 7);
        assert_eq!(sum(&g, Via::Cached, Via::Fresh, line(0)), 61);
        // The fresh walk left the later lines cached as memory had them.
        assert_eq!(sum(&g, Via::Cached, Via::Cached, line(0)), 61);
        assert_eq!(sum(&g, Via::Fresh, Via::Cached, line(0)), 70);
        w.rewrite_lines(&[(a, 0, [100, line(1).raw()]), (a, 2, [400, 0])])
            .unwrap();
        assert_eq!(sum(&g, Via::Fresh, Via::Cached, line(0)), 160);
        assert_eq!(sum(&g, Via::Fresh, Via::Fresh, line(0)), 520);
        assert_eq!(sum(&g, Via::Cached, Via::Cached, Link::null()), 0);
    }

    /// Links that form a cycle (memory corrupted) end a walk with an error after
    /// [`MAX_WALK`] objects, whichever way it reads, instead of walking forever.
    #[test]
    #[cfg_attr(miri, ignore = "a million steps of the emulator")]
    fn a_cycle_of_links_is_an_error_not_an_endless_walk() {
        let s = Setup::new(2, 0);
        let mut w = s.writer(0);
        let a = w.alloc_lines(&[[1u64, 0]]).unwrap();
        let first = a.first_line();
        w.rewrite_lines(&[(a, 0, [1, first.raw()])]).unwrap();
        let r = s.nodes[1].reader().unwrap();
        let g = r.enter();
        for (enter, rest) in [
            (Via::Cached, Via::Cached),
            (Via::Fresh, Via::Cached),
            (Via::Cached, Via::Fresh),
        ] {
            let mut seen = 0;
            let end = g.walk_via(enter, rest, first, |l: &Pair, _| {
                seen += 1;
                Step::<Pair, ()>::Next(Link::from_raw(l[1]))
            });
            assert!(
                matches!(end, Err(BiError::LinkCycle { offset }) if offset == first.offset()),
                "{enter:?} then {rest:?}: {end:?}"
            );
            assert_eq!(seen, MAX_WALK);
        }
    }
}
