//! linerate rr's transaction header: the first 32 bytes of every request
//! and response of `linerate rr`. The server answers a request by turning
//! its header into a response header (same flow, sequence and stamp) in a
//! datagram of the size the request asks for.
//!
//! ```text
//!  0        4     5     6        8         12          16          24         32
//! +--------+-----+-----+--------+---------+-----------+-----------+----------+
//! | magic  | ver |kind | rsvd   | flow    | reply len | sequence  | stamp ns |
//! | LRRR   |  1  |0/1  | 0      | (u32)   | (u32)     | (u64)     | (u64)    |
//! +--------+-----+-----+--------+---------+-----------+-----------+----------+
//! ```
//!
//! Big-endian. `reply len` is the whole response payload in bytes (0: the
//! same size as the request); the stamp is the client's own clock and only
//! the client reads it.

use crate::error::{Layer, need};
use crate::{Error, be32};

/// "LRRR".
pub const RR_MAGIC: u32 = 0x4C52_5252;
pub const RR_VERSION: u8 = 1;
pub const RR_HEADER_LEN: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RrKind {
    Request,
    Response,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RrHeader {
    pub kind: RrKind,
    pub flow: u32,
    pub reply_len: u32,
    pub seq: u64,
    pub stamp_ns: u64,
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

impl RrHeader {
    /// Reads the header at the start of a datagram.
    pub fn parse(b: &[u8]) -> Result<Self, Error> {
        need(Layer::Rr, RR_HEADER_LEN, b.len())?;
        if be32(b, 0) != RR_MAGIC {
            return Err(Error::Unsupported {
                layer: Layer::Rr,
                what: "not a linerate rr datagram (magic)",
            });
        }
        if b[4] != RR_VERSION {
            return Err(Error::Unsupported {
                layer: Layer::Rr,
                what: "rr header version",
            });
        }
        let kind = match b[5] {
            0 => RrKind::Request,
            1 => RrKind::Response,
            _ => {
                return Err(Error::Malformed {
                    layer: Layer::Rr,
                    what: "kind is neither request nor response",
                });
            }
        };
        Ok(Self {
            kind,
            flow: be32(b, 8),
            reply_len: be32(b, 12),
            seq: be64(b, 16),
            stamp_ns: be64(b, 24),
        })
    }

    /// Writes the header into the first [`RR_HEADER_LEN`] bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), Error> {
        need(Layer::Rr, RR_HEADER_LEN, b.len())?;
        b[0..4].copy_from_slice(&RR_MAGIC.to_be_bytes());
        b[4] = RR_VERSION;
        b[5] = match self.kind {
            RrKind::Request => 0,
            RrKind::Response => 1,
        };
        b[6..8].fill(0);
        b[8..12].copy_from_slice(&self.flow.to_be_bytes());
        b[12..16].copy_from_slice(&self.reply_len.to_be_bytes());
        b[16..24].copy_from_slice(&self.seq.to_be_bytes());
        b[24..32].copy_from_slice(&self.stamp_ns.to_be_bytes());
        Ok(())
    }

    /// Rewrites a request in place as its response: only the kind byte
    /// changes, so the rest of the header goes back as it came.
    pub fn make_response(b: &mut [u8]) -> Result<Self, Error> {
        let mut h = Self::parse(b)?;
        if h.kind != RrKind::Request {
            return Err(Error::Unsupported {
                layer: Layer::Rr,
                what: "a response, not a request",
            });
        }
        b[5] = 1;
        h.kind = RrKind::Response;
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_response_in_place() {
        let h = RrHeader {
            kind: RrKind::Request,
            flow: 7,
            reply_len: 512,
            seq: u64::MAX - 3,
            stamp_ns: 123_456_789_012,
        };
        let mut b = [0u8; 40];
        h.emit(&mut b).unwrap();
        assert_eq!(&b[0..4], b"LRRR");
        assert_eq!(RrHeader::parse(&b).unwrap(), h);
        let r = RrHeader::make_response(&mut b).unwrap();
        assert_eq!(
            r,
            RrHeader {
                kind: RrKind::Response,
                ..h
            }
        );
        assert_eq!(RrHeader::parse(&b).unwrap(), r);
        // a response is not answered again
        assert!(RrHeader::make_response(&mut b).is_err());
    }

    #[test]
    fn bad_bytes_are_typed_errors() {
        let mut b = [0u8; 32];
        assert!(matches!(
            RrHeader::parse(&b[..31]),
            Err(Error::Truncated {
                need: 32,
                have: 31,
                ..
            })
        ));
        assert!(matches!(
            RrHeader::parse(&b),
            Err(Error::Unsupported { .. })
        ));
        b[0..4].copy_from_slice(b"LRRR");
        b[4] = 1;
        b[5] = 9;
        assert!(matches!(RrHeader::parse(&b), Err(Error::Malformed { .. })));
        b[4] = 2;
        assert!(matches!(
            RrHeader::parse(&b),
            Err(Error::Unsupported { .. })
        ));
    }
}
