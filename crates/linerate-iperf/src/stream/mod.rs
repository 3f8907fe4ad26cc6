//! Data-stream workers: one thread per stream, moving bytes as fast as
//! allowed and publishing counters for the reporter to sample.
//!
//! Counters are single-writer: the worker stores, the reporter loads.
//! UDP receivers publish their accounting once per received batch, not per
//! datagram.

mod shared;
mod tcp_io;
mod udp_io;

pub use shared::{Budget, DRAIN_MAX, Pacing, StreamShared, UdpRxCounters, Wake, payload, tcp_info};
pub use tcp_io::{tcp_recv, tcp_send, tcp_send_file, tcp_send_group};
pub use udp_io::{udp_recv, udp_send};

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_iperf_proto::Params;

    fn params(n: u64, k: u64, len: u32, omit: u32) -> Params {
        Params {
            num_bytes: n,
            block_count: k,
            len,
            omit_s: omit,
            ..Params::default()
        }
    }

    #[test]
    fn a_tcp_byte_budget_ends_at_exactly_n_with_a_short_last_write() {
        let b = Budget::new(&params(300, 0, 128, 0), false);
        assert_eq!(b.take(128), 128);
        assert_eq!(b.take(128), 128);
        assert_eq!(b.take(128), 44, "the last write is cut to what is left");
        assert_eq!(b.take(128), 0);
        // A write that took 44 and wrote 10 gives 34 back.
        b.give_back(34);
        assert_eq!(b.take(128), 34);
    }

    #[test]
    fn blocks_and_udp_bytes_count_whole_units() {
        // -k 3 over TCP: 3 blocks of the block size, in bytes.
        let b = Budget::new(&params(0, 3, 100, 0), false);
        assert_eq!((b.take(250), b.take(250), b.take(1)), (250, 50, 0));
        // UDP -n 1000 with 300-byte datagrams: 4 datagrams.
        let b = Budget::new(&params(1000, 0, 300, 0), true);
        assert_eq!((b.take(3), b.take(3), b.take(3)), (3, 1, 0));
        // UDP -k 5: 5 datagrams.
        let b = Budget::new(&params(0, 5, 300, 0), true);
        assert_eq!((b.take(8), b.take(8)), (5, 0));
        // No limit.
        assert_eq!(Budget::new(&params(0, 0, 1, 0), true).take(99), 99);
    }

    #[test]
    fn omit_sends_freely_and_the_amount_counts_from_its_end() {
        let b = Budget::new(&params(100, 0, 64, 2), false);
        assert_eq!(b.take(1 << 30), 1 << 30);
        b.restart();
        assert_eq!((b.take(64), b.take(64), b.take(64)), (64, 36, 0));
    }
}
