//! Throughput searches against TBF: two rates and sizes, beside a CPU hog,
//! ordinarily configured devices, both directions with IMIX.

use crate::lab::{DutLab, serial, skip};
use linerate_testkit::{require_program, should_skip};
use std::process::Command;

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
