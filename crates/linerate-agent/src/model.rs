//! The Open Traffic Generator model's subset the agent runs (models and
//! snappi 1.62): a `/config` document read into typed ports and flows,
//! every field the client left out given the model's default, every field
//! it set that linerate would not honour refused by its path.
//!
//! - `ports`: the ports and their `layer1` settings;
//! - `captures`: the ports whose frames are kept;
//! - `flows`: each flow's ports, size, rate, duration and metrics;
//! - `packet`: a flow's list of headers, each read by `headers`, its
//!   fields' values by `patterns`.

pub mod arp;
pub mod captures;
pub mod flows;
pub mod headers;
pub mod packet;
pub mod patterns;
pub mod ports;

pub use captures::{CAPTURE_FRAMES_MAX, Capture};
pub use flows::{Delay, Duration, Flow, PPS_MAX, Rate, SECONDS_MAX, Size, Stop, l1_bps};
pub use headers::{CUSTOM_MAX, Headers, Outer};
pub use patterns::{Field, VALUES_MAX};
pub use ports::{Layer1, MTU_MAX, PORTS_MAX, Port, SPEEDS};

use crate::json::{Invalid, Obj, invalid};
use captures::captures;
use flows::flow;
use ports::{layer1, port};
use serde_json::Value;

/// Most flows one configuration may hold.
pub const FLOWS_MAX: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub ports: Vec<Port>,
    pub flows: Vec<Flow>,
    pub layer1: Vec<Layer1>,
    pub captures: Vec<Capture>,
    /// Emulated devices (`crate::devices`).
    pub devices: Vec<crate::devices::Device>,
}

/// Reads a `/config` document: its first error.
pub fn config(v: &Value) -> Result<Config, Invalid> {
    config_all(v).map_err(|mut e| e.remove(0))
}

/// Reads a `/config` document: every port, flow, layer1 and capture
/// entry is read, and the refusal is the list of their errors (the
/// first of each entry, of each part of a flow, each with its path), in
/// document order.
pub fn config_all(v: &Value) -> Result<Config, Vec<Invalid>> {
    let o = Obj::new("", v).map_err(|e| vec![e])?;
    let mut errs = Vec::new();
    let mut ports = Vec::new();
    match o.list("ports", PORTS_MAX) {
        Err(e) => errs.push(e),
        Ok(list) => {
            for (i, p) in list.unwrap_or_default().iter().enumerate() {
                match port(i, p, &ports) {
                    (Some(p), e) => {
                        ports.push(p);
                        errs.extend(e);
                    }
                    (None, e) => errs.extend(e),
                }
            }
        }
    }
    let devices = crate::devices::devices(&o, &ports, &mut errs);
    let mut flows = Vec::new();
    match o.list("flows", FLOWS_MAX) {
        Err(e) => errs.push(e),
        Ok(list) => {
            for (i, f) in list.unwrap_or_default().iter().enumerate() {
                let f = match Obj::new(&format!("flows[{i}]"), f)
                    .map_err(|e| vec![e])
                    .and_then(|f| flow(&f, &ports, &devices))
                {
                    Ok(f) => f,
                    Err(e) => {
                        errs.extend(e);
                        continue;
                    }
                };
                if flows.iter().any(|g: &Flow| g.name == f.name) {
                    errs.push(invalid(
                        &format!("flows[{i}].name"),
                        format!("'{}' names two flows", f.name),
                    ));
                }
                flows.push(f);
            }
        }
    }
    let layer1 = layer1(&o, &ports).unwrap_or_else(|e| {
        errs.push(e);
        Vec::new()
    });
    let captures = captures(&o, &ports).unwrap_or_else(|e| {
        errs.push(e);
        Vec::new()
    });
    // Empty sections are the same as none.
    for key in ["lags", "lldp", "egress_only_tracking"] {
        if o.list(key, usize::MAX)
            .ok()
            .flatten()
            .is_some_and(|l| l.is_empty())
        {
            continue;
        }
        if o.raw(key).is_some() {
            errs.push(invalid(
                key,
                "not supported by linerate agent (ports and flows only)",
            ));
        }
    }
    if let Err(e) = o.done() {
        errs.push(e);
    }
    if errs.is_empty() {
        Ok(Config {
            ports,
            flows,
            layer1,
            captures,
            devices,
        })
    } else {
        Err(errs)
    }
}
