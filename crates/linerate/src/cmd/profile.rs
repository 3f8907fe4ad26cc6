//! `--profile FILE` of blast, sink and rfc2544: the profile read and
//! checked (`linerate_traffic::profile`), its `%` rates taken of the
//! port's speed, the sender's configuration, and the streams' names by
//! probe flow id for the receiver's per-stream report.

use anyhow::{Context, Result, bail};
use linerate_packet::{BackendKind, ProfileConfig};
use linerate_traffic::profile::{Pattern, Profile, Rate};
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
    let rates = profile.rates(super::rfc2544::port_speed_bps(iface))?;
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

/// Each stream as the run's settings give it: its id, rate (resolved)
/// and pattern.
pub fn streams_json(cfg: &ProfileConfig) -> serde_json::Value {
    let rate = |r: &Rate| match *r {
        Rate::Pps(p) => serde_json::json!({"pps": p * cfg.scale}),
        Rate::Bps { bps, extra_bytes } => serde_json::json!({
            "bps": bps * cfg.scale,
            "counts": if extra_bytes == 20 { "L1 (on the wire)" } else { "L2 (frames)" },
        }),
    };
    let pattern = |p: &Pattern| match *p {
        Pattern::Fixed => "fixed".to_string(),
        Pattern::Poisson => "poisson".to_string(),
        Pattern::Burst { frames } => format!("bursts of {frames}"),
        Pattern::OnOff { on, off } => format!("on {on:?}, off {off:?}"),
    };
    (cfg.profile.streams.iter().zip(&cfg.rates))
        .map(|(s, r)| {
            serde_json::json!({
                "name": s.name,
                "id": s.id,
                "rate": rate(r),
                "pattern": pattern(&s.pattern),
                "start_delay_s": s.start_delay.as_secs_f64(),
                "count": s.count,
                "duration_s": s.duration.map(|d| d.as_secs_f64()),
                "seed": s.seed,
            })
        })
        .collect()
}
