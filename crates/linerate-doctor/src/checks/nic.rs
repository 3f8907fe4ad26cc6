//! The interface: queues, RSS, RPS/XPS, IRQs, offloads, rings, MTU, and
//! what linerate's backends can use on its driver.

use super::{Ctx, parse_cpulist, parse_mask, to_mask};
use crate::finding::{Finding, Outcome, Severity, Unchecked, unchecked};
use std::collections::BTreeSet;

fn iface<'a>(ctx: &'a Ctx, check: &'static str) -> Result<&'a str, Unchecked> {
    let i = ctx
        .iface
        .ok_or_else(|| unchecked(check, "no interface given (--iface)"))?;
    if ctx
        .src
        .read_trim(&format!("/sys/class/net/{i}/ifindex"))
        .is_err()
    {
        return Err(unchecked(
            check,
            format!("interface {i} does not exist (no /sys/class/net/{i})"),
        ));
    }
    Ok(i)
}

/// RX and TX queue directories in sysfs.
fn queue_dirs(ctx: &Ctx, i: &str) -> Result<(Vec<String>, Vec<String>), Unchecked> {
    let path = format!("/sys/class/net/{i}/queues");
    let names = ctx
        .src
        .list(&path)
        .map_err(|e| unchecked("nic.queues", format!("{path}: {e}")))?;
    let rx = names
        .iter()
        .filter(|n| n.starts_with("rx-"))
        .cloned()
        .collect();
    let tx = names
        .iter()
        .filter(|n| n.starts_with("tx-"))
        .cloned()
        .collect();
    Ok((rx, tx))
}

pub fn queues(ctx: &Ctx) -> Outcome {
    let i = iface(ctx, "nic.queues")?;
    let (rx, tx) = queue_dirs(ctx, i)?;
    let cpus = ctx.cpus.len();
    let mut out = Vec::new();
    let ch = ctx.src.channels(i);
    let mut evidence = vec![format!(
        "/sys/class/net/{i}/queues: {} rx, {} tx",
        rx.len(),
        tx.len()
    )];
    if let Ok(c) = &ch {
        evidence.push(format!(
            "ethtool -l {i}: combined {} (max {}), rx {} (max {}), tx {} (max {})",
            c.combined, c.max_combined, c.rx, c.max_rx, c.tx, c.max_tx
        ));
    }
    if rx.len() < cpus {
        let can_grow = ch
            .as_ref()
            .is_ok_and(|c| c.max_combined.max(c.max_rx) as usize > rx.len());
        out.push(Finding {
            id: "nic.queues",
            severity: if can_grow { Severity::Warning } else { Severity::Info },
            title: format!("{i} has {} RX queue(s) for {cpus} CPUs", rx.len()),
            evidence,
            why: "RSS spreads receive work over queues, one CPU each: with fewer queues than CPUs some CPUs take no receive work unless RPS steers it".into(),
            fix: can_grow.then(|| {
                let max = ch.as_ref().map_or(0, |c| c.max_combined.max(c.max_rx));
                format!("ethtool -L {i} combined {}", (cpus as u32).min(max))
            }),
        });
    }
    Ok(out)
}

pub fn rss_table(ctx: &Ctx) -> Outcome {
    let i = iface(ctx, "nic.rss_table")?;
    let (rx, _) = queue_dirs(ctx, i)?;
    let table = ctx.src.rss_table(i).map_err(|e| {
        unchecked(
            "nic.rss_table",
            format!("ethtool -x {i}: {e} (the driver has no RSS table)"),
        )
    })?;
    if table.is_empty() || rx.len() < 2 {
        return Ok(vec![]);
    }
    let used: BTreeSet<u32> = table.iter().copied().collect();
    Ok(if used.len() < rx.len() {
        vec![Finding {
            id: "nic.rss_table",
            severity: Severity::Limit,
            title: format!("the RSS table of {i} uses only {} of {} RX queues", used.len(), rx.len()),
            evidence: vec![format!(
                "ethtool -x {i}: {} buckets point to queues {:?}",
                table.len(),
                used.iter().collect::<Vec<_>>()
            )],
            why: "flows never hash to the queues missing from the table, so their CPUs sit idle while the others saturate".into(),
            fix: Some(format!("ethtool -X {i} equal {}", rx.len())),
        }]
    } else {
        vec![]
    })
}

pub fn rps_xps(ctx: &Ctx) -> Outcome {
    let i = iface(ctx, "nic.rps")?;
    let (rx, tx) = queue_dirs(ctx, i)?;
    let cpus = ctx.cpus.len();
    let mut out = Vec::new();
    let mask = to_mask(&ctx.cpus);
    if cpus > 1 && rx.len() < cpus {
        let mut evidence = Vec::new();
        let mut any = false;
        for q in &rx {
            let path = format!("/sys/class/net/{i}/queues/{q}/rps_cpus");
            if let Ok(m) = ctx.src.read_trim(&path) {
                any |= parse_mask(&m).is_some_and(|c| !c.is_empty());
                evidence.push(format!("{path}: {m}"));
            }
        }
        if !evidence.is_empty() && !any {
            out.push(Finding {
                id: "nic.rps",
                severity: Severity::Warning,
                title: format!(
                    "RPS is off on {i}, which has fewer RX queues ({}) than CPUs ({cpus})",
                    rx.len()
                ),
                evidence,
                why: "without RPS all receive processing stays on the CPUs of the few queues"
                    .into(),
                fix: Some(format!(
                    "for q in /sys/class/net/{i}/queues/rx-*; do echo {mask} > $q/rps_cpus; done"
                )),
            });
        }
    }
    if tx.len() > 1 {
        let mut unset = Vec::new();
        for q in &tx {
            let path = format!("/sys/class/net/{i}/queues/{q}/xps_cpus");
            if let Ok(m) = ctx.src.read_trim(&path)
                && parse_mask(&m).is_some_and(|c| c.is_empty())
            {
                unset.push(format!("{path}: {m}"));
            }
        }
        if !unset.is_empty() {
            out.push(Finding {
                id: "nic.xps",
                severity: Severity::Warning,
                title: format!("XPS is not set on {} of {} TX queues of {i}", unset.len(), tx.len()),
                evidence: unset,
                why: "without XPS a sender may use any TX queue, so queues are shared between CPUs (lock contention, reordering)".into(),
                fix: Some(format!(
                    "q=0; for c in {}; do printf '%x' $((1<<c)) > /sys/class/net/{i}/queues/tx-$q/xps_cpus; q=$((q+1)); done",
                    ctx.cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" ")
                )),
            });
        }
    }
    Ok(out)
}

/// IRQ numbers of the interface, from /proc/interrupts (`eth0-TxRx-3`, …).
fn irqs(ctx: &Ctx, i: &str) -> Result<Vec<(u32, String)>, Unchecked> {
    let text = ctx
        .src
        .read("/proc/interrupts")
        .map_err(|e| unchecked("nic.irq", format!("/proc/interrupts: {e}")))?;
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((num, rest)) = line.trim_start().split_once(':') else {
            continue;
        };
        let Ok(n) = num.trim().parse::<u32>() else {
            continue;
        };
        let name = rest.split_whitespace().last().unwrap_or("");
        if name == i || name.starts_with(&format!("{i}-")) {
            out.push((n, name.to_string()));
        }
    }
    Ok(out)
}

/// The NUMA node the interface's device sits on (None: virtual device or
/// a single-node host, where sysfs says -1 or has no `device`).
fn nic_node(ctx: &Ctx, i: &str) -> Option<i64> {
    ctx.src
        .read_trim(&format!("/sys/class/net/{i}/device/numa_node"))
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
        .filter(|n| *n >= 0)
}

/// The caller's pinned workers against the interface's NUMA node.
pub fn workers_numa(ctx: &Ctx) -> Outcome {
    let i = iface(ctx, "nic.workers_numa")?;
    let path = format!("/sys/class/net/{i}/device/numa_node");
    let node = nic_node(ctx, i).ok_or_else(|| {
        unchecked(
            "nic.workers_numa",
            format!("{path}: no NUMA node (virtual device or single-node host)"),
        )
    })?;
    let far: Vec<usize> = ctx
        .workers
        .iter()
        .copied()
        .filter(|c| cpu_node(ctx, *c).is_some_and(|n| n != node))
        .collect();
    if far.is_empty() {
        return Ok(vec![]);
    }
    Ok(vec![Finding {
        id: "nic.workers_numa",
        severity: Severity::Warning,
        title: format!("workers pinned to CPUs {far:?}, off {i}'s NUMA node {node}"),
        evidence: vec![
            format!("{path}: {node}"),
            format!("workers pinned to CPUs {:?}", ctx.workers),
        ],
        why: "every packet buffer the NIC fills lives on its node; a worker on another node pays a cross-socket hop per packet".into(),
        fix: Some(format!("pin the workers to CPUs of node {node}: cat /sys/devices/system/node/node{node}/cpulist")),
    }])
}

fn cpu_node(ctx: &Ctx, cpu: usize) -> Option<i64> {
    let nodes = ctx.src.list("/sys/devices/system/node").ok()?;
    nodes
        .iter()
        .filter_map(|n| n.strip_prefix("node"))
        .find_map(|n| {
            let list = ctx
                .src
                .read_trim(&format!("/sys/devices/system/node/node{n}/cpulist"))
                .ok()?;
            parse_cpulist(&list)?
                .contains(&cpu)
                .then(|| n.parse().ok())?
        })
}

pub fn irq(ctx: &Ctx) -> Outcome {
    let i = iface(ctx, "nic.irq")?;
    let list = irqs(ctx, i)?;
    if list.is_empty() {
        return Err(unchecked(
            "nic.irq",
            format!(
                "no IRQs named after {i} in /proc/interrupts (a virtual device such as veth, or a driver that names IRQs after the PCI address)"
            ),
        ));
    }
    let mut out = Vec::new();
    let mut cpus_used = BTreeSet::new();
    let mut mismatched = Vec::new();
    let mut evidence = Vec::new();
    for (n, name) in &list {
        let aff = ctx
            .src
            .read_trim(&format!("/proc/irq/{n}/smp_affinity_list"))
            .unwrap_or_default();
        let hint = ctx
            .src
            .read_trim(&format!("/proc/irq/{n}/affinity_hint"))
            .unwrap_or_default();
        let aff_cpus = parse_cpulist(&aff).unwrap_or_default();
        cpus_used.extend(aff_cpus.iter().copied());
        evidence.push(format!(
            "IRQ {n} ({name}): smp_affinity_list {aff}, affinity_hint {hint}"
        ));
        if let Some(h) = parse_mask(&hint).filter(|h| !h.is_empty())
            && h != aff_cpus
        {
            mismatched.push(format!("IRQ {n} ({name}): on CPUs {aff}, hint says {h:?}"));
        }
    }
    if !mismatched.is_empty() {
        out.push(Finding {
            id: "nic.irq_hint",
            severity: Severity::Warning,
            title: format!("{} IRQ(s) of {i} are not where the driver hints", mismatched.len()),
            evidence: mismatched,
            why: "drivers hint one CPU per queue so queues do not share CPUs; something (often irqbalance) moved them".into(),
            fix: Some(format!("for n in {}; do cat /proc/irq/$n/affinity_hint > /proc/irq/$n/smp_affinity; done",
                list.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>().join(" "))),
        });
    }
    if list.len() > 1 && cpus_used.len() == 1 {
        out.push(Finding {
            id: "nic.irq_one_cpu",
            severity: Severity::Limit,
            title: format!("all {} IRQs of {i} land on CPU {}", list.len(), cpus_used.iter().next().unwrap_or(&0)),
            evidence: evidence.clone(),
            why: "every queue's interrupt work is done by one CPU, which caps receive throughput at one core's worth".into(),
            fix: Some(format!("spread them: n=0; for irq in {}; do echo $((n % {})) > /proc/irq/$irq/smp_affinity_list; n=$((n+1)); done",
                list.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>().join(" "), ctx.cpus.len().max(1))),
        });
    }
    if let Some(node) = nic_node(ctx, i) {
        let far: Vec<usize> = cpus_used
            .iter()
            .copied()
            .filter(|c| cpu_node(ctx, *c).is_some_and(|n| n != node))
            .collect();
        if !far.is_empty() {
            out.push(Finding {
                id: "nic.numa",
                severity: Severity::Warning,
                title: format!("IRQs of {i} (NUMA node {node}) run on CPUs of another node: {far:?}"),
                evidence: vec![format!("/sys/class/net/{i}/device/numa_node: {node}")],
                why: "packet buffers live on the NIC's node; touching them from another node costs a cross-socket hop per packet".into(),
                fix: Some(format!("pin IRQs and linerate's workers to CPUs of node {node} (see /sys/devices/system/node/node{node}/cpulist)")),
            });
        }
    }
    if let Ok(procs) = ctx.src.processes()
        && procs.iter().any(|p| p == "irqbalance")
    {
        out.push(Finding {
            id: "nic.irqbalance",
            severity: Severity::Warning,
            title: "irqbalance is running".into(),
            evidence: vec!["process 'irqbalance' in /proc".into()],
            why: "irqbalance moves IRQs during a test, and by default ignores the drivers' affinity hints".into(),
            fix: Some("systemctl stop irqbalance  # or run it with --hintpolicy=exact / ban the NIC's IRQs".into()),
        });
    }
    Ok(out)
}

pub fn offloads(ctx: &Ctx) -> Outcome {
    let i = iface(ctx, "nic.offloads")?;
    let o = ctx
        .src
        .offloads(i)
        .map_err(|e| unchecked("nic.offloads", format!("ethtool -k {i}: {e}")))?;
    let mut out = Vec::new();
    let state = format!(
        "ethtool -k {i}: rx-checksum {} tx-checksum {} sg {} tso {} gso {} gro {}",
        on(o.rx_checksum),
        on(o.tx_checksum),
        on(o.scatter_gather),
        on(o.tso),
        on(o.gso),
        on(o.gro)
    );
    if o.gro {
        out.push(Finding {
            id: "nic.gro",
            severity: Severity::Info,
            title: format!("GRO is on for {i}"),
            evidence: vec![state.clone()],
            why: "good for TCP; for UDP-only tests it merges datagrams of a flow before the stack, which changes per-packet timing and hides per-packet cost".into(),
            fix: Some(format!("ethtool -K {i} gro off  # for UDP packet-rate tests")),
        });
    }
    let missing: Vec<&str> = [
        ("tso", o.tso),
        ("gso", o.gso),
        ("tx-checksum", o.tx_checksum),
        ("rx-checksum", o.rx_checksum),
        ("sg", o.scatter_gather),
    ]
    .iter()
    .filter(|(_, v)| !v)
    .map(|(k, _)| *k)
    .collect();
    if !missing.is_empty() {
        out.push(Finding {
            id: "nic.offloads_off",
            severity: Severity::Warning,
            title: format!("offloads off on {i}: {}", missing.join(", ")),
            evidence: vec![state],
            why: "without segmentation and checksum offloads the CPU segments and checksums every byte: TCP throughput per core drops several-fold".into(),
            fix: Some(format!("ethtool -K {i} {}", missing.iter().map(|m| format!("{m} on")).collect::<Vec<_>>().join(" "))),
        });
    }
    Ok(out)
}

fn on(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

pub fn rings(ctx: &Ctx) -> Outcome {
    let i = iface(ctx, "nic.rings")?;
    let r = ctx.src.rings(i).map_err(|e| {
        unchecked(
            "nic.rings",
            format!("ethtool -g {i}: {e} (the driver does not report ring sizes)"),
        )
    })?;
    Ok(
        if (r.rx_max > 0 && r.rx < r.rx_max) || (r.tx_max > 0 && r.tx < r.tx_max) {
            vec![Finding {
            id: "nic.rings",
            severity: Severity::Warning,
            title: format!("ring sizes of {i} are below the hardware maximum"),
            evidence: vec![format!("ethtool -g {i}: rx {} of {}, tx {} of {}", r.rx, r.rx_max, r.tx, r.tx_max)],
            why: "short rings overflow during bursts and scheduling hiccups: drops the interface counts as rx_missed/fifo errors".into(),
            fix: Some(format!("ethtool -G {i} rx {} tx {}", r.rx_max, r.tx_max)),
        }]
        } else {
            vec![]
        },
    )
}

pub fn mtu(ctx: &Ctx) -> Outcome {
    let i = iface(ctx, "nic.mtu")?;
    let path = format!("/sys/class/net/{i}/mtu");
    let v: u32 = ctx
        .src
        .read_trim(&path)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| unchecked("nic.mtu", format!("{path} unreadable")))?;
    Ok(match v {
        0..1500 => vec![Finding {
            id: "nic.mtu",
            severity: Severity::Warning,
            title: format!("MTU of {i} is {v}, below Ethernet's 1500"),
            evidence: vec![format!("{path}: {v}")],
            why: "large tests pay more headers per byte, and frames above the MTU cannot be sent"
                .into(),
            fix: Some(format!("ip link set {i} mtu 1500")),
        }],
        1500..9000 => vec![],
        _ => vec![Finding {
            id: "nic.mtu",
            severity: Severity::Info,
            title: format!("jumbo frames: MTU of {i} is {v}"),
            evidence: vec![format!("{path}: {v}")],
            why: "every hop must carry the same MTU, or large frames are dropped".into(),
            fix: None,
        }],
    })
}

/// What the driver offers linerate's backends.
pub fn capabilities(ctx: &Ctx) -> Outcome {
    let i = iface(ctx, "nic.capabilities")?;
    let driver = ctx
        .src
        .driver(i)
        .map_err(|e| unchecked("nic.capabilities", format!("ethtool -i {i}: {e}")))?;
    // Drivers with native XDP in mainline, and those with AF_XDP zero-copy.
    const NATIVE: &[&str] = &[
        "veth",
        "virtio_net",
        "tun",
        "ixgbe",
        "ixgbevf",
        "i40e",
        "ice",
        "igb",
        "igc",
        "mlx4_en",
        "mlx5_core",
        "bnxt_en",
        "nfp",
        "qede",
        "ena",
        "thunder",
        "netsec",
        "stmmac",
        "mvneta",
        "mvpp2",
        "sfc",
        "tsnep",
        "fec",
        "idpf",
        "gve",
        "bond",
    ];
    const ZEROCOPY: &[&str] = &[
        "i40e",
        "ice",
        "ixgbe",
        "igc",
        "mlx5_core",
        "stmmac",
        "idpf",
        "gve",
        "virtio_net",
    ];
    let native = NATIVE.contains(&driver.as_str());
    let zc = ZEROCOPY.contains(&driver.as_str());
    let xdp = if native {
        "native XDP"
    } else {
        "generic (skb) XDP only"
    };
    let xsk = if zc {
        "AF_XDP zero-copy"
    } else {
        "AF_XDP copy mode only"
    };
    Ok(vec![Finding {
        id: "nic.capabilities",
        severity: if native {
            Severity::Info
        } else {
            Severity::Warning
        },
        title: format!("{i} (driver {driver}): {xdp}, {xsk}"),
        evidence: vec![format!("ethtool -i {i}: driver {driver}")],
        why: if native {
            "linerate's af_xdp backend can attach its redirect program in native mode; AF_PACKET and sockets always work".into()
        } else {
            "in generic mode XDP runs after the kernel allocated an skb, so AF_XDP gains little over AF_PACKET here".into()
        },
        fix: None,
    }])
}
