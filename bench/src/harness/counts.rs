//! What the bench counts besides the interfaces: a client's own claim,
//! a server's report of what its socket read, the namespace's SNMP counters.

use super::*;

/// A client's own figure: its standard output, kept in `path`, and the
/// parser of its rate (transactions per second).
#[derive(Debug, Clone)]
pub struct Claim {
    pub path: PathBuf,
    pub parse: fn(&str) -> Option<f64>,
}

impl Claim {
    /// A fresh file in the temporary directory for a client's output.
    pub fn new(tool: &str, parse: fn(&str) -> Option<f64>) -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self {
            path: std::env::temp_dir().join(format!(
                "linerate-bench-{}-{tool}-{n}.out",
                std::process::id()
            )),
            parse,
        }
    }
}

/// Where an iperf3-style server (`-s -1 -J`) writes its report, and the
/// datagram length of a UDP test (0 for TCP). The count at the socket is
/// taken from the server's own one-second intervals, the first and last
/// left out (start-up and the end of the test), so it is what the
/// receiving program read, not what its interface saw.
#[derive(Debug, Clone)]
pub struct ServerReport {
    pub path: PathBuf,
    pub datagram_len: usize,
}

/// What a server's report says it received in its inner intervals.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SocketCount {
    /// Bytes read from the socket(s), all streams.
    pub bytes: u64,
    /// Datagrams read (bytes / datagram length; 0 for TCP).
    pub datagrams: u64,
    /// Seconds the counted intervals cover.
    pub seconds: f64,
    /// Datagrams the server's report counted as lost in those intervals
    /// (sequence gaps: dropped anywhere between sender and socket).
    pub lost: u64,
}

/// Reads a server's `-J` report: the sum of every interval but the first
/// and last. None if the report has fewer than three intervals.
pub fn socket_count(report: &serde_json::Value, datagram_len: usize) -> Option<SocketCount> {
    let intervals = report.get("intervals")?.as_array()?;
    if intervals.len() < 3 {
        return None;
    }
    let (mut bytes, mut seconds, mut lost) = (0u64, 0f64, 0u64);
    for iv in &intervals[1..intervals.len() - 1] {
        let sum = iv.get("sum")?;
        bytes += sum.get("bytes")?.as_u64()?;
        seconds += sum.get("seconds")?.as_f64()?;
        lost += sum
            .get("lost_packets")
            .and_then(|l| l.as_u64())
            .unwrap_or(0);
    }
    Some(SocketCount {
        bytes,
        datagrams: if datagram_len > 0 {
            bytes / datagram_len as u64
        } else {
            0
        },
        seconds,
        lost,
    })
}

/// UDP receive errors of the namespace (`/proc/net/snmp`): datagrams the
/// kernel dropped because a socket's buffer was full, and all receive
/// errors. With UDP GRO one drop may stand for a whole coalesced batch.
pub(crate) fn udp_errors(rig: &Rig, host: usize) -> (u64, u64) {
    let Ok(out) = rig.command(host, "cat").arg("/proc/net/snmp").output() else {
        return (0, 0);
    };
    parse_udp_errors(&String::from_utf8_lossy(&out.stdout)).unwrap_or((0, 0))
}

/// Packets host `host`'s IP layer received, a GSO packet counted as its
/// segments (`/proc/net/netstat`'s IpExt ECN counters; 0 where unread).
pub(crate) fn ip_received(rig: &Rig, host: usize) -> u64 {
    let Ok(out) = rig.command(host, "cat").arg("/proc/net/netstat").output() else {
        return 0;
    };
    parse_ip_received(&String::from_utf8_lossy(&out.stdout)).unwrap_or(0)
}

pub(crate) fn parse_ip_received(netstat: &str) -> Option<u64> {
    ["InNoECTPkts", "InECT1Pkts", "InECT0Pkts", "InCEPkts"]
        .iter()
        .map(|k| snmp_value(netstat, "IpExt", k))
        .sum()
}

pub(crate) fn parse_udp_errors(snmp: &str) -> Option<(u64, u64)> {
    Some((
        snmp_value(snmp, "Udp", "RcvbufErrors")?,
        snmp_value(snmp, "Udp", "InErrors")?,
    ))
}

/// One counter of `/proc/net/snmp`'s text: `proto` ("Tcp", "Udp") names
/// a pair of lines, the names and then the values.
pub fn snmp_value(snmp: &str, proto: &str, name: &str) -> Option<u64> {
    let prefix = format!("{proto}:");
    let mut lines = snmp.lines().filter(|l| l.starts_with(&prefix));
    let names: Vec<&str> = lines.next()?.split_whitespace().collect();
    let values: Vec<&str> = lines.next()?.split_whitespace().collect();
    let i = names.iter().position(|x| *x == name)?;
    values.get(i)?.parse().ok()
}

/// `/proc/net/snmp` counter `proto`/`name` of host `host`'s namespace.
pub fn netns_snmp(rig: &Rig, host: usize, proto: &str, name: &str) -> Result<u64> {
    let out = rig.command(host, "cat").arg("/proc/net/snmp").output()?;
    snmp_value(&String::from_utf8_lossy(&out.stdout), proto, name)
        .with_context(|| format!("no {proto} {name} in /proc/net/snmp of host {host}"))
}
