//! A throughput spec as the iperf3 engine's options, with the linerate
//! command line that runs the same test (shown in the result's diags, as
//! the iperf3 tool shows iperf3's): what the iperf3 tool passes iperf3,
//! taken as it takes it (whole seconds of `duration`, `omit` and
//! `interval`, `int()` as the tool does).

use crate::auth::TaskAuth;
use crate::spec::ThroughputSpec;
use crate::spec::WAIT_SLEEP_S;
use linerate_iperf::{ClientOptions, Family, Limits, ServerOptions};
use linerate_iperf_proto::report::OutputMode;
use linerate_iperf_proto::{Params, Protocol, TestMode};
use std::net::{IpAddr, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

/// iperf3's limit on `-i` (MAX_INTERVAL): the iperf3 tool passes larger
/// ones on and iperf3 refuses them; so does this run.
const INTERVAL_MAX_S: u64 = 60;
/// iperf3's defaults the binary's flags give too.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const CLIENT_CONTROL_TIMEOUT: Duration = Duration::from_secs(30);
const SERVER_CONTROL_TIMEOUT: Duration = Duration::from_secs(10);
const RCV_TIMEOUT: Duration = Duration::from_secs(120);
/// What the iperf3 tool says when a CPU cannot be used (numactl failed).
pub const NO_NUMA: &str = "Unable to use NUMA for this test.  Disabling it.";

/// A run of one side: the engine's options and the command line.
#[derive(Debug)]
pub struct Plan<T> {
    pub opts: T,
    pub cmdline: String,
    /// Diagnostics the run adds (a CPU it could not use).
    pub notes: Vec<String>,
}

/// Builds a command line as the options are set.
#[derive(Debug, Default)]
struct Cmd(Vec<String>);

impl Cmd {
    fn flag(&mut self, f: &str) {
        self.0.push(f.to_string());
    }

    fn opt(&mut self, f: &str, v: impl ToString) {
        self.0.extend([f.to_string(), v.to_string()]);
    }

    fn line(&self) -> String {
        std::iter::once("linerate".to_string())
            .chain(self.0.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// An address of `host` of the family asked (4 or 6), else any.
pub fn resolve(host: &str, version: Option<u8>) -> Vec<IpAddr> {
    let all: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => (host, 0)
            .to_socket_addrs()
            .map(|a| a.map(|s| s.ip()).collect())
            .unwrap_or_default(),
    };
    all.into_iter()
        .filter(|ip| match version {
            Some(4) => ip.is_ipv4(),
            Some(6) => ip.is_ipv6(),
            _ => true,
        })
        .collect()
}

/// Addresses of `a` and `b` of one family, IPv6 first (pScheduler's
/// ip_normalize_version).
fn common_family(a: &str, b: &str, version: Option<u8>) -> Option<(IpAddr, IpAddr)> {
    let (xs, ys) = (resolve(a, version), resolve(b, version));
    let pick = |v6: bool| {
        let x = xs.iter().find(|ip| ip.is_ipv6() == v6)?;
        let y = ys.iter().find(|ip| ip.is_ipv6() == v6)?;
        Some((*x, *y))
    };
    pick(true).or_else(|| pick(false))
}

fn family(v: Option<u8>) -> Family {
    match v {
        Some(4) => Family::V4,
        Some(6) => Family::V6,
        _ => Family::Any,
    }
}

/// The CPU of an affinity field, if this process may run there; else the
/// iperf3 tool's note (it asks numactl, which refuses a CPU that is not
/// there or a negative one) and no pinning.
fn cpu(affinity: Option<i64>, notes: &mut Vec<String>) -> Vec<usize> {
    let Some(a) = affinity else {
        return Vec::new();
    };
    match usize::try_from(a) {
        Ok(c) if linerate_backend::cpu::not_allowed(&[c]).is_empty() => vec![c],
        _ => {
            notes.push(NO_NUMA.to_string());
            Vec::new()
        }
    }
}

/// The parameters the client sends, checked as the binary checks its
/// flags (iperf3's limits and words).
fn params(s: &ThroughputSpec) -> Result<Params, String> {
    let parallel = s.parallel.unwrap_or(1);
    if !(1..=128).contains(&parallel) {
        return Err("invalid number of parallel streams (min = 1, max = 128)".into());
    }
    let len = s.buffer_length.unwrap_or(0);
    if s.udp && len != 0 && !(16..=65507).contains(&len) {
        return Err("block size invalid (minimum = 16 bytes, maximum = 65507 bytes)".into());
    }
    if !s.udp && len > 1 << 20 {
        return Err("block size too large (maximum = 1048576 bytes)".into());
    }
    if s.burst_size.is_some_and(|b| !(1..=1000).contains(&b)) {
        return Err("invalid burst count (maximum = 1000)".into());
    }
    let whole = |v: Result<u64, crate::Error>| v.map_err(|e| e.to_string());
    Ok(Params {
        protocol: if s.udp { Protocol::Udp } else { Protocol::Tcp },
        mode: if s.reverse {
            TestMode::Reverse
        } else {
            TestMode::Forward
        },
        omit_s: s.omit_whole_s().map_err(|e| e.to_string())?,
        time_s: u32::try_from(whole(s.time_s())?).map_err(|e| e.to_string())?,
        parallel,
        len,
        bandwidth_bps: s.bandwidth.unwrap_or(0),
        burst: s.burst_size.unwrap_or(0),
        window: s.window_size.unwrap_or(0),
        mss: s.mss.unwrap_or(0),
        nodelay: s.no_delay,
        tos: s.ip_tos.unwrap_or(0),
        fq_rate_bps: s.fq_rate.unwrap_or(0),
        congestion: s.congestion.clone(),
        zerocopy: s.zero_copy,
        flowlabel: s.flow_label.unwrap_or(0),
        client_version: Some(format!("linerate {}", env!("CARGO_PKG_VERSION"))),
        ..Params::default()
    })
}

/// `-i`: whole seconds (0: no interval reports), at most iperf3's 60.
fn interval(s: &ThroughputSpec, cmd: &mut Cmd) -> Result<Duration, String> {
    match s.interval_whole_s().map_err(|e| e.to_string())? {
        None => Ok(Duration::from_secs(1)),
        Some(i) if i > INTERVAL_MAX_S => {
            Err("report interval must be 0 or between 0.1 and 60 seconds".into())
        }
        Some(i) => {
            cmd.opt("-i", i);
            Ok(Duration::from_secs(i))
        }
    }
}

/// The client's bind address and destination: bound to local-address or
/// source in the destination's family (as the iperf3 tool binds).
fn client_endpoints(s: &ThroughputSpec, cmd: &mut Cmd) -> Result<(Option<IpAddr>, String), String> {
    let local = s.local_address.as_deref().or(s.source.as_deref());
    match local {
        Some(l) if !s.loopback || s.local_address.is_some() => {
            let (src, dst) = common_family(l, &s.dest, s.ip_version)
                .ok_or_else(|| format!("{l} and {} have no addresses of one IP version", s.dest))?;
            cmd.opt("-B", src);
            Ok((Some(src), dst.to_string()))
        }
        _ => match s.ip_version {
            Some(v) => Ok((
                None,
                resolve(&s.dest, Some(v))
                    .first()
                    .ok_or_else(|| format!("{} has no IPv{v} address", s.dest))?
                    .to_string(),
            )),
            None => Ok((None, s.dest.clone())),
        },
    }
}

/// The client's flags for the spec's options (what the engine's
/// parameters say, on the command line).
fn client_flags(s: &ThroughputSpec, omit_s: u32, cmd: &mut Cmd) {
    for (f, v) in [
        ("-P", s.parallel.map(u64::from)),
        ("-w", s.window_size.map(u64::from)),
        ("-M", s.mss.map(u64::from)),
        ("-O", Some(u64::from(omit_s)).filter(|o| *o > 0)),
        ("--fq-rate", s.fq_rate),
        ("-l", s.buffer_length.map(u64::from)),
        ("-S", s.ip_tos.map(u64::from)),
        ("-L", s.flow_label.map(u64::from)),
    ] {
        if let Some(v) = v {
            cmd.opt(f, v);
        }
    }
    match (s.bandwidth, s.burst_size) {
        (Some(b), Some(n)) => cmd.opt("-b", format!("{b}/{n}")),
        (Some(b), None) => cmd.opt("-b", b),
        _ => {}
    }
    if let Some(c) = &s.congestion {
        cmd.opt("-C", c);
    }
    for (on, f) in [
        (s.udp, "-u"),
        (s.zero_copy, "-Z"),
        (s.no_delay, "-N"),
        (s.reverse, "-R"),
    ] {
        if on {
            cmd.flag(f);
        }
    }
}

/// The client's run against `port`, authenticated with `auth` if given.
pub fn client(
    s: &ThroughputSpec,
    port: u16,
    auth: Option<&TaskAuth>,
) -> Result<Plan<ClientOptions>, String> {
    let mut cmd = Cmd::default();
    let mut notes = Vec::new();
    let params = params(s)?;
    let (bind, host) = {
        let mut where_ = Cmd::default();
        let e = client_endpoints(s, &mut where_)?;
        cmd.opt("-c", &e.1);
        cmd.opt("-p", port);
        cmd.opt("-t", params.time_s);
        cmd.flag("-J");
        if let Some(v) = s.ip_version {
            cmd.flag(&format!("-{v}"));
        }
        cmd.0.extend(where_.0);
        e
    };
    let interval = interval(s, &mut cmd)?;
    client_flags(s, params.omit_s, &mut cmd);
    let affinity = cpu(s.client_cpu_affinity, &mut notes);
    if let Some(c) = affinity.first() {
        cmd.opt("-A", c);
    }
    let auth = auth
        .map(TaskAuth::client)
        .transpose()
        .map_err(|e| e.to_string())?;
    if let Some(a) = &auth {
        // The password is handed over in memory (iperf3's IPERF3_PASSWORD).
        cmd.opt("--username", &a.user);
        cmd.opt("--rsa-public-key-path", "(participant 1's per-task key)");
    }
    let opts = ClientOptions {
        host,
        port,
        time: None,
        bandwidth_given: s.bandwidth.is_some(),
        bind,
        cport: None,
        family: family(s.ip_version),
        interval,
        output: OutputMode {
            json: true,
            ..OutputMode::default()
        },
        connect_timeout: CONNECT_TIMEOUT,
        control_timeout: CLIENT_CONTROL_TIMEOUT,
        udp_gso: true,
        affinity,
        zerocopy: s.zero_copy,
        events: None,
        bind_dev: None,
        cntl_ka: None,
        rcv_timeout: RCV_TIMEOUT,
        snd_timeout: None,
        auth,
        debug: 0,
        file: None,
        finish_early: None,
        params,
    };
    Ok(Plan {
        opts,
        cmdline: cmd.line(),
        notes,
    })
}

/// The one-test server on `port`: bound to dest when the family is known
/// (as the iperf3 tool binds); it exits by itself if no client came by
/// the end of the client's wait and set-up; with `auth` only that client
/// is served (its users file written in `dir`).
pub fn server(
    s: &ThroughputSpec,
    port: u16,
    auth: Option<(&TaskAuth, &Path)>,
) -> Result<Plan<ServerOptions>, String> {
    let mut cmd = Cmd::default();
    let mut notes = Vec::new();
    let idle = (WAIT_SLEEP_S + s.setup_s().map_err(|e| e.to_string())?).ceil() as u64;
    cmd.flag("-s");
    cmd.flag("-1");
    cmd.flag("-J");
    cmd.opt("-p", port);
    cmd.opt("--idle-timeout", idle);
    let bind = match (s.ip_version, s.source.as_deref()) {
        (Some(v), _) => Some(
            *resolve(&s.dest, Some(v))
                .first()
                .ok_or_else(|| format!("{} has no IPv{v} address", s.dest))?,
        ),
        (None, Some(src)) if !s.loopback => common_family(src, &s.dest, None).map(|(_, d)| d),
        _ => None,
    };
    if let Some(ip) = bind {
        cmd.opt("-B", ip);
    }
    if let Some(v) = s.ip_version {
        cmd.flag(&format!("-{v}"));
    }
    let affinity = cpu(s.server_cpu_affinity, &mut notes);
    if let Some(c) = affinity.first() {
        cmd.opt("-A", c);
    }
    let auth = match auth {
        Some((a, dir)) => {
            let sa = a.server(dir).map_err(|e| e.to_string())?;
            cmd.opt("--rsa-private-key-path", "(participant 1's per-task key)");
            cmd.opt("--authorized-users-path", sa.users_path.display());
            Some(sa)
        }
        None => None,
    };
    let opts = ServerOptions {
        port,
        bind,
        family: family(s.ip_version),
        one_off: true,
        idle_timeout: Some(Duration::from_secs(idle)),
        interval: Duration::from_secs(1),
        output: OutputMode {
            json: true,
            ..OutputMode::default()
        },
        rcv_timeout: RCV_TIMEOUT,
        control_timeout: SERVER_CONTROL_TIMEOUT,
        limits: Limits::default(),
        udp_gso: true,
        affinity,
        events: None,
        bind_dev: None,
        auth,
        mptcp: false,
        debug: 0,
        file: None,
    };
    Ok(Plan {
        opts,
        cmdline: cmd.line(),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(fields: serde_json::Value) -> ThroughputSpec {
        let mut s = json!({ "dest": "127.0.0.1" });
        for (k, v) in fields.as_object().unwrap() {
            s[k] = v.clone();
        }
        serde_json::from_value(s).unwrap()
    }

    #[test]
    fn the_client_runs_what_the_iperf3_tool_passes_iperf3() {
        // (spec, -t, -O, -i, the interval the engine reports at)
        let cases = [
            (json!({}), 10, 0, "", Duration::from_secs(1)),
            (
                json!({ "duration": "PT2.9S", "omit": "PT1.5S" }),
                2,
                1,
                "",
                Duration::from_secs(1),
            ),
            (
                json!({ "interval": "PT0.5S" }),
                10,
                0,
                " -i 0",
                Duration::ZERO,
            ),
            (
                json!({ "interval": "PT59.9S" }),
                10,
                0,
                " -i 59",
                Duration::from_secs(59),
            ),
            (
                json!({ "interval": "PT60S" }),
                10,
                0,
                " -i 60",
                Duration::from_secs(60),
            ),
            (
                json!({ "duration": "PT0S" }),
                0,
                0,
                "",
                Duration::from_secs(1),
            ),
        ];
        for (fields, t, o, i, every) in cases {
            let p = client(&spec(fields.clone()), 5201, None).unwrap();
            assert_eq!(
                (p.opts.params.time_s, p.opts.params.omit_s, p.opts.interval),
                (t, o, every),
                "{fields}"
            );
            let line = p.cmdline;
            assert!(line.starts_with(&format!("linerate -c 127.0.0.1 -p 5201 -t {t} -J")));
            assert_eq!(line.contains(" -i "), !i.is_empty(), "{line}");
            assert!(line.contains(i), "{line}");
        }
        // Over iperf3's 60 s: refused at the run, as iperf3 refuses it.
        assert_eq!(
            client(&spec(json!({ "interval": "PT1H0.5S" })), 5201, None).err(),
            Some("report interval must be 0 or between 0.1 and 60 seconds".into())
        );
    }

    #[test]
    fn a_cpu_that_cannot_be_used_is_the_iperf3_tool_s_note() {
        for a in [-1, 1 << 20] {
            let p = client(&spec(json!({ "client-cpu-affinity": a })), 5201, None).unwrap();
            assert_eq!(
                (p.opts.affinity.len(), p.notes.clone()),
                (0, vec![NO_NUMA.to_string()])
            );
            assert!(!p.cmdline.contains(" -A "));
            let p = server(&spec(json!({ "server-cpu-affinity": a })), 5201, None).unwrap();
            assert_eq!(p.notes, [NO_NUMA]);
        }
        // A CPU this process may use (the first the kernel allows).
        let c = *linerate_backend::cpu::allowed().first().expect("a CPU");
        let p = client(&spec(json!({ "client-cpu-affinity": c })), 5201, None).unwrap();
        assert_eq!((p.opts.affinity, p.notes.len()), (vec![c], 0));
        assert!(p.cmdline.contains(&format!(" -A {c}")));
    }
}
