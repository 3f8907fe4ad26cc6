//! One figure per run, written one way (issue 43 items 8 and 10): blast's
//! intervals add up to its summary and say its rate; its settings write
//! the rate typed. On loopback through UDP sockets, so no namespace and no
//! root are needed. Apart from blast_times.rs, whose timing a blast run
//! beside it would disturb.

mod support;

use support::{json, linerate};

/// An interval's sum row of `role` (a run-model document's).
fn sum_row(iv: &serde_json::Value, role: &str) -> serde_json::Value {
    iv["sums"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["role"] == role)
        .cloned()
        .unwrap_or_else(|| panic!("no {role} sum in {iv}"))
}

/// A `--pps 10000 --count 3000` blast on loopback with `-i SECONDS`: its
/// JSON document.
fn blast_with_intervals(interval: &str) -> serde_json::Value {
    let out = linerate()
        .args(["blast", "--iface", "lo", "--backend", "socket"])
        .args(["--dst-ip", "127.0.0.1", "--src-ip", "127.0.0.1"])
        .args(["--pps", "10000", "--count", "3000", "-t", "5", "-J"])
        .args(["-i", interval])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out.stdout)
}

/// Issue 43 item 8: one rate per run. The intervals are on the summary's
/// time base (the first starts at the first frame, the last ends at the
/// last) and of its counts: their packets add up to the summary's
/// exactly, their seconds to its duration, and the rate over them is its
/// rate (before: an interval row of 98.012 kpps beside a summary of
/// 100,011 pps, the set-up counted in the first interval only).
#[test]
fn blast_intervals_add_up_to_its_summary_and_say_its_rate() {
    for interval in ["0.1", "0"] {
        let v = blast_with_intervals(interval);
        let ivs = v["intervals"].as_array().unwrap();
        let tx = |iv: &serde_json::Value| sum_row(iv, "tx");
        let packets: u64 = ivs
            .iter()
            .map(|iv| tx(iv)["packets"].as_u64().unwrap())
            .sum();
        assert_eq!(
            packets,
            v["packets"].as_u64().unwrap(),
            "-i {interval}: {v}"
        );
        assert_eq!(packets, 3000);
        let seconds: f64 = ivs.iter().map(|iv| iv["seconds"].as_f64().unwrap()).sum();
        let duration = v["duration_s"].as_f64().unwrap();
        assert!(
            (seconds - duration).abs() < 1e-5,
            "-i {interval}: intervals of {seconds} s, the summary's {duration} s: {v}"
        );
        let pps = v["pps"].as_f64().unwrap();
        assert!(
            (packets as f64 / seconds - pps).abs() < pps * 1e-4,
            "-i {interval}: {} pps over the intervals, {pps} in the summary",
            packets as f64 / seconds
        );
        if interval == "0" {
            assert_eq!(ivs.len(), 1, "{v}");
            let iv_pps = tx(&ivs[0])["packets_per_second"].as_f64().unwrap();
            assert!((iv_pps - pps).abs() < pps * 1e-4, "{iv_pps} vs {pps}");
        } else {
            assert!(ivs.len() >= 2, "{v}");
        }
    }
}

/// Issue 43 item 10: blast's start event writes its rate as every rate
/// in a document (`{"pps": N}`, not Rust's `"Pps(N)"`), and its summary
/// counts "1 flow", not "1 flows".
#[test]
fn blast_writes_its_rate_typed_and_its_flow_in_the_singular() {
    let base = |extra: &[&str]| {
        let out = linerate()
            .args(["blast", "--iface", "lo", "--backend", "socket"])
            .args(["--dst-ip", "127.0.0.1", "--src-ip", "127.0.0.1"])
            .args(["--pps", "20k", "--count", "100", "-t", "5"])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let stream = base(&["--json-stream"]);
    let start: serde_json::Value = serde_json::from_str(stream.lines().next().unwrap()).unwrap();
    assert_eq!(start["event"], "start", "{stream}");
    assert_eq!(
        start["data"]["config"]["rate"],
        serde_json::json!({"pps": 20000}),
        "{start}"
    );
    let text = base(&[]);
    assert!(text.contains("; 1 flow;"), "{text}");
}

/// Issue 43: a sink's intervals span its summary's time, with `-i` too:
/// the first starts at the first arrival, the last ends at the last (not
/// at its full second), no idle interval after the traffic, their packets
/// add up to the summary's and their seconds to its duration. A sink of
/// 3 s on the loopback of a namespace of its own (root; no other test's
/// frames reach it), 1,000 frames at 1,000 pps sent into it: the last
/// arrives after 1 s and before 3, so one idle interval at most follows
/// it, which the sink holds back (`IDLE_HELD`) and leaves out.
#[test]
fn a_sinks_intervals_span_its_arrivals() {
    let name = "a_sinks_intervals_span_its_arrivals";
    let needs = [
        linerate_testkit::require_root(),
        linerate_testkit::require_program("ip"),
    ];
    if linerate_testkit::should_skip(name, &needs) {
        return;
    }
    const BIN: &str = env!("CARGO_BIN_EXE_linerate");
    let rig = linerate_lab::Rig::pair().expect("the rig");
    let (out, ()) = support::sink_while(
        rig.command(0, BIN)
            .args(["sink", "--iface", "lo", "--backend", "socket"])
            .args(["-t", "3", "-i", "1", "-J"]),
        || {
            let out = rig
                .command(0, BIN)
                .args(["blast", "--iface", "lo", "--backend", "socket"])
                .args(["--dst-ip", "127.0.0.1", "--src-ip", "127.0.0.1"])
                .args(["--pps", "1000", "--count", "1000", "-t", "3"])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        },
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out.stdout);
    let ivs = v["intervals"].as_array().unwrap();
    let rx = |iv: &serde_json::Value| sum_row(iv, "rx")["packets"].as_u64().unwrap();
    let packets: u64 = ivs.iter().map(rx).sum();
    assert_eq!(packets, v["packets"].as_u64().unwrap(), "{v}");
    assert_eq!(packets, 1000, "{v}");
    assert!(ivs.iter().all(|iv| rx(iv) > 0), "an idle interval: {v}");
    let seconds: f64 = ivs.iter().map(|iv| iv["seconds"].as_f64().unwrap()).sum();
    let duration = v["duration_s"].as_f64().unwrap();
    assert!(
        (seconds - duration).abs() < 0.06,
        "intervals of {seconds} s, the summary's {duration} s: {v}"
    );
    // The last interval ends at the last arrival: its rate is the
    // stream's, not diluted by the rest of its second (before: 209 pps
    // over a whole second for the last 209 frames). Judged where it is
    // long enough for a rate to mean something.
    let last = ivs.last().unwrap();
    let last_s = last["seconds"].as_f64().unwrap();
    let pps = rx(last) as f64 / last_s;
    assert!(
        last_s < 0.2 || (800.0..1250.0).contains(&pps),
        "last interval at {pps} pps: {last}"
    );
}
