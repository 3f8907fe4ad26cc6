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

/// Workers one CPU list may ask for (a CPU may be named more than once).
pub const CPU_LIST_MAX: usize = 256;

/// Parses `--cores`, `--stream-cpus`, `--cpus`, and checks them against
/// this process's CPUs before anything is opened: every CPU one it may
/// run on, at most [`CPU_LIST_MAX`] entries.
pub fn cpu_list(s: &str) -> Result<CpuList, String> {
    let list = linerate_backend::cpu::parse_list(s)?;
    let bad = linerate_backend::cpu::not_allowed(&list);
    if !bad.is_empty() {
        let have = linerate_backend::cpu::allowed();
        return Err(format!(
            "CPU(s) {} are not online or not allowed for this process (it may run on {})",
            linerate_backend::cpu::format_list(&bad),
            linerate_backend::cpu::format_list(&have)
        ));
    }
    if list.len() > CPU_LIST_MAX {
        return Err(format!(
            "{} CPUs: at most {CPU_LIST_MAX} (one worker each)",
            list.len()
        ));
    }
    Ok(CpuList(list))
}

/// A DSCP: a name (`ef`, `af41`, `cs5`, `va`, `le`) or a number 0..63
/// (decimal or 0x hex), the same in every command.
pub fn dscp(s: &str) -> Result<u8, String> {
    let named = match s.to_ascii_lowercase().as_str() {
        "ef" => Some(46),
        "va" => Some(44),
        "le" => Some(1),
        n if n.starts_with("cs") => n[2..].parse::<u8>().ok().filter(|c| *c <= 7).map(|c| c * 8),
        n if n.starts_with("af") && n.len() == 4 => {
            let (c, d) = (
                n.as_bytes()[2].wrapping_sub(b'0'),
                n.as_bytes()[3].wrapping_sub(b'0'),
            );
            ((1..=4).contains(&c) && (1..=3).contains(&d)).then(|| c * 8 + d * 2)
        }
        _ => None,
    };
    let number = || match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u8::from_str_radix(h, 16).ok(),
        None => s.parse::<u8>().ok(),
    };
    named
        .or_else(number)
        .filter(|v| *v <= 63)
        .ok_or_else(|| format!("bad DSCP value '{s}' (0..63, or a name such as ef, af41, cs5)"))
}

/// The run's cancellation handle, set by SIGINT or SIGTERM: the run ends
/// early and reports what it measured.
pub(crate) fn stop_flag() -> anyhow::Result<linerate_run::Cancel> {
    let c = linerate_run::Cancel::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, c.shared())?;
    }
    Ok(c)
}

/// `--udp-ports`: one port or LO-HI.
pub fn port_range(s: &str) -> Result<(u16, u16), String> {
    let bad = || format!("'{s}' is not a port or a range of ports (9, 1000-1999)");
    let (lo, hi) = s.split_once('-').unwrap_or((s, s));
    let lo: u16 = lo.trim().parse().map_err(|_| bad())?;
    let hi: u16 = hi.trim().parse().map_err(|_| bad())?;
    if lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// What an AF_XDP receiver takes from the kernel: `--take-queue` every
/// frame, `--udp-ports` UDP to those ports, by default only linerate's
/// probe frames (a UDP service on the interface keeps its datagrams).
pub fn rx_filter(take_queue: bool, udp_ports: Option<(u16, u16)>) -> linerate_packet::RxFilter {
    use linerate_packet::RxFilter;
    match (take_queue, udp_ports) {
        (true, _) => RxFilter::All,
        (false, Some(p)) => RxFilter::Udp(Some(p)),
        (false, None) => RxFilter::Probes,
    }
}

/// `--iface NAME` checked before anything else is asked of it, so a
/// mistyped name is said as such (not as a missing address or MAC).
pub fn iface_exists(name: &str) -> anyhow::Result<()> {
    linerate_backend::iface::index(name)
        .map(|_| ())
        .map_err(|_| anyhow::anyhow!("no interface named {name} (`ip link` lists them)"))
}
