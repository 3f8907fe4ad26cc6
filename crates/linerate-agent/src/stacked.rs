//! The model's `mpls`, `gre`, `icmp` and `icmpv6` headers: a flow's
//! packet of ethernet, an optional vlan, any number of mpls labels, an
//! optional ipv4 or ipv6 header then gre, then ipv4 or ipv6 and udp, tcp,
//! icmp (over ipv4) or icmpv6 (over ipv6), read into [`Headers`] whose
//! `stack` says what linerate's templates do not lay
//! (`linerate_traffic::stack`). Linerate's probe rides in the transport's
//! payload (ICMP echo's data too).
//!
//! Per frame, as the model's patterns: the ethernet and inner IP fields
//! and udp/tcp ports as in other flows, ICMP echo's identifier and
//! sequence number (in the ports' places), each label's label, traffic
//! class and time to live. GRE's outer IP header carries one value of
//! each field, as VXLAN's outer headers do.

use crate::json::{Invalid, Obj, invalid};
use crate::model::headers::{
    Headers, body, ethernet_typed, good_checksum, ipv4_header, ipv6_header, vlan_tag,
};
use crate::model::patterns::{Field, Kind, pattern, ranged, ranged_random, single};
use linerate_traffic::flows::Range;
use linerate_traffic::stack::{ETHERTYPE_MPLS, Gre, LABELS_MAX, Label, Stack};
use std::net::IpAddr;

pub use crate::kinds::is_stacked;

/// The shape a stacked packet must have, said in refusals.
const SHAPE: &str = "linerate sends ethernet, an optional vlan, mpls labels (any number to 8), an optional ipv4 or ipv6 then gre, then ipv4 or ipv6 and udp, tcp, icmp (over ipv4) or icmpv6 (over ipv6); a custom header may come last";

/// Where each part of a stacked packet is in its header list.
struct Shape {
    vlan: Option<usize>,
    mpls: std::ops::Range<usize>,
    /// GRE's outer IP header (GRE right after it).
    outer: Option<usize>,
    ip: usize,
    l4: usize,
}

fn shape(path: &str, names: &[&str]) -> Result<Shape, Invalid> {
    let bad = || invalid(path, format!("headers [{}]: {SHAPE}", names.join(", ")));
    if names.first() != Some(&"ethernet") {
        return Err(bad());
    }
    let mut i = 1;
    let vlan = (names.get(i) == Some(&"vlan")).then(|| {
        i += 1;
        i - 1
    });
    let m0 = i;
    while names.get(i) == Some(&"mpls") {
        i += 1;
    }
    let mpls = m0..i;
    let is_ip = |k: usize| matches!(names.get(k), Some(&"ipv4" | &"ipv6"));
    let outer = (is_ip(i) && names.get(i + 1) == Some(&"gre")).then(|| {
        i += 2;
        i - 2
    });
    if !is_ip(i) || names.len() != i + 2 || mpls.len() > LABELS_MAX {
        return Err(bad());
    }
    let l4_ok = matches!(
        (names[i], names[i + 1]),
        (_, "udp" | "tcp") | ("ipv4", "icmp") | ("ipv6", "icmpv6")
    );
    if !l4_ok {
        return Err(bad());
    }
    Ok(Shape {
        vlan,
        mpls,
        outer,
        ip: i,
        l4: i + 1,
    })
}

/// A stacked packet's headers (`hs`, a custom header left out).
pub fn headers(path: &str, hs: &[(&str, Obj)]) -> Result<Headers, Invalid> {
    let names: Vec<&str> = hs.iter().map(|(c, _)| *c).collect();
    let s = shape(path, &names)?;
    let ipv6 = names[s.ip] == "ipv6";
    let family = |v6: bool| if v6 { 0x86dd } else { 0x0800 };
    let ether_type = if s.vlan.is_some() {
        0x8100
    } else if !s.mpls.is_empty() {
        u128::from(ETHERTYPE_MPLS)
    } else {
        s.outer.map_or(family(ipv6), |o| family(names[o] == "ipv6"))
    };
    let eth = body(&hs[0])?;
    let (eth_src, eth_dst) = ethernet_typed(&eth, ether_type)?;
    let vlan = s.vlan.map(|v| vlan_tag(&body(&hs[v])?)).transpose()?;
    let mut mpls = Vec::new();
    for k in s.mpls.clone() {
        mpls.push(label(&body(&hs[k])?)?);
    }
    let gre = s
        .outer
        .map(|o| gre(path, (&hs[o], &hs[o + 1]), family(ipv6) as u16))
        .transpose()?;
    let (kind, l4) = (names[s.l4], body(&hs[s.l4])?);
    let proto = match kind {
        "tcp" => 6,
        "udp" => 17,
        "icmp" => 1,
        _ => 58,
    };
    let ipo = body(&hs[s.ip])?;
    let ip = if ipv6 {
        ipv6_header(&ipo, proto)?
    } else {
        ipv4_header(&ipo, proto)?
    };
    ipo.done()?;
    let (src_port, dst_port, random, tcp_flags, icmp) = transport(kind, &l4)?;
    l4.done()?;
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
        random: [random[0], random[1], ip.random[0], ip.random[1]],
        vxlan: None,
        custom: None,
        stack: Some(Stack { icmp, mpls, gre }),
        arp: None,
    })
}

/// What a transport header gives a flow: its ports (ICMP echo's
/// identifier and sequence number), their `random`, TCP's flags, ICMP
/// echo's type and code.
type Transport = (
    Range,
    Range,
    [Option<linerate_traffic::random::Random>; 2],
    Option<u8>,
    Option<(u8, u8)>,
);

fn transport(kind: &str, l4: &Obj) -> Result<Transport, Invalid> {
    if kind == "icmp" || kind == "icmpv6" {
        let v6 = kind == "icmpv6";
        let (id, seq, kc) = icmp_echo(l4, v6)?;
        return Ok((id, seq, [None; 2], None, Some(kc)));
    }
    // (udp and tcp as a plain flow's: the model's own reader)
    let (src_port, src_random) = ranged_random(l4, "src_port", Kind::Bits(16))?;
    let (dst_port, dst_random) = ranged_random(l4, "dst_port", Kind::Bits(16))?;
    let tcp_flags = crate::model::headers::l4_rest(l4, kind == "tcp")?;
    Ok((
        src_port,
        dst_port,
        [src_random, dst_random],
        tcp_flags,
        None,
    ))
}

/// An `icmp` or `icmpv6` header's echo: identifier, sequence number,
/// type and code.
fn icmp_echo(o: &Obj, v6: bool) -> Result<(Range, Range, (u8, u8)), Invalid> {
    o.choice(&["echo"], "echo")?;
    let e = o.obj("echo")?;
    static EMPTY: std::sync::LazyLock<serde_json::Value> =
        std::sync::LazyLock::new(|| serde_json::json!({}));
    let e = match e {
        Some(e) => e,
        None => Obj::new(&o.at("echo"), &EMPTY)?,
    };
    let (request, reply) = if v6 { (128, 129) } else { (8, 0) };
    let kind = single(&e, "type", Kind::Bits(8), request, false)?.unwrap_or(request);
    if kind != request && kind != reply {
        return Err(invalid(
            &e.at("type"),
            format!(
                "linerate sends echo requests ({request}) or replies ({reply}), which its receivers read; {kind} is not sent"
            ),
        ));
    }
    let code = single(&e, "code", Kind::Bits(8), 0, false)?.unwrap_or(0);
    good_checksum(&e, "checksum")?;
    let id = ranged(&e, "identifier", Kind::Bits(16), 0)?;
    let seq = ranged(&e, "sequence_number", Kind::Bits(16), 0)?;
    e.done()?;
    Ok((id, seq, (kind as u8, code as u8)))
}

/// An `mpls` header: its fields' values (the label's auto the model's
/// 16, the bottom of stack's auto set on the last label).
fn label(m: &Obj) -> Result<Label, Invalid> {
    let label = match pattern(m, "label", Kind::Bits(20), 16, true)? {
        Field::Auto => Range::single(16),
        Field::Range(r) => r,
    };
    let traffic_class = ranged(m, "traffic_class", Kind::Bits(3), 0)?;
    let bottom_of_stack = match pattern(m, "bottom_of_stack", Kind::Bits(1), 1, true)? {
        Field::Auto => None,
        Field::Range(r) if r.count == 1 => Some(r.first as u8),
        Field::Range(_) => {
            return Err(invalid(
                &m.at("bottom_of_stack"),
                "linerate sends one value of this field: give value or auto",
            ));
        }
    };
    let ttl = ranged(m, "time_to_live", Kind::Bits(8), 64)?;
    m.done()?;
    Ok(Label {
        label,
        traffic_class,
        bottom_of_stack,
        ttl,
    })
}

/// GRE's outer IP header (one value of each field) and its `gre` header;
/// `inner`: the inner packet's EtherType (the protocol's auto).
fn gre(
    path: &str,
    (ip_h, gre_h): (&(&str, Obj), &(&str, Obj)),
    inner: u16,
) -> Result<Gre, Invalid> {
    let v6 = ip_h.0 == "ipv6";
    let ipo = body(ip_h)?;
    let ip = if v6 {
        ipv6_header(&ipo, 47)?
    } else {
        ipv4_header(&ipo, 47)?
    };
    ipo.done()?;
    let one = |r: &Range, k: &str| {
        if r.count == 1 {
            Ok(r.first)
        } else {
            Err(invalid(
                &ipo.at(k),
                "linerate sends one value of an outer header's field (before gre): give value",
            ))
        }
    };
    if ip.random.iter().any(Option::is_some) {
        return Err(invalid(
            path,
            "linerate sends one value of an outer header's field (before gre): random is the inner headers'",
        ));
    }
    let addr = |n: u128| -> IpAddr {
        if v6 {
            IpAddr::V6(n.into())
        } else {
            IpAddr::V4((n as u32).into())
        }
    };
    let (src, dst) = (addr(one(&ip.src, "src")?), addr(one(&ip.dst, "dst")?));
    let g = body(gre_h)?;
    let checksum_present = single(&g, "checksum_present", Kind::Bits(1), 0, false)? == Some(1);
    let reserved0 = single(&g, "reserved0", Kind::Bits(12), 0, false)?.unwrap_or(0) as u16;
    if reserved0 & 0xe00 != 0 {
        return Err(invalid(
            &g.at("reserved0"),
            format!(
                "{reserved0}: receivers read its top three bits as RFC 1701's routing, key and sequence flags; linerate sends below 512"
            ),
        ));
    }
    let version = single(&g, "version", Kind::Bits(3), 0, false)?.unwrap_or(0) as u8;
    let protocol = single(&g, "protocol", Kind::Bits(16), u128::from(inner), true)?;
    if let Some(p) = protocol
        && p != u128::from(inner)
    {
        return Err(invalid(
            &g.at("protocol"),
            format!(
                "the packet after gre is {}: its protocol is {inner:#06x} (auto); {p:#06x} is not sent",
                if inner == 0x86dd { "ipv6" } else { "ipv4" }
            ),
        ));
    }
    good_checksum(&g, "checksum")?;
    let reserved1 = single(&g, "reserved1", Kind::Bits(16), 0, false)?.unwrap_or(0) as u16;
    g.done()?;
    Ok(Gre {
        src,
        dst,
        dscp: ip.dscp,
        ttl: ip.ttl,
        checksum_present,
        reserved0,
        version,
        protocol: protocol.map(|p| p as u16),
        reserved1,
    })
}
