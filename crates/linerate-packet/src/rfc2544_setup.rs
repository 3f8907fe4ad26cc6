//! rfc2544's flags into its campaign (`setup`): the tests checked, the
//! trial runner (the flows through the device, the device's MACs given or
//! learnt from the neighbour table, the reverse flows of `--bidir`; or a
//! traffic profile's streams, scaled), `--max-rate` with its unit or the
//! port's speed, the searches' settings, `--resume`'s earlier run read
//! and checked, and the run's `Start` settings as a typed `StartConfig`.

use crate::BackendKind;
use crate::StreamSettings;
use crate::profile_trials::ProfileRunner;
use crate::rfc2544::{DeviceRunner, FrameSize, MaxRate, Pace, Settings, TrialRunner};
use crate::rfc2544_campaign::{Campaign, TESTS};
use crate::rfc2544_resume::{ResumeError, Resumed};
use crate::setup::{SetupError, next_hop_mac, port_mac, profile_config};
use linerate_traffic::FlowSpec;
use serde::Serialize;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
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
    config: &mut StartConfig,
) -> Result<Option<Resumed>, ResumeFileError> {
    let Some(path) = path else {
        return Ok(None);
    };
    if repeated {
        return Err(ResumeFileError::Repeated);
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| ResumeFileError::Read(path.display().to_string(), e))?;
    let r = Resumed::parse(&text, &serde_json::to_value(&*config).unwrap_or_default())?;
    config.resumed_from = Some(path.to_path_buf());
    Ok(Some(r))
}

/// Why rfc2544 cannot start.
#[derive(Debug, thiserror::Error)]
pub enum Rfc2544SetupError {
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error(transparent)]
    Resume(#[from] ResumeFileError),
}

/// rfc2544's command line as plain values.
#[derive(Debug)]
pub struct Flags<'a> {
    pub ports: Ports<'a>,
    /// The flows' flags (with `--profile`, only `src_mac` is read).
    pub device: DeviceFlags<'a>,
    pub profile: Option<&'a Path>,
    pub sizes: &'a [FrameSize],
    pub campaign: Campaign,
    /// Seconds per trial, as given.
    pub trial_time: f64,
    pub max_rate: Option<&'a str>,
    pub resolution: f64,
    pub offered_min: f64,
    pub max_trials: u16,
    pub pace: Pace,
    pub resume: Option<&'a Path>,
    /// `--repeat`/`--ci-target` asked.
    pub repeated: bool,
}

/// A campaign ready to run: what it sends, the sizes it searches, its
/// tests and settings, what it resumes, and what its `Start` says.
pub struct Setup {
    pub runner: Box<dyn TrialRunner>,
    pub sizes: Vec<FrameSize>,
    pub campaign: Campaign,
    pub settings: Settings,
    pub resume: Option<Resumed>,
    pub config: StartConfig,
}

impl std::fmt::Debug for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// rfc2544's settings as its `Start` (and `-J`'s `config`) states them,
/// in this order; `--resume` compares the `SETTINGS` keys of it.
#[derive(Debug, Clone, Serialize)]
pub struct StartConfig {
    #[serde(flatten)]
    pub sent: Sent,
    pub tx_iface: String,
    pub rx_iface: String,
    pub sizes: Vec<FrameSize>,
    pub tests: Vec<String>,
    pub loss_ratio: Vec<f64>,
    pub trial_time_s: f64,
    pub max_rate: Option<String>,
    pub resolution: f64,
    pub backend: BackendKind,
    pub bidir: bool,
    pub catch_up: &'static str,
    pub burst_tolerance: Option<u32>,
    pub spoiled_max: u32,
    pub offered_min: f64,
    pub max_trials: u16,
    pub drain_s: f64,
    pub warmup_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_from: Option<PathBuf>,
}

/// What the trials send, as `Start` says it: the device's MAC and the
/// flows' addresses, or the profile.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Sent {
    Device {
        dst_mac: String,
        src_ip: String,
        dst_ip: String,
    },
    Profile {
        profile: ProfileStart,
    },
}

/// `--profile`'s streams as `Start` says them.
#[derive(Debug, Clone, Serialize)]
pub struct ProfileStart {
    pub file: PathBuf,
    pub streams: Vec<StreamSettings>,
    pub nominal_fps: f64,
    pub mean_frame_bytes: f64,
    pub scale: &'static str,
}

/// The campaign the flags ask for: the tests known and the ports two,
/// then the runner, the highest rate (`--max-rate`, else the tx port's
/// speed), the settings, the resumed run; `warn` hears what the flows'
/// set-up warns of.
pub fn setup(f: Flags, warn: &mut dyn FnMut(&str)) -> Result<Setup, Rfc2544SetupError> {
    let flag = |m: String| Rfc2544SetupError::Setup(SetupError::Flag(m));
    if let Some(t) = (f.campaign.tests.iter()).find(|t| !TESTS.contains(&t.as_str())) {
        return Err(flag(format!(
            "--tests: '{t}' is not one of throughput, latency, loss, back-to-back"
        )));
    }
    if f.ports.tx_iface == f.ports.rx_iface {
        return Err(flag(
            "--tx-iface and --rx-iface must be two ports with the device between them".into(),
        ));
    }
    let (runner, sizes, sent) = match f.profile {
        Some(path) => profile_runner(&f.ports, path, f.device.src_mac)?,
        None => device_runner(&f.ports, &f.device, f.sizes, warn)?,
    };
    let max_rate = match (
        f.max_rate,
        linerate_backend::iface::speed_bps(f.ports.tx_iface),
    ) {
        (Some(m), _) => max_rate(m).map_err(flag)?,
        (None, Some(bps)) => MaxRate::L1Bps(bps as f64),
        (None, None) => {
            return Err(flag(format!(
                "{} does not report its speed (a veth?): give --max-rate",
                f.ports.tx_iface
            )));
        }
    };
    let settings = Settings {
        max_rate,
        trial_time: Duration::from_secs_f64(f.trial_time.max(0.1)),
        resolution: f.resolution.max(1e-4),
        offered_min: f.offered_min,
        max_trials: usize::from(f.max_trials),
        pace: f.pace,
    };
    let mut config = StartConfig {
        sent,
        tx_iface: f.ports.tx_iface.to_string(),
        rx_iface: f.ports.rx_iface.to_string(),
        sizes: sizes.clone(),
        tests: f.campaign.tests.clone(),
        loss_ratio: f.campaign.loss_ratio.clone(),
        trial_time_s: f.trial_time,
        max_rate: f.max_rate.map(str::to_string),
        resolution: f.resolution,
        backend: f.ports.backend,
        bidir: f.device.bidir,
        catch_up: f.pace.catch_up.name(),
        burst_tolerance: f.pace.burst_tolerance,
        spoiled_max: f.pace.spoiled_max,
        offered_min: f.offered_min,
        max_trials: f.max_trials,
        drain_s: f.ports.drain,
        warmup_s: f.ports.warmup,
        resumed_from: None,
    };
    let resume = resumed(f.resume, f.repeated, &mut config)?;
    Ok(Setup {
        runner,
        sizes,
        campaign: f.campaign,
        settings,
        resume,
        config,
    })
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

/// A trial runner, the frame sizes it searches and what `Start` says it
/// sends.
type Runner = (Box<dyn TrialRunner>, Vec<FrameSize>, Sent);

/// What the trials send, and the frame sizes searched: the flows given.
fn device_runner(
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
    let sent = Sent::Device {
        dst_mac,
        src_ip: f.src_ip.to_string(),
        dst_ip: f.dst_ip.to_string(),
    };
    Ok((Box::new(runner), sizes.to_vec(), sent))
}

/// What the trials send with `--profile`: the profile's streams, scaled;
/// the one "frame size" searched is the profile's (its mean frame).
fn profile_runner(p: &Ports, path: &Path, src_mac: Option<&str>) -> Result<Runner, SetupError> {
    let mut sender = profile_config(path, p.tx_iface, p.backend, src_mac, None)?;
    sender.profile = sender.profile.for_trials();
    let (nominal_fps, mean_bytes) = sender.profile.nominal(&sender.rates);
    // The tables' "size": the profile's file name without its extension.
    let name = path.file_stem().map_or_else(
        || "profile".to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    let sent = Sent::Profile {
        profile: ProfileStart {
            file: path.to_path_buf(),
            streams: sender.stream_settings(),
            nominal_fps,
            mean_frame_bytes: mean_bytes,
            scale: "each trial's rate over nominal_fps: every stream's rate times it",
        },
    };
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
    Ok((Box::new(runner), vec![size], sent))
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

    fn config(sent: Sent) -> StartConfig {
        StartConfig {
            sent,
            tx_iface: "ga".into(),
            rx_iface: "gb".into(),
            sizes: vec![FrameSize::Fixed(64)],
            tests: vec!["throughput".into()],
            loss_ratio: vec![0.0],
            trial_time_s: 10.0,
            max_rate: None,
            resolution: 0.005,
            backend: BackendKind::AfPacket,
            bidir: false,
            catch_up: "skip",
            burst_tolerance: None,
            spoiled_max: 5,
            offered_min: 0.99,
            max_trials: 30,
            drain_s: 0.5,
            warmup_s: 0.0,
            resumed_from: None,
        }
    }

    fn device() -> Sent {
        Sent::Device {
            dst_mac: "02:00:00:00:00:01".into(),
            src_ip: "198.18.0.1".into(),
            dst_ip: "198.19.0.1".into(),
        }
    }

    #[test]
    fn resume_is_refused_with_a_repetition_and_a_missing_file_named() {
        let mut config = config(device());
        assert!(resumed(None, true, &mut config).unwrap().is_none());
        let e = resumed(Some(Path::new("/nonexistent/r.json")), true, &mut config);
        assert!(matches!(e, Err(ResumeFileError::Repeated)));
        let e = resumed(Some(Path::new("/nonexistent/r.json")), false, &mut config)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--resume /nonexistent/r.json");
        assert_eq!(config.resumed_from, None, "untouched");
    }

    /// `Start`'s config as the binary merged it by key before it was
    /// typed: what is sent first, then the settings in this order, then
    /// `resumed_from`.
    #[test]
    fn the_start_config_keeps_its_keys_and_order() {
        let mut c = config(device());
        c.resumed_from = Some("r.json".into());
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"dst_mac":"02:00:00:00:00:01","src_ip":"198.18.0.1","dst_ip":"198.19.0.1","tx_iface":"ga","rx_iface":"gb","sizes":[64],"tests":["throughput"],"loss_ratio":[0.0],"trial_time_s":10.0,"max_rate":null,"resolution":0.005,"backend":"af_packet","bidir":false,"catch_up":"skip","burst_tolerance":null,"spoiled_max":5,"offered_min":0.99,"max_trials":30,"drain_s":0.5,"warmup_s":0.0,"resumed_from":"r.json"}"#
        );
        let c = config(Sent::Profile {
            profile: ProfileStart {
                file: "p.toml".into(),
                streams: Vec::new(),
                nominal_fps: 1000.0,
                mean_frame_bytes: 64.0,
                scale: "s",
            },
        });
        let text = serde_json::to_string(&c).unwrap();
        assert!(
            text.starts_with(
                r#"{"profile":{"file":"p.toml","streams":[],"nominal_fps":1000.0,"mean_frame_bytes":64.0,"scale":"s"},"tx_iface":"ga","#
            ),
            "{text}"
        );
        assert!(text.ends_with(r#""warmup_s":0.0}"#), "{text}");
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
