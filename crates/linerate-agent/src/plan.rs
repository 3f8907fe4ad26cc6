//! A configuration made runnable: each port an interface of the
//! allow-list, each flow a blast on its transmit port and a sink on each
//! of its receive ports, with a block of probe flow ids of its own so the
//! receivers tell the flows apart. Everything that can be refused is
//! refused here, before anything is sent.
//!
//! - `options`: how the agent runs what it is given;
//! - `ports`: each port an interface here or a peer's;
//! - `blast`: each flow's blast configuration.

pub mod arp;
pub mod blast;
pub mod options;
pub mod ports;

pub use options::{Options, Reporting};
pub use ports::{PlanPort, local_ports, speed_bps};

use crate::json::{Invalid, invalid};
use crate::model::{self, Config, Delay, Field};
use crate::peer::Peers;
use blast::{blast_config, flow_spec, vxlan};
use linerate_packet::{BlastConfig, RxFilter, SinkConfig};
use linerate_traffic::{FlowSpec, ProbeIds};
use ports::plan_port;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// Probe ids a flow takes at most (a receiver keeps a latency histogram
/// for its first 256 ids), and all flows together (each below the sink's
/// 4096 rows of its own).
pub const IDS_PER_FLOW_MAX: u32 = 256;
pub const IDS_MAX: u32 = linerate_packet::FLOW_ROWS_MAX as u32;
#[derive(Debug, Clone)]
pub struct Plan {
    pub ports: Vec<PlanPort>,
    pub flows: Vec<PlanFlow>,
}

#[derive(Debug, Clone)]
pub struct PlanFlow {
    pub name: String,
    pub tx: usize,
    pub rx: Vec<usize>,
    pub blast: BlastConfig,
    /// One per receive port on this agent; `sink_rx[i]` is sink i's place
    /// in `rx`.
    pub sinks: Vec<SinkConfig>,
    pub sink_rx: Vec<usize>,
    /// Receive ports on peers: (place in `rx`, peer, interface).
    pub remote_rx: Vec<(usize, String, String)>,
    pub peers: Option<Arc<Peers>>,
    pub ids: ProbeIds,
    pub delay: Duration,
    /// After the last frame, how long the receivers still count.
    pub drain: Duration,
    pub latency: bool,
    /// A device flow's next hop whose MAC (resolved by the port's
    /// responder, `crate::neighbors`) is its destination MAC at start:
    /// (ethernet, address).
    pub neighbor: Option<(String, IpAddr)>,
    /// Its `metric_tags`, if it has any: which probe ids carry which tag
    /// values.
    pub tags: Option<Arc<crate::tags::TagPlan>>,
}

/// Makes `cfg` runnable under `opts`: its first error.
pub fn plan(cfg: &Config, opts: &Options) -> Result<Plan, Invalid> {
    plan_all(cfg, opts).map_err(|mut e| e.remove(0))
}

/// Makes `cfg` runnable under `opts`: every port and flow is planned, and
/// the refusal is the list of their errors (one each, with its path).
pub fn plan_all(cfg: &Config, opts: &Options) -> Result<Plan, Vec<Invalid>> {
    let mut errs = Vec::new();
    let mut ports = Vec::new();
    for (i, p) in cfg.ports.iter().enumerate() {
        match plan_port(i, p, opts) {
            Ok(p) => ports.push(p),
            Err(e) => errs.push(e),
        }
    }
    errs.extend(local_ports(&cfg.devices, &ports));
    if !errs.is_empty() {
        // The flows need their ports.
        return Err(errs);
    }
    let mut flows = Vec::new();
    let mut next_id: u32 = 0;
    for (i, f) in cfg.flows.iter().enumerate() {
        let path = format!("flows[{i}]");
        match plan_any_flow(&path, f, &ports, opts, &mut next_id) {
            Ok(f) => flows.push(f),
            Err(e) => errs.push(e),
        }
    }
    if errs.is_empty() {
        Ok(Plan { ports, flows })
    } else {
        Err(errs)
    }
}

/// Flow `f` at `path` over `ports`, its probe ids the block from
/// `next_id` on (moved past them).
/// Plans flow `f` at `path`: an ARP flow as a flow of its Ethernet
/// addresses, then sent as a replay of its laid-out frames and counted by
/// `crate::arp_flow::send_and_count` (no sinks); any other by
/// [`plan_flow`].
fn plan_any_flow(
    path: &str,
    f: &model::Flow,
    ports: &[PlanPort],
    opts: &Options,
    next_id: &mut u32,
) -> Result<PlanFlow, Invalid> {
    let Some(a) = &f.headers.arp else {
        return plan_flow(path, f, ports, opts, next_id);
    };
    arp::check(path, f, ports, opts)?;
    let sizes = arp::sizes(&format!("{path}.size"), &f.size)?;
    // Planned as a flow of one size the templates take (its rate and
    // count checks): the frames sent are the ARP ones.
    let g = model::Flow {
        size: model::Size::Fixed(128),
        tags: Vec::new(),
        ..f.clone()
    };
    let mut pf = plan_flow(path, &g, ports, opts, next_id)?;
    let eth = arp::Ethernet {
        src: &f.headers.eth_src,
        dst: &pf.blast.flows.dst_mac,
        vlan: f.headers.vlan,
    };
    pf.blast.replay = Some(arp::replay(path, a, eth, &sizes)?);
    pf.blast.end_markers = false;
    // The sinks stay as the receive ports' interfaces (what counts is
    // `send_and_count`'s; no sink runs).
    pf.latency = false;
    pf.tags = None;
    Ok(pf)
}

fn plan_flow(
    path: &str,
    f: &model::Flow,
    ports: &[PlanPort],
    opts: &Options,
    next_id: &mut u32,
) -> Result<PlanFlow, Invalid> {
    let index = |n: &str| {
        ports
            .iter()
            .position(|p| p.name == n)
            .expect("checked by the model")
    };
    let tx = index(&f.tx);
    let rx: Vec<usize> = f.rx.iter().map(|r| index(r)).collect();
    if ports[tx].remote.is_some() {
        return Err(invalid(
            &format!("{path}.tx_rx.port.tx_name"),
            "a flow's transmit port must be on this agent (the one the client talks to); its receive ports may be on peers",
        ));
    }
    let spec = flow_spec(
        path,
        f,
        &ports[tx].iface,
        rx.first().map(|&r| &ports[r]),
        opts,
    )?;
    let ids = probe_ids(path, &spec, next_id)?;
    let spec = FlowSpec { ids, ..spec };
    let vxlan = f
        .headers
        .vxlan
        .as_ref()
        .map(|o| {
            vxlan(
                path,
                o,
                &ports[tx].iface,
                rx.first().map(|&r| &ports[r]),
                opts,
            )
        })
        .transpose()?;
    let blast = blast_config(path, f, spec, vxlan, &ports[tx].iface, opts)?;
    let local: Vec<(usize, usize)> = rx
        .iter()
        .enumerate()
        .filter(|(_, r)| ports[**r].remote.is_none())
        .map(|(k, r)| (k, *r))
        .collect();
    let sinks = local
        .iter()
        .map(|&(_, r)| sink_config(&ports[r].iface, &blast, opts))
        .collect();
    let sink_rx = local.iter().map(|&(k, _)| k).collect();
    let remote_rx = rx
        .iter()
        .enumerate()
        .filter_map(|(k, &r)| Some((k, ports[r].remote.clone()?, ports[r].iface.clone())))
        .collect();
    let delay = flow_delay(path, f, &ports[tx].iface, opts)?;
    let one_size = blast.sizes.cycle().windows(2).all(|w| w[0] == w[1]);
    let remote = rx.iter().any(|&r| ports[r].remote.is_some());
    let tags = crate::tags::plan(path, &f.tags, &blast.flows, remote, one_size)?.map(Arc::new);
    Ok(PlanFlow {
        name: f.name.clone(),
        tx,
        rx,
        blast,
        sinks,
        sink_rx,
        remote_rx,
        peers: opts.peers.clone(),
        ids,
        delay,
        drain: opts.drain,
        latency: f.latency,
        neighbor: f
            .device
            .as_ref()
            .filter(|_| f.headers.eth_dst == Field::Auto)
            .map(|d| (d.tx.ethernet.clone(), d.next_hop())),
        tags,
    })
}

/// The block of probe ids a flow of `spec`'s tuples takes from `next_id`
/// on (moved past it).
fn probe_ids(path: &str, spec: &FlowSpec, next_id: &mut u32) -> Result<ProbeIds, Invalid> {
    let span = spec
        .count()
        .clamp(1, u64::from(IDS_PER_FLOW_MAX))
        .next_power_of_two() as u32;
    if *next_id + span > IDS_MAX {
        return Err(invalid(
            path,
            format!(
                "the flows need more than {IDS_MAX} probe ids together (each flow takes its tuples' count, to the next power of two, at most {IDS_PER_FLOW_MAX})"
            ),
        ));
    }
    let ids = ProbeIds::block(*next_id as u16, span).expect("a power of two");
    *next_id += span;
    Ok(ids)
}

/// The sink of a flow sent by `blast` on a receive port of this agent.
fn sink_config(iface: &str, blast: &BlastConfig, opts: &Options) -> SinkConfig {
    SinkConfig {
        iface: iface.to_string(),
        // Bounded whatever happens: the send, the drain, slack.
        duration: blast.duration + opts.drain + Duration::from_secs(30),
        backend: opts.rx_backend,
        wires: opts.wires.clone(),
        clocks_shared: true,
        until_packets: None,
        capture: None,
        cores: Vec::new(),
        interval: Some(opts.interval),
        // AF_XDP takes probe frames by default; VXLAN's are UDP to its
        // port (the probe is the inner frame's); MPLS, GRE and ICMP frames
        // are not UDP at all.
        take: if blast.framing.stack.is_some() {
            RxFilter::All
        } else if blast.framing.vxlan.is_some() {
            RxFilter::Udp(Some((
                linerate_wire::vxlan::PORT,
                linerate_wire::vxlan::PORT,
            )))
        } else {
            RxFilter::Probes
        },
    }
}

/// How long flow `f` waits before its first frame (sent on `tx_iface`).
fn flow_delay(
    path: &str,
    f: &model::Flow,
    tx_iface: &str,
    opts: &Options,
) -> Result<Duration, Invalid> {
    let delay = match f.duration.delay {
        Delay::None => Duration::ZERO,
        Delay::Nanoseconds(ns) => Duration::from_secs_f64(ns / 1e9),
        Delay::Bytes(b) => {
            let bps = speed_bps(tx_iface).ok_or_else(|| {
                invalid(
                    &format!("{path}.duration"),
                    "a delay in bytes needs the port's speed, which its interface does not report: give nanoseconds",
                )
            })?;
            Duration::from_secs_f64(b * 8.0 / bps as f64)
        }
    };
    if delay > opts.run_max {
        return Err(invalid(
            &format!("{path}.duration"),
            format!(
                "a delay above the agent's longest run ({} s)",
                opts.run_max.as_secs()
            ),
        ));
    }
    Ok(delay)
}
