//! The API's routes without I/O: a request (method, path, body) in, a
//! status and a JSON document out, as the models' responses are shaped
//! (`Warning`, `Error`, `MetricsResponse`, `Version`; 64-bit counters as
//! strings of digits).

use crate::campaign::{Campaign, FlowCounts, lock};
use crate::json::{Invalid, Obj, invalid};
use crate::metrics::{FlowMetric, MetricsResponse, PortMetric};
use crate::model;
use crate::plan::{self, Options, Plan};
use crate::tags::TagRequest;
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
            ("POST", "/control/state") => Route::ControlState,
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
                | "/control/state"
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
                        "{path}: not a path of the agent (it serves /config, /control/state, /monitor/metrics, /monitor/capture, /monitor/states and /capabilities/version)"
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
            Route::ControlState => self.control_state(&doc, arrived),
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

    /// The routes a peer agent calls (`crate::peer`).
    fn peer_route(&self, path: &str, body: &[u8]) -> Reply {
        let doc: Value = match crate::json::parse(body) {
            Ok(v) => v,
            Err(e) => return Reply::error(400, format!("the body is not JSON as taken: {e}")),
        };
        let o = match Obj::new("", &doc) {
            Ok(o) => o,
            Err(e) => return Reply::invalid(e),
        };
        let r = match path {
            "/linerate/port" => self.port_facts(&o).map(|f| Reply::typed(&f)),
            "/linerate/rx/start" => self
                .receivers
                .start(
                    &o,
                    &self.opts.allow,
                    (self.opts.rx_backend, &self.opts.wires),
                    self.opts.run_max,
                )
                .map(|id| Reply::typed(&id)),
            "/linerate/rx/counts" => self.receivers.counts(&o).map(|c| Reply::typed(&c)),
            _ => self.receivers.stop(&o).map(|c| Reply::typed(&c)),
        };
        r.unwrap_or_else(Reply::invalid)
    }

    /// `/linerate/port`: an allowed interface's MAC and link.
    fn port_facts(&self, o: &Obj) -> Result<crate::peer::PortFacts, Invalid> {
        let iface = o.str("iface")?.unwrap_or("").to_string();
        o.done()?;
        if !self.opts.allow.contains(&iface) {
            return Err(invalid(
                "iface",
                format!("'{iface}' is not an interface this agent may use"),
            ));
        }
        let mac = linerate_backend::iface::mac(&iface)
            .map_err(|e| invalid("iface", format!("{iface}: {e}")))?;
        Ok(crate::peer::PortFacts {
            mac: linerate_backend::iface::format_mac(mac),
            up: linerate_backend::iface::is_up(&iface).unwrap_or(false),
        })
    }

    fn version(&self) -> Reply {
        Reply::ok(json!({
            "api_spec_version": API_SPEC_VERSION,
            "sdk_version": "",
            "app_version": format!("linerate {}", env!("CARGO_PKG_VERSION")),
        }))
    }

    fn set_config(&self, doc: Value) -> Result<Reply, Reply> {
        let cfg = model::config_all(&doc).map_err(Reply::invalid_all)?;
        // Checked first (ports allowed, flows runnable) before any
        // interface is changed.
        plan::plan_all(&cfg, &self.opts).map_err(Reply::invalid_all)?;
        let mut s = lock(&self.state);
        if s.campaign.as_ref().is_some_and(Campaign::any_running) {
            return Err(Reply::error(
                409,
                "traffic is running: stop it first (/control/state, flow_transmit stop)",
            ));
        }
        // The last configuration's layer1 undone, this one's applied,
        // then the plan made again over the interfaces as they are now
        // (their MTU bounds the frames).
        crate::layer1::restore(&std::mem::take(&mut s.former));
        s.campaign = None;
        s.config = None;
        s.captures = None;
        // The last configuration's responders ended (joined).
        s.devices = None;
        let ports = plan::plan(
            &model::Config {
                flows: Vec::new(),
                ..cfg.clone()
            },
            &self.opts,
        )
        .map_err(Reply::invalid)?
        .ports;
        let (mut warnings, former) =
            crate::layer1::apply(&cfg, &ports, &self.opts).map_err(Reply::invalid)?;
        let plan = match plan::plan(&cfg, &self.opts) {
            Ok(p) => p,
            Err(e) => {
                crate::layer1::restore(&former);
                return Err(Reply::invalid(e));
            }
        };
        warnings.extend(self::warnings(&cfg, &plan));
        let mut captures = crate::capture::Captures::new(plan.ports.len()).map_err(|e| {
            crate::layer1::restore(&former);
            Reply::error(500, format!("the captures' directory: {e}"))
        })?;
        let names: Vec<String> = plan.ports.iter().map(|p| p.name.clone()).collect();
        captures.configure(&cfg.captures, &names);
        if self.opts.rx_backend != linerate_packet::BackendKind::Loopback {
            captures.use_interfaces(crate::port_capture::interfaces(&plan.ports));
        }
        if let Some(i) = plan.ports.iter().position(|p| {
            p.remote.is_some() && cfg.captures.iter().any(|c| c.ports.contains(&p.name))
        }) {
            crate::layer1::restore(&former);
            return Err(Reply::invalid(invalid(
                "captures",
                format!(
                    "port '{}' is on a peer agent: the agent captures on its own ports only",
                    plan.ports[i].name
                ),
            )));
        }
        let responders = crate::neighbors::Responders::start(
            &cfg.devices,
            &cfg.flows,
            |p| {
                let p = plan.ports.iter().find(|x| x.name == p)?;
                Some(p.iface.clone())
            },
            self.opts.tx_backend != linerate_packet::BackendKind::Loopback,
        )
        .map_err(|e| {
            crate::layer1::restore(&former);
            Reply::error(500, format!("devices: {e}"))
        })?;
        s.devices = (!cfg.devices.is_empty()).then(|| std::sync::Arc::new(responders));
        s.captures = Some(captures);
        s.former = former;
        s.campaign = Some(Campaign::new(plan));
        s.stopped_at.clear();
        s.config = Some(doc);
        Ok(Reply::warnings(warnings))
    }

    fn control_state(&self, doc: &Value, arrived: u64) -> Result<Reply, Reply> {
        let o = Obj::new("", doc).map_err(Reply::invalid)?;
        let c = o.str("choice").map_err(Reply::invalid)?.unwrap_or("");
        if c == "port" {
            return self.capture_state(&o);
        }
        if c != "traffic" {
            return Err(Reply::invalid(invalid(
                "choice",
                format!("'{c}': the agent controls traffic and port captures only"),
            )));
        }
        let (t, ft) = chosen(
            &o,
            "traffic",
            "flow_transmit",
            "the agent takes flow_transmit only",
        )?;
        let state = ft.str("state").map_err(Reply::invalid)?.unwrap_or("");
        let names = ft
            .strs("flow_names", model::FLOWS_MAX)
            .map_err(Reply::invalid)?
            .unwrap_or_default();
        ft.done().map_err(Reply::invalid)?;
        t.done().map_err(Reply::invalid)?;
        o.done().map_err(Reply::invalid)?;
        match state {
            "start" => self.start(&names, arrived),
            "stop" => self.stop(&names, arrived),
            "pause" | "resume" => Err(Reply::invalid(invalid(
                "traffic.flow_transmit.state",
                format!("'{state}' is not supported by linerate agent (start and stop are)"),
            ))),
            s => Err(Reply::invalid(invalid(
                "traffic.flow_transmit.state",
                format!("'{s}' is not a state (start, stop)"),
            ))),
        }
    }

    /// `port.capture`: captures started or stopped.
    fn capture_state(&self, o: &Obj) -> Result<Reply, Reply> {
        let (p, c) = chosen(
            o,
            "port",
            "capture",
            "the agent takes capture only (it does not set links)",
        )?;
        let state = c.str("state").map_err(Reply::invalid)?.unwrap_or("");
        let names = c
            .strs("port_names", model::PORTS_MAX)
            .map_err(Reply::invalid)?
            .unwrap_or_default();
        c.done().map_err(Reply::invalid)?;
        p.done().map_err(Reply::invalid)?;
        o.done().map_err(Reply::invalid)?;
        let start = match state {
            "start" => true,
            "stop" => false,
            s => {
                return Err(Reply::invalid(invalid(
                    "port.capture.state",
                    format!("'{s}' is not a state (start, stop)"),
                )));
            }
        };
        let mut s = lock(&self.state);
        let s = &mut *s;
        let (Some(camp), Some(caps)) = (s.campaign.as_ref(), s.captures.as_mut()) else {
            return Err(Reply::error(409, "no configuration: POST /config first"));
        };
        let ports = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                camp.plan
                    .ports
                    .iter()
                    .position(|p| p.name == *n)
                    .ok_or_else(|| {
                        Reply::invalid(invalid(
                            &format!("port.capture.port_names[{i}]"),
                            format!("no port is named '{n}'"),
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut w = caps.set(&ports, start).map_err(Reply::invalid)?;
        if !start {
            for (i, p) in caps.ports.iter().enumerate() {
                if p.capture.is_some() && caps.was_cut(i) {
                    w.push(format!(
                        "capture of port '{}': cut at its bound ({} frames or {} bytes): it holds the first frames only",
                        camp.plan.ports[i].name,
                        crate::capture::FRAMES_MAX,
                        crate::capture::BYTES_MAX
                    ));
                }
            }
        }
        Ok(Reply::warnings(w))
    }

    /// `/monitor/capture`: a port's capture as a file.
    fn capture(&self, doc: &Value) -> Result<Reply, Reply> {
        let o = Obj::new("", doc).map_err(Reply::invalid)?;
        let name = o
            .str("port_name")
            .map_err(Reply::invalid)?
            .ok_or_else(|| Reply::invalid(invalid("port_name", "required")))?;
        o.done().map_err(Reply::invalid)?;
        let s = lock(&self.state);
        let (Some(camp), Some(caps)) = (s.campaign.as_ref(), s.captures.as_ref()) else {
            return Err(Reply::error(409, "no configuration: POST /config first"));
        };
        let p = camp
            .plan
            .ports
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| {
                Reply::invalid(invalid("port_name", format!("no port is named '{name}'")))
            })?;
        if caps.ports[p].capture.is_none() {
            return Err(Reply::invalid(invalid(
                "port_name",
                format!("port '{name}' has no capture in the configuration"),
            )));
        }
        let (bytes, _) = caps.read(p).map_err(|e| Reply::error(500, e))?;
        Ok(Reply::file(bytes))
    }

    /// The flows named (every flow when none is), by index.
    fn chosen(plan: &Plan, names: &[&str]) -> Result<Vec<usize>, Reply> {
        if names.is_empty() {
            return Ok((0..plan.flows.len()).collect());
        }
        names
            .iter()
            .map(|n| {
                plan.flows.iter().position(|f| f.name == *n).ok_or_else(|| {
                    Reply::invalid(invalid("flow_names", format!("no flow is named '{n}'")))
                })
            })
            .collect()
    }

    fn start(&self, names: &[&str], arrived: u64) -> Result<Reply, Reply> {
        let macs = self.device_macs(names)?;
        let mut s = lock(&self.state);
        let s = &mut *s;
        let camp = s
            .campaign
            .as_ref()
            .ok_or_else(|| Reply::error(409, "no configuration: POST /config first"))?;
        let mut which = Self::chosen(&camp.plan, names)?;
        // A flow stopped by a request that arrived after this one: the
        // stop stands.
        let before = which.len();
        which.retain(|&i| {
            s.stopped_at
                .get(&camp.plan.flows[i].name)
                .is_none_or(|&at| at < arrived)
        });
        if which.is_empty() && before > 0 {
            return Ok(Reply::warnings(vec![
                "a stop that arrived after this start was answered first: nothing started".into(),
            ]));
        }
        if which.is_empty() {
            return Err(Reply::error(409, "the configuration has no flows"));
        }
        if let Some(&i) = which.iter().find(|&&i| camp.flows[i].running()) {
            return Err(Reply::error(
                409,
                format!(
                    "flow '{}' is transmitting: stop it first",
                    camp.plan.flows[i].name
                ),
            ));
        }
        // Each started flow's thread sends its end here when a run is
        // reported (`crate::run`).
        let (ended_tx, ended_rx) = std::sync::mpsc::channel();
        let reporting = self.opts.reporting.is_some();
        let mut started = Vec::new();
        let mut failed = None;
        for &i in &which {
            let mut flow = camp.plan.flows[i].clone();
            if let Some(&(_, m)) = macs.iter().find(|(k, _)| *k == i) {
                flow.blast.flows.dst_mac =
                    linerate_traffic::flows::Range::single(u128::from(m.to_u64()));
            }
            if let Some(caps) = s.captures.as_mut() {
                for (k, sink) in flow.sinks.iter_mut().enumerate() {
                    let p = flow.rx[flow.sink_rx[k]];
                    let mtu = linerate_backend::iface::mtu(&sink.iface).unwrap_or(1500);
                    let running = |f: usize| camp.flows[f].running();
                    sink.capture = caps.file_for(p, i, mtu, &running).map(|f| {
                        linerate_packet::CaptureConfig {
                            path: f.path,
                            overwrite: false,
                            snaplen: f.snaplen,
                            max_frames: f.max_frames,
                        }
                    });
                }
            }
            let report = reporting.then(|| (i, ended_tx.clone()));
            match camp.flows[i].start(flow, report) {
                Ok(generation) => started.push((i, camp.flows[i].clone(), generation)),
                Err(e) => {
                    failed = Some(Reply::error(
                        500,
                        format!("starting flow '{}': {e}", camp.plan.flows[i].name),
                    ));
                    break;
                }
            }
        }
        drop(ended_tx);
        if let Some(to) = &self.opts.reporting
            && !started.is_empty()
        {
            s.watchers.retain(|h| !h.is_finished());
            let w = crate::run::Watch::new(&camp.plan, started, ended_rx);
            if let Ok(h) = w.spawn(to) {
                s.watchers.push(h);
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(Reply::warnings(Vec::new()))
    }

    /// The destination MACs of the device flows among `names` (their next
    /// hops' as the responders resolved them), waited for outside the
    /// lock for at most `neighbors::RESOLVE_WAIT`.
    fn device_macs(&self, names: &[&str]) -> Result<Vec<(usize, linerate_wire::MacAddr)>, Reply> {
        let (plan, which, devices) = {
            let s = lock(&self.state);
            let Some(camp) = s.campaign.as_ref() else {
                return Ok(Vec::new());
            };
            let which = Self::chosen(&camp.plan, names)?;
            (camp.plan.clone(), which, s.devices.clone())
        };
        let deadline = std::time::Instant::now() + crate::neighbors::RESOLVE_WAIT;
        crate::neighbors::flow_macs(devices.as_deref(), &plan, &which, deadline)
            .map_err(|e| Reply::error(409, e))
    }

    fn stop(&self, names: &[&str], arrived: u64) -> Result<Reply, Reply> {
        // The flows are asked to stop under the lock, waited for outside
        // it: metrics stay answered meanwhile.
        let (flows, wait) = {
            let mut s = lock(&self.state);
            let s = &mut *s;
            let Some(camp) = s.campaign.as_ref() else {
                return Ok(Reply::warnings(Vec::new()));
            };
            let which = Self::chosen(&camp.plan, names)?;
            for &i in &which {
                let at = s
                    .stopped_at
                    .entry(camp.plan.flows[i].name.clone())
                    .or_insert(arrived);
                *at = (*at).max(arrived);
            }
            let flows: Vec<_> = which
                .iter()
                .map(|&i| (camp.plan.flows[i].name.clone(), camp.flows[i].clone()))
                .collect();
            for (_, f) in &flows {
                f.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            (flows, self.opts.drain + STOP_SLACK)
        };
        let end = std::time::Instant::now() + wait;
        let all = flows
            .iter()
            .all(|(_, f)| f.stop_within(end.saturating_duration_since(std::time::Instant::now())));
        let mut w = Vec::new();
        if !all {
            w.push(format!(
                "some flows had not ended {} s after the stop: their counts are still running",
                wait.as_secs()
            ));
        }
        // What failed a flow (the metrics have no field for it).
        for (name, f) in &flows {
            if let Some(e) = f.snapshot().error {
                w.push(format!("flow '{name}': {e}"));
            }
        }
        Ok(Reply::warnings(w))
    }

    fn metrics(&self, doc: &Value) -> Result<Reply, Reply> {
        let o = Obj::new("", doc).map_err(Reply::invalid)?;
        let c = o.str("choice").map_err(Reply::invalid)?.unwrap_or("port");
        let s = lock(&self.state);
        let empty = Campaign::new(Plan {
            ports: Vec::new(),
            flows: Vec::new(),
        });
        let camp = s.campaign.as_ref().unwrap_or(&empty);
        let snaps: Vec<FlowCounts> = camp.flows.iter().map(|f| f.snapshot()).collect();
        match c {
            "flow" => {
                let (names, tag_req) = flow_request(&o)?;
                let which = Self::chosen(&camp.plan, &names)?;
                crate::tags::check_filters(
                    &tag_req,
                    which.iter().map(|&i| camp.plan.flows[i].tags.as_deref()),
                )
                .map_err(Reply::invalid)?;
                let flow_metrics = which
                    .iter()
                    .map(|&i| {
                        let mut m = FlowMetric::of(&camp.plan, i, &snaps[i]);
                        if let Some(t) = &camp.plan.flows[i].tags {
                            m.tagged_metrics =
                                crate::tags::rows(t, &snaps[i].tag_counts(), &tag_req);
                        }
                        m
                    })
                    .collect();
                Ok(Reply::typed(&MetricsResponse::FlowMetrics { flow_metrics }))
            }
            "port" => {
                let req = o.obj("port").map_err(Reply::invalid)?;
                let names = match &req {
                    Some(r) => {
                        r.strs("column_names", 32).map_err(Reply::invalid)?;
                        let n = r
                            .strs("port_names", model::PORTS_MAX)
                            .map_err(Reply::invalid)?;
                        r.done().map_err(Reply::invalid)?;
                        n.unwrap_or_default()
                    }
                    None => Vec::new(),
                };
                o.done().map_err(Reply::invalid)?;
                let which: Vec<usize> = if names.is_empty() {
                    (0..camp.plan.ports.len()).collect()
                } else {
                    names
                        .iter()
                        .map(|n| {
                            camp.plan
                                .ports
                                .iter()
                                .position(|p| p.name == *n)
                                .ok_or_else(|| {
                                    Reply::invalid(invalid(
                                        "port.port_names",
                                        format!("no port is named '{n}'"),
                                    ))
                                })
                        })
                        .collect::<Result<_, _>>()?
                };
                let port_metrics = which
                    .iter()
                    .map(|&p| {
                        let on = s
                            .captures
                            .as_ref()
                            .and_then(|c| c.ports.get(p))
                            .is_some_and(|c| c.started);
                        PortMetric::of(&camp.plan, p, &snaps, on)
                    })
                    .collect();
                Ok(Reply::typed(&MetricsResponse::PortMetrics { port_metrics }))
            }
            other => Err(Reply::invalid(invalid(
                "choice",
                format!("'{other}': the agent reports port and flow metrics only"),
            ))),
        }
    }
}

/// A flow metrics request's `flow`: the flows asked (none: all) and what
/// it asks of their tags.
fn flow_request<'a>(o: &Obj<'a>) -> Result<(Vec<&'a str>, TagRequest), Reply> {
    let req = o.obj("flow").map_err(Reply::invalid)?;
    let asked = match &req {
        Some(r) => {
            r.strs("metric_names", 32).map_err(Reply::invalid)?;
            let t = r
                .obj("tagged_metrics")
                .and_then(TagRequest::read)
                .map_err(Reply::invalid)?;
            let n = r
                .strs("flow_names", model::FLOWS_MAX)
                .map_err(Reply::invalid)?;
            r.done().map_err(Reply::invalid)?;
            (n.unwrap_or_default(), t)
        }
        None => (Vec::new(), TagRequest::default()),
    };
    o.done().map_err(Reply::invalid)?;
    Ok(asked)
}

/// Beyond the drain, how long a stop waits for flows to end.
const STOP_SLACK: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    SetConfig,
    GetConfig,
    ControlState,
    Metrics,
    Capture,
    States,
}

/// What the client should know about how its flows will be sent.
fn warnings(cfg: &model::Config, plan: &Plan) -> Vec<String> {
    let mut w = Vec::new();
    for (f, _) in cfg.flows.iter().zip(&plan.flows) {
        if f.rx.is_empty() {
            w.push(format!(
                "flow '{}': no receive port: frames_rx stays 0",
                f.name
            ));
        }
    }
    w
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

/// `o`'s object `key` (required), whose `choice` must be `want` (else
/// refused with `only`), and that choice's object (required): the shape
/// of every control request the agent takes.
fn chosen<'a>(
    o: &Obj<'a>,
    key: &'static str,
    want: &'static str,
    only: &str,
) -> Result<(Obj<'a>, Obj<'a>), Reply> {
    let outer = o
        .obj(key)
        .map_err(Reply::invalid)?
        .ok_or_else(|| Reply::invalid(invalid(key, "required")))?;
    let c = outer.str("choice").map_err(Reply::invalid)?.unwrap_or("");
    if c != want {
        return Err(Reply::invalid(invalid(
            &format!("{key}.choice"),
            format!("'{c}': {only}"),
        )));
    }
    let inner = outer
        .obj(want)
        .map_err(Reply::invalid)?
        .ok_or_else(|| Reply::invalid(invalid(&format!("{key}.{want}"), "required")))?;
    Ok((outer, inner))
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
