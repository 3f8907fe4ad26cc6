//! `POST /config`: a configuration checked whole, then taken (the last
//! one's layer1 undone, this one's applied, its captures and devices'
//! responders made).

use super::{Agent, Reply};
use crate::campaign::{Campaign, lock};
use crate::json::invalid;
use crate::model;
use crate::plan::{self, Plan};
use serde_json::Value;

impl Agent {
    pub(super) fn set_config(&self, doc: Value) -> Result<Reply, Reply> {
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
