//! Classifiers: from a request's payload (layer 4 and up) to its type.

use crate::request::{TypeId, UNKNOWN_TYPE};

/// Maps a request payload to a request type. Only one classifier is active at a
/// time. A payload the classifier cannot recognise is [`UNKNOWN_TYPE`]: the
/// dispatcher serves it on the spillway worker(s), at the lowest priority.
///
/// `&mut self` lets a classifier keep state (a random classifier's generator, a
/// lookup cache); it runs on the dispatcher thread only.
pub trait Classifier: Send {
    /// The type of `payload`.
    fn classify(&mut self, payload: &[u8]) -> TypeId;
}

/// Reads the type as a little-endian `u16` at a fixed header offset, the paper's
/// cheapest classifier. Values outside `0..types` are UNKNOWN.
#[derive(Debug, Clone, Copy)]
pub struct HeaderClassifier {
    /// Byte offset of the type field.
    pub offset: usize,
    /// Number of registered types.
    pub types: u16,
}

impl Classifier for HeaderClassifier {
    #[inline]
    fn classify(&mut self, payload: &[u8]) -> TypeId {
        match payload.get(self.offset..self.offset + 2) {
            Some(&[lo, hi]) => {
                let t = u16::from_le_bytes([lo, hi]);
                if t < self.types { t } else { UNKNOWN_TYPE }
            }
            _ => UNKNOWN_TYPE,
        }
    }
}

/// Ignores the payload and returns a uniformly random type: the misclassification
/// experiment (DARC should then degrade gracefully to c-FCFS behaviour). A
/// xorshift generator keeps it deterministic for a seed and allocation-free.
#[derive(Debug, Clone, Copy)]
pub struct RandomClassifier {
    types: u16,
    state: u64,
}

impl RandomClassifier {
    /// Random types in `0..types`, from `seed`.
    ///
    /// # Panics
    /// If `types` is 0.
    pub fn new(types: u16, seed: u64) -> Self {
        assert!(types > 0, "a classifier needs at least one type");
        Self {
            types,
            state: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        }
    }
}

impl Classifier for RandomClassifier {
    #[inline]
    fn classify(&mut self, _payload: &[u8]) -> TypeId {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state % u64::from(self.types)) as TypeId
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_classifier_reads_type_or_unknown() {
        let mut c = HeaderClassifier {
            offset: 2,
            types: 3,
        };
        assert_eq!(c.classify(&[9, 9, 2, 0, 7]), 2);
        assert_eq!(c.classify(&[9, 9, 3, 0]), UNKNOWN_TYPE);
        assert_eq!(c.classify(&[9, 9, 1]), UNKNOWN_TYPE);
        assert_eq!(c.classify(&[]), UNKNOWN_TYPE);
    }

    #[test]
    fn random_classifier_covers_every_type_evenly() {
        let mut c = RandomClassifier::new(4, 9);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[c.classify(b"x") as usize] += 1;
        }
        assert!(
            counts.iter().all(|&n| (9_000..11_000).contains(&n)),
            "{counts:?}"
        );
    }
}

/// Which classifier an executor builds, chosen by name on a command line or in a
/// configuration file: the executor supplies where the type field sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassifierKind {
    /// [`HeaderClassifier`].
    Header,
    /// [`RandomClassifier`] from a seed (misclassification experiment).
    Random(u64),
}

impl ClassifierKind {
    /// `header` or `random` (seeded with `seed`).
    ///
    /// # Errors
    /// Any other name.
    pub fn parse(name: &str, seed: u64) -> Result<Self, String> {
        match name {
            "header" => Ok(ClassifierKind::Header),
            "random" => Ok(ClassifierKind::Random(seed)),
            other => Err(format!(
                "--classifier must be header or random, not '{other}'"
            )),
        }
    }

    /// The name [`parse`](Self::parse) takes.
    pub fn name(self) -> &'static str {
        match self {
            ClassifierKind::Header => "header",
            ClassifierKind::Random(_) => "random",
        }
    }

    /// The classifier for `types` request types whose type field (u16 LE) sits
    /// at `offset`.
    ///
    /// # Panics
    /// A random classifier with no type.
    pub fn build(self, offset: usize, types: u16) -> Box<dyn Classifier> {
        match self {
            ClassifierKind::Header => Box::new(HeaderClassifier { offset, types }),
            ClassifierKind::Random(seed) => Box::new(RandomClassifier::new(types, seed)),
        }
    }
}
