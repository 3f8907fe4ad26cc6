//! Frames on each backend: one socket per queue, frames built in place,
//! jumbo frames and frames over an AF_XDP chunk.

use crate::rig::{BIN, blast, capture_where, is_probe, jumbo_pair, skip, with_sink};
use crate::support;
use linerate_lab::Rig;
use std::collections::BTreeMap;

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
    // queue through one socket. Both stamp each frame: af_packet's ring,
    // af_xdp's XDP program in the frame's metadata (a veth keeps it).
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
    } else {
        assert!(caps["queues"].is_null(), "{v}");
    }
    assert_eq!(caps["kernel_receive_stamps"], true, "{v}");
    assert_eq!((stamped, handover), (frames, 0), "{v}");
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
