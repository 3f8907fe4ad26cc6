//! Frame-size mixes: the common "simple IMIX" (7:4:1 of 64/594/1518) and
//! custom lists of `size:weight`.

use crate::{FRAME_MAX_BYTES, FRAME_MIN_BYTES};
use thiserror::Error;

/// One frame size and how many of every cycle's frames have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ImixEntry {
    pub frame_bytes: u64,
    pub weight: u64,
}

/// A weighted list of frame sizes (FCS included). A single frame size is a
/// mix of one entry, so every rate computation goes through here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imix {
    entries: Vec<ImixEntry>,
}

/// A mix that cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ImixError {
    #[error("empty IMIX: give at least one size:weight pair")]
    Empty,
    #[error("'{0}' is not size:weight (e.g. 64:7)")]
    Syntax(String),
    #[error("frame size {0} in the IMIX is outside {FRAME_MIN_BYTES}..={FRAME_MAX_BYTES} bytes")]
    Size(u64),
    #[error("weight 0 for frame size {0}: leave the size out instead")]
    ZeroWeight(u64),
}

impl Imix {
    /// The "simple IMIX": 7 × 64 B, 4 × 594 B, 1 × 1518 B.
    pub fn simple() -> Self {
        Self {
            entries: vec![
                ImixEntry {
                    frame_bytes: 64,
                    weight: 7,
                },
                ImixEntry {
                    frame_bytes: 594,
                    weight: 4,
                },
                ImixEntry {
                    frame_bytes: 1518,
                    weight: 1,
                },
            ],
        }
    }

    /// A mix of one frame size. The caller has validated the size.
    pub fn single(frame_bytes: u64) -> Self {
        Self {
            entries: vec![ImixEntry {
                frame_bytes,
                weight: 1,
            }],
        }
    }

    pub fn new(entries: Vec<ImixEntry>) -> Result<Self, ImixError> {
        if entries.is_empty() {
            return Err(ImixError::Empty);
        }
        for e in &entries {
            if !(FRAME_MIN_BYTES..=FRAME_MAX_BYTES).contains(&e.frame_bytes) {
                return Err(ImixError::Size(e.frame_bytes));
            }
            if e.weight == 0 {
                return Err(ImixError::ZeroWeight(e.frame_bytes));
            }
        }
        Ok(Self { entries })
    }

    /// Parses `simple`, or `64:7,594:4,1518:1` (a bare size means weight 1).
    pub fn parse(spec: &str) -> Result<Self, ImixError> {
        let spec = spec.trim();
        if spec.eq_ignore_ascii_case("simple") || spec.eq_ignore_ascii_case("default") {
            return Ok(Self::simple());
        }
        let mut entries = Vec::new();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (size, weight) = match item.split_once(':') {
                Some((s, w)) => (s.trim(), w.trim()),
                None => (item, "1"),
            };
            let frame_bytes = size
                .parse()
                .map_err(|_| ImixError::Syntax(item.to_string()))?;
            let weight = weight
                .parse()
                .map_err(|_| ImixError::Syntax(item.to_string()))?;
            entries.push(ImixEntry {
                frame_bytes,
                weight,
            });
        }
        Self::new(entries)
    }

    pub fn entries(&self) -> &[ImixEntry] {
        &self.entries
    }

    pub fn total_weight(&self) -> u64 {
        self.entries.iter().map(|e| e.weight).sum()
    }

    /// Sum of weight × (frame bytes + `per_frame_extra`), the bytes of one cycle.
    pub(crate) fn cycle_bytes(&self, per_frame_extra: u64) -> u128 {
        self.entries
            .iter()
            .map(|e| u128::from(e.weight) * u128::from(e.frame_bytes + per_frame_extra))
            .sum()
    }

    /// Average frame size in bytes (L2, FCS included).
    pub fn average_frame_bytes(&self) -> f64 {
        self.cycle_bytes(0) as f64 / self.total_weight() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_average() {
        let m = Imix::simple();
        assert_eq!(m.total_weight(), 12);
        assert!((m.average_frame_bytes() - 4342.0 / 12.0).abs() < 1e-9);
        assert_eq!(Imix::parse("simple").unwrap(), m);
        assert_eq!(Imix::parse("64:7, 594:4 ,1518:1").unwrap(), m);
    }

    #[test]
    fn custom_lists() {
        let m = Imix::parse("64,1518").unwrap();
        assert_eq!(m.average_frame_bytes(), 791.0);
        assert_eq!(Imix::parse(""), Err(ImixError::Empty));
        assert_eq!(Imix::parse("64:x"), Err(ImixError::Syntax("64:x".into())));
        assert_eq!(Imix::parse("big:1"), Err(ImixError::Syntax("big:1".into())));
        assert_eq!(Imix::parse("40:1"), Err(ImixError::Size(40)));
        assert_eq!(Imix::parse("10000:1"), Err(ImixError::Size(10000)));
        assert_eq!(Imix::parse("64:0"), Err(ImixError::ZeroWeight(64)));
    }
}
