//! `/control/action`'s pings for real, over HTTP's route and gRPC's
//! method: two devices on the two ends of a veth pair in a namespace of
//! the test's own (198.18.1.0/24, 2001:db8:1::/64; the kernel has no
//! address there), the agent's responders answering for them. A ping of
//! the device on the peer port succeeds, at once; a ping of an address
//! nobody has fails when the action's deadline passes, not later.
//!
//! The test runs itself again inside the namespace (`ip netns exec`),
//! the agent in that process, so nothing it sends leaves the namespace.
//! Needs root and `ip`: skipped without them, unless LINERATE_STRICT=1.

use linerate_agent::grpc::service::{Answer, Rpc, call};
use linerate_agent::grpc::{schema, table_action};
use linerate_agent::{Agent, Options};
use linerate_packet::BackendKind;
use linerate_testkit::{require_program, require_root, should_skip};
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

const TEST: &str = "device_pings_succeed_on_the_peer_port_and_fail_in_time";
/// Set in the run inside the namespace.
const INNER: &str = "LINERATE_CONTROL_ACTION_NS";

/// The test's namespace, deleted when it ends (a failure included).
struct Namespace(String);

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn device_pings_succeed_on_the_peer_port_and_fail_in_time() {
    if std::env::var_os(INNER).is_some() {
        return inside();
    }
    if should_skip(TEST, &[require_root(), require_program("ip")]) {
        return;
    }
    let ns = Namespace(format!("lract{}", std::process::id()));
    sh(&["ip", "netns", "add", &ns.0]);
    sh(&[
        "ip", "-n", &ns.0, "link", "add", "p1", "type", "veth", "peer", "name", "p2",
    ]);
    for p in ["p1", "p2"] {
        sh(&[
            "ip",
            "netns",
            "exec",
            &ns.0,
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{p}.disable_ipv6=1"),
        ]);
        sh(&["ip", "-n", &ns.0, "link", "set", p, "up"]);
    }
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(INNER, "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "inside the namespace:\n{text}");
    assert!(text.contains("1 passed"), "the test ran inside:\n{text}");
}

fn device(n: &str, port: &str, mac: &str, last: u8) -> Value {
    json!({"name": n, "ethernets": [{
        "name": format!("{n}.eth"),
        "connection": {"choice": "port_name", "port_name": port},
        "mac": mac,
        "ipv4_addresses": [{"name": format!("{n}.ipv4"), "address": format!("198.18.1.{last}"), "gateway": "198.18.1.1", "prefix": 24}],
        "ipv6_addresses": [{"name": format!("{n}.ipv6"), "address": format!("2001:db8:1::{last}"), "gateway": "2001:db8:1::1", "prefix": 64}]
    }]})
}

/// A ping action of `family` with (source, destination) requests.
fn action(family: &str, reqs: &[(&str, &str)]) -> Value {
    let reqs: Vec<Value> = reqs
        .iter()
        .map(|(s, d)| json!({"src_name": s, "dst_ip": d}))
        .collect();
    json!({"choice": "protocol", "protocol": {"choice": family,
        family: {"choice": "ping", "ping": {"requests": reqs}}}})
}

/// The action's responses, over HTTP's route or gRPC's method, and how
/// long it took.
fn ping(a: &Agent, grpc: bool, doc: &Value) -> (Value, Duration) {
    let t = Instant::now();
    let body = if grpc {
        let wire = schema::encode(&table_action::M_CONTROL_ACTION, doc, "").unwrap();
        let Answer::Held(h) = call(a, Rpc::SetControlAction, &wire, a.arrival()).unwrap() else {
            panic!("a unary answer")
        };
        schema::decode(&table_action::M_CONTROL_ACTION_RESPONSE, h.bytes(), "").unwrap()
    } else {
        let r = a.handle("POST", "/control/action", doc.to_string().as_bytes());
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    };
    (body, t.elapsed())
}

fn responses(family: &str, got: &[(&str, &str, &str)]) -> Value {
    let list: Vec<Value> = got
        .iter()
        .map(|(s, d, r)| json!({"src_name": s, "dst_ip": d, "result": r}))
        .collect();
    json!({"choice": "protocol", "protocol": {"choice": family,
        family: {"choice": "ping", "ping": {"responses": list}}}})
}

fn inside() {
    let a = Agent::new(Options {
        tx_backend: BackendKind::Auto,
        rx_backend: BackendKind::Auto,
        ..Options::loopback(&["p1", "p2"])
    });
    let cfg = json!({
        "ports": [{"name": "p1", "location": "p1"}, {"name": "p2", "location": "p2"}],
        "devices": [device("d1", "p1", "02:00:00:00:01:02", 2), device("d2", "p2", "02:00:00:00:02:02", 3)]
    });
    let r = a.handle("POST", "/config", cfg.to_string().as_bytes());
    assert_eq!(r.status, 200, "{}", r.body);
    let within = linerate_agent::neighbors::PING_WITHIN;
    for (family, grpc, peer, nobody) in [
        ("ipv4", false, "198.18.1.3", "198.18.1.99"),
        ("ipv6", true, "2001:db8:1::3", "2001:db8:1::99"),
        ("ipv4", true, "198.18.1.3", "198.18.1.98"),
        ("ipv6", false, "2001:db8:1::3", "2001:db8:1::98"),
    ] {
        let (d1, d2) = (format!("d1.{family}"), format!("d2.{family}"));
        let mine = if family == "ipv4" {
            "198.18.1.2"
        } else {
            "2001:db8:1::2"
        };
        // Answered: back as soon as the replies are in.
        let (got, took) = ping(&a, grpc, &action(family, &[(&d1, peer), (&d2, mine)]));
        let want = responses(
            family,
            &[(&d1, peer, "succeeded"), (&d2, mine, "succeeded")],
        );
        let over = if grpc { "gRPC" } else { "HTTP" };
        assert_eq!(got["response"], want, "{family} over {over}: {got}");
        assert!(
            took < Duration::from_secs(2),
            "{family} over {over}: {took:?}"
        );
        // One unanswered: failed at the deadline, the other succeeded.
        let (got, took) = ping(&a, grpc, &action(family, &[(&d1, nobody), (&d1, peer)]));
        let want = responses(family, &[(&d1, nobody, "failed"), (&d1, peer, "succeeded")]);
        assert_eq!(got["response"], want, "{family} over {over}: {got}");
        assert!(
            took >= within && took < within + Duration::from_secs(1),
            "{family} over {over}: {took:?}"
        );
    }
    // The destinations asked for the pings are not kept as neighbours.
    let r = a.handle(
        "POST",
        "/monitor/states",
        json!({"choice": "ipv4_neighbors"}).to_string().as_bytes(),
    );
    let rows: Vec<&str> = r.body["ipv4_neighbors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["ipv4_address"].as_str().unwrap())
        .collect();
    assert_eq!(
        rows,
        ["198.18.1.1", "198.18.1.1"],
        "the gateways only: {}",
        r.body
    );
}
