//! linerate's probe header: the first bytes of the payload of every packet
//! linerate generates, so that the receiver can count loss, reordering,
//! duplicates and one-way latency per flow.
//!
//! It is 18 bytes so that it fits the smallest IPv4/UDP frame (64 bytes on
//! the wire: 14 Ethernet + 20 IPv4 + 8 UDP + 18 payload + 4 FCS):
//!
//! ```text
//!  0        1        2       4                      12                 18
//! +--------+--------+-------+----------------------+------------------+
//! | magic  |version | flow  | sequence (u64)       | tx time, ns (48) |
//! | 0xA9   |  1     | (u16) |                      | low 48 bits      |
//! +--------+--------+-------+----------------------+------------------+
//! ```
//!
//! All multi-byte fields are big-endian and start at even offsets, so the
//! sender can patch sequence and timestamp and update the UDP checksum
//! incrementally (RFC 1624) over bytes 4..18.
//!
//! The timestamp keeps the low 48 bits of a nanosecond clock (it wraps every
//! 78 hours); [`unwrap_tx_ns`] rebuilds the full value from the receiver's
//! clock reading. That is only meaningful when sender and receiver read the
//! same clock (one host), which is the only case in which one-way latency
//! means anything anyway.

use crate::checksum;
use crate::error::{Layer, need};
use crate::{Error, be16};

pub const PROBE_MAGIC: u8 = 0xA9;
pub const PROBE_VERSION: u8 = 1;
pub const PROBE_LEN: usize = 18;
/// A probe whose sequence has this bit set is a flow's end marker: the
/// other 63 bits are how many frames the sender sent on the flow (it is
/// sent a few times after the flow's last frame, and counted apart).
pub const END_MARKER: u64 = 1 << 63;

const TS_BITS: u32 = 48;
const TS_MASK: u64 = (1 << TS_BITS) - 1;

mod field {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 1;
    pub const FLOW: usize = 2;
    pub const SEQ: core::ops::Range<usize> = 4..12;
    pub const TX_NS: core::ops::Range<usize> = 12..18;
    /// The bytes that change per packet, 16-bit aligned.
    pub const PER_PACKET: core::ops::Range<usize> = 4..18;
}

/// A view of a probe header at the start of a payload.
#[derive(Debug, Clone)]
pub struct ProbeView<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ProbeView<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Checks length, magic and version.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        need(Layer::Probe, PROBE_LEN, b.len())?;
        if b[field::MAGIC] != PROBE_MAGIC {
            return Err(Error::Unsupported {
                layer: Layer::Probe,
                what: "no linerate probe magic",
            });
        }
        if b[field::VERSION] != PROBE_VERSION {
            return Err(Error::Unsupported {
                layer: Layer::Probe,
                what: "unknown probe version",
            });
        }
        Ok(Self { buffer })
    }

    pub fn flow_id(&self) -> u16 {
        be16(self.buffer.as_ref(), field::FLOW)
    }

    pub fn seq(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buffer.as_ref()[field::SEQ]);
        u64::from_be_bytes(b)
    }

    /// Low 48 bits of the sender's nanosecond clock.
    pub fn tx_ns48(&self) -> u64 {
        let mut b = [0u8; 8];
        b[2..].copy_from_slice(&self.buffer.as_ref()[field::TX_NS]);
        u64::from_be_bytes(b)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ProbeView<T> {
    /// Writes sequence and timestamp and returns the checksum sums of the
    /// per-packet bytes before and after, for [`checksum::update`].
    pub fn patch(&mut self, seq: u64, tx_ns: u64) -> (u32, u32) {
        let b = self.buffer.as_mut();
        let old = checksum::sum(&b[field::PER_PACKET], 0);
        b[field::SEQ].copy_from_slice(&seq.to_be_bytes());
        b[field::TX_NS].copy_from_slice(&(tx_ns & TS_MASK).to_be_bytes()[2..]);
        (old, checksum::sum(&b[field::PER_PACKET], 0))
    }
}

/// A probe header's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Probe {
    pub flow_id: u16,
    pub seq: u64,
    /// Sender's clock in ns; only the low 48 bits travel.
    pub tx_ns: u64,
}

impl Probe {
    pub fn parse<T: AsRef<[u8]>>(v: &ProbeView<T>) -> Self {
        Self {
            flow_id: v.flow_id(),
            seq: v.seq(),
            tx_ns: v.tx_ns48(),
        }
    }

    /// Writes the probe into the first [`PROBE_LEN`] bytes of `buf`.
    /// Returns `None` when `buf` is too short.
    pub fn emit(&self, buf: &mut [u8]) -> Option<()> {
        let b = buf.get_mut(..PROBE_LEN)?;
        b[field::MAGIC] = PROBE_MAGIC;
        b[field::VERSION] = PROBE_VERSION;
        b[field::FLOW..field::FLOW + 2].copy_from_slice(&self.flow_id.to_be_bytes());
        b[field::SEQ].copy_from_slice(&self.seq.to_be_bytes());
        b[field::TX_NS].copy_from_slice(&(self.tx_ns & TS_MASK).to_be_bytes()[2..]);
        Some(())
    }
}

/// Rebuilds a full nanosecond timestamp from its low 48 bits, choosing the
/// value nearest to `rx_ns` (the receiver's reading of the same clock).
pub fn unwrap_tx_ns(tx_ns48: u64, rx_ns: u64) -> u64 {
    let half = 1u64 << (TS_BITS - 1);
    let candidate = (rx_ns & !TS_MASK) | (tx_ns48 & TS_MASK);
    if candidate > rx_ns.saturating_add(half) && candidate >= (1 << TS_BITS) {
        candidate - (1 << TS_BITS)
    } else if candidate.saturating_add(half) < rx_ns {
        candidate.saturating_add(1 << TS_BITS)
    } else {
        candidate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let p = Probe {
            flow_id: 0xbeef,
            seq: 0x0102_0304_0506_0708,
            tx_ns: 0x0000_1234_5678_9abc,
        };
        let mut buf = [0u8; 20];
        p.emit(&mut buf).unwrap();
        assert_eq!(&buf[..4], &[0xa9, 1, 0xbe, 0xef]);
        assert_eq!(Probe::parse(&ProbeView::new_checked(&buf[..]).unwrap()), p);
        assert!(p.emit(&mut [0u8; 17]).is_none());
    }

    #[test]
    fn rejects_other_payloads() {
        let mut buf = [0u8; 18];
        assert!(ProbeView::new_checked(&buf[..]).is_err());
        buf[0] = PROBE_MAGIC;
        buf[1] = 2;
        assert!(ProbeView::new_checked(&buf[..]).is_err());
        buf[1] = PROBE_VERSION;
        assert!(ProbeView::new_checked(&buf[..17]).is_err());
        assert!(ProbeView::new_checked(&buf[..]).is_ok());
    }

    #[test]
    fn timestamp_keeps_48_bits_and_unwraps() {
        let tx = 0xabcd_0000_0000_1000u64;
        let mut buf = [0u8; 18];
        Probe {
            flow_id: 1,
            seq: 1,
            tx_ns: tx,
        }
        .emit(&mut buf)
        .unwrap();
        let v = ProbeView::new_checked(&buf[..]).unwrap();
        assert_eq!(v.tx_ns48(), tx & TS_MASK);
        assert_eq!(unwrap_tx_ns(v.tx_ns48(), tx + 5_000), tx);
        // Received just after the 48-bit counter wrapped.
        let tx2 = 0x0001_ffff_ffff_ff00u64;
        let rx2 = 0x0002_0000_0000_0100u64;
        assert_eq!(unwrap_tx_ns(tx2 & TS_MASK, rx2), tx2);
        // Sender's clock slightly ahead of the receiver's.
        assert_eq!(unwrap_tx_ns((rx2 + 50) & TS_MASK, rx2), rx2 + 50);
        assert_eq!(unwrap_tx_ns(5, 3), 5);
    }

    #[test]
    fn patch_reports_sums_for_incremental_checksum() {
        let mut payload = [0u8; 26];
        Probe {
            flow_id: 7,
            seq: 0,
            tx_ns: 0,
        }
        .emit(&mut payload)
        .unwrap();
        payload[18..].copy_from_slice(b"abcdefgh");
        let mut csum = checksum::checksum(&payload);
        for seq in 1..50u64 {
            let (old, new) = ProbeView::new_unchecked(&mut payload[..]).patch(seq, seq * 977);
            csum = checksum::update(csum, old, new);
            assert_eq!(
                checksum::fold(checksum::sum(&payload, u32::from(csum))),
                0xffff
            );
        }
    }
}
