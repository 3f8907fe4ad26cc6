//! Reading a profile field by field from the TOML document (toml_edit
//! keeps every key's and value's place in the file): each value checked
//! where it is read, a field the reader does not know refused by name, and
//! every error with the file, the line and the field's path
//! (`streams[1].ipv4.src`).

use super::node::{Node, Obj, Ref, Res, Src};
use super::{Field, Headers, Mode, Pattern, Profile, RateSpec, STREAMS_MAX, Stream};
use crate::template::{Framing, Template, TemplateError};
use linerate_wire::MacAddr;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::Path;
use toml_edit::{Item, TableLike, Value};

/// What a field's values are.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Mac,
    Ip { v6: bool },
    Port,
    Vlan,
    Size,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Mac => "a MAC address",
            Kind::Ip { v6: false } => "an IPv4 address",
            Kind::Ip { v6: true } => "an IPv6 address",
            Kind::Port => "a port (0..65535)",
            Kind::Vlan => "a VLAN id (0..4094)",
            Kind::Size => "a frame size (64..9216 bytes, FCS included)",
        }
    }

    /// One value of this kind.
    fn scalar(self, n: &Node) -> Res<u128> {
        let bad = || n.err(format!("expected {}", self.name()));
        let number = |max: i64| -> Res<u128> {
            let v = n.value().and_then(Value::as_integer).ok_or_else(bad)?;
            u128::try_from(v)
                .ok()
                .filter(|&v| v <= max as u128)
                .ok_or_else(|| n.err(format!("{v} is not {}", self.name())))
        };
        match self {
            Kind::Port => number(65_535),
            Kind::Vlan => number(4_094),
            Kind::Size => {
                let v = number(9_216)?;
                if v < 64 {
                    return Err(n.err(format!("{v} is not {}", self.name())));
                }
                Ok(v)
            }
            Kind::Mac => {
                let s = n.str().map_err(|_| bad())?;
                MacAddr::parse(s)
                    .map(|m| u128::from(m.to_u64()))
                    .ok_or_else(|| n.err(format!("'{s}' is not a MAC address")))
            }
            Kind::Ip { v6 } => {
                let s = n.str().map_err(|_| bad())?;
                match s.parse::<IpAddr>() {
                    Ok(IpAddr::V4(a)) if !v6 => Ok(u128::from(a.to_bits())),
                    Ok(IpAddr::V6(a)) if v6 => Ok(a.to_bits()),
                    Ok(_) => Err(n.err(format!("'{s}' is not {}", self.name()))),
                    Err(_) => Err(n.err(format!("'{s}' is not an IP address"))),
                }
            }
        }
    }
}

/// A field: a value (fixed), a list of values, `{ list = [...] }`, or a
/// range `{ from, to, step, mode }` (mode increment, decrement, random).
fn field(n: &Node, kind: Kind) -> Res<Field> {
    if n.value().and_then(Value::as_array).is_some() {
        return list(n, kind);
    }
    if n.table().is_none() {
        return kind.scalar(n).map(Field::Fixed);
    }
    let o = n.obj()?;
    if let Some(l) = o.get("list") {
        o.done()?;
        return list(&l, kind);
    }
    if let (Kind::Size, Some(m)) = (kind, o.get("imix")) {
        o.done()?;
        let mix = linerate_calc::Imix::parse(m.str()?).map_err(|e| m.err(e.to_string()))?;
        let cycle = crate::SizeSequence::from_mix(&mix);
        return Ok(Field::List(
            cycle.cycle().iter().map(|&s| u128::from(s)).collect(),
        ));
    }
    let first = kind.scalar(&o.need("from")?)?;
    let to = o.need("to")?;
    let last = kind.scalar(&to)?;
    if last < first {
        return Err(to.err("below 'from'"));
    }
    let step = match o.get("step") {
        Some(s) => s.int(1, i64::MAX)? as u128,
        None => 1,
    };
    let mode = match o.get("mode") {
        None => Mode::Increment,
        Some(m) => match m.str()? {
            "increment" | "inc" => Mode::Increment,
            "decrement" | "dec" => Mode::Decrement,
            "random" => Mode::Random,
            x => {
                return Err(m.err(format!(
                    "'{x}' is not a mode (increment, decrement, random)"
                )));
            }
        },
    };
    o.done()?;
    Ok(Field::Range {
        first,
        last,
        step,
        mode,
    })
}

fn list(n: &Node, kind: Kind) -> Res<Field> {
    let items = n.array()?;
    if items.is_empty() {
        return Err(n.err("an empty list"));
    }
    let values = items
        .iter()
        .map(|i| kind.scalar(i))
        .collect::<Res<Vec<_>>>()?;
    Ok(Field::List(values))
}

/// The whole profile.
pub(super) fn profile(text: &str, file: &Path) -> Res<Profile> {
    let src = Src {
        text,
        file: file.display().to_string(),
    };
    let doc = toml_edit::Document::parse(text).map_err(|e| {
        let line = e.span().map_or(1, |s| src.line(s.start));
        src.err(line, "", format!("not TOML: {}", e.message()))
    })?;
    let root = Node {
        src: &src,
        v: Ref::Item(doc.as_item()),
        path: String::new(),
        line: 1,
    };
    let top = root.obj()?;
    let seed = match top.get("seed") {
        Some(s) => s.int(0, i64::MAX)? as u64,
        None => 1,
    };
    let line_rate_bps = match top.get("line_rate") {
        Some(l) => {
            Some(linerate_calc::parse_bps(l.str()?).map_err(|e| l.err(e.to_string()))? as f64)
        }
        None => None,
    };
    let streams = streams(&top.need("streams")?, seed)?;
    top.done()?;
    Ok(Profile {
        file: file.to_path_buf(),
        seed,
        line_rate_bps,
        streams,
    })
}

/// `[[streams]]`: each one read, their names and ids distinct.
fn streams(n: &Node, seed: u64) -> Res<Vec<Stream>> {
    let tables: Vec<(&dyn TableLike, usize)> = match n.v {
        Ref::Item(Item::ArrayOfTables(a)) => a
            .iter()
            .map(|t| {
                (
                    t as &dyn TableLike,
                    t.span().map_or(n.line, |s| n.src.line(s.start)),
                )
            })
            .collect(),
        _ => return Err(n.wrong("[[streams]] tables")),
    };
    if tables.is_empty() || tables.len() > STREAMS_MAX {
        return Err(n.err(format!("a profile has 1 to {STREAMS_MAX} streams")));
    }
    let mut out: Vec<Stream> = Vec::new();
    for (i, (t, line)) in tables.into_iter().enumerate() {
        let o = Obj {
            node: Node {
                src: n.src,
                v: n.v,
                path: format!("streams[{i}]"),
                line,
            },
            t,
            taken: RefCell::new(BTreeSet::new()),
        };
        let s = stream(&o, i, seed, &out)?;
        out.push(s);
    }
    Ok(out)
}

/// Stream `i` (`before`: the streams read so far, whose names and ids it
/// must not take).
fn stream(o: &Obj, i: usize, seed: u64, before: &[Stream]) -> Res<Stream> {
    let taken = |n: &Node, what: &str, same: &dyn Fn(&Stream) -> bool| match before
        .iter()
        .find(|s| same(s))
    {
        Some(other) => Err(n.err(format!(
            "the same {what} as stream '{}' (each stream needs its own)",
            other.name
        ))),
        None => Ok(()),
    };
    let name_node = o.get("name");
    let name = match &name_node {
        Some(n) => n.str()?.to_string(),
        None => format!("stream{i}"),
    };
    let id_node = o.get("id");
    let id = match &id_node {
        Some(n) => n.int(0, 65_535)? as u16,
        None => i as u16,
    };
    let here = o.node.clone();
    taken(name_node.as_ref().unwrap_or(&here), "name", &|s| {
        s.name == name
    })?;
    taken(id_node.as_ref().unwrap_or(&here), "id", &|s| s.id == id)?;
    let headers = headers(o)?;
    let size = match o.get("size") {
        Some(n) => {
            let size = field(&n, Kind::Size)?;
            check_size(size.bounds().0, &headers).map_err(|e| n.err(e.to_string()))?;
            size
        }
        // The smallest frame that carries the headers and the probe.
        None => match check_size(64, &headers) {
            Err(TemplateError::TooSmall { min, .. }) => Field::Fixed(min as u128),
            _ => Field::Fixed(64),
        },
    };
    let rate_l2 = o
        .get("rate_l2")
        .map(|n| n.bool())
        .transpose()?
        .unwrap_or(false);
    let rate = rate(&o.need("rate")?, rate_l2)?;
    let pattern = match o.get("pattern") {
        Some(n) => pattern(&n)?,
        None => Pattern::Fixed,
    };
    let start_delay = o.get("start_delay").map(|n| n.duration()).transpose()?;
    let count = o.get("count").map(|n| n.int(1, i64::MAX)).transpose()?;
    let duration = o.get("duration").map(|n| n.duration()).transpose()?;
    let stream_seed = match o.get("seed") {
        Some(n) => n.int(0, i64::MAX)? as u64,
        None => super::frames::part_seed(seed, 1_000 + i as u64),
    };
    o.done()?;
    Ok(Stream {
        name,
        id,
        headers,
        size,
        rate,
        pattern,
        start_delay: start_delay.unwrap_or_default(),
        count: count.map(|c| c as u64),
        duration,
        seed: stream_seed,
        line: o.node.line,
    })
}

/// Whether a `size`-byte frame carries the headers and the probe.
fn check_size(size: u128, h: &Headers) -> Result<(), TemplateError> {
    let any: IpAddr = if h.ipv6 {
        IpAddr::V6(0u128.into())
    } else {
        IpAddr::V4(0u32.into())
    };
    let flow = crate::FlowFields {
        src_mac: MacAddr([0; 6]),
        dst_mac: MacAddr([0; 6]),
        src_ip: any,
        dst_ip: any,
        src_port: 0,
        dst_port: 0,
    };
    let framing = Framing {
        vlan: h.vlan.as_ref().map(|(_, pcp)| (0, *pcp)),
        tcp_flags: h.tcp_flags,
        ..Framing::default()
    };
    Template::new(size as usize, &flow, &framing).map(|_| ())
}

/// `rate`: "1000pps", "50Mbps" (on the wire; of frames with `rate_l2`)
/// or "10%" (of the line rate).
fn rate(n: &Node, l2: bool) -> Res<RateSpec> {
    let s = n.str()?.trim();
    let lower = s.to_ascii_lowercase();
    let r = if let Some(p) = lower.strip_suffix('%') {
        let p: f64 = p
            .trim()
            .parse()
            .map_err(|_| n.err(format!("'{s}' is not a percentage")))?;
        if !(p > 0.0 && p <= 100.0) {
            return Err(n.err(format!(
                "{p}% is not a share of the line rate (above 0, at most 100)"
            )));
        }
        RateSpec::LinePercent(p)
    } else if lower.ends_with("pps") {
        RateSpec::Pps(linerate_calc::parse_pps(s).map_err(|e| n.err(e.to_string()))? as f64)
    } else if lower.ends_with("bps") || lower.ends_with("bit") || lower.ends_with("b/s") {
        let b = linerate_calc::parse_bps(s).map_err(|e| n.err(e.to_string()))? as f64;
        if l2 {
            RateSpec::BpsL2(b)
        } else {
            RateSpec::BpsL1(b)
        }
    } else {
        return Err(n.err(format!(
            "'{s}' has no unit: write 1000pps, 50Mbps or 10% (of the line rate)"
        )));
    };
    match r {
        RateSpec::Pps(v) | RateSpec::BpsL1(v) | RateSpec::BpsL2(v) if v <= 0.0 => {
            Err(n.err("a rate above zero"))
        }
        r => Ok(r),
    }
}

/// `pattern`: "fixed", "poisson", `{ burst = N }` or `{ on = .., off = .. }`.
fn pattern(n: &Node) -> Res<Pattern> {
    if n.table().is_none() {
        return match n.str()? {
            "fixed" => Ok(Pattern::Fixed),
            "poisson" => Ok(Pattern::Poisson),
            x => Err(n.err(format!(
                "'{x}' is not a pattern (\"fixed\", \"poisson\", {{ burst = N }}, {{ on = \"10ms\", off = \"40ms\" }})"
            ))),
        };
    }
    let o = n.obj()?;
    let out = if let Some(b) = o.get("burst") {
        Pattern::Burst {
            frames: b.int(1, 65_536)? as u32,
        }
    } else {
        let on = o.need("on")?;
        let (on_d, off) = (on.duration()?, o.need("off")?.duration()?);
        if on_d.is_zero() {
            return Err(on.err("an on time above zero"));
        }
        Pattern::OnOff { on: on_d, off }
    };
    o.done()?;
    Ok(out)
}

/// The header tables: `eth`, `vlan`, `ipv4` or `ipv6`, `udp` or `tcp`.
fn headers(o: &Obj) -> Res<Headers> {
    let (v4, v6) = (o.get("ipv4"), o.get("ipv6"));
    let (ip, ipv6) = match (v4, v6) {
        (Some(n), None) => (n, false),
        (None, Some(n)) => (n, true),
        (Some(_), Some(n)) => return Err(n.err("a stream has ipv4 or ipv6, not both")),
        (None, None) => {
            let f = o.path("ipv4");
            return Err(o.node.src.err(
                o.node.line,
                &f,
                "missing (give [streams.ipv4] or [streams.ipv6])",
            ));
        }
    };
    let (udp, tcp) = (o.get("udp"), o.get("tcp"));
    if let (Some(_), Some(t)) = (&udp, &tcp) {
        return Err(t.err("a stream has udp or tcp, not both"));
    }
    let eth = o.need("eth")?.obj()?;
    let vlan = o.get("vlan").map(|v| vlan(&v)).transpose()?;
    let src_mac = eth.get("src").map(|n| field(&n, Kind::Mac)).transpose()?;
    let dst_mac = field(&eth.need("dst")?, Kind::Mac)?;
    eth.done()?;
    let ipo = ip.obj()?;
    let src_ip = field(&ipo.need("src")?, Kind::Ip { v6: ipv6 })?;
    let dst_ip = field(&ipo.need("dst")?, Kind::Ip { v6: ipv6 })?;
    let dscp = ipo
        .get("dscp")
        .map(|n| n.int(0, 63))
        .transpose()?
        .unwrap_or(0) as u8;
    let ttl = ipo
        .get("ttl")
        .map(|n| n.int(1, 255))
        .transpose()?
        .unwrap_or(64) as u8;
    ipo.done()?;
    let is_tcp = tcp.is_some();
    let l4 = udp.or(tcp);
    let (src_port, dst_port, tcp_flags) = match l4 {
        None => (Field::Fixed(9), Field::Fixed(9), None),
        Some(n) => {
            let t = n.obj()?;
            let src = t.get("src").map(|n| field(&n, Kind::Port)).transpose()?;
            let dst = t.get("dst").map(|n| field(&n, Kind::Port)).transpose()?;
            let flags = if is_tcp {
                let fl = t.get("flags");
                Some(match fl {
                    Some(n) => crate::template::tcp_flags(n.str()?).map_err(|e| n.err(e))?,
                    None => crate::template::tcp_flags("S").expect("SYN"),
                })
            } else {
                None
            };
            t.done()?;
            (
                src.unwrap_or(Field::Fixed(9)),
                dst.unwrap_or(Field::Fixed(9)),
                flags,
            )
        }
    };
    Ok(Headers {
        src_mac,
        dst_mac,
        vlan,
        ipv6,
        src_ip,
        dst_ip,
        dscp,
        ttl,
        src_port,
        dst_port,
        tcp_flags,
    })
}

fn vlan(n: &Node) -> Res<(Field, u8)> {
    let o = n.obj()?;
    let id = field(&o.need("id")?, Kind::Vlan)?;
    let pcp = o.get("pcp").map(|n| n.int(0, 7)).transpose()?.unwrap_or(0) as u8;
    o.done()?;
    Ok((id, pcp))
}
