//! The Open Traffic Generator model's subset the agent runs (models and
//! snappi 1.62): a `/config` document read into typed ports and flows,
//! every field the client left out given the model's default, every field
//! it set that linerate would not honour refused by its path.
//!
//! Patterns (a header field's values) become linerate ranges: `value`,
//! `values` (evenly spaced), `increment` and `decrement`; `auto` where the
//! model has it; `random` (ports, IPv4 addresses) as `count` values of
//! a seeded SplitMix64 sequence (`linerate_traffic::random`). Each field
//! steps on its own per frame, as the model does (`FlowSpec::lockstep`):
//! frame n carries value n mod count.

use crate::json::{Invalid, Obj, as_u64, invalid, short};
use linerate_traffic::flows::Range;
use linerate_traffic::random::Random;
use serde_json::{Value, json};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Most ports and flows one configuration may hold, and receive ports per
/// flow.
pub const PORTS_MAX: usize = 16;
pub const FLOWS_MAX: usize = 64;
/// Most values in a pattern's `values` or a size increment.
pub const VALUES_MAX: usize = 4096;

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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    pub name: String,
    /// The interface (or `https://agent:port/iface` on another agent).
    pub location: String,
}

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

/// A header field: a range of values, or the model's `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Auto,
    Range(Range),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Headers {
    pub eth_src: Range,
    /// `Auto`: the receive port's MAC, or the next hop's.
    pub eth_dst: Field,
    /// 802.1Q: VLAN id and priority.
    pub vlan: Option<(u16, u8)>,
    pub ipv6: bool,
    pub ip_src: Range,
    pub ip_dst: Range,
    pub ttl: u8,
    pub dscp: u8,
    /// TCP with these flags, or UDP.
    pub tcp_flags: Option<u8>,
    pub src_port: Range,
    pub dst_port: Range,
    /// The fields drawn by the model's `random` (source port, destination
    /// port, source IP, destination IP; `FlowSpec::random`'s order): the
    /// field's range then holds `min` and the count, value n of the
    /// sequence is frame n's (mod count).
    pub random: [Option<Random>; 4],
    /// A VXLAN flow's outer headers (the fields above are then the inner
    /// frame's, which carries the probe).
    pub vxlan: Option<Outer>,
    /// A `custom` header after the (inner) transport header: bytes every
    /// frame carries in its payload, right after linerate's probe.
    pub custom: Option<Vec<u8>>,
    /// MPLS labels, GRE before the IP packet, or ICMP echo as its
    /// transport (`crate::stacked`): the fields above are then the
    /// frame's Ethernet header's and the IP packet's (with ICMP echo, the
    /// ports are the identifier and sequence number).
    pub stack: Option<linerate_traffic::stack::Stack>,
    /// An ARP flow's `arp` header (`crate::arp_flow`): the fields above
    /// are then its Ethernet header's.
    pub arp: Option<Box<crate::arp_flow::Arp>>,
}

/// Most bytes a `custom` header holds (a jumbo frame's).
pub const CUSTOM_MAX: usize = 9216;

/// What a VXLAN flow's frames carry before the inner frame: one value of
/// each outer field, the VXLAN header's fields and its VNIs.
#[derive(Debug, Clone, PartialEq)]
pub struct Outer {
    pub eth_src: u128,
    /// `None`: auto (the receive port's MAC, or the next hop's).
    pub eth_dst: Option<u128>,
    pub vlan: Option<(u16, u8)>,
    pub ipv6: bool,
    pub ip_src: u128,
    pub ip_dst: u128,
    pub ttl: u8,
    pub dscp: u8,
    pub src_port: u16,
    pub dst_port: u16,
    pub flags: u8,
    pub reserved0: u32,
    pub reserved1: u8,
    /// Frame n carries value n mod count.
    pub vni: Range,
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

/// What a pattern's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Mac,
    V4,
    V6,
    /// An integer of this many bits.
    Bits(u32),
}

impl Kind {
    fn max(self) -> u128 {
        match self {
            Kind::Mac => (1 << 48) - 1,
            Kind::V4 => u128::from(u32::MAX),
            Kind::V6 => u128::MAX,
            Kind::Bits(b) => (1u128 << b) - 1,
        }
    }

    fn parse(self, path: &str, v: &Value) -> Result<u128, Invalid> {
        let bad = |what: &str| invalid(path, format!("expected {what}, got {}", short(v)));
        match self {
            Kind::Mac => v
                .as_str()
                .and_then(linerate_wire::MacAddr::parse)
                .map(|m| u128::from(m.to_u64()))
                .ok_or_else(|| bad("a MAC address")),
            Kind::V4 => v
                .as_str()
                .and_then(|s| s.parse::<Ipv4Addr>().ok())
                .map(|a| u128::from(u32::from(a)))
                .ok_or_else(|| bad("an IPv4 address")),
            Kind::V6 => v
                .as_str()
                .and_then(|s| s.parse::<Ipv6Addr>().ok())
                .map(u128::from)
                .ok_or_else(|| bad("an IPv6 address")),
            Kind::Bits(_) => {
                let n = u128::from(as_u64(path, v)?);
                if n > self.max() {
                    return Err(invalid(path, format!("{n} is above {}", self.max())));
                }
                Ok(n)
            }
        }
    }
}

/// A pattern object (`value`, `values`, `increment`, `decrement`, `auto`)
/// as a field; `default` is the model's value when it is absent,
/// `auto_default` whether the model's default choice is `auto`.
pub(crate) fn pattern(
    parent: &Obj,
    key: &'static str,
    kind: Kind,
    default: u128,
    auto_default: bool,
) -> Result<Field, Invalid> {
    Ok(pattern_random(parent, key, kind, default, auto_default, false)?.0)
}

/// [`pattern`], with the model's `random` taken when `random_ok` (the
/// fields whose model has it): its values' generator comes along.
fn pattern_random(
    parent: &Obj,
    key: &'static str,
    kind: Kind,
    default: u128,
    auto_default: bool,
    random_ok: bool,
) -> Result<(Field, Option<Random>), Invalid> {
    let Some(p) = parent.obj(key)? else {
        let f = if auto_default {
            Field::Auto
        } else {
            Field::Range(Range::single(default))
        };
        return Ok((f, None));
    };
    let mut choices = vec!["value", "values", "increment", "decrement"];
    if auto_default {
        choices.push("auto");
    }
    if random_ok {
        choices.push("random");
    }
    let c = p.choice(&choices, if auto_default { "auto" } else { "value" })?;
    // The other choices' values may come along (snappi sends only the
    // chosen one; others are read and checked, not used).
    let value = p
        .raw("value")
        .map(|v| kind.parse(&p.at("value"), v))
        .transpose()?;
    let values = p.list("values", VALUES_MAX)?;
    let inc = counter(&p, "increment", kind, default)?;
    let dec = counter(&p, "decrement", kind, default)?;
    let rnd = if random_ok { random(&p, kind)? } else { None };
    // Tags are read with the flow's whole packet (`crate::tags::read`):
    // which fields take them depends on the header.
    p.raw("metric_tags");
    if p.raw("auto").is_some() && !auto_default {
        return Err(invalid(&p.at("auto"), "this field has no auto"));
    }
    p.done()?;
    if c == "random" {
        let (r, count) = rnd.unwrap_or((Random::new(0, kind.max(), 1).expect("max >= 0"), 1));
        let range = Range {
            first: r.min,
            count,
            step: 1,
        };
        return Ok((Field::Range(range), Some(r)));
    }
    let f = match c {
        "auto" => Field::Auto,
        "value" => Field::Range(Range::single(value.unwrap_or(default))),
        "values" => Field::Range(values_range(&p, kind, values)?),
        "increment" => {
            let (s, st, n) = inc.unwrap_or((default, 1, 1));
            Field::Range(counter_range(&p, kind, s, st, n, true)?)
        }
        _ => {
            let (s, st, n) = dec.unwrap_or((default, 1, 1));
            Field::Range(counter_range(&p, kind, s, st, n, false)?)
        }
    };
    Ok((f, None))
}

/// A pattern's `random` (min, max, seed, count; the model's defaults the
/// field's whole span, seed 1, count 1): its generator and count.
fn random(p: &Obj, kind: Kind) -> Result<Option<(Random, u64)>, Invalid> {
    let Some(o) = p.obj("random")? else {
        return Ok(None);
    };
    let bound = |k: &'static str, d: u128| {
        o.raw(k)
            .map(|v| kind.parse(&o.at(k), v))
            .transpose()
            .map(|v| v.unwrap_or(d))
    };
    let min = bound("min", 0)?;
    let max = bound("max", kind.max())?;
    let seed = o.u64("seed")?.unwrap_or(1);
    if seed > u64::from(u32::MAX) {
        return Err(invalid(
            &o.at("seed"),
            format!("{seed} is above {}", u32::MAX),
        ));
    }
    let count = o.u64("count")?.unwrap_or(1);
    if count == 0 || count > u64::from(u32::MAX) {
        return Err(invalid(&o.at("count"), "from 1 to 4294967295"));
    }
    o.done()?;
    let r = Random::new(min, max, seed)
        .ok_or_else(|| invalid(&o.at("max"), format!("{max} is below min {min}")))?;
    Ok(Some((r, count)))
}

/// A pattern's `increment` or `decrement` (key `k`): start, step, count.
fn counter(
    p: &Obj,
    k: &'static str,
    kind: Kind,
    default: u128,
) -> Result<Option<(u128, u128, u64)>, Invalid> {
    let Some(o) = p.obj(k)? else { return Ok(None) };
    let start = o
        .raw("start")
        .map(|v| kind.parse(&o.at("start"), v))
        .transpose()?
        .unwrap_or(default);
    let step = o
        .raw("step")
        .map(|v| kind.parse(&o.at("step"), v))
        .transpose()?
        .unwrap_or(1);
    let count = o.u64("count")?.unwrap_or(1);
    o.raw("metric_tags");
    o.done()?;
    if count == 0 {
        return Err(invalid(&o.at("count"), "at least 1"));
    }
    Ok(Some((start, step, count)))
}

/// `-step` in a field of `kind`: the step that walks downward when values
/// are taken modulo the field's width (`FlowSpec::lockstep`).
fn negated(kind: Kind, step: u128) -> u128 {
    match kind {
        Kind::V6 => step.wrapping_neg(),
        k => (k.max() + 1 - step % (k.max() + 1)) % (k.max() + 1),
    }
}

/// The range an increment (`up`) or decrement of pattern `p` walks, if
/// it stays within the field: the model's values in its order (a
/// decrement from `start` downward).
fn counter_range(
    p: &Obj,
    kind: Kind,
    start: u128,
    step: u128,
    count: u64,
    up: bool,
) -> Result<Range, Invalid> {
    let path = p.at(if up { "increment" } else { "decrement" });
    if count > 1 && step == 0 {
        return Err(invalid(
            &format!("{path}.step"),
            "a step of 0 repeats one value: use value",
        ));
    }
    let span = step
        .checked_mul(u128::from(count - 1))
        .ok_or_else(|| invalid(&path, "the values run past the field"))?;
    if up {
        start
            .checked_add(span)
            .filter(|&last| last <= kind.max())
            .ok_or_else(|| invalid(&path, "the values run past the field's largest"))?;
    } else {
        start
            .checked_sub(span)
            .ok_or_else(|| invalid(&path, "the values run below 0"))?;
    }
    Ok(Range {
        first: start,
        count,
        step: match (count, up) {
            (1, _) => 1,
            (_, true) => step,
            (_, false) => negated(kind, step),
        },
    })
}

/// The range pattern `p`'s `values` make, in the order given: they must
/// be evenly spaced (rising or falling).
fn values_range(p: &Obj, kind: Kind, values: Option<&[Value]>) -> Result<Range, Invalid> {
    let path = p.at("values");
    let list = values.ok_or_else(|| invalid(&path, "required by choice values"))?;
    let v = list
        .iter()
        .enumerate()
        .map(|(i, x)| kind.parse(&format!("{path}[{i}]"), x))
        .collect::<Result<Vec<_>, _>>()?;
    if v.is_empty() {
        return Err(invalid(&path, "at least one value"));
    }
    let rising = v.get(1).is_none_or(|&b| b > v[0]);
    let gap = |a: u128, b: u128| {
        if rising {
            b.checked_sub(a)
        } else {
            a.checked_sub(b)
        }
    };
    let step = v.get(1).map_or(Some(1), |&b| gap(v[0], b));
    if step == Some(0) || v.windows(2).any(|w| gap(w[0], w[1]) != step) {
        return Err(invalid(
            &path,
            "values must be evenly spaced, rising or falling, none twice: linerate walks a range (first, step, count)",
        ));
    }
    let step = step.expect("checked");
    Ok(Range {
        first: v[0],
        count: v.len() as u64,
        step: if rising { step } else { negated(kind, step) },
    })
}

/// A pattern that must be a range (the model has no auto for it).
pub(crate) fn ranged(
    parent: &Obj,
    key: &'static str,
    kind: Kind,
    default: u128,
) -> Result<Range, Invalid> {
    match pattern(parent, key, kind, default, false)? {
        Field::Range(r) => Ok(r),
        Field::Auto => unreachable!("no auto without auto_default"),
    }
}

/// A pattern that must be a range, or the model's `random` (the range
/// then holds `min` and the count).
pub(crate) fn ranged_random(
    parent: &Obj,
    key: &'static str,
    kind: Kind,
) -> Result<(Range, Option<Random>), Invalid> {
    match pattern_random(parent, key, kind, 0, false, true)? {
        (Field::Range(r), rnd) => Ok((r, rnd)),
        (Field::Auto, _) => unreachable!("no auto without auto_default"),
    }
}

/// A pattern linerate writes one value of: it must be that value (or the
/// model's auto, when `auto` is).
pub(crate) fn single(
    parent: &Obj,
    key: &'static str,
    kind: Kind,
    default: u128,
    auto: bool,
) -> Result<Option<u128>, Invalid> {
    match pattern(parent, key, kind, default, auto)? {
        Field::Auto => Ok(None),
        Field::Range(r) if r.count == 1 => Ok(Some(r.first)),
        Field::Range(_) => Err(invalid(
            &parent.at(key),
            "linerate sends one value of this field: give value",
        )),
    }
}

/// A field linerate writes as `fixed`: any other value is refused.
pub(crate) fn fixed(
    parent: &Obj,
    key: &'static str,
    kind: Kind,
    default: u128,
    auto: bool,
    fixed: u128,
    what: &str,
) -> Result<(), Invalid> {
    match single(parent, key, kind, default, auto)? {
        Some(v) if v != fixed => Err(invalid(
            &parent.at(key),
            format!("linerate's frames carry {what}; {v} is not sent"),
        )),
        _ => Ok(()),
    }
}

/// A header's own object (`ethernet`, `ipv4` …), an empty one when the
/// client sent none: every field at its default.
pub(crate) fn body<'a>((c, o): &(&str, Obj<'a>)) -> Result<Obj<'a>, Invalid> {
    static EMPTY: std::sync::LazyLock<Value> =
        std::sync::LazyLock::new(|| Value::Object(Default::default()));
    let key = match *c {
        "ethernet" => "ethernet",
        "vlan" => "vlan",
        "ipv4" => "ipv4",
        "ipv6" => "ipv6",
        "udp" => "udp",
        "vxlan" => "vxlan",
        "custom" => "custom",
        "gre" => "gre",
        "mpls" => "mpls",
        "icmp" => "icmp",
        "icmpv6" => "icmpv6",
        "arp" => "arp",
        _ => "tcp",
    };
    let b = o.obj(key)?;
    o.done()?;
    Ok(match b {
        Some(b) => b,
        None => Obj::new(&o.at(key), &EMPTY)?,
    })
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
                "icmp", "icmpv6", "arp",
            ],
            "ethernet",
        )?;
        hs.push((c, o));
    }
    let names: Vec<&str> = hs.iter().map(|(c, _)| *c).collect();
    if crate::arp_flow::is_arp(&names) {
        return crate::arp_flow::headers(&path, &hs);
    }
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

/// A `custom` header's bytes: hex digits (the model's pattern: an
/// optional `0x`, colons and spaces between them), two a byte.
pub(crate) fn custom(c: &Obj) -> Result<Vec<u8>, Invalid> {
    let path = c.at("bytes");
    let s = c
        .str("bytes")?
        .ok_or_else(|| invalid(&path, "required: the bytes, in hex"))?;
    if let Some(tags) = c.list("metric_tags", 16)?
        && !tags.is_empty()
    {
        return Err(invalid(
            &c.at("metric_tags"),
            "not supported by linerate agent",
        ));
    }
    c.done()?;
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s)
        .chars()
        .filter(|ch| !matches!(ch, ':' | ' '))
        .map(|ch| ch.to_digit(16).map(|d| d as u8))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| {
            invalid(
                &path,
                format!("expected hex digits, got {}", short(&json!(s))),
            )
        })?;
    if digits.is_empty() || digits.len() % 2 != 0 || digits.len() / 2 > CUSTOM_MAX {
        return Err(invalid(
            &path,
            format!(
                "{} hex digits: linerate sends whole bytes, two digits each, 1 to {CUSTOM_MAX}",
                digits.len()
            ),
        ));
    }
    Ok(digits.chunks(2).map(|d| d[0] << 4 | d[1]).collect())
}

/// One frame's headers (`hs`, their shape checked); `auto_dst`: its
/// ethernet dst may be auto (not a VXLAN flow's inner frame's).
pub(crate) fn frame_headers(hs: &[(&str, Obj)], auto_dst: bool) -> Result<Headers, Invalid> {
    let names: Vec<&str> = hs.iter().map(|(c, _)| *c).collect();
    let mut it = hs.iter();
    let eth_h = it.next().expect("shape checked");
    let eth = body(eth_h)?;
    let vlan_h = (names[1] == "vlan").then(|| it.next().expect("shape checked"));
    let ip_h = it.next().expect("shape checked");
    let l4_h = it.next().expect("shape checked");
    let ipv6 = ip_h.0 == "ipv6";
    let tcp = l4_h.0 == "tcp";

    let (eth_src, eth_dst) = ethernet(&eth, vlan_h.is_some(), ipv6)?;
    let vlan = vlan_h.map(|h| vlan_tag(&body(h)?)).transpose()?;
    let ipo = body(ip_h)?;
    let proto = if tcp { 6 } else { 17 };
    let ip = if ipv6 {
        ipv6_header(&ipo, proto)?
    } else {
        ipv4_header(&ipo, proto)?
    };
    ipo.done()?;
    let l4 = body(l4_h)?;
    let (src_port, src_port_random) = ranged_random(&l4, "src_port", Kind::Bits(16))?;
    let (dst_port, dst_port_random) = ranged_random(&l4, "dst_port", Kind::Bits(16))?;
    let tcp_flags = l4_rest(&l4, tcp)?;
    l4.done()?;
    if !auto_dst && eth_dst == Field::Auto {
        return Err(invalid(
            &format!("{}.dst", eth.path),
            "an inner ethernet header's dst takes a value (auto is the outer header's)",
        ));
    }
    Ok(Headers {
        eth_src,
        eth_dst,
        vlan,
        ipv6,
        ip_src: ip.src,
        ip_dst: ip.dst,
        ttl: ip.ttl,
        dscp: ip.dscp,
        tcp_flags,
        src_port,
        dst_port,
        random: [src_port_random, dst_port_random, ip.random[0], ip.random[1]],
        vxlan: None,
        custom: None,
        stack: None,
        arp: None,
    })
}

/// A udp or tcp header's fields past its ports: TCP's flags (udp: none),
/// the checksum a good one.
pub(crate) fn l4_rest(l4: &Obj, tcp: bool) -> Result<Option<u8>, Invalid> {
    let tcp_flags = if tcp {
        Some(tcp_header(l4)?)
    } else {
        udp_header(l4)?;
        None
    };
    good_checksum(l4, "checksum")?;
    Ok(tcp_flags)
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

/// The ethernet header's source and destination (its ether type the one
/// a vlan tag or the IP version calls for), the header done.
pub(crate) fn ethernet(eth: &Obj, vlan: bool, ipv6: bool) -> Result<(Range, Field), Invalid> {
    let ether_type = match (vlan, ipv6) {
        (true, _) => 0x8100,
        (false, false) => 0x0800,
        (false, true) => 0x86dd,
    };
    ethernet_typed(eth, ether_type)
}

/// The ethernet header's source and destination, its ether type
/// `ether_type` (or auto), the header done.
pub(crate) fn ethernet_typed(eth: &Obj, ether_type: u128) -> Result<(Range, Field), Invalid> {
    let eth_src = ranged(eth, "src", Kind::Mac, 0)?;
    let eth_dst = pattern(eth, "dst", Kind::Mac, 0, true)?;
    fixed(
        eth,
        "ether_type",
        Kind::Bits(16),
        65535,
        true,
        ether_type,
        &format!("ether type {ether_type:#06x} (auto)"),
    )?;
    fixed(eth, "pfc_queue", Kind::Bits(8), 0, false, 0, "no PFC queue")?;
    eth.done()?;
    Ok((eth_src, eth_dst))
}

/// The vlan tag's id and priority, the header done.
pub(crate) fn vlan_tag(v: &Obj) -> Result<(u16, u8), Invalid> {
    let id = single(v, "id", Kind::Bits(12), 0, false)?.unwrap_or(0) as u16;
    let prio = single(v, "priority", Kind::Bits(3), 0, false)?.unwrap_or(0) as u8;
    fixed(v, "cfi", Kind::Bits(1), 0, false, 0, "CFI 0")?;
    match single(v, "tpid", Kind::Bits(16), 65535, false)? {
        Some(0x8100 | 65535) | None => {}
        Some(t) => {
            return Err(invalid(
                &v.at("tpid"),
                format!("linerate tags with 0x8100; {t:#06x} is not sent"),
            ));
        }
    }
    v.done()?;
    if id > 4094 {
        return Err(invalid(&v.at("id"), "a VLAN id of 0 to 4094"));
    }
    Ok((id, prio))
}

/// What an IP header (either version) gives a flow.
pub(crate) struct Ip {
    pub src: Range,
    pub dst: Range,
    /// Source's and destination's `random` (IPv4's).
    pub random: [Option<Random>; 2],
    pub ttl: u8,
    pub dscp: u8,
}

/// A length field linerate writes itself: only `auto` is taken.
fn auto_length(o: &Obj, key: &'static str, default: u128) -> Result<(), Invalid> {
    single(o, key, Kind::Bits(16), default, true)?.map_or(Ok(()), |_| {
        Err(invalid(&o.at(key), "linerate writes the length (auto)"))
    })
}

/// A checksum object: only generated good ones are taken.
pub(crate) fn good_checksum(o: &Obj, key: &'static str) -> Result<(), Invalid> {
    if let Some(c) = o.obj(key)? {
        if c.str("choice")?.unwrap_or("generated") != "generated"
            || c.str("generated")?.unwrap_or("good") != "good"
        {
            return Err(invalid(&c.path, "linerate writes good checksums"));
        }
        c.done()?;
    }
    Ok(())
}

/// An IPv6 header's fields (carrying protocol `proto`).
pub(crate) fn ipv6_header(ipo: &Obj, proto: u128) -> Result<Ip, Invalid> {
    let src = ranged(ipo, "src", Kind::V6, 0)?;
    let dst = ranged(ipo, "dst", Kind::V6, 0)?;
    let ttl = single(ipo, "hop_limit", Kind::Bits(8), 64, false)?.unwrap_or(64) as u8;
    let tc = single(ipo, "traffic_class", Kind::Bits(8), 0, false)?.unwrap_or(0) as u8;
    if tc & 3 != 0 {
        return Err(invalid(
            &ipo.at("traffic_class"),
            "linerate's frames carry ECN 0: the low two bits must be 0",
        ));
    }
    let dscp = tc >> 2;
    fixed(ipo, "version", Kind::Bits(4), 6, false, 6, "version 6")?;
    fixed(
        ipo,
        "flow_label",
        Kind::Bits(20),
        0,
        false,
        0,
        "flow label 0",
    )?;
    auto_length(ipo, "payload_length", 0)?;
    fixed(
        ipo,
        "next_header",
        Kind::Bits(8),
        59,
        true,
        proto,
        &format!("next header {proto} (auto)"),
    )?;
    Ok(Ip {
        src,
        dst,
        random: [None; 2],
        ttl,
        dscp,
    })
}

/// An IPv4 header's fields (carrying protocol `proto`).
pub(crate) fn ipv4_header(ipo: &Obj, proto: u128) -> Result<Ip, Invalid> {
    let (src, src_random) = ranged_random(ipo, "src", Kind::V4)?;
    let (dst, dst_random) = ranged_random(ipo, "dst", Kind::V4)?;
    let ttl = single(ipo, "time_to_live", Kind::Bits(8), 64, false)?.unwrap_or(64) as u8;
    let dscp = ipv4_dscp(ipo)?;
    fixed(ipo, "version", Kind::Bits(4), 4, false, 4, "version 4")?;
    fixed(
        ipo,
        "header_length",
        Kind::Bits(4),
        5,
        true,
        5,
        "a 20-byte header (auto)",
    )?;
    auto_length(ipo, "total_length", 46)?;
    // linerate's IPv4 headers carry identification 0 and DF: the
    // model's defaults (0, 0) are taken as they come, other values
    // of these are refused.
    fixed(
        ipo,
        "identification",
        Kind::Bits(16),
        0,
        false,
        0,
        "identification 0",
    )?;
    for k in ["reserved", "more_fragments", "fragment_offset"] {
        fixed(ipo, k, Kind::Bits(13), 0, false, 0, "no fragments")?;
    }
    single(ipo, "dont_fragment", Kind::Bits(1), 0, false)?;
    fixed(
        ipo,
        "protocol",
        Kind::Bits(8),
        61,
        true,
        proto,
        &format!("protocol {proto} (auto)"),
    )?;
    good_checksum(ipo, "header_checksum")?;
    Ok(Ip {
        src,
        dst,
        random: [src_random, dst_random],
        ttl,
        dscp,
    })
}

/// A TCP header's flags (its other fields checked against linerate's).
fn tcp_header(l4: &Obj) -> Result<u8, Invalid> {
    let mut flags = 0u8;
    for (k, bit) in [
        ("ctl_fin", 0x01),
        ("ctl_syn", 0x02),
        ("ctl_rst", 0x04),
        ("ctl_psh", 0x08),
        ("ctl_ack", 0x10),
        ("ctl_urg", 0x20),
        ("ecn_echo", 0x40),
        ("ecn_cwr", 0x80),
    ] {
        if single(l4, k, Kind::Bits(1), 0, false)? == Some(1) {
            flags |= bit;
        }
    }
    fixed(l4, "ecn_ns", Kind::Bits(1), 0, false, 0, "NS 0")?;
    fixed(
        l4,
        "data_offset",
        Kind::Bits(4),
        5,
        false,
        5,
        "a 20-byte header",
    )?;
    // Sequence 1, acknowledgement 0, window 65535 in linerate's
    // segments: other values of these are refused.
    match single(l4, "seq_num", Kind::Bits(32), 0, false)? {
        None | Some(0 | 1) => {}
        Some(v) => {
            return Err(invalid(
                &l4.at("seq_num"),
                format!("linerate's segments carry sequence 1; {v} is not sent"),
            ));
        }
    }
    fixed(
        l4,
        "ack_num",
        Kind::Bits(32),
        0,
        false,
        0,
        "acknowledgement 0",
    )?;
    single(l4, "window", Kind::Bits(16), 0, false)?;
    Ok(flags)
}

/// A UDP header's length: linerate writes it (0 or absent is taken).
fn udp_header(l4: &Obj) -> Result<(), Invalid> {
    single(l4, "length", Kind::Bits(16), 0, false)?
        .filter(|&l| l != 0)
        .map_or(Ok(()), |_| {
            Err(invalid(&l4.at("length"), "linerate writes the length"))
        })
}

/// IPv4's DSCP from `priority` (dscp's phb, or raw; ECN 0).
fn ipv4_dscp(ipo: &Obj) -> Result<u8, Invalid> {
    let Some(p) = ipo.obj("priority")? else {
        return Ok(0);
    };
    let dscp = match p.choice(&["dscp", "raw"], "dscp")? {
        "raw" => {
            let raw = single(&p, "raw", Kind::Bits(8), 0, false)?.unwrap_or(0) as u8;
            if raw & 3 != 0 {
                return Err(invalid(
                    &p.at("raw"),
                    "linerate's frames carry ECN 0: the low two bits must be 0",
                ));
            }
            raw >> 2
        }
        _ => match p.obj("dscp")? {
            None => 0,
            Some(d) => {
                let phb = single(&d, "phb", Kind::Bits(6), 0, false)?.unwrap_or(0) as u8;
                fixed(&d, "ecn", Kind::Bits(2), 0, false, 0, "ECN 0")?;
                d.done()?;
                phb
            }
        },
    };
    p.done()?;
    Ok(dscp)
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
