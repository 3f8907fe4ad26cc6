//! A configuration's ports made runnable: each an interface of the
//! allow-list or a peer's, its line rate, and the model's `auto`
//! destination MAC.

use super::options::Options;
use crate::devices::Device;
use crate::json::{Invalid, invalid};
use crate::model;
use linerate_packet::BackendKind;
use std::net::IpAddr;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct PlanPort {
    pub name: String,
    /// The interface (on the peer, for a remote port).
    pub iface: String,
    /// The peer agent the port is on (`https://IP:PORT`), if not this one.
    pub remote: Option<String>,
    /// The location as the client gave it.
    pub location: String,
}

/// Devices on ports of peer agents: refused (a responder runs on this
/// agent's ports only), each by its ethernet's path.
pub fn local_ports(devices: &[Device], ports: &[PlanPort]) -> Vec<Invalid> {
    let mut errs = Vec::new();
    for (i, d) in devices.iter().enumerate() {
        for (k, e) in d.ethernets.iter().enumerate() {
            if ports.iter().any(|p| p.name == e.port && p.remote.is_some()) {
                errs.push(invalid(
                    &format!("devices[{i}].ethernets[{k}].connection.port_name"),
                    format!(
                        "port '{}' is on a peer agent: devices are emulated on this agent's ports only",
                        e.port
                    ),
                ));
            }
        }
    }
    errs
}

/// Port `i`: on a peer, or an interface of the allow-list on this host.
pub(super) fn plan_port(i: usize, p: &model::Port, opts: &Options) -> Result<PlanPort, Invalid> {
    let path = format!("ports[{i}].location");
    if let Some(peers) = &opts.peers
        && let Some((base, iface)) = peers.split(&p.location)
    {
        return Ok(PlanPort {
            name: p.name.clone(),
            iface: iface.to_string(),
            remote: Some(base.to_string()),
            location: p.location.clone(),
        });
    }
    if !opts.allow.contains(&p.location) {
        let peers = opts.peers.as_ref().map_or(String::new(), |p| {
            format!(
                "; ports of its peers: https://IP:PORT/IFACE of {}",
                p.urls.join(", ")
            )
        });
        return Err(invalid(
            &path,
            format!(
                "'{}' is not an interface this agent may use (its allow-list: {}{peers})",
                p.location,
                opts.allow.join(", ")
            ),
        ));
    }
    if opts.tx_backend != BackendKind::Loopback
        && linerate_backend::iface::index(&p.location).is_err()
    {
        return Err(invalid(
            &path,
            format!("interface '{}' does not exist on this host", p.location),
        ));
    }
    Ok(PlanPort {
        name: p.name.clone(),
        iface: p.location.clone(),
        remote: None,
        location: p.location.clone(),
    })
}

/// A port's line rate from sysfs (Mb/s there), bits per second.
pub fn speed_bps(iface: &str) -> Option<u64> {
    linerate_backend::iface::speed_bps(iface)
}

/// The address whose next hop an auto destination MAC is: the IP
/// packet's destination, or behind GRE the outer header's.
pub(super) fn next_hop(h: &model::Headers) -> (bool, u128) {
    match h.stack.as_ref().and_then(|s| s.gre.as_ref()) {
        Some(g) => match g.dst {
            IpAddr::V4(a) => (false, u128::from(u32::from(a))),
            IpAddr::V6(a) => (true, u128::from(a)),
        },
        None => (h.ipv6, h.ip_dst.first),
    }
}

/// The model's `auto` destination MAC: the receive port's own address
/// when it is on this agent (a cable between the ports), else the next
/// hop's from the transmit port's neighbour table (resolved by the kernel
/// within 1 s).
pub(super) fn auto_mac(
    (ipv6, ip_dst): (bool, u128),
    tx: &str,
    rx: Option<&PlanPort>,
    opts: &Options,
) -> Result<u64, String> {
    if opts.tx_backend == BackendKind::Loopback {
        return Ok(0);
    }
    match (rx, &opts.peers) {
        (
            Some(PlanPort {
                remote: Some(base),
                iface,
                ..
            }),
            Some(peers),
        ) => {
            let facts: crate::peer::PortFacts = peers.call(
                base,
                "/linerate/port",
                &crate::peer::PortAsk { iface },
                Duration::from_secs(10),
            )?;
            return linerate_wire::MacAddr::parse(&facts.mac)
                .map(|m| m.to_u64())
                .ok_or_else(|| format!("auto: peer {base} gave no MAC for {iface}"));
        }
        (
            Some(PlanPort {
                remote: None,
                iface,
                ..
            }),
            _,
        ) => {
            return linerate_backend::iface::mac(iface)
                .map(|m| linerate_wire::MacAddr(m).to_u64())
                .map_err(|e| format!("auto: the receive port {iface}'s MAC: {e}"));
        }
        _ => {}
    }
    let ip = if ipv6 {
        IpAddr::V6(ip_dst.into())
    } else {
        IpAddr::V4((ip_dst as u32).into())
    };
    linerate_backend::neigh::resolve(tx, ip, Duration::from_secs(1))
        .map(|m| linerate_wire::MacAddr(m).to_u64())
        .map_err(|e| format!("auto: no MAC for {ip} on {tx} ({e}): give a value"))
}
