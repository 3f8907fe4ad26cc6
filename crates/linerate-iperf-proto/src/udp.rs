//! iperf3's UDP datagram header and the receiver's accounting.

/// Bytes of header in each datagram: sec, usec, 32- or 64-bit sequence.
pub fn header_len(counters_64bit: bool) -> usize {
    if counters_64bit { 16 } else { 12 }
}

/// Writes the header into the start of `buf` (at least 12/16 bytes).
pub fn write_header(buf: &mut [u8], sec: u32, usec: u32, seq: u64, counters_64bit: bool) {
    buf[0..4].copy_from_slice(&sec.to_be_bytes());
    buf[4..8].copy_from_slice(&usec.to_be_bytes());
    if counters_64bit {
        buf[8..16].copy_from_slice(&seq.to_be_bytes());
    } else {
        buf[8..12].copy_from_slice(&(seq as u32).to_be_bytes());
    }
}

/// Reads `(sec, usec, seq)`; `None` if the datagram is shorter than the header.
#[inline]
pub fn read_header(buf: &[u8], counters_64bit: bool) -> Option<(u32, u32, u64)> {
    let h = buf.get(..header_len(counters_64bit))?;
    let sec = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
    let usec = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    let seq = if counters_64bit {
        u64::from_be_bytes([h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]])
    } else {
        u64::from(u32::from_be_bytes([h[8], h[9], h[10], h[11]]))
    };
    Some((sec, usec, seq))
}

use linerate_wire::SeqTracker;

/// A receiver's per-stream accounting.
///
/// `packet_count`, `cnt_error`, `out_of_order` and `jitter_s` follow iperf3
/// exactly (so numbers compare with iperf3's): a late datagram counts as
/// out-of-order and reduces the loss count, a duplicate as well. linerate
/// also keeps exact figures beside them (from [`SeqTracker`]): duplicates (a
/// sequence number seen twice within the last 4096) and late (first
/// arrivals below the highest), and the gaps never filled.
/// A jitter in seconds as the documents write it, in milliseconds to the
/// nanosecond: the timestamps are of µs or ns, so what lies below is the
/// running average's float residue (after a step, a run of equal transit
/// times decays it towards 0 without ever reaching it: 3.86e-18 ms).
pub fn jitter_ms(jitter_s: f64) -> f64 {
    (jitter_s * 1e9).round() / 1e6
}

#[derive(Debug, Clone, Default)]
pub struct UdpReceiver {
    pub packet_count: u64,
    pub cnt_error: u64,
    pub out_of_order: u64,
    pub jitter_s: f64,
    pub bytes: u64,
    pub datagrams: u64,
    pub duplicates: u64,
    pub late: u64,
    prev_transit_s: Option<f64>,
    exact: SeqTracker,
}

impl UdpReceiver {
    /// Accounts one datagram of `len` bytes with sequence `seq`, sent at
    /// `sent_s` and received at `arrival_s` (seconds, any common epoch per side).
    #[inline]
    pub fn on_datagram(&mut self, seq: u64, len: usize, sent_s: f64, arrival_s: f64) {
        let expected = self.packet_count + 1;
        if seq >= expected {
            if seq > expected {
                self.cnt_error += seq - expected;
            }
            self.packet_count = seq;
        } else {
            self.out_of_order += 1;
            self.cnt_error = self.cnt_error.saturating_sub(1);
        }
        self.exact.on_seq(seq);
        self.duplicates = self.exact.duplicates;
        self.late = self.exact.late;
        let transit = (arrival_s - sent_s).abs();
        match self.prev_transit_s {
            None => self.prev_transit_s = Some(transit),
            Some(prev) => {
                let d = (transit - prev).abs();
                self.prev_transit_s = Some(transit);
                self.jitter_s += (d - self.jitter_s) / 16.0;
            }
        }
        self.bytes += len as u64;
        self.datagrams += 1;
    }

    /// End of the omit period: jitter restarts and the next datagram
    /// initialises the transit time again (as iperf3 does).
    pub fn reset_after_omit(&mut self) {
        self.jitter_s = 0.0;
        self.prev_transit_s = None;
    }

    /// Lost datagrams by linerate's exact count: gaps never filled.
    pub fn lost_exact(&self) -> u64 {
        self.exact.lost()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let mut b = [0u8; 20];
        write_header(&mut b, 0x1a1, 0xe6881, 1, false);
        assert_eq!(&b[..12], &[0, 0, 1, 0xa1, 0, 0x0e, 0x68, 0x81, 0, 0, 0, 1]);
        assert_eq!(read_header(&b, false), Some((0x1a1, 0xe6881, 1)));
        write_header(&mut b, 1, 2, 0x1_0000_0001, true);
        assert_eq!(read_header(&b, true), Some((1, 2, 0x1_0000_0001)));
        assert_eq!(read_header(&b[..11], false), None);
        assert_eq!(read_header(&b[..15], true), None);
    }

    #[test]
    fn in_order_has_no_loss() {
        let mut r = UdpReceiver::default();
        for s in 1..=100 {
            r.on_datagram(s, 100, s as f64 * 0.001, s as f64 * 0.001 + 0.0005);
        }
        assert_eq!(
            (r.packet_count, r.cnt_error, r.out_of_order, r.lost_exact()),
            (100, 0, 0, 0)
        );
        assert!(r.jitter_s.abs() < 1e-12);
    }

    #[test]
    fn loss_reorder_and_duplicates_as_iperf3_and_exactly() {
        let mut r = UdpReceiver::default();
        for s in [1, 2, 4, 5, 3, 3, 8] {
            r.on_datagram(s, 10, 0.0, 0.0);
        }
        // iperf3: gap at 3 (+1), late 3 (-1), dup 3 (-0, already 0), gap 6,7 (+2).
        assert_eq!((r.packet_count, r.cnt_error, r.out_of_order), (8, 2, 2));
        // Exact: 6 and 7 lost, 3 late once, duplicated once.
        assert_eq!((r.lost_exact(), r.late, r.duplicates), (2, 1, 1));
    }

    /// Issue 43 item 10: a jitter of float residue is written as 0.
    #[test]
    fn a_jitter_decayed_to_float_residue_is_written_as_zero() {
        let mut r = UdpReceiver::default();
        // One 1 µs step in the transit time, then 2000 equal ones.
        r.on_datagram(1, 100, 0.0, 0.001);
        r.on_datagram(2, 100, 0.0, 0.001001);
        for s in 3..2000 {
            r.on_datagram(s, 100, 0.0, 0.001001);
        }
        assert!(r.jitter_s > 0.0 && r.jitter_s < 1e-30, "{}", r.jitter_s);
        assert_eq!(jitter_ms(r.jitter_s), 0.0);
        assert_eq!(jitter_ms(0.0012345678), 1.234568);
    }

    #[test]
    fn jitter_follows_rfc1889() {
        let mut r = UdpReceiver::default();
        r.on_datagram(1, 10, 0.0, 0.010);
        r.on_datagram(2, 10, 0.0, 0.026);
        assert!((r.jitter_s - 0.016 / 16.0).abs() < 1e-12);
        r.reset_after_omit();
        assert_eq!(r.jitter_s, 0.0);
        r.on_datagram(3, 10, 0.0, 0.5);
        assert_eq!(r.jitter_s, 0.0, "first datagram after omit re-initialises");
    }

    #[test]
    fn duplicate_window_slides() {
        let mut r = UdpReceiver::default();
        r.on_datagram(1, 1, 0.0, 0.0);
        r.on_datagram(70, 1, 0.0, 0.0);
        r.on_datagram(1, 1, 0.0, 0.0);
        assert_eq!(r.duplicates, 1);
        r.on_datagram(5000, 1, 0.0, 0.0);
        r.on_datagram(70, 1, 0.0, 0.0);
        assert_eq!(
            (r.duplicates, r.late),
            (1, 1),
            "beyond the window counts as late"
        );
    }
}
