//! `--repeat` and `--ci-target` on the client: per-run values, the
//! statistics recomputed from the runs' own documents, the stop reason.

mod support;

use support::{json_ok, linerate};

fn runs(port: u16, rate: &str, extra: &[&str]) -> serde_json::Value {
    json_ok(
        linerate()
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
            .args(["-J", "-b", rate])
            .args(extra),
    )
}

#[test]
fn repeat_reports_each_run_and_statistics_that_add_up() {
    let (_srv, port) = support::server(&[]);
    // Unpaced: the runs differ, the statistics have something to show.
    let v = runs(port, "0", &["--repeat", "3", "--warmup-runs", "1"]);
    let docs = v["runs"].as_array().unwrap();
    assert_eq!(docs.len(), 4, "one warm-up and three runs");
    let rep = &v["repeat"];
    assert_eq!(rep["stop"], "count");
    let values: Vec<f64> = rep["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let from_docs: Vec<f64> = docs[1..]
        .iter()
        .map(|d| {
            d["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert_eq!(values, from_docs);
    assert_eq!(rep["warmup_values"].as_array().unwrap().len(), 1);
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let sd = (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let s = &rep["statistics"];
    assert!((s["mean"].as_f64().unwrap() - mean).abs() < 1e-6 * mean);
    assert!((s["stdev"].as_f64().unwrap() - sd).abs() < 1e-6 * mean.max(1.0));
    // t(0.95, 2) = 4.303
    assert!((s["t"].as_f64().unwrap() - 4.303).abs() < 0.002, "{s}");
    let hw = 4.3027 * sd / n.sqrt();
    assert!(
        (s["half_width"].as_f64().unwrap() - hw).abs() <= 1e-3 * hw.max(1.0),
        "{s}"
    );
    assert!(values.iter().all(|x| *x > 1e8), "{values:?}");
    assert!(sd > 0.0, "unpaced runs all alike? {values:?}");
}

#[test]
fn ci_target_stops_when_confident_or_at_max_runs() {
    let (_srv, port) = support::server(&[]);
    // Paced runs on loopback agree within far less than 50%.
    let v = runs(port, "200M", &["--ci-target", "50%", "--max-runs", "6"]);
    assert_eq!(v["repeat"]["stop"], "confident", "{}", v["repeat"]);
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    // An impossible target: the runs stop at --max-runs.
    let v = runs(port, "0", &["--ci-target", "0.0000001%", "--max-runs", "3"]);
    assert_eq!(v["repeat"]["stop"], "max_runs", "{}", v["repeat"]);
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    // Human output: each run, then the summary line.
    let out = linerate()
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "1",
            "-b",
            "100M",
            "--repeat",
            "2",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("run 1:") && text.contains("run 2:"), "{text}");
    assert!(text.contains("repeat: 2 runs"), "{text}");
    assert!(text.contains("95% CI"), "{text}");
}

/// rr client: the same repetition over transactions/s.
#[test]
fn rr_repeats_transactions() {
    let port = support::free_port().to_string();
    let _srv = support::Proc::spawn(linerate().args(["rr", "server", "-p", &port, "-t", "20"]));
    std::thread::sleep(std::time::Duration::from_millis(500));
    let v = json_ok(
        linerate()
            .args(["rr", "client", "127.0.0.1", "-p", &port])
            .args(["-t", "1", "-J", "--repeat", "3"]),
    );
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    let values: Vec<f64> = v["repeat"]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let from: Vec<f64> = runs
        .iter()
        .map(|r| r["transactions_per_s"].as_f64().unwrap())
        .collect();
    assert_eq!(values, from);
    assert_eq!(v["repeat"]["figure"], "transactions_per_s");
    assert_eq!(v["repeat"]["statistics"]["n"], 3);
    // The repetition's document says where it ran and the command (issue 44).
    let command: Vec<&str> = v["host"]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        command[1..],
        [
            "rr",
            "client",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "1",
            "-J",
            "--repeat",
            "3"
        ]
    );
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(v["host"]["kernel"], kernel.trim());
}
