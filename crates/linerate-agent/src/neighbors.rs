//! The responders of a configuration's devices at work: one thread per
//! port with devices, an AF_PACKET socket of its own on the port (taking
//! ARP, ICMP and ICMPv6 only: a kernel filter), running the port's
//! `protocols::Responder`; started with the configuration, ended (and
//! joined) with it, at the next configuration and at the agent's end.
//! The neighbour tables answer `/monitor/states` (`ipv4_neighbors`,
//! `ipv6_neighbors`, typed) and give device flows their destination MAC.

use crate::devices::Device;
use crate::model::Flow;
use crate::protocols::{Responder, Verdict, Want};
use linerate_wire::MacAddr;
use serde::Serialize;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a receive call waits: the longest a stop or a due request
/// waits for the thread.
const POLL: Duration = Duration::from_millis(20);
/// Receive buffers: frames a call takes, bytes each (a jumbo frame).
const BATCH: usize = 16;
const FRAME_MAX: usize = 9216;
/// Most answers a port's responder sends a second (the rest of a flood of
/// requests goes unanswered).
const ANSWERS_PER_S_MAX: u32 = 2000;

/// The classic BPF program the responder's socket takes frames through:
/// ARP, IPv4 carrying ICMP, IPv6 carrying ICMPv6 (no extension header).
const FILTER: [(u16, u8, u8, u32); 10] = [
    (0x28, 0, 0, 12),          // ldh [12]: the ether type
    (0x15, 7, 0, 0x0806),      // ARP: accept
    (0x15, 0, 2, 0x0800),      // IPv4: on
    (0x30, 0, 0, 23),          // ldb [23]: the protocol
    (0x15, 4, 3, 1),           // ICMP: accept, else drop
    (0x15, 0, 2, 0x86dd),      // IPv6: on, else drop
    (0x30, 0, 0, 20),          // ldb [20]: the next header
    (0x15, 1, 0, 58),          // ICMPv6: accept
    (0x06, 0, 0, 0),           // drop
    (0x06, 0, 0, 0x0004_0000), // accept (whole)
];

/// A neighbour as `/monitor/states` gives it (the models'
/// `Neighborsv4State` and `Neighborsv6State`: the address key is
/// `ipv4_address` or `ipv6_address`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NeighborState {
    pub ethernet_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6_address: Option<String>,
    /// Absent while unresolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_layer_address: Option<String>,
}

/// The models' `StatesResponse` for the neighbour choices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatesResponse {
    pub choice: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4_neighbors: Option<Vec<NeighborState>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6_neighbors: Option<Vec<NeighborState>>,
}

#[derive(Debug)]
struct PortResponder {
    iface: String,
    table: Arc<Mutex<Responder>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Why the thread ended early (its socket), if it did.
    failed: Arc<Mutex<Option<String>>>,
}

/// Every port's responder of one configuration.
#[derive(Debug, Default)]
pub struct Responders {
    ports: Vec<PortResponder>,
    /// The devices they answer for (their addresses' names and subnets).
    devices: Vec<Device>,
    /// The identifier of the next ping action's echo requests.
    ident: std::sync::atomic::AtomicU16,
}

/// One ping of `/control/action`: a device address by name, the
/// destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingRequest {
    pub src_name: String,
    pub dst: IpAddr,
}

/// How long a ping action waits for its echo replies: its requests are
/// answered `failed` after it.
pub const PING_WITHIN: Duration = Duration::from_secs(3);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The neighbours to resolve on ethernet `eth`: each address's gateway
/// (its MAC when given), and each device flow's on-link destination.
fn wants(devices: &[Device], flows: &[Flow]) -> Vec<(String, Want)> {
    let mut out = Vec::new();
    for e in devices.iter().flat_map(|d| &d.ethernets) {
        for a in &e.addresses {
            out.push((
                e.port.clone(),
                (e.name.clone(), a.gateway, a.ip, a.gateway_mac),
            ));
        }
    }
    for d in flows.iter().filter_map(|f| f.device.as_ref()) {
        let hop = d.next_hop();
        if hop != d.tx.address.gateway {
            out.push((
                d.tx.port.clone(),
                (d.tx.ethernet.clone(), hop, d.tx.address.ip, None),
            ));
        }
    }
    out
}

impl Responders {
    /// The responders of `devices` (and `flows`' on-link destinations) on
    /// their ports, `iface_of` naming each port's interface; with `run`
    /// false (loopback ports) the tables are kept and nothing runs.
    pub fn start(
        devices: &[Device],
        flows: &[Flow],
        iface_of: impl Fn(&str) -> Option<String>,
        run: bool,
    ) -> Result<Self, String> {
        let wants = wants(devices, flows);
        let mut ports: Vec<String> = Vec::new();
        for e in devices.iter().flat_map(|d| &d.ethernets) {
            if !ports.contains(&e.port) {
                ports.push(e.port.clone());
            }
        }
        let mut out = Responders {
            ports: Vec::new(),
            devices: devices.to_vec(),
            ident: std::sync::atomic::AtomicU16::new(1),
        };
        for port in ports {
            let iface = iface_of(&port).ok_or_else(|| format!("port '{port}': no interface"))?;
            let ethernets: Vec<_> = devices
                .iter()
                .flat_map(|d| &d.ethernets)
                .filter(|e| e.port == port)
                .collect();
            let mine: Vec<Want> = wants
                .iter()
                .filter(|(p, _)| *p == port)
                .map(|(_, w)| w.clone())
                .collect();
            let table = Arc::new(Mutex::new(Responder::new(
                &ethernets,
                &mine,
                Instant::now(),
            )));
            let mut pr = PortResponder {
                iface: iface.clone(),
                table,
                stop: Arc::new(AtomicBool::new(false)),
                thread: None,
                failed: Arc::new(Mutex::new(None)),
            };
            if run {
                let sock = open(&iface).map_err(|e| format!("port '{port}' ({iface}): {e}"))?;
                let (t, s, f) = (pr.table.clone(), pr.stop.clone(), pr.failed.clone());
                pr.thread = Some(
                    std::thread::Builder::new()
                        .name(format!("responder {iface}"))
                        .spawn(move || serve(sock, &t, &s, &f))
                        .map_err(|e| format!("port '{port}': a thread: {e}"))?,
                );
            }
            out.ports.push(pr);
        }
        Ok(out)
    }

    /// The MAC of neighbour `ip` of ethernet `eth`, waited for until
    /// `deadline`; the reason when it is not known by then.
    pub fn wait_resolved(
        &self,
        eth: &str,
        ip: IpAddr,
        deadline: Instant,
    ) -> Result<MacAddr, String> {
        loop {
            for p in &self.ports {
                if let Some(m) = lock(&p.table).resolved(eth, ip) {
                    return Ok(m);
                }
            }
            if Instant::now() >= deadline {
                let why = self
                    .ports
                    .iter()
                    .find(|p| lock(&p.table).ifaces().iter().any(|i| i.name == eth))
                    .and_then(|p| {
                        lock(&p.failed)
                            .clone()
                            .map(|f| format!(" ({}: {f})", p.iface))
                    })
                    .unwrap_or_default();
                return Err(format!(
                    "{ip}, the next hop of ethernet '{eth}', is not resolved: no answer to the agent's {}{why}",
                    if ip.is_ipv4() {
                        "ARP requests"
                    } else {
                        "neighbour solicitations"
                    }
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `/monitor/states`' neighbours of one family for the ethernets named
    /// (all when none are).
    pub fn states(&self, v6: bool, names: &[String]) -> Vec<NeighborState> {
        let mut out = Vec::new();
        for p in &self.ports {
            let t = lock(&p.table);
            for n in t.neighbors() {
                let eth = &t.ifaces()[n.iface].name;
                if n.ip.is_ipv6() != v6 || !(names.is_empty() || names.contains(eth)) {
                    continue;
                }
                let ip = Some(n.ip.to_string());
                out.push(NeighborState {
                    ethernet_name: eth.clone(),
                    ipv4_address: ip.clone().filter(|_| !v6),
                    ipv6_address: ip.filter(|_| v6),
                    link_layer_address: n.mac.map(|m| m.to_string()),
                });
            }
        }
        out
    }

    /// The device address named `name` of the family of `v6`, with its
    /// ethernet's name.
    pub fn address(&self, name: &str, v6: bool) -> Option<(String, crate::devices::Address)> {
        self.devices
            .iter()
            .flat_map(|d| &d.ethernets)
            .flat_map(|e| e.addresses.iter().map(move |a| (e, a)))
            .find(|(_, a)| a.name == name && a.ip.is_ipv6() == v6)
            .map(|(e, a)| (e.name.clone(), a.clone()))
    }

    /// Sends each request's echo (from its address, through its gateway
    /// when the destination is off its subnet) and waits until every one
    /// is answered or `deadline`: whether each was answered, in order. A
    /// request whose address is not known answers false (the caller
    /// checks the names first).
    pub fn ping(&self, requests: &[PingRequest], deadline: Instant) -> Vec<bool> {
        let ident = self.ident.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut placed = vec![None; requests.len()];
        for (k, r) in requests.iter().enumerate() {
            let Some((eth, a)) = self.address(&r.src_name, r.dst.is_ipv6()) else {
                continue;
            };
            let (hop, mac) = if a.on_link(r.dst) {
                (r.dst, None)
            } else {
                (a.gateway, a.gateway_mac)
            };
            let seq = u16::try_from(k).unwrap_or(u16::MAX);
            placed[k] = self.ports.iter().position(|p| {
                lock(&p.table).ping(&eth, (a.ip, r.dst, hop, mac), (ident, seq), now)
            });
        }
        let answered = |p: &PortResponder, seq: usize| {
            lock(&p.table)
                .pings()
                .iter()
                .any(|x| x.ident == ident && usize::from(x.seq) == seq && x.replied)
        };
        loop {
            let all = placed
                .iter()
                .enumerate()
                .all(|(k, p)| p.is_none_or(|p| answered(&self.ports[p], k)));
            if all || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut got = vec![false; requests.len()];
        for p in &self.ports {
            for x in lock(&p.table).take_pings(ident) {
                if let Some(g) = got.get_mut(usize::from(x.seq)) {
                    *g |= x.replied;
                }
            }
        }
        got
    }

    /// Every ethernet's name.
    pub fn ethernets(&self) -> Vec<String> {
        self.ports
            .iter()
            .flat_map(|p| {
                lock(&p.table)
                    .ifaces()
                    .iter()
                    .map(|i| i.name.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

impl Drop for Responders {
    fn drop(&mut self) {
        for p in &self.ports {
            p.stop.store(true, Ordering::Relaxed);
        }
        for p in &mut self.ports {
            if let Some(h) = p.thread.take() {
                let _ = h.join();
            }
        }
    }
}

fn open(iface: &str) -> std::io::Result<linerate_backend::raw::RawSocket> {
    let sock = linerate_backend::raw::RawSocket::open(iface)?;
    sock.attach_filter(&FILTER)?;
    sock.set_read_timeout(POLL)?;
    Ok(sock)
}

/// The thread of one port: requests sent when due, frames read and
/// answered, until `stop`.
fn serve(
    mut sock: linerate_backend::raw::RawSocket,
    table: &Mutex<Responder>,
    stop: &AtomicBool,
    failed: &Mutex<Option<String>>,
) {
    let mut store = vec![vec![0u8; FRAME_MAX]; BATCH];
    let mut lens = [0usize; BATCH];
    let mut out = vec![0u8; FRAME_MAX];
    let (mut window, mut answered) = (Instant::now(), 0u32);
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        while let Some(n) = lock(table).poll_transmit(now, &mut out) {
            if let Err(e) = sock.send(&[&out[..n]]) {
                *lock(failed) = Some(format!("sending: {e}"));
            }
        }
        let n = match sock.recv_stamped(&mut store, &mut lens, &mut [0u64; BATCH]) {
            Ok(n) => n,
            Err(e) if linerate_backend::port::recv_idle(&e) => 0,
            Err(e) => {
                *lock(failed) = Some(format!("receiving: {e}"));
                return;
            }
        };
        if now.duration_since(window) >= Duration::from_secs(1) {
            (window, answered) = (now, 0);
        }
        for i in 0..n {
            if lens[i] == 0 {
                continue; // this host's own frame
            }
            let v = lock(table).handle_frame(&store[i][..lens[i]], &mut out);
            if let Verdict::Answer(len) = v
                && answered < ANSWERS_PER_S_MAX
            {
                answered += 1;
                if let Err(e) = sock.send(&[&out[..len]]) {
                    *lock(failed) = Some(format!("sending: {e}"));
                }
            }
        }
    }
}

/// How long a start waits for its device flows' next hops at most.
pub const RESOLVE_WAIT: Duration = Duration::from_secs(5);

/// The destination MAC of each of `plan`'s flows `which` that needs its
/// next hop's (`PlanFlow::neighbor`): (flow, MAC), each waited for until
/// `deadline`; the first flow whose next hop stays unresolved refuses
/// the start.
pub fn flow_macs(
    responders: Option<&Responders>,
    plan: &crate::plan::Plan,
    which: &[usize],
    deadline: Instant,
) -> Result<Vec<(usize, MacAddr)>, String> {
    let mut out = Vec::new();
    for &i in which {
        let f = &plan.flows[i];
        let Some((eth, ip)) = &f.neighbor else {
            continue;
        };
        let r = responders.ok_or_else(|| format!("flow '{}': no responder runs", f.name))?;
        let mac = r
            .wait_resolved(eth, *ip, deadline)
            .map_err(|e| format!("flow '{}': {e}", f.name))?;
        out.push((i, mac));
    }
    Ok(out)
}

/// `POST /monitor/states`: the models' `ipv4_neighbors` and
/// `ipv6_neighbors` requests (`ethernet_names`: every ethernet when
/// empty or absent; a name no ethernet has is refused).
pub fn states(
    responders: Option<&Responders>,
    doc: &serde_json::Value,
) -> Result<StatesResponse, crate::json::Invalid> {
    use crate::json::{Obj, invalid};
    let o = Obj::new("", doc)?;
    let c = o.choice(&["ipv4_neighbors", "ipv6_neighbors"], "ipv4_neighbors")?;
    let key = if c == "ipv4_neighbors" {
        "ipv4_neighbors"
    } else {
        "ipv6_neighbors"
    };
    let mut names = Vec::new();
    if let Some(r) = o.obj(key)? {
        names = r
            .strs("ethernet_names", 4096)?
            .unwrap_or_default()
            .into_iter()
            .map(String::from)
            .collect();
        r.done()?;
    }
    o.done()?;
    let known = responders.map(Responders::ethernets).unwrap_or_default();
    if let Some((i, n)) = names.iter().enumerate().find(|(_, n)| !known.contains(n)) {
        return Err(invalid(
            &format!("{key}.ethernet_names[{i}]"),
            format!("no device ethernet is named '{n}'"),
        ));
    }
    let v6 = key == "ipv6_neighbors";
    let list = responders.map(|r| r.states(v6, &names)).unwrap_or_default();
    Ok(StatesResponse {
        choice: key,
        ipv4_neighbors: (!v6).then(|| list.clone()),
        ipv6_neighbors: v6.then_some(list),
    })
}

#[cfg(test)]
mod tests {
    use crate::{Agent, Options};
    use serde_json::{Value, json};

    fn agent() -> Agent {
        Agent::new(Options::loopback(&["wire0", "wire1"]))
    }

    fn post(a: &Agent, path: &str, v: &Value) -> crate::Reply {
        a.handle("POST", path, v.to_string().as_bytes())
    }

    #[test]
    fn monitor_states_lists_each_ethernets_gateways_as_the_model_shapes_them() {
        let a = agent();
        let eth = |n: &str, port: &str, gw_mac: Value| {
            json!({"name": n, "connection": {"port_name": port}, "mac": "02:00:00:00:00:01",
                "ipv4_addresses": [{"name": format!("{n}.v4"), "address": "198.18.1.2", "gateway": "198.18.1.1", "gateway_mac": gw_mac}],
                "ipv6_addresses": [{"name": format!("{n}.v6"), "address": "2001:db8:1::2", "gateway": "fe80::1"}]})
        };
        let cfg = json!({
            "ports": [{"name": "p1", "location": "wire0"}, {"name": "p2", "location": "wire1"}],
            "devices": [{"name": "d", "ethernets": [
                eth("e1", "p1", json!({"choice": "auto"})),
                eth("e2", "p2", json!({"choice": "value", "value": "02:00:00:00:00:aa"}))
            ]}]
        });
        let r = post(&a, "/config", &cfg);
        assert_eq!(r.status, 200, "{}", r.body);
        let r = post(
            &a,
            "/monitor/states",
            &json!({"choice": "ipv4_neighbors", "ipv4_neighbors": {"ethernet_names": []}}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(
            r.body,
            json!({"choice": "ipv4_neighbors", "ipv4_neighbors": [
                {"ethernet_name": "e1", "ipv4_address": "198.18.1.1"},
                {"ethernet_name": "e2", "ipv4_address": "198.18.1.1", "link_layer_address": "02:00:00:00:00:aa"}
            ]})
        );
        let r = post(
            &a,
            "/monitor/states",
            &json!({"choice": "ipv6_neighbors", "ipv6_neighbors": {"ethernet_names": ["e2"]}}),
        );
        assert_eq!(
            r.body,
            json!({"choice": "ipv6_neighbors", "ipv6_neighbors": [
                {"ethernet_name": "e2", "ipv6_address": "fe80::1"}
            ]})
        );
        for (doc, want) in [
            (
                json!({"choice": "ipv4_neighbors", "ipv4_neighbors": {"ethernet_names": ["e1", "e9"]}}),
                "ipv4_neighbors.ethernet_names[1]: no device ethernet is named 'e9'",
            ),
            (json!({"choice": "bgp_prefixes"}), "choice: 'bgp_prefixes'"),
        ] {
            let r = post(&a, "/monitor/states", &doc);
            assert_eq!(r.status, 400, "{}", r.body);
            assert!(r.body.to_string().contains(want), "{}", r.body);
        }
        // A configuration without devices: no neighbours.
        let r = post(
            &a,
            "/config",
            &json!({"ports": [{"name": "p1", "location": "wire0"}]}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let r = post(&a, "/monitor/states", &json!({"choice": "ipv4_neighbors"}));
        assert_eq!(
            r.body,
            json!({"choice": "ipv4_neighbors", "ipv4_neighbors": []})
        );
    }
}
