//! Speed → packets per second, and packets per second → bits per second.

use crate::{Imix, L1_OVERHEAD_BYTES};
use serde::Serialize;

/// What a link of a given speed carries at most.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineRate {
    pub speed_bps: u64,
    /// Average frame size (L2, FCS included).
    pub frame_bytes_avg: f64,
    /// Average bytes a frame occupies on the wire (frame + 20 B of L1 overhead).
    pub wire_bytes_avg: f64,
    /// Most whole frames per second the link can carry (rounded down).
    pub pps_max: u64,
    /// L2 throughput at `pps_max` (exact, not from the rounded pps).
    pub bps_l2_max: f64,
    /// Time one average frame occupies the wire, ns.
    pub frame_time_ns: f64,
}

/// Bit rates that a packet rate makes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateReport {
    pub pps: u64,
    pub frame_bytes_avg: f64,
    /// Bits per second on the wire, preamble, SFD and inter-frame gap included.
    pub bps_l1: f64,
    /// Bits per second of frames (FCS included).
    pub bps_l2: f64,
}

/// The most frames per second `speed_bps` carries for a frame-size mix.
pub fn line_rate(speed_bps: u64, mix: &Imix) -> LineRate {
    let weight = u128::from(mix.total_weight());
    let wire_cycle = mix.cycle_bytes(L1_OVERHEAD_BYTES);
    let frame_cycle = mix.cycle_bytes(0);
    // pps = speed / (8 × average wire bytes), in integers so it rounds down exactly.
    let pps_max = (u128::from(speed_bps) * weight / (8 * wire_cycle)) as u64;
    let wire_bytes_avg = wire_cycle as f64 / weight as f64;
    LineRate {
        speed_bps,
        frame_bytes_avg: mix.average_frame_bytes(),
        wire_bytes_avg,
        pps_max,
        bps_l2_max: speed_bps as f64 * frame_cycle as f64 / wire_cycle as f64,
        frame_time_ns: wire_bytes_avg * 8.0 * 1e9 / speed_bps as f64,
    }
}

/// The bit rates `pps` frames per second of a mix make at L1 and L2.
pub fn rate_at_pps(pps: u64, mix: &Imix) -> RateReport {
    let weight = mix.total_weight() as f64;
    let frame_bytes_avg = mix.average_frame_bytes();
    let wire_avg = mix.cycle_bytes(L1_OVERHEAD_BYTES) as f64 / weight;
    RateReport {
        pps,
        frame_bytes_avg,
        bps_l1: pps as f64 * wire_avg * 8.0,
        bps_l2: pps as f64 * frame_bytes_avg * 8.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameSpec, Header, Payload};

    fn single(bytes: u64) -> Imix {
        Imix::single(bytes)
    }

    #[test]
    fn the_three_figures() {
        assert_eq!(line_rate(10_000_000_000, &single(64)).pps_max, 14_880_952);
        assert_eq!(line_rate(100_000_000, &single(64)).pps_max, 148_809);
        let frame = FrameSpec {
            payload: Payload::Udp(100),
            ip: Header::Ipv4,
            vlan_tags: 0,
        }
        .resolve()
        .unwrap();
        assert_eq!(
            line_rate(10_000_000_000, &single(frame.bytes)).pps_max,
            7_530_120
        );
    }

    #[test]
    fn well_known_rates() {
        assert_eq!(line_rate(1_000_000_000, &single(1518)).pps_max, 81_274);
        assert_eq!(line_rate(100_000_000_000, &single(64)).pps_max, 148_809_523);
        assert_eq!(line_rate(10_000_000, &single(64)).pps_max, 14_880);
        assert_eq!(
            line_rate(800_000_000_000, &single(64)).pps_max,
            1_190_476_190
        );
        let lr = line_rate(10_000_000_000, &single(64));
        assert!((lr.frame_time_ns - 67.2).abs() < 1e-9);
        assert!((lr.bps_l2_max - 10e9 * 64.0 / 84.0).abs() < 1.0);
    }

    #[test]
    fn imix_rate() {
        // 12 frames cost 4342 + 12 × 20 = 4582 wire bytes.
        let lr = line_rate(100_000_000_000, &Imix::simple());
        assert_eq!(lr.pps_max, (100_000_000_000u128 * 12 / (8 * 4582)) as u64);
        assert!((lr.wire_bytes_avg - 4582.0 / 12.0).abs() < 1e-9);
    }

    #[test]
    fn pps_to_bits() {
        let r = rate_at_pps(1_000_000, &single(64));
        assert_eq!(r.bps_l1, 672_000_000.0);
        assert_eq!(r.bps_l2, 512_000_000.0);
        // Round trip: line rate pps gives back (almost) the line speed at L1.
        let lr = line_rate(10_000_000_000, &single(64));
        let back = rate_at_pps(lr.pps_max, &single(64));
        assert!(back.bps_l1 <= 10e9 && back.bps_l1 > 10e9 - 84.0 * 8.0);
    }
}
