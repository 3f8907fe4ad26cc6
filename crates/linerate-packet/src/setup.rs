//! blast's flags into its configuration: the rate (`--pps`, `--bitrate`,
//! `--rate` with its unit), the framing, the frame sizes, a trace's
//! replay, the source addresses (given, or the interface's) and the next
//! hop's MAC from the kernel's neighbour table; a traffic profile's sender
//! (`--profile`, its `%` rates taken of the port's speed). The command
//! line's strings come in as [`BlastFlags`]; warnings for people go out
//! through the caller's `warn` (a library does not print).

use crate::{BackendKind, BlastConfig, Gso, ProfileConfig, Rate, Replay, Timing};
use linerate_calc::{Imix, parse_bps, parse_pps};
use linerate_traffic::pacing::CatchUp;
use linerate_traffic::profile::Profile;
use linerate_traffic::template::Framing;
use linerate_traffic::{FlowSpec, SizeSequence};
use std::path::Path;
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why flags could not make a sender's configuration.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A flag refused, in words naming it.
    #[error("{0}")]
    Flag(String),
    /// Something asked of the host or a file failed: what, and why.
    #[error("{what}")]
    Context {
        what: String,
        #[source]
        source: BoxError,
    },
    #[error(transparent)]
    Flow(#[from] linerate_traffic::FlowError),
    #[error(transparent)]
    Imix(#[from] linerate_calc::ImixError),
    #[error(transparent)]
    Trace(#[from] linerate_traffic::pcap::TraceError),
    #[error(transparent)]
    Profile(#[from] linerate_traffic::profile::ProfileError),
}

fn context(what: String) -> impl FnOnce(std::io::Error) -> SetupError {
    move |e| SetupError::Context {
        what,
        source: Box::new(e),
    }
}

/// What blast says of `-l` (iperf3's payload length), which it refuses.
pub const NOT_A_FRAME_SIZE: &str = "blast sizes frames on the wire: give --size (64 to 9216 bytes, \
    FCS included); -l is iperf3's payload length (a UDP payload of L bytes over IPv4 is a frame \
    of L + 46)";

/// `--duration` checked: 0.01 to 86400 seconds.
pub fn duration(s: f64) -> Result<Duration, SetupError> {
    if !(0.01..=86400.0).contains(&s) {
        return Err(SetupError::Flag(
            "--duration must be between 0.01 and 86400 seconds".into(),
        ));
    }
    Ok(Duration::from_secs_f64(s))
}

/// Without --dst-mac, frames go to the next hop's MAC from the kernel's
/// neighbour table (resolved by the kernel if missing), never to broadcast:
/// on a real switch broadcast floods every port. A range whose addresses
/// are all on the link still goes to its first one's MAC: said to `warn`.
pub fn next_hop_mac(
    iface: &str,
    dst_ip: &str,
    warn: &mut dyn FnMut(&str),
) -> Result<String, SetupError> {
    // An interface without a link-layer address (loopback) has no
    // neighbours: its frames carry zeros.
    if linerate_backend::iface::mac(iface).is_ok_and(|m| m == [0; 6]) {
        return Ok("00:00:00:00:00:00".into());
    }
    let first = dst_ip.split(['-', '@']).next().unwrap_or(dst_ip).trim();
    let ip: std::net::IpAddr = first.parse().map_err(|e| SetupError::Context {
        what: format!("'{first}' is not an IP address"),
        source: Box::new(e),
    })?;
    let mac = linerate_backend::neigh::resolve(iface, ip, Duration::from_secs(1)).map_err(
        context(format!(
            "no destination MAC for {ip}: give --dst-mac (ff:ff:ff:ff:ff:ff for broadcast, if that is really meant)"
        )),
    )?;
    if dst_ip.contains('-') && linerate_backend::neigh::next_hop(iface, ip) == ip {
        warn(&format!(
            "blast: every frame goes to {} ({first}'s MAC); give --dst-mac to address the rest of the range",
            linerate_backend::iface::format_mac(mac)
        ));
    }
    Ok(linerate_backend::iface::format_mac(mac))
}

/// A port's own MAC, as text (`what` names it in the error).
pub fn port_mac(backend: BackendKind, iface: &str, what: String) -> Result<String, SetupError> {
    linerate_backend::port::port_mac(backend, &Default::default(), iface)
        .map(linerate_backend::iface::format_mac)
        .map_err(context(what))
}

/// blast's flags as the command line gave them.
#[derive(Debug, Clone)]
pub struct BlastFlags<'a> {
    pub iface: &'a str,
    pub dst_ip: Option<&'a str>,
    pub src_ip: Option<&'a str>,
    pub dst_mac: Option<&'a str>,
    pub src_mac: Option<&'a str>,
    pub src_port: &'a str,
    pub dst_port: &'a str,
    pub size: Option<u16>,
    pub sizes: Option<&'a [u16]>,
    pub imix: Option<&'a str>,
    pub loops: u64,
    pub pcap_timing: &'a str,
    pub duration: f64,
    pub count: Option<u64>,
    pub pps: Option<&'a str>,
    pub bitrate: Option<&'a str>,
    pub rate: Option<&'a str>,
    pub rate_l2: bool,
    pub burst: u32,
    pub catch_up: CatchUp,
    pub burst_tolerance: u32,
    pub end_markers: bool,
    pub vlan: Option<u16>,
    pub tcp_flags: Option<u8>,
    pub dscp: u8,
    pub backend: BackendKind,
    pub gso: &'a str,
    pub cores: &'a [usize],
    pub interval: Option<Duration>,
}

impl BlastFlags<'_> {
    /// The target rate from `--pps`, `--bitrate` or `--rate` (which must
    /// say its unit: a packet rate and a bit rate are never guessed).
    pub fn rate(&self) -> Result<Rate, SetupError> {
        let unit = |e: linerate_calc::UnitError| SetupError::Flag(e.to_string());
        let bits = |s: &str| -> Result<Rate, SetupError> {
            let b = parse_bps(s).map_err(unit)?;
            Ok(if self.rate_l2 {
                Rate::BpsL2(b)
            } else {
                Rate::BpsL1(b)
            })
        };
        if let Some(p) = self.pps {
            return Ok(Rate::Pps(parse_pps(p).map_err(unit)?));
        }
        if let Some(b) = self.bitrate {
            return bits(b);
        }
        let Some(s) = self.rate else {
            return Ok(Rate::Max);
        };
        let lower = s.to_ascii_lowercase();
        if lower.ends_with("pps") {
            return Ok(Rate::Pps(parse_pps(s).map_err(unit)?));
        }
        if lower.ends_with("bps") || lower.ends_with("bit") || lower.ends_with("b/s") {
            return bits(s);
        }
        Err(SetupError::Flag(format!(
            "--rate {s} is ambiguous: write --pps {s} (packets/s), --bitrate {s} (bits/s), or the unit (--rate {s}pps, --rate {s}bps)"
        )))
    }

    fn gso(&self) -> Result<Gso, SetupError> {
        Ok(match self.gso {
            "auto" => Gso::Auto,
            "on" => Gso::On,
            "off" => Gso::Off,
            _ => return Err(SetupError::Flag("--gso takes auto, on or off".into())),
        })
    }

    /// The frames' VLAN tag, DSCP and TCP flags from the flags (checked).
    fn framing(&self) -> Result<Framing, SetupError> {
        if self.dscp > 63 {
            return Err(SetupError::Flag("--dscp must be 0..63".into()));
        }
        if self.vlan.is_some_and(|v| v > 4094) {
            return Err(SetupError::Flag("--vlan must be 0..4094".into()));
        }
        Ok(Framing {
            vlan: self.vlan.map(|v| (v, 0)),
            dscp: self.dscp,
            ttl: 64,
            mtu: None,
            tcp_flags: self.tcp_flags,
            vxlan: None,
            payload: None,
            stack: None,
        })
    }

    /// The source address (of the IP version `v6` says) and MAC: given,
    /// or the interface's.
    fn source_addrs(&self, v6: bool) -> Result<(String, String), SetupError> {
        let src_ip = match self.src_ip {
            Some(s) => s.to_string(),
            None => linerate_backend::iface::addr(self.iface, v6)
                .ok_or_else(|| {
                    SetupError::Flag(format!(
                        "{} has no {} address: give --src-ip",
                        self.iface,
                        if v6 { "IPv6" } else { "IPv4" }
                    ))
                })?
                .to_string(),
        };
        let src_mac = match self.src_mac {
            Some(m) => m.to_string(),
            None => port_mac(
                self.backend,
                self.iface,
                format!("interface {} does not exist", self.iface),
            )?,
        };
        Ok((src_ip, src_mac))
    }

    /// The blast of the flow flags: addresses (the next hop's MAC looked
    /// up after the flags are checked), sizes, framing and rate.
    pub fn flows_config(&self, warn: &mut dyn FnMut(&str)) -> Result<BlastConfig, SetupError> {
        let dst_ip = self
            .dst_ip
            .ok_or_else(|| SetupError::Flag("--dst-ip is required".into()))?;
        let (src_ip, src_mac) = self.source_addrs(dst_ip.contains(':'))?;
        // Flags are checked before the neighbour is looked up.
        let offered = self.rate()?;
        let dst_mac = match self.dst_mac {
            Some(m) => m.to_string(),
            // The kernel's UDP socket addresses its own frames.
            None if self.backend == BackendKind::Udp => "00:00:00:00:00:00".into(),
            None => next_hop_mac(self.iface, dst_ip, warn)?,
        };
        if matches!(offered, Rate::Max) {
            warn(&format!(
                "blast: no --pps or --bitrate: sending {} as fast as {} allows",
                self.count
                    .map_or("until --time ends".to_string(), |n| format!("{n} frames")),
                self.iface
            ));
        }
        let flows = FlowSpec::parse(
            &src_mac,
            &dst_mac,
            &src_ip,
            dst_ip,
            self.src_port,
            self.dst_port,
        )?;
        let framing = self.framing()?;
        // No size given: the smallest frame that carries these headers and
        // the probe (64 bytes, 84 over IPv6).
        let smallest = || {
            linerate_traffic::min_frame(&framing, flows.ipv6, framing.tcp_flags.is_some()) as u16
        };
        let sizes = match (self.size, self.sizes, self.imix) {
            (_, Some(list), _) => SizeSequence::list(list),
            (_, _, Some(spec)) => SizeSequence::from_mix(&Imix::parse(spec)?),
            (s, ..) => SizeSequence::list(&[s.unwrap_or_else(smallest)]),
        };
        if sizes.cycle().is_empty() {
            return Err(SetupError::Flag("--sizes needs at least one size".into()));
        }
        Ok(BlastConfig {
            flows,
            sizes,
            framing,
            cores: self.cores.to_vec(),
            replay: None,
            macs_given: self.src_mac.is_some() || self.dst_mac.is_some(),
            end_markers: self.end_markers,
            ..self.common()?
        })
    }

    /// The blast of `--pcap` `path`: its frames as they are, the flow
    /// flags unused.
    pub fn replay_config(&self, path: &Path) -> Result<BlastConfig, SetupError> {
        let common = self.common()?;
        Ok(BlastConfig {
            replay: Some(self.replay(path)?),
            ..common
        })
    }

    /// What every blast takes from the flags; the flows a trace's
    /// placeholder (a replay's frames are its own).
    fn common(&self) -> Result<BlastConfig, SetupError> {
        Ok(BlastConfig {
            iface: self.iface.to_string(),
            flows: FlowSpec::parse(
                "00:00:00:00:00:00",
                "00:00:00:00:00:00",
                "0.0.0.0",
                "0.0.0.0",
                "0",
                "0",
            )?,
            sizes: SizeSequence::list(&[64]),
            framing: Framing::default(),
            count: self.count,
            duration: duration(self.duration)?,
            rate: self.rate()?,
            burst: self.burst,
            catch_up: self.catch_up,
            burst_tolerance: self.burst_tolerance,
            backend: self.backend,
            wires: Default::default(),
            cores: vec![],
            replay: None,
            macs_given: true,
            gso: self.gso()?,
            interval: self.interval,
            end_markers: false,
        })
    }

    /// `--pcap`'s trace, its rewrites and timing.
    fn replay(&self, path: &Path) -> Result<Replay, SetupError> {
        use linerate_traffic::pcap::{Rewrite, Trace};
        let mac = |m: Option<&str>| -> Result<Option<linerate_wire::MacAddr>, SetupError> {
            m.map(|s| {
                linerate_wire::MacAddr::parse(s)
                    .ok_or_else(|| SetupError::Flag(format!("'{s}' is not a MAC address")))
            })
            .transpose()
        };
        let ip = |m: Option<&str>| -> Result<Option<std::net::IpAddr>, SetupError> {
            m.map(|s| {
                s.parse().map_err(|e| SetupError::Context {
                    what: format!(
                        "'{s}' is not an IP address (a trace takes one address, not a range)"
                    ),
                    source: Box::new(e),
                })
            })
            .transpose()
        };
        let timing = match self.pcap_timing {
            "fast" => Timing::Fast,
            "original" => Timing::Scaled(1.0),
            x => match x.parse::<f64>() {
                Ok(k) if k > 0.0 && k.is_finite() => Timing::Scaled(k),
                _ => {
                    return Err(SetupError::Flag(
                        "--pcap-timing takes original, fast or a speed-up factor > 0".into(),
                    ));
                }
            },
        };
        Ok(Replay {
            trace: Trace::load(path)?,
            rewrite: Rewrite {
                src_mac: mac(self.src_mac)?,
                dst_mac: mac(self.dst_mac)?,
                src_ip: ip(self.src_ip)?,
                dst_ip: ip(self.dst_ip)?,
            },
            loops: self.loops,
            timing,
        })
    }
}

/// The sender's configuration for the profile in `path` on `iface`
/// (duration 3 s, interval reports off, end markers on: the caller sets
/// its own).
pub fn profile_config(
    path: &Path,
    iface: &str,
    backend: BackendKind,
    src_mac: Option<&str>,
    cores: Option<&[usize]>,
) -> Result<ProfileConfig, SetupError> {
    let profile = Profile::load(path)?;
    let rates = profile.rates(linerate_backend::iface::speed_bps(iface).map(|b| b as f64))?;
    let src_mac = match src_mac {
        Some(m) => {
            linerate_wire::MacAddr::parse(m)
                .ok_or_else(|| SetupError::Flag(format!("'{m}' is not a MAC address")))?
                .0
        }
        None => linerate_backend::port::port_mac(backend, &Default::default(), iface)
            .map_err(context(format!("interface {iface} does not exist")))?,
    };
    let core = match cores {
        None | Some([]) => None,
        Some([c]) => Some(*c),
        Some(_) => {
            return Err(SetupError::Flag(
                "--profile sends every stream from one thread (their departures merged in time order): give --cores one CPU".into(),
            ));
        }
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

/// A profile's streams' names by probe flow id.
pub fn stream_names(p: &Profile) -> Vec<(String, u16)> {
    p.streams.iter().map(|s| (s.name.clone(), s.id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(rate: Option<&'static str>) -> BlastFlags<'static> {
        BlastFlags {
            iface: "lo",
            dst_ip: Some("198.18.0.2"),
            src_ip: Some("198.18.0.1"),
            dst_mac: Some("02:00:00:00:00:02"),
            src_mac: Some("02:00:00:00:00:01"),
            src_port: "9",
            dst_port: "9",
            size: None,
            sizes: None,
            imix: None,
            loops: 1,
            pcap_timing: "fast",
            duration: 3.0,
            count: None,
            pps: None,
            bitrate: None,
            rate,
            rate_l2: false,
            burst: 1,
            catch_up: CatchUp::Burst,
            burst_tolerance: 0,
            end_markers: true,
            vlan: None,
            tcp_flags: None,
            dscp: 0,
            backend: BackendKind::Auto,
            gso: "auto",
            cores: &[],
            interval: None,
        }
    }

    #[test]
    fn a_rate_says_its_unit_or_is_refused() {
        assert!(matches!(
            flags(Some("1Mpps")).rate(),
            Ok(Rate::Pps(1_000_000))
        ));
        assert!(matches!(
            flags(Some("2Gbps")).rate(),
            Ok(Rate::BpsL1(2_000_000_000))
        ));
        assert!(matches!(flags(None).rate(), Ok(Rate::Max)));
        let e = flags(Some("10M")).rate().unwrap_err().to_string();
        assert!(e.starts_with("--rate 10M is ambiguous"), "{e}");
        let l2 = BlastFlags {
            rate_l2: true,
            bitrate: Some("100M"),
            ..flags(None)
        };
        assert!(matches!(l2.rate(), Ok(Rate::BpsL2(100_000_000))));
    }

    #[test]
    fn flags_out_of_range_are_refused_by_name() {
        let f = BlastFlags {
            vlan: Some(4095),
            ..flags(None)
        };
        let e = f.flows_config(&mut |_| {}).unwrap_err().to_string();
        assert_eq!(e, "--vlan must be 0..4094");
        let f = BlastFlags {
            gso: "maybe",
            ..flags(None)
        };
        let e = f.flows_config(&mut |_| {}).unwrap_err().to_string();
        assert_eq!(e, "--gso takes auto, on or off");
        assert!(duration(0.0).is_err() && duration(86400.5).is_err());
        assert_eq!(duration(0.5).unwrap(), Duration::from_millis(500));
    }

    #[test]
    fn the_flows_given_make_the_config_and_a_max_rate_is_said() {
        let mut said = Vec::new();
        let cfg = flags(None)
            .flows_config(&mut |w| said.push(w.to_string()))
            .unwrap();
        assert_eq!(cfg.flows.count(), 1);
        assert_eq!(cfg.sizes.cycle(), [64], "the smallest frame for IPv4");
        assert!(cfg.macs_given && cfg.end_markers && cfg.replay.is_none());
        assert_eq!(
            said,
            ["blast: no --pps or --bitrate: sending until --time ends as fast as lo allows"]
        );
    }
}
