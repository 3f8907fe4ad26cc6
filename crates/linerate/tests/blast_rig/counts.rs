//! Exact counts, ranges, IMIX, end markers, the neighbour's address and
//! bad input refused before any traffic.

use crate::rig::{BIN, blast, capture, capture_raw, is_marker, is_probe, skip, succeeded};
use crate::support;
use linerate_backend::raw::RawSocket;
use linerate_lab::Rig;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::process::Command;
use std::time::Duration;

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
