//! rfc2544's flags into its trial runner: the flows through the device
//! (the device's MACs given or learnt from the neighbour table, the
//! reverse flows of `--bidir`) or a traffic profile's streams, scaled;
//! `--max-rate` with its unit; `--resume`'s earlier run read and checked.

use crate::BackendKind;
use crate::profile_trials::ProfileRunner;
use crate::rfc2544::{DeviceRunner, FrameSize, MaxRate, TrialRunner};
use crate::rfc2544_resume::{ResumeError, Resumed};
use crate::setup::{SetupError, next_hop_mac, port_mac, profile_config};
use linerate_traffic::FlowSpec;
use serde_json::Value;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Why `--resume` could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum ResumeFileError {
    #[error(
        "--resume continues one search per frame size and loss ratio: not with --repeat or --ci-target"
    )]
    Repeated,
    #[error("--resume {0}")]
    Read(String, #[source] std::io::Error),
    #[error(transparent)]
    Resume(#[from] ResumeError),
}

/// `--max-rate`: frames/s (100kpps) or L1 bit/s (1Gbps), unit written as
/// every rate that can be either kind (a bare 100M is refused).
pub fn max_rate(spec: &str) -> Result<MaxRate, String> {
    use linerate_calc::UnitRate;
    match linerate_calc::parse_rate_with_unit("--max-rate", spec)? {
        UnitRate::PerSecond(f) => Ok(MaxRate::Fps(f as f64)),
        UnitRate::Bits(b) => Ok(MaxRate::L1Bps(b as f64)),
    }
}

/// `--resume FILE`: the file's searches, its settings checked against the
/// command's `config` (which then says where it resumed from).
pub fn resumed(
    path: Option<&Path>,
    repeated: bool,
    config: &mut Value,
) -> Result<Option<Resumed>, ResumeFileError> {
    let Some(path) = path else {
        return Ok(None);
    };
    if repeated {
        return Err(ResumeFileError::Repeated);
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| ResumeFileError::Read(path.display().to_string(), e))?;
    let r = Resumed::parse(&text, config)?;
    config["resumed_from"] = serde_json::json!(path);
    Ok(Some(r))
}

/// The flags that say what the trials send through the device.
#[derive(Debug, Clone)]
pub struct Ports<'a> {
    pub tx_iface: &'a str,
    pub rx_iface: &'a str,
    pub backend: BackendKind,
    /// Seconds after each trial's last frame, and of warm-up before it.
    pub drain: f64,
    pub warmup: f64,
    pub stop: Arc<AtomicBool>,
}

/// The flows' flags (no `--profile`).
#[derive(Debug, Clone, Copy)]
pub struct DeviceFlags<'a> {
    pub src_ip: &'a str,
    pub dst_ip: &'a str,
    pub src_port: &'a str,
    pub dst_port: &'a str,
    pub src_mac: Option<&'a str>,
    pub dst_mac: Option<&'a str>,
    pub dut_ip: Option<IpAddr>,
    pub bidir: bool,
    pub reverse_dst_mac: Option<&'a str>,
}

/// A trial runner, the frame sizes it searches and the settings it adds
/// to the run's `Start`.
pub type Runner = (Box<dyn TrialRunner>, Vec<FrameSize>, Value);

/// What the trials send, and the frame sizes searched: the flows given.
pub fn device_runner(
    p: &Ports,
    f: &DeviceFlags,
    sizes: &[FrameSize],
    warn: &mut dyn FnMut(&str),
) -> Result<Runner, SetupError> {
    let (src_mac, dst_mac) = forward_macs(p, f, warn)?;
    let flows = FlowSpec::parse(
        &src_mac, &dst_mac, f.src_ip, f.dst_ip, f.src_port, f.dst_port,
    )?;
    let runner = DeviceRunner {
        tx_iface: p.tx_iface.to_string(),
        rx_iface: p.rx_iface.to_string(),
        flows,
        reverse: reverse_flows(p, f, warn)?,
        backend: p.backend,
        wires: Default::default(),
        drain: Duration::from_secs_f64(p.drain.max(0.0)),
        clocks_shared: true,
        stop: p.stop.clone(),
        warmup: Duration::from_secs_f64(p.warmup.max(0.0)),
    };
    let config = serde_json::json!({"dst_mac": dst_mac, "src_ip": f.src_ip, "dst_ip": f.dst_ip});
    Ok((Box::new(runner), sizes.to_vec(), config))
}

/// What the trials send with `--profile`: the profile's streams, scaled;
/// the one "frame size" searched is the profile's (its mean frame).
pub fn profile_runner(p: &Ports, path: &Path, src_mac: Option<&str>) -> Result<Runner, SetupError> {
    let mut sender = profile_config(path, p.tx_iface, p.backend, src_mac, None)?;
    sender.profile = sender.profile.for_trials();
    let (nominal_fps, mean_bytes) = sender.profile.nominal(&sender.rates);
    // The tables' "size": the profile's file name without its extension.
    let name = path.file_stem().map_or_else(
        || "profile".to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    let config = serde_json::json!({
        "profile": {
            "file": path,
            "streams": sender.stream_settings(),
            "nominal_fps": nominal_fps,
            "mean_frame_bytes": mean_bytes,
            "scale": "each trial's rate over nominal_fps: every stream's rate times it",
        },
    });
    let runner = ProfileRunner {
        sender,
        nominal_fps,
        rx_iface: p.rx_iface.to_string(),
        rx_backend: p.backend,
        drain: Duration::from_secs_f64(p.drain.max(0.0)),
        clocks_shared: true,
        stop: p.stop.clone(),
        warmup: Duration::from_secs_f64(p.warmup.max(0.0)),
    };
    let size = FrameSize::Profile { name, mean_bytes };
    Ok((Box::new(runner), vec![size], config))
}

/// The tx side's source and destination MACs (given, or learnt).
fn forward_macs(
    p: &Ports,
    f: &DeviceFlags,
    warn: &mut dyn FnMut(&str),
) -> Result<(String, String), SetupError> {
    let dst_mac = match (f.dst_mac, f.dut_ip) {
        (Some(m), _) => m.to_string(),
        (None, Some(ip)) => {
            linerate_backend::neigh::resolve(p.tx_iface, ip, Duration::from_secs(1))
                .map(linerate_backend::iface::format_mac)
                .map_err(|e| SetupError::Context {
                    what: format!("no MAC for --dut-ip {ip} on {}", p.tx_iface),
                    source: Box::new(e),
                })?
        }
        (None, None) => next_hop_mac(p.tx_iface, f.dst_ip, warn)?,
    };
    let src_mac = match f.src_mac {
        Some(m) => m.to_string(),
        None => port_mac(p.backend, p.tx_iface, format!("--tx-iface {}", p.tx_iface))?,
    };
    Ok((src_mac, dst_mac))
}

/// With --bidir, the flows the rx port sends back (addresses and ports
/// swapped).
fn reverse_flows(
    p: &Ports,
    f: &DeviceFlags,
    warn: &mut dyn FnMut(&str),
) -> Result<Option<FlowSpec>, SetupError> {
    if !f.bidir {
        if f.reverse_dst_mac.is_some() {
            return Err(SetupError::Flag(
                "--reverse-dst-mac goes with --bidir".into(),
            ));
        }
        return Ok(None);
    }
    let dst_mac = match f.reverse_dst_mac {
        Some(m) => m.to_string(),
        None => next_hop_mac(p.rx_iface, f.src_ip, warn).map_err(|e| SetupError::Context {
            what: "--bidir: the device's MAC on the rx side (--reverse-dst-mac)".into(),
            source: Box::new(e),
        })?,
    };
    let src_mac = port_mac(p.backend, p.rx_iface, format!("--rx-iface {}", p.rx_iface))?;
    Ok(Some(FlowSpec::parse(
        &src_mac, &dst_mac, f.dst_ip, f.src_ip, f.dst_port, f.src_port,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_rate_says_its_unit() {
        assert!(matches!(max_rate("100kpps"), Ok(MaxRate::Fps(f)) if f == 100_000.0));
        assert!(matches!(max_rate("1Gbps"), Ok(MaxRate::L1Bps(b)) if b == 1e9));
        assert!(max_rate("100M").is_err(), "a bare number is refused");
    }

    #[test]
    fn resume_is_refused_with_a_repetition_and_a_missing_file_named() {
        let mut config = serde_json::json!({});
        assert!(resumed(None, true, &mut config).unwrap().is_none());
        let e = resumed(Some(Path::new("/nonexistent/r.json")), true, &mut config);
        assert!(matches!(e, Err(ResumeFileError::Repeated)));
        let e = resumed(Some(Path::new("/nonexistent/r.json")), false, &mut config)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--resume /nonexistent/r.json");
        assert_eq!(config, serde_json::json!({}), "untouched");
    }

    #[test]
    fn reverse_mac_goes_with_bidir_only() {
        let p = Ports {
            tx_iface: "lo",
            rx_iface: "lo",
            backend: BackendKind::Auto,
            drain: 0.0,
            warmup: 0.0,
            stop: Arc::default(),
        };
        let f = DeviceFlags {
            src_ip: "198.18.0.1",
            dst_ip: "198.18.0.2",
            src_port: "1024",
            dst_port: "9",
            src_mac: None,
            dst_mac: None,
            dut_ip: None,
            bidir: false,
            reverse_dst_mac: Some("02:00:00:00:00:01"),
        };
        let e = reverse_flows(&p, &f, &mut |_| {}).unwrap_err().to_string();
        assert_eq!(e, "--reverse-dst-mac goes with --bidir");
    }
}
