//! `/control/action`'s pings for real, over HTTPS and gRPC (the agent's
//! servers on loopback, the token in each call): two devices on the two ends of a veth pair in a namespace of
//! the test's own (198.18.1.0/24, 2001:db8:1::/64; the kernel has no
//! address there), the agent's responders answering for them. A ping of
//! the device on the peer port succeeds, at once; a ping of an address
//! nobody has fails when the action's deadline passes, not later.
//!
//! The test runs itself again inside the namespace (`ip netns exec`),
//! the agent in that process, so nothing it sends leaves the namespace.
//! Needs root and `ip`: skipped without them, unless LINERATE_STRICT=1.

#[path = "support/grpc_client.rs"]
mod grpc_client;

use linerate_agent::grpc::messages::Holding;
use linerate_agent::grpc::{schema, table_action};
use linerate_agent::{Agent, Identity, Options, Peers};
use linerate_packet::BackendKind;
use linerate_testkit::{require_program, require_root, should_skip};
use prost::Message;
use serde_json::{Value, json};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    sh(&["ip", "-n", &ns.0, "link", "set", "lo", "up"]);
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

/// The agent's two servers: HTTPS (called as peer agents call one
/// another: the certificate pinned, the token sent) and gRPC.
struct Servers {
    https: Peers,
    base: String,
    grpc: grpc_client::Server,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    cert: std::path::PathBuf,
}

impl Servers {
    fn start(agent: &Arc<Agent>) -> Self {
        let tls = linerate_agent::tls::server(&Identity::SelfSigned {
            names: vec!["localhost".into()],
        })
        .unwrap();
        let cert = std::env::temp_dir().join(format!("lract-{}.pem", std::process::id()));
        std::fs::write(&cert, &tls.cert_pem).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("https://{}", listener.local_addr().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s, config) = (agent.clone(), stop.clone(), tls.config.clone());
        let token = Arc::new(grpc_client::TOKEN.to_string());
        let thread = Some(std::thread::spawn(move || {
            linerate_agent::serve(listener, config, a, token, &s)
        }));
        let https =
            Peers::new(vec![base.clone()], &cert, grpc_client::TOKEN.into(), false).unwrap();
        Self {
            https,
            base,
            grpc: grpc_client::Server::serving(agent.clone()),
            stop,
            thread,
            cert,
        }
    }

    /// POSTs `doc` to `path` over HTTPS: the answer (200 only).
    fn post(&self, path: &str, doc: &Value) -> Value {
        self.https
            .call(&self.base, path, doc, Duration::from_secs(20))
            .unwrap()
    }

    /// The action's responses, over HTTPS or gRPC, and how long it took.
    fn ping(&self, grpc: bool, doc: &Value) -> (Value, Duration) {
        let t = Instant::now();
        let body = if grpc {
            let wire = schema::encode(&table_action::M_CONTROL_ACTION, doc, "").unwrap();
            let a = grpc_client::call(
                &self.grpc,
                Some(grpc_client::TOKEN),
                "SetControlAction",
                Holding::of(wire).encode_to_vec(),
            );
            assert_eq!(a.status, 0, "{a:?}");
            let h = Holding::decode(&a.body[..]).unwrap();
            schema::decode(&table_action::M_CONTROL_ACTION_RESPONSE, h.bytes(), "").unwrap()
        } else {
            self.post("/control/action", doc)
        };
        (body, t.elapsed())
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.cert);
    }
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
    let a = Arc::new(Agent::new(Options {
        tx_backend: BackendKind::Auto,
        rx_backend: BackendKind::Auto,
        ..Options::loopback(&["p1", "p2"])
    }));
    let servers = Servers::start(&a);
    let cfg = json!({
        "ports": [{"name": "p1", "location": "p1"}, {"name": "p2", "location": "p2"}],
        "devices": [device("d1", "p1", "02:00:00:00:01:02", 2), device("d2", "p2", "02:00:00:00:02:02", 3)]
    });
    assert_eq!(servers.post("/config", &cfg), json!({"warnings": []}));
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
        let (got, took) = servers.ping(grpc, &action(family, &[(&d1, peer), (&d2, mine)]));
        let want = responses(
            family,
            &[(&d1, peer, "succeeded"), (&d2, mine, "succeeded")],
        );
        let over = if grpc { "gRPC" } else { "HTTPS" };
        assert_eq!(got["response"], want, "{family} over {over}: {got}");
        assert!(
            took < Duration::from_secs(2),
            "{family} over {over}: {took:?}"
        );
        // One unanswered: failed at the deadline, the other succeeded.
        let (got, took) = servers.ping(grpc, &action(family, &[(&d1, nobody), (&d1, peer)]));
        let want = responses(family, &[(&d1, nobody, "failed"), (&d1, peer, "succeeded")]);
        assert_eq!(got["response"], want, "{family} over {over}: {got}");
        assert!(
            took >= within && took < within + Duration::from_secs(1),
            "{family} over {over}: {took:?}"
        );
    }
    // The destinations asked for the pings are not kept as neighbours.
    let r = servers.post("/monitor/states", &json!({"choice": "ipv4_neighbors"}));
    let rows: Vec<&str> = r["ipv4_neighbors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["ipv4_address"].as_str().unwrap())
        .collect();
    assert_eq!(rows, ["198.18.1.1", "198.18.1.1"], "the gateways only: {r}");
}
