//! `--eal` (the DPDK EAL's arguments of `--backend dpdk`, in blast, sink,
//! fwd and rfc2544) and the port check that takes a DPDK port where the
//! other backends take a kernel interface.

use anyhow::{Result, bail};
use clap::Args;
use linerate_backend::port::{BackendKind, port_mtu};

/// The EAL's arguments.
#[derive(Debug, Args)]
pub struct EalArgs {
    /// With --backend dpdk: the DPDK EAL's arguments as one string of words
    /// ("--no-huge -m 256 --no-pci --vdev net_af_packet0,iface=eth1"); the
    /// port (--iface) is then a DPDK port's name or id. A file prefix of the
    /// process's own is added unless one is given.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    eal: Option<String>,
}

impl EalArgs {
    fn words(&self) -> Vec<String> {
        self.eal
            .as_deref()
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    }
}

/// Checks that `name` is a port of `backend`: with `dpdk`, a port of the
/// EAL (set up with `--eal` first); else a kernel interface.
pub fn port_exists(backend: BackendKind, eal: &EalArgs, name: &str) -> Result<()> {
    if backend != BackendKind::Dpdk {
        if eal.eal.is_some() {
            bail!("--eal goes with --backend dpdk");
        }
        return super::iface_exists(name);
    }
    if eal.eal.is_some() {
        linerate_backend::dpdk::set_eal_args(&eal.words())?;
    }
    match port_mtu(BackendKind::Dpdk, &Default::default(), name) {
        Ok(_) => Ok(()),
        Err(e) => bail!("{e}"),
    }
}
