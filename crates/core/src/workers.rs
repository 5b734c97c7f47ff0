//! Worker identifiers and fixed-size worker sets (bitmasks).

/// Index of an application worker, `0..workers`.
pub type WorkerId = u16;

/// Largest number of workers a [`WorkerSet`] holds.
pub const MAX_WORKERS: usize = 128;

/// A set of workers as a bitmask: free workers, a group's reserved or stealable
/// workers. Lowest index first, found with `trailing_zeros`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct WorkerSet(u128);

impl WorkerSet {
    /// The empty set.
    pub const EMPTY: WorkerSet = WorkerSet(0);

    /// Workers `start..end`.
    ///
    /// # Panics
    /// If `end > MAX_WORKERS` or `start > end`.
    pub fn range(start: usize, end: usize) -> Self {
        assert!(
            start <= end && end <= MAX_WORKERS,
            "worker range {start}..{end}"
        );
        let width = end - start;
        if width == 0 {
            return Self::EMPTY;
        }
        let ones = if width == 128 {
            u128::MAX
        } else {
            (1u128 << width) - 1
        };
        WorkerSet(ones << start)
    }

    /// Adds worker `w`.
    #[inline]
    pub fn insert(&mut self, w: WorkerId) {
        debug_assert!((w as usize) < MAX_WORKERS);
        self.0 |= 1u128 << w;
    }

    /// Removes worker `w`.
    #[inline]
    pub fn remove(&mut self, w: WorkerId) {
        self.0 &= !(1u128 << w);
    }

    /// Whether `w` is in the set.
    #[inline]
    pub fn contains(self, w: WorkerId) -> bool {
        (w as usize) < MAX_WORKERS && self.0 & (1u128 << w) != 0
    }

    /// The lowest-indexed worker of the set.
    #[inline]
    pub fn first(self) -> Option<WorkerId> {
        (self.0 != 0).then(|| self.0.trailing_zeros() as WorkerId)
    }

    /// Intersection.
    #[inline]
    pub fn and(self, other: WorkerSet) -> WorkerSet {
        WorkerSet(self.0 & other.0)
    }

    /// Union.
    #[inline]
    pub fn or(self, other: WorkerSet) -> WorkerSet {
        WorkerSet(self.0 | other.0)
    }

    /// Set difference.
    #[inline]
    pub fn without(self, other: WorkerSet) -> WorkerSet {
        WorkerSet(self.0 & !other.0)
    }

    /// Whether the set is empty.
    #[inline]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Number of workers in the set.
    #[inline]
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The workers, lowest first.
    pub fn iter(self) -> impl Iterator<Item = WorkerId> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let w = bits.trailing_zeros();
            bits &= bits - 1;
            Some(w as WorkerId)
        })
    }
}

impl std::fmt::Display for WorkerSet {
    /// Compact ranges, e.g. `0-2,5`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ws: Vec<WorkerId> = self.iter().collect();
        if ws.is_empty() {
            return f.write_str("-");
        }
        let mut i = 0;
        let mut first = true;
        while i < ws.len() {
            let mut j = i;
            while j + 1 < ws.len() && ws[j + 1] == ws[j] + 1 {
                j += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if i == j {
                write!(f, "{}", ws[i])?;
            } else {
                write!(f, "{}-{}", ws[i], ws[j])?;
            }
            i = j + 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_and_iteration() {
        let s = WorkerSet::range(2, 5);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![2, 3, 4]);
        assert_eq!(s.first(), Some(2));
        assert_eq!(s.len(), 3);
        assert_eq!(WorkerSet::range(0, 128).len(), 128);
        assert!(WorkerSet::range(3, 3).is_empty());
        let mut t = s;
        t.remove(3);
        t.insert(9);
        assert_eq!(t.to_string(), "2,4,9");
        assert_eq!(
            WorkerSet::range(0, 3)
                .or(WorkerSet::range(5, 7))
                .to_string(),
            "0-2,5-6"
        );
        assert!(!t.contains(200));
    }
}
