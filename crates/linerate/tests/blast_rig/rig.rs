//! What every test here shares: the skip rule, running blast against host 1,
//! and capturing what host 1 receives.

use crate::support;
use linerate_backend::raw::RawSocket;
use linerate_lab::Rig;
use linerate_testkit::{require_program, require_root, should_skip};
use linerate_wire::{L3, L4, parse_frame};
use std::net::IpAddr;
use std::process::Output;
use std::time::{Duration, Instant};

pub fn skip(test: &str) -> bool {
    should_skip(test, &[require_root(), require_program("ip")])
}

pub const BIN: &str = env!("CARGO_BIN_EXE_linerate");

pub fn blast(rig: &Rig, args: &[&str]) -> Output {
    let dst_mac = rig.host(1).mac.clone();
    rig.command(0, BIN)
        .args(["blast", "--iface", "veth0", "--dst-mac", &dst_mac, "--json"])
        .args(args)
        .output()
        .unwrap()
}

/// A frame carrying a probe that is not an end marker (blast sends each
/// flow's marker three times after its last frame, by default).
pub fn is_probe(fr: &[u8]) -> bool {
    parse_frame(fr).is_ok_and(|p| {
        p.probe
            .is_some_and(|pr| pr.seq & linerate_wire::END_MARKER == 0)
    })
}

/// An end marker frame.
pub fn is_marker(fr: &[u8]) -> bool {
    parse_frame(fr).is_ok_and(|p| {
        p.probe
            .is_some_and(|pr| pr.seq & linerate_wire::END_MARKER != 0)
    })
}

/// Frames with a probe seen on host 1 while `f` runs: (dst ip, dst port, src port, length).
pub fn capture(rig: &Rig, f: impl FnOnce()) -> Vec<(IpAddr, u16, u16, usize)> {
    let frames = capture_where(rig, is_probe, f);
    frames
        .iter()
        .filter_map(|fr| {
            let p = parse_frame(fr).ok()?;
            let dst: IpAddr = match p.l3 {
                L3::Ipv4(r) => r.dst.into(),
                L3::Ipv6(r) => r.dst.into(),
                L3::Other(_) => return None,
            };
            match p.l4 {
                L4::Udp(u) => Some((dst, u.dst_port, u.src_port, fr.len())),
                _ => None,
            }
        })
        .collect()
}

/// Frames on host 1's veth0 that `keep` accepts, in order, captured while
/// `f` runs (until 1.5 s pass without one).
pub fn capture_where(
    rig: &Rig,
    keep: impl Fn(&[u8]) -> bool + Send + Sync,
    f: impl FnOnce(),
) -> Vec<Vec<u8>> {
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            rig.run_in(1, || {
                let mut sock = RawSocket::open("veth0").unwrap();
                sock.set_read_timeout(Duration::from_millis(300)).unwrap();
                sock.set_rcvbuf(64 << 20).unwrap();
                let mut store = vec![vec![0u8; 2048]; 64];
                let mut lens = [0usize; 64];
                let mut out = Vec::new();
                let t0 = Instant::now();
                let mut idle_since = Instant::now();
                while t0.elapsed() < Duration::from_secs(20)
                    && idle_since.elapsed() < Duration::from_millis(1500)
                {
                    let mut bufs: Vec<&mut [u8]> =
                        store.iter_mut().map(|b| b.as_mut_slice()).collect();
                    let Ok(n) = sock.recv(&mut bufs, &mut lens) else {
                        continue;
                    };
                    for i in 0..n {
                        let fr = &store[i][..lens[i]];
                        if lens[i] > 0 && keep(fr) {
                            idle_since = Instant::now();
                            out.push(fr.to_vec());
                        }
                    }
                }
                out
            })
            .unwrap()
        });
        std::thread::sleep(Duration::from_millis(300));
        f();
        h.join().unwrap()
    })
}

/// All frames from `src_mac` seen on host 1 while `f` runs, in order.
pub fn capture_raw(rig: &Rig, src_mac: [u8; 6], f: impl FnOnce()) -> Vec<Vec<u8>> {
    capture_where(rig, |fr| fr.len() >= 14 && fr[6..12] == src_mac, f)
}

pub fn write_pcap(frames: &[Vec<u8>], path: &std::path::Path) {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    let mut w = PcapWriter::with_header(
        Vec::new(),
        PcapHeader {
            datalink: pcap_file::DataLink::ETHERNET,
            ..Default::default()
        },
    )
    .unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(&PcapPacket::new(
            Duration::from_micros(200 * i as u64),
            f.len() as u32,
            f,
        ))
        .unwrap();
    }
    std::fs::write(path, w.into_writer()).unwrap();
}

/// The JSON of a run that must have succeeded.
pub fn succeeded(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    support::json(&out.stdout)
}

/// A sink on host 1 (raw socket backend) counting `count` probe frames
/// while `f` runs; returns the sink's JSON and what `f` returned.
pub fn with_sink<T: Send>(
    rig: &Rig,
    count: u64,
    f: impl FnOnce() -> T + Send,
) -> (serde_json::Value, T) {
    with_sink_for(rig, count, "15", f)
}

/// [`with_sink`] for at most `secs` seconds.
pub fn with_sink_for<T: Send>(
    rig: &Rig,
    count: u64,
    secs: &str,
    f: impl FnOnce() -> T + Send,
) -> (serde_json::Value, T) {
    let n = count.to_string();
    let (out, r) = support::sink_while(
        rig.command(1, BIN).args([
            "sink",
            "--iface",
            "veth0",
            "--backend",
            "socket",
            "--duration",
            secs,
            "--count",
            &n,
            "--json",
        ]),
        f,
    );
    (support::json(&out.stdout), r)
}

/// A rig pair whose links have a 9000-byte MTU.
pub fn jumbo_pair() -> Rig {
    Rig::new(&linerate_lab::RigConfig {
        mtu: 9000,
        ..Default::default()
    })
    .unwrap()
}
