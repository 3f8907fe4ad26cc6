//! `linerate agent`'s emulated devices through a router: the agent's two
//! ports (p1, p2, in a namespace of their own) are cabled to a Linux
//! router in another namespace (r1 198.18.1.1/24 2001:db8:1::1/64, r2
//! 198.18.2.1/24 2001:db8:2::1/64, forwarding on, no static neighbours).
//! snappi (tests/snappi/agent_devices.py) configures devices d1 on p1
//! and d2 on p2 with the router as their gateway, waits for the
//! gateways' MACs in monitor/states and runs an IPv4 and an IPv6 flow
//! from d1 to d2: they cross the router, counts exact. The router learnt
//! the devices' MACs from the agent's answers; its pings to them are
//! answered; a device whose gateway does not answer cannot start.
//!
//! Needs root (namespaces), `ip`, `ping` and a Python with snappi
//! (`target/snappi-venv` or `LINERATE_SNAPPI_PYTHON`).

mod support;

use linerate_testkit::{Requirement, require_program, require_root, should_skip, snappi_python};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use support::Proc;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
const PORT: u16 = 8443;
const FRAMES: u64 = 1000;

fn require_snappi() -> Requirement {
    snappi_python().map(|_| ())
}

/// The test's namespaces, deleted when it ends (a failure included).
struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

fn sh(args: &[&str]) -> Output {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The agent's namespace and the router's, cabled p1–r1 and p2–r2.
fn topology() -> (Namespaces, String, String) {
    let id = std::process::id();
    let (a, r) = (format!("lrdev{id}a"), format!("lrdev{id}r"));
    let ns = Namespaces(vec![a.clone(), r.clone()]);
    sh(&["ip", "netns", "add", &a]);
    sh(&["ip", "netns", "add", &r]);
    for (p, q) in [("p1", "r1"), ("p2", "r2")] {
        sh(&[
            "ip", "link", "add", p, "netns", &a, "type", "veth", "peer", "name", q, "netns", &r,
        ]);
        // The agent's ports carry no addresses of the kernel's: IPv6 off
        // there, so only the devices speak on them.
        sh(&[
            "ip",
            "netns",
            "exec",
            &a,
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{p}.disable_ipv6=1"),
        ]);
        sh(&["ip", "-n", &a, "link", "set", p, "up"]);
        sh(&["ip", "-n", &r, "link", "set", q, "up"]);
    }
    sh(&["ip", "-n", &a, "link", "set", "lo", "up"]);
    for (q, v4, v6) in [
        ("r1", "198.18.1.1/24", "2001:db8:1::1/64"),
        ("r2", "198.18.2.1/24", "2001:db8:2::1/64"),
    ] {
        sh(&["ip", "-n", &r, "addr", "add", v4, "dev", q]);
        sh(&["ip", "-n", &r, "addr", "add", v6, "dev", q, "nodad"]);
    }
    sh(&[
        "ip",
        "netns",
        "exec",
        &r,
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1",
        "net.ipv6.conf.all.forwarding=1",
    ]);
    (ns, a, r)
}

fn mac_of(ns: &str, iface: &str) -> String {
    let out = sh(&["ip", "-n", ns, "-j", "link", "show", "dev", iface]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0]["address"].as_str().unwrap().to_string()
}

/// The router's neighbour table: (address, MAC) of reachable or stale
/// entries.
fn router_neighbors(r: &str) -> Vec<(String, String)> {
    let out = sh(&["ip", "-n", r, "-j", "neigh", "show"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter_map(|n| {
            Some((
                n["dst"].as_str()?.to_string(),
                n["lladdr"].as_str()?.to_string(),
            ))
        })
        .collect()
}

fn wait_agent(a: &str, agent: &mut Proc) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        assert!(agent.is_running(), "the agent exited at start");
        let up = Command::new("ip")
            .args(["netns", "exec", a, "bash", "-c"])
            .arg(format!("exec 3<>/dev/tcp/127.0.0.1/{PORT}"))
            .output()
            .is_ok_and(|o| o.status.success());
        if up {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the agent did not listen within 20 s");
}

fn num(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.parse().unwrap(),
        v => v.as_u64().unwrap(),
    }
}

/// (ethernet, address) → MAC (empty while unresolved) of a states list.
fn table(v: &Value) -> Vec<(String, String, String)> {
    let mut t: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["ethernet_name"].as_str().unwrap().to_string(),
                n["address"].as_str().unwrap().to_string(),
                n["link_layer_address"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    t.sort();
    t
}

#[test]
fn device_flows_cross_a_router_with_exact_counts() {
    let test = "device_flows_cross_a_router_with_exact_counts";
    if should_skip(
        test,
        &[
            require_root(),
            require_program("ip"),
            require_program("ping"),
            require_snappi(),
        ],
    ) {
        return;
    }
    let python = snappi_python().unwrap();
    let (_ns, a, r) = topology();
    let (r1, r2) = (mac_of(&r, "r1"), mac_of(&r, "r2"));
    let dir = tempfile::tempdir().unwrap();
    let token = "devices-test-token-0123456789";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let mut agent = Proc::spawn(Command::new("ip").args(["netns", "exec", &a, BIN]).args([
        "agent",
        "--listen",
        &format!("127.0.0.1:{PORT}"),
        "--allow-iface",
        "p1,p2",
        "--token-file",
        token_file.to_str().unwrap(),
    ]));
    wait_agent(&a, &mut agent);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snappi/agent_devices.py");
    let out = Command::new("ip")
        .args(["netns", "exec", &a])
        .arg(&python)
        .arg(script)
        .args([
            "--location",
            &format!("https://127.0.0.1:{PORT}"),
            "--token",
            token,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "snappi script failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();

    // A flow naming a device, not an address: refused with its path.
    let bad = doc["names_a_device"].as_str().unwrap();
    assert!(
        bad.contains("code: 400") && bad.contains("flows[0].tx_rx.device.tx_names[0]"),
        "{bad}"
    );
    // The gateways' MACs, resolved by the agent itself: the router's.
    let s = |x: &str| x.to_string();
    assert_eq!(
        table(&doc["ipv4_neighbors"]),
        [
            (s("d1.eth"), s("198.18.1.1"), r1.clone()),
            (s("d2.eth"), s("198.18.2.1"), r2.clone()),
            (s("d3.eth"), s("198.18.1.77"), s("")),
        ]
    );
    assert_eq!(
        table(&doc["ipv6_neighbors"]),
        [
            (s("d1.eth"), s("2001:db8:1::1"), r1.clone()),
            (s("d2.eth"), s("2001:db8:2::1"), r2.clone()),
        ]
    );
    // Both flows crossed the router: every frame sent arrived.
    let flows = doc["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2, "{doc}");
    for f in flows {
        assert_eq!(
            (num(&f["frames_tx"]), num(&f["frames_rx"])),
            (FRAMES, FRAMES),
            "{f}"
        );
        assert_eq!(num(&f["bytes_tx"]), FRAMES * 128, "{f}");
        assert_eq!(num(&f["bytes_rx"]), FRAMES * 128, "{f}");
        assert_eq!(
            (&f["port_tx"], &f["port_rx"]),
            (&Value::from("p1"), &Value::from("p2"))
        );
    }
    // d3's gateway never answered: its flow does not start.
    let lost = doc["lost"].as_str().unwrap();
    assert!(
        lost.contains("code: 409") && lost.contains("198.18.1.77") && lost.contains("not resolved"),
        "{lost}"
    );
    // The router learnt the devices' MACs from the agent's answers and
    // requests, and its pings to them are answered (the agent still up).
    let n = router_neighbors(&r);
    for (ip, mac) in [
        ("198.18.1.2", "02:00:00:00:01:02"),
        ("198.18.2.2", "02:00:00:00:02:02"),
        ("2001:db8:2::2", "02:00:00:00:02:02"),
    ] {
        assert!(
            n.contains(&(s(ip), s(mac))),
            "the router has no {ip} at {mac}: {n:?}"
        );
    }
    for target in ["198.18.1.2", "198.18.2.2", "2001:db8:1::2", "2001:db8:2::2"] {
        let ping = Command::new("ip")
            .args(["netns", "exec", &r, "ping", "-c", "2", "-W", "2", target])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&ping.stdout);
        assert!(
            ping.status.success() && text.contains("2 received"),
            "ping {target}: {text}"
        );
    }
    // Nothing answers for an address that is not a device's.
    let ping = Command::new("ip")
        .args([
            "netns",
            "exec",
            &r,
            "ping",
            "-c",
            "1",
            "-W",
            "1",
            "198.18.1.9",
        ])
        .output()
        .unwrap();
    assert!(!ping.status.success(), "198.18.1.9 answered");
    agent.interrupt();
    let _ = agent.wait(Duration::from_secs(20));
}
