//! Running every check and presenting the result.

use crate::checks::{self, Ctx};
use crate::finding::{Finding, Outcome, Severity, Unchecked};
use crate::source::Source;
use serde::Serialize;
use serde_json::{Value, json};
use std::fmt::Write as _;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub source: String,
    pub iface: Option<String>,
    pub cpus: usize,
    pub findings: Vec<Finding>,
    pub could_not_check: Vec<Unchecked>,
    pub checks_run: usize,
}

type Check = fn(&Ctx) -> Outcome;

const CHECKS: &[Check] = &[
    checks::nic::queues,
    checks::nic::rss_table,
    checks::nic::rps_xps,
    checks::nic::irq,
    checks::nic::offloads,
    checks::nic::rings,
    checks::nic::mtu,
    checks::nic::capabilities,
    checks::kernel::firewall,
    checks::kernel::rp_filter,
    checks::kernel::audit,
    checks::kernel::buffers,
    checks::kernel::backlog,
    checks::kernel::congestion,
    checks::kernel::busy_poll,
    checks::cpu::isolation,
    checks::cpu::smt,
    checks::cpu::governor,
    checks::cpu::hugepages,
    checks::cpu::memlock,
];

/// Checks that only mean something when the caller pinned workers.
const WORKER_CHECKS: &[Check] = &[checks::nic::workers_numa, checks::cpu::workers_online];

/// Runs every check. Interface checks are skipped (and said so) without an interface.
pub fn run(src: &dyn Source, iface: Option<&str>) -> Report {
    run_for(src, iface, &[])
}

/// [`run`], plus the checks about where the caller's workers are pinned
/// (`workers`: CPU numbers; empty when they are not pinned).
pub fn run_for(src: &dyn Source, iface: Option<&str>, workers: &[usize]) -> Report {
    let ctx = Ctx {
        src,
        iface,
        cpus: checks::cpu::online(src),
        workers: workers.to_vec(),
    };
    let mut findings = Vec::new();
    let mut could_not_check = Vec::new();
    let worker_checks: &[Check] = if workers.is_empty() {
        &[]
    } else {
        WORKER_CHECKS
    };
    for check in CHECKS.iter().chain(worker_checks) {
        match check(&ctx) {
            Ok(f) => findings.extend(f),
            Err(u) if iface.is_none() && u.check.starts_with("nic.") => {}
            Err(u) => could_not_check.push(u),
        }
    }
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.id.cmp(b.id)));
    Report {
        source: src.describe(),
        iface: iface.map(str::to_string),
        cpus: ctx.cpus.len(),
        findings,
        could_not_check,
        checks_run: CHECKS.len() + worker_checks.len(),
    }
}

impl Report {
    /// 1 when something will limit results, else 0.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.findings.iter().any(|f| f.severity == Severity::Limit))
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "linerate doctor: {}{}, {} CPUs",
            self.source,
            self.iface
                .as_ref()
                .map(|i| format!(", interface {i}"))
                .unwrap_or_default(),
            self.cpus
        );
        for (sev, head) in [
            (Severity::Limit, "WILL LIMIT RESULTS"),
            (Severity::Warning, "MAY LIMIT RESULTS"),
            (Severity::Info, "FOR YOUR INFORMATION"),
        ] {
            let group: Vec<&Finding> = self.findings.iter().filter(|f| f.severity == sev).collect();
            if group.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n{head}");
            for f in group {
                let _ = writeln!(out, "  [{}] {}", f.id, f.title);
                for e in &f.evidence {
                    let _ = writeln!(out, "      read: {e}");
                }
                let _ = writeln!(out, "      why:  {}", f.why);
                if let Some(fix) = &f.fix {
                    let _ = writeln!(out, "      fix:  {fix}");
                }
            }
        }
        if !self.could_not_check.is_empty() {
            let _ = writeln!(out, "\nCOULD NOT CHECK");
            for u in &self.could_not_check {
                let _ = writeln!(out, "  [{}] {}", u.check, u.reason);
            }
        }
        let limits = self
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Limit)
            .count();
        let _ = writeln!(
            out,
            "\n{} findings ({limits} will limit results), {} checks could not run",
            self.findings.len(),
            self.could_not_check.len()
        );
        out
    }
}

/// The short form every mode attaches to its results (`doctor` in `-J`):
/// this host checked for the interface a test used and the CPUs its
/// workers were pinned to.
pub fn test_summary(iface: Option<&str>, workers: &[usize]) -> Value {
    summary(&run_for(&crate::ThisHost, iface, workers))
}

/// [`test_summary`] for the interface that holds a local address (the
/// socket modes know their address, not their interface).
pub fn test_summary_at(local: Option<std::net::IpAddr>, workers: &[usize]) -> Value {
    let iface = local.and_then(linerate_backend::iface::of_addr);
    test_summary(iface.as_deref(), workers)
}

/// The short form attached to test results: warnings and limits by id,
/// plus what could not be checked.
pub fn summary(r: &Report) -> Value {
    json!({
        "iface": r.iface,
        "cpus": r.cpus,
        "limits": r.findings.iter().filter(|f| f.severity == Severity::Limit).map(|f| &f.title).collect::<Vec<_>>(),
        "warnings": r.findings.iter().filter(|f| f.severity == Severity::Warning).map(|f| &f.title).collect::<Vec<_>>(),
        "info": r.findings.iter().filter(|f| f.severity == Severity::Info).map(|f| &f.title).collect::<Vec<_>>(),
        "could_not_check": r.could_not_check.iter().map(|u| u.check).collect::<Vec<_>>(),
    })
}
