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
}
