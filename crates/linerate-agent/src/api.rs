//! The API's routes without I/O: a request (method, path, body) in, a
//! status and a JSON document out, as the models' responses are shaped
//! (`Warning`, `Error`, `MetricsResponse`, `Version`; 64-bit counters as
//! strings of digits).
//!
//! - `config`: `/config`;
//! - `control`: `/control/state` (flows, ports' captures);
//! - `action`: `/control/action` (the devices' pings);
//! - `monitor`: `/monitor/metrics`, `/monitor/capture`;
//! - `peer`: the routes peer agents call.

mod action;
mod config;
mod control;
mod monitor;
mod peer;

use crate::campaign::{Campaign, lock};
use crate::json::Invalid;
use crate::plan::Options;
use serde_json::{Value, json};
use std::sync::Mutex;
use std::time::Duration;

/// The OTG models' version this agent follows (snappi's).
pub const API_SPEC_VERSION: &str = "1.62.0";

/// A response: HTTP status and body.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
    /// A binary answer (a capture file) sent instead of `body`.
    pub bytes: Option<Vec<u8>>,
}

impl Reply {
    fn ok(body: Value) -> Self {
        Self {
            status: 200,
            body,
            bytes: None,
        }
    }

    /// A typed answer (serde derives) as its JSON.
    fn typed(body: &impl serde::Serialize) -> Self {
        match serde_json::to_value(body) {
            Ok(v) => Self::ok(v),
            Err(e) => Self::error(500, format!("writing the answer: {e}")),
        }
    }

    fn file(bytes: Vec<u8>) -> Self {
        Self {
            status: 200,
            body: Value::Null,
            bytes: Some(bytes),
        }
    }

    /// The models' `Error`: a code, a kind and messages.
    pub fn error(status: u16, what: impl Into<String>) -> Self {
        Self {
            status,
            body: json!({
                "code": status,
                "kind": if status >= 500 { "internal" } else { "validation" },
                "errors": [what.into()],
            }),
            bytes: None,
        }
    }

    fn invalid(e: Invalid) -> Self {
        Self::error(400, e.to_string())
    }

    /// Every error of a request in one answer (the models' `Error.errors`).
    fn invalid_all(errs: Vec<Invalid>) -> Self {
        let mut r = Self::error(400, "");
        r.body["errors"] = errs.iter().map(|e| json!(e.to_string())).collect();
        r
    }

    fn warnings(w: Vec<String>) -> Self {
        Self::ok(json!({ "warnings": w }))
    }
}

/// The agent: its options, the configuration in force and its flows.
#[derive(Debug)]
pub struct Agent {
    opts: Options,
    state: Mutex<State>,
    /// Requests numbered as they arrive.
    arrivals: std::sync::atomic::AtomicU64,
    /// Receivers run for peer agents (their flows' receive ports here).
    receivers: crate::peer::Receivers,
}

#[derive(Debug, Default)]
struct State {
    /// The last configuration taken, as it came.
    config: Option<Value>,
    campaign: Option<Campaign>,
    captures: Option<crate::capture::Captures>,
    /// The interfaces' settings before the configuration's layer1.
    former: Vec<crate::layer1::Former>,
    /// The threads reporting runs (`crate::run`), reaped as they end.
    watchers: Vec<std::thread::JoinHandle<()>>,
    /// The devices' responders (`crate::neighbors`).
    devices: Option<std::sync::Arc<crate::neighbors::Responders>>,
    /// Each flow's last stop, by the place of its request in arrival
    /// order: a start that arrived before it but is answered after it
    /// starts nothing (requests on connections of their own are answered
    /// side by side; they take effect in the order they arrived).
    stopped_at: std::collections::HashMap<String, u64>,
}

impl Agent {
    pub fn new(opts: Options) -> Self {
        Self {
            opts,
            state: Mutex::new(State::default()),
            arrivals: std::sync::atomic::AtomicU64::new(0),
            receivers: crate::peer::Receivers::default(),
        }
    }

    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Answers one request, as the latest to arrive.
    pub fn handle(&self, method: &str, path: &str, body: &[u8]) -> Reply {
        let arrived = self
            .arrivals
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.handle_arrived(arrived, method, path, body)
    }

    /// The place in arrival order for a request that arrives now (the
    /// server numbers its connections at their accept with it).
    pub fn arrival(&self) -> u64 {
        self.arrivals
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Answers one request that arrived `arrived`-th ([`Agent::arrival`]).
    pub fn handle_arrived(&self, arrived: u64, method: &str, path: &str, body: &[u8]) -> Reply {
        let route = match (method, path) {
            ("POST", "/config") => Route::SetConfig,
            ("GET", "/config") => Route::GetConfig,
            ("PATCH", "/config") => Route::UpdateConfig,
            ("PATCH", "/config/append") => Route::AppendConfig,
            ("PATCH", "/config/delete") => Route::DeleteConfig,
            ("POST", "/control/state") => Route::ControlState,
            ("POST", "/control/action") => Route::ControlAction,
            ("POST", "/monitor/metrics") => Route::Metrics,
            ("POST", "/monitor/capture") => Route::Capture,
            ("POST", "/monitor/states") => Route::States,
            ("GET", "/capabilities/version") => return self.version(),
            (
                "POST",
                "/linerate/port"
                | "/linerate/rx/start"
                | "/linerate/rx/counts"
                | "/linerate/rx/stop",
            ) => {
                return self.peer_route(path, body);
            }
            (
                _,
                "/config"
                | "/config/append"
                | "/config/delete"
                | "/control/state"
                | "/control/action"
                | "/monitor/metrics"
                | "/monitor/capture"
                | "/monitor/states"
                | "/capabilities/version",
            ) => {
                return Reply::error(405, format!("{method} is not a method of {path}"));
            }
            _ => {
                return Reply::error(
                    404,
                    format!(
                        "{path}: not a path of the agent (it serves /config, /config/append, /config/delete, /control/state, /control/action, /monitor/metrics, /monitor/capture, /monitor/states and /capabilities/version)"
                    ),
                );
            }
        };
        if route == Route::GetConfig {
            let s = lock(&self.state);
            return Reply::ok(s.config.clone().unwrap_or_else(|| json!({})));
        }
        let doc: Value = match crate::json::parse(body) {
            Ok(v) => v,
            Err(e) => return Reply::error(400, format!("the body is not JSON as taken: {e}")),
        };
        let r = match route {
            Route::SetConfig => self.set_config(doc),
            Route::UpdateConfig => self.update_config(&doc),
            Route::AppendConfig => self.append_config(&doc),
            Route::DeleteConfig => self.delete_config(&doc),
            Route::ControlState => self.control_state(&doc, arrived),
            Route::ControlAction => self.control_action(&doc),
            Route::Capture => self.capture(&doc),
            Route::States => {
                let d = lock(&self.state).devices.clone();
                crate::neighbors::states(d.as_deref(), &doc)
                    .map(|a| Reply::typed(&a))
                    .map_err(Reply::invalid)
            }
            _ => self.metrics(&doc),
        };
        r.unwrap_or_else(|e| e)
    }

    fn version(&self) -> Reply {
        Reply::ok(json!({
            "api_spec_version": API_SPEC_VERSION,
            "sdk_version": "",
            "app_version": format!("linerate {}", env!("CARGO_PKG_VERSION")),
        }))
    }
}

/// Beyond the drain, how long a stop waits for flows to end.
const STOP_SLACK: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    SetConfig,
    GetConfig,
    UpdateConfig,
    AppendConfig,
    DeleteConfig,
    ControlState,
    ControlAction,
    Metrics,
    Capture,
    States,
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.receivers.stop_all();
        let mut s = lock(&self.state);
        if let Some(c) = s.campaign.as_ref() {
            c.stop_all(self.opts.drain + STOP_SLACK);
        }
        // Each run's end reported before the agent goes (a flow still
        // running past its stop leaves its run unended: not waited for).
        let end = std::time::Instant::now() + Duration::from_secs(2);
        for h in std::mem::take(&mut s.watchers) {
            while !h.is_finished() && std::time::Instant::now() < end {
                std::thread::sleep(Duration::from_millis(5));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
        crate::layer1::restore(&std::mem::take(&mut s.former));
        s.devices = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_packet::RxFilter;

    fn agent() -> Agent {
        Agent::new(Options::loopback(&["wire0", "wire1"]))
    }

    fn good() -> Value {
        json!({
            "ports": [{"name": "tx", "location": "wire0"}, {"name": "rx", "location": "wire1"}],
            "flows": [{
                "name": "f1",
                "tx_rx": {"choice": "port", "port": {"tx_name": "tx", "rx_names": ["rx"]}},
                "packet": [
                    {"choice": "ethernet", "ethernet": {"src": {"choice": "value", "value": "02:00:00:00:00:01"}}},
                    {"choice": "vlan", "vlan": {"id": {"choice": "value", "value": 10}}},
                    {"choice": "ipv4", "ipv4": {"dst": {"choice": "increment", "increment": {"start": "198.18.0.2", "step": "0.0.0.1", "count": 4}}}},
                    {"choice": "udp", "udp": {"src_port": {"choice": "values", "values": ["1000", "1002", "1004"]}}}
                ],
                "size": {"choice": "weight_pairs", "weight_pairs": {"choice": "custom", "custom": [{"size": 128, "weight": 7}, {"size": 1518, "weight": 1}]}},
                "rate": {"choice": "pps", "pps": "1000"},
                "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": "10", "gap": 12}},
                "metrics": {"enable": true, "latency": {"enable": true, "mode": "store_forward"}}
            }]
        })
    }

    /// Sets the value at a JSON pointer, adding the last key if missing.
    fn set(doc: &mut Value, ptr: &str, v: Value) {
        let (parent, key) = ptr.rsplit_once('/').unwrap();
        let p = if parent.is_empty() {
            doc
        } else {
            doc.pointer_mut(parent).unwrap()
        };
        match p {
            Value::Object(m) => {
                m.insert(key.into(), v);
            }
            Value::Array(l) => l[key.parse::<usize>().unwrap()] = v,
            _ => panic!("{ptr}"),
        }
    }

    fn post(a: &Agent, path: &str, v: &Value) -> Reply {
        a.handle("POST", path, v.to_string().as_bytes())
    }

    #[test]
    fn a_config_gets_the_models_defaults() {
        let a = agent();
        let r = post(&a, "/config", &good());
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body["warnings"], json!([]), "{}", r.body);
        let s = lock(&a.state);
        let f = &s.campaign.as_ref().unwrap().plan.flows[0];
        assert_eq!(f.blast.flows.count(), 12, "counts 3 and 4 step together");
        assert!(
            !f.blast.end_markers,
            "no frame the configuration did not ask for"
        );
        assert_eq!(f.blast.count, Some(10));
        assert_eq!(f.blast.framing.vlan, Some((10, 0)));
        assert_eq!(f.blast.framing.ttl, 64, "the model's default TTL");
        assert_eq!(f.blast.sizes.cycle().len(), 8, "7:1");
        assert_eq!(f.ids.span(), 16, "12 tuples: a block of 16 ids");
        // Nothing given: ethernet/ipv4/udp at their defaults, 64 bytes,
        // 1000 pps, continuous.
        let bare = json!({"ports": [{"name": "a", "location": "wire0"}],
            "flows": [{"name": "x", "tx_rx": {"port": {"tx_name": "a"}},
                "packet": [{"choice": "ethernet"}, {"choice": "ipv4"}, {"choice": "udp"}]}]});
        drop(s);
        let r = post(&a, "/config", &bare);
        assert_eq!(r.status, 200, "{}", r.body);
        let s = lock(&a.state);
        let f = &s.campaign.as_ref().unwrap().plan.flows[0];
        assert_eq!(
            (f.blast.count, f.blast.duration),
            (None, Duration::from_secs(5))
        );
        assert_eq!(f.blast.rate, linerate_packet::Rate::Pps(1000));
        assert_eq!(f.blast.sizes.cycle(), &[64]);
    }

    /// The OTG suite's VXLAN flow: outer IPv6/UDP to 4789, VNIs by
    /// values, inner Ethernet/IPv4/TCP; refusals by path.
    #[test]
    fn a_vxlan_flow_and_its_refusals() {
        let a = agent();
        let mut doc = good();
        let v = |x: &str| json!({"choice": "value", "value": x});
        set(
            &mut doc,
            "/flows/0/packet",
            json!([
                {"choice": "ethernet", "ethernet": {"src": v("00:00:01:01:01:01"), "dst": v("00:00:01:01:01:02")}},
                {"choice": "ipv6", "ipv6": {"src": v("2001:db8:1::1"), "dst": v("2001:db8:1::2")}},
                {"choice": "udp", "udp": {"src_port": {"choice": "value", "value": 4789}, "dst_port": {"choice": "value", "value": 4789}}},
                {"choice": "vxlan", "vxlan": {"vni": {"choice": "values", "values": [1000, 1001, 1002, 1003, 1004]}}},
                {"choice": "ethernet", "ethernet": {"src": v("00:00:01:01:01:03"), "dst": v("00:00:01:01:01:04")}},
                {"choice": "ipv4", "ipv4": {"src": v("198.18.1.3"), "dst": v("198.18.1.4")}},
                {"choice": "tcp", "tcp": {"src_port": {"choice": "value", "value": 80}, "dst_port": {"choice": "value", "value": 80}}}
            ]),
        );
        set(
            &mut doc,
            "/flows/0/size",
            json!({"choice": "fixed", "fixed": 256}),
        );
        let r = post(&a, "/config", &doc);
        assert_eq!(r.status, 200, "{}", r.body);
        {
            let s = lock(&a.state);
            let f = &s.campaign.as_ref().unwrap().plan.flows[0];
            let vx = f.blast.framing.vxlan.expect("encapsulated");
            assert_eq!((vx.vni.first, vx.vni.count, vx.vni.step), (1000, 5, 1));
            assert_eq!((vx.flags, vx.outer.dst_port), (8, 4789));
            assert_eq!(
                vx.outer.dst_ip,
                "2001:db8:1::2".parse::<std::net::IpAddr>().unwrap()
            );
            assert_eq!(f.blast.framing.tcp_flags, Some(0));
            assert_eq!(f.blast.flows.count(), 1, "one inner tuple");
            assert_eq!(f.sinks[0].take, RxFilter::Udp(Some((4789, 4789))));
        }
        let refused = |ptr: &str, val: Value, path: &str, why: &str| {
            let mut d = doc.clone();
            set(&mut d, ptr, val);
            let r = post(&a, "/config", &d);
            assert_eq!(r.status, 400, "{ptr}: {}", r.body);
            let e = r.body["errors"][0].as_str().unwrap().to_string();
            assert!(e.starts_with(path) && e.contains(why), "{ptr}: {e}");
        };
        refused(
            "/flows/0/packet/2/udp/dst_port",
            json!({"choice": "value", "value": 8472}),
            "flows[0].packet[2].udp.dst_port",
            "4789",
        );
        refused(
            "/flows/0/packet/1/ipv6/src",
            json!({"choice": "values", "values": ["2001:db8:1::1", "2001:db8:1::3"]}),
            "flows[0].packet[1].ipv6.src",
            "one value",
        );
        refused(
            "/flows/0/packet/4/ethernet/dst",
            json!({"choice": "auto"}),
            "flows[0].packet[4].ethernet.dst",
            "inner",
        );
        refused(
            "/flows/0/packet/3/vxlan/vni",
            json!({"choice": "value", "value": 16777216}),
            "flows[0].packet[3].vxlan.vni",
            "above",
        );
        refused(
            "/flows/0/packet/3/vxlan/flags",
            json!({"choice": "values", "values": [8, 9]}),
            "flows[0].packet[3].vxlan.flags",
            "one value",
        );
        refused(
            "/flows/0/packet/2",
            json!({"choice": "tcp"}),
            "flows[0].packet",
            "vxlan",
        );
        refused(
            "/flows/0/size",
            json!({"choice": "fixed", "fixed": 128}),
            "flows[0].size",
            "VXLAN",
        );
    }

    /// The model steps each field on its own per frame: frame n carries
    /// values[n % len], start + n*step (mod count), a decrement downward
    /// (the OTG suite's udp/tcp port tests).
    #[test]
    fn each_field_steps_on_its_own_as_the_model_says() {
        let a = agent();
        let mut doc = good();
        set(
            &mut doc,
            "/flows/0/packet/3/udp",
            json!({
                "src_port": {"choice": "increment", "increment": {"start": 5000, "step": 2, "count": 10}},
                "dst_port": {"choice": "decrement", "decrement": {"start": 6000, "step": 2, "count": 10}}
            }),
        );
        set(
            &mut doc,
            "/flows/0/packet/2/ipv4/dst",
            json!({"choice": "values", "values": ["198.18.1.9", "198.18.1.6", "198.18.1.3"]}),
        );
        let r = post(&a, "/config", &doc);
        assert_eq!(r.status, 200, "{}", r.body);
        let s = lock(&a.state);
        let spec = &s.campaign.as_ref().unwrap().plan.flows[0].blast.flows;
        assert_eq!(spec.count(), 30, "lcm(10, 10, 3)");
        let mut c = linerate_traffic::flows::FlowCursor::new(spec);
        for n in 0..100u64 {
            let (_, f) = c.get();
            assert_eq!(f.src_port, 5000 + (n % 10) as u16 * 2, "frame {n}");
            assert_eq!(f.dst_port, 6000 - (n % 10) as u16 * 2, "frame {n}");
            let d = [9u8, 6, 3][(n % 3) as usize];
            assert_eq!(
                f.dst_ip,
                std::net::IpAddr::from([198, 18, 1, d]),
                "frame {n}"
            );
            assert_eq!(*f, spec.flow(n));
            c.advance();
        }
        drop(s);
        // The suite's values: dst 6010 at frame 1.
        set(
            &mut doc,
            "/flows/0/packet/3/udp",
            json!({
                "src_port": {"choice": "values", "values": [5000, 5010, 5020, 5030]},
                "dst_port": {"choice": "values", "values": [6000, 6010, 6020, 6030]}
            }),
        );
        assert_eq!(post(&a, "/config", &doc).status, 200);
        let s = lock(&a.state);
        let spec = &s.campaign.as_ref().unwrap().plan.flows[0].blast.flows;
        assert_eq!((spec.flow(1).src_port, spec.flow(1).dst_port), (5010, 6010));
        assert_eq!((spec.flow(5).src_port, spec.flow(5).dst_port), (5010, 6010));
    }

    /// A configuration's errors come back together, each with its path:
    /// one a port, flow, layer1 and capture entry, and the sections'.
    #[test]
    fn every_error_of_a_config_comes_back_in_one_answer() {
        let a = agent();
        let mut doc = good();
        let bad_flow = |name: &str, v: Value| {
            let mut f = good()["flows"][0].clone();
            f["name"] = json!(name);
            set(&mut f, "/rate", v);
            f
        };
        let mut two = bad_flow("a", json!({"choice": "pps", "pps": 0}));
        set(&mut two, "/size", json!({"choice": "fixed", "fixed": 40}));
        doc["flows"] = json!([
            two,
            good()["flows"][0].clone(),
            bad_flow("c", json!({"choice": "percentage", "percentage": 200})),
        ]);
        set(&mut doc, "/ports/0/speed", json!(1));
        set(
            &mut doc,
            "/layer1",
            json!([{"name": "l", "port_names": ["tx"], "mtu": 1}]),
        );
        set(&mut doc, "/devices", json!([{"name": "d"}]));
        let r = post(&a, "/config", &doc);
        let errs = refusals::errors(&r);
        let paths: Vec<&str> = errs.iter().map(|e| e.split(':').next().unwrap()).collect();
        assert_eq!(
            paths,
            [
                "ports[0].speed",
                "devices[0].ethernets",
                "flows[0].size.fixed",
                "flows[0].rate.pps",
                "flows[2].rate.percentage",
                "layer1[0].mtu"
            ],
            "{errs:?}"
        );
        // The plan's errors too: two ports outside the allow-list.
        let mut doc = good();
        set(&mut doc, "/ports/0/location", json!("eth0"));
        set(&mut doc, "/ports/1/location", json!("eth1"));
        let r = post(&a, "/config", &doc);
        assert_eq!(r.body["errors"].as_array().unwrap().len(), 2, "{}", r.body);
    }

    #[test]
    fn layer1_as_snappi_sends_it_is_taken() {
        let a = agent();
        let mut doc = good();
        set(
            &mut doc,
            "/layer1",
            json!([{"name": "ly", "port_names": ["tx", "rx"], "speed": "speed_1_gbps",
                "mtu": 1500, "promiscuous": true, "auto_negotiate": true}]),
        );
        let r = post(&a, "/config", &doc);
        assert_eq!(r.status, 200, "{}", r.body);
        let s = lock(&a.state);
        assert!(s.former.is_empty(), "loopback ports: nothing changed");
    }

    #[test]
    fn what_linerate_would_not_honour_is_refused_by_path() {
        let a = agent();
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                // ipv4.src takes random now; the TTL's model has none.
                "/flows/0/packet/2/ipv4/time_to_live",
                json!({"choice": "random"}),
                "flows[0].packet[2].ipv4.time_to_live.choice",
            ),
            (
                "/flows/0/packet/3/udp/src_port",
                json!({"choice": "values", "values": [1, 5, 6]}),
                "evenly spaced",
            ),
            (
                "/flows/0/packet/3/udp/dst_port",
                json!({"choice": "value", "value": 70000}),
                "above 65535",
            ),
            (
                "/flows/0/rate",
                json!({"choice": "pps", "pps": "0"}),
                "flows[0].rate.pps",
            ),
            (
                "/flows/0/rate",
                json!({"choice": "pps", "pps": "9223372036854775807"}),
                "flows[0].rate.pps: above 1488095238",
            ),
            (
                // 5 s at most (the test agent's --max-run): 10,000 at 1000/s
                // would take 10.
                "/flows/0/duration",
                json!({"choice": "fixed_packets", "fixed_packets": {"packets": "10000"}}),
                "flows[0].duration.fixed_packets.packets: 10000 packets at 1000 frames/s take 10 s",
            ),
            (
                "/flows/0/size",
                json!({"choice": "fixed", "fixed": 40}),
                "64 to 9216",
            ),
            (
                "/flows/0/duration",
                json!({"choice": "fixed_seconds", "fixed_seconds": {"seconds": 10}}),
                "longest run",
            ),
            (
                "/flows/0/tx_rx/port/rx_names",
                json!(["tx"]),
                "both sends and receives",
            ),
            (
                "/flows/0/egress_packet",
                json!([{"choice": "ethernet"}]),
                "flows[0].egress_packet: not supported",
            ),
            ("/ports/1/location", json!("eth0"), "allow-list"),
            (
                "/devices",
                json!([{"name": "d", "bgp": {}, "ethernets": []}]),
                "devices[0].bgp: not supported",
            ),
            (
                "/layer1",
                json!([{"name": "l", "port_names": ["tx"], "speed": "speed_3_gbps"}]),
                "layer1[0].speed: 'speed_3_gbps' is not one",
            ),
            (
                "/layer1",
                json!([{"name": "l", "port_names": ["tx"], "mtu": 20}]),
                "layer1[0].mtu: 20",
            ),
            (
                "/layer1",
                json!([{"name": "l", "port_names": ["nope"]}]),
                "layer1[0].port_names[0]: no port is named 'nope'",
            ),
            (
                "/layer1",
                json!([{"name": "l", "port_names": ["tx"], "flow_control": {"choice": "ieee_802_1qbb"}}]),
                "layer1[0].flow_control: not supported",
            ),
            (
                "/captures",
                json!([{"name": "c", "port_names": ["rx"], "format": "erf"}]),
                "captures[0].format: 'erf'",
            ),
            (
                "/captures",
                json!([{"name": "c", "port_names": ["rx"], "filters": [{"choice": "ethernet", "ethernet": {"pfc_queue": {"value": "1"}}}]}]),
                "captures[0].filters[0].ethernet.pfc_queue: not supported",
            ),
            (
                "/flows/0/packet/2/ipv4/time_to_live",
                json!({"choice": "increment", "increment": {"start": 1, "count": 3}}),
                "one value",
            ),
        ];
        for (ptr, v, want) in cases {
            let mut doc = good();
            set(&mut doc, ptr, v);
            let r = post(&a, "/config", &doc);
            assert_eq!(r.status, 400, "{ptr}: {}", r.body);
            let msg = r.body["errors"][0].as_str().unwrap();
            assert!(msg.contains(want), "{ptr}: '{msg}' lacks '{want}'");
        }
    }

    #[test]
    fn routes_answer_with_the_models_shapes() {
        let a = agent();
        assert_eq!(
            a.handle("GET", "/capabilities/version", b"").body["api_spec_version"],
            API_SPEC_VERSION
        );
        assert_eq!(a.handle("GET", "/nope", b"").status, 404);
        assert_eq!(a.handle("DELETE", "/config", b"").status, 405);
        assert_eq!(a.handle("POST", "/config/append", b"{}").status, 405);
        assert_eq!(a.handle("GET", "/control/action", b"").status, 405);
        assert_eq!(a.handle("POST", "/config", b"{").status, 400);
        let start = json!({"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "start"}}});
        assert_eq!(
            post(&a, "/control/state", &start).status,
            409,
            "no configuration yet"
        );
        let m = post(
            &a,
            "/monitor/metrics",
            &json!({"choice": "flow", "flow": {"flow_names": []}}),
        );
        assert_eq!(
            m.body,
            json!({"choice": "flow_metrics", "flow_metrics": []})
        );
        let pause = json!({"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "pause"}}});
        assert_eq!(post(&a, "/control/state", &pause).status, 400);
        post(&a, "/config", &good());
        let m = post(
            &a,
            "/monitor/metrics",
            &json!({"choice": "flow", "flow": {"flow_names": ["nope"]}}),
        );
        assert_eq!(m.status, 400);
        let m = post(&a, "/monitor/metrics", &json!({"choice": "port"}));
        assert_eq!(
            m.body["port_metrics"][0]["frames_tx"], "0",
            "64-bit counters as strings"
        );
        // A peer's routes take only allowed interfaces and known receivers.
        for (path, body, want) in [
            (
                "/linerate/port",
                json!({"iface": "eth0"}),
                "not an interface",
            ),
            (
                "/linerate/rx/start",
                json!({"iface": "eth0", "ids": {"base": 0, "span": 4}, "seconds": 1}),
                "not an interface",
            ),
            (
                "/linerate/rx/start",
                json!({"iface": "wire0", "ids": {"base": 0, "span": 3}, "seconds": 1}),
                "power-of-two",
            ),
            (
                "/linerate/rx/start",
                json!({"iface": "wire0", "ids": {"base": 0, "span": 4}, "seconds": 1e9}),
                "seconds",
            ),
            ("/linerate/rx/counts", json!({"id": 7}), "no receiver 7"),
            ("/linerate/rx/stop", json!({"id": "x"}), "unsigned integer"),
            (
                "/linerate/rx/stop",
                json!({"id": 1, "more": 1}),
                "more: not supported",
            ),
        ] {
            let r = post(&a, path, &body);
            assert_eq!(r.status, 400, "{path} {body}");
            let msg = r.body["errors"][0].as_str().unwrap();
            assert!(msg.contains(want), "{path}: '{msg}' lacks '{want}'");
        }
    }

    /// A flow that cannot send (here: a loopback port nobody made) reads
    /// stopped, and the next stop says why.
    /// Captures end to end on a loopback wire: started, a flow's frames
    /// kept by its receiver, answered as a pcap of whole frames with
    /// their FCS and nothing else; a port without a capture refused by
    /// name; port metrics say the state.
    #[test]
    fn a_capture_holds_the_flows_frames_whole() {
        let opts = Options {
            allow: vec!["capwire".into()],
            ..agent().opts.clone()
        };
        let _wire = linerate_backend::loopback::Port::create(
            &opts.wires,
            "capwire",
            1500,
            linerate_backend::loopback::Faults::default(),
        )
        .unwrap();
        let a = Agent::new(opts);
        let mut doc = good();
        set(&mut doc, "/ports/0/location", json!("capwire"));
        set(&mut doc, "/ports/1/location", json!("capwire"));
        set(
            &mut doc,
            "/captures",
            json!([{"name": "c", "port_names": ["rx"], "format": "pcap"}]),
        );
        set(
            &mut doc,
            "/flows/0/size",
            json!({"choice": "fixed", "fixed": 128}),
        );
        assert_eq!(post(&a, "/config", &doc).status, 200);
        let cap = |state: &str, names: Value| json!({"choice": "port", "port": {"choice": "capture", "capture": {"state": state, "port_names": names}}});
        let r = post(&a, "/control/state", &cap("start", json!(["tx"])));
        assert_eq!(r.status, 400);
        assert!(
            r.body["errors"][0]
                .as_str()
                .unwrap()
                .contains("'tx' has no capture"),
            "{}",
            r.body
        );
        assert_eq!(
            post(&a, "/control/state", &cap("start", json!([]))).status,
            200
        );
        let ports = post(&a, "/monitor/metrics", &json!({"choice": "port"}));
        assert_eq!(ports.body["port_metrics"][1]["capture"], "started");
        assert_eq!(ports.body["port_metrics"][0]["capture"], "stopped");
        let ctl = json!({"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "start"}}});
        assert_eq!(post(&a, "/control/state", &ctl).status, 200);
        let req = json!({"choice": "flow", "flow": {"flow_names": ["f1"]}});
        let end = std::time::Instant::now() + Duration::from_secs(20);
        let m = loop {
            let m = post(&a, "/monitor/metrics", &req).body["flow_metrics"][0].clone();
            if m["transmit"] == "stopped" {
                break m;
            }
            assert!(std::time::Instant::now() < end, "the flow did not stop");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(
            (&m["frames_tx"], &m["frames_rx"]),
            (&json!("10"), &json!("10")),
            "{m}"
        );
        assert_eq!(
            post(&a, "/control/state", &cap("stop", json!([]))).status,
            200
        );
        let r = post(&a, "/monitor/capture", &json!({"port_name": "rx"}));
        assert_eq!(r.status, 200, "{}", r.body);
        let bytes = r.bytes.unwrap();
        let mut rd = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
        let mut n = 0;
        while let Some(p) = rd.next_packet() {
            let p = p.unwrap();
            assert_eq!(p.data.len(), 128, "the frame whole, with its FCS");
            let (body, fcs) = p.data.split_at(124);
            assert_eq!(fcs, crc32fast::hash(body).to_le_bytes());
            assert_eq!(&body[6..12], &[2, 0, 0, 0, 0, 1], "the flow's source MAC");
            n += 1;
        }
        assert_eq!(n, 10, "the flow's 10 frames and nothing else");
        let r = post(&a, "/monitor/capture", &json!({"port_name": "tx"}));
        assert_eq!(r.status, 400, "{}", r.body);
    }

    #[test]
    fn a_failed_flow_stops_and_its_reason_comes_back_on_stop() {
        let a = agent();
        let mut doc = good();
        // No receive port: the send fails at once.
        set(&mut doc, "/flows/0/tx_rx/port/rx_names", json!([]));
        assert_eq!(post(&a, "/config", &doc).status, 200);
        let ctl = |state: &str| json!({"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": state}}});
        assert_eq!(post(&a, "/control/state", &ctl("start")).status, 200);
        let req = json!({"choice": "flow", "flow": {"flow_names": ["f1"]}});
        let end = std::time::Instant::now() + Duration::from_secs(20);
        while post(&a, "/monitor/metrics", &req).body["flow_metrics"][0]["transmit"] != "stopped" {
            assert!(std::time::Instant::now() < end, "the flow did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
        let r = post(&a, "/control/state", &ctl("stop"));
        assert_eq!(r.status, 200);
        let w = r.body["warnings"][0].as_str().unwrap_or("");
        assert!(w.starts_with("flow 'f1': "), "{}", r.body);
    }

    /// Mutated configurations (any node replaced by hostile values) and
    /// random bytes never panic the agent: each is an answer.
    #[test]
    fn hostile_documents_are_answered_never_panicked_on() {
        let a = agent();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let hostile = [
            json!(null),
            json!(-1),
            json!(1e308),
            json!("18446744073709551616"),
            json!(u64::MAX),
            json!(""),
            json!("x".repeat(300)),
            json!([]),
            json!({}),
            json!([[[[]]]]),
            json!(true),
            json!({"choice": "increment", "increment": {"start": "255.255.255.255", "step": "0.0.0.1", "count": "4294967295"}}),
            json!({"choice": "decrement", "decrement": {"start": 0, "step": 1, "count": 2}}),
            json!({"choice": "values", "values": []}),
            json!("ff:ff:ff:ff:ff:ff"),
            json!("::"),
        ];
        fn nodes(v: &Value, at: String, out: &mut Vec<String>) {
            out.push(at.clone());
            match v {
                Value::Object(m) => m
                    .iter()
                    .for_each(|(k, x)| nodes(x, format!("{at}/{k}"), out)),
                Value::Array(l) => l
                    .iter()
                    .enumerate()
                    .for_each(|(i, x)| nodes(x, format!("{at}/{i}"), out)),
                _ => {}
            }
        }
        let mut paths = Vec::new();
        nodes(&good(), String::new(), &mut paths);
        for _ in 0..3000 {
            let mut doc = good();
            for _ in 0..1 + rnd() % 3 {
                let p = &paths[(rnd() % paths.len() as u64) as usize];
                if let Some(x) = doc.pointer_mut(p) {
                    *x = hostile[(rnd() % hostile.len() as u64) as usize].clone();
                }
            }
            let r = post(&a, "/config", &doc);
            assert!(
                r.status == 200 || r.status == 400,
                "{}: {}",
                r.status,
                r.body
            );
            let r = post(&a, "/monitor/metrics", &doc);
            assert!(r.status == 200 || r.status == 400, "{}", r.body);
        }
        for _ in 0..500 {
            let bytes: Vec<u8> = (0..rnd() % 200).map(|_| rnd() as u8).collect();
            for path in ["/config", "/control/state", "/monitor/metrics"] {
                assert_eq!(a.handle("POST", path, &bytes).status, 400);
            }
        }
    }
}

/// What the API tests check of a refusal.
#[cfg(test)]
pub(crate) mod refusals {
    use super::Reply;

    /// A 400's `errors`, in order.
    pub fn errors(r: &Reply) -> Vec<String> {
        assert_eq!(r.status, 400, "{}", r.body);
        r.body["errors"]
            .as_array()
            .expect("an errors list")
            .iter()
            .map(|e| e.as_str().expect("an error is text").to_string())
            .collect()
    }

    /// Flow i refused at case i's path (its `flows[0]` read as
    /// `flows[i]`) for case i's reason, in order.
    pub fn each_at_its_path<T>(errs: &[String], cases: &[(T, &str, &str)]) {
        for (i, (_, path, why)) in cases.iter().enumerate() {
            let path = path.replace("flows[0]", &format!("flows[{i}]"));
            assert!(
                errs[i].starts_with(&format!("{path}:")) && errs[i].contains(why),
                "{i}: {}",
                errs[i]
            );
        }
    }
}

#[cfg(test)]
#[path = "api_custom_tests.rs"]
mod custom_tests;

#[cfg(test)]
#[path = "api_random_tests.rs"]
mod random_tests;

#[cfg(test)]
#[path = "api_stacked_tests.rs"]
mod stacked_tests;

#[cfg(test)]
#[path = "api_tags_tests.rs"]
mod tags_tests;

#[cfg(test)]
#[path = "api_capture_tests.rs"]
mod capture_tests;

#[cfg(test)]
#[path = "api/update_tests.rs"]
mod update_tests;
