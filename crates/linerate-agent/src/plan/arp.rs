//! An `arp` flow planned (`crate::arp_flow`): its checks, its sizes and
//! the frames of one period of its fields' patterns, sent as blast's
//! replay of an in-memory trace.

use super::options::Options;
use super::ports::PlanPort;
use crate::json::{Invalid, invalid};
use crate::model::Size;
use crate::model::arp::Arp;
use linerate_traffic::flows::Range;
use std::time::Duration;

/// The smallest ARP frame with its FCS (60 bytes padded, and 4).
pub const SIZE_MIN: u16 = 64;
/// Most frames in one period of a flow's patterns (laid out ahead).
pub const PERIOD_MAX: u64 = 1 << 16;

/// Value n of range `r` in a field of `bytes` bytes.
fn nth(r: &Range, n: u64, bytes: usize) -> u128 {
    let v = r
        .first
        .wrapping_add(u128::from(n % r.count).wrapping_mul(r.step));
    v & ((1u128 << (8 * bytes)) - 1)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// An ARP flow's Ethernet header: its addresses (`dst` resolved) and its
/// 802.1Q tag (VLAN id and priority), if it has one.
#[derive(Debug, Clone, Copy)]
pub struct Ethernet<'a> {
    pub src: &'a Range,
    pub dst: &'a Range,
    pub vlan: Option<(u16, u8)>,
}

/// The frames of one period of the flow's patterns and sizes (each
/// without its FCS), behind its Ethernet header `eth`.
pub fn frames(
    path: &str,
    arp: &Arp,
    eth: Ethernet,
    sizes: &[u16],
) -> Result<Vec<Vec<u8>>, Invalid> {
    let (src, dst) = (eth.src, eth.dst);
    let mut period = 1u64;
    let counts = arp
        .fields()
        .iter()
        .map(|(r, _)| r.count)
        .chain([src.count, dst.count, sizes.len() as u64])
        .collect::<Vec<_>>();
    for c in counts {
        period = period / gcd(period, c) * c;
        if period > PERIOD_MAX {
            return Err(invalid(
                path,
                format!(
                    "the counts of its fields' patterns (and sizes) repeat after more than {PERIOD_MAX} frames: linerate lays an arp flow's frames out ahead, at most {PERIOD_MAX}"
                ),
            ));
        }
    }
    Ok((0..period)
        .map(|n| {
            let size = usize::from(sizes[(n % sizes.len() as u64) as usize]);
            let mut f = Vec::with_capacity(size - 4);
            f.extend_from_slice(&nth(dst, n, 6).to_be_bytes()[10..]);
            f.extend_from_slice(&nth(src, n, 6).to_be_bytes()[10..]);
            if let Some((id, prio)) = eth.vlan {
                f.extend_from_slice(&[0x81, 0x00]);
                f.extend_from_slice(&(u16::from(prio) << 13 | id).to_be_bytes());
            }
            f.extend_from_slice(&[0x08, 0x06]);
            for (r, w) in arp.fields() {
                f.extend_from_slice(&nth(&r, n, w).to_be_bytes()[16 - w..]);
            }
            f.resize(size - 4, 0);
            f
        })
        .collect())
}

/// The sizes an ARP flow's frames take in turn (a mix's: one cycle of
/// its sizes, spread as a plain flow's are), each at least [`SIZE_MIN`].
pub(crate) fn sizes(path: &str, s: &Size) -> Result<Vec<u16>, Invalid> {
    let v = super::blast::sizes(path, s)?.cycle().to_vec();
    if let Some(&small) = v.iter().find(|&&n| n < SIZE_MIN) {
        return Err(invalid(
            path,
            format!("{small} bytes: an ARP frame is 60 bytes and its FCS, at least {SIZE_MIN}"),
        ));
    }
    Ok(v)
}

/// Why flow `f` at `path`, an ARP flow, cannot be sent as one (a device
/// flow, loopback receivers, a peer's receive port, metric tags).
pub(crate) fn check(
    path: &str,
    f: &crate::model::Flow,
    ports: &[PlanPort],
    opts: &Options,
) -> Result<(), Invalid> {
    if f.device.is_some() {
        return Err(invalid(
            &format!("{path}.tx_rx"),
            "an arp flow is a port flow (tx_rx.port)",
        ));
    }
    if opts.rx_backend == linerate_packet::BackendKind::Loopback {
        return Err(invalid(
            &format!("{path}.packet"),
            "an arp flow is counted on its receive ports' interfaces: not on loopback ports",
        ));
    }
    if let Some(r) =
        f.rx.iter()
            .find(|r| ports.iter().any(|p| p.name == **r && p.remote.is_some()))
    {
        return Err(invalid(
            &format!("{path}.tx_rx.port.rx_names"),
            format!(
                "port '{r}' is on a peer agent: an arp flow's receive ports are this agent's (a peer's receivers count probe frames, and an ARP frame carries none)"
            ),
        ));
    }
    if !f.tags.is_empty() {
        return Err(invalid(
            &format!("{path}.packet"),
            "metric_tags: an arp flow's frames carry no probe to count tags by",
        ));
    }
    Ok(())
}

/// The replay that sends an ARP flow's frames (behind `eth`, its
/// destination MAC resolved) in turn, as fast as the flow's rate lets it.
pub(crate) fn replay(
    path: &str,
    arp: &Arp,
    eth: Ethernet,
    sizes: &[u16],
) -> Result<linerate_packet::Replay, Invalid> {
    let frames = frames(&format!("{path}.packet"), arp, eth, sizes)?;
    let times = vec![Duration::ZERO; frames.len()];
    Ok(linerate_packet::Replay {
        trace: linerate_traffic::pcap::Trace { frames, times },
        rewrite: Default::default(),
        loops: 0,
        timing: linerate_packet::Timing::Fast,
    })
}
