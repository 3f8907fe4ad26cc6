//! `--metrics ADDR:PORT`: the series equal what the run reports, a real
//! Prometheus (Debian's package) scrapes them from a running sink, and
//! `promtool check metrics` accepts the exposition.

mod support;

use linerate_lab::Rig;
use linerate_testkit::{require_program, require_root, should_skip};
use std::io::{BufRead, Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::{Proc, free_port, json, linerate};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// `GET path` over HTTP/1.0; the body.
fn http_get(addr: &str, path: &str) -> Result<String, String> {
    let mut c = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(c, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut s = String::new();
    c.read_to_string(&mut s).map_err(|e| e.to_string())?;
    let (head, body) = s.split_once("\r\n\r\n").ok_or("no HTTP header")?;
    if !head.contains(" 200 ") {
        return Err(head.to_string());
    }
    Ok(body.to_string())
}

/// The value of the sample whose line starts with `prefix` (name and labels).
fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// An iperf3-mode server's series: the receiver's bytes over a test are
/// exactly what the test moved (-n), the runs are counted.
#[test]
fn a_server_exposes_exactly_what_it_measured() {
    let mport = free_port();
    let maddr = format!("127.0.0.1:{mport}");
    let (_srv, port) = support::server(&["--metrics", &maddr]);
    for _ in 0..2 {
        let c = linerate()
            .args([
                "-c",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-J",
                "-n",
                "10M",
            ])
            .output()
            .unwrap();
        let v = json(&c.stdout);
        assert!(v.get("error").is_none(), "{}", v["error"]);
    }
    // The server's end comes a moment after the client's.
    let deadline = Instant::now() + Duration::from_secs(5);
    let text = loop {
        let t = http_get(&maddr, "/metrics").unwrap();
        if t.contains(r#"linerate_runs_ended_total{mode="server",outcome="ok"} 2"#)
            || Instant::now() > deadline
        {
            break t;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        text.contains(r#"linerate_runs_started_total{mode="server"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"linerate_runs_ended_total{mode="server",outcome="ok"} 2"#),
        "{text}"
    );
    let bytes = sample(
        &text,
        r#"linerate_bytes_total{mode="server",scope="sum",id="sum",role="receiver",counted_by="receiver"}"#,
    );
    assert_eq!(bytes, Some(2.0 * f64::from(10u32 << 20)), "{text}");
    assert!(http_get(&maddr, "/nothing").is_err());
}

/// Waits up to 10 s for the exposition to hold `line`; the last text read.
fn scrape_until(maddr: &str, line: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let t = http_get(maddr, "/metrics").unwrap();
        if t.contains(line) || Instant::now() > deadline {
            return t;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Each server test is a run of its own: a test whose client vanishes
/// mid-way (killed) still ends its run, as an error, and the server goes
/// on to end the next test's run as ok.
#[test]
fn a_server_test_whose_client_vanishes_still_ends_its_run() {
    let mport = free_port();
    let maddr = format!("127.0.0.1:{mport}");
    let (_srv, port) = support::server(&["--metrics", &maddr]);
    let port = port.to_string();
    let mut client = Proc::spawn(linerate().args(["-c", "127.0.0.1", "-p", &port, "-t", "20"]));
    let text = scrape_until(&maddr, r#"linerate_runs_started_total{mode="server"} 1"#);
    assert!(
        text.contains(r#"linerate_runs_started_total{mode="server"} 1"#),
        "{text}"
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert!(client.is_running());
    drop(client.0.take().map(|mut c| {
        c.kill().unwrap();
        c.wait()
    }));
    let line = r#"linerate_runs_ended_total{mode="server",outcome="error"} 1"#;
    let text = scrape_until(&maddr, line);
    assert!(text.contains(line), "{text}");
    let c = linerate()
        .args(["-c", "127.0.0.1", "-p", &port, "-J", "-n", "1M"])
        .output()
        .unwrap();
    assert!(json(&c.stdout).get("error").is_none());
    let ok = r#"linerate_runs_ended_total{mode="server",outcome="ok"} 1"#;
    let text = scrape_until(&maddr, ok);
    assert!(text.contains(ok), "{text}");
    assert!(
        text.contains(r#"linerate_runs_started_total{mode="server"} 2"#),
        "{text}"
    );
    // The vanished test's bytes counted until it stopped, not lost.
    let bytes = sample(
        &text,
        r#"linerate_bytes_total{mode="server",scope="sum",id="sum",role="receiver",counted_by="receiver"}"#,
    );
    assert!(bytes.is_some_and(|b| b > f64::from(1u32 << 20)), "{text}");
}

/// A sink on the rig with `--metrics`: Prometheus (in the same namespace)
/// scrapes it while it runs and sees the packets blast sent; promtool
/// accepts the exposition; the series equal the sink's own result.
#[test]
fn prometheus_scrapes_a_running_sink() {
    if should_skip(
        "prometheus_scrapes_a_running_sink",
        &[
            require_root(),
            require_program("ip"),
            require_program("prometheus"),
            require_program("promtool"),
        ],
    ) {
        return;
    }
    let rig = Rig::pair().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mport, pport) = (free_port(), free_port());
    let maddr = format!("127.0.0.1:{mport}");
    let paddr = format!("127.0.0.1:{pport}");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: linerate\n    static_configs:\n      - targets: ['{maddr}']\n"
        ),
    )
    .unwrap();
    let mut sink = rig
        .command(1, BIN)
        .args([
            "sink",
            "--iface",
            "veth0",
            "--backend",
            "socket",
            "--duration",
            "14",
        ])
        .args(["--metrics", &maddr, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(sink.stderr.take().unwrap());
    let mut line = String::new();
    while err.read_line(&mut line).unwrap_or(0) > 0 && !line.contains("sink receiving on") {
        line.clear();
    }
    let _prom = Proc::spawn(
        rig.command(1, "prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={paddr}")),
    );
    let n = 6000u64;
    let out = rig
        .command(0, BIN)
        .args([
            "blast",
            "--iface",
            "veth0",
            "--dst-mac",
            &rig.host(1).mac,
            "--json",
        ])
        .args([
            "--dst-ip",
            "198.18.0.2",
            "--count",
            &n.to_string(),
            "--pps",
            "2000",
            // (-t bounds a count, 3 s by default: 6,000 at 2,000 frames/s
            // end at 2.9995 s, and a sender a little late at its end was
            // cut at 5,999.)
            "-t",
            "10",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Prometheus's view, asked in the sink's namespace.
    let query = "/api/v1/query?query=sum(linerate_packets_total%7Bmode%3D%22sink%22%2Cscope%3D%22sum%22%7D)";
    let deadline = Instant::now() + Duration::from_secs(10);
    let (got, seen) = loop {
        let seen = rig
            .run_in(1, || http_get(&paddr, query).unwrap_or_else(|e| e))
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&seen).unwrap_or_default();
        let value = v["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|s| s.parse::<f64>().ok());
        if value == Some(n as f64) || Instant::now() > deadline {
            break (value, seen);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(
        got,
        Some(n as f64),
        "Prometheus saw: {seen}\nthe endpoint now: {}\nblast: {}",
        rig.run_in(1, || http_get(&maddr, "/metrics").unwrap_or_else(|e| e))
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("linerate_packets_total") || l.starts_with("linerate_lost"))
            .collect::<Vec<_>>()
            .join("\n"),
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("\"packets\"") || l.contains("end_markers"))
            .take(6)
            .collect::<Vec<_>>()
            .join(" ")
    );
    // The exposition passes promtool's lint.
    let text = rig
        .run_in(1, || http_get(&maddr, "/metrics"))
        .unwrap()
        .unwrap();
    let mut lint = rig
        .command(1, "promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    lint.stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let lint = lint.wait_with_output().unwrap();
    assert!(
        lint.status.success(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );
    let done = sink.wait_with_output().unwrap();
    let result = json(&done.stdout);
    assert_eq!(result["packets"].as_u64(), Some(n), "{result}");
}

/// rr over TCP with `--metrics` on both sides, for both client modes: the
/// client's endpoint, scraped while the client runs, shows the
/// transactions of its intervals so far (some, not yet all), and its run
/// completes exactly its open-loop count; the server's endpoint then
/// holds exactly the requests of both runs.
#[test]
fn rr_over_tcp_metrics_follow_the_run() {
    let saddr = format!("127.0.0.1:{}", free_port());
    let (_srv, port) = support::rr_tcp_server(&["-t", "30", "-i", "0.2", "--metrics", &saddr]);
    let sum = |mode: &str, role: &str| {
        format!(
            r#"linerate_packets_total{{mode="{mode}",scope="sum",id="sum",role="{role}",counted_by="{}"}}"#,
            &mode[3..]
        )
    };
    for extra in [
        &["--flows", "4"][..],
        &["--connect-per-transaction", "--flows", "32"],
    ] {
        let caddr = format!("127.0.0.1:{}", free_port());
        let client = Proc::spawn(
            support::rr_tcp_client(port)
                .args([
                    "--pps",
                    "2k",
                    "-t",
                    "1",
                    "-i",
                    "0.25",
                    "-J",
                    "--metrics",
                    &caddr,
                ])
                .args(extra),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        let seen = loop {
            let text = http_get(&caddr, "/metrics").unwrap_or_default();
            let got = sample(&text, &sum("rr_client", "transactions")).unwrap_or(0.0);
            if got > 0.0 || Instant::now() > deadline {
                break got;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            seen > 0.0 && seen < 2000.0,
            "scraped mid-run: {seen} ({extra:?})"
        );
        let v = json(&client.wait(Duration::from_secs(15)).stdout);
        assert_eq!(v["counts"]["completed"], 2000, "{v}");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let text = loop {
        let text = http_get(&saddr, "/metrics").unwrap();
        if sample(&text, &sum("rr_server", "requests")) == Some(4000.0) || Instant::now() > deadline
        {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        sample(&text, &sum("rr_server", "requests")),
        Some(4000.0),
        "{text}"
    );
    assert!(
        text.contains(r#"linerate_runs_started_total{mode="rr_server"} 1"#),
        "{text}"
    );
}

/// A repetition's runs share one endpoint (the command's, started by the
/// first run): the second run does not try to bind the port again.
#[test]
fn a_repetitions_runs_share_one_metrics_endpoint() {
    let maddr = format!("127.0.0.1:{}", free_port());
    let (_srv, port) = support::server(&[]);
    let c = linerate()
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J", "-n", "2M"])
        .args(["--repeat", "3", "--metrics", &maddr])
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let v = json(&c.stdout);
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(3), "{v}");
}
