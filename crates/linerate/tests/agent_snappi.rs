//! `linerate agent` driven by snappi itself (tests/snappi/agent_flows.py):
//! configuration, start, polling until every flow reads stopped, then the
//! flow and port metrics, checked against what this test counted on the
//! receive port with a raw socket of its own. Also the token refused and
//! a port outside the allow-list refused, as snappi reports them.
//!
//! Needs root (namespaces) and a Python with snappi (scripts/test makes
//! `target/snappi-venv`; or `LINERATE_SNAPPI_PYTHON`).

mod support;

use linerate_backend::raw::RawSocket;
use linerate_lab::Rig;
use linerate_testkit::{Requirement, require_program, require_root, should_skip, snappi_python};
use linerate_wire::{L3, L4, parse_frame};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::Proc;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
const PORT: u16 = 8443;

fn require_snappi() -> Requirement {
    snappi_python().map(|_| ())
}

pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snappi")
        .join(name)
}

/// Frames with a probe (end markers apart) seen on `iface` of host `h`
/// while `f` runs, by L4 destination port: (frames, bytes with FCS,
/// sizes, source ports, destination addresses, TCP flags, DSCP).
#[derive(Debug, Default)]
struct Seen {
    frames: u64,
    bytes: u64,
    sizes: BTreeMap<usize, u64>,
    src_ports: BTreeMap<u16, u64>,
    dsts: BTreeSet<IpAddr>,
    tcp_flags: BTreeSet<u8>,
    dscp: BTreeSet<u8>,
}

fn count_while<T: Send>(
    rig: &Rig,
    h: usize,
    iface: &str,
    f: impl FnOnce() -> T + Send,
) -> (BTreeMap<u16, Seen>, T) {
    let stop = std::sync::atomic::AtomicBool::new(false);
    let ready = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let counter = s.spawn(|| {
            rig.run_in(h, || {
                let mut sock = RawSocket::open(iface).unwrap();
                sock.set_read_timeout(Duration::from_millis(100)).unwrap();
                sock.set_rcvbuf(64 << 20).unwrap();
                ready.store(true, std::sync::atomic::Ordering::Relaxed);
                let mut store = vec![vec![0u8; 2048]; 64];
                let mut lens = [0usize; 64];
                let mut seen: BTreeMap<u16, Seen> = BTreeMap::new();
                let t0 = Instant::now();
                while !stop.load(std::sync::atomic::Ordering::Relaxed)
                    && t0.elapsed() < Duration::from_secs(120)
                {
                    let mut bufs: Vec<&mut [u8]> =
                        store.iter_mut().map(|b| b.as_mut_slice()).collect();
                    let Ok(n) = sock.recv(&mut bufs, &mut lens) else {
                        continue;
                    };
                    for i in 0..n {
                        let fr = &store[i][..lens[i]];
                        let Ok(p) = parse_frame(fr) else { continue };
                        if p.probe
                            .is_none_or(|pr| pr.seq & linerate_wire::END_MARKER != 0)
                        {
                            continue;
                        }
                        let (dst, dscp) = match p.l3 {
                            L3::Ipv4(r) => (IpAddr::from(r.dst), r.dscp),
                            L3::Ipv6(r) => (IpAddr::from(r.dst), r.traffic_class >> 2),
                            L3::Other(_) => continue,
                        };
                        let (sport, dport, flags) = match p.l4 {
                            L4::Udp(u) => (u.src_port, u.dst_port, None),
                            L4::Tcp(t) => (t.src_port, t.dst_port, Some(t.flags.0)),
                            _ => continue,
                        };
                        let e = seen.entry(dport).or_default();
                        e.frames += 1;
                        e.bytes += fr.len() as u64 + 4;
                        *e.sizes.entry(fr.len() + 4).or_default() += 1;
                        *e.src_ports.entry(sport).or_default() += 1;
                        e.dsts.insert(dst);
                        e.tcp_flags.extend(flags);
                        e.dscp.insert(dscp);
                    }
                }
                seen
            })
            .unwrap()
        });
        while !ready.load(std::sync::atomic::Ordering::Relaxed) && !counter.is_finished() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = f();
        // What is still on its way (the agent drains 0.5 s before a flow
        // reads stopped, so nothing is).
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (counter.join().unwrap(), out)
    })
}

fn num(v: &Value, key: &str) -> u64 {
    match &v[key] {
        Value::String(s) => s.parse().unwrap_or_else(|_| panic!("{key}: {s}")),
        Value::Number(n) => n.as_u64().unwrap(),
        other => panic!("{key}: {other}"),
    }
}

fn flow<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["flow_metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no metrics for {name}: {doc}"))
}

/// What snappi reported (the script's output) against what this test
/// counted on the receive port.
fn check(out: &std::process::Output, seen: &BTreeMap<u16, Seen>, rx_location: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "snappi script failed: {stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));

    // Refusals, as snappi raised them.
    assert!(
        doc["no_token"].as_str().unwrap().contains("code: 401"),
        "{doc}"
    );
    assert!(
        doc["bad_token"].as_str().unwrap().contains("code: 401"),
        "{doc}"
    );
    let bad_port = doc["bad_port"].as_str().unwrap();
    assert!(
        bad_port.contains("code: 400")
            && bad_port.contains("ports[0].location")
            && bad_port.contains("allow-list"),
        "{bad_port}"
    );
    assert_eq!(doc["version"]["api_spec_version"], "1.62.0");

    // Each flow: what the agent says arrived is what this test saw arrive,
    // frame for frame and byte for byte; nothing lost on a veth at these
    // rates, so it is also what was sent.
    for (name, port) in [("f1", 7001u16), ("f2", 7002), ("f3", 7003)] {
        let m = flow(&doc, name);
        let s = seen
            .get(&port)
            .unwrap_or_else(|| panic!("{name}: nothing seen on the wire"));
        assert_eq!(m["transmit"], "stopped", "{name}");
        assert_eq!(
            num(m, "frames_rx"),
            s.frames,
            "{name}: frames_rx against the wire"
        );
        assert_eq!(
            num(m, "bytes_rx"),
            s.bytes,
            "{name}: bytes_rx against the wire"
        );
        assert_eq!(num(m, "frames_tx"), s.frames, "{name}: frames_tx");
        assert_eq!(num(m, "bytes_tx"), s.bytes, "{name}: bytes_tx");
        assert_eq!(m["loss"], 0.0, "{name}");
        assert_eq!(m["port_tx"], "tx");
        assert_eq!(m["port_rx"], "rx");
    }
    // f1: exactly 1000 IPv6 frames of 128 bytes, 250 from each of 4
    // source ports, with latency (asked for).
    let s1 = &seen[&7001];
    assert_eq!(s1.frames, 1000);
    assert_eq!(s1.sizes, BTreeMap::from([(128, 1000)]));
    assert_eq!(s1.src_ports, (5000..5004).map(|p| (p, 250)).collect());
    let lat = &flow(&doc, "f1")["latency"];
    let (min, avg, max) = (
        lat["minimum_ns"].as_f64().unwrap(),
        lat["average_ns"].as_f64().unwrap(),
        lat["maximum_ns"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= avg && avg <= max, "latency {lat}");
    // f2: one second at 500/s (pacing starts a little after the second
    // begins), IMIX 64:7 570:4 1518:1 exact per cycle, both destinations.
    let s2 = &seen[&7002];
    assert!((450..=501).contains(&s2.frames), "f2 sent {}", s2.frames);
    assert_eq!(
        s2.sizes.keys().copied().collect::<Vec<_>>(),
        [64, 570, 1518]
    );
    assert!(
        s2.sizes[&64] >= s2.frames * 7 / 12 - 7 && s2.sizes[&64] <= s2.frames * 7 / 12 + 7,
        "{:?}",
        s2.sizes
    );
    assert_eq!(s2.dsts.len(), 2);
    assert!(
        flow(&doc, "f2").get("latency").is_none(),
        "latency not asked for f2"
    );
    // f3: 300 TCP SYNs, 100 of each size 80, 110, 140, DSCP 46 (EF), to
    // .10, .12, .14.
    let s3 = &seen[&7003];
    assert_eq!(s3.frames, 300);
    assert_eq!(
        s3.sizes,
        BTreeMap::from([(80, 100), (110, 100), (140, 100)])
    );
    assert_eq!(s3.tcp_flags, BTreeSet::from([linerate_wire::TcpFlags::SYN]));
    assert_eq!(s3.dscp, BTreeSet::from([46]));
    let dsts: BTreeSet<IpAddr> = ["198.18.0.10", "198.18.0.12", "198.18.0.14"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    assert_eq!(s3.dsts, dsts);

    // Ports: the sums of their flows.
    let ports = doc["port_metrics"].as_array().unwrap();
    let total: u64 = seen.values().map(|s| s.frames).sum();
    let tx = ports.iter().find(|p| p["name"] == "tx").unwrap();
    let rx = ports.iter().find(|p| p["name"] == "rx").unwrap();
    assert_eq!((num(tx, "frames_tx"), num(rx, "frames_rx")), (total, total));
    assert_eq!((num(tx, "frames_rx"), num(rx, "frames_tx")), (0, 0));
    assert_eq!(
        (&tx["location"], &tx["link"], &rx["transmit"]),
        (
            &Value::from("veth0"),
            &Value::from("up"),
            &Value::from("stopped")
        )
    );
    assert_eq!(rx["location"], rx_location);
}

/// One agent with both ports: the rig's veth pair, host 1's end moved
/// into host 0's namespace (as `veth1`), so frames leave one port and
/// arrive on the other.
#[test]
fn snappi_drives_one_agent_and_flow_metrics_equal_what_arrived() {
    let test = "snappi_drives_one_agent_and_flow_metrics_equal_what_arrived";
    if should_skip(
        test,
        &[require_root(), require_program("ip"), require_snappi()],
    ) {
        return;
    }
    // (flows paced at 500/s, counted against the second they ran: one
    // such test at a time)
    let _one = linerate_testkit::measuring();
    let python = snappi_python().unwrap();
    let rig = Rig::looped().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token = "snappi-test-token-0123456789";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let mut agent = Proc::spawn(rig.command(0, BIN).args([
        "agent",
        "--listen",
        &format!("127.0.0.1:{PORT}"),
        "--allow-iface",
        "veth0,veth1",
        "--token-file",
        token_file.to_str().unwrap(),
        "--json-stream",
        "--csv",
        dir.path().join("agent.csv").to_str().unwrap(),
        "--metrics",
        &format!("127.0.0.1:{METRICS_PORT}"),
        "-i",
        "0.5",
    ]));
    support::wait_agent(&rig, 0, PORT, &mut agent);
    let (seen, out) = count_while(&rig, 0, "veth1", || {
        rig.command(0, python.to_str().unwrap())
            .arg(script("agent_flows.py"))
            .args([
                "--location",
                &format!("https://127.0.0.1:{PORT}"),
                "--token",
                token,
            ])
            .args(["--tx", "veth0", "--rx", "veth1"])
            .output()
            .unwrap()
    });
    check(&out, &seen, "veth1");
    let metrics = rig.run_in(0, scrape).unwrap();
    agent.interrupt();
    let stdout = agent.wait(Duration::from_secs(20)).stdout;
    let csv = std::fs::read_to_string(dir.path().join("agent.csv")).unwrap();
    check_run(&String::from_utf8_lossy(&stdout), &csv, &metrics, &seen);
}

const METRICS_PORT: u16 = 9464;

/// The agent's metrics endpoint, as a scraper reads it.
fn scrape() -> String {
    use std::io::{Read, Write};
    let mut c = TcpStream::connect(("127.0.0.1", METRICS_PORT)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut s = String::new();
    let _ = c.read_to_string(&mut s);
    s
}

/// The start of traffic as a run of the run contract: its JSON lines
/// (start, intervals, end), its CSV and its metrics, each flow's rows
/// equal to what arrived on the wire.
fn check_run(stream: &str, csv: &str, metrics: &str, seen: &BTreeMap<u16, Seen>) {
    let events: Vec<Value> = stream
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"start"), "{stream}");
    assert_eq!(names.last(), Some(&"end"), "{stream}");
    assert!(names.contains(&"interval"), "{stream}");
    assert_eq!(events[0]["data"]["mode"], "agent");
    let end = &events.last().unwrap()["data"];
    for (name, port) in [("f1", 7001u16), ("f2", 7002), ("f3", 7003)] {
        let frames = seen[&port].frames;
        let f = end["result"]["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in the end: {end}"));
        assert_eq!(
            (num(f, "frames_tx"), num(f, "frames_rx")),
            (frames, frames),
            "{f}"
        );
        // The intervals' rx rows add up to the end's.
        let summed: u64 = events
            .iter()
            .filter(|e| e["event"] == "interval")
            .flat_map(|e| e["data"]["rows"].as_array().unwrap().clone())
            .filter(|r| r["id"] == name && r["role"] == "rx")
            .map(|r| r["packets"].as_u64().unwrap())
            .sum();
        assert_eq!(summed, frames, "{name}: intervals against the end");
        let line = ",end,0.000000,";
        let row = csv
            .lines()
            .find(|l| l.contains(line) && l.contains(&format!(",flow,{name},rx,receiver,")))
            .unwrap_or_else(|| panic!("{name}: no end row in the CSV:\n{csv}"));
        let cols: Vec<&str> = row.split(',').collect();
        assert_eq!(cols[10], frames.to_string(), "{row}");
        let series = format!(
            "linerate_packets_total{{mode=\"agent\",scope=\"flow\",id=\"{name}\",role=\"rx\",counted_by=\"receiver\"}} {frames}"
        );
        assert!(metrics.contains(&series), "{series} not in:\n{metrics}");
    }
}

/// Two agents, two processes in two namespaces: the client talks to the
/// agent of host 0 (the transmit port); the receive port is host 1's
/// interface, on the agent of host 1 (a peer, its certificate pinned).
/// Flow metrics are the peer's counts, equal to what arrived there.
#[test]
fn snappi_drives_two_agents_with_tx_and_rx_on_different_hosts() {
    let test = "snappi_drives_two_agents_with_tx_and_rx_on_different_hosts";
    if should_skip(
        test,
        &[require_root(), require_program("ip"), require_snappi()],
    ) {
        return;
    }
    // (flows paced at 500/s, counted against the second they ran: one
    // such test at a time)
    let _one = linerate_testkit::measuring();
    let python = snappi_python().unwrap();
    let rig = Rig::pair().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token = "snappi-test-token-0123456789";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let cert = dir.path().join("peer.pem");
    let peer = format!("https://{}:{PORT}", rig.host(1).ipv4);
    let mut rx_agent = Proc::spawn(rig.command(1, BIN).args([
        "agent",
        "--listen",
        &format!("{}:{PORT}", rig.host(1).ipv4),
        "--allow-iface",
        "veth0",
        "--token-file",
        token_file.to_str().unwrap(),
        "--write-cert",
        cert.to_str().unwrap(),
    ]));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !rig
        .run_in(1, || TcpStream::connect((rig.host(1).ipv4, PORT)).is_ok())
        .unwrap()
    {
        assert!(
            rx_agent.is_running() && Instant::now() < deadline,
            "the peer agent did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut tx_agent = Proc::spawn(rig.command(0, BIN).args([
        "agent",
        "--listen",
        &format!("127.0.0.1:{PORT}"),
        "--allow-iface",
        "veth0",
        "--token-file",
        token_file.to_str().unwrap(),
        "--peer",
        &peer,
        "--peer-cert",
        cert.to_str().unwrap(),
        "--peer-clock-shared",
    ]));
    support::wait_agent(&rig, 0, PORT, &mut tx_agent);
    let rx_location = format!("{peer}/veth0");
    let (seen, out) = count_while(&rig, 1, "veth0", || {
        rig.command(0, python.to_str().unwrap())
            .arg(script("agent_flows.py"))
            .args([
                "--location",
                &format!("https://127.0.0.1:{PORT}"),
                "--token",
                token,
            ])
            .args([
                "--tx",
                "veth0",
                "--rx",
                "veth0",
                "--rx-location",
                &rx_location,
            ])
            .output()
            .unwrap()
    });
    check(&out, &seen, &rx_location);
    drop((tx_agent, rx_agent));
}
