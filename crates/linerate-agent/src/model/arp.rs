//! An ARP flow's packet (`crate::arp_flow`): ethernet, an optional vlan,
//! then `arp`, read for `packet.rs`; the `arp` header's fields held by
//! `headers.rs`'s `Headers`.

pub use super::headers::Arp;
use super::headers::{Headers, body, ethernet_typed, vlan_tag};
use super::patterns::{Kind, ranged};
use crate::json::{Invalid, Obj, invalid};
use linerate_traffic::flows::Range;

/// An ARP flow's packet (`hs`: its headers, `path` the packet's path):
/// ethernet, an optional vlan (one id and priority), then arp, read into
/// [`Headers`] (the IP and port fields unused, one value each).
pub(super) fn headers(path: &str, hs: &[(&str, Obj)]) -> Result<Headers, Invalid> {
    let names: Vec<&str> = hs.iter().map(|(c, _)| *c).collect();
    let vlan = match names[..] {
        ["ethernet", "arp"] => false,
        ["ethernet", "vlan", "arp"] => true,
        _ => {
            return Err(invalid(
                path,
                format!(
                    "headers [{}]: an arp flow's packet is ethernet, an optional vlan, then arp (nothing after)",
                    names.join(", ")
                ),
            ));
        }
    };
    let ether_type = if vlan { 0x8100 } else { 0x0806 };
    let (eth_src, eth_dst) = ethernet_typed(&body(&hs[0])?, ether_type)?;
    let vlan = vlan.then(|| vlan_tag(&body(&hs[1])?)).transpose()?;
    let a = body(&hs[hs.len() - 1])?;
    let arp = Arp {
        hardware_type: ranged(&a, "hardware_type", Kind::Bits(16), 1)?,
        protocol_type: ranged(&a, "protocol_type", Kind::Bits(16), 0x0800)?,
        hardware_length: ranged(&a, "hardware_length", Kind::Bits(8), 6)?,
        protocol_length: ranged(&a, "protocol_length", Kind::Bits(8), 4)?,
        operation: ranged(&a, "operation", Kind::Bits(16), 1)?,
        sender_hardware_addr: ranged(&a, "sender_hardware_addr", Kind::Mac, 0)?,
        sender_protocol_addr: ranged(&a, "sender_protocol_addr", Kind::V4, 0)?,
        target_hardware_addr: ranged(&a, "target_hardware_addr", Kind::Mac, 0)?,
        target_protocol_addr: ranged(&a, "target_protocol_addr", Kind::V4, 0)?,
    };
    a.done()?;
    let zero = Range::single(0);
    Ok(Headers {
        eth_src,
        eth_dst,
        vlan,
        ipv6: false,
        ip_src: zero,
        ip_dst: zero,
        ttl: 64,
        dscp: 0,
        tcp_flags: None,
        src_port: zero,
        dst_port: zero,
        random: [None; 4],
        vxlan: None,
        custom: None,
        stack: None,
        arp: Some(Box::new(arp)),
    })
}
