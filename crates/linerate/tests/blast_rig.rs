//! `linerate blast` and `linerate sink` on the namespace rig: exact counts,
//! ranges that reach every value, IMIX proportions, and bad input refused
//! before any traffic.

mod support;

use linerate_backend::raw::RawSocket;
use linerate_rig::{Rig, require_program, require_root, should_skip};
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

/// Frames with a probe seen on host 1 while `f` runs: (dst ip, dst port, src port, length).
fn capture(rig: &Rig, f: impl FnOnce()) -> Vec<(IpAddr, u16, u16, usize)> {
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
                        let Ok(p) = parse_frame(&store[i][..lens[i]]) else {
                            continue;
                        };
                        if p.probe.is_none() {
                            continue;
                        }
                        idle_since = Instant::now();
                        let dst: IpAddr = match p.l3 {
                            L3::Ipv4(r) => r.dst.into(),
                            L3::Ipv6(r) => r.dst.into(),
                            L3::Other(_) => continue,
                        };
                        if let L4::Udp(u) = p.l4 {
                            out.push((dst, u.dst_port, u.src_port, lens[i]));
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
    for backend in ["af_packet", "socket", "auto"] {
        let sink = std::thread::scope(|s| {
            let h = s.spawn(|| {
                rig.command(1, BIN)
                    .args([
                        "sink",
                        "--iface",
                        "veth0",
                        "--duration",
                        "15",
                        "--count",
                        "20000",
                        "--json",
                    ])
                    .output()
                    .unwrap()
            });
            std::thread::sleep(Duration::from_millis(500));
            let out = blast(
                &rig,
                &[
                    "--backend",
                    backend,
                    "--dst-ip",
                    "198.18.0.2",
                    "--src-port",
                    "1000-1007",
                    "--count",
                    "20000",
                    "--rate",
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
            // auto picks the fastest backend built and says why.
            let expect = if backend == "auto" {
                "af_packet"
            } else {
                backend
            };
            assert_eq!(b["backend"], expect);
            assert_eq!(b["backend_note"].is_string(), backend == "auto", "{b}");
            assert_eq!(b["flows"], 8);
            h.join().unwrap()
        });
        let v = support::json(&sink.stdout);
        assert_eq!(v["packets"], 20000, "{backend}: {v}");
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
                "--rate",
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
            &["--dst-ip", "198.18.0.2", "--backend", "af_xdp"],
            "not available in this build",
        ),
        (
            &["--dst-ip", "198.18.0.2", "--backend", "dpdk"],
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
