//! The model's flows: each flow's ports, packet (`super::packet`), size,
//! rate, duration and metrics, read with the model's defaults.

use super::headers::Headers;
use super::packet::headers;
use super::ports::{PORTS_MAX, Port, name, port_ref};
use crate::json::{Invalid, Obj, invalid};
use serde_json::json;

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

/// A flow: each of its parts (name, ports, packet, size, rate,
/// duration, metrics, unknown fields) read, the first error of each
/// given.
pub(super) fn flow(
    f: &Obj,
    ports: &[Port],
    devices: &[crate::devices::Device],
) -> Result<Flow, Vec<Invalid>> {
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
