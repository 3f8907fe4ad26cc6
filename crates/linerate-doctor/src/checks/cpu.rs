//! CPU: isolation, SMT, frequency governor, hugepages, locked-memory limit.

use super::{Ctx, parse_cpulist};
use crate::finding::{Finding, Outcome, Severity, unchecked};

pub fn isolation(ctx: &Ctx) -> Outcome {
    let mut out = Vec::new();
    for (file, what) in [
        ("isolated", "isolated (isolcpus)"),
        ("nohz_full", "tickless (nohz_full)"),
    ] {
        let path = format!("/sys/devices/system/cpu/{file}");
        let Ok(v) = ctx.src.read_trim(&path) else {
            continue;
        };
        if !v.is_empty() && v != "(null)" {
            out.push(Finding {
                id: "cpu.isolated",
                severity: Severity::Info,
                title: format!("CPUs {v} are {what}"),
                evidence: vec![format!("{path}: {v}")],
                why: "isolated CPUs run nothing else: pin linerate's workers there (--affinity / --cores) for steady numbers".into(),
                fix: None,
            });
        }
    }
    Ok(out)
}

pub fn smt(ctx: &Ctx) -> Outcome {
    let path = "/sys/devices/system/cpu/smt/active";
    match ctx.src.read_trim(path) {
        Ok(v) if v == "1" => Ok(vec![Finding {
            id: "cpu.smt",
            severity: Severity::Info,
            title: "SMT (hyper-threading) is on".into(),
            evidence: vec![format!("{path}: 1")],
            why: "two workers on sibling threads share one core's execution units: pin one worker per physical core".into(),
            fix: Some("echo off > /sys/devices/system/cpu/smt/control".into()),
        }]),
        Ok(_) => Ok(vec![]),
        Err(e) => Err(unchecked("cpu.smt", format!("{path}: {e}"))),
    }
}

pub fn governor(ctx: &Ctx) -> Outcome {
    let mut slow = Vec::new();
    let mut seen = 0;
    for &c in &ctx.cpus {
        let path = format!("/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor");
        if let Ok(g) = ctx.src.read_trim(&path) {
            seen += 1;
            if g != "performance" {
                slow.push(format!("{path}: {g}"));
            }
        }
    }
    if seen == 0 {
        return Err(unchecked(
            "cpu.governor",
            "no cpufreq in sysfs (a virtual machine, or a driver without frequency scaling): clock speed not known",
        ));
    }
    Ok(if slow.is_empty() {
        vec![]
    } else {
        vec![Finding {
            id: "cpu.governor",
            severity: Severity::Warning,
            title: format!("{} of {seen} CPUs are not on the performance governor", slow.len()),
            evidence: slow,
            why: "a power-saving governor lowers the clock between bursts, so packet rates and latency vary run to run".into(),
            fix: Some("cpupower frequency-set -g performance  # or: echo performance | tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor".into()),
        }]
    })
}

pub fn hugepages(ctx: &Ctx) -> Outcome {
    let meminfo = ctx
        .src
        .read("/proc/meminfo")
        .map_err(|e| unchecked("cpu.hugepages", format!("/proc/meminfo: {e}")))?;
    let total = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("HugePages_Total:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or_else(|| unchecked("cpu.hugepages", "no HugePages_Total in /proc/meminfo"))?;
    Ok(if total == 0 {
        vec![Finding {
            id: "cpu.hugepages",
            severity: Severity::Info,
            title: "no hugepages reserved".into(),
            evidence: vec!["/proc/meminfo: HugePages_Total: 0".into()],
            why:
                "kernel-bypass backends (DPDK) need hugepages; sockets, AF_PACKET and AF_XDP do not"
                    .into(),
            fix: Some("echo 1024 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages".into()),
        }]
    } else {
        vec![]
    })
}

/// Below this, AF_XDP UMEMs on older kernels (and big ring buffers) fail.
const MEMLOCK_MIN_BYTES: u64 = 64 << 20;

/// Kernel (major, minor) from /proc/sys/kernel/osrelease.
fn kernel_version(ctx: &Ctx) -> Option<(u32, u32)> {
    let r = ctx.src.read_trim("/proc/sys/kernel/osrelease").ok()?;
    let mut it = r
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

pub fn memlock(ctx: &Ctx) -> Outcome {
    let v = ctx
        .src
        .memlock_limit()
        .map_err(|e| unchecked("cpu.memlock", format!("getrlimit: {e}")))?;
    // Since 5.11 the kernel charges UMEM to the memory cgroup instead.
    if kernel_version(ctx).is_some_and(|k| k >= (5, 11)) {
        return Ok(vec![]);
    }
    Ok(if v < MEMLOCK_MIN_BYTES {
        vec![Finding {
            id: "cpu.memlock",
            severity: Severity::Warning,
            title: format!("locked-memory limit is {} KiB", v / 1024),
            evidence: vec![format!("RLIMIT_MEMLOCK soft limit: {v} bytes")],
            why: "AF_XDP packet buffers (UMEM) are locked memory; on kernels before 5.11 a low limit makes the af_xdp backend fail".into(),
            fix: Some("ulimit -l unlimited  # or LimitMEMLOCK=infinity in the service unit".into()),
        }]
    } else {
        vec![]
    })
}

/// The caller's pinned workers: on CPUs that exist, one worker per CPU.
pub fn workers_online(ctx: &Ctx) -> Outcome {
    let path = "/sys/devices/system/cpu/online";
    let online = ctx
        .src
        .read_trim(path)
        .map_err(|e| unchecked("cpu.workers", format!("{path}: {e}")))?;
    let mut out = Vec::new();
    let offline: Vec<usize> = ctx
        .workers
        .iter()
        .copied()
        .filter(|c| !ctx.cpus.contains(c))
        .collect();
    if !offline.is_empty() {
        out.push(Finding {
            id: "cpu.workers_offline",
            severity: Severity::Limit,
            title: format!("workers asked for CPUs {offline:?}, which are not online"),
            evidence: vec![format!("{path}: {online}")],
            why: "a worker that cannot be pinned runs wherever the scheduler puts it, often on top of another worker".into(),
            fix: Some(format!("choose CPUs from {online}")),
        });
    }
    let mut seen = std::collections::BTreeSet::new();
    let shared: Vec<usize> = ctx
        .workers
        .iter()
        .copied()
        .filter(|c| !seen.insert(*c))
        .collect();
    if !shared.is_empty() {
        out.push(Finding {
            id: "cpu.workers_shared",
            severity: Severity::Warning,
            title: format!("more than one worker pinned to CPUs {shared:?}"),
            evidence: vec![format!("workers pinned to CPUs {:?}", ctx.workers)],
            why: "workers on one CPU take turns: together they get one core's worth".into(),
            fix: Some("list each CPU once".into()),
        });
    }
    Ok(out)
}

/// The CPUs of this host (from `/sys/devices/system/cpu/online`).
pub fn online(src: &dyn crate::Source) -> Vec<usize> {
    src.read_trim("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpulist(&s))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec![0])
}
