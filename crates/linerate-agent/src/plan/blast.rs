//! A flow's blast configuration: its fields' values, sizes, rate and
//! length, its headers' framing, every frame built before anything is
//! sent.

use super::options::Options;
use super::ports::{PlanPort, auto_mac, next_hop, speed_bps};
use crate::json::{Invalid, invalid};
use crate::model::{self, Field, Rate, Size, Stop};
use linerate_calc::{Imix, ImixEntry};
use linerate_packet::{BackendKind, BlastConfig, Gso};
use linerate_traffic::flows::Range;
use linerate_traffic::template::Framing;
use linerate_traffic::vxlan::Vxlan;
use linerate_traffic::{FlowFields, FlowSpec, ProbeIds, SizeSequence, Template};
use std::net::IpAddr;
use std::time::Duration;

/// The longest cycle an IMIX's weights may make, frames.
const MIX_CYCLE_MAX: u64 = 100_000;

pub(super) fn flow_spec(
    path: &str,
    f: &model::Flow,
    tx_iface: &str,
    rx: Option<&PlanPort>,
    opts: &Options,
) -> Result<FlowSpec, Invalid> {
    let h = &f.headers;
    let dst_mac = match h.eth_dst {
        Field::Range(r) => r,
        // The next hop's, as the responder resolves it: put at start.
        Field::Auto if f.device.is_some() => Range::single(0),
        Field::Auto => Range::single(u128::from(
            auto_mac(next_hop(h), tx_iface, rx, opts)
                .map_err(|e| invalid(&format!("{path}.packet[0].ethernet.dst"), e))?,
        )),
    };
    let spec = FlowSpec {
        src_mac: h.eth_src,
        dst_mac,
        src_ip: h.ip_src,
        dst_ip: h.ip_dst,
        ipv6: h.ipv6,
        src_port: h.src_port,
        dst_port: h.dst_port,
        ids: ProbeIds::default(),
        // The model's patterns: each field steps on its own per frame.
        lockstep: true,
        // The model's `random`: ports and IPv4 addresses.
        random: [
            h.random[0],
            h.random[1],
            h.random[2],
            h.random[3],
            None,
            None,
        ],
    };
    // The frames repeat after the least common multiple of the fields'
    // counts.
    let vni = h.vxlan.as_ref().map_or(Range::single(0), |v| v.vni);
    let n = [
        spec.src_mac,
        spec.dst_mac,
        spec.src_ip,
        spec.dst_ip,
        spec.src_port,
        spec.dst_port,
        vni,
    ]
    .iter()
    .try_fold(1u64, |l, r| {
        let c = r.count.max(1);
        (l / gcd(l, c)).checked_mul(c).filter(|&n| n <= 1 << 32)
    })
    .and_then(|n| {
        // MPLS labels' fields too.
        let p = h.stack.as_ref().map_or(Some(1), |s| s.period())?;
        (n / gcd(n, p)).checked_mul(p).filter(|&n| n <= 1 << 32)
    });
    if n.is_none() {
        return Err(invalid(
            &format!("{path}.packet"),
            "the fields' value counts repeat after more than 2^32 frames (their least common multiple): linerate walks at most 2^32 in a flow",
        ));
    }
    Ok(spec)
}

/// A VXLAN flow's outer headers as blast sends them (an auto destination
/// MAC resolved as a plain flow's).
pub(super) fn vxlan(
    path: &str,
    o: &model::Outer,
    tx_iface: &str,
    rx: Option<&PlanPort>,
    opts: &Options,
) -> Result<Vxlan, Invalid> {
    let dst_mac = match o.eth_dst {
        Some(m) => m as u64,
        None => auto_mac((o.ipv6, o.ip_dst), tx_iface, rx, opts)
            .map_err(|e| invalid(&format!("{path}.packet[0].ethernet.dst"), e))?,
    };
    let ip = |n: u128| -> IpAddr {
        if o.ipv6 {
            IpAddr::V6(n.into())
        } else {
            IpAddr::V4((n as u32).into())
        }
    };
    Ok(Vxlan {
        outer: FlowFields {
            src_mac: linerate_wire::MacAddr::from_u64(o.eth_src as u64),
            dst_mac: linerate_wire::MacAddr::from_u64(dst_mac),
            src_ip: ip(o.ip_src),
            dst_ip: ip(o.ip_dst),
            src_port: o.src_port,
            dst_port: o.dst_port,
        },
        vlan: o.vlan,
        dscp: o.dscp,
        ttl: o.ttl,
        flags: o.flags,
        reserved0: o.reserved0,
        reserved1: o.reserved1,
        vni: o.vni,
    })
}

/// Every size's frame built now: one that cannot be is said here.
fn frames_build(
    path: &str,
    sizes: &SizeSequence,
    flows: &FlowSpec,
    framing: &Framing,
) -> Result<(), Invalid> {
    let flow0 = flows.flow(0);
    for &size in sizes.cycle() {
        let built = if let Some(stack) = &framing.stack {
            stack.check(usize::from(size), &flow0, framing)
        } else if framing.vxlan.is_some() {
            linerate_traffic::vxlan::templates(usize::from(size), &flow0, framing).map(|_| ())
        } else {
            Template::new(usize::from(size), &flow0, framing).map(|_| ())
        };
        built.map_err(|e| invalid(&format!("{path}.size"), format!("{e}")))?;
    }
    Ok(())
}

pub(super) fn blast_config(
    path: &str,
    f: &model::Flow,
    flows: FlowSpec,
    vxlan: Option<Vxlan>,
    iface: &str,
    opts: &Options,
) -> Result<BlastConfig, Invalid> {
    let h = &f.headers;
    let sizes = sizes(&format!("{path}.size"), &f.size)?;
    let rate = match f.rate {
        Rate::Pps(p) => linerate_packet::Rate::Pps(p),
        r => linerate_packet::Rate::BpsL1(
            model::l1_bps(r, speed_bps(iface))
                .map_err(|e| invalid(&format!("{path}.rate"), e))?
                .expect("a bit rate"),
        ),
    };
    let (count, duration) = match f.duration.stop {
        Stop::Packets(n) => {
            // At the flow's rate (its smallest frames, for a bit rate),
            // the count must be sent within the longest run.
            let smallest = sizes.cycle().iter().copied().min().unwrap_or(64);
            let pps = match rate {
                linerate_packet::Rate::Pps(p) => p as f64,
                linerate_packet::Rate::BpsL1(b) | linerate_packet::Rate::BpsL2(b) => {
                    b as f64 / ((f64::from(smallest) + 20.0) * 8.0)
                }
                linerate_packet::Rate::Max => model::PPS_MAX as f64,
            };
            let takes = n as f64 / pps;
            if takes > opts.run_max.as_secs_f64() {
                return Err(invalid(
                    &format!("{path}.duration.fixed_packets.packets"),
                    format!(
                        "{n} packets at {pps:.0} frames/s take {takes:.0} s: above the agent's longest run ({} s, --max-run)",
                        opts.run_max.as_secs()
                    ),
                ));
            }
            (Some(n), opts.run_max)
        }
        Stop::Seconds(s) => {
            let d = Duration::from_secs_f64(s);
            if d > opts.run_max {
                return Err(invalid(
                    &format!("{path}.duration.fixed_seconds.seconds"),
                    format!(
                        "above the agent's longest run ({} s, --max-run)",
                        opts.run_max.as_secs()
                    ),
                ));
            }
            (None, d)
        }
        Stop::Continuous => (None, opts.run_max),
    };
    let framing = framing(h, vxlan, iface, opts);
    // Every size's frame built now: one that cannot be is said here.
    frames_build(path, &sizes, &flows, &framing)?;
    Ok(BlastConfig {
        iface: iface.to_string(),
        flows,
        sizes,
        framing,
        count,
        duration,
        rate,
        burst: 1,
        catch_up: linerate_traffic::pacing::CatchUp::Burst,
        burst_tolerance: 0,
        backend: opts.tx_backend,
        wires: opts.wires.clone(),
        cores: Vec::new(),
        replay: None,
        macs_given: true,
        gso: Gso::Auto,
        interval: Some(opts.interval),
        // The agent knows what it sent: no frame the configuration did not
        // ask for goes on the wire.
        end_markers: false,
    })
}

/// How headers `h` (VXLAN's, a custom header's bytes after the probe)
/// frame a flow sent on `iface`.
fn framing(h: &model::Headers, vxlan: Option<Vxlan>, iface: &str, opts: &Options) -> Framing {
    Framing {
        vlan: h.vlan,
        dscp: h.dscp,
        ttl: h.ttl,
        mtu: (opts.tx_backend != BackendKind::Loopback)
            .then(|| linerate_backend::iface::mtu(iface).ok())
            .flatten(),
        tcp_flags: h.tcp_flags,
        vxlan,
        payload: h.custom.as_deref().map(std::sync::Arc::from),
        stack: h.stack.clone(),
    }
}

/// The sizes flow frames take in turn: a list, or one cycle of a mix
/// (weights to hundredths).
pub(super) fn sizes(path: &str, s: &Size) -> Result<SizeSequence, Invalid> {
    Ok(match s {
        Size::Fixed(n) => SizeSequence::list(&[*n]),
        Size::Increment { start, end, step } => {
            let v: Vec<u16> = (*start..=*end).step_by(usize::from(*step)).collect();
            SizeSequence::list(&v)
        }
        Size::Weights(pairs) => {
            // Weights to integers: hundredths, then divided by their
            // greatest common divisor (7:4:1 stays 7:4:1).
            let w: Vec<u64> = pairs
                .iter()
                .map(|(_, w)| (w * 100.0).round().max(1.0) as u64)
                .collect();
            let g = w.iter().copied().fold(0, gcd).max(1);
            let entries: Vec<ImixEntry> = pairs
                .iter()
                .zip(&w)
                .map(|((size, _), w)| ImixEntry {
                    frame_bytes: u64::from(*size),
                    weight: w / g,
                })
                .collect();
            let total: u64 = entries.iter().map(|e| e.weight).sum();
            if total > MIX_CYCLE_MAX {
                return Err(invalid(
                    path,
                    format!(
                        "the weights make a cycle of {total} frames: at most {MIX_CYCLE_MAX} (weights to 0.01)"
                    ),
                ));
            }
            let mix = Imix::new(entries).map_err(|e| invalid(path, e.to_string()))?;
            SizeSequence::from_mix(&mix)
        }
    })
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}
