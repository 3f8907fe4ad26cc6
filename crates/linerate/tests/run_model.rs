//! Every mode runs through one run model: each is run here with
//! `--json-stream` and `--csv` at once, and the events and rows are checked
//! against the final document of the same run (carried by the `end`
//! event): interval sums add up to the totals, CSV agrees with the events,
//! and the first interval arrives while the run is still going.

mod support;

use linerate_lab::Rig;
use linerate_testkit::{require_program, require_root, should_skip};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// What one run printed: its events, its CSV rows, and whether the first
/// interval event was read while the process was still running.
#[derive(Debug)]
struct Outcome {
    events: Vec<Value>,
    csv: Vec<HashMap<String, String>>,
    live_interval: bool,
    ok: bool,
    stderr: String,
}

impl Outcome {
    fn end(&self) -> &Value {
        let e = self.events.last().expect("no events");
        assert_eq!(e["event"], "end", "{:?}", self.events);
        &e["data"]
    }

    fn result(&self) -> &Value {
        &self.end()["result"]
    }

    /// Sum over the interval events of the `role` sum row's `field`.
    fn interval_total(&self, role: &str, field: &str) -> u64 {
        self.events
            .iter()
            .filter(|e| e["event"] == "interval")
            .map(|e| {
                e["data"]["sums"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|s| s["role"] == role)
                    .map(|s| s[field].as_u64().unwrap_or(0))
                    .sum::<u64>()
            })
            .sum()
    }

    /// The end event's `role` sum row's `field`.
    fn end_total(&self, role: &str, field: &str) -> u64 {
        let sums = self.end()["sums"].as_array().unwrap();
        let s = sums
            .iter()
            .find(|s| s["role"] == role)
            .unwrap_or_else(|| panic!("no {role} sum in {sums:?}"));
        s[field].as_u64().unwrap()
    }

    /// Sum over the CSV rows of `event` and scope `sum` for `role`.
    fn csv_total(&self, event: &str, role: &str, field: &str) -> u64 {
        self.csv
            .iter()
            .filter(|r| r["event"] == event && r["scope"] == "sum" && r["role"] == role)
            .map(|r| r[field].parse::<u64>().unwrap_or(0))
            .sum()
    }

    /// Every check that holds for any mode: start first, end last, each
    /// interval's sum rows equal to its rows added up, the intervals adding
    /// up to the end totals in the events and in the CSV.
    fn check(&self, role: &str, field: &str, total: u64) {
        assert!(self.ok, "the run failed: {}", self.stderr);
        assert_eq!(self.events[0]["event"], "start");
        assert!(self.events[0]["data"]["host"]["kernel"].is_string());
        for e in self.events.iter().filter(|e| e["event"] == "interval") {
            let d = &e["data"];
            let rows: u64 = (d["rows"].as_array().unwrap().iter())
                .filter(|r| r["role"] == role)
                .map(|r| r[field].as_u64().unwrap_or(0))
                .sum();
            let sum = (d["sums"].as_array().unwrap().iter())
                .find(|s| s["role"] == role)
                .map_or(0, |s| s[field].as_u64().unwrap_or(0));
            assert_eq!(rows, sum, "interval rows vs sum: {e}");
            assert!(d["end"].as_f64() >= d["start"].as_f64(), "{e}");
            for r in d["rows"].as_array().unwrap() {
                assert!(r["counted_by"].is_string(), "{r}");
            }
        }
        assert_eq!(self.end_total(role, field), total, "end sums vs the result");
        assert_eq!(
            self.interval_total(role, field),
            total,
            "intervals vs the result: {:?}",
            self.events
        );
        assert_eq!(
            self.csv_total("interval", role, field),
            total,
            "CSV intervals"
        );
        assert_eq!(self.csv_total("end", role, field), total, "CSV end");
        let header = self.csv.first().expect("no CSV rows");
        assert!(header.contains_key("counted_by") && header.contains_key("bits_per_second"));
    }
}

/// Runs `cmd` with `--json-stream --csv FILE` added, reading its events as
/// they come.
fn streamed(cmd: &mut Command, limit: Duration) -> Outcome {
    let csv = tempfile_dir().join(format!("run-{}.csv", support::free_port()));
    collect(spawn_streamed(cmd, &csv), &csv, limit)
}

/// Starts `cmd` with `--json-stream --csv csv` added.
fn spawn_streamed(cmd: &mut Command, csv: &std::path::Path) -> Child {
    cmd.args(["--json-stream", "--csv"])
        .arg(csv)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The events of a run started by [`spawn_streamed`], read as they come,
/// and its CSV rows once it ended (a watchdog ends it by its PID after
/// `limit`).
fn collect(mut child: Child, csv: &std::path::Path, limit: Duration) -> Outcome {
    let pid = child.id() as i32;
    // A watchdog ends the child (by its PID) if it overruns.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d2 = done.clone();
    let dog = std::thread::spawn(move || {
        let t = Instant::now();
        while t.elapsed() < limit {
            if d2.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    });
    let mut events = Vec::new();
    let mut live_interval = false;
    let stdout = child.stdout.take().unwrap();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        let v: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        if v["event"] == "interval" && !events.iter().any(|e: &Value| e["event"] == "interval") {
            live_interval = child.try_wait().unwrap().is_none();
        }
        events.push(v);
    }
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    dog.join().unwrap();
    let mut rdr = csv::Reader::from_path(csv).unwrap();
    let headers = rdr.headers().unwrap().clone();
    let rows = rdr
        .records()
        .map(|r| {
            let r = r.unwrap();
            headers
                .iter()
                .zip(r.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect();
    let _ = std::fs::remove_file(csv);
    Outcome {
        events,
        csv: rows,
        live_interval,
        ok: out.status.success(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join("linerate-run-model-tests");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn rig_skip(test: &str) -> bool {
    should_skip(test, &[require_root(), require_program("ip")])
}

#[test]
fn blast_and_sink_stream_intervals_that_add_up() {
    if rig_skip("blast_and_sink_stream_intervals_that_add_up") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let n: u64 = 30_000;
    let count = n.to_string();
    std::thread::scope(|s| {
        let sink = s.spawn(|| {
            streamed(
                rig.command(1, BIN).args([
                    "sink",
                    "--iface",
                    "veth0",
                    "--backend",
                    "af_packet",
                    "-t",
                    "5",
                    "--count",
                    &count,
                    "-i",
                    "0.25",
                ]),
                Duration::from_secs(20),
            )
        });
        std::thread::sleep(Duration::from_millis(600));
        let dst_ip = rig.host(1).ipv4.to_string();
        let blast = streamed(
            rig.command(0, BIN)
                .args(["blast", "--iface", "veth0", "--dst-mac", &rig.host(1).mac])
                .args(["--dst-ip", &dst_ip, "--src-port", "1000-1003"])
                .args(["--count", &count, "--pps", "20k", "-i", "0.25"]),
            Duration::from_secs(20),
        );
        blast.check("tx", "packets", n);
        assert_eq!(blast.result()["packets"], n);
        blast.check("tx", "bytes", blast.result()["bytes"].as_u64().unwrap());
        assert!(
            blast.live_interval,
            "blast's first interval came at the end"
        );
        assert!(
            blast
                .events
                .iter()
                .filter(|e| e["event"] == "interval")
                .count()
                >= 4,
            "{:?}",
            blast.events
        );
        let sink = sink.join().unwrap();
        sink.check("rx", "packets", n);
        assert_eq!(sink.result()["packets"], n);
        sink.check("rx", "bytes", sink.result()["bytes"].as_u64().unwrap());
        assert!(sink.live_interval, "sink's first interval came at the end");
        // One row per flow in the sink's intervals and totals.
        let flows: std::collections::BTreeSet<&str> = (sink.csv.iter())
            .filter(|r| r["scope"] == "flow")
            .map(|r| r["id"].as_str())
            .collect();
        assert_eq!(flows.len(), 4, "{flows:?}");
        // Each flow's rows carry the interval's latency (same host: one
        // clock), a figure of microseconds on a veth, not of the run.
        let with_latency: Vec<u64> = (sink.csv.iter())
            .filter(|r| r["scope"] == "flow" && r["event"] == "interval")
            .filter_map(|r| r["latency_p50_ns"].parse().ok())
            .collect();
        assert!(
            !with_latency.is_empty(),
            "no interval latency in the sink's rows"
        );
        assert!(
            with_latency
                .iter()
                .all(|ns| (1..1_000_000_000).contains(ns)),
            "{with_latency:?}"
        );
        assert_eq!(sink.end_total("rx", "lost"), 0);
    });
}

#[test]
fn fwd_streams_intervals_that_add_up() {
    if rig_skip("fwd_streams_intervals_that_add_up") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let n: u64 = 10_000;
    let count = n.to_string();
    std::thread::scope(|s| {
        let fwd = s.spawn(|| {
            streamed(
                rig.command(1, BIN).args([
                    "fwd",
                    "--iface",
                    "veth0",
                    "--backend",
                    "af_packet",
                    "-t",
                    "2.5",
                    "-i",
                    "0.5",
                ]),
                Duration::from_secs(20),
            )
        });
        std::thread::sleep(Duration::from_millis(600));
        let dst_ip = rig.host(1).ipv4.to_string();
        let blast = rig
            .command(0, BIN)
            .args(["blast", "--iface", "veth0", "--dst-mac", &rig.host(1).mac])
            .args(["--dst-ip", &dst_ip, "--count", &count, "--pps", "20k"])
            .output()
            .unwrap();
        assert!(blast.status.success());
        let fwd = fwd.join().unwrap();
        let c = &fwd.result()["counts"];
        fwd.check("rx", "packets", c["rx"].as_u64().unwrap());
        fwd.check("tx", "packets", c["tx"].as_u64().unwrap());
        assert!(c["rx"].as_u64().unwrap() >= n, "{c}");
        assert!(fwd.live_interval, "fwd's first interval came at the end");
    });
}

#[test]
fn rr_client_and_server_stream_intervals_that_add_up() {
    let port = support::free_port().to_string();
    std::thread::scope(|s| {
        let server = s.spawn(|| {
            streamed(
                Command::new(BIN).args([
                    "rr",
                    "server",
                    "-B",
                    "127.0.0.1",
                    "-p",
                    &port,
                    "-t",
                    "2",
                    "-i",
                    "0.5",
                ]),
                Duration::from_secs(15),
            )
        });
        std::thread::sleep(Duration::from_millis(300));
        let client = streamed(
            Command::new(BIN).args([
                "rr",
                "client",
                "127.0.0.1",
                "-p",
                &port,
                "-t",
                "1",
                "-i",
                "0.25",
                "--pps",
                "4k",
            ]),
            Duration::from_secs(15),
        );
        let done = client.result()["counts"]["completed"].as_u64().unwrap();
        assert_eq!(done, 4000, "{}", client.result());
        client.check("transactions", "packets", done);
        assert!(client.live_interval);
        let server = server.join().unwrap();
        server.check(
            "requests",
            "packets",
            server.result()["counts"]["requests"].as_u64().unwrap(),
        );
        assert_eq!(server.result()["counts"]["requests"], 4000);
        assert!(server.live_interval);
    });
}

/// rr over TCP, both client modes against one server: every stream of
/// events and CSV adds up, the open-loop counts exact (4,000 on
/// persistent connections, 500 with a connection each), and the server
/// counted exactly their requests.
#[test]
fn rr_tcp_client_and_server_stream_intervals_that_add_up() {
    let (server, port) = support::listening(|port| {
        let csv = tempfile_dir().join(format!("rr-tcp-server-{port}.csv"));
        support::Proc(Some(spawn_streamed(
            Command::new(BIN)
                .args(["rr", "server", "--tcp", "-B", "127.0.0.1", "-p", port])
                .args(["-t", "60", "-i", "0.5"]),
            &csv,
        )))
    });
    let port = port.to_string();
    let csv = tempfile_dir().join(format!("rr-tcp-server-{port}.csv"));
    let pid = server.pid();
    let server = std::thread::spawn(move || {
        let mut server = server;
        let child = server.0.take().unwrap();
        collect(child, &csv, Duration::from_secs(20))
    });
    let client = |extra: &[&str], want: u64| {
        let client = streamed(
            Command::new(BIN)
                .args(["rr", "client", "127.0.0.1", "-p", &port, "--tcp"])
                .args(["-i", "0.25"])
                .args(extra),
            Duration::from_secs(15),
        );
        let c = &client.result()["counts"];
        assert_eq!(
            (c["completed"].as_u64(), c["lost"].as_u64()),
            (Some(want), Some(0)),
            "{c}"
        );
        client.check("transactions", "packets", want);
        assert!(client.live_interval);
    };
    client(&["-t", "1", "--pps", "4k", "--flows", "4"], 4000);
    client(
        &[
            "-t",
            "0.5",
            "--pps",
            "1k",
            "--flows",
            "16",
            "--connect-per-transaction",
        ],
        500,
    );
    // Stopped once the clients are done (a fixed time could run out
    // before them on a loaded machine); it still ends with its end event.
    std::thread::sleep(Duration::from_millis(200));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let server = server.join().unwrap();
    assert_eq!(
        server.result()["counts"]["requests"],
        4500,
        "{}",
        server.result()
    );
    server.check("requests", "packets", 4500);
    assert!(server.live_interval);
}

#[test]
fn text_interval_lines_come_while_the_run_goes_on() {
    // The human form too: the first interval line is read before the end.
    let port = support::free_port().to_string();
    let mut server = Command::new(BIN)
        .args(["rr", "server", "-B", "127.0.0.1", "-p", &port, "-t", "2"])
        .args(["-i", "0.5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("rr server listening"), "{first}");
    let t0 = Instant::now();
    let header = lines.next().unwrap().unwrap();
    assert!(header.starts_with("[ ID]"), "{header}");
    let line = lines.next().unwrap().unwrap();
    assert!(
        line.contains(" 0.00-0.50 ") && line.contains("requests"),
        "{line}"
    );
    assert!(server.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(1));
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    server.wait().unwrap();
    assert!(rest.iter().any(|l| l.starts_with("total: ")), "{rest:?}");
}

/// Sum over iperf3-shaped interval events of `data.sum[field]`.
fn iperf_interval_total(events: &[Value], field: &str) -> u64 {
    events
        .iter()
        .filter(|e| e["event"] == "interval")
        .map(|e| e["data"]["sum"][field].as_u64().unwrap_or(0))
        .sum()
}

/// The client and the server of one iperf3-compatible test: the client
/// streams iperf3's events and writes CSV, the one-off server prints its
/// `-J` document and writes CSV; both CSVs agree with both documents.
fn iperf_pair(extra: &[&str], check_packets: bool) {
    let port = support::free_port();
    let dir = tempfile_dir();
    let server_csv = dir.join(format!("server-{port}.csv"));
    let server = support::Proc::spawn(
        Command::new(BIN)
            .args(["-s", "-1", "-J", "-p", &port.to_string(), "--csv"])
            .arg(&server_csv),
    );
    support::wait_listening(port);
    let client = streamed(
        Command::new(BIN)
            .args([
                "-c",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-t",
                "2",
                "-i",
                "0.5",
            ])
            .args(extra),
        Duration::from_secs(20),
    );
    let s_out = server.wait(Duration::from_secs(10));
    let sdoc = support::json(&s_out.stdout);
    assert!(client.ok, "{}", client.stderr);
    let end = &client.events.last().unwrap()["data"];
    assert_eq!(client.events.last().unwrap()["event"], "end");
    assert_eq!(client.events[0]["event"], "start");
    assert!(
        client.live_interval,
        "the client's first interval came at the end"
    );
    let sent = end["sum_sent"]["bytes"].as_u64().unwrap();
    let received = end["sum_received"]["bytes"].as_u64().unwrap();
    assert_eq!(iperf_interval_total(&client.events, "bytes"), sent);
    assert_eq!(client.csv_total("interval", "sender", "bytes"), sent);
    assert_eq!(client.csv_total("end", "sender", "bytes"), sent);
    if check_packets {
        let pk = end["sum"]["packets"].as_u64().unwrap();
        assert_eq!(iperf_interval_total(&client.events, "packets"), pk);
        assert_eq!(client.csv_total("end", "sender", "packets"), pk);
        assert_eq!(client.csv_total("interval", "sender", "packets"), pk);
    }
    // The server's CSV against its own -J document.
    let mut rdr = csv::Reader::from_path(&server_csv).unwrap();
    let rows: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    let _ = std::fs::remove_file(&server_csv);
    let total = |event: &str| -> u64 {
        rows.iter()
            .filter(|r| &r[2] == event && &r[5] == "sum" && &r[7] == "receiver")
            .map(|r| r[9].parse::<u64>().unwrap())
            .sum()
    };
    let s_received = sdoc["end"]["sum_received"]["bytes"].as_u64().unwrap();
    assert_eq!(
        s_received, received,
        "server vs client's view of the server"
    );
    assert_eq!(total("interval"), s_received);
    assert_eq!(total("end"), s_received);
    assert!(rows.iter().all(|r| &r[1] == "server"));
}

#[test]
fn iperf_client_and_server_tcp_streams_and_csv_agree() {
    iperf_pair(&["-P", "2"], false);
}

#[test]
fn iperf_client_and_server_udp_streams_and_csv_agree() {
    iperf_pair(&["-u", "-b", "20M", "-l", "1000"], true);
}

#[test]
fn a_run_stopped_from_outside_still_ends_with_what_it_measured() {
    // The cancellation handle is the signal: SIGINT mid-run, and the run
    // still emits its end event with the requests it counted.
    let port = support::free_port().to_string();
    let mut server = Command::new(BIN)
        .args(["rr", "server", "-B", "127.0.0.1", "-p", &port, "-t", "30"])
        .args(["-i", "0.5", "--json-stream"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let client = Command::new(BIN)
        .args([
            "rr",
            "client",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "1",
            "--pps",
            "1k",
        ])
        .args(["-i", "0"])
        .output()
        .unwrap();
    assert!(client.status.success());
    let t0 = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(server.stdout.as_mut().unwrap(), &mut out).unwrap();
    let status = server.wait().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "stopped promptly");
    assert!(status.success(), "{out}");
    let last: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "end", "{out}");
    assert_eq!(last["data"]["result"]["counts"]["requests"], 1000, "{out}");
    assert!(last["data"]["duration_s"].as_f64().unwrap() < 10.0);
}
