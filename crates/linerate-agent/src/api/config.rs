//! `POST /config`: a configuration checked whole, then taken (the last
//! one's layer1 undone, this one's applied, its captures and devices'
//! responders made).

use super::{Agent, Reply};
use crate::campaign::{Campaign, lock};
use crate::json::{Invalid, Obj, invalid};
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

/// The flows of the configuration document `cfg` (its `flows` list).
fn flows_of(cfg: &mut Value) -> &mut Vec<Value> {
    if !cfg.get("flows").is_some_and(Value::is_array) {
        cfg["flows"] = Value::Array(Vec::new());
    }
    match cfg.get_mut("flows") {
        Some(Value::Array(l)) => l,
        _ => unreachable!("made an array above"),
    }
}

/// A flow's name in a document.
fn flow_name(f: &Value) -> Option<&str> {
    f.get("name").and_then(Value::as_str)
}

/// A `ConfigUpdate` read: the properties named and the flows given.
/// The properties an update names, and its flows by name.
type Update = (Vec<&'static str>, Vec<(String, Value)>);

fn update_request(doc: &Value) -> Result<Update, Vec<Invalid>> {
    let one = |e: Invalid| vec![e];
    let o = Obj::new("", doc).map_err(one)?;
    let c = o.str("choice").map_err(one)?.unwrap_or("");
    if c != "flows" {
        return Err(one(invalid(
            "choice",
            format!("'{c}': not supported by linerate agent (it updates flows' rate and size)"),
        )));
    }
    let f = o
        .obj("flows")
        .map_err(one)?
        .ok_or_else(|| one(invalid("flows", "required")))?;
    let mut errs = Vec::new();
    let mut props = Vec::new();
    for (i, p) in f
        .strs("property_names", 2)
        .map_err(one)?
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        match p {
            "rate" | "size" if props.contains(&p) => errs.push(invalid(
                &format!("flows.property_names[{i}]"),
                format!("'{p}' is named twice"),
            )),
            "rate" => props.push("rate"),
            "size" => props.push("size"),
            _ => errs.push(invalid(
                &format!("flows.property_names[{i}]"),
                format!("'{p}' is not a property the agent updates (rate, size)"),
            )),
        }
    }
    if props.is_empty() && errs.is_empty() {
        errs.push(invalid(
            "flows.property_names",
            "required: rate, size or both",
        ));
    }
    let mut flows = Vec::new();
    for (i, v) in f
        .list("flows", model::FLOWS_MAX)
        .map_err(one)?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        match flow_name(v) {
            Some(n) => flows.push((n.to_string(), v.clone())),
            None => errs.push(invalid(&format!("flows.flows[{i}].name"), "required")),
        }
    }
    for d in [f.done(), o.done()] {
        errs.extend(d.err());
    }
    if errs.is_empty() {
        Ok((props, flows))
    } else {
        Err(errs)
    }
}

impl Agent {
    /// `PATCH /config` (`UpdateConfig`): the flows named take the given
    /// `rate` and `size` (absent: the model's default), checked as a
    /// whole configuration, for their next start. A flow that transmits
    /// is refused: its blast was made with its rate and size.
    pub(super) fn update_config(&self, doc: &Value) -> Result<Reply, Reply> {
        let (props, flows) = update_request(doc).map_err(Reply::invalid_all)?;
        let mut s = lock(&self.state);
        let s = &mut *s;
        let (Some(cur), Some(camp)) = (s.config.as_ref(), s.campaign.as_mut()) else {
            return Err(Reply::error(400, "no configuration: POST /config first"));
        };
        let mut new = cur.clone();
        let mut errs = Vec::new();
        let mut which = Vec::new();
        for (i, (name, f)) in flows.iter().enumerate() {
            let list = flows_of(&mut new);
            let Some(k) = list.iter().position(|x| flow_name(x) == Some(name)) else {
                errs.push(invalid(
                    &format!("flows.flows[{i}].name"),
                    format!("no flow is named '{name}'"),
                ));
                continue;
            };
            if camp.flows.get(k).is_some_and(|r| r.running()) {
                errs.push(invalid(
                    &format!("flows.flows[{i}]"),
                    format!(
                        "flow '{name}' is transmitting: linerate agent does not change a flow's rate or size while it runs (stop it, update it, start it again)"
                    ),
                ));
                continue;
            }
            for p in &props {
                match (f.get(*p), list[k].as_object_mut()) {
                    (Some(v), Some(m)) => {
                        m.insert((*p).to_string(), v.clone());
                    }
                    (None, Some(m)) => {
                        m.remove(*p);
                    }
                    _ => {}
                }
            }
            which.push(k);
        }
        if !errs.is_empty() {
            return Err(Reply::invalid_all(errs));
        }
        let cfg = model::config_all(&new).map_err(Reply::invalid_all)?;
        let plan = plan::plan_all(&cfg, &self.opts).map_err(Reply::invalid_all)?;
        if plan.flows.len() != camp.plan.flows.len() {
            return Err(Reply::error(
                500,
                "the updated configuration's flows differ",
            ));
        }
        for k in which {
            camp.plan.flows[k] = plan.flows[k].clone();
        }
        s.config = Some(new);
        Ok(Reply::warnings(Vec::new()))
    }

    /// `PATCH /config/append` (`AppendConfig`): flows added, the
    /// configuration taken again whole (its counts start from zero).
    pub(super) fn append_config(&self, doc: &Value) -> Result<Reply, Reply> {
        self.edit_flows(doc, "config_append_list", |at, r, new, errs| {
            let list = r.list("flows", model::FLOWS_MAX).map_err(Reply::invalid)?;
            for (j, f) in list.unwrap_or_default().iter().enumerate() {
                let at = format!("{at}.flows[{j}].name");
                let fl = flows_of(new);
                match flow_name(f) {
                    None => errs.push(invalid(&at, "required")),
                    Some(n) if fl.iter().any(|x| flow_name(x) == Some(n)) => errs.push(invalid(
                        &at,
                        format!("a flow is named '{n}' already (DeleteConfig it first)"),
                    )),
                    Some(_) => fl.push(f.clone()),
                }
            }
            Ok(())
        })
    }

    /// `PATCH /config/delete` (`DeleteConfig`): flows removed by name, the
    /// configuration taken again whole (its counts start from zero).
    pub(super) fn delete_config(&self, doc: &Value) -> Result<Reply, Reply> {
        self.edit_flows(doc, "config_delete_list", |at, r, new, errs| {
            let names = r.strs("flows", model::FLOWS_MAX).map_err(Reply::invalid)?;
            for (j, n) in names.unwrap_or_default().into_iter().enumerate() {
                let fl = flows_of(new);
                match fl.iter().position(|x| flow_name(x) == Some(n)) {
                    Some(k) => {
                        fl.remove(k);
                    }
                    None => errs.push(invalid(
                        &format!("{at}.flows[{j}]"),
                        format!("no flow is named '{n}'"),
                    )),
                }
            }
            Ok(())
        })
    }

    /// Append's and delete's walk: each entry of `key` (a `flows`
    /// choice) handed to `each` with its path and the configuration in
    /// force to change; every error at once, or the changed configuration
    /// taken again whole.
    fn edit_flows(
        &self,
        doc: &Value,
        key: &'static str,
        mut each: impl FnMut(&str, &Obj, &mut Value, &mut Vec<Invalid>) -> Result<(), Reply>,
    ) -> Result<Reply, Reply> {
        let o = Obj::new("", doc).map_err(Reply::invalid)?;
        let list = o
            .list(key, model::FLOWS_MAX)
            .map_err(Reply::invalid)?
            .unwrap_or_default();
        let mut new = self.config_now()?;
        let mut errs = Vec::new();
        for (i, v) in list.iter().enumerate() {
            let at = format!("{key}[{i}]");
            let r = Obj::new(&at, v).map_err(Reply::invalid)?;
            if let Err(e) = r.choice(&["flows"], "flows") {
                errs.push(e);
                continue;
            }
            each(&at, &r, &mut new, &mut errs)?;
            errs.extend(r.done().err());
        }
        errs.extend(o.done().err());
        if !errs.is_empty() {
            return Err(Reply::invalid_all(errs));
        }
        self.set_again(new)
    }

    /// The configuration document in force (refused when none is).
    fn config_now(&self) -> Result<Value, Reply> {
        lock(&self.state)
            .config
            .clone()
            .ok_or_else(|| Reply::error(400, "no configuration: POST /config first"))
    }

    /// `new` taken as a `POST /config`, with a warning that it was.
    fn set_again(&self, new: Value) -> Result<Reply, Reply> {
        if lock(&self.state)
            .campaign
            .as_ref()
            .is_some_and(Campaign::any_running)
        {
            return Err(Reply::error(
                400,
                "traffic is running: linerate agent takes flows in or out only while none transmits (stop it first)",
            ));
        }
        let mut r = self.set_config(new)?;
        if let Some(Value::Array(w)) = r.body.get_mut("warnings") {
            w.push(Value::from(
                "the configuration was taken again whole: every flow's counts and the captures start from zero",
            ));
        }
        Ok(r)
    }
}
