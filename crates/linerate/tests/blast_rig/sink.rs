//! The sink: its interface gone, kernel receive times, workers and queues,
//! per-flow latency, XDP programs in the way, no time limit.

use crate::rig::{BIN, blast, skip, succeeded};
use crate::support;
use linerate_lab::Rig;
use std::time::{Duration, Instant};

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
fn af_xdp_sink_latency_uses_the_xdp_programs_receive_time() {
    if skip("af_xdp_sink_latency_uses_the_xdp_programs_receive_time") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let (sink, out) = support::sink_while(
        rig.command(1, BIN)
            .args(["sink", "--iface", "veth0", "--backend", "af_xdp"])
            .args(["--duration", "8", "--count", "4000", "--json"]),
        || {
            blast(
                &rig,
                &["--dst-ip", "198.18.0.2", "--count", "4000", "--pps", "8k"],
            )
        },
    );
    let v = support::json(&sink.stdout);
    succeeded(&out);
    assert_eq!(v["packets"], 4000, "{v}");
    assert_eq!(
        (v["lost"].as_u64(), v["kernel_drops"].as_u64()),
        (Some(0), Some(0)),
        "{v}"
    );
    // Every frame carried the XDP program's stamp, none the hand-over
    // time: probes, end markers and any other.
    let frames = ["packets", "other_frames"]
        .iter()
        .map(|k| v[k].as_u64().unwrap())
        .sum::<u64>()
        + v["end_markers"]["frames"].as_u64().unwrap();
    assert!(frames > 4000, "{v}");
    assert_eq!(v["latency_arrival"]["kernel_receive_stamp"], frames, "{v}");
    assert_eq!(v["latency_arrival"]["batch_handover"], 0, "{v}");
    // At 8 kpps each wake-up naps (a veth: up to 768 us) so it finds
    // several frames: timed at hand-over, the frames would wait half a
    // nap on average, ~380 us. Stamped in XDP, same-host latency stays in
    // microseconds.
    let p50 = v["latency_ns"]["p50"].as_u64().unwrap();
    assert!(p50 > 0 && p50 < 150_000, "p50 {p50} ns: {v}");
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
