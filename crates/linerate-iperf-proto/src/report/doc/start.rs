//! iperf3's `start` object and its `test_start`, with iperf3 3.21's keys in
//! its order.

use crate::report::date::http_date;
use crate::report::figures::{Role, StartInfo, StreamDesc, addr_host};
use crate::{Params, Protocol, TestMode};
use serde::Serialize;

/// `start`: the test as it began.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StartDoc {
    pub connected: Vec<Connected>,
    pub version: String,
    pub system_info: String,
    /// A TCP server writes its buffer sizes here, the others after `fq_rate`.
    #[serde(flatten)]
    pub buffers_early: Option<Buffers>,
    /// A UDP server writes `target_bitrate` here, the others after the MSS.
    #[serde(rename = "target_bitrate", skip_serializing_if = "Option::is_none")]
    pub target_bitrate_early: Option<u64>,
    pub timestamp: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connecting_to: Option<HostPort>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_connection: Option<HostPort>,
    pub cookie: String,
    /// TCP: `-M` as asked, or else the system's default MSS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_mss: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_mss_default: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_bitrate: Option<u64>,
    pub fq_rate: u64,
    #[serde(flatten)]
    pub buffers_late: Option<Buffers>,
    pub test_start: TestStart,
}

/// A connected stream's addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Connected {
    pub socket: i32,
    pub local_host: String,
    pub local_port: u16,
    pub remote_host: String,
    pub remote_port: u16,
}

/// The socket buffers: `-w` as asked, and what the kernel gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Buffers {
    pub sock_bufsize: u32,
    pub sndbuf_actual: u64,
    pub rcvbuf_actual: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Timestamp {
    pub time: String,
    pub timesecs: u64,
    pub timemillisecs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

/// iperf3's `test_start`: the test as the parameters set it (also the run
/// model's start configuration of the client and server).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestStart {
    /// "TCP" or "UDP".
    pub protocol: &'static str,
    pub num_streams: u32,
    pub blksize: u32,
    pub omit: u32,
    pub duration: u32,
    pub bytes: u64,
    pub blocks: u64,
    /// 0 or 1, as iperf3 writes its flags.
    pub reverse: u8,
    pub tos: u32,
    pub target_bitrate: u64,
    pub bidir: u8,
    pub fqrate: u64,
    pub interval: f64,
    pub gso: u8,
    pub gro: u8,
}

impl TestStart {
    pub fn new(p: &Params, interval_s: f64, gso: bool, gro: bool) -> Self {
        Self {
            protocol: match p.protocol {
                Protocol::Tcp => "TCP",
                Protocol::Udp => "UDP",
            },
            num_streams: p.parallel,
            blksize: p.len,
            omit: p.omit_s,
            duration: p.time_s,
            bytes: p.num_bytes,
            blocks: p.block_count,
            reverse: u8::from(p.mode == TestMode::Reverse),
            tos: p.tos,
            target_bitrate: p.bandwidth_bps,
            bidir: u8::from(p.mode == TestMode::Bidir),
            fqrate: p.fq_rate_bps,
            interval: interval_s,
            gso: u8::from(gso),
            gro: u8::from(gro),
        }
    }
}

impl Connected {
    fn new(s: &StreamDesc) -> Self {
        Self {
            socket: s.socket,
            local_host: addr_host(&s.local),
            local_port: s.local.port(),
            remote_host: addr_host(&s.remote),
            remote_port: s.remote.port(),
        }
    }
}

/// iperf3 3.21's version line, as `start.version` and `-v` write it.
pub fn version() -> String {
    format!("iperf 3.21 (linerate {})", env!("CARGO_PKG_VERSION"))
}

impl StartDoc {
    pub fn new(info: &StartInfo) -> Self {
        let p = &info.params;
        let tcp = p.protocol == Protocol::Tcp;
        let server = info.role == Role::Server;
        let buffers = Buffers {
            sock_bufsize: p.window,
            sndbuf_actual: info.sndbuf_actual,
            rcvbuf_actual: info.rcvbuf_actual,
        };
        let buffers_early = server && tcp;
        let target_early = server && !tcp;
        let peer = HostPort {
            host: info.peer_host.clone(),
            port: info.peer_port,
        };
        Self {
            connected: info.streams.iter().map(Connected::new).collect(),
            version: version(),
            system_info: info.system_info.clone(),
            buffers_early: buffers_early.then_some(buffers),
            target_bitrate_early: target_early.then_some(p.bandwidth_bps),
            timestamp: Timestamp {
                time: http_date(info.timestamp_secs),
                timesecs: info.timestamp_secs,
                timemillisecs: info.timestamp_secs * 1000,
            },
            connecting_to: (!server).then(|| peer.clone()),
            accepted_connection: server.then_some(peer),
            cookie: info.cookie.clone(),
            tcp_mss: (tcp && p.mss > 0).then_some(p.mss),
            tcp_mss_default: (tcp && p.mss == 0).then_some(info.tcp_mss_default),
            target_bitrate: (!target_early).then_some(p.bandwidth_bps),
            fq_rate: p.fq_rate_bps,
            buffers_late: (!buffers_early).then_some(buffers),
            test_start: TestStart::new(p, info.interval_s, info.gso, info.gro),
        }
    }
}
