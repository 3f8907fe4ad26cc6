//! Kernel settings: firewall and conntrack, reverse-path filter, audit,
//! socket buffers, backlog, congestion control, busy polling.

use super::Ctx;
use crate::finding::{Finding, Outcome, Severity, unchecked};

fn num(ctx: &Ctx, path: &str) -> Result<u64, String> {
    let v = ctx.src.read_trim(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound && path.starts_with("/proc/sys/net/core/") {
            format!(
                "{path}: not present (a host-wide setting, not visible inside a network namespace)"
            )
        } else {
            format!("{path}: {e}")
        }
    })?;
    v.split_whitespace()
        .last()
        .and_then(|x| x.parse().ok())
        .ok_or_else(|| format!("{path}: '{v}' is not a number"))
}

pub fn firewall(ctx: &Ctx) -> Outcome {
    let mut out = Vec::new();
    let mut evidence = Vec::new();
    for path in ["/proc/net/ip_tables_names", "/proc/net/ip6_tables_names"] {
        if let Ok(t) = ctx.src.read(path) {
            let tables: Vec<&str> = t.split_whitespace().collect();
            if !tables.is_empty() {
                evidence.push(format!("{path}: {}", tables.join(" ")));
            }
        }
    }
    if let Ok(m) = ctx.src.read("/proc/modules") {
        let loaded: Vec<&str> = m
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| {
                n.starts_with("iptable_")
                    || n.starts_with("ip6table_")
                    || n.starts_with("nf_tables")
                    || *n == "nf_conntrack"
            })
            .collect();
        if !loaded.is_empty() {
            evidence.push(format!("/proc/modules: {}", loaded.join(" ")));
        }
    }
    if !evidence.is_empty() {
        out.push(Finding {
            id: "kernel.firewall",
            severity: Severity::Warning,
            title: "firewall tables are loaded".into(),
            evidence,
            why: "every packet walks the loaded netfilter hooks even when the tables hold no rules; at millions of packets per second that is measurable".into(),
            fix: Some("iptables-save | grep -c '^-A'  # if 0: modprobe -r iptable_filter ip6table_filter (or flush and unload nftables)".into()),
        });
    }
    let count_path = "/proc/sys/net/netfilter/nf_conntrack_count";
    if let Ok(count) = ctx.src.read_trim(count_path) {
        let max = ctx
            .src
            .read_trim("/proc/sys/net/netfilter/nf_conntrack_max")
            .unwrap_or_else(|_| "?".into());
        let active = count.parse::<u64>().is_ok_and(|c| c > 0);
        out.push(Finding {
            id: "kernel.conntrack",
            severity: if active { Severity::Warning } else { Severity::Info },
            title: if active {
                format!("connection tracking is active ({count} entries)")
            } else {
                "connection tracking is loaded (no entries now)".into()
            },
            evidence: vec![format!("{count_path}: {count} (max {max})")],
            why: "once a rule or NAT needs it, conntrack looks up every packet and inserts every new flow; flows with address/port ranges fill its table and drops follow".into(),
            fix: Some("iptables -t raw -I PREROUTING -j NOTRACK; iptables -t raw -I OUTPUT -j NOTRACK  # or unload nf_conntrack".into()),
        });
    }
    Ok(out)
}

pub fn rp_filter(ctx: &Ctx) -> Outcome {
    let all = num(ctx, "/proc/sys/net/ipv4/conf/all/rp_filter")
        .map_err(|e| unchecked("kernel.rp_filter", e))?;
    let mut evidence = vec![format!("net.ipv4.conf.all.rp_filter = {all}")];
    let mut effective = all;
    if let Some(i) = ctx.iface
        && let Ok(v) = num(ctx, &format!("/proc/sys/net/ipv4/conf/{i}/rp_filter"))
    {
        evidence.push(format!("net.ipv4.conf.{i}.rp_filter = {v}"));
        effective = effective.max(v);
    }
    let mut out = Vec::new();
    if effective == 1 {
        let scope = ctx.iface.unwrap_or("all");
        out.push(Finding {
            id: "kernel.rp_filter",
            severity: Severity::Warning,
            title: "strict reverse-path filtering is on".into(),
            evidence,
            why: "packets whose source address would not be routed back out of the same interface are dropped before any socket sees them: source-address ranges and asymmetric test set-ups lose traffic silently".into(),
            fix: Some(format!("sysctl -w net.ipv4.conf.all.rp_filter=2 net.ipv4.conf.{scope}.rp_filter=2  # 2 = loose, 0 = off")),
        });
    }
    // Loopback always accepts local sources; the setting matters on real links.
    if let Some(i) = ctx.iface.filter(|i| *i != "lo")
        && let Ok(0) = num(ctx, &format!("/proc/sys/net/ipv4/conf/{i}/accept_local"))
    {
        out.push(Finding {
            id: "kernel.accept_local",
            severity: Severity::Info,
            title: format!("{i} drops packets with a local source address"),
            evidence: vec![format!("net.ipv4.conf.{i}.accept_local = 0")],
            why: "a test looped back through a cable (both ends on this host) needs accept_local=1 (and rp_filter off)".into(),
            fix: Some(format!("sysctl -w net.ipv4.conf.{i}.accept_local=1")),
        });
    }
    Ok(out)
}

pub fn audit(ctx: &Ctx) -> Outcome {
    let procs = ctx
        .src
        .processes()
        .map_err(|e| unchecked("kernel.audit", format!("/proc: {e}")))?;
    Ok(if procs.iter().any(|p| p == "auditd") {
        vec![Finding {
            id: "kernel.audit",
            severity: Severity::Warning,
            title: "auditd is running".into(),
            evidence: vec!["process 'auditd' in /proc".into()],
            why: "with audit rules loaded every syscall is checked against them, which slows the socket backends' send and receive calls".into(),
            fix: Some("auditctl -D  # remove rules for the test, or: systemctl stop auditd".into()),
        }]
    } else {
        vec![]
    })
}

/// Buffers below this hold under a millisecond at 10G+.
const BUF_MIN_BYTES: u64 = 16 << 20;
const BACKLOG_MIN: u64 = 10_000;

pub fn buffers(ctx: &Ctx) -> Outcome {
    let mut out = Vec::new();
    let mut small = Vec::new();
    for key in ["rmem_max", "wmem_max"] {
        let path = format!("/proc/sys/net/core/{key}");
        match num(ctx, &path) {
            Ok(v) if v < BUF_MIN_BYTES => small.push((format!("net.core.{key}"), v)),
            Ok(_) => {}
            Err(e) => return Err(unchecked("kernel.buffers", e)),
        }
    }
    for key in ["tcp_rmem", "tcp_wmem"] {
        let path = format!("/proc/sys/net/ipv4/{key}");
        if let Ok(v) = num(ctx, &path)
            && v < BUF_MIN_BYTES
        {
            small.push((format!("net.ipv4.{key} (max)"), v));
        }
    }
    if !small.is_empty() {
        out.push(Finding {
            id: "kernel.buffers",
            severity: Severity::Warning,
            title: "socket buffer limits are small".into(),
            evidence: small.iter().map(|(k, v)| format!("{k} = {v}")).collect(),
            why: "a socket cannot hold more than these limits: bursts overflow (UDP drops at the receiver) and TCP windows stay small on long paths".into(),
            fix: Some("sysctl -w net.core.rmem_max=67108864 net.core.wmem_max=67108864 net.ipv4.tcp_rmem='4096 131072 67108864' net.ipv4.tcp_wmem='4096 16384 67108864'".into()),
        });
    }
    Ok(out)
}

pub fn backlog(ctx: &Ctx) -> Outcome {
    let mut out = Vec::new();
    match num(ctx, "/proc/sys/net/core/netdev_max_backlog") {
        Ok(v) if v < BACKLOG_MIN => out.push(Finding {
            id: "kernel.backlog",
            severity: Severity::Warning,
            title: format!("netdev_max_backlog is {v}"),
            evidence: vec![format!("net.core.netdev_max_backlog = {v}")],
            why: "packets queued for the stack on one CPU beyond this are dropped (counted in /proc/net/softnet_stat, not on the interface)".into(),
            fix: Some("sysctl -w net.core.netdev_max_backlog=250000".into()),
        }),
        Ok(_) => {}
        Err(e) => return Err(unchecked("kernel.backlog", e)),
    }
    Ok(out)
}

pub fn congestion(ctx: &Ctx) -> Outcome {
    let mut out = Vec::new();
    if let Ok(cc) = ctx
        .src
        .read_trim("/proc/sys/net/ipv4/tcp_congestion_control")
    {
        out.push(Finding {
            id: "kernel.congestion",
            severity: Severity::Info,
            title: format!("TCP congestion control is {cc}"),
            evidence: vec![format!("net.ipv4.tcp_congestion_control = {cc}")],
            why: "throughput on lossy or long paths depends on it; both ends' algorithms are recorded in the results".into(),
            fix: None,
        });
    }
    Ok(out)
}

pub fn busy_poll(ctx: &Ctx) -> Outcome {
    let mut out = Vec::new();
    let poll = num(ctx, "/proc/sys/net/core/busy_poll");
    let read = num(ctx, "/proc/sys/net/core/busy_read");
    match (poll, read) {
        (Ok(0), Ok(0)) => out.push(Finding {
            id: "kernel.busy_poll",
            severity: Severity::Info,
            title: "busy polling is off".into(),
            evidence: vec!["net.core.busy_poll = 0".into(), "net.core.busy_read = 0".into()],
            why: "request/response latency tests (rr) gain tens of microseconds with busy polling, at the cost of CPU".into(),
            fix: Some("sysctl -w net.core.busy_poll=50 net.core.busy_read=50".into()),
        }),
        (Err(e), _) | (_, Err(e)) => return Err(unchecked("kernel.busy_poll", e)),
        _ => {}
    }
    Ok(out)
}
