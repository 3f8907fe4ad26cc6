//! `POST /monitor/metrics` and `/monitor/capture`: the flows' and ports'
//! counts, a port's capture file.

use super::{Agent, Reply};
use crate::campaign::{Campaign, FlowCounts, lock};
use crate::json::{Obj, invalid};
use crate::metrics::{FlowMetric, MetricsResponse, PortMetric};
use crate::model;
use crate::plan::Plan;
use crate::tags::TagRequest;
use serde_json::Value;

impl Agent {
    /// `/monitor/capture`: a port's capture as a file.
    pub(super) fn capture(&self, doc: &Value) -> Result<Reply, Reply> {
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

    pub(super) fn metrics(&self, doc: &Value) -> Result<Reply, Reply> {
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
                    .map(|&i| FlowMetric::with_tags(&camp.plan, i, &snaps[i], &tag_req))
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
