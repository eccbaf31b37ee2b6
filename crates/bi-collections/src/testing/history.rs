//! Per-key version history and the read rules checked against it.

use super::Violation;
use crate::Op;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

/// Every value each key had, the publication from which it held, and where each node's
/// last pass started: decides whether a read on a node was legal.
///
/// Publications are numbered from 1 (0 is the empty structure at the start). The writer's
/// side calls [`publish`](Self::publish) after each publication (one operation or one
/// batch), the reader's side calls [`pass_started`](Self::pass_started) just before a
/// node's pass, and each read is checked with `check_*`.
#[derive(Clone, Debug)]
pub struct History<K, V> {
    seq: u64,
    versions: BTreeMap<K, Vec<(u64, Option<V>)>>,
    lens: Vec<(u64, usize)>,
    model: BTreeMap<K, V>,
    pass_start: Vec<u64>,
}

impl<K: Ord + Clone + Debug, V: Eq + Clone + Debug> History<K, V> {
    /// An empty structure read by `nodes` nodes, none of which has passed yet (their
    /// window starts at the empty structure).
    pub fn new(nodes: usize) -> Self {
        History {
            seq: 0,
            versions: BTreeMap::new(),
            lens: vec![(0, 0)],
            model: BTreeMap::new(),
            pass_start: vec![0; nodes],
        }
    }

    /// The current contents (after the last publication).
    pub fn model(&self) -> &BTreeMap<K, V> {
        &self.model
    }

    /// Records one publication that made `changes` visible together, applied in order
    /// (a key changed twice keeps its last value: intermediate values were never
    /// published). `None` removes the key.
    pub fn publish(&mut self, changes: impl IntoIterator<Item = (K, Option<V>)>) {
        self.seq += 1;
        let mut changed = BTreeSet::new();
        for (k, v) in changes {
            match v {
                Some(v) => self.model.insert(k.clone(), v),
                None => self.model.remove(&k),
            };
            changed.insert(k);
        }
        for k in changed {
            let now = self.model.get(&k).cloned();
            self.versions
                .entry(k)
                .or_insert_with(|| vec![(0, None)])
                .push((self.seq, now));
        }
        self.lens.push((self.seq, self.model.len()));
    }

    /// Records one publication of the operations `ops`, in order.
    pub fn publish_ops(&mut self, ops: &[Op<K, V>]) {
        self.publish(ops.iter().map(|op| match op {
            Op::Insert(k, v) => (k.clone(), Some(v.clone())),
            Op::Remove(k) => (k.clone(), None),
        }));
    }

    /// The shortest prefix of `ops` that, applied to the current contents, gives
    /// `actual`: what a batch that failed part-way published. `None` if no prefix does.
    pub(crate) fn matching_prefix(
        &self,
        ops: &[Op<K, V>],
        actual: &BTreeMap<K, V>,
    ) -> Option<usize> {
        let mut m = self.model.clone();
        for n in 0..=ops.len() {
            if &m == actual {
                return Some(n);
            }
            match ops.get(n) {
                Some(Op::Insert(k, v)) => m.insert(k.clone(), v.clone()),
                Some(Op::Remove(k)) => m.remove(k),
                None => None,
            };
        }
        None
    }

    /// Node `node`'s pass starts now: from here on its reads may be no older than the
    /// latest publication.
    pub fn pass_started(&mut self, node: usize) {
        if let Some(p) = self.pass_start.get_mut(node) {
            *p = self.seq;
        }
    }

    /// Every node passes now (then every read is exact).
    pub fn all_passed(&mut self) {
        let seq = self.seq;
        self.pass_start.iter_mut().for_each(|p| *p = seq);
    }

    fn since(&self, node: usize) -> Result<u64, Violation> {
        self.pass_start
            .get(node)
            .copied()
            .ok_or_else(|| Violation::new(format!("node {node} is not one of the readers")))
    }

    /// The values `key` had at some publication since the start of `node`'s last pass
    /// (`None`: absent), oldest first.
    pub(crate) fn allowed(&self, node: usize, key: &K) -> Result<Vec<Option<V>>, Violation> {
        let since = self.since(node)?;
        Ok(match self.versions.get(key) {
            None => vec![None],
            Some(v) => {
                let start = v.iter().rposition(|(s, _)| *s <= since).unwrap_or(0);
                v[start..].iter().map(|(_, x)| x.clone()).collect()
            }
        })
    }

    /// A lookup of `key` on `node` returned `got`: it must be a value current at some
    /// instant since the node's last pass, and a miss is legal only for a key absent now
    /// (a miss re-reads from memory).
    pub fn check_get(&self, node: usize, key: &K, got: Option<V>) -> Result<(), Violation> {
        let ok = self.allowed(node, key)?;
        if !ok.contains(&got) {
            return Err(Violation::new(format!(
                "node {node} read key {key:?} as {got:?}; allowed since its last pass: {ok:?}"
            )));
        }
        if got.is_none() && self.model.contains_key(key) {
            return Err(Violation::new(format!(
                "node {node} missed key {key:?}, present now as {:?}",
                self.model.get(key)
            )));
        }
        Ok(())
    }

    /// A bounded-stale lookup (`MapRef::get`) of `key` on `node` returned `got`: a value,
    /// or an absence, current at some instant since the node's last pass (a key first
    /// inserted after that pass may still read as absent).
    pub fn check_get_bounded(&self, node: usize, key: &K, got: Option<V>) -> Result<(), Violation> {
        let since = self.since(node)?;
        let mut ok = self.allowed(node, key)?;
        let first = self.versions.get(key).and_then(|v| v.first());
        if first.is_some_and(|(s, _)| *s > since) {
            ok.insert(0, None);
        }
        if ok.contains(&got) {
            Ok(())
        } else {
            Err(Violation::new(format!(
                "node {node} read key {key:?} as {got:?}; allowed since its last pass: {ok:?}"
            )))
        }
    }

    /// `len` on `node` returned `got`: it must be the length at some publication since
    /// the node's last pass.
    pub fn check_len(&self, node: usize, got: usize) -> Result<(), Violation> {
        let since = self.since(node)?;
        let start = self
            .lens
            .iter()
            .rposition(|(s, _)| *s <= since)
            .unwrap_or(0);
        let ok: Vec<usize> = self.lens[start..].iter().map(|(_, n)| *n).collect();
        if ok.contains(&got) {
            Ok(())
        } else {
            Err(Violation::new(format!(
                "node {node} read len {got}; allowed since its last pass: {ok:?}"
            )))
        }
    }

    /// A scan (iteration or range) on `node` over the keys for which `in_range` holds
    /// returned `entries`: no key twice, no key outside the range, every value allowed
    /// for its key, and every key of the range that is missing allowed to be absent.
    /// The order is not checked (a hash map has none; check it at the call site).
    pub fn check_scan(
        &self,
        node: usize,
        entries: &[(K, V)],
        in_range: impl Fn(&K) -> bool,
    ) -> Result<(), Violation> {
        let mut seen = BTreeSet::new();
        for (k, v) in entries {
            if !seen.insert(k) {
                return Err(Violation::new(format!(
                    "node {node}: a scan returned key {k:?} twice"
                )));
            }
            if !in_range(k) {
                return Err(Violation::new(format!(
                    "node {node}: a scan returned key {k:?}, outside its range"
                )));
            }
            let ok = self.allowed(node, k)?;
            if !ok.contains(&Some(v.clone())) {
                return Err(Violation::new(format!(
                    "node {node}: a scan returned {k:?} => {v:?}; allowed since its last \
                     pass: {ok:?}"
                )));
            }
        }
        for k in self.versions.keys().filter(|k| in_range(k)) {
            if !seen.contains(k) && !self.allowed(node, k)?.contains(&None) {
                return Err(Violation::new(format!(
                    "node {node}: a scan left out key {k:?}, present throughout since its \
                     last pass"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_starts_at_the_last_pass() {
        let mut h = History::<u32, u32>::new(2);
        h.publish([(1, Some(10))]);
        h.publish([(1, Some(11))]);
        assert!(h.check_get(1, &1, Some(10)).is_ok());
        assert!(h.check_get(1, &1, None).is_err(), "present now: no miss");
        h.pass_started(1);
        assert!(h.check_get(1, &1, Some(10)).is_err());
        assert!(h.check_get(1, &1, Some(11)).is_ok());
        assert!(
            h.check_get(0, &1, Some(10)).is_ok(),
            "node 0 has not passed"
        );
        assert!(h.check_get(2, &1, Some(11)).is_err(), "no such node");
        h.publish([(1, None)]);
        assert!(h.check_get(1, &1, None).is_ok());
        assert!(h.check_get(1, &1, Some(11)).is_ok());
        h.all_passed();
        assert!(h.check_get(1, &1, Some(11)).is_err());
    }

    #[test]
    fn a_batch_publishes_only_its_final_values() {
        let mut h = History::<u32, u32>::new(1);
        h.publish_ops(&[Op::Insert(1, 1), Op::Insert(1, 2), Op::Insert(2, 5)]);
        assert!(h.check_get(0, &1, Some(1)).is_err());
        assert!(h.check_get(0, &1, Some(2)).is_ok());
        assert!(h.check_len(0, 2).is_ok());
        assert!(
            h.check_len(0, 0).is_ok(),
            "the empty start is in the window"
        );
        assert!(h.check_len(0, 1).is_err());
    }

    #[test]
    fn scans_must_cover_every_key_present_throughout() {
        let mut h = History::<u32, u32>::new(1);
        h.publish([(1, Some(1)), (2, Some(2))]);
        h.all_passed();
        h.publish([(3, Some(3))]);
        assert!(h.check_scan(0, &[(1, 1), (2, 2)], |_| true).is_ok());
        assert!(h.check_scan(0, &[(1, 1), (2, 2), (3, 3)], |_| true).is_ok());
        assert!(h.check_scan(0, &[(1, 1)], |_| true).is_err());
        assert!(h.check_scan(0, &[(1, 1)], |k| *k < 2).is_ok());
        assert!(h.check_scan(0, &[(1, 1), (2, 2)], |k| *k < 2).is_err());
        assert!(
            h.check_scan(0, &[(1, 1), (1, 1), (2, 2)], |_| true)
                .is_err()
        );
    }

    #[test]
    fn a_failed_batch_is_matched_to_the_prefix_it_published() {
        let mut h = History::<u32, u32>::new(1);
        h.publish([(1, Some(1))]);
        let ops = [Op::Insert(2, 2), Op::Remove(1), Op::Insert(3, 3)];
        let after_two = BTreeMap::from([(2, 2)]);
        assert_eq!(h.matching_prefix(&ops, &after_two), Some(2));
        assert_eq!(h.matching_prefix(&ops, h.model()), Some(0));
        assert_eq!(h.matching_prefix(&ops, &BTreeMap::from([(9, 9)])), None);
    }
}
