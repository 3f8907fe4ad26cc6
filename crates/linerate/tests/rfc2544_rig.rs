//! RFC 2544 through a device under test whose capacity is known
//! independently: a namespace that routes between two veths, with a TBF
//! qdisc on its egress (TBF counts L2 bytes without FCS, so the expected
//! NDR is rate / (8 x (frame size - 4)) frames/s).

use linerate_rig::{require_program, require_root, should_skip};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// gen (ga 198.18.0.1, gb 198.18.1.2) <-> dut (da 198.18.0.2, db
/// 198.18.1.1, forwarding, TBF on db). Deleted on drop.
struct DutLab {
    gen_ns: String,
    dut_ns: String,
}

fn sh(args: &[&str]) {
    let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

impl DutLab {
    fn new(tag: &str, rate: &str) -> DutLab {
        let pid = std::process::id();
        let lab = DutLab {
            gen_ns: format!("lrt-{pid}-g{tag}"),
            dut_ns: format!("lrt-{pid}-d{tag}"),
        };
        let (g, d) = (lab.gen_ns.as_str(), lab.dut_ns.as_str());
        sh(&["ip", "netns", "add", g]);
        sh(&["ip", "netns", "add", d]);
        sh(&[
            "ip", "link", "add", "ga", "netns", g, "type", "veth", "peer", "name", "da", "netns", d,
        ]);
        sh(&[
            "ip", "link", "add", "gb", "netns", g, "type", "veth", "peer", "name", "db", "netns", d,
        ]);
        for (ns, dev, addr) in [
            (g, "ga", "198.18.0.1/24"),
            (g, "gb", "198.18.1.2/24"),
            (d, "da", "198.18.0.2/24"),
            (d, "db", "198.18.1.1/24"),
        ] {
            sh(&["ip", "-n", ns, "addr", "add", addr, "dev", dev]);
            sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
        }
        sh(&["ip", "-n", g, "link", "set", "lo", "up"]);
        sh(&["ip", "-n", d, "link", "set", "lo", "up"]);
        sh(&[
            "ip",
            "netns",
            "exec",
            d,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ]);
        // A small queue: a rate above TBF's loses frames within a
        // one-second trial; a bucket of ten full frames, so the sender's
        // pacing jitter is not taken for the device's limit.
        sh(&[
            "ip", "netns", "exec", d, "tc", "qdisc", "add", "dev", "db", "root", "tbf", "rate",
            rate, "burst", "15000", "limit", "3000",
        ]);
        // The device knows the receiving port's MAC before the first trial.
        sh(&[
            "ip",
            "netns",
            "exec",
            d,
            "ping",
            "-c",
            "1",
            "-W",
            "2",
            "198.18.1.2",
        ]);
        lab
    }

    fn dut_mac(&self) -> String {
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.dut_ns,
                "cat",
                "/sys/class/net/da/address",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    fn rfc2544(&self, args: &[&str]) -> serde_json::Value {
        let o = Command::new("ip")
            .args(["netns", "exec", &self.gen_ns, BIN, "rfc2544"])
            .args([
                "--tx-iface",
                "ga",
                "--rx-iface",
                "gb",
                "--dst-mac",
                &self.dut_mac(),
            ])
            .args(["--src-ip", "198.18.0.1", "--dst-ip", "198.18.1.2", "-J"])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
    }
}

impl Drop for DutLab {
    fn drop(&mut self) {
        for ns in [&self.gen_ns, &self.dut_ns] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// The two tests run one at a time: two searches sharing 2 CPUs pace worse.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn skip(test: &str) -> bool {
    should_skip(
        test,
        &[
            require_root(),
            require_program("ip"),
            require_program("tc"),
            require_program("ping"),
        ],
    )
}

/// NDR within 5% of what TBF enforces, at two rates and two frame sizes.
#[test]
fn throughput_finds_the_tbf_rate() {
    let _one = serial();
    if skip("throughput_finds_the_tbf_rate") {
        return;
    }
    for (tag, rate_mbit) in [("10", 10.0), ("20", 20.0)] {
        let lab = DutLab::new(tag, &format!("{rate_mbit}mbit"));
        // The search's ceiling: twice the TBF rate, on the wire.
        let max = format!("{}", rate_mbit * 2e6);
        let v = lab.rfc2544(&[
            "--sizes",
            "64,1518",
            "--tests",
            "throughput",
            "--trial-time",
            "1",
            "--max-rate",
            &max,
            "--resolution",
            "0.5%",
            "--drain",
            "0.4",
        ]);
        let results = v["throughput"].as_array().unwrap();
        assert_eq!(results.len(), 2, "{v}");
        for r in results {
            let size = r["frame_size"].as_f64().unwrap();
            let expected = rate_mbit * 1e6 / (8.0 * (size - 4.0));
            let found = r["rate_fps"].as_f64().unwrap();
            let err = (found - expected).abs() / expected;
            assert!(
                err <= 0.05,
                "{rate_mbit} Mbit/s, {size} B: NDR {found:.0} fps, TBF allows {expected:.0} ({:.1}% off)\n{r}",
                err * 100.0
            );
            // The trial that set it lost nothing, and its L2 rate is TBF's
            // (plus the FCS TBF does not count).
            assert_eq!(r["loss_ratio"], 0.0, "{r}");
            let l2 = r["rate_l2_bps"].as_f64().unwrap();
            assert!((l2 - found * size * 8.0).abs() < 1.0);
            let trials = r["trials"].as_array().unwrap();
            assert!(trials.len() <= 10, "{} trials", trials.len());
            assert!(
                trials.iter().all(|t| t["sent"].as_u64().unwrap() > 0),
                "{r}"
            );
        }
    }
}

/// Latency at the NDR, the frame loss rate curve (monotone, ending with
/// two clean steps) and back-to-back bursts on the TBF device.
#[test]
fn latency_loss_curve_and_back_to_back_on_the_tbf_device() {
    let _one = serial();
    if skip("latency_loss_curve_and_back_to_back_on_the_tbf_device") {
        return;
    }
    let lab = DutLab::new("x", "10mbit");
    let v = lab.rfc2544(&[
        "--sizes",
        "64",
        "--tests",
        "throughput,latency,loss,back-to-back",
        "--trial-time",
        "1",
        "--max-rate",
        "20000000",
        "--latency-time",
        "1",
        "--latency-load",
        "90%",
        "--b2b-repeats",
        "2",
        "--b2b-max",
        "0.1",
        "--drain",
        "0.4",
        "--warmup",
        "0.2",
        "--repeat",
        "2",
    ]);
    // Repeated: the rate is the mean of the two searches'.
    let rep = &v["throughput"][0]["repeat"];
    let runs: Vec<f64> = rep["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(runs.len(), 2, "{rep}");
    let mean = (runs[0] + runs[1]) / 2.0;
    assert!(
        (v["throughput"][0]["rate_fps"].as_f64().unwrap() - mean).abs() < 1e-6,
        "{rep}"
    );
    assert_eq!(rep["stop"], "count");
    // Every trial reconciled with the receiving interface's own counter:
    // it saw at least the probes counted (ARP and the like besides).
    for t in v["throughput"][0]["trials"].as_array().unwrap() {
        let (got, iface) = (
            t["received"].as_u64().unwrap(),
            t["rx_iface_packets"].as_u64().unwrap(),
        );
        assert!(iface >= got && iface <= got + 50, "{t}");
    }
    let ndr = v["throughput"][0]["rate_fps"].as_f64().unwrap();
    let lat = &v["latency"][0];
    let l = lat["trial"]["latency_ns"].as_array().unwrap();
    let (min, p50, max) = (
        l[0].as_f64().unwrap(),
        l[2].as_f64().unwrap(),
        l[4].as_f64().unwrap(),
    );
    assert!(min > 0.0 && min <= p50 && p50 <= max, "{lat}");
    assert!(
        (lat["rate_fps"].as_f64().unwrap() - (ndr * 0.9).round()).abs() <= 1.0,
        "{lat}"
    );
    assert_eq!(lat["trial"]["loss_ratio"], 0.0, "at 90% of the NDR: {lat}");
    let steps = v["frame_loss"].as_array().unwrap();
    let losses: Vec<f64> = steps
        .iter()
        .map(|s| s["loss_ratio"].as_f64().unwrap())
        .collect();
    assert!(
        losses[0] > 0.2,
        "100% of 2x the TBF rate loses about a third: {losses:?}"
    );
    assert!(
        losses.windows(2).all(|w| w[0] >= w[1]),
        "not monotone: {losses:?}"
    );
    let n = losses.len();
    assert!(
        n >= 2 && losses[n - 1] == 0.0 && losses[n - 2] == 0.0,
        "{losses:?}"
    );
    // The campaign plots: throughput and latency by frame size.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("rfc2544.json");
    std::fs::write(&json, v.to_string()).unwrap();
    let o = Command::new(BIN)
        .arg("plot")
        .arg(&json)
        .arg("-o")
        .arg(dir.path().join("c.svg"))
        .args(["-f", "rate,latency"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (fig, title) in [
        ("rate", "Throughput by frame size"),
        ("latency", "Latency by frame size"),
    ] {
        let svg = std::fs::read_to_string(dir.path().join(format!("c.{fig}.svg"))).unwrap();
        assert!(
            svg.contains(title) && svg.contains("frame size (bytes)"),
            "{fig}"
        );
    }
    let b = &v["back_to_back"][0];
    let bursts: Vec<u64> = b["bursts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(bursts.len(), 2);
    // A burst at 2x the TBF rate fills the bucket and queue (18000 B, 300
    // frames of 60 B) while TBF drains half of it: several hundred frames.
    assert!(bursts.iter().all(|&x| (200..3000).contains(&x)), "{b}");
}
