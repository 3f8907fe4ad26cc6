//! pcap replay (rewritten, packet for packet) and the sink's `--write`.

use crate::rig::{BIN, blast, capture_raw, skip, succeeded, with_sink, write_pcap};
use crate::support;
use linerate_lab::Rig;
use linerate_testkit::{require_program, require_root, should_skip};
use linerate_wire::{L3, parse_frame};
use std::net::IpAddr;
use std::process::Command;

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
