//! The Open Traffic Generator model's subset the agent runs (models and
//! snappi 1.62): a `/config` document read into typed ports and flows,
//! every field the client left out given the model's default, every field
//! it set that linerate would not honour refused by its path.
//!
//! - `patterns`: a header field's values as linerate ranges;
//! - `headers`: each header's fields;
//! - `ports`: the ports.

pub mod headers;
pub mod patterns;
pub mod ports;

pub use headers::{CUSTOM_MAX, Headers, Outer};
pub use patterns::{Field, VALUES_MAX};
pub use ports::Port;

use crate::json::{Invalid, Obj, invalid};
use headers::{body, custom, frame_headers};
use linerate_traffic::flows::Range;
use patterns::{Kind, ranged, single};
use serde_json::{Value, json};

/// Most ports and flows one configuration may hold, and receive ports per
/// flow.
pub const PORTS_MAX: usize = 16;
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

/// A `layer1` entry: settings for some ports' links.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer1 {
    pub name: String,
    pub ports: Vec<String>,
    /// The model's speed name (`speed_1_gbps` …): checked against the
    /// interface, a warning where it differs.
    pub speed: Option<String>,
    /// Whether the client asked for auto-negotiation (`auto_negotiate`):
    /// checked, a warning where it cannot be.
    pub auto_negotiate: Option<bool>,
    /// The MTU to set (the model's default is 1500).
    pub mtu: u32,
    /// Promiscuous reception (the model's default is true).
    pub promiscuous: bool,
    /// Fields given that the agent reports rather than applies
    /// (`media`, `ieee_media_defaults`, `auto_negotiation`).
    pub noted: Vec<String>,
}

/// A `captures` entry: the ports whose received frames are kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Capture {
    pub name: String,
    pub ports: Vec<String>,
    pub pcapng: bool,
    /// Replace the last capture (the model's default); false keeps the
    /// frames of earlier starts too.
    pub overwrite: bool,
    /// Bytes kept of each frame (the model's `packet_size`; none: whole).
    pub packet_size: Option<u32>,
    /// Its `filters`' tests (`crate::capture_filter`): the frames kept
    /// pass them all.
    pub filters: Vec<crate::capture_filter::FieldMatch>,
}

/// The model's link speeds, in bits per second.
pub const SPEEDS: &[(&str, u64)] = &[
    ("speed_10_fd_mbps", 10_000_000),
    ("speed_10_hd_mbps", 10_000_000),
    ("speed_100_fd_mbps", 100_000_000),
    ("speed_100_hd_mbps", 100_000_000),
    ("speed_1_gbps", 1_000_000_000),
    ("speed_10_gbps", 10_000_000_000),
    ("speed_25_gbps", 25_000_000_000),
    ("speed_40_gbps", 40_000_000_000),
    ("speed_50_gbps", 50_000_000_000),
    ("speed_100_gbps", 100_000_000_000),
    ("speed_200_gbps", 200_000_000_000),
    ("speed_400_gbps", 400_000_000_000),
    ("speed_800_gbps", 800_000_000_000),
];

/// Largest MTU the agent sets (a jumbo frame of 9216 bytes less its
/// Ethernet header and FCS).
pub const MTU_MAX: u32 = 9198;

#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub name: String,
    pub tx: String,
    pub rx: Vec<String>,
    pub headers: Headers,
    pub size: Size,
    pub rate: Rate,
    pub duration: Duration,
    pub latency: bool,
    /// A `tx_rx.device` flow's ends (its ports are theirs).
    pub device: Option<crate::devices::DeviceFlow>,
    /// Its packet's `metric_tags`.
    pub tags: Vec<crate::tags::TagSpec>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Size {
    Fixed(u16),
    /// Each size in turn, `start..=end` by `step`.
    Increment {
        start: u16,
        end: u16,
        step: u16,
    },
    /// Sizes and weights (IMIX).
    Weights(Vec<(u16, f64)>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    Pps(u64),
    /// Bits per second on the wire (preamble and gap counted: the model's
    /// minimum of 672 is a 64-byte frame's 84 bytes).
    BpsL1(u64),
    /// Percent of the port's line rate.
    Percentage(f64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    Packets(u64),
    Seconds(f64),
    Continuous,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Delay {
    None,
    Nanoseconds(f64),
    /// Bytes at the port's line rate.
    Bytes(f64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Duration {
    pub stop: Stop,
    pub delay: Delay,
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

/// Port `i`: the port (when its name could be read, so flows naming it
/// are not refused for it) and its errors.
fn port(i: usize, v: &Value, ports: &[Port]) -> (Option<Port>, Vec<Invalid>) {
    let p = match Obj::new(&format!("ports[{i}]"), v) {
        Ok(p) => p,
        Err(e) => return (None, vec![e]),
    };
    let name = match name(&p) {
        Ok(n) => n,
        Err(e) => return (None, vec![e]),
    };
    let mut errs = Vec::new();
    let location = match p.str("location") {
        Ok(Some(l)) => l.to_string(),
        Ok(None) => {
            errs.push(invalid(
                &p.at("location"),
                "required: the interface the port is",
            ));
            String::new()
        }
        Err(e) => {
            errs.push(e);
            String::new()
        }
    };
    if let Err(e) = p.done() {
        errs.push(e);
    }
    if ports.iter().any(|q: &Port| q.name == name) {
        errs.push(invalid(&p.at("name"), format!("'{name}' names two ports")));
        return (None, errs);
    }
    (Some(Port { name, location }), errs)
}

/// The port names of `key` in `o` (each a port of `ports`, none twice).
fn port_names(o: &Obj, key: &'static str, ports: &[Port]) -> Result<Vec<String>, Invalid> {
    let mut out: Vec<String> = Vec::new();
    for (i, n) in o
        .strs(key, PORTS_MAX)?
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let path = format!("{}[{i}]", o.at(key));
        let n = port_ref(&path, n, ports)?;
        if out.contains(&n) {
            return Err(invalid(&path, format!("'{n}' is named twice")));
        }
        out.push(n);
    }
    Ok(out)
}

fn layer1(o: &Obj, ports: &[Port]) -> Result<Vec<Layer1>, Invalid> {
    let mut out: Vec<Layer1> = Vec::new();
    for (i, l) in o
        .list("layer1", PORTS_MAX)?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let l = Obj::new(&format!("layer1[{i}]"), l)?;
        let name = name(&l)?;
        let names = port_names(&l, "port_names", ports)?;
        for n in &names {
            if out.iter().any(|e| e.ports.contains(n)) {
                return Err(invalid(
                    &l.at("port_names"),
                    format!("port '{n}' is in two layer1 entries"),
                ));
            }
        }
        let speed = l.str("speed")?.map(str::to_string);
        if let Some(s) = &speed
            && !SPEEDS.iter().any(|(n, _)| n == s)
        {
            return Err(invalid(
                &l.at("speed"),
                format!("'{s}' is not one of the model's speeds"),
            ));
        }
        let mtu = l.u64("mtu")?.unwrap_or(1500);
        if !(68..=u64::from(MTU_MAX)).contains(&mtu) {
            return Err(invalid(
                &l.at("mtu"),
                format!("{mtu}: an MTU of 68 to {MTU_MAX} bytes"),
            ));
        }
        let promiscuous = l.bool("promiscuous")?.unwrap_or(true);
        let auto_negotiate = l.bool("auto_negotiate")?;
        let mut noted = Vec::new();
        if let Some(m) = l.str("media")? {
            if !["copper", "fiber", "sgmii"].contains(&m) {
                return Err(invalid(&l.at("media"), format!("'{m}' is not a media")));
            }
            noted.push(format!("media '{m}'"));
        }
        if l.bool("ieee_media_defaults")? == Some(true) {
            noted.push("ieee_media_defaults".to_string());
        }
        if l.raw("auto_negotiation").is_some() {
            noted.push("auto_negotiation's settings".to_string());
        }
        if l.raw("flow_control").is_some() {
            return Err(invalid(
                &l.at("flow_control"),
                "not supported by linerate agent (it does not set pause frames)",
            ));
        }
        l.done()?;
        out.push(Layer1 {
            name,
            ports: names,
            speed,
            auto_negotiate,
            mtu: mtu as u32,
            promiscuous,
            noted,
        });
    }
    Ok(out)
}

/// Most frames a port's capture keeps.
pub const CAPTURE_FRAMES_MAX: u64 = 100_000;

fn captures(o: &Obj, ports: &[Port]) -> Result<Vec<Capture>, Invalid> {
    let mut out: Vec<Capture> = Vec::new();
    for (i, c) in o
        .list("captures", PORTS_MAX)?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let c = Obj::new(&format!("captures[{i}]"), c)?;
        let name = name(&c)?;
        let names = port_names(&c, "port_names", ports)?;
        for n in &names {
            if out.iter().any(|e| e.ports.contains(n)) {
                return Err(invalid(
                    &c.at("port_names"),
                    format!("port '{n}' is in two captures"),
                ));
            }
        }
        let pcapng = match c.str("format")?.unwrap_or("pcap") {
            "pcap" => false,
            "pcapng" => true,
            f => {
                return Err(invalid(
                    &c.at("format"),
                    format!("'{f}' is not a format (pcap, pcapng)"),
                ));
            }
        };
        let overwrite = c.bool("overwrite")?.unwrap_or(true);
        let packet_size = c.u64("packet_size")?;
        if let Some(p) = packet_size
            && !(1..=65_535).contains(&p)
        {
            return Err(invalid(
                &c.at("packet_size"),
                format!("{p}: 1 to 65535 bytes of each frame"),
            ));
        }
        let filters = crate::capture_filter::read(&c)?;
        c.done()?;
        out.push(Capture {
            name,
            ports: names,
            pcapng,
            overwrite,
            packet_size: packet_size.map(|p| p as u32),
            filters,
        });
    }
    Ok(out)
}

fn name(o: &Obj) -> Result<String, Invalid> {
    let n = o
        .str("name")?
        .ok_or_else(|| invalid(&o.at("name"), "required"))?;
    if n.is_empty() || n.len() > 128 || n.chars().any(char::is_control) {
        return Err(invalid(
            &o.at("name"),
            "a name is 1 to 128 characters, none of them control characters",
        ));
    }
    Ok(n.to_string())
}

fn port_ref(path: &str, n: &str, ports: &[Port]) -> Result<String, Invalid> {
    if ports.iter().any(|p| p.name == n) {
        Ok(n.to_string())
    } else {
        Err(invalid(path, format!("no port is named '{n}'")))
    }
}

/// A flow: each of its parts (name, ports, packet, size, rate,
/// duration, metrics, unknown fields) read, the first error of each
/// given.
fn flow(f: &Obj, ports: &[Port], devices: &[crate::devices::Device]) -> Result<Flow, Vec<Invalid>> {
    let mut errs = Vec::new();
    let name = keep(&mut errs, name(f));
    let txrx = keep(&mut errs, flow_ports(f, ports, devices));
    let device = txrx.as_ref().and_then(|t| t.2.clone());
    // A device flow's packet with what its devices give filled in.
    let filled = device
        .as_ref()
        .map(|d| json!({ "packet": crate::devices::fill_packet(f.raw("packet"), d) }));
    // A device flow whose ends are in error: its packet waits for them
    // (its auto fields are the ends').
    let ends_failed =
        txrx.is_none() && f.raw("tx_rx").and_then(|t| t.get("choice")) == Some(&json!("device"));
    let headers = match &filled {
        _ if ends_failed => {
            f.raw("packet");
            None
        }
        Some(v) => keep(&mut errs, Obj::new(&f.path, v).and_then(|p| headers(&p))),
        None => keep(&mut errs, headers(f)),
    };
    if device.is_some()
        && headers
            .as_ref()
            .is_some_and(|h| h.vxlan.is_some() || h.stack.is_some())
    {
        errs.push(invalid(
            &f.at("packet"),
            "a device flow's frames are plain (ethernet, ip, udp or tcp): VXLAN, GRE, MPLS and ICMP flows are port flows",
        ));
    }
    let packet = filled.as_ref().map(|v| &v["packet"]).or(f.raw("packet"));
    let tags = headers
        .as_ref()
        .and_then(|_| keep(&mut errs, crate::tags::read(&f.at("packet"), packet)));
    let size = keep(&mut errs, f.obj("size").and_then(size));
    let rate = keep(&mut errs, f.obj("rate").and_then(rate));
    let duration = keep(&mut errs, f.obj("duration").and_then(duration));
    let latency = keep(&mut errs, f.obj("metrics").and_then(metrics));
    keep(&mut errs, f.done());
    match (name, txrx, headers, size, rate, duration, latency, tags) {
        (
            Some(name),
            Some((tx, rx, _)),
            Some(headers),
            Some(size),
            Some(rate),
            Some(duration),
            Some(latency),
            Some(tags),
        ) if errs.is_empty() => Ok(Flow {
            name,
            tx,
            rx,
            headers,
            size,
            rate,
            duration,
            latency,
            device,
            tags,
        }),
        _ => Err(errs),
    }
}

/// `r`'s value, or none with its error kept in `errs`.
fn keep<T>(errs: &mut Vec<Invalid>, r: Result<T, Invalid>) -> Option<T> {
    r.map_err(|e| errs.push(e)).ok()
}

/// The ports of a flow's `tx_rx` (a device flow's: its ethernets') and
/// a device flow's ends.
type FlowPorts = (String, Vec<String>, Option<crate::devices::DeviceFlow>);

/// A flow's `tx_rx`: its transmit port and receive ports.
fn flow_ports(
    f: &Obj,
    ports: &[Port],
    devices: &[crate::devices::Device],
) -> Result<FlowPorts, Invalid> {
    let txrx = f
        .obj("tx_rx")?
        .ok_or_else(|| invalid(&f.at("tx_rx"), "required: the flow's ports"))?;
    if txrx.choice(&["port", "device"], "port")? == "device" {
        let d = txrx
            .obj("device")?
            .ok_or_else(|| invalid(&txrx.at("device"), "required"))?;
        let ends = crate::devices::flow_devices(&d, devices)?;
        txrx.raw("port");
        txrx.done()?;
        return Ok((ends.tx.port.clone(), vec![ends.rx.port.clone()], Some(ends)));
    }
    let p = txrx
        .obj("port")?
        .ok_or_else(|| invalid(&txrx.at("port"), "required"))?;
    let tx = p
        .str("tx_name")?
        .ok_or_else(|| invalid(&p.at("tx_name"), "required"))?;
    let tx = port_ref(&p.at("tx_name"), tx, ports)?;
    let mut rx = Vec::new();
    if let Some(r) = p.str("rx_name")? {
        rx.push(port_ref(&p.at("rx_name"), r, ports)?);
    }
    for (i, r) in p
        .strs("rx_names", PORTS_MAX)?
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let r = port_ref(&format!("{}[{i}]", p.at("rx_names")), r, ports)?;
        if !rx.contains(&r) {
            rx.push(r);
        }
    }
    if rx.contains(&tx) {
        return Err(invalid(
            &p.at("rx_names"),
            format!(
                "'{tx}' both sends and receives the flow: a port's own frames do not come back to it"
            ),
        ));
    }
    p.done()?;
    txrx.raw("device");
    txrx.done()?;
    Ok((tx, rx, None))
}

fn metrics(m: Option<Obj>) -> Result<bool, Invalid> {
    let Some(m) = m else { return Ok(false) };
    // enable, loss and timestamps: the agent measures whatever they say.
    m.bool("enable")?;
    m.bool("loss")?;
    m.bool("timestamps")?;
    let mut latency = false;
    if let Some(l) = m.obj("latency")? {
        latency = l.bool("enable")?.unwrap_or(false);
        let mode = l.str("mode")?.unwrap_or("store_forward");
        if !["store_forward", "cut_through"].contains(&mode) {
            return Err(invalid(
                &l.at("mode"),
                format!("'{mode}' is not a latency mode"),
            ));
        }
        l.done()?;
    }
    m.done()?;
    Ok(latency)
}

fn size(s: Option<Obj>) -> Result<Size, Invalid> {
    let Some(s) = s else {
        return Ok(Size::Fixed(64));
    };
    let frame = |path: String, v: u64| -> Result<u16, Invalid> {
        u16::try_from(v)
            .ok()
            .filter(|v| (64..=9216).contains(v))
            .ok_or_else(|| {
                invalid(
                    &path,
                    format!("{v} bytes: linerate's frames are 64 to 9216 bytes (FCS included, the probe needs its 18 bytes)"),
                )
            })
    };
    let out = match s.choice(&["fixed", "increment", "weight_pairs"], "fixed")? {
        "fixed" => Size::Fixed(frame(s.at("fixed"), s.u64("fixed")?.unwrap_or(64))?),
        "increment" => {
            let i = s.obj("increment")?;
            let get = |k: &'static str, d: u64| -> Result<u64, Invalid> {
                Ok(match &i {
                    Some(i) => i.u64(k)?.unwrap_or(d),
                    None => d,
                })
            };
            let path = s.at("increment");
            let start = frame(format!("{path}.start"), get("start", 64)?)?;
            let end = frame(format!("{path}.end"), get("end", 1518)?)?;
            let step = get("step", 1)?;
            if end < start {
                return Err(invalid(&path, format!("end {end} is below start {start}")));
            }
            let step = u16::try_from(step)
                .ok()
                .filter(|&s| s > 0)
                .ok_or_else(|| invalid(&format!("{path}.step"), "a step of 1 to 65535 bytes"))?;
            if let Some(i) = &i {
                i.done()?;
            }
            Size::Increment { start, end, step }
        }
        _ => {
            let w = s.obj("weight_pairs")?;
            let pairs = match &w {
                None => imix("imix").expect("the model's default mix"),
                Some(w) => weight_pairs(w, &frame)?,
            };
            if let Some(w) = &w {
                w.done()?;
            }
            for (size, _) in &pairs {
                frame(s.at("weight_pairs"), u64::from(*size))?;
            }
            Size::Weights(pairs)
        }
    };
    s.done()?;
    Ok(out)
}

fn weight_pairs(
    w: &Obj,
    frame: &dyn Fn(String, u64) -> Result<u16, Invalid>,
) -> Result<Vec<(u16, f64)>, Invalid> {
    if w.choice(&["predefined", "custom"], "predefined")? == "predefined" {
        let p = w.str("predefined")?.unwrap_or("imix");
        return imix(p).ok_or_else(|| {
            invalid(
                &w.at("predefined"),
                format!("'{p}' is not a predefined mix"),
            )
        });
    }
    let list = w.list("custom", 64)?.unwrap_or_default();
    let mut pairs = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let c = Obj::new(&format!("{}[{i}]", w.at("custom")), c)?;
        let size = frame(c.at("size"), c.u64("size")?.unwrap_or(64))?;
        let weight = c.f64("weight")?.unwrap_or(1.0);
        if !(weight > 0.0 && weight <= 1e6) {
            return Err(invalid(&c.at("weight"), "a weight above 0 (at most 1e6)"));
        }
        c.done()?;
        pairs.push((size, weight));
    }
    if pairs.is_empty() {
        return Err(invalid(&w.at("custom"), "at least one size and weight"));
    }
    Ok(pairs)
}

/// The model's predefined mixes (sizes with FCS, weights as it gives
/// them).
fn imix(name: &str) -> Option<Vec<(u16, f64)>> {
    Some(match name {
        "imix" => vec![(64, 7.0), (570, 4.0), (1518, 1.0)],
        "ipsec_imix" => vec![(90, 58.67), (92, 2.0), (594, 23.66), (1418, 15.67)],
        "ipv6_imix" => vec![(60, 58.67), (496, 2.0), (594, 23.66), (1518, 15.67)],
        "standard_imix" => vec![(58, 58.67), (62, 2.0), (594, 23.66), (1518, 15.67)],
        "tcp_imix" => vec![(90, 58.67), (92, 2.0), (594, 23.66), (1518, 15.67)],
        _ => return None,
    })
}

fn rate(r: Option<Obj>) -> Result<Rate, Invalid> {
    let Some(r) = r else {
        return Ok(Rate::Pps(1000));
    };
    let c = r.choice(&["pps", "bps", "kbps", "mbps", "gbps", "percentage"], "pps")?;
    let positive = |k: &'static str, d: u64, min: u64| -> Result<u64, Invalid> {
        let v = r.u64(k)?.unwrap_or(d);
        if v < min {
            return Err(invalid(&r.at(k), format!("at least {min}")));
        }
        Ok(v)
    };
    let scaled = |k: &'static str, d: u64, unit: u64| -> Result<u64, Invalid> {
        positive(k, d, 1)?
            .checked_mul(unit)
            .filter(|&b| b <= 1_000_000_000_000)
            .ok_or_else(|| invalid(&r.at(k), "above 1 Tbit/s"))
    };
    let out = match c {
        "pps" => {
            let p = positive("pps", 1000, 1)?;
            if p > PPS_MAX {
                return Err(invalid(
                    &r.at("pps"),
                    format!("above {PPS_MAX}: no port carries more (1 Tbit/s of 64-byte frames)"),
                ));
            }
            Rate::Pps(p)
        }
        "bps" => Rate::BpsL1(scaled("bps", 1_000_000_000, 1).and_then(|b| {
            if b < 672 {
                Err(invalid(
                    &r.at("bps"),
                    "at least 672 (one 64-byte frame a second on the wire)",
                ))
            } else {
                Ok(b)
            }
        })?),
        "kbps" => Rate::BpsL1(scaled("kbps", 1_000_000, 1_000)?),
        "mbps" => Rate::BpsL1(scaled("mbps", 1000, 1_000_000)?),
        "gbps" => Rate::BpsL1(scaled("gbps", 1, 1_000_000_000)?),
        _ => {
            let p = r.f64("percentage")?.unwrap_or(100.0);
            if !(p > 0.0 && p <= 100.0) {
                return Err(invalid(&r.at("percentage"), "above 0 and at most 100"));
            }
            Rate::Percentage(p)
        }
    };
    r.done()?;
    Ok(out)
}

/// The highest frame rate taken: 1 Tbit/s of 64-byte frames on the wire
/// (84 bytes each with preamble and gap).
pub const PPS_MAX: u64 = 1_000_000_000_000 / (84 * 8);

/// Longest fixed_seconds or delay the agent takes (a day).
pub const SECONDS_MAX: f64 = 86_400.0;

fn duration(d: Option<Obj>) -> Result<Duration, Invalid> {
    let Some(d) = d else {
        return Ok(Duration {
            stop: Stop::Continuous,
            delay: Delay::None,
        });
    };
    let c = d.choice(
        &["fixed_packets", "fixed_seconds", "continuous"],
        "continuous",
    )?;
    let sub = d.obj(match c {
        "fixed_packets" => "fixed_packets",
        "fixed_seconds" => "fixed_seconds",
        _ => "continuous",
    })?;
    let mut delay = Delay::None;
    let stop = match (c, &sub) {
        ("fixed_packets", Some(s)) => Stop::Packets(s.u64("packets")?.unwrap_or(1)),
        ("fixed_packets", None) => Stop::Packets(1),
        ("fixed_seconds", Some(s)) => Stop::Seconds(s.f64("seconds")?.unwrap_or(1.0)),
        ("fixed_seconds", None) => Stop::Seconds(1.0),
        _ => Stop::Continuous,
    };
    match stop {
        Stop::Packets(0) => {
            return Err(invalid(&d.at("fixed_packets.packets"), "at least 1 packet"));
        }
        Stop::Seconds(s) if !(s > 0.0 && s <= SECONDS_MAX) => {
            return Err(invalid(
                &d.at("fixed_seconds.seconds"),
                format!("above 0 and at most {SECONDS_MAX} s"),
            ));
        }
        _ => {}
    }
    if let Some(s) = &sub {
        // The minimum inter-frame gap: linerate paces by rate, the wire
        // keeps its own 12 bytes.
        if let Some(g) = s.u64("gap")?
            && g != 12
        {
            return Err(invalid(
                &s.at("gap"),
                format!(
                    "{g} bytes: linerate leaves the gap to the wire (12 bytes); only 12 is taken"
                ),
            ));
        }
        if let Some(dl) = s.obj("delay")? {
            delay = match dl.choice(&["bytes", "nanoseconds", "microseconds"], "bytes")? {
                "bytes" => Delay::Bytes(dl.f64("bytes")?.unwrap_or(0.0)),
                "nanoseconds" => Delay::Nanoseconds(dl.f64("nanoseconds")?.unwrap_or(0.0)),
                _ => Delay::Nanoseconds(dl.f64("microseconds")?.unwrap_or(0.0) * 1e3),
            };
            let (Delay::Bytes(v) | Delay::Nanoseconds(v)) = delay else {
                unreachable!()
            };
            if !(0.0..=SECONDS_MAX * 1e9).contains(&v) {
                return Err(invalid(&dl.path, "a delay of 0 to a day"));
            }
            if v == 0.0 {
                delay = Delay::None;
            }
            dl.done()?;
        }
        s.done()?;
    }
    d.done()?;
    Ok(Duration { stop, delay })
}

/// A flow's `packet`: its headers' kinds checked (ethernet, an optional
/// vlan, ipv4 or ipv6, udp or tcp; or such a frame in VXLAN: ethernet, an
/// optional vlan, ipv4 or ipv6, udp, vxlan, then the inner frame), then
/// each header read in turn.
fn headers(f: &Obj) -> Result<Headers, Invalid> {
    let path = f.at("packet");
    let list = f.list("packet", 12)?.unwrap_or_default();
    let mut hs = Vec::new();
    for (i, h) in list.iter().enumerate() {
        let o = Obj::new(&format!("{path}[{i}]"), h)?;
        let c = o.choice(
            &[
                "ethernet", "vlan", "ipv4", "ipv6", "udp", "tcp", "vxlan", "custom", "gre", "mpls",
                "icmp", "icmpv6",
            ],
            "ethernet",
        )?;
        hs.push((c, o));
    }
    let names: Vec<&str> = hs.iter().map(|(c, _)| *c).collect();
    // A `custom` header last: bytes in the payload (after the probe).
    let custom_at = (names.last() == Some(&"custom")).then(|| names.len() - 1);
    let names = &names[..custom_at.unwrap_or(names.len())];
    if crate::stacked::is_stacked(names) {
        let custom = custom_at.map(|i| custom(&body(&hs[i])?)).transpose()?;
        let mut h = crate::stacked::headers(&path, &hs[..names.len()])?;
        h.custom = custom;
        return Ok(h);
    }
    let frame_ok = |n: &[&str], l4: &[&str]| match n {
        ["ethernet", ip, t] | ["ethernet", "vlan", ip, t] => {
            matches!(*ip, "ipv4" | "ipv6") && l4.contains(t)
        }
        _ => false,
    };
    let at = names.iter().position(|n| *n == "vxlan");
    let shape_ok = match at {
        None => frame_ok(names, &["udp", "tcp"]),
        Some(k) => frame_ok(&names[..k], &["udp"]) && frame_ok(&names[k + 1..], &["udp", "tcp"]),
    };
    if !shape_ok {
        return Err(invalid(
            &path,
            format!(
                "headers [{}]: linerate sends ethernet, an optional vlan, ipv4 or ipv6, then udp or tcp (its probe rides in the payload), or such a frame behind ethernet, an optional vlan, ipv4 or ipv6, udp and vxlan; a custom header may come last",
                hs.iter().map(|(c, _)| *c).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    let custom = custom_at.map(|i| custom(&body(&hs[i])?)).transpose()?;
    let hs = &hs[..names.len()];
    let mut h = match at {
        None => frame_headers(hs, true)?,
        Some(k) => {
            let outer = frame_headers(&hs[..k], true)?;
            let mut inner = frame_headers(&hs[k + 1..], false)?;
            inner.vxlan = Some(outer_headers(&path, hs, outer, &body(&hs[k])?)?);
            inner
        }
    };
    h.custom = custom;
    Ok(h)
}

/// A VXLAN flow's outer headers (read as a frame's, `outer`) and its
/// `vxlan` header: one value of each outer field, the UDP destination
/// the VXLAN port.
fn outer_headers(
    path: &str,
    hs: &[(&str, Obj)],
    outer: Headers,
    vx: &Obj,
) -> Result<Outer, Invalid> {
    let name = |i: usize| hs[i].0;
    let ip = if outer.vlan.is_some() { 2 } else { 1 };
    let one = |r: &Range, at: String| {
        if r.count == 1 {
            Ok(r.first)
        } else {
            Err(invalid(
                &at,
                "linerate sends one value of an outer header's field (before vxlan): give value",
            ))
        }
    };
    if outer.random.iter().any(Option::is_some) {
        return Err(invalid(
            path,
            "linerate sends one value of an outer header's field (before vxlan): random is the inner headers'",
        ));
    }
    let eth_src = one(&outer.eth_src, format!("{path}[0].ethernet.src"))?;
    let eth_dst = match outer.eth_dst {
        Field::Auto => None,
        Field::Range(r) => Some(one(&r, format!("{path}[0].ethernet.dst"))?),
    };
    let ip_src = one(&outer.ip_src, format!("{path}[{ip}].{}.src", name(ip)))?;
    let ip_dst = one(&outer.ip_dst, format!("{path}[{ip}].{}.dst", name(ip)))?;
    let udp = format!("{path}[{}].udp", ip + 1);
    let src_port = one(&outer.src_port, format!("{udp}.src_port"))? as u16;
    let dst_port = one(&outer.dst_port, format!("{udp}.dst_port"))? as u16;
    if dst_port != linerate_wire::vxlan::PORT {
        return Err(invalid(
            &format!("{udp}.dst_port"),
            format!(
                "linerate's receivers find the probe behind VXLAN on UDP port {} (IANA's): {dst_port} is not counted",
                linerate_wire::vxlan::PORT
            ),
        ));
    }
    let flags = single(vx, "flags", Kind::Bits(8), 8, false)?.unwrap_or(8) as u8;
    let reserved0 = single(vx, "reserved0", Kind::Bits(24), 0, false)?.unwrap_or(0) as u32;
    let vni = ranged(vx, "vni", Kind::Bits(24), 0)?;
    let reserved1 = single(vx, "reserved1", Kind::Bits(8), 0, false)?.unwrap_or(0) as u8;
    vx.done()?;
    Ok(Outer {
        eth_src,
        eth_dst,
        vlan: outer.vlan,
        ipv6: outer.ipv6,
        ip_src,
        ip_dst,
        ttl: outer.ttl,
        dscp: outer.dscp,
        src_port,
        dst_port,
        flags,
        reserved0,
        reserved1,
        vni,
    })
}

/// A rate's frames a second for frames of `mean_bytes` (FCS included) on
/// a port of `speed_bps`.
pub fn l1_bps(rate: Rate, speed_bps: Option<u64>) -> Result<Option<u64>, String> {
    Ok(match rate {
        Rate::Pps(_) => None,
        Rate::BpsL1(b) => Some(b),
        Rate::Percentage(p) => {
            let s = speed_bps.ok_or("a percentage rate needs the port's speed, which its interface does not report: give pps or bps")?;
            Some(((s as f64) * p / 100.0).round().max(1.0) as u64)
        }
    })
}
