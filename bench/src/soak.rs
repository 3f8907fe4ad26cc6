//! `linerate-bench soak`: an hour (or `--soak-for S`) of churn against
//! linerate's long-lived processes, to show they hold no leak and do not
//! degrade. Not an A/B comparison: one linerate, many cycles.
//!
//! Three daemons run for the whole soak, each in a namespace of its own
//! rig: a `linerate -s` iperf3 server, a `linerate rr server` and a
//! `linerate agent` (its two ports the two ends of a veth pair). Each
//! cycle:
//!
//! - an iperf3 test (`linerate -c`, TCP at 200 Mbit/s, 2 s); every third
//!   cycle a client is killed with SIGKILL 1 s into a 5 s test instead;
//! - an rr test with 64 flows (open loop, 20,000 requests/s, 2 s);
//! - an agent start of one flow of 5,000 frames, polled until stopped and
//!   checked exact (frames_rx = frames_tx = 5,000), then a start that is
//!   stopped 100 ms later.
//!
//! Every 10 s the daemons' resident memory (VmRSS) and open descriptors are
//! sampled. The verdict compares the end with the end of the warm-up (the
//! first tenth, at least 60 s): memory within 10% + 4 MiB, descriptors
//! within 4, and the last complete iperf3 and rr tests against the first
//! (the receiver's figure of iperf3, the rr client's count of completed
//! transactions): at capped rates both hold theirs, so the last must reach
//! 95% of the first.

use crate::machine;
use crate::scenarios::tools::{linerate_bin, wait_tcp_listen, wait_udp_listen};
use anyhow::{Context, Result, bail};
use linerate_lab::Rig;
use serde::Serialize;
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const IPERF_PORT: u16 = 5201;
const RR_PORT: u16 = 5300;
const AGENT_PORT: u16 = 8443;
const TOKEN: &str = "linerate-soak-token-0123456789";
const SAMPLE_EVERY: Duration = Duration::from_secs(10);
const AGENT_FRAMES: u64 = 5000;
/// The tests' rates are capped, so that the last test can be held to the
/// first on a machine that does other work, and the soak leaves CPU to it.
const IPERF_RATE: &str = "200M";
const RR_PPS: &str = "20000";

/// One sample of a daemon.
#[derive(Debug, Clone, Serialize)]
struct Sample {
    at_s: f64,
    rss_kib: u64,
    fds: u64,
}

/// A daemon and its samples.
#[derive(Debug, Serialize)]
struct Daemon {
    name: &'static str,
    #[serde(skip)]
    child: Child,
    samples: Vec<Sample>,
}

impl Daemon {
    fn sample(&mut self, at_s: f64) -> Result<()> {
        let pid = self.child.id();
        if let Some(status) = self.child.try_wait()? {
            bail!("{} (pid {pid}) ended during the soak: {status}", self.name);
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .context("no VmRSS")?;
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count() as u64;
        self.samples.push(Sample { at_s, rss_kib, fds });
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        crate::harness::stop_child(&mut self.child);
    }
}

/// What the cycles measured.
#[derive(Debug, Default, Serialize)]
struct Tally {
    cycles: u64,
    iperf_bps: Vec<f64>,
    iperf_killed: u64,
    rr_tps: Vec<f64>,
    agent_exact: u64,
    agent_stops: u64,
    failures: Vec<String>,
}

/// The rigs: `tests` for iperf3 and rr (client in host 0, server in 1),
/// `agent` with both veth ends in its host 0.
struct Rigs {
    tests: Rig,
    agent: Rig,
}

fn rigs() -> Result<Rigs> {
    let tests = Rig::pair()?;
    let agent = Rig::looped()?;
    Ok(Rigs { tests, agent })
}

fn daemons(r: &Rigs, bin: &str, dir: &Path) -> Result<Vec<Daemon>> {
    let quiet = |c: &mut Command| {
        c.stdout(Stdio::null()).stderr(Stdio::null());
    };
    let server_ip = r.tests.host(1).ipv4.to_string();
    let mut iperf = r.tests.command(1, bin);
    iperf.args(["-s", "-B", &server_ip, "-p", &IPERF_PORT.to_string()]);
    quiet(&mut iperf);
    let mut rr = r.tests.command(1, bin);
    rr.args(["rr", "server", "-B", &server_ip, "-p", &RR_PORT.to_string()]);
    quiet(&mut rr);
    let token = dir.join("token");
    std::fs::write(&token, format!("{TOKEN}\n"))?;
    let mut agent = r.agent.command(0, bin);
    agent.args(["agent", "--listen", &format!("127.0.0.1:{AGENT_PORT}")]);
    agent.args(["--allow-iface", "veth0,veth1", "--token-file"]);
    agent.arg(&token);
    quiet(&mut agent);
    let out = vec![
        Daemon {
            name: "iperf3 server (linerate -s)",
            child: iperf.spawn()?,
            samples: Vec::new(),
        },
        Daemon {
            name: "rr server",
            child: rr.spawn()?,
            samples: Vec::new(),
        },
        Daemon {
            name: "agent",
            child: agent.spawn()?,
            samples: Vec::new(),
        },
    ];
    wait_tcp_listen(&r.tests, 1, IPERF_PORT)?;
    wait_udp_listen(&r.tests, 1, RR_PORT)?;
    wait_tcp_listen(&r.agent, 0, AGENT_PORT)?;
    Ok(out)
}

/// Runs a command to its end within `limit`, its stdout as JSON.
fn json_of(mut cmd: Command, limit: Duration) -> Result<Value> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = cmd.spawn()?;
    let deadline = Instant::now() + limit;
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            crate::harness::stop_child(&mut child);
            bail!("did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("exit {}", out.status);
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn iperf_cycle(r: &Rigs, bin: &str, n: u64, t: &mut Tally) -> Result<()> {
    let server = r.tests.host(1).ipv4.to_string();
    let port = IPERF_PORT.to_string();
    if n % 3 == 2 {
        let mut c = r.tests.command(0, bin);
        c.args(["-c", &server, "-p", &port, "-t", "5"]);
        let mut child = c.stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
        std::thread::sleep(Duration::from_secs(1));
        child.kill()?;
        child.wait()?;
        t.iperf_killed += 1;
        // The server notices the dead client; give it a moment.
        std::thread::sleep(Duration::from_millis(500));
        return Ok(());
    }
    let mut c = r.tests.command(0, bin);
    c.args([
        "-c", &server, "-p", &port, "-t", "2", "-b", IPERF_RATE, "-J",
    ]);
    let doc = json_of(c, Duration::from_secs(15))?;
    let bps = doc["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .context("no end.sum_received.bits_per_second")?;
    t.iperf_bps.push(bps);
    Ok(())
}

fn rr_cycle(r: &Rigs, bin: &str, t: &mut Tally) -> Result<()> {
    let server = r.tests.host(1).ipv4.to_string();
    let mut c = r.tests.command(0, bin);
    c.args(["rr", "client", &server, "-p", &RR_PORT.to_string()]);
    c.args(["--flows", "64", "--pps", RR_PPS, "-t", "2", "-J"]);
    let doc = json_of(c, Duration::from_secs(15))?;
    let tps = doc["transactions_per_s"]
        .as_f64()
        .context("no transactions_per_s")?;
    t.rr_tps.push(tps);
    Ok(())
}

/// One request to the agent (curl: TLS to the agent's self-signed
/// certificate, in the agent's namespace).
fn agent_call(r: &Rigs, path: &str, body: &Value) -> Result<Value> {
    let mut c = r.agent.command(0, "curl");
    c.args(["-sk", "--max-time", "10", "-X", "POST"]);
    c.args(["-H", &format!("Authorization: Bearer {TOKEN}")]);
    c.args(["-H", "Content-Type: application/json", "--data-binary"]);
    c.arg(body.to_string());
    c.arg(format!("https://127.0.0.1:{AGENT_PORT}{path}"));
    let text = json_of(c, Duration::from_secs(15));
    text.with_context(|| format!("agent {path}"))
}

fn agent_config() -> Value {
    json!({
        "ports": [{"name": "tx", "location": "veth0"}, {"name": "rx", "location": "veth1"}],
        "flows": [{
            "name": "soak",
            "tx_rx": {"choice": "port", "port": {"tx_name": "tx", "rx_names": ["rx"]}},
            "packet": [
                {"choice": "ethernet", "ethernet": {"src": {"choice": "value", "value": "02:00:00:00:05:01"}}},
                {"choice": "ipv4", "ipv4": {
                    "src": {"choice": "value", "value": "198.18.5.1"},
                    "dst": {"choice": "value", "value": "198.18.5.2"}}},
                {"choice": "udp", "udp": {"dst_port": {"choice": "value", "value": 7000}}}
            ],
            "size": {"choice": "fixed", "fixed": 256},
            "rate": {"choice": "pps", "pps": 20000},
            "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": AGENT_FRAMES}},
            "metrics": {"enable": true}
        }]
    })
}

fn transmit(r: &Rigs, state: &str) -> Result<()> {
    let body = json!({"choice": "traffic", "traffic": {"choice": "flow_transmit",
        "flow_transmit": {"state": state}}});
    agent_call(r, "/control/state", &body).map(|_| ())
}

fn number(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

fn agent_cycle(r: &Rigs, t: &mut Tally) -> Result<()> {
    agent_call(r, "/config", &agent_config())?;
    transmit(r, "start")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics = json!({"choice": "flow", "flow": {}});
    loop {
        let m = agent_call(r, "/monitor/metrics", &metrics)?;
        let f = &m["flow_metrics"][0];
        if f["transmit"] == "stopped" {
            let (tx, rx) = (number(&f["frames_tx"]), number(&f["frames_rx"]));
            if (tx, rx) != (Some(AGENT_FRAMES), Some(AGENT_FRAMES)) {
                bail!("agent flow: frames_tx {tx:?}, frames_rx {rx:?}, not {AGENT_FRAMES} each");
            }
            t.agent_exact += 1;
            break;
        }
        if Instant::now() > deadline {
            bail!("agent flow not stopped within 10 s: {f}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    transmit(r, "start")?;
    std::thread::sleep(Duration::from_millis(100));
    transmit(r, "stop")?;
    t.agent_stops += 1;
    Ok(())
}

fn cycle(r: &Rigs, bin: &str, t: &mut Tally) {
    let n = t.cycles;
    for (what, ran) in [
        ("iperf3", iperf_cycle(r, bin, n, t)),
        ("rr", rr_cycle(r, bin, t)),
        ("agent", agent_cycle(r, t)),
    ] {
        if let Err(e) = ran {
            t.failures.push(format!("cycle {n}: {what}: {e:#}"));
        }
    }
    t.cycles += 1;
}

/// A daemon's verdict: its samples at the end of the warm-up, halfway
/// from there to the end, and at the end. Memory may settle after the
/// warm-up (10% + 4 MiB over the whole run) but must not keep growing: the
/// second half may add at most 2% or 256 KiB, whichever is more (a leak of
/// a few KiB per cycle or per second shows there); descriptors at most 4.
fn flat(d: &Daemon, warm_s: f64) -> (Value, bool) {
    let after: Vec<&Sample> = d.samples.iter().filter(|s| s.at_s >= warm_s).collect();
    let (Some(w), Some(last)) = (after.first(), after.last()) else {
        return (
            json!({"daemon": d.name, "verdict": "too few samples"}),
            false,
        );
    };
    let mid = after[after.len() / 2];
    let peak_kib = after.iter().map(|s| s.rss_kib).max().unwrap_or(0);
    let settled = last.rss_kib as f64 <= w.rss_kib as f64 * 1.10 + 4096.0;
    let still = last.rss_kib as f64 <= mid.rss_kib as f64 + (mid.rss_kib as f64 * 0.02).max(256.0);
    let fds_ok = last.fds <= w.fds + 4;
    let ok = settled && still && fds_ok;
    let v = json!({
        "daemon": d.name,
        "rss_kib": {"warm": w.rss_kib, "mid": mid.rss_kib, "peak_after_warm": peak_kib, "last": last.rss_kib},
        "fds": {"warm": w.fds, "last": last.fds},
        "flat": ok,
    });
    (v, ok)
}

fn first_last(v: &[f64]) -> Value {
    match (v.first(), v.last()) {
        (Some(f), Some(l)) => json!({"first": f, "last": l, "ratio": l / f, "runs": v.len()}),
        _ => Value::Null,
    }
}

/// Runs the soak for `seconds` and writes its record to `out_dir`.
pub fn run(seconds: f64, out_dir: &Path) -> Result<()> {
    if !(60.0..=4.0 * 3600.0).contains(&seconds) {
        bail!("--soak-for must be 60 to 14400 seconds");
    }
    let bin = linerate_bin()?.to_string_lossy().into_owned();
    let dir = tempfile_dir()?;
    let r = rigs()?;
    let mut ds = daemons(&r, &bin, &dir)?;
    let start = Instant::now();
    let mut next_sample = start;
    let mut t = Tally::default();
    while start.elapsed().as_secs_f64() < seconds {
        if Instant::now() >= next_sample {
            let at = start.elapsed().as_secs_f64();
            for d in &mut ds {
                d.sample(at)?;
            }
            next_sample += SAMPLE_EVERY;
        }
        cycle(&r, &bin, &mut t);
    }
    let at = start.elapsed().as_secs_f64();
    for d in &mut ds {
        d.sample(at)?;
    }
    report(&ds, &t, seconds, out_dir)?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("linerate-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn report(ds: &[Daemon], t: &Tally, seconds: f64, out_dir: &Path) -> Result<()> {
    let warm_s = (seconds / 10.0).max(60.0);
    let verdicts: Vec<(Value, bool)> = ds.iter().map(|d| flat(d, warm_s)).collect();
    let all_flat = verdicts.iter().all(|(_, ok)| *ok);
    let (iperf, rr) = (first_last(&t.iperf_bps), first_last(&t.rr_tps));
    let degraded = [&iperf, &rr]
        .iter()
        .any(|v| v["ratio"].as_f64().is_none_or(|r| r < 0.95));
    let record = json!({
        "scenario": "soak",
        "machine": machine::describe(),
        "seconds": seconds,
        "warm_up_s": warm_s,
        "cycles": t.cycles,
        "daemons": verdicts.iter().map(|(v, _)| v.clone()).collect::<Vec<_>>(),
        "iperf3_tcp_bps_received": iperf,
        "iperf3_clients_killed": t.iperf_killed,
        "rr_tps_client_count": rr,
        "agent_exact_runs": t.agent_exact,
        "agent_start_stop": t.agent_stops,
        "failures": t.failures,
        "samples": ds.iter().map(|d| json!({"daemon": d.name, "samples": d.samples})).collect::<Vec<_>>(),
        "verdict": if all_flat && !degraded && t.failures.is_empty() { "flat" } else { "NOT flat" },
    });
    std::fs::create_dir_all(out_dir)?;
    let path = out_dir.join(format!(
        "soak-{}.json",
        record["machine"]["date_utc"].as_str().unwrap_or("now")
    ));
    std::fs::write(&path, serde_json::to_string_pretty(&record)?)?;
    print_summary(&record);
    println!("raw: {}", path.display());
    if record["verdict"] != "flat" {
        bail!("the soak is not flat: see {}", path.display());
    }
    Ok(())
}

fn print_summary(r: &Value) {
    println!(
        "soak: {} s, {} cycles, machine {}",
        r["seconds"], r["cycles"], r["machine"]
    );
    for d in r["daemons"].as_array().into_iter().flatten() {
        println!(
            "  {:<28} rss KiB warm {} mid {} peak {} last {}; fds warm {} last {}; flat {}",
            d["daemon"].as_str().unwrap_or("?"),
            d["rss_kib"]["warm"],
            d["rss_kib"]["mid"],
            d["rss_kib"]["peak_after_warm"],
            d["rss_kib"]["last"],
            d["fds"]["warm"],
            d["fds"]["last"],
            d["flat"]
        );
    }
    println!(
        "  iperf3 TCP at 200M (receiver's figure): {}",
        r["iperf3_tcp_bps_received"]
    );
    println!(
        "  rr 64 flows at 20k/s (client's count): {}",
        r["rr_tps_client_count"]
    );
    println!(
        "  agent: {} exact runs, {} start/stop; clients killed mid-test: {}",
        r["agent_exact_runs"], r["agent_start_stop"], r["iperf3_clients_killed"]
    );
    for f in r["failures"].as_array().into_iter().flatten() {
        println!("  failure: {}", f.as_str().unwrap_or("?"));
    }
    println!("  verdict: {}", r["verdict"]);
}
