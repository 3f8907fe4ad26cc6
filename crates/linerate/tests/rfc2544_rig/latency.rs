//! Latency, the loss curve and back-to-back on the TBF device, through a
//! loaded forwarder, and blast counting at the receiving port.

use crate::lab::{BIN, DutLab, serial, skip};
use std::process::Command;

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
    // What each step asked, offered and counted, for a failure's message.
    let seen: Vec<String> = steps
        .iter()
        .map(|s| {
            let t = &s["trial"];
            format!(
                "load {} asked {} offered {} sent {} received {} held back {} shape {}",
                s["load"],
                t["asked_fps"],
                t["offered_fps"],
                t["sent"],
                t["received"],
                t["held_back"],
                t["shape"]
            )
        })
        .collect();
    assert!(
        losses[0] > 0.2,
        "100% of 2x the TBF rate loses about a third: {losses:?} {seen:#?}"
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
