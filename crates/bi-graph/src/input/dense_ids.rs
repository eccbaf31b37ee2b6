//! Turning arbitrary 64-bit vertex ids into dense indices, in increasing id order.
//!
//! While a file is read, endpoints are kept as raw ids, in `u32` as long as every id
//! fits (most files) and in `u64` from the first one that does not. Afterwards the
//! distinct ids are found, sorted, and each endpoint is replaced by its rank. When the
//! largest id is small compared with the number of endpoints, a direct table indexed by
//! id does this in two linear passes; otherwise a sorted copy and binary search do it.
//! Either way the temporaries are a constant number of words per edge.

use crate::error::GraphError;

/// Raw endpoint ids in file order: `[src0, dst0, src1, dst1, ...]`.
#[derive(Debug)]
pub(crate) enum Endpoints {
    /// Every id so far fits in 32 bits.
    Narrow(Vec<u32>),
    /// Some id needs 64 bits.
    Wide(Vec<u64>),
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints::Narrow(Vec::new())
    }
}

impl Endpoints {
    /// Appends one edge.
    pub(crate) fn push(&mut self, source: u64, target: u64) {
        if let Endpoints::Narrow(narrow) = self {
            match (u32::try_from(source), u32::try_from(target)) {
                (Ok(s), Ok(t)) => {
                    narrow.extend([s, t]);
                    return;
                }
                _ => {
                    let wide = std::mem::take(narrow).into_iter().map(u64::from).collect();
                    *self = Endpoints::Wide(wide);
                }
            }
        }
        if let Endpoints::Wide(wide) = self {
            wide.extend([source, target]);
        }
    }

    /// The sorted distinct ids and the edges as dense indices into them.
    pub(crate) fn densify(self) -> Result<Dense, GraphError> {
        match self {
            Endpoints::Narrow(v) => densify(v),
            Endpoints::Wide(v) => densify(v),
        }
    }
}

/// Ids made dense: the sorted distinct ids, and the edges as indices into them.
pub(crate) type Dense = (Vec<u64>, Vec<(u32, u32)>);

/// A raw id type (`u32` or `u64`).
trait RawId: Copy + Ord + Into<u64> {}
impl RawId for u32 {}
impl RawId for u64 {}

fn densify<T: RawId>(ends: Vec<T>) -> Result<Dense, GraphError> {
    let Some(max) = ends.iter().copied().max() else {
        return Ok(Dense::default());
    };
    let max: u64 = max.into();
    // A table of 4 bytes per possible id costs at most ~2 words per endpoint here.
    let table_limit = 2 * ends.len() as u64 + 1024;
    if max < table_limit {
        densify_by_table(&ends, max as usize)
    } else {
        densify_by_search(ends)
    }
}

fn too_many(count: usize) -> GraphError {
    GraphError::InvalidArgument {
        reason: format!("{count} distinct vertices do not fit 32-bit vertex indices"),
    }
}

fn densify_by_table<T: RawId>(ends: &[T], max: usize) -> Result<Dense, GraphError> {
    const ABSENT: u32 = u32::MAX;
    let mut rank = vec![ABSENT; max + 1];
    for &id in ends {
        let id: u64 = id.into();
        rank[id as usize] = 0;
    }
    let mut ids = Vec::new();
    for (id, slot) in rank.iter_mut().enumerate() {
        if *slot != ABSENT {
            *slot = u32::try_from(ids.len()).map_err(|_| too_many(ids.len()))?;
            ids.push(id as u64);
        }
    }
    let index = |id: T| rank[Into::<u64>::into(id) as usize];
    let edges = ends
        .chunks_exact(2)
        .map(|pair| (index(pair[0]), index(pair[1])))
        .collect();
    Ok((ids, edges))
}

fn densify_by_search<T: RawId>(ends: Vec<T>) -> Result<Dense, GraphError> {
    let mut sorted = ends.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if u32::try_from(sorted.len()).is_err() {
        return Err(too_many(sorted.len()));
    }
    // Every endpoint is in `sorted`, so the search always succeeds.
    let index = |id: T| sorted.binary_search(&id).unwrap_or(0) as u32;
    let edges = ends
        .chunks_exact(2)
        .map(|pair| (index(pair[0]), index(pair[1])))
        .collect();
    drop(ends);
    let ids = sorted.into_iter().map(Into::into).collect();
    Ok((ids, edges))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pairs: &[(u64, u64)]) -> (Vec<u64>, Vec<(u32, u32)>) {
        let mut ends = Endpoints::default();
        for &(s, t) in pairs {
            ends.push(s, t);
        }
        ends.densify().unwrap()
    }

    #[test]
    fn small_ids_use_the_table_and_keep_id_order() {
        let (ids, edges) = run(&[(7, 3), (3, 100), (100, 7)]);
        assert_eq!(ids, [3, 7, 100]);
        assert_eq!(edges, [(1, 0), (0, 2), (2, 1)]);
    }

    #[test]
    fn sparse_ids_use_the_search_and_keep_id_order() {
        let (ids, edges) = run(&[(5_000_000_000, 3), (3, u64::MAX), (4_000_000, 3)]);
        assert_eq!(ids, [3, 4_000_000, 5_000_000_000, u64::MAX]);
        assert_eq!(edges, [(2, 0), (0, 3), (1, 0)]);
    }

    #[test]
    fn narrow_ids_switch_to_wide_without_losing_edges() {
        let (ids, edges) = run(&[(1, 2), (2, 1 << 40), (1 << 40, 1)]);
        assert_eq!(ids, [1, 2, 1 << 40]);
        assert_eq!(edges, [(0, 1), (1, 2), (2, 0)]);
    }

    #[test]
    fn nothing_gives_an_empty_graph() {
        assert_eq!(run(&[]), (vec![], vec![]));
    }
}
