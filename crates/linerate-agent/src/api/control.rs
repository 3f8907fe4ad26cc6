//! `POST /control/state`: flows started and stopped, ports' captures
//! started and stopped.

use super::{Agent, Reply, STOP_SLACK};
use crate::campaign::lock;
use crate::json::{Obj, invalid};
use crate::model;
use crate::plan::Plan;
use serde_json::Value;

impl Agent {
    pub(super) fn control_state(&self, doc: &Value, arrived: u64) -> Result<Reply, Reply> {
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

    /// The flows named (every flow when none is), by index.
    pub(super) fn chosen(plan: &Plan, names: &[&str]) -> Result<Vec<usize>, Reply> {
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
