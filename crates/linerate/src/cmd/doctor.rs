//! `linerate doctor`: what on this host limits throughput, and the fix.

use super::{CpuList, cpu_list_syntax};
use crate::output::Console;
use anyhow::Result;
use clap::Args;
use linerate_doctor::{Fixture, Source, ThisHost};

/// Inspect this host (and one interface) for what limits network throughput.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Interface to inspect (queues, RSS, IRQs, offloads, rings, MTU, XDP).
    #[arg(long, short = 'i')]
    iface: Option<String>,
    /// CPUs you will pin linerate's workers to (`0-3,8`): adds the checks
    /// that they are online, not doubled up, and on the interface's NUMA node.
    /// Spelt as every command's --cores (the old name still works).
    #[arg(long = "cores", alias = "cpus", value_name = "LIST", value_parser = cpu_list_syntax)]
    cpus: Option<CpuList>,
    /// Print JSON instead of text.
    #[arg(short = 'J', long)]
    json: bool,
    /// Read a fixture tree (sysfs/procfs snapshot) instead of this host.
    #[arg(long, value_name = "DIR", hide = true)]
    root: Option<std::path::PathBuf>,
}

/// Exit code: 0 nothing serious, 1 findings that will limit results.
pub fn run(a: &DoctorArgs, c: &Console) -> Result<u8> {
    let fixture;
    let src: &dyn Source = match &a.root {
        Some(root) => {
            fixture = Fixture { root: root.clone() };
            &fixture
        }
        None => {
            if let Some(i) = &a.iface {
                super::iface_exists(i)?;
            }
            &ThisHost
        }
    };
    let cpus = a.cpus.as_ref().map_or(&[][..], |c| &c.0[..]);
    let report = linerate_doctor::run_for(src, a.iface.as_deref(), cpus);
    if a.json {
        crate::say!(c, "{}", serde_json::to_string_pretty(&report)?);
    } else {
        crate::say_raw!(c, "{}", report.text());
    }
    Ok(report.exit_code())
}
