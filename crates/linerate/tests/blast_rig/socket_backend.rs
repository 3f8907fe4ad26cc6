//! The socket backend: UDP sockets where it can, raw frames where it must.

use crate::rig::{BIN, skip, succeeded, with_sink, with_sink_for};
use crate::support;
use linerate_lab::Rig;
use linerate_testkit::{require_program, require_root, should_skip};
use std::process::Output;
use std::time::{Duration, Instant};

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
