//! `linerate blast` and `linerate sink` on the namespace rig: exact counts,
//! ranges that reach every value, IMIX proportions, and bad input refused
//! before any traffic.

mod support;

use linerate_backend::raw::RawSocket;
use linerate_lab::Rig;
use linerate_testkit::{require_program, require_root, should_skip};
use linerate_wire::{L3, L4, parse_frame};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn skip(test: &str) -> bool {
    should_skip(test, &[require_root(), require_program("ip")])
}

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

fn blast(rig: &Rig, args: &[&str]) -> Output {
    let dst_mac = rig.host(1).mac.clone();
    rig.command(0, BIN)
        .args(["blast", "--iface", "veth0", "--dst-mac", &dst_mac, "--json"])
        .args(args)
        .output()
        .unwrap()
}

/// A frame carrying a probe that is not an end marker (blast sends each
/// flow's marker three times after its last frame, by default).
fn is_probe(fr: &[u8]) -> bool {
    parse_frame(fr).is_ok_and(|p| {
        p.probe
            .is_some_and(|pr| pr.seq & linerate_wire::END_MARKER == 0)
    })
}

/// An end marker frame.
fn is_marker(fr: &[u8]) -> bool {
    parse_frame(fr).is_ok_and(|p| {
        p.probe
            .is_some_and(|pr| pr.seq & linerate_wire::END_MARKER != 0)
    })
}

/// Frames with a probe seen on host 1 while `f` runs: (dst ip, dst port, src port, length).
fn capture(rig: &Rig, f: impl FnOnce()) -> Vec<(IpAddr, u16, u16, usize)> {
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
fn capture_where(
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

#[test]
fn blast_exactly_n_and_the_sink_counts_exactly_n() {
    if skip("blast_exactly_n_and_the_sink_counts_exactly_n") {
        return;
    }
    let rig = Rig::pair().unwrap();
    // The sink receives on the sender's backend (AF_XDP with its redirect
    // program, the af_packet RX ring), on the raw socket otherwise.
    for (backend, cores) in [
        ("af_packet", "0"),
        ("socket", "0"),
        ("auto", "0"),
        ("af_packet", "0,1"),
    ] {
        let sink_backend = if backend == "af_xdp" {
            "af_xdp"
        } else {
            "socket"
        };
        let (sink, ()) = support::sink_while(
            rig.command(1, BIN).args([
                "sink",
                "--iface",
                "veth0",
                "--backend",
                sink_backend,
                "--duration",
                "15",
                "--count",
                "20000",
                "--json",
            ]),
            || {
                let out = blast(
                    &rig,
                    &[
                        "--backend",
                        backend,
                        "--cores",
                        cores,
                        "--dst-ip",
                        "198.18.0.2",
                        "--src-port",
                        "1000-1007",
                        "--count",
                        "20000",
                        "--pps",
                        "100k",
                    ],
                );
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let b = support::json(&out.stdout);
                assert_eq!(b["packets"], 20000);
                // The probe's send time is taken once per send call, and said.
                assert!(
                    b["tx_time"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("per batch")),
                    "{b}"
                );
                // auto picks the fastest backend built and says why.
                let expect = if backend == "auto" { "af_xdp" } else { backend };
                assert_eq!(b["backend"], expect);
                // auto says what it chose; socket says which of its paths it took
                // (raw frames here, since --dst-mac chooses the Ethernet address).
                assert_eq!(
                    b["backend_note"].is_string(),
                    backend == "auto" || backend == "socket",
                    "{b}"
                );
                let caps = &b["backend_capabilities"];
                if backend == "socket" {
                    assert_eq!(b["backend_stats"][0]["socket_mode"], "raw", "{b}");
                    assert_eq!(caps["qdisc_bypass"], true, "{b}");
                }
                // Every backend here writes whole frames; only AF_XDP binds per queue.
                assert_eq!(caps["crafted_frames"], true, "{b}");
                assert_eq!(caps["per_queue"], expect == "af_xdp", "{b}");
                assert!(caps["max_frame"].as_u64().unwrap() >= 1514, "{b}");
                assert_eq!(b["flows"], 8);
                assert_eq!(b["workers"], cores.split(',').count());
                assert!(
                    b["doctor"]["could_not_check"].is_array(),
                    "doctor summary attached to blast's JSON"
                );
                // A paced run reports its measured send gaps against the target.
                let pacing = &b["pacing"][0];
                let target = pacing["target_gap_us"].as_f64().unwrap();
                let mean = pacing["mean_gap_us"].as_f64().unwrap();
                // Same units and order of magnitude (not a timing test: on a
                // busy 2-CPU machine a debug-build sender falls behind and
                // catches up in bigger calls, which stretches the mean).
                assert!(
                    target > 0.0 && mean > target * 0.5 && mean < target * 5.0 + 200.0,
                    "{pacing}"
                );
                let (p50, p99) = (
                    pacing["p50_gap_us"].as_f64().unwrap(),
                    pacing["p99_gap_us"].as_f64().unwrap(),
                );
                assert!(p50 > 0.0 && p50 <= p99, "{pacing}");
                if expect == "af_xdp" {
                    // The AF_XDP TX ring really carried them: the kernel completed every one.
                    assert_eq!(b["backend_stats"][0]["xsk_tx_completed"], 20000, "{b}");
                    assert_eq!(b["backend_stats"][0]["xsk_tx_invalid_descs"], 0);
                }
                assert!(
                    !b["intervals"].as_array().unwrap().is_empty()
                        || b["duration_s"].as_f64().unwrap() < 1.0
                );
            },
        );
        let v = support::json(&sink.stdout);
        assert_eq!(v["packets"], 20000, "{backend}: {v}");
        assert_eq!(
            v["backend"], sink_backend,
            "the sink received through {sink_backend}"
        );
        assert_eq!(
            (
                v["lost"].as_u64(),
                v["duplicates"].as_u64(),
                v["reordered"].as_u64()
            ),
            (Some(0), Some(0), Some(0))
        );
        let flows = v["flows"].as_array().unwrap();
        assert_eq!(flows.len(), 8);
        assert!(
            flows.iter().all(|f| f["packets"] == 2500),
            "sent = received + lost per flow"
        );
        assert!(v["latency_ns"]["p50"].as_u64().unwrap() > 0);
        assert_eq!(v["bytes"], 20000 * 64);
        assert_eq!(
            v["doctor"]["iface"], "veth0",
            "doctor summary attached to the sink's JSON"
        );
    }
}

#[test]
fn ranges_reach_every_value_and_imix_is_met() {
    if skip("ranges_reach_every_value_and_imix_is_met") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let seen = capture(&rig, || {
        let out = blast(
            &rig,
            &[
                "--src-ip",
                "198.18.0.1",
                "--dst-ip",
                "198.18.0.2-198.18.0.9",
                "--dst-port",
                "5000-5009",
                "--src-port",
                "7",
                "--count",
                "2400",
                "--pps",
                "50k",
                "--imix",
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    assert_eq!(seen.len(), 2400, "every frame captured");
    let ips: BTreeSet<IpAddr> = seen.iter().map(|s| s.0).collect();
    let ports: BTreeSet<u16> = seen.iter().map(|s| s.1).collect();
    assert_eq!(ips.len(), 8, "{ips:?}");
    assert_eq!(ports, (5000..5010).collect());
    let mut sizes: BTreeMap<usize, usize> = BTreeMap::new();
    for s in &seen {
        *sizes.entry(s.3 + 4).or_default() += 1;
    }
    let share = |sz: usize| sizes.get(&sz).copied().unwrap_or(0) as f64 / seen.len() as f64;
    assert!((share(64) - 7.0 / 12.0).abs() < 0.01, "{sizes:?}");
    assert!((share(594) - 4.0 / 12.0).abs() < 0.01, "{sizes:?}");
    assert!((share(1518) - 1.0 / 12.0).abs() < 0.01, "{sizes:?}");
}

#[test]
fn tcp_flagged_frames_are_counted_by_the_sink() {
    if skip("tcp_flagged_frames_are_counted_by_the_sink") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let (sink, ()) = support::sink_while(
        rig.command(1, BIN).args([
            "sink",
            "--iface",
            "veth0",
            "--backend",
            "socket",
            "--duration",
            "10",
            "--count",
            "3000",
            "--json",
        ]),
        || {
            let out = blast(
                &rig,
                &[
                    "--dst-ip",
                    "198.18.0.2",
                    "--tcp-flags",
                    "S",
                    "--size",
                    "80",
                    "--count",
                    "3000",
                    "--pps",
                    "50k",
                ],
            );
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        },
    );
    let v = support::json(&sink.stdout);
    assert_eq!(
        (v["packets"].as_u64(), v["lost"].as_u64()),
        (Some(3000), Some(0)),
        "{v}"
    );
    let out = blast(
        &rig,
        &[
            "--dst-ip",
            "198.18.0.2",
            "--tcp-flags",
            "SX",
            "--count",
            "1",
        ],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown TCP flag"));
}

#[test]
fn af_xdp_one_socket_per_queue_with_cores() {
    if skip("af_xdp_one_socket_per_queue_with_cores") {
        return;
    }
    let rig = Rig::new(&linerate_lab::RigConfig {
        queues: 2,
        ..Default::default()
    })
    .unwrap();
    // The sink, too, has to read every queue: af_packet sees them all, and
    // af_xdp binds one socket per RX queue.
    // With --cores the sink has one receive thread per core: af_xdp splits
    // the queues, af_packet and socket share by flow (PACKET_FANOUT).
    for (sink_backend, cores) in [
        ("af_packet", "0"),
        ("af_xdp", "0"),
        ("af_xdp", "0,1"),
        ("af_packet", "0,1"),
        ("socket", "0,1"),
    ] {
        one_socket_per_queue(&rig, sink_backend, cores);
    }
}

fn one_socket_per_queue(rig: &Rig, sink_backend: &str, cores: &str) {
    let (sink, ()) = support::sink_while(
        rig.command(1, BIN).args([
            "sink",
            "--iface",
            "veth0",
            "--backend",
            sink_backend,
            "--cores",
            cores,
            "--duration",
            "10",
            "--count",
            "20000",
            "--json",
        ]),
        || {
            let out = blast(
                rig,
                &[
                    "--backend",
                    "af_xdp",
                    "--cores",
                    "0,1",
                    "--dst-ip",
                    "198.18.0.2",
                    "--src-port",
                    "1000-1003",
                    "--count",
                    "20000",
                    "--pps",
                    "100k",
                ],
            );
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let b = support::json(&out.stdout);
            let per_queue: Vec<u64> = b["backend_stats"]
                .as_array()
                .unwrap()
                .iter()
                .map(|q| q["xsk_tx_completed"].as_u64().unwrap())
                .collect();
            assert_eq!(
                per_queue,
                vec![10000, 10000],
                "one AF_XDP socket per queue: {b}"
            );
            // The doctor looked at the pinned cores: a veth has no NUMA node to
            // compare them with, and it says so rather than passing them.
            assert!(
                b["doctor"]["could_not_check"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c == "nic.workers_numa"),
                "{}",
                b["doctor"]
            );
        },
    );
    let v = support::json(&sink.stdout);
    assert_eq!(
        (
            v["packets"].as_u64(),
            v["lost"].as_u64(),
            v["duplicates"].as_u64()
        ),
        (Some(20000), Some(0), Some(0)),
        "sink {sink_backend}: {v}"
    );
    assert_eq!(v["backend"], sink_backend);
    assert_eq!(v["workers"], cores.split(',').count(), "{v}");
    // Every flow whole, whichever worker read it.
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 4, "{v}");
    assert!(
        flows.iter().all(|f| f["packets"] == 5000 && f["lost"] == 0),
        "{v}"
    );
    // af_xdp reads both RX queues with a socket each; af_packet reads every
    // queue through one socket and stamps each frame.
    let caps = &v["backend_capabilities"];
    // Every frame handed over has one arrival time, counted exactly once
    // (the workers count per batch what their backend handed over).
    let frames = ["packets", "other_frames"]
        .iter()
        .map(|k| v[k].as_u64().unwrap())
        .sum::<u64>()
        + v["end_markers"]["frames"].as_u64().unwrap();
    let arrival = &v["latency_arrival"];
    let (stamped, handover) = (
        arrival["kernel_receive_stamp"].as_u64().unwrap(),
        arrival["batch_handover"].as_u64().unwrap(),
    );
    if sink_backend == "af_xdp" {
        assert_eq!(caps["queues"], 2, "{v}");
        assert_eq!(caps["kernel_receive_stamps"], false, "{v}");
        assert_eq!((stamped, handover), (0, frames), "{v}");
    } else {
        assert!(caps["queues"].is_null(), "{v}");
        assert_eq!(caps["kernel_receive_stamps"], true, "{v}");
        assert_eq!((stamped, handover), (frames, 0), "{v}");
    }
}

#[test]
fn bad_input_is_refused_before_any_traffic() {
    if skip("bad_input_is_refused_before_any_traffic") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let before = rig.stats(1).unwrap().rx_packets;
    for (args, needle) in [
        (
            &["--dst-ip", "198.18.0.9-198.18.0.2"][..],
            "impossible range",
        ),
        (
            &["--dst-ip", "198.18.0.2", "--size", "1600"],
            "does not fit an MTU of 1500",
        ),
        (&["--dst-ip", "198.18.0.2", "--size", "40"], "cannot carry"),
        (
            &["--dst-ip", "198.18.0.2", "--backend", "netmap"],
            "unknown backend",
        ),
        (&["--dst-ip", "198.18.0.2", "--dst-port", "1-99999"], "port"),
        (
            &["--dst-ip", "2001:db8::2", "--src-ip", "198.18.0.1"],
            "IPv4 or both IPv6",
        ),
    ] {
        let out = blast(&rig, args);
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let out = rig
        .command(0, BIN)
        .args([
            "blast",
            "--iface",
            "nosuch0",
            "--dst-ip",
            "198.18.0.2",
            "--src-ip",
            "198.18.0.1",
            "--src-mac",
            "02:00:00:00:00:01",
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nosuch0"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = rig.stats(1).unwrap().rx_packets;
    assert!(
        after - before <= 8,
        "no test traffic was sent ({} frames, MLD noise at most)",
        after - before
    );
    let _ = Command::new("true").status();
}

/// Replays the trace at `path` from host 0 with `args` (expecting `n`
/// frames sent) and returns the frames from 02:00:00:00:00:99 that host 1
/// saw, in order.
fn replay_captured(rig: &Rig, path: &std::path::Path, args: &[&str], n: u64) -> Vec<Vec<u8>> {
    capture_raw(rig, [2, 0, 0, 0, 0, 0x99], || {
        let out = rig
            .command(0, BIN)
            .args(["blast", "--iface", "veth0", "-J", "--pcap"])
            .arg(path)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(support::json(&out.stdout)["packets"], n);
    })
}

/// All frames from `src_mac` seen on host 1 while `f` runs, in order.
fn capture_raw(rig: &Rig, src_mac: [u8; 6], f: impl FnOnce()) -> Vec<Vec<u8>> {
    capture_where(rig, |fr| fr.len() >= 14 && fr[6..12] == src_mac, f)
}

/// A trace of UDP, TCP and ICMP frames (IPv4) from 02:00:00:00:00:99.
fn trace_frames() -> Vec<Vec<u8>> {
    use linerate_wire::*;
    let (s, d): (IpAddr, IpAddr) = ("198.19.0.1".parse().unwrap(), "198.19.0.2".parse().unwrap());
    let mut out = Vec::new();
    for i in 0..40u16 {
        let (proto, l4_len) = match i % 3 {
            0 => (ip_proto::UDP, 8 + 20 + usize::from(i)),
            1 => (ip_proto::TCP, 20),
            _ => (ip_proto::ICMP, 8 + 32),
        };
        let mut b = vec![0u8; 14 + 20 + l4_len];
        EthernetRepr {
            src: MacAddr([2, 0, 0, 0, 0, 0x99]),
            dst: MacAddr([2, 0, 0, 0, 0, 0x98]),
            ethertype: EtherType::IPV4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut b[..]));
        Ipv4Repr {
            src: [198, 19, 0, 1].into(),
            dst: [198, 19, 0, 2].into(),
            protocol: proto,
            payload_len: l4_len,
            ttl: 64,
            dscp: 0,
            ecn: 0,
            ident: i,
            dont_frag: true,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut b[14..]));
        let seg = &mut b[34..];
        match proto {
            ip_proto::UDP => {
                seg[8..].fill(i as u8);
                UdpRepr {
                    src_port: 4000 + i,
                    dst_port: 9,
                    payload_len: l4_len - 8,
                }
                .emit(&mut UdpPacket::new_unchecked(seg), Some((s, d)));
            }
            ip_proto::TCP => TcpRepr {
                src_port: 4000 + i,
                dst_port: 80,
                seq: u32::from(i),
                ack: 0,
                flags: TcpFlags(TcpFlags::SYN),
                window: 1000,
                urgent: 0,
                payload_len: 0,
            }
            .emit(&mut TcpPacket::new_unchecked(seg), Some((s, d))),
            _ => IcmpEchoRepr {
                version: IcmpVersion::V4,
                is_request: true,
                ident: 7,
                seq: i,
                data_len: 32,
            }
            .emit(&mut IcmpEchoPacket::new_unchecked(seg), None),
        }
        out.push(b);
    }
    out
}

fn write_pcap(frames: &[Vec<u8>], path: &std::path::Path) {
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

#[test]
fn pcap_replay_arrives_packet_for_packet_after_rewriting() {
    if skip("pcap_replay_arrives_packet_for_packet_after_rewriting") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let dir = std::env::temp_dir().join(format!("linerate-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let frames = trace_frames();
    let path = dir.join("trace.pcap");
    write_pcap(&frames, &path);
    let dst_mac = rig.host(1).mac.clone();
    for timing in ["fast", "original"] {
        let got = replay_captured(
            &rig,
            &path,
            &[
                "--loop",
                "2",
                "--pcap-timing",
                timing,
                "--dst-mac",
                &dst_mac,
                "--src-ip",
                "198.18.0.1",
                "--dst-ip",
                "198.18.0.2",
            ],
            80,
        );
        let rw = linerate_traffic::pcap::Rewrite {
            dst_mac: linerate_wire::MacAddr::parse(&dst_mac),
            src_ip: Some("198.18.0.1".parse().unwrap()),
            dst_ip: Some("198.18.0.2".parse().unwrap()),
            ..Default::default()
        };
        let mut expected: Vec<Vec<u8>> = frames.iter().chain(frames.iter()).cloned().collect();
        for f in &mut expected {
            linerate_traffic::pcap::rewrite(f, &rw);
        }
        // Short frames are padded to 60 bytes on the wire.
        let got: Vec<Vec<u8>> = got
            .into_iter()
            .zip(&expected)
            .map(|(g, e)| g[..e.len().min(g.len())].to_vec())
            .collect();
        assert_eq!(got.len(), 80, "{timing}");
        assert!(
            got == expected,
            "{timing}: replayed frames differ from the rewritten trace"
        );
        for f in &got {
            let p = parse_frame(f).unwrap();
            let L3::Ipv4(ip) = p.l3 else { panic!() };
            assert_eq!(ip.dst, std::net::Ipv4Addr::new(198, 18, 0, 2));
            assert!(
                linerate_wire::Ipv4Packet::new_checked(&f[14..])
                    .unwrap()
                    .verify_checksum()
            );
        }
    }
    // A truncated file is refused before anything is sent.
    let bytes = std::fs::read(&path).unwrap();
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let out = rig
        .command(0, BIN)
        .args(["blast", "--iface", "veth0", "--pcap"])
        .arg(&cut)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("corrupt or truncated"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sink_writes_what_arrived_to_a_pcap_file() {
    if should_skip(
        "sink_writes_what_arrived_to_a_pcap_file",
        &[
            require_root(),
            require_program("ip"),
            require_program("tcpdump"),
        ],
    ) {
        return;
    }
    let rig = Rig::pair().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sink.pcap");
    let file = path.to_str().unwrap();
    let (sink, ()) = support::sink_while(
        rig.command(1, BIN)
            .args(["sink", "--iface", "veth0", "--backend", "af_packet"])
            .args(["--duration", "10", "--count", "500", "--json"])
            .args(["--write", file, "--snaplen", "96"]),
        || {
            let out = blast(
                &rig,
                &[
                    "--dst-ip",
                    "198.18.0.2",
                    "--size",
                    "200",
                    "--count",
                    "500",
                    "--pps",
                    "50k",
                ],
            );
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        },
    );
    assert!(
        sink.status.success(),
        "{}",
        String::from_utf8_lossy(&sink.stderr)
    );
    let v = support::json(&sink.stdout);
    assert_eq!(v["packets"], 500, "{v}");
    let cap = &v["capture"];
    assert!(cap["error"].is_null(), "{cap}");
    let written = cap["frames"].as_u64().unwrap();
    assert!(written >= 500, "every probe frame written: {cap}");
    // Our own reading of the file: the header says the snaplen asked (not
    // a fixed 262144), every frame cut to it with its real length kept,
    // and the 500 probe frames among them. Raw records: pcap-file's packet
    // reader refuses an original length above the header's snaplen.
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(u32::from_le_bytes(bytes[16..20].try_into().unwrap()), 96);
    let mut r = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
    assert_eq!(r.header().snaplen, 96);
    let mut udp = 0;
    let mut total = 0;
    while let Some(p) = r.next_raw_packet() {
        let p = p.unwrap();
        total += 1;
        assert!(p.data.len() <= 96, "cut to the snaplen");
        assert_eq!(p.incl_len as usize, p.data.len());
        if p.orig_len == 196
            && p.data.len() == 96
            && p.data[12..14] == [0x08, 0x00]
            && p.data[23] == 17
        {
            udp += 1;
        }
    }
    // blast's end marker is a frame of the flow too: the sink counts the
    // copies it saw apart. It stops at its count, so a marker that comes
    // after the 500th frame may be neither counted nor written (a CI run
    // saw none: the sink was done 10 ms after its first frame).
    let markers = v["end_markers"]["frames"].as_u64().unwrap();
    assert!(markers <= 3, "{v}");
    assert_eq!((total, udp), (written, 500 + markers));
    // And tcpdump's: the file is a pcap other tools read.
    let td = Command::new("tcpdump")
        .args(["-nr", file, "udp and dst host 198.18.0.2"])
        .output()
        .unwrap();
    assert!(
        td.status.success(),
        "{}",
        String::from_utf8_lossy(&td.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&td.stdout).lines().count() as u64,
        500 + markers
    );
}

#[test]
fn sink_keeps_its_counts_when_the_interface_goes_away() {
    if skip("sink_keeps_its_counts_when_the_interface_goes_away") {
        return;
    }
    let rig = Rig::pair().unwrap();
    // Every receive backend: the raw socket errors, the rings go quiet; all
    // end early with the error and keep their counts.
    for backend in ["socket", "af_packet", "af_xdp"] {
        sink_loses_its_interface(&rig, backend);
        support::set_link(&rig, 1, "up");
        std::thread::sleep(Duration::from_millis(1500));
    }
}

fn sink_loses_its_interface(rig: &Rig, backend: &str) {
    let t0 = Instant::now();
    let (sink, ()) = support::sink_while(
        rig.command(1, BIN)
            .args(["sink", "--iface", "veth0", "--backend", backend])
            .args(["--duration", "8", "--json"]),
        || {
            let out = blast(
                rig,
                &["--dst-ip", "198.18.0.2", "--count", "300", "--pps", "50k"],
            );
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(300));
            support::set_link(rig, 1, "down");
        },
    );
    // It ends early with an error, and what arrived before it still counts.
    assert_eq!(
        sink.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&sink.stderr)
    );
    let v = support::json(&sink.stdout);
    assert_eq!(v["packets"], 300, "{backend}: {v}");
    assert_eq!(v["backend"], backend);
    assert!(
        v["error"].as_str().unwrap().contains("receiving on veth0"),
        "{v}"
    );
    assert!(String::from_utf8_lossy(&sink.stderr).contains("what arrived before it"));
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "{backend}: the sink noticed, it did not run out its 8 s"
    );
}

#[test]
fn sink_rates_cover_only_the_probe_frames() {
    if skip("sink_rates_cover_only_the_probe_frames") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let dst_mac = rig.host(1).mac.clone();
    let mac: Vec<u8> = dst_mac
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    let (sink, ()) = support::sink_while(
        rig.command(1, BIN)
            .args(["sink", "--iface", "veth0", "--backend", "socket"])
            .args(["--duration", "8", "--count", "500", "--json"]),
        || {
            // A frame that is not a probe (local experimental EtherType), well
            // before the probes: it must not open the sink's rate window.
            rig.run_in(0, || {
                let mut frame = vec![0u8; 60];
                frame[..6].copy_from_slice(&mac);
                frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x99]);
                frame[12..14].copy_from_slice(&[0x88, 0xb5]);
                let mut sock = RawSocket::open("veth0").unwrap();
                assert_eq!(sock.send(&[&frame]).unwrap(), 1);
            })
            .unwrap();
            std::thread::sleep(Duration::from_millis(700));
            let out = blast(
                &rig,
                &["--dst-ip", "198.18.0.2", "--count", "500", "--pps", "50k"],
            );
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        },
    );
    let v = support::json(&sink.stdout);
    assert_eq!(v["packets"], 500, "{v}");
    assert!(v["other_frames"].as_u64().unwrap() >= 1, "{v}");
    // 500 frames at 50 kpps take about 10 ms; the stray frame came 700 ms
    // earlier.
    let span = v["duration_s"].as_f64().unwrap();
    assert!(span < 0.3, "span {span} s includes the stray frame: {v}");
    // Arrival times are taken after recv returns: same-host latency on an
    // idle veth stays well under the 50 ms the socket may block.
    let p50 = v["latency_ns"]["p50"].as_u64().unwrap();
    assert!(p50 > 0 && p50 < 20_000_000, "p50 {p50} ns: {v}");
    // The raw socket's frames carry the kernel's receive stamp (SO_TIMESTAMPNS).
    assert!(
        v["latency_arrival"]["kernel_receive_stamp"]
            .as_u64()
            .unwrap()
            >= 500,
        "{v}"
    );
}

/// The JSON of a run that must have succeeded.
fn succeeded(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    support::json(&out.stdout)
}

/// 2 source ports x 4 destination ports, 16000 frames at 100 kpps.
const EIGHT_FLOWS_16000: [&str; 8] = [
    "--src-port",
    "1000-1001",
    "--dst-port",
    "5000-5003",
    "--count",
    "16000",
    "--pps",
    "100k",
];

/// blast on host 0 without --dst-mac (the kernel resolves it), JSON out.
fn blast_stack(rig: &Rig, args: &[&str]) -> Output {
    rig.command(0, BIN)
        .args(["blast", "--iface", "veth0", "--json"])
        .args(args)
        .output()
        .unwrap()
}

/// A sink on host 1 (raw socket backend) counting `count` probe frames
/// while `f` runs; returns the sink's JSON and what `f` returned.
fn with_sink<T: Send>(
    rig: &Rig,
    count: u64,
    f: impl FnOnce() -> T + Send,
) -> (serde_json::Value, T) {
    with_sink_for(rig, count, "15", f)
}

/// [`with_sink`] for at most `secs` seconds.
fn with_sink_for<T: Send>(
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

#[test]
fn socket_backend_sends_through_udp_sockets_where_it_can() {
    if should_skip(
        "socket_backend_sends_through_udp_sockets_where_it_can",
        &[
            require_root(),
            require_program("ip"),
            require_program("ethtool"),
        ],
    ) {
        return;
    }
    let rig = Rig::pair().unwrap();
    let dst = rig.host(1).ipv4.to_string();
    let dst6 = rig.host(1).ipv6.to_string();
    // More flows (300) than the UDP path's batch (256): it keeps a buffer
    // per flow and size (300 x IMIX's 12 = 3,600 buffers, used in turn, so
    // a call's run stops at the wrap) and writes each one's destination
    // once. 3,000 flows x IMIX would take 36,000 buffers (over 32 MiB): the
    // 256 buffers then change flow and size from frame to frame (payloads
    // written in place, destinations rewritten). Either way every flow is
    // whole and every size as sent.
    for (ports, count, pps, buffers, per_flow) in [
        ("2000-2299", 6000u64, "50k", 3600, 20),
        ("2000-4999", 30000, "100k", 256, 10),
    ] {
        let (v, out) = with_sink(&rig, count, || {
            blast_stack(
                &rig,
                &[
                    "--backend",
                    "socket:udp",
                    "--dst-ip",
                    &dst,
                    "--dst-port",
                    ports,
                    "--imix",
                    "--count",
                    &count.to_string(),
                    "--pps",
                    pps,
                ],
            )
        });
        let b = succeeded(&out);
        assert_eq!(b["backend_stats"][0]["socket_mode"], "udp", "{b}");
        assert_eq!(b["backend_stats"][0]["udp_buffers"], buffers, "{b}");
        assert_eq!(v["packets"], count, "{v}");
        assert_eq!(
            (v["lost"].as_u64(), v["duplicates"].as_u64()),
            (Some(0), Some(0)),
            "{v}"
        );
        let flows = v["flows"].as_array().unwrap();
        assert_eq!(flows.len() as u64, count / per_flow, "{v}");
        assert!(flows.iter().all(|f| f["packets"] == per_flow), "{v}");
        assert_eq!(v["bytes"], b["bytes"], "receiver's bytes = sender's: {b}");
    }
    let exact = |v: &serde_json::Value, n: u64| {
        assert_eq!(v["packets"], n, "{v}");
        assert_eq!(
            (
                v["lost"].as_u64(),
                v["duplicates"].as_u64(),
                v["reordered"].as_u64()
            ),
            (Some(0), Some(0), Some(0)),
            "{v}"
        );
    };
    // 2 source ports (2 sockets) x 4 destination ports, IPv4 and IPv6: every
    // flow arrives whole, in order.
    for (d, size) in [(&dst, "64"), (&dst6, "128")] {
        let (v, out) = with_sink(&rig, 16000, || {
            blast_stack(
                &rig,
                &[
                    &["--backend", "socket", "--dst-ip", d, "--size", size][..],
                    &EIGHT_FLOWS_16000,
                ]
                .concat(),
            )
        });
        let b = succeeded(&out);
        assert_eq!(b["backend"], "socket");
        let st = &b["backend_stats"][0];
        assert_eq!(st["socket_mode"], "udp", "{b}");
        assert_eq!(st["sockets"], 2);
        assert_eq!(st["udp_datagrams"], 16000);
        assert_eq!(st["gso"], false, "auto keeps GSO off on veth: {b}");
        let caps = &b["backend_capabilities"];
        assert_eq!(
            caps["crafted_frames"], false,
            "the kernel builds the headers: {b}"
        );
        assert_eq!(caps["gso"], false, "{b}");
        assert!(
            b["backend_note"]
                .as_str()
                .unwrap()
                .contains("GSO off on veth")
        );
        exact(&v, 16000);
        let flows = v["flows"].as_array().unwrap();
        assert_eq!(flows.len(), 8, "{v}");
        assert!(flows.iter().all(|f| f["packets"] == 2000), "{v}");
        assert_eq!(
            v["bytes"],
            16000 * size.parse::<u64>().unwrap(),
            "frames as built by the kernel"
        );
    }
    // Two workers share the source endpoints (SO_REUSEPORT), each sending
    // its half of the flows.
    let (v, out) = with_sink(&rig, 16000, || {
        blast_stack(
            &rig,
            &[
                &["--backend", "socket", "--cores", "0,1", "--dst-ip", &dst][..],
                &EIGHT_FLOWS_16000,
            ]
            .concat(),
        )
    });
    let b = succeeded(&out);
    let per_worker: Vec<u64> = b["backend_stats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["udp_datagrams"].as_u64().unwrap())
        .collect();
    assert_eq!(per_worker, vec![8000, 8000], "{b}");
    exact(&v, 16000);
    // GSO forced on while the veth passes GSO batches whole: the sink sees
    // frames longer than the MTU, says so, and counts only their first
    // datagram (the rest reads as lost).
    let (v, out) = with_sink_for(&rig, 4000, "3", || {
        blast_stack(
            &rig,
            &[
                "--backend",
                "socket:udp",
                "--gso",
                "on",
                "--dst-ip",
                &dst,
                "--size",
                "200",
                "--count",
                "4000",
                "--pps",
                "100k",
                "--burst",
                "32",
            ],
        )
    });
    succeeded(&out);
    let oversized = v["oversized_frames"].as_u64().unwrap();
    assert!(oversized > 0, "{v}");
    assert!(v["packets"].as_u64().unwrap() < 4000, "{v}");
    assert!(v["lost"].as_u64().unwrap() > 0, "{v}");
    // With the veth set to split GSO batches, auto turns GSO on: bursts of
    // 32 go as one send each, and the receiver still sees every datagram.
    let seg = rig
        .command(0, "ethtool")
        .args(["-K", "veth0", "tx-udp-segmentation", "off"])
        .status()
        .unwrap();
    assert!(seg.success());
    let (v, out) = with_sink(&rig, 20000, || {
        blast_stack(
            &rig,
            &[
                "--backend",
                "socket:udp",
                "--dst-ip",
                &dst,
                "--size",
                "200",
                "--count",
                "20000",
                "--pps",
                "100k",
                "--burst",
                "32",
            ],
        )
    });
    let b = succeeded(&out);
    let st = &b["backend_stats"][0];
    assert_eq!(st["gso"], true, "{b}");
    assert_eq!(b["backend_capabilities"]["gso"], true, "{b}");
    let (gso, msgs) = (
        st["udp_gso_messages"].as_u64().unwrap(),
        st["udp_messages"].as_u64().unwrap(),
    );
    assert!(
        gso > 0 && msgs < 20000 / 4,
        "GSO carried several datagrams per send: {st}"
    );
    exact(&v, 20000);
    // A source address that is not on this host needs raw frames: socket
    // falls back and says why; socket:udp refuses before sending.
    let out = blast_stack(
        &rig,
        &[
            "--backend",
            "socket",
            "--src-ip",
            "198.18.0.99",
            "--dst-ip",
            &dst,
            "--count",
            "10",
        ],
    );
    let b = succeeded(&out);
    assert_eq!(b["backend_stats"][0]["socket_mode"], "raw", "{b}");
    assert!(
        b["backend_note"]
            .as_str()
            .unwrap()
            .contains("198.18.0.99 is not on this host"),
        "{b}"
    );
    let out = blast_stack(
        &rig,
        &[
            "--backend",
            "socket:udp",
            "--src-ip",
            "198.18.0.99",
            "--dst-ip",
            &dst,
            "--count",
            "10",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not on this host"), "{err}");
    // The sink reads frames: socket:udp is for sending only.
    let out = rig
        .command(1, BIN)
        .args([
            "sink",
            "--iface",
            "veth0",
            "--backend",
            "socket:udp",
            "--duration",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("only sends"));
}

#[test]
fn af_packet_sink_latency_uses_the_kernel_receive_time() {
    if skip("af_packet_sink_latency_uses_the_kernel_receive_time") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let (sink, out) = support::sink_while(
        rig.command(1, BIN)
            .args(["sink", "--iface", "veth0", "--backend", "af_packet"])
            .args(["--duration", "8", "--count", "1000", "--json"]),
        || {
            blast(
                &rig,
                &["--dst-ip", "198.18.0.2", "--count", "1000", "--pps", "2k"],
            )
        },
    );
    let v = support::json(&sink.stdout);
    succeeded(&out);
    assert_eq!(v["packets"], 1000, "{v}");
    // At 2 kpps a TPACKET_V3 block is retired by its 10 ms timer, not by
    // filling up: timed at hand-over, frames would wait ~5 ms on average.
    // The ring's own receive stamps leave same-host latency in microseconds.
    let p50 = v["latency_ns"]["p50"].as_u64().unwrap();
    assert!(p50 > 0 && p50 < 2_000_000, "p50 {p50} ns: {v}");
    assert!(
        v["latency_arrival"]["kernel_receive_stamp"]
            .as_u64()
            .unwrap()
            >= 1000,
        "{v}"
    );
    assert_eq!(v["latency_arrival"]["batch_handover"], 0, "{v}");
}

#[test]
fn sink_workers_need_queues_or_fall_back() {
    if skip("sink_workers_need_queues_or_fall_back") {
        return;
    }
    // One RX queue: af_xdp cannot give two workers a queue each and says so
    // before receiving; auto falls back to af_packet's fanout and counts all.
    let rig = Rig::pair().unwrap();
    let out = rig
        .command(1, BIN)
        .args(["sink", "--iface", "veth0", "--backend", "af_xdp"])
        .args(["--cores", "0,1", "--duration", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("2 receive workers need as many RX queues (1 here)"),
        "{err}"
    );
    // --write keeps one file in arrival order: one worker only.
    let out = rig
        .command(1, BIN)
        .args(["sink", "--iface", "veth0", "--cores", "0,1", "--write"])
        .arg(std::env::temp_dir().join(format!("lr-two-{}.pcap", std::process::id())))
        .args(["--duration", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("one receive worker"));
    let (sink, blast) = support::sink_while(
        rig.command(1, BIN)
            .args(["sink", "--iface", "veth0", "--cores", "0,1"])
            .args(["--duration", "10", "--count", "8000", "--json"]),
        || {
            let out = blast(
                &rig,
                &[
                    "--dst-ip",
                    "198.18.0.2",
                    "--src-port",
                    "1000-1007",
                    "--count",
                    "8000",
                    // A rate a debug-build sink keeps up with while the other
                    // rig tests run beside it (the counts must be exact).
                    "--pps",
                    "50k",
                ],
            );
            succeeded(&out)
        },
    );
    let v = support::json(&sink.stdout);
    assert_eq!(blast["packets"], 8000, "{blast}");
    assert_eq!(v["backend"], "af_packet", "{v}");
    assert!(
        v["backend_note"]
            .as_str()
            .unwrap()
            .contains("1 RX queue(s) for 2 workers"),
        "{v}"
    );
    assert_eq!(
        (v["packets"].as_u64(), v["lost"].as_u64()),
        (Some(8000), Some(0)),
        "{v}"
    );
    assert_eq!(v["flows"].as_array().unwrap().len(), 8, "{v}");
}

/// IPv6 UDP frames with a hop-by-hop and a destination-options header
/// between the IPv6 header and UDP, from MAC 02:00:00:00:00:99.
fn ipv6_ext_frames() -> Vec<Vec<u8>> {
    (0..10u16)
        .map(|i| {
            let b =
                etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0x99], [2, 0, 0, 0, 0, 0x98])
                    .ipv6(
                        "2001:db8:9::1"
                            .parse::<std::net::Ipv6Addr>()
                            .unwrap()
                            .octets(),
                        "2001:db8:9::2"
                            .parse::<std::net::Ipv6Addr>()
                            .unwrap()
                            .octets(),
                        64,
                    )
                    .udp(4000 + i, 5000);
            let mut f = Vec::new();
            b.write(&mut f, &[i as u8; 37]).unwrap();
            // hop-by-hop -> destination options -> UDP, each 8 bytes of PadN
            f.splice(54..54, [60u8, 0, 1, 4, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0]);
            f[20] = 0;
            let plen = u16::from_be_bytes([f[18], f[19]]) + 16;
            f[18..20].copy_from_slice(&plen.to_be_bytes());
            f
        })
        .collect()
}

#[test]
fn pcap_replay_rewrites_ipv6_behind_extension_headers_with_valid_checksums() {
    if skip("pcap_replay_rewrites_ipv6_behind_extension_headers_with_valid_checksums") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let dir = std::env::temp_dir().join(format!("linerate-pcap6-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("v6ext.pcap");
    write_pcap(&ipv6_ext_frames(), &path);
    let dst_mac = rig.host(1).mac.clone();
    let (src, dst) = (rig.host(0).ipv6.to_string(), rig.host(1).ipv6.to_string());
    let got = replay_captured(
        &rig,
        &path,
        &["--dst-mac", &dst_mac, "--src-ip", &src, "--dst-ip", &dst],
        10,
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(got.len(), 10, "frames that arrived");
    for f in &got {
        // Checked by another parser: etherparse walks the extension headers
        // and recomputes the UDP checksum over the rewritten addresses.
        let p = etherparse::SlicedPacket::from_ethernet(f).unwrap();
        let Some(etherparse::NetSlice::Ipv6(ip)) = &p.net else {
            panic!("not IPv6: {p:?}")
        };
        assert_eq!(
            ip.extensions().first_header(),
            Some(etherparse::IpNumber(0)),
            "the extension headers are still there"
        );
        let h = ip.header().to_header();
        assert_eq!(h.source, rig.host(0).ipv6.octets());
        assert_eq!(h.destination, rig.host(1).ipv6.octets());
        let Some(etherparse::TransportSlice::Udp(u)) = &p.transport else {
            panic!("no UDP: {p:?}")
        };
        let want = u.to_header().calc_checksum_ipv6(&h, u.payload()).unwrap();
        assert_eq!(u.checksum(), want, "UDP checksum after the rewrite");
    }
}

#[test]
fn sink_write_refuses_files_and_links_and_fails_loudly_when_writing_fails() {
    if skip("sink_write_refuses_files_and_links_and_fails_loudly_when_writing_fails") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.pcap");
    std::fs::write(&old, b"someone's capture").unwrap();
    let link = dir.path().join("link.pcap");
    std::os::unix::fs::symlink(&old, &link).unwrap();
    for (path, force) in [(&old, false), (&link, false), (&link, true)] {
        let mut cmd = rig.command(1, BIN);
        cmd.args(["sink", "--iface", "veth0", "--duration", "1", "--write"])
            .arg(path);
        if force {
            cmd.arg("--force");
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{path:?} {force}: {err}");
        assert!(err.contains(path.to_str().unwrap()), "{err}");
    }
    assert_eq!(std::fs::read(&old).unwrap(), b"someone's capture");
    // A write that fails (the file size limit, SIGXFSZ ignored: EFBIG) is a
    // failure of the run, exit 1, and the counts are complete.
    let out_file = dir.path().join("small.pcap");
    let script = format!(
        "trap '' XFSZ; ulimit -f 16; exec {BIN} sink --iface veth0 --backend af_packet --duration 10 --count 2000 --json --write {}",
        out_file.display()
    );
    let mut sh = rig.command(1, "sh");
    sh.args(["-c", &script]);
    let (sink, ()) = support::sink_while(&mut sh, || {
        let out = blast(
            &rig,
            &[
                "--dst-ip",
                "198.18.0.2",
                "--size",
                "500",
                "--count",
                "2000",
                "--pps",
                "50k",
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    let err = String::from_utf8_lossy(&sink.stderr);
    assert_eq!(sink.status.code(), Some(1), "{err}");
    assert!(err.contains("capture failed after"), "{err}");
    let v = support::json(&sink.stdout);
    assert_eq!(v["packets"], 2000, "the count goes on: {v}");
    assert!(
        v["capture"]["error"]
            .as_str()
            .unwrap()
            .contains("File too large"),
        "{v}"
    );
    // --hist: an existing file is refused before the run; one that cannot
    // be written fails it after the counts are reported.
    let out = rig
        .command(1, BIN)
        .args(["sink", "--iface", "veth0", "--duration", "1", "--hist"])
        .arg(&old)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(&old).unwrap(), b"someone's capture");
    let out = rig
        .command(1, BIN)
        .args(["sink", "--iface", "veth0", "--duration", "1", "--json"])
        .args(["--hist", "/dev/full"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the histograms were not saved"), "{err}");
    assert_eq!(support::json(&out.stdout)["packets"], 0);
}

/// Without --dst-mac, blast addresses the next hop's MAC from the kernel's
/// neighbour table (resolving it if needed), IPv4 and IPv6, never
/// broadcast; a hop that does not answer is an error before anything is
/// sent, and no rate given says so on stderr.
#[test]
fn blast_addresses_the_neighbour_not_broadcast() {
    if skip("blast_addresses_the_neighbour_not_broadcast") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let want: Vec<u8> = rig
        .host(1)
        .mac
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    let src: Vec<u8> = rig
        .host(0)
        .mac
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    for dst in [rig.host(1).ipv4.to_string(), rig.host(1).ipv6.to_string()] {
        // Empty the neighbour table: the entry must be resolved.
        let _ = rig
            .command(0, "ip")
            .args(["neigh", "flush", "dev", "veth0"])
            .output();
        let mut out = None;
        let frames = capture_raw(&rig, src.clone().try_into().unwrap(), || {
            out = Some(
                rig.command(0, BIN)
                    .args(["blast", "--iface", "veth0", "--backend", "af_packet"])
                    .args(["--dst-ip", &dst, "--count", "200", "--size", "128"])
                    .output()
                    .unwrap(),
            );
        });
        let out = out.unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{dst}: {err}");
        assert!(err.contains("no --pps or --bitrate"), "{dst}: {err}");
        let probes: Vec<_> = frames.iter().filter(|f| is_probe(f)).collect();
        assert_eq!(probes.len(), 200, "{dst}: probes captured");
        // The end marker, three times, addressed alike.
        let markers: Vec<_> = frames.iter().filter(|f| is_marker(f)).collect();
        assert_eq!(markers.len(), 3, "{dst}: end markers");
        assert!(markers.iter().all(|f| f[..6] == want[..]), "{dst}");
        assert!(
            probes.iter().all(|f| f[..6] == want[..]),
            "{dst}: frames not addressed to {}",
            rig.host(1).mac
        );
    }
    // An on-link address nobody holds: refused, nothing sent.
    let out = rig
        .command(0, BIN)
        .args(["blast", "--iface", "veth0", "--backend", "af_packet"])
        .args(["--dst-ip", "198.18.0.99", "--count", "10", "--pps", "1k"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{err} {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(err.contains("no destination MAC for 198.18.0.99"), "{err}");
}

/// Per-flow latency and jitter on the rig: four flows, each with its own
/// min/mean/p50/p99/p99.9/max and RFC 3550 jitter, consistent with the
/// aggregate (inside its range, their counts summing to it); `--hist`
/// writes them as an HdrHistogram log (one entry per flow and `all`).
#[test]
fn sink_reports_latency_and_jitter_per_flow() {
    if skip("sink_reports_latency_and_jitter_per_flow") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hist = dir.path().join("lat.hlog");
    let (sink, out) = support::sink_while(
        rig.command(1, BIN)
            .args(["sink", "--iface", "veth0", "--backend", "af_packet"])
            .args(["--duration", "8", "--count", "4000", "--json", "--hist"])
            .arg(&hist),
        || {
            blast(
                &rig,
                &[
                    "--dst-ip",
                    "198.18.0.2",
                    "--src-port",
                    "1000-1003",
                    "--count",
                    "4000",
                    "--pps",
                    "4k",
                ],
            )
        },
    );
    succeeded(&out);
    let v = support::json(&sink.stdout);
    assert_eq!(v["packets"], 4000, "{v}");
    let all = &v["latency_ns"];
    let amax = all["max"].as_f64().unwrap();
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 4, "{v}");
    for f in flows {
        let l = &f["latency_ns"];
        let g = |k: &str| {
            l[k].as_f64()
                .unwrap_or_else(|| panic!("flow {}: no {k}: {f}", f["flow"]))
        };
        let (min, mean, p50, p99, p999, max) =
            (g("min"), g("mean"), g("p50"), g("p99"), g("p999"), g("max"));
        assert!(
            min > 0.0 && min <= p50 && p50 <= p99 && p99 <= p999 && p999 <= max,
            "{f}"
        );
        assert!(min <= mean && mean <= max, "{f}");
        // Per-flow histograms and the aggregate keep the same buckets.
        assert!(
            max <= amax,
            "flow max {max} above the aggregate's {amax}: {f}"
        );
        let j = f["jitter_ns"].as_f64().unwrap();
        assert!(j >= 0.0 && j < max, "jitter {j} ns: {f}");
        assert_eq!(f["packets"], 1000, "{f}");
    }
    let text = std::fs::read_to_string(&hist).unwrap();
    let entries: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("\"StartTimestamp"))
        .collect();
    assert_eq!(entries.len(), 5, "four flows and all: {text}");
    for tag in [
        "Tag=flow=0,",
        "Tag=flow=1,",
        "Tag=flow=2,",
        "Tag=flow=3,",
        "Tag=all,",
    ] {
        assert!(
            entries.iter().any(|l| l.starts_with(tag)),
            "no {tag} in {text}"
        );
    }
}

/// The tail of a flow lost across processes: an XDP program on the sink's
/// interface drops every probe past sequence 9900 of 10000. With end
/// markers (blast's default) the sink counts exactly those 100 as lost (the
/// sender's count arrives in the marker); with `--no-end-marker` it cannot
/// know, and says so.
#[test]
fn end_markers_let_the_sink_count_a_lost_tail() {
    if skip("end_markers_let_the_sink_count_a_lost_tail") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let _drop_tail = rig
        .run_in(1, || {
            let ifindex = linerate_backend::iface::index("veth0").unwrap();
            linerate_backend::xdp::attach(
                &linerate_backend::xdp::probe_tail_drop_program(9900),
                ifindex,
                "lr_tail_drop",
            )
        })
        .unwrap()
        .expect("attach the tail-drop XDP program");
    for marker in [true, false] {
        let (sink, out) = support::sink_while(
            rig.command(1, BIN)
                .args(["sink", "--iface", "veth0", "--backend", "af_packet"])
                .args(["--duration", "5", "--json"]),
            || {
                let mut args = vec!["--dst-ip", "198.18.0.2", "--count", "10000", "--pps", "5k"];
                // Markers by default.
                if !marker {
                    args.push("--no-end-marker");
                }
                blast(&rig, &args)
            },
        );
        succeeded(&out);
        let v = support::json(&sink.stdout);
        assert_eq!(v["packets"], 9900, "the program dropped the tail: {v}");
        let f = &v["flows"][0];
        if marker {
            assert_eq!(f["sent_by_marker"], 10000, "{f}");
            assert_eq!(f["lost"], 100, "{f}");
            assert_eq!(v["lost"], 100, "{v}");
            assert_eq!(v["end_markers"]["lost_counts_the_tail"], true, "{v}");
            assert_eq!(
                v["end_markers"]["frames"], 3,
                "three copies of one flow's marker"
            );
        } else {
            assert_eq!(f["lost"], 0, "without a marker the tail is invisible: {f}");
            assert_eq!(v["end_markers"]["lost_counts_the_tail"], false, "{v}");
        }
    }
}

/// Frames built in place (the template laid once per backend buffer, the
/// flow's fields only when the buffer held another flow, per frame the
/// sequence, time and checksum) are valid frames on every crafting backend
/// and every layout: checked by another parser (etherparse, which
/// recomputes the IPv4 header and UDP/TCP checksums), with every flow's
/// sequence numbers exactly 1..=N once each.
#[test]
fn frames_built_in_place_are_valid_on_every_backend_and_layout() {
    if skip("frames_built_in_place_are_valid_on_every_backend_and_layout") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let v6 = ["--src-ip", "2001:db8::1", "--dst-ip", "2001:db8::2"];
    let layouts: [(&str, Vec<&str>); 4] = [
        ("IPv4 UDP", vec!["--dst-ip", "198.18.0.2"]),
        ("IPv6 UDP", v6.to_vec()),
        (
            "VLAN IPv4 UDP",
            vec!["--dst-ip", "198.18.0.2", "--vlan", "7"],
        ),
        ("IPv6 TCP", [&v6[..], &["--tcp-flags", "S"]].concat()),
    ];
    // 6 flows, 100 frames each; 600 frames cycle through more buffers than
    // the socket backend's 64, so its buffers change flows.
    // Six flows (the general path), and one (the one-flow path: its
    // sequence and checksum sum kept in registers for a batch).
    let runs: [(&str, &str, &str, u64, u64); 2] = [
        ("1000-1002", "9-10", "600", 6, 100),
        ("1000", "9", "300", 1, 300),
    ];
    for ((src_ports, dst_ports, count, flows, per_flow), backend) in runs
        .into_iter()
        .flat_map(|r| ["af_xdp", "af_packet", "socket:raw"].map(|b| (r, b)))
    {
        for (name, args) in &layouts {
            let what = format!("{backend}, {name}, {flows} flow(s)");
            let frames = capture_where(&rig, is_probe, || {
                let out = blast(
                    &rig,
                    &[
                        &[
                            "--backend",
                            backend,
                            "--size",
                            "110",
                            "--src-port",
                            src_ports,
                        ],
                        &["--dst-port", dst_ports, "--count", count, "--pps", "50k"][..],
                        &args[..],
                    ]
                    .concat(),
                );
                assert!(
                    out.status.success(),
                    "{what}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert_eq!(
                    support::json(&out.stdout)["packets"],
                    flows * per_flow,
                    "{what}"
                );
            });
            let mut seqs: BTreeMap<u16, Vec<u64>> = BTreeMap::new();
            for f in &frames {
                let p = etherparse::SlicedPacket::from_ethernet(f)
                    .unwrap_or_else(|e| panic!("{what}: {e:?}"));
                let tagged = if let Some(etherparse::LinkExtSlice::Vlan(v)) = p.link_exts.first() {
                    assert_eq!(v.vlan_identifier().value(), 7, "{what}");
                    true
                } else {
                    false
                };
                // The receiving veth moves a VLAN tag into the packet's
                // metadata (its receive offload): the frame is 4 bytes shorter.
                let untagged = name.starts_with("VLAN") && !tagged;
                assert_eq!(
                    f.len(),
                    if untagged { 102 } else { 106 },
                    "{what}: frame length (110 B with FCS)"
                );
                let payload = match (&p.net, &p.transport) {
                    (
                        Some(etherparse::NetSlice::Ipv4(ip)),
                        Some(etherparse::TransportSlice::Udp(u)),
                    ) => {
                        let h = ip.header().to_header();
                        assert_eq!(
                            h.header_checksum,
                            h.calc_header_checksum(),
                            "{what}: IPv4 header"
                        );
                        let want = u.to_header().calc_checksum_ipv4(&h, u.payload()).unwrap();
                        assert_eq!(u.checksum(), want, "{what}: UDP checksum");
                        u.payload()
                    }
                    (
                        Some(etherparse::NetSlice::Ipv6(ip)),
                        Some(etherparse::TransportSlice::Udp(u)),
                    ) => {
                        let h = ip.header().to_header();
                        let want = u.to_header().calc_checksum_ipv6(&h, u.payload()).unwrap();
                        assert_eq!(u.checksum(), want, "{what}: UDP checksum");
                        u.payload()
                    }
                    (
                        Some(etherparse::NetSlice::Ipv6(ip)),
                        Some(etherparse::TransportSlice::Tcp(t)),
                    ) => {
                        let h = ip.header().to_header();
                        let want = t.to_header().calc_checksum_ipv6(&h, t.payload()).unwrap();
                        assert_eq!(t.checksum(), want, "{what}: TCP checksum");
                        assert!(t.syn(), "{what}: SYN");
                        t.payload()
                    }
                    other => panic!("{what}: unexpected layers {other:?}"),
                };
                // The probe: flow id (bytes 2..4) and sequence (4..12).
                let id = u16::from_be_bytes([payload[2], payload[3]]);
                let seq = u64::from_be_bytes(payload[4..12].try_into().unwrap());
                seqs.entry(id).or_default().push(seq);
            }
            assert_eq!(seqs.len() as u64, flows, "{what}: flows seen");
            for (id, mut s) in seqs {
                s.sort_unstable();
                assert_eq!(
                    s,
                    (1..=per_flow).collect::<Vec<_>>(),
                    "{what}: flow {id}'s sequence numbers"
                );
            }
        }
    }
}

/// A rig pair whose links have a 9000-byte MTU.
fn jumbo_pair() -> Rig {
    Rig::new(&linerate_lab::RigConfig {
        mtu: 9000,
        ..Default::default()
    })
    .unwrap()
}

/// Issue 28: `blast --size 9000` on a 9000-MTU link exited 2 with the auto
/// backend (AF_XDP's frames were smaller). Issue 30: AF_XDP carries them in
/// several buffers where the kernel can (Linux 6.6+; auto says so), and
/// skips to a backend that can, saying why, where it cannot; the sink
/// counts them all.
#[test]
fn auto_backend_carries_jumbo_frames() {
    if skip("auto_backend_carries_jumbo_frames") {
        return;
    }
    let rig = jumbo_pair();
    let (sink, out) = with_sink(&rig, 500, || {
        blast(
            &rig,
            &[
                "--dst-ip",
                "198.18.0.2",
                "--size",
                "9000",
                "--count",
                "500",
                "--pps",
                "5k",
            ],
        )
    });
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let b = support::json(&out.stdout);
    assert_eq!(b["packets"], 500, "{b}");
    let note = b["backend_note"].as_str().unwrap_or_default();
    if b["backend"] == "af_xdp" {
        assert!(note.contains("af_xdp on veth0"), "{b}");
    } else {
        assert!(note.contains("AF_XDP multi-buffer"), "{b}");
    }
    assert_eq!(sink["packets"], 500, "{sink}");
    assert_eq!(sink["bytes"], 500 * 9000, "{sink}");
}

/// Issue 30 item 5: AF_XDP beyond 2 KB frames. On a 9000-MTU link blast
/// sends each long frame as several descriptors (XDP_PKT_CONTD) and the
/// sink puts them together again (XDP_USE_SG; its program takes
/// multi-buffer frames, which veth asks of any program on a jumbo link):
/// every frame counted once, bytes exact, at each size across the chunk
/// boundaries, with the whole UMEM in flight (no rate: as fast as it goes).
#[test]
fn af_xdp_carries_frames_over_a_chunk_in_several_buffers() {
    if skip("af_xdp_carries_frames_over_a_chunk_in_several_buffers") {
        return;
    }
    let rig = jumbo_pair();
    let dst_mac = rig.host(1).mac.clone();
    for (size, count) in [
        (1500u64, 2000u64),
        (2052, 2000),
        (2053, 2000),
        (4000, 2000),
        (9018, 20_000),
    ] {
        let n = count.to_string();
        let (sink, out) = support::sink_while(
            rig.command(1, BIN).args([
                "sink",
                "--iface",
                "veth0",
                "--backend",
                "af_xdp",
                "--duration",
                "20",
                "--count",
                &n,
                "--json",
            ]),
            || {
                rig.command(0, BIN)
                    .args(["blast", "--iface", "veth0", "--dst-mac", &dst_mac, "--json"])
                    .args(["--backend", "af_xdp", "--dst-ip", "198.18.0.2"])
                    .args(["--size", &size.to_string(), "--count", &n])
                    .output()
                    .unwrap()
            },
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{size}: {err}");
        let b = support::json(&out.stdout);
        assert_eq!(b["backend"], "af_xdp", "{b}");
        assert_eq!(b["packets"], count, "{size}: {b}");
        assert_eq!(b["bytes"], count * size, "{size}: {b}");
        let s = support::json(&sink.stdout);
        assert_eq!(s["backend"], "af_xdp", "{s}");
        assert!(
            s["backend_capabilities"]["max_frame"].as_u64() > Some(9000),
            "{s}"
        );
        assert_eq!(s["packets"], count, "{size}: {s}");
        assert_eq!(s["bytes"], count * size, "{size}: {s}");
        assert_eq!(s["lost"], 0, "{size}: {s}");
        assert_eq!(s["oversized_frames"], 0, "{size}: {s}");
    }
}

/// A capture of linerate probes, stamped a minute before they are replayed
/// (issue 26 item 8): the replay writes each probe's send time as it sends
/// it, so a sink reads the path's latency, not the capture's age (it read
/// 56 s off a trace captured 56 s before).
#[test]
fn replayed_probes_carry_their_send_time() {
    if skip("replayed_probes_carry_their_send_time") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.pcap");
    let captured = linerate_backend::clock::monotonic_ns() - 56_000_000_000;
    let frames: Vec<Vec<u8>> = (1..=200u64)
        .map(|seq| {
            let mut payload = vec![0x5a; 32];
            linerate_wire::Probe {
                flow_id: 3,
                seq,
                tx_ns: captured,
            }
            .emit(&mut payload)
            .unwrap();
            let mut f = Vec::new();
            etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0x99], [2, 0, 0, 0, 0, 0x98])
                .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
                .udp(5000, 9)
                .write(&mut f, &payload)
                .unwrap();
            f
        })
        .collect();
    write_pcap(&frames, &path);
    let dst_mac = rig.host(1).mac.clone();
    let (v, out) = with_sink(&rig, 200, || {
        rig.command(0, BIN)
            .args(["blast", "--iface", "veth0", "-J", "--pcap"])
            .arg(&path)
            .args([
                "--pcap-timing",
                "fast",
                "--pps",
                "20k",
                "--dst-mac",
                &dst_mac,
            ])
            .output()
            .unwrap()
    });
    assert_eq!(succeeded(&out)["packets"], 200);
    assert_eq!(v["packets"], 200, "{v}");
    let p50 = v["latency_ns"]["p50"].as_u64().unwrap();
    let max = v["latency_ns"]["max"].as_u64().unwrap();
    assert!(
        p50 > 0 && max < 1_000_000_000,
        "latency p50 {p50} ns, max {max} ns: the capture's age, not the path's: {v}"
    );
}

/// A second sink on an interface whose AF_XDP queue another sink holds:
/// with `--backend auto` it would fall back to af_packet and count
/// nothing (the first one's XDP program takes the frames); it is refused
/// (exit 2, the reason, no ready line) instead.
#[test]
fn a_receiver_that_cannot_take_its_queue_is_refused() {
    if skip("a_receiver_that_cannot_take_its_queue_is_refused") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let (first, second) = support::sink_while(
        rig.command(1, BIN).args([
            "sink",
            "--iface",
            "veth0",
            "--backend",
            "af_xdp",
            "--duration",
            "20",
            "--json",
        ]),
        || {
            let t = Instant::now();
            let out = rig
                .command(1, BIN)
                .args([
                    "sink",
                    "--iface",
                    "veth0",
                    "--backend",
                    "auto",
                    "--duration",
                    "2",
                    "--json",
                ])
                .output()
                .unwrap();
            (out, t.elapsed())
        },
    );
    let (out, took) = second;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{err} {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        err.contains("another receiver holds its AF_XDP queue"),
        "{err}"
    );
    assert!(!err.contains("sink receiving on"), "{err}");
    assert!(took < Duration::from_secs(6), "refused after {took:?}");
    drop(first);
}

/// A second sink told `--backend af_packet` on an interface whose AF_XDP
/// queue another sink holds: it says so at start (before its ready line),
/// and having counted nothing of the 1,000 frames the first one counts,
/// it fails with the reason (issue 41: "lost 0", exit 0).
#[test]
fn an_af_packet_sink_behind_another_xdp_program_says_so_and_fails() {
    if skip("an_af_packet_sink_behind_another_xdp_program_says_so_and_fails") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let (first, second) = support::sink_while(
        rig.command(1, BIN)
            .args(["sink", "--iface", "veth0", "--backend", "af_xdp"])
            .args(["--duration", "8", "--count", "1000", "--json"]),
        || {
            support::sink_while(
                rig.command(1, BIN)
                    .args(["sink", "--iface", "veth0", "--backend", "af_packet"])
                    .args(["--duration", "2", "--json"]),
                || {
                    blast(
                        &rig,
                        &[
                            "--dst-ip",
                            "198.18.0.2",
                            "--count",
                            "1000",
                            "--pps",
                            "20000",
                        ],
                    )
                },
            )
        },
    );
    let first = support::json(&first.stdout);
    assert_eq!(first["packets"], 1000, "the holder counts them: {first}");
    let (out, sent) = second;
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let warned = err.find("warning: an XDP program (id ").expect(&err);
    assert!(warned < err.find("sink receiving on").expect(&err), "{err}");
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("this sink counted nothing, and an XDP program"),
        "{err}"
    );
}

/// `blast --dst-ip 2001:db8::2 --count 1000` with no size: the smallest
/// frame that carries IPv6, UDP and the probe (84 bytes), not a refusal
/// of the 64-byte default nobody asked for.
#[test]
fn an_ipv6_blast_without_a_size_sends_the_smallest_frame_that_fits() {
    if skip("an_ipv6_blast_without_a_size_sends_the_smallest_frame_that_fits") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let (sink, out) = support::sink_while(
        rig.command(1, BIN).args([
            "sink",
            "--iface",
            "veth0",
            "--duration",
            "10",
            "--count",
            "1000",
            "--json",
        ]),
        || {
            rig.command(0, BIN)
                .args(["blast", "--iface", "veth0", "--dst-ip", "2001:db8::2"])
                .args(["--count", "1000", "--json"])
                .output()
                .unwrap()
        },
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let b = support::json(&out.stdout);
    assert_eq!(
        (b["packets"].as_u64(), b["bytes"].as_u64()),
        (Some(1000), Some(84_000)),
        "{b}"
    );
    let s = support::json(&sink.stdout);
    assert_eq!(
        (s["packets"].as_u64(), s["bytes"].as_u64()),
        (Some(1000), Some(84_000)),
        "{s}"
    );
}

/// The client's UDP over a veth that would pass a GSO batch whole (the
/// README's "64-byte frames, as fast as possible"): GSO is turned off and
/// said, so the datagrams counted are datagrams that crossed (the server
/// receives about what the client sent, not 40 times fewer).
#[test]
fn the_clients_udp_over_a_veth_counts_datagrams_that_crossed() {
    if skip("the_clients_udp_over_a_veth_counts_datagrams_that_crossed") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let server = support::Proc::spawn(rig.command(1, BIN).args(["-s", "-1", "-J"]));
    let deadline = Instant::now() + Duration::from_secs(15);
    while !rig
        .run_in(0, || {
            std::net::TcpStream::connect(("198.18.0.2", 5201)).is_ok()
        })
        .unwrap()
    {
        assert!(Instant::now() < deadline, "no server");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = rig
        .command(0, BIN)
        .args([
            "-c",
            "198.18.0.2",
            "-u",
            "-b",
            "0",
            "-l",
            "18",
            "-t",
            "2",
            "-J",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("UDP GSO off: veth0 is a veth"), "{err}");
    let c = support::json(&out.stdout);
    let sent = c["end"]["sum_sent"]["packets"].as_u64().unwrap();
    let received = c["end"]["sum_received"]["packets"].as_u64().unwrap();
    assert!(sent > 0 && received > 0, "{c}");
    // Datagrams that crossed: the receiver's count near the sender's.
    assert!(
        received as f64 >= sent as f64 * 0.5,
        "sent {sent}, received {received}: batches crossed whole"
    );
    let _ = server.wait(Duration::from_secs(10));
}

/// `sink --iface veth0 --count 100` with no time: it listens until the
/// count (it said so), not for a default 3 s that ends before a user
/// typed the sender.
#[test]
fn a_sink_without_a_time_listens_until_stopped() {
    if skip("a_sink_without_a_time_listens_until_stopped") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let (sink, ()) = support::sink_while(
        rig.command(1, BIN)
            .args(["sink", "--iface", "veth0", "--count", "100", "--json"]),
        || {
            // Longer than the old default, then the frames.
            std::thread::sleep(Duration::from_secs(4));
            let out = blast(&rig, &["--dst-ip", "198.18.0.2", "--count", "100"]);
            assert!(out.status.success());
            std::thread::sleep(Duration::from_millis(300));
        },
    );
    let err = String::from_utf8_lossy(&sink.stderr);
    assert!(err.contains("until --count or Ctrl-C"), "{err}");
    let s = support::json(&sink.stdout);
    assert_eq!(s["packets"], 100, "{s}");
    // No time and no count: still there after 4 s, ended by Ctrl-C with
    // its report.
    let mut p = support::Proc::spawn(
        rig.command(1, BIN)
            .args(["sink", "--iface", "veth0", "--json"]),
    );
    std::thread::sleep(Duration::from_secs(4));
    assert!(p.is_running(), "the sink ended by itself");
    p.interrupt();
    let out = std::mem::replace(&mut p, support::Proc(None)).wait(Duration::from_secs(10));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("until Ctrl-C (-t sets a time)"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(support::json(&out.stdout)["packets"], 0);
}
