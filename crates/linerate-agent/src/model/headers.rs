//! A flow's headers, each read from its object: the ethernet, vlan, IP,
//! udp or tcp and custom headers, their fields as the model's patterns
//! (`super::patterns`), what linerate writes itself checked.

use super::patterns::{Field, Kind, fixed, pattern, ranged, ranged_random, single};
use crate::json::{Invalid, Obj, invalid, short};
use linerate_traffic::flows::Range;
use linerate_traffic::random::Random;
use serde_json::{Value, json};

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
    pub arp: Option<Box<Arp>>,
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

/// An `arp` header's fields, each a range walked per frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arp {
    pub hardware_type: Range,
    pub protocol_type: Range,
    pub hardware_length: Range,
    pub protocol_length: Range,
    pub operation: Range,
    pub sender_hardware_addr: Range,
    pub sender_protocol_addr: Range,
    pub target_hardware_addr: Range,
    pub target_protocol_addr: Range,
}

impl Arp {
    /// The fields with their widths in bytes, in frame order.
    pub(crate) fn fields(&self) -> [(Range, usize); 9] {
        [
            (self.hardware_type, 2),
            (self.protocol_type, 2),
            (self.hardware_length, 1),
            (self.protocol_length, 1),
            (self.operation, 2),
            (self.sender_hardware_addr, 6),
            (self.sender_protocol_addr, 4),
            (self.target_hardware_addr, 6),
            (self.target_protocol_addr, 4),
        ]
    }
}
