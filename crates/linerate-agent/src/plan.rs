//! A configuration made runnable: each port an interface of the
//! allow-list, each flow a blast on its transmit port and a sink on each
//! of its receive ports, with a block of probe flow ids of its own so the
//! receivers tell the flows apart. Everything that can be refused is
//! refused here, before anything is sent.

use crate::json::{Invalid, invalid};
use crate::model::{self, Config, Delay, Field, Rate, Size, Stop};
use crate::peer::Peers;
use linerate_calc::{Imix, ImixEntry};
use linerate_packet::{BackendKind, BlastConfig, Gso, RxFilter, SinkConfig};
use linerate_traffic::flows::Range;
use linerate_traffic::template::Framing;
use linerate_traffic::vxlan::Vxlan;
use linerate_traffic::{FlowFields, FlowSpec, ProbeIds, SizeSequence, Template};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// Probe ids a flow takes at most (a receiver keeps a latency histogram
/// for its first 256 ids), and all flows together (each below the sink's
/// 4096 rows of its own).
pub const IDS_PER_FLOW_MAX: u32 = 256;
pub const IDS_MAX: u32 = linerate_packet::FLOW_ROWS_MAX as u32;
/// The longest cycle an IMIX's weights may make, frames.
const MIX_CYCLE_MAX: u64 = 100_000;

/// How the agent runs what it is given.
#[derive(Debug, Clone)]
pub struct Options {
    /// The interfaces a port may be: nothing else is sent on or read.
    pub allow: Vec<String>,
    pub tx_backend: BackendKind,
    pub rx_backend: BackendKind,
    /// The loopback ports the backends open when they are `loopback`
    /// (the caller's registry; empty for kernel interfaces).
    pub wires: linerate_backend::port::Wires,
    /// After a flow's last frame, how long its receivers still count.
    pub drain: Duration,
    /// The longest a flow sends (continuous ones stop there).
    pub run_max: Duration,
    /// How often running counts are taken (the rates' interval).
    pub interval: Duration,
    /// Other agents whose ports a configuration may use.
    pub peers: Option<Arc<Peers>>,
    /// Where each start of traffic is reported as a run (`crate::run`).
    pub reporting: Option<crate::run::Reporting>,
}

impl Options {
    /// An agent whose ports are in-memory loopback ports named `allow`
    /// (nothing touches an interface), made in a registry of its own
    /// (`wires`: none yet): 10 ms drain, 5 s longest run, no peers, no run
    /// reporting. For tests and examples.
    pub fn loopback(allow: &[&str]) -> Self {
        Options {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            tx_backend: BackendKind::Loopback,
            rx_backend: BackendKind::Loopback,
            wires: Default::default(),
            drain: Duration::from_millis(10),
            run_max: Duration::from_secs(5),
            interval: Duration::from_millis(50),
            peers: None,
            reporting: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub ports: Vec<PlanPort>,
    pub flows: Vec<PlanFlow>,
}

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
    errs.extend(crate::devices::local_ports(&cfg.devices, &ports));
    if !errs.is_empty() {
        // The flows need their ports.
        return Err(errs);
    }
    let mut flows = Vec::new();
    let mut next_id: u32 = 0;
    for (i, f) in cfg.flows.iter().enumerate() {
        let path = format!("flows[{i}]");
        match crate::arp_flow::planned(&path, f, &ports, opts, &mut next_id, plan_flow) {
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

/// Port `i`: on a peer, or an interface of the allow-list on this host.
fn plan_port(i: usize, p: &model::Port, opts: &Options) -> Result<PlanPort, Invalid> {
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

/// Flow `f` at `path` over `ports`, its probe ids the block from
/// `next_id` on (moved past them).
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

/// A port's line rate from sysfs (Mb/s there), bits per second.
pub fn speed_bps(iface: &str) -> Option<u64> {
    linerate_backend::iface::speed_bps(iface)
}

fn flow_spec(
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

/// The address whose next hop an auto destination MAC is: the IP
/// packet's destination, or behind GRE the outer header's.
fn next_hop(h: &model::Headers) -> (bool, u128) {
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
fn auto_mac(
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

/// A VXLAN flow's outer headers as blast sends them (an auto destination
/// MAC resolved as a plain flow's).
fn vxlan(
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

fn blast_config(
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

fn sizes(path: &str, s: &Size) -> Result<SizeSequence, Invalid> {
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
