//! A small ordered map (and set) kept as a sorted vector. A flavor assignment builds a few of these per pod set for every
//! head of every cycle, with a handful of keys each: a vector costs one allocation where a BTreeMap costs a node
//! per few keys and a walk to drop them, and iterates in the same key order.

/// Map from `K` to `V`, iterated in key order like a BTreeMap.
/// Hashes as a BTreeMap of the same entries does (length, then each key and value).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct VecMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        VecMap(Vec::new())
    }
}

impl<K: Ord + Copy, V> VecMap<K, V> {
    fn find(&self, k: &K) -> Result<usize, usize> {
        self.0.binary_search_by(|(x, _)| x.cmp(k))
    }

    /// The value of `k`.
    pub(crate) fn get(&self, k: &K) -> Option<&V> {
        self.find(k).ok().map(|i| &self.0[i].1)
    }

    /// Whether `k` has a value.
    pub(crate) fn contains_key(&self, k: &K) -> bool {
        self.find(k).is_ok()
    }

    /// Sets `k` to `v`, returning the value it replaced.
    pub(crate) fn insert(&mut self, k: K, v: V) -> Option<V> {
        match self.find(&k) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, v)),
            Err(i) => {
                self.0.insert(i, (k, v));
                None
            }
        }
    }

    /// The value of `k`, inserted as the default first if missing.
    pub(crate) fn entry_or_default(&mut self, k: K) -> &mut V
    where
        V: Default,
    {
        let i = match self.find(&k) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, (k, V::default()));
                i
            }
        };
        &mut self.0[i].1
    }

    /// Entries in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// Values in key order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }

    /// Values in key order, mutable.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.0.iter_mut().map(|(_, v)| v)
    }

    /// Whether there are no keys.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Removes every key.
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

impl<K: Ord + Copy, V> Extend<(K, V)> for VecMap<K, V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl<K: Ord + Copy, V> FromIterator<(K, V)> for VecMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut v: Vec<(K, V)> = iter.into_iter().collect();
        // A stable sort keeps equal keys in order; the last of each wins, as with inserts.
        v.sort_by_key(|e| e.0);
        let mut out: Vec<(K, V)> = Vec::with_capacity(v.len());
        for e in v {
            match out.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => out.push(e),
            }
        }
        VecMap(out)
    }
}

impl<'a, K: Ord + Copy, V> IntoIterator for &'a VecMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl<K: Ord + Copy, V> IntoIterator for VecMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// A set of ids kept as a sorted vector, iterated in ascending order like a BTreeSet: a ClusterQueue's admitted
/// workloads are walked by every preemption search in its cohort, and a vector walks far cheaper than a tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct IdSet(Vec<u32>);

impl IdSet {
    /// Adds `id`; false when it was there already.
    pub(crate) fn insert(&mut self, id: u32) -> bool {
        match self.0.binary_search(&id) {
            Ok(_) => false,
            Err(i) => {
                self.0.insert(i, id);
                true
            }
        }
    }

    /// Removes `id`; false when it was not there.
    pub(crate) fn remove(&mut self, id: &u32) -> bool {
        match self.0.binary_search(id) {
            Ok(i) => {
                self.0.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    /// The ids in ascending order.
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, u32> {
        self.0.iter()
    }

    /// Number of ids.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a> IntoIterator for &'a IdSet {
    type Item = &'a u32;
    type IntoIter = std::slice::Iter<'a, u32>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::{IdSet, VecMap};
    use std::collections::BTreeSet;

    #[test]
    fn id_set_behaves_like_a_btreeset() {
        let mut v = IdSet::default();
        let mut b = BTreeSet::new();
        for (id, add) in [
            (5u32, true),
            (1, true),
            (5, true),
            (9, true),
            (1, false),
            (7, false),
            (0, true),
            (9, false),
        ] {
            if add {
                assert_eq!(v.insert(id), b.insert(id));
            } else {
                assert_eq!(v.remove(&id), b.remove(&id));
            }
            assert_eq!(v.iter().collect::<Vec<_>>(), b.iter().collect::<Vec<_>>());
            assert_eq!((v.len(), v.is_empty()), (b.len(), b.is_empty()));
        }
        assert_eq!(v.iter().copied().collect::<Vec<_>>(), vec![0, 5]);
    }
    use std::collections::BTreeMap;

    #[test]
    fn behaves_like_a_btreemap() {
        let ops = [(5u32, 1), (1, 2), (9, 3), (5, 4), (0, 5), (9, 6), (3, 7)];
        let mut v = VecMap::default();
        let mut b = BTreeMap::new();
        for (k, x) in ops {
            assert_eq!(v.insert(k, x), b.insert(k, x));
            assert_eq!(v.iter().collect::<Vec<_>>(), b.iter().collect::<Vec<_>>());
        }
        assert_eq!(v.get(&5), Some(&4));
        assert_eq!(v.get(&4), None);
        assert!(v.contains_key(&0) && !v.contains_key(&2));
        *v.entry_or_default(2) += 10;
        *v.entry_or_default(1) += 10;
        *b.entry(2).or_default() += 10;
        *b.entry(1).or_default() += 10;
        assert_eq!(
            v.into_iter().collect::<Vec<_>>(),
            b.into_iter().collect::<Vec<_>>()
        );
    }
}
