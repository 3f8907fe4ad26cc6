//! The parameters a client sends, from its flags, by iperf3 3.21's rules:
//! the flags it refuses together, `-b RATE[/BURST]`, `-A n[,m]`, the test's
//! end (`-t`, `-n`, `-k`, or `-F`'s size).

use super::{FlagError, Flags};
use linerate_iperf_proto::{Params, Protocol, TestMode};
use std::time::Duration;

impl Flags {
    /// `-A n[,m]` split into this side's CPU and the server's, read as
    /// iperf3 3.21 reads it: `n` a C integer (decimal, 0x hex, 0 octal)
    /// from 0 to 1024 followed by anything, then `m` after the first comma
    /// if there is one (`-A 2/3` is CPU 2: iperf3 ignores the `/3`, and
    /// [`Flags::warnings`] says so).
    pub fn affinity_pair(&self) -> Result<(Option<usize>, Option<usize>), FlagError> {
        let Some(a) = &self.affinity else {
            return Ok((None, None));
        };
        let cpu = |s: &str| {
            let (n, _) = linerate_iperf_proto::units::c_integer_prefix(s);
            n.filter(|n| (0..=1024).contains(n)).map(|n| n as usize)
        };
        let n = cpu(a).ok_or_else(|| FlagError::Affinity(a.clone()))?;
        let m = match a.split_once(',') {
            Some((_, m)) => Some(cpu(m).ok_or_else(|| FlagError::ServerAffinity(a.clone()))?),
            None => None,
        };
        Ok((Some(n), m))
    }

    /// CPUs for this side's stream threads.
    pub fn stream_cpus(&self) -> Result<Vec<usize>, FlagError> {
        Ok(match (&self.stream_cpus, self.affinity_pair()?.0) {
            (Some(list), _) => list.clone(),
            (None, Some(n)) => vec![n],
            (None, None) => vec![],
        })
    }

    /// `-b RATE[/BURST]`: the rate, the burst (0: none) and whether given.
    pub fn rate_and_burst(&self) -> Result<(u64, u32, bool), FlagError> {
        let Some(b) = &self.bitrate else {
            return Ok((0, 0, false));
        };
        let (r, n) = match b.split_once('/') {
            Some((r, n)) => (
                r,
                Some(
                    n.parse::<u32>()
                        .map_err(|e| FlagError::Burst(e.to_string()))?,
                ),
            ),
            None => (b.as_str(), None),
        };
        let rate = super::parse::rate(r).map_err(FlagError::Rate)?;
        if let Some(n) = n
            && !(1..=1000).contains(&n)
        {
            return Err(FlagError::BurstCount);
        }
        Ok((rate, n.unwrap_or(0), true))
    }

    /// The client flags iperf3 3.21 refuses together.
    pub fn check_combinations(&self) -> Result<(), FlagError> {
        if self.reverse && self.bidir {
            return Err(FlagError::ReverseAndBidir);
        }
        if self.rcv_timeout_ms.is_some() && !self.reverse && !self.bidir {
            return Err(FlagError::RcvTimeoutNotReceiving);
        }
        if !(1..=128).contains(&self.parallel) {
            return Err(FlagError::Parallel);
        }
        if self.file.is_some() && self.udp {
            return Err(FlagError::FileOverUdp);
        }
        if self.file.is_some() && self.skip_rx_copy {
            return Err(FlagError::FileSkipRxCopy);
        }
        let ends = [
            self.time_s.is_some(),
            self.bytes.is_some(),
            self.blockcount.is_some(),
        ];
        if ends.iter().filter(|e| **e).count() > 1 {
            return Err(FlagError::TwoEnds);
        }
        Ok(())
    }

    /// The client's own test time when `-t` has a fraction (iperf3's
    /// parameters carry whole seconds).
    pub fn fractional_time(&self) -> Option<Duration> {
        (self.time_s)
            .filter(|t| t.fract() != 0.0)
            .map(Duration::from_secs_f64)
    }

    /// The parameters a client sends, from the flags, and whether `-b` was
    /// given.
    pub fn params(&self) -> Result<(Params, bool), FlagError> {
        let (rate, burst, rate_given) = self.rate_and_burst()?;
        self.check_combinations()?;
        // iperf3: -F with no -t/-n/-k sends the file's size.
        let file_bytes = match (&self.file, self.time_s, self.bytes, self.blockcount) {
            (Some(f), None, None, None) => std::fs::metadata(f)
                .ok()
                .map(|m| m.len())
                .filter(|&n| n > 0),
            _ => None,
        };
        let ends_by_amount =
            self.bytes.is_some() || self.blockcount.is_some() || file_bytes.is_some();
        let time = match (self.time_s, ends_by_amount) {
            (Some(t), _) => t.ceil() as u32,
            (None, true) => 0,
            (None, false) => 10,
        };
        let protocol = if self.udp {
            Protocol::Udp
        } else {
            Protocol::Tcp
        };
        let len = self.length.unwrap_or(0);
        match protocol {
            Protocol::Udp if len != 0 && !(16..=65507).contains(&len) => {
                return Err(FlagError::UdpBlockSize);
            }
            Protocol::Tcp if len > 1 << 20 => return Err(FlagError::TcpBlockSize),
            _ => {}
        }
        let mode = match (self.bidir, self.reverse) {
            (true, _) => TestMode::Bidir,
            (false, true) => TestMode::Reverse,
            (false, false) => TestMode::Forward,
        };
        let params = Params {
            protocol,
            mode,
            omit_s: self.omit_s,
            time_s: time,
            num_bytes: self.bytes.or(file_bytes).unwrap_or(0),
            block_count: self.blockcount.unwrap_or(0),
            parallel: self.parallel,
            len: len as u32,
            bandwidth_bps: rate,
            burst,
            window: self.window.unwrap_or(0) as u32,
            mss: self.mss.unwrap_or(0),
            nodelay: self.nodelay,
            tos: self.dscp.or(self.tos).unwrap_or(0),
            fq_rate_bps: if self.no_fq_socket_pacing {
                0
            } else {
                self.fq_rate_bps.unwrap_or(0)
            },
            congestion: self.congestion.clone(),
            title: self.title.clone(),
            extra_data: self.extra_data.clone(),
            get_server_output: self.get_server_output,
            udp_counters_64bit: self.udp_counters_64bit,
            repeating_payload: self.repeating_payload,
            zerocopy: self.zerocopy,
            dont_fragment: self.dont_fragment,
            server_affinity: self.affinity_pair()?.1.map(|m| m as i64),
            client_version: Some(format!("linerate {}", env!("CARGO_PKG_VERSION"))),
            authtoken: None,
            skip_rx_copy: self.skip_rx_copy,
            mptcp: self.mptcp,
            flowlabel: self.flowlabel.unwrap_or(0),
        };
        Ok((params, rate_given))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> Flags {
        Flags {
            client: Some("h".into()),
            ..Flags::default()
        }
    }

    #[test]
    fn flags_make_iperf3_params() {
        let f = Flags {
            udp: true,
            bitrate: Some("10M/20".into()),
            length: Some(1400),
            parallel: 3,
            bidir: true,
            time_s: Some(5.0),
            omit_s: 1,
            ..client()
        };
        let (p, given) = f.params().unwrap();
        assert!(given);
        assert_eq!(
            (
                p.protocol,
                p.mode,
                p.bandwidth_bps,
                p.burst,
                p.len,
                p.parallel,
                p.time_s,
                p.omit_s
            ),
            (
                Protocol::Udp,
                TestMode::Bidir,
                10_000_000,
                20,
                1400,
                3,
                5,
                1
            )
        );
        let f = Flags {
            bytes: Some(20 << 20),
            window: Some(262_144),
            tos: Some(0x28),
            reverse: true,
            ..client()
        };
        let (p, given) = f.params().unwrap();
        assert!(!given);
        assert_eq!(
            (p.num_bytes, p.time_s, p.window, p.tos, p.mode),
            (20 << 20, 0, 262_144, 0x28, TestMode::Reverse)
        );
        // --dscp wins over -S.
        let f = Flags {
            dscp: Some(46 << 2),
            tos: Some(0x28),
            ..client()
        };
        assert_eq!(f.params().unwrap().0.tos, 46 << 2);
        let f = Flags {
            time_s: Some(2.5),
            ..client()
        };
        assert_eq!(f.params().unwrap().0.time_s, 3);
        assert_eq!(f.fractional_time(), Some(Duration::from_millis(2500)));
    }

    #[test]
    fn bad_flags_fail_like_iperf3() {
        let bad = |f: Flags, e: FlagError| assert_eq!(f.params().unwrap_err(), e);
        let c = client;
        bad(
            Flags {
                reverse: true,
                bidir: true,
                ..c()
            },
            FlagError::ReverseAndBidir,
        );
        bad(
            Flags {
                parallel: 200,
                ..c()
            },
            FlagError::Parallel,
        );
        bad(
            Flags {
                udp: true,
                length: Some(8),
                ..c()
            },
            FlagError::UdpBlockSize,
        );
        bad(
            Flags {
                length: Some(2 << 20),
                ..c()
            },
            FlagError::TcpBlockSize,
        );
        bad(
            Flags {
                bitrate: Some("1M/0".into()),
                ..c()
            },
            FlagError::BurstCount,
        );
        bad(
            Flags {
                time_s: Some(1.0),
                bytes: Some(1),
                ..c()
            },
            FlagError::TwoEnds,
        );
        bad(
            Flags {
                rcv_timeout_ms: Some(1000),
                ..c()
            },
            FlagError::RcvTimeoutNotReceiving,
        );
        assert!(
            Flags {
                reverse: true,
                rcv_timeout_ms: Some(1000),
                ..c()
            }
            .params()
            .is_ok()
        );
        let e = Flags {
            bitrate: Some("1M/x".into()),
            ..c()
        }
        .params()
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "burst after '/' must be a number: invalid digit found in string"
        );
    }

    #[test]
    fn affinity_is_read_as_iperf3_reads_it() {
        let a = |s: &str| {
            Flags {
                affinity: Some(s.into()),
                ..client()
            }
            .affinity_pair()
        };
        assert_eq!(a("2/3"), Ok((Some(2), None)));
        assert_eq!(a("0x3,010"), Ok((Some(3), Some(8))));
        assert_eq!(a("2000"), Err(FlagError::Affinity("2000".into())));
        assert_eq!(a("1,x"), Err(FlagError::ServerAffinity("1,x".into())));
        let f = Flags {
            affinity: Some("1,2".into()),
            ..client()
        };
        assert_eq!(f.stream_cpus(), Ok(vec![1]));
        assert_eq!(f.params().unwrap().0.server_affinity, Some(2));
        let f = Flags {
            stream_cpus: Some(vec![0, 1]),
            ..f
        };
        assert_eq!(f.stream_cpus(), Ok(vec![0, 1]));
    }
}
