//! A flow's `packet`: its list of headers' shape checked, then each
//! header read (`super::headers`; MPLS, GRE and ICMP by `crate::stacked`).

use super::headers::{Headers, Outer, body, custom, frame_headers};
use super::patterns::{Field, Kind, ranged, single};
use crate::json::{Invalid, Obj, invalid};
use linerate_traffic::flows::Range;

/// A flow's `packet`: its headers' kinds checked (ethernet, an optional
/// vlan, ipv4 or ipv6, udp or tcp; or such a frame in VXLAN: ethernet, an
/// optional vlan, ipv4 or ipv6, udp, vxlan, then the inner frame), then
/// each header read in turn.
pub(super) fn headers(f: &Obj) -> Result<Headers, Invalid> {
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
    if is_arp(&names) {
        return super::arp::headers(&path, &hs);
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

/// Whether a packet's headers are an ARP flow's.
fn is_arp(names: &[&str]) -> bool {
    names.contains(&"arp")
}
