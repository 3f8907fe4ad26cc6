//! RFC 2544 through a device under test whose capacity is known
//! independently: a namespace that routes between two veths, with a TBF
//! qdisc on its egress (TBF counts L2 bytes without FCS, so the expected
//! NDR is rate / (8 x (frame size - 4)) frames/s).

mod support;

use linerate_testkit::{require_program, require_root, should_skip};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// `linerate lab up --topology dut` under a prefix of its own: gen (ga
/// 198.18.0.1, gb 198.18.1.2) <-> dut (da 198.18.0.2, db 198.18.1.1),
/// routing with TBF on db, or `linerate fwd` da -> db. `lab down` on drop
/// (a killed test's namespaces are swept by the next rig: `lrt-<pid>-`).
struct DutLab {
    prefix: String,
    gen_ns: String,
    dut_ns: String,
}

fn lab(args: &[&str]) -> String {
    let o = Command::new(BIN).arg("lab").args(args).output().unwrap();
    assert!(
        o.status.success(),
        "lab {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

impl DutLab {
    /// The kernel routes, TBF at `rate` on db with a small queue: a rate
    /// above TBF's loses frames within a one-second trial; a bucket of ten
    /// full frames, so the sender's pacing jitter is not taken for the
    /// device's limit.
    fn new(tag: &str, rate: &str) -> DutLab {
        Self::up(
            tag,
            &[
                "--dut-rate",
                rate,
                "--dut-limit",
                "3000",
                "--dut-burst",
                "15000",
            ],
        )
    }

    fn up(tag: &str, extra: &[&str]) -> DutLab {
        let prefix = format!("lrt-{}-{tag}", std::process::id());
        let lab_ = DutLab {
            gen_ns: format!("{prefix}-gen"),
            dut_ns: format!("{prefix}-dut"),
            prefix,
        };
        let text = lab(&[
            &["up", "--topology", "dut", "--prefix", &lab_.prefix][..],
            extra,
        ]
        .concat());
        assert!(text.contains(&lab_.gen_ns), "{text}");
        lab_
    }

    fn mac(&self, ns: &str, dev: &str) -> String {
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "cat",
                &format!("/sys/class/net/{dev}/address"),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// linerate in the generator namespace, -J, its document.
    fn gen_json(&self, args: &[&str]) -> serde_json::Value {
        support::json_ok(
            Command::new("ip")
                .args(["netns", "exec", &self.gen_ns, BIN])
                .args(args),
        )
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
        self.rfc2544_on(None, args)
    }

    /// rfc2544 -J, the whole process on `cpu` when given (taskset).
    fn rfc2544_on(&self, cpu: Option<&str>, args: &[&str]) -> serde_json::Value {
        let dut_mac = self.dut_mac();
        let mut all = vec![
            "rfc2544",
            "--tx-iface",
            "ga",
            "--rx-iface",
            "gb",
            "--dst-mac",
            &dut_mac,
            "--src-ip",
            "198.18.0.1",
            "--dst-ip",
            "198.18.1.2",
            "-J",
        ];
        all.extend_from_slice(args);
        match cpu {
            None => self.gen_json(&all),
            Some(cpu) => support::json_ok(
                Command::new("ip")
                    .args(["netns", "exec", &self.gen_ns, "taskset", "-c", cpu, BIN])
                    .args(&all),
            ),
        }
    }
}

impl Drop for DutLab {
    fn drop(&mut self) {
        let _ = Command::new(BIN)
            .args(["lab", "down", "--prefix", &self.prefix])
            .output();
    }
}

/// The tests run one at a time, and beside no other test that measures
/// (two searches sharing 2 CPUs pace worse).
fn serial() -> linerate_testkit::Measuring {
    linerate_testkit::measuring()
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
        let max = format!("{}bps", rate_mbit * 2e6);
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
            let scored = trials.iter().filter(|t| t.get("spoiled").is_none()).count();
            assert!(scored <= 10, "{scored} trials");
            assert!(
                trials.iter().all(|t| t["sent"].as_u64().unwrap() > 0),
                "{r}"
            );
        }
    }
}

/// A busy thread of this test pinned to one CPU, spinning until dropped
/// or for at most `secs` (bounded even if the test hangs).
struct Hog {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Hog {
    fn on(cpu: usize, secs: u64) -> Hog {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            linerate_backend::cpu::pin(cpu).expect("pinning the hog");
            let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
            let mut x = 0u64;
            while !flag.load(Ordering::Relaxed) && std::time::Instant::now() < end {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        });
        Hog {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The sender shares its CPU with a busy task (the whole rfc2544 process
/// and a shell loop pinned to CPU 0): it is descheduled for milliseconds
/// now and then. The departures it missed are skipped, never sent in a
/// burst the TBF would score as the device's loss, and a trial whose
/// shape broke by more than the bound is run again, not scored: the NDR
/// still within 5% of what TBF allows, and every scored trial within its
/// bound.
#[test]
fn throughput_holds_beside_a_cpu_hog_on_the_senders_cpu() {
    let _one = serial();
    if skip("throughput_holds_beside_a_cpu_hog_on_the_senders_cpu")
        || should_skip(
            "throughput_holds_beside_a_cpu_hog_on_the_senders_cpu",
            &[require_program("taskset")],
        )
    {
        return;
    }
    let lab = DutLab::new("hog", "20mbit");
    let _hog = Hog::on(0, 240);
    let v = lab.rfc2544_on(
        Some("0"),
        &[
            "--sizes",
            "1518",
            "--tests",
            "throughput",
            "--trial-time",
            "1",
            "--max-rate",
            "40000000bps",
            "--resolution",
            "0.5%",
            "--drain",
            "0.4",
            "--spoiled-max",
            "8",
        ],
    );
    let r = &v["throughput"][0];
    let expected = 20e6 / (8.0 * 1514.0);
    let found = r["rate_fps"].as_f64().unwrap();
    let err = (found - expected).abs() / expected;
    let trials = r["trials"].as_array().unwrap();
    assert!(
        err <= 0.05,
        "NDR {found:.0} fps beside a CPU hog, TBF allows {expected:.0} ({:.1}% off)\n{r}",
        err * 100.0
    );
    assert_eq!(r["loss_ratio"], 0.0, "{r}");
    // The hog was felt: the sender woke late in some trial.
    let late: u64 = trials
        .iter()
        .map(|t| t["shape"]["late_wakeups"].as_u64().unwrap())
        .sum();
    assert!(late > 0, "no late wake-up beside the hog: {r}");
    // Every scored trial kept its shape (no catch-up beyond the bound),
    // and the rate found is one a scored pass offered, skips left out.
    for t in trials.iter().filter(|t| t.get("spoiled").is_none()) {
        // 1518 B: the default bound is 4 frames (6 KB).
        assert_eq!(t["shape"]["burst_tolerance"], 4, "{t}");
        assert!(t["shape"]["max_burst"].as_u64().unwrap() <= 4, "{t}");
    }
    let offered = trials
        .iter()
        .filter(|t| t["passed"] == true)
        .map(|t| t["offered_fps"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(
        found <= offered + 0.5,
        "{found} above what any pass offered: {r}"
    );
    let spoiled = trials.iter().filter(|t| t.get("spoiled").is_some()).count();
    assert_eq!(r["spoiled_trials"].as_u64(), Some(spoiled as u64));
}

/// Devices shaped as users shape them (`tc qdisc add dev db root tbf
/// ...` with ordinary buckets and queues, no `--max-rate`: the search
/// starts at the veth's 10 Gbit/s): the NDR within 5% of the rate TBF
/// enforces, in a bounded number of trials. Trials above the rate are
/// held back by the device (back-pressure) or lose frames; a queue that
/// absorbs a 1 s trial's excess shows in the rate frames came out at.
#[test]
fn throughput_finds_the_rate_of_ordinarily_configured_tbf_devices() {
    let _one = serial();
    if skip("throughput_finds_the_rate_of_ordinarily_configured_tbf_devices") {
        return;
    }
    let cases = [
        (
            "o1",
            "rate 50mbit burst 32kbit limit 100000",
            50e6,
            "64,1518",
        ),
        (
            "o2",
            "rate 20mbit burst 16kbit latency 50ms",
            20e6,
            "64,imix",
        ),
        ("o3", "rate 100mbit burst 64kb limit 200000", 100e6, "1518"),
    ];
    for (tag, tbf, rate, sizes) in cases {
        let lab = DutLab::up(tag, &[]);
        let mut tc = Command::new("ip");
        tc.args([
            "netns",
            "exec",
            &lab.dut_ns,
            "tc",
            "qdisc",
            "add",
            "dev",
            "db",
        ])
        .args(["root", "tbf"])
        .args(tbf.split(' '));
        assert!(tc.status().unwrap().success(), "tc {tbf}");
        let v = lab.rfc2544(&[
            "--sizes",
            sizes,
            "--tests",
            "throughput",
            "--trial-time",
            "1",
        ]);
        let results = v["throughput"].as_array().unwrap();
        assert_eq!(results.len(), sizes.split(',').count(), "{v}");
        for r in results {
            // TBF counts L2 bytes without FCS.
            let mean = r["mean_frame_size"].as_f64().unwrap();
            let expected = rate / (8.0 * (mean - 4.0));
            let found = r["rate_fps"].as_f64().unwrap();
            let err = (found - expected).abs() / expected;
            let trials = r["trials"].as_array().unwrap();
            let log: Vec<String> = trials
                .iter()
                .map(|t| {
                    format!(
                        "asked {:.0} offered {:.0} forwarded {:.0} sent {} received {} passed {}",
                        t["asked_fps"].as_f64().unwrap(),
                        t["offered_fps"].as_f64().unwrap(),
                        t["forwarded_fps"].as_f64().unwrap(),
                        t["sent"],
                        t["received"],
                        t["passed"]
                    )
                })
                .collect();
            assert!(
                err <= 0.05,
                "tbf {tbf}, {} B: NDR {found:.0} fps, TBF allows {expected:.0} ({:.1}% off)\n{}",
                r["frame_size"],
                err * 100.0,
                log.join("\n")
            );
            assert_eq!(r["loss_ratio"], 0.0, "{r}");
            assert_eq!(r["converged"], true, "{}", log.join("\n"));
            let scored = trials.iter().filter(|t| t.get("spoiled").is_none()).count();
            assert!(scored <= 24, "{scored} trials:\n{}", log.join("\n"));
            // The first trial asked the port's speed (a veth's 10 Gbit/s, L1).
            let first = trials[0]["asked_fps"].as_f64().unwrap();
            let line = 10e9 / (8.0 * (mean + 20.0));
            assert!((first - line).abs() <= 1.0, "{first} vs {line}");
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
        "20Mbps",
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

/// blast counting at its second port (--rx-iface) through the device,
/// repeated: each run's sender and receiver counts are exact, and the
/// repetition's figure is the receiver's rate of each run.
#[test]
fn blast_counts_at_the_receiving_port_and_repeats() {
    let _one = serial();
    if skip("blast_counts_at_the_receiving_port_and_repeats") {
        return;
    }
    let lab = DutLab::new("b", "100mbit");
    let v = lab.gen_json(&[
        "blast",
        "--iface",
        "ga",
        "--rx-iface",
        "gb",
        "--dst-mac",
        &lab.dut_mac(),
        "--src-ip",
        "198.18.0.1",
        "--dst-ip",
        "198.18.1.2",
        "--size",
        "128",
        "--count",
        "3000",
        "--pps",
        "30000",
        "--drain",
        "0.3",
        "--repeat",
        "3",
        "-J",
    ]);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{v}");
    let mut rates = Vec::new();
    for r in runs {
        assert_eq!(r["packets"], 3000, "sender: {r}");
        assert_eq!(r["bytes"], 3000 * 128, "sender: {r}");
        let rx = &r["receiver"];
        assert_eq!(rx["iface"], "gb");
        assert_eq!(rx["packets"], 3000, "receiver: {rx}");
        assert_eq!(rx["bytes"], 3000 * 128, "receiver: {rx}");
        assert_eq!((&rx["lost"], &rx["not_received"]), (&0.into(), &0.into()));
        let lat = &rx["latency_ns"];
        assert!(lat["p50"].as_u64().unwrap() > 0, "{rx}");
        rates.push(rx["pps"].as_f64().unwrap());
    }
    let rep = &v["repeat"];
    let values: Vec<f64> = rep["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(values, rates, "{rep}");
    let mean = rates.iter().sum::<f64>() / 3.0;
    assert!((rep["statistics"]["mean"].as_f64().unwrap() - mean).abs() < 1e-6);
    // The receiver's rate: frames between its first and last arrival.
    assert!(
        rates.iter().all(|r| (25_000.0..36_000.0).contains(r)),
        "{rates:?}"
    );
}

/// --bidir with an IMIX through a device shaped one way: the search finds
/// the shaped direction's rate (TBF counts L2 bytes without FCS: the mix's
/// mean size less 4), and every trial carries both directions.
///
/// TBF's queue holds 15,000 B here: about 40 frames of the mix, as the
/// 3,000 B queue holds 47 frames of 64 B (at 3,000 B it held two 1,518 B
/// frames, and one stall of the sender lost frames 6% below the rate once
/// in CI). Bucket and queue let a one-second trial pass at most 30,000 B
/// above the rate (1.2% at this mix and rate): well inside the 5% checked.
#[test]
fn bidirectional_imix_throughput_finds_the_shaped_direction() {
    let _one = serial();
    if skip("bidirectional_imix_throughput_finds_the_shaped_direction") {
        return;
    }
    let lab = DutLab::up("i", &["--dut-rate", "20mbit", "--dut-limit", "15000"]);
    let rev_mac = lab.mac(&lab.dut_ns, "db");
    let search = || {
        lab.rfc2544(&[
            "--bidir",
            "--reverse-dst-mac",
            &rev_mac,
            "--sizes",
            "imix",
            "--tests",
            "throughput",
            "--trial-time",
            "1",
            "--max-rate",
            "40Mbps",
            "--resolution",
            "0.5%",
            "--drain",
            "0.4",
        ])
    };
    let mean = (7.0 * 64.0 + 4.0 * 594.0 + 1518.0) / 12.0;
    let expected = 20e6 / (8.0 * (mean - 4.0));
    let found = |v: &serde_json::Value| v["throughput"][0]["rate_fps"].as_f64().unwrap();
    let mut v = search();
    // A search that met a stall of the sender (the shared VM) finds a rate
    // below the device's: one such search is tried again. Above the rate is
    // never excused.
    if found(&v) < expected * 0.95 {
        eprintln!(
            "bidir imix: NDR {:.0} fps, TBF allows {expected:.0}: the sender stalled? trying again",
            found(&v)
        );
        v = search();
    }
    let r = &v["throughput"][0];
    assert_eq!(r["frame_size"], "imix", "{r}");
    assert_eq!(r["bidirectional"], true);
    assert!((r["mean_frame_size"].as_f64().unwrap() - mean).abs() < 1e-9);
    let found = found(&v);
    let err = (found - expected).abs() / expected;
    assert!(
        err <= 0.05,
        "bidir imix: NDR {found:.0} fps per direction, TBF allows {expected:.0} ({:.1}% off)\n{r}",
        err * 100.0
    );
    for t in r["trials"].as_array().unwrap() {
        let d = t["directions"].as_array().unwrap();
        assert_eq!(d.len(), 2, "{t}");
        let (f, b) = (&d[0], &d[1]);
        assert_eq!(
            t["sent"].as_u64().unwrap(),
            f["sent"].as_u64().unwrap() + b["sent"].as_u64().unwrap()
        );
        // The way back is not shaped: it loses nothing at these rates.
        if t["reason"] != "offered load not reached" {
            assert_eq!(b["loss_ratio"], 0.0, "{t}");
        }
        // The mix's bytes: exact multiples of whole 12-frame cycles aside,
        // the mean size per frame sent.
        let per = t["sent_bytes"].as_f64().unwrap() / t["sent"].as_f64().unwrap();
        assert!((per - mean).abs() < 2.0, "{per} B per frame: {t}");
    }
}

/// The second device: `linerate fwd` with the loaded-server options
/// (random memory reads per frame). Latency at the throughput found is
/// above latency at a tenth of it: it rises with load.
#[test]
fn latency_rises_with_load_through_a_loaded_forwarder() {
    let _one = serial();
    if skip("latency_rises_with_load_through_a_loaded_forwarder") {
        return;
    }
    let lab = DutLab::up(
        "f",
        &[
            "--dut",
            "fwd",
            "--fwd-time",
            "300",
            "--fwd-args",
            "--mem-mb 64 --reads 200",
        ],
    );
    let run = || {
        let v = lab.rfc2544(&[
            "--sizes",
            "64",
            "--tests",
            "throughput,latency",
            "--trial-time",
            "1",
            "--max-rate",
            "400kpps",
            "--resolution",
            "2%",
            "--loss-ratio",
            "0.1%",
            "--latency-load",
            "10%,100%",
            "--latency-time",
            "1",
            "--drain",
            "0.3",
        ]);
        let ndr = v["throughput"][0]["rate_fps"].as_f64().unwrap();
        assert!(ndr > 1000.0, "the forwarder forwarded: {v}");
        let lat = v["latency"].as_array().unwrap();
        assert_eq!(lat.len(), 2);
        let mean = |l: &serde_json::Value| l["trial"]["latency_ns"][1].as_f64().unwrap();
        assert_eq!(
            (lat[0]["load"].as_f64(), lat[1]["load"].as_f64()),
            (Some(0.1), Some(1.0))
        );
        // The loads are shares of the throughput found (here the PDR: the
        // least loss searched).
        for l in lat {
            let want = (ndr * l["load"].as_f64().unwrap()).round();
            assert!((l["rate_fps"].as_f64().unwrap() - want).abs() <= 1.0, "{l}");
        }
        (ndr, mean(&lat[0]), mean(&lat[1]))
    };
    // Seen: 41-50 us at a tenth, 11-17 ms at the throughput found. On a
    // shared VM the search can run while the host is slow and find a rate
    // the forwarder then handles with room to spare (once in CI: 119 us
    // against 241 us, the low-load figure itself 2.5 times its usual): the
    // property is about the forwarder, so one such run is tried again.
    let (mut ndr, mut low, mut high) = run();
    if high <= 3.0 * low {
        eprintln!(
            "latency at {ndr:.0} fps {high:.0} ns vs {low:.0} ns at a tenth: the host was slow during the search? trying again"
        );
        (ndr, low, high) = run();
    }
    assert!(
        high > 3.0 * low,
        "mean latency at {ndr:.0} fps ({high:.0} ns) is not well above that at a tenth of it ({low:.0} ns)"
    );
}

impl DutLab {
    /// rfc2544 --json-stream over sizes 64,1518 (and `args`), sent a
    /// SIGINT 200 ms into the 1518 B trial after the `after`th: its events,
    /// exit status, and whether the signal was sent.
    fn interrupted(
        &self,
        args: &[&str],
        after: usize,
    ) -> (Vec<serde_json::Value>, std::process::ExitStatus, bool) {
        use std::io::BufRead;
        let dut_mac = self.dut_mac();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.gen_ns, BIN, "rfc2544"])
            .args([
                "--tx-iface",
                "ga",
                "--rx-iface",
                "gb",
                "--dst-mac",
                &dut_mac,
            ])
            .args([
                "--src-ip",
                "198.18.0.1",
                "--dst-ip",
                "198.18.1.2",
                "--json-stream",
            ])
            .args(["--sizes", "64,1518", "--tests", "throughput"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut events: Vec<serde_json::Value> = Vec::new();
            let mut signalled = false;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let ev: serde_json::Value = serde_json::from_str(&line).unwrap();
                events.push(ev);
                let big = events
                    .iter()
                    .filter(|e| {
                        e["event"] == "interval"
                            && e["data"]["rows"][0]["id"]
                                .as_str()
                                .is_some_and(|id| id.starts_with("1518 B trial"))
                    })
                    .count();
                if big >= after && !signalled {
                    // Into the next 1518 B trial.
                    std::thread::sleep(std::time::Duration::from_millis(200));
                    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
                    signalled = true;
                }
            }
            (events, signalled)
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("rfc2544 did not end within 300 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        let (events, signalled) = reader.join().unwrap();
        (events, status, signalled)
    }
}

/// SIGINT during the second frame size's search: the first size's
/// result and the second's finished trials are all in the result (the
/// `--json-stream` end's, which is `-J`'s document), the trial cut short
/// is marked interrupted (not a failure), and the exit code says
/// interrupted (130).
#[test]
fn an_interrupted_campaign_keeps_every_finished_trial() {
    let _one = serial();
    if skip("an_interrupted_campaign_keeps_every_finished_trial") {
        return;
    }
    let lab = DutLab::new("int", "20mbit");
    let (events, status, signalled) = lab.interrupted(&["--trial-time", "0.5"], 2);
    assert!(signalled, "no second 1518 B trial: {events:#?}");
    assert_eq!(status.code(), Some(130));
    let end = events.last().unwrap();
    assert_eq!(end["event"], "end", "{end}");
    let v = &end["data"]["result"];
    let tp = v["throughput"].as_array().unwrap();
    assert_eq!(tp.len(), 2, "both sizes kept: {v}");
    assert_eq!(tp[0]["frame_size"], 64);
    assert!(tp[0].get("interrupted").is_none(), "{}", tp[0]);
    assert_eq!(tp[1]["frame_size"], 1518);
    assert_eq!(tp[1]["interrupted"], true);
    let trials = tp[1]["trials"].as_array().unwrap();
    assert!(trials.len() >= 3, "{}", tp[1]);
    let cut = trials.last().unwrap();
    assert_eq!(
        (&cut["interrupted"], &cut["passed"]),
        (&serde_json::json!(true), &serde_json::json!(false))
    );
    assert!(
        trials[..trials.len() - 1]
            .iter()
            .all(|t| t.get("interrupted").is_none())
    );
    assert!(
        v["error"]
            .as_str()
            .unwrap_or("")
            .starts_with("interrupted by a stop"),
        "{}",
        v["error"]
    );
    // Every trial was also an interval of the stream, the cut one too.
    let intervals = events.iter().filter(|e| e["event"] == "interval").count();
    let all_trials: usize = tp
        .iter()
        .map(|t| t["trials"].as_array().unwrap().len())
        .sum();
    assert_eq!(intervals, all_trials);
}

/// The blast command `lab up --topology dut --dut fwd` suggests runs as
/// printed (it once failed: no MAC for the far address through a
/// forwarder that answers no ARP).
#[test]
fn the_dut_labs_suggested_blast_runs_as_printed() {
    let _one = serial();
    if skip("the_dut_labs_suggested_blast_runs_as_printed") {
        return;
    }
    let prefix = format!("lrt-{}-try", std::process::id());
    let text = lab(&[
        "up",
        "--topology",
        "dut",
        "--prefix",
        &prefix,
        "--dut",
        "fwd",
    ]);
    let _down = DutLab {
        gen_ns: format!("{prefix}-gen"),
        dut_ns: format!("{prefix}-dut"),
        prefix: prefix.clone(),
    };
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| l.contains(" linerate blast "))
        .unwrap_or_else(|| panic!("no blast suggested: {text}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&words[..3], ["ip", "netns", "exec"], "{line}");
    let at = words.iter().position(|w| *w == "linerate").unwrap();
    let out = Command::new("ip")
        .args(&words[1..at])
        .arg(BIN)
        .args(&words[at + 1..])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A real search through the lab's device written as an HTML report
/// (`--report`): the section 26 tables, the trials, the plots, and the
/// figures of the run's own `-J` document in them.
#[test]
fn a_real_search_writes_its_html_report() {
    let _one = serial();
    if skip("a_real_search_writes_its_html_report") {
        return;
    }
    let lab = DutLab::new("html", "10mbit");
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("rfc2544.html");
    let v = lab.rfc2544(&[
        "--sizes",
        "512",
        "--tests",
        "throughput,latency",
        "--trial-time",
        "1",
        "--latency-time",
        "1",
        "--max-rate",
        "20Mbps",
        "--drain",
        "0.4",
        // A loaded host spoils trials: this test is of the report.
        "--spoiled-max",
        "50",
        "-i",
        "0",
        "--report",
        page.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    let t = &v["throughput"][0];
    for key in ["rate_fps", "rate_l1_bps", "rate_l2_bps"] {
        let n = t[key].as_f64().unwrap();
        assert!(
            html.contains(&format!("data-value=\"{n}\"")),
            "{key} {n} not in the report"
        );
    }
    for class in ["rfc2544-throughput", "rfc2544-latency", "rfc2544-trials"] {
        assert!(
            html.contains(&format!("<table class=\"{class}\"")),
            "{class}"
        );
    }
    let trials = t["trials"].as_array().unwrap().len();
    let rows = html
        .split("<table class=\"rfc2544-trials\"")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap()
        .matches("<tr>")
        .count();
    assert_eq!(rows, trials + 1, "a row per trial and the head");
    assert!(html.contains("<svg"));
}

/// `--resume`: a campaign cut short in its 1518 B search, resumed from
/// its `--json-stream` output, ends as one whole result: the 64 B search
/// taken as it was (no trial of it runs again), the 1518 B one going on
/// from its finished trials, none interrupted, exit 0; a command with other
/// settings is refused naming the field.
#[test]
fn an_interrupted_campaign_resumes_from_its_output() {
    let _one = serial();
    if skip("an_interrupted_campaign_resumes_from_its_output") {
        return;
    }
    let lab = DutLab::new("res", "20mbit");
    let quick = [
        "--trial-time",
        "0.5",
        "--drain",
        "0.2",
        "--max-rate",
        "40Mbps",
        "--resolution",
        "5%",
        // a busy 2-CPU machine spoils a debug build's trials now and then
        "--spoiled-max",
        "20",
    ];
    let (events, status, signalled) = lab.interrupted(&quick, 1);
    assert!(
        signalled && status.code() == Some(130),
        "{status:?} {events:#?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cut.jsonl");
    let lines: Vec<String> = events.iter().map(|e| e.to_string()).collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let cut = &events.last().unwrap()["data"]["result"]["throughput"];
    let done_1518 = cut[1]["trials"].as_array().unwrap().len() - 1;
    let file_arg = file.to_str().unwrap();
    let dut_mac = lab.dut_mac();
    let resume = |extra: &[&str]| {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.gen_ns,
                BIN,
                "rfc2544",
                "--tx-iface",
                "ga",
            ])
            .args([
                "--rx-iface",
                "gb",
                "--dst-mac",
                &dut_mac,
                "--src-ip",
                "198.18.0.1",
            ])
            .args([
                "--dst-ip",
                "198.18.1.2",
                "--sizes",
                "64,1518",
                "--resume",
                file_arg,
            ])
            .args(["-J", "--progress"])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = resume(&quick);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Progress for people on stderr (asked: stderr is no terminal here),
    // none in the document.
    assert!(err.contains("linerate: progress: trial 1 of ~"), "{err}");
    let v = support::json(&o.stdout);
    assert!(!v.to_string().contains("of ~"), "{v}");
    let tp = v["throughput"].as_array().unwrap();
    assert_eq!(tp.len(), 2, "{v}");
    assert!(v.get("error").is_none(), "{v}");
    assert_eq!(v["config"]["resumed_from"], file_arg);
    assert_eq!(tp[0]["trials"], cut[0]["trials"], "64 B taken as it was");
    let trials = tp[1]["trials"].as_array().unwrap();
    assert!(
        trials.iter().all(|t| t.get("interrupted").is_none()),
        "{}",
        tp[1]
    );
    assert_eq!(
        trials[..done_1518],
        cut[1]["trials"].as_array().unwrap()[..done_1518]
    );
    assert!(trials.len() > done_1518 && tp[1]["rate_fps"].as_f64().unwrap() > 0.0);
    let mut other = quick;
    other[1] = "1";
    let o = resume(&other);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("trial_time_s is 0.5"),
        "{err}"
    );
}
