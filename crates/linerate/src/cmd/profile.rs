//! `--profile FILE` of blast, sink and rfc2544: the profile read and
//! checked (`linerate_traffic::profile`), its `%` rates taken of the
//! port's speed, the sender's configuration, and the streams' names by
//! probe flow id for the receiver's per-stream report.

use anyhow::{Context, Result, bail};
use linerate_packet::{BackendKind, ProfileConfig};
use linerate_traffic::profile::Profile;
use std::path::Path;
use std::time::Duration;

/// The sender's configuration for the profile in `path` on `iface`
/// (duration 3 s, interval reports off, end markers on: the caller sets
/// its own).
pub fn blast_config(
    path: &Path,
    iface: &str,
    backend: BackendKind,
    src_mac: Option<&str>,
    cores: Option<&[usize]>,
) -> Result<ProfileConfig> {
    let profile = Profile::load(path)?;
    let rates = profile.rates(linerate_backend::iface::speed_bps(iface).map(|b| b as f64))?;
    let src_mac = match src_mac {
        Some(m) => {
            linerate_wire::MacAddr::parse(m)
                .with_context(|| format!("'{m}' is not a MAC address"))?
                .0
        }
        None => linerate_backend::port::port_mac(backend, &Default::default(), iface)
            .with_context(|| format!("interface {iface} does not exist"))?,
    };
    let core = match cores {
        None | Some([]) => None,
        Some([c]) => Some(*c),
        Some(_) => bail!(
            "--profile sends every stream from one thread (their departures merged in time order): give --cores one CPU"
        ),
    };
    Ok(ProfileConfig {
        iface: iface.to_string(),
        profile,
        rates,
        scale: 1.0,
        duration: Duration::from_secs(3),
        backend,
        wires: Default::default(),
        src_mac,
        core,
        interval: None,
        end_markers: true,
    })
}

/// The streams' names by probe flow id.
pub fn names(p: &Profile) -> Vec<(String, u16)> {
    p.streams.iter().map(|s| (s.name.clone(), s.id)).collect()
}
