//! `linerate doctor`: what on this host limits throughput, and the fix.

use anyhow::Result;
use clap::Args;
use linerate_doctor::{Fixture, Live, Source};

/// Inspect this host (and one interface) for what limits network throughput.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Interface to inspect (queues, RSS, IRQs, offloads, rings, MTU, XDP).
    #[arg(long, short = 'i')]
    iface: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Read a fixture tree (sysfs/procfs snapshot) instead of this host.
    #[arg(long, value_name = "DIR", hide = true)]
    root: Option<std::path::PathBuf>,
}

/// Exit code: 0 nothing serious, 1 findings that will limit results.
pub fn run(a: &DoctorArgs) -> Result<u8> {
    let fixture;
    let src: &dyn Source = match &a.root {
        Some(root) => {
            fixture = Fixture { root: root.clone() };
            &fixture
        }
        None => &Live,
    };
    let report = linerate_doctor::run(src, a.iface.as_deref());
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.text());
    }
    Ok(report.exit_code())
}
