//! One module per subcommand: each turns its parsed arguments into work and output.

pub mod agent;
pub mod blast;
pub mod calc;
pub mod doctor;
pub mod dpdk;
pub mod fwd;
pub mod iperf;
pub mod lab;
pub mod manual;
pub mod out;
pub mod plot;
pub mod pscheduler;
pub mod report;
pub mod rfc2544;
pub mod rr;
pub mod selftest;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// `--backend` (and `--rx-backend`) of every command: the names
/// `linerate_backend::port::BackendKind` lists, shown by help and the
/// completions; an unknown name refused with the list.
#[derive(Debug, Clone, Copy)]
pub struct BackendArg;

impl clap::builder::TypedValueParser for BackendArg {
    type Value = linerate_backend::port::BackendKind;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        value
            .to_string_lossy()
            .parse()
            .map_err(|e: linerate_backend::port::UnknownBackend| {
                clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{e}\n"))
                    .with_cmd(cmd)
            })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        use linerate_backend::port::BackendKind;
        Some(Box::new(BackendKind::ALL.iter().map(|k| {
            clap::builder::PossibleValue::new(k.name()).aliases(k.aliases().iter().copied())
        })))
    }
}

/// A list of CPU numbers (`0,1`, `0-3,8`), as every command takes them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuList(pub Vec<usize>);

/// A CPU list checked for its syntax only (the doctor's `--cpus`: which
/// of them are online is what it reports, on this host or a fixture's).
pub fn cpu_list_syntax(s: &str) -> Result<CpuList, String> {
    linerate_backend::cpu::parse_list(s).map(CpuList)
}

/// `--cores`, `--stream-cpus`, `--cpus`, checked against this process's
/// CPUs (`linerate_backend::cpu::checked_list`).
pub fn cpu_list(s: &str) -> Result<CpuList, String> {
    linerate_backend::cpu::checked_list(s).map(CpuList)
}

pub use linerate_traffic::dscp::parse as dscp;

/// The run's cancellation handle, set by SIGINT or SIGTERM: the run ends
/// early and reports what it measured.
pub(crate) fn stop_flag() -> anyhow::Result<linerate_run::Cancel> {
    let c = linerate_run::Cancel::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, c.shared())?;
    }
    Ok(c)
}

/// A flag set by any of `signals` (`signal_hook::consts`).
pub(crate) fn flag_on(signals: &[i32]) -> anyhow::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for &sig in signals {
        signal_hook::flag::register(sig, flag.clone())
            .map_err(|e| anyhow::Error::new(e).context("installing signal handlers"))?;
    }
    Ok(flag)
}

pub use linerate_packet::RxFilter;

/// `--iface NAME` checked before anything else is asked of it.
pub fn iface_exists(name: &str) -> anyhow::Result<()> {
    Ok(linerate_backend::iface::exists(name)?)
}
