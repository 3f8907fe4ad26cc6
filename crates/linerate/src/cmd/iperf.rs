//! `linerate server`, `linerate client`, and the iperf3-compatible forms
//! `linerate -s` / `linerate -c HOST` (also when invoked as `iperf3`):
//! the same flags with the same meanings as iperf3.

use crate::output::Console;
use anyhow::{Context, Result, bail};
use clap::{ArgAction, Parser};
use linerate_iperf::output::LockedWriter;
use linerate_iperf::pidfile::PidFile;
use linerate_iperf::{ClientAuth, ClientOptions, Family, Limits, ServerAuth, ServerOptions};
use linerate_iperf_proto::IErr;
use linerate_iperf_proto::auth;
use linerate_iperf_proto::report::OutputMode;
use linerate_iperf_proto::units::parse_suffixed;
use linerate_iperf_proto::{Params, Protocol, TestMode};
use std::io::Write;
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `--rcv-timeout`'s default, ms (iperf3's).
const RCV_TIMEOUT_MS: u64 = 120_000;

/// iperf3's command line (a repeated option's last value wins, as with
/// getopt).
#[derive(Debug, Parser, Clone, Default)]
#[command(
    name = "linerate",
    disable_version_flag = true,
    args_override_self = true,
    about = "iperf3-compatible network throughput test (server or client)"
)]
pub struct IperfArgs {
    /// Run in server mode.
    #[arg(short = 's', long)]
    pub server: bool,
    /// Run in client mode, connecting to HOST.
    #[arg(short = 'c', long, value_name = "HOST")]
    pub client: Option<String>,
    /// Server port to listen on / connect to.
    #[arg(short = 'p', long, default_value_t = 5201)]
    pub port: u16,
    /// Format to report: k/m/g/t (bits), K/M/G/T (bytes).
    #[arg(short = 'f', long, value_parser = parse_format)]
    pub format: Option<char>,
    /// Seconds between periodic reports (0 disables).
    #[arg(short = 'i', long, default_value_t = 1.0)]
    pub interval: f64,
    /// Output in JSON (iperf3's -J document).
    #[arg(short = 'J', long)]
    pub json: bool,
    /// Output JSON events, one per line.
    #[arg(long)]
    pub json_stream: bool,
    /// Serve Prometheus/OpenMetrics metrics of every test on ADDR:PORT
    /// (GET /metrics).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// `--metrics`' endpoint, kept for the command's later runs.
    #[arg(skip)]
    pub endpoint: super::out::Endpoint,
    /// A live terminal view (streams, totals, a sparkline; the server's
    /// stays up from test to test); q or Ctrl-C stops the test (client) or
    /// the server, the end report follows.
    #[arg(long, conflicts_with_all = ["json_stream", "json"])]
    pub live: bool,
    /// With --json-stream, also print the whole -J document at the end
    /// (iperf3 3.21).
    #[arg(long)]
    pub json_stream_full_output: bool,
    /// Send output to a log file.
    #[arg(long, value_name = "FILE")]
    pub logfile: Option<std::path::PathBuf>,
    /// Also write CSV to FILE: a header, a row per interval per stream and
    /// per sum, and the totals (every test, for a server).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<std::path::PathBuf>,
    /// Write an HTML report to FILE at the end (a server: every test so
    /// far, rewritten at each test's end).
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<std::path::PathBuf>,
    /// Bind to this address (client: source address of every socket);
    /// HOST%DEV also binds to the interface DEV.
    #[arg(short = 'B', long, value_name = "HOST[%DEV]", value_parser = parse_bind)]
    pub bind: Option<(IpAddr, Option<String>)>,
    /// Send and receive only through this interface (SO_BINDTODEVICE).
    #[arg(long, value_name = "DEV")]
    pub bind_dev: Option<String>,
    /// Client: TCP keepalive on the control connection, optionally
    /// IDLE/INTERVAL/COUNT (seconds, seconds, probes; empty: the system's).
    #[arg(long, value_name = "IDLE/INTERVAL/COUNT", num_args = 0..=1, default_missing_value = "", require_equals = true, value_parser = parse_keepalive)]
    pub cntl_ka: Option<(u32, u32, u32)>,
    /// Only IPv4.
    #[arg(short = '4', long = "version4")]
    pub ipv4: bool,
    /// Only IPv6.
    #[arg(short = '6', long = "version6")]
    pub ipv6: bool,
    /// Server: handle one client connection, then exit.
    #[arg(short = '1', long)]
    pub one_off: bool,
    /// Server: with no test and no connection for SECONDS, restart the
    /// listening socket (with -1: exit).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout: Option<u64>,
    /// Idle time (ms) with no data after which a receiving test fails
    /// (server, and a receiving client, as iperf3 3.21; 100 to 86400000,
    /// default 120000).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(100..=86_400_000))]
    pub rcv_timeout: Option<u64>,
    /// Client: unacknowledged TCP data may wait this long (ms) before the
    /// stream fails (TCP_USER_TIMEOUT; default: the system's).
    #[arg(long, value_name = "MS")]
    pub snd_timeout: Option<u32>,
    /// Server: longest test accepted (duration + omit), seconds (0: no
    /// limit, as iperf3).
    #[arg(long, value_name = "SECONDS")]
    pub server_max_duration: Option<u32>,
    /// How long (ms) the peer may take over one control message: a server
    /// drops a client that takes longer to send its cookie, parameters or
    /// results, or to read what the server sends; a client gives up on a
    /// server (default for a client: 30000).
    #[arg(long, default_value_t = 10_000, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub control_timeout: u64,
    /// Server: highest total rate per test, bit/s (K/M/G suffixes): a test
    /// asking more (or no limit) is refused, and one whose streams move more,
    /// averaged over SECONDS (default 5), is ended (0: no limit, as iperf3).
    #[arg(long, value_name = "RATE[/SECONDS]", value_parser = parse_rate_window)]
    pub server_bitrate_limit: Option<(u64, u64)>,
    /// Server: seconds a test may run past its asked time (+ omit) before
    /// the server ends it (iperf3's 40; tests that end by -n/-k: past
    /// --server-max-duration, or 600 s).
    #[arg(long, default_value_t = 40, value_name = "SECONDS")]
    pub server_grace: u64,
    /// Server: tests served at once (1, as iperf3; more for many clients).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = at_least_one)]
    pub max_tests: usize,
    /// Server: tests one source address may run at once (default: --max-tests).
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub max_tests_per_source: Option<usize>,
    /// Server: connections one source address may have open before they
    /// send their cookie (past it, its oldest is closed).
    #[arg(long, default_value_t = 8, value_name = "N", value_parser = at_least_one)]
    pub max_pending_per_source: usize,
    /// Server: most streams per test (P, or 2P with --bidir).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub server_max_streams: Option<u32>,
    /// UDP instead of TCP.
    #[arg(short = 'u', long)]
    pub udp: bool,
    /// Target bitrate per stream, bit/s, with optional /BURST (e.g. 10M/20).
    #[arg(short = 'b', long, alias = "bandwidth", value_name = "RATE[/N]")]
    pub bitrate: Option<String>,
    /// Kernel pacing rate per stream (SO_MAX_PACING_RATE), bit/s.
    #[arg(long, value_parser = parse_rate)]
    pub fq_rate: Option<u64>,
    /// Seconds to transmit (default 10; fractions as everywhere in
    /// linerate: iperf3's parameters carry whole seconds, so a server is
    /// told the time rounded up, and this client ends the test on time).
    #[arg(short = 't', long, value_name = "SECONDS", value_parser = parse_test_time)]
    pub time: Option<f64>,
    /// Bytes to transmit (instead of -t), K/M/G suffixes.
    #[arg(short = 'n', long, value_parser = parse_size)]
    pub bytes: Option<u64>,
    /// Blocks (writes/datagrams) to transmit (instead of -t).
    #[arg(short = 'k', long, value_parser = parse_size)]
    pub blockcount: Option<u64>,
    /// Block size to read or write (TCP default 128K; UDP default path MSS).
    #[arg(short = 'l', long, value_parser = parse_size)]
    pub length: Option<u64>,
    /// Client port (stream i uses PORT+i).
    #[arg(long, value_name = "PORT")]
    pub cport: Option<u16>,
    /// Parallel streams.
    #[arg(short = 'P', long, default_value_t = 1)]
    pub parallel: u32,
    /// Reverse: the server sends.
    #[arg(short = 'R', long)]
    pub reverse: bool,
    /// Both directions at once.
    #[arg(long)]
    pub bidir: bool,
    /// Socket buffer sizes (K/M suffixes).
    #[arg(short = 'w', long, value_parser = parse_size)]
    pub window: Option<u64>,
    /// TCP maximum segment size.
    #[arg(short = 'M', long = "set-mss")]
    pub mss: Option<u32>,
    /// TCP_NODELAY.
    #[arg(short = 'N', long = "no-delay")]
    pub nodelay: bool,
    /// IP type of service (0x10 style or decimal).
    #[arg(short = 'S', long, value_parser = parse_tos)]
    pub tos: Option<u32>,
    /// DSCP value (number or name such as ef, af41, cs5).
    #[arg(long, value_parser = parse_dscp)]
    pub dscp: Option<u32>,
    /// Omit the first N seconds from the totals.
    #[arg(short = 'O', long, default_value_t = 0)]
    pub omit: u32,
    /// Prefix every output line with this title (and put it in the JSON).
    #[arg(short = 'T', long)]
    pub title: Option<String>,
    /// Extra data string for the JSON output.
    #[arg(long)]
    pub extra_data: Option<String>,
    /// TCP congestion control algorithm.
    #[arg(short = 'C', long = "congestion", alias = "linux-congestion")]
    pub congestion: Option<String>,
    /// Get the server's output with the results.
    #[arg(long)]
    pub get_server_output: bool,
    /// 64-bit counters in UDP datagrams.
    #[arg(long)]
    pub udp_counters_64bit: bool,
    /// Send 0123456789… instead of random bytes.
    #[arg(long)]
    pub repeating_payload: bool,
    /// Zero-copy TCP sends (MSG_ZEROCOPY).
    #[arg(short = 'Z', long)]
    pub zerocopy: bool,
    /// CPU affinity as iperf3: `-A n` pins this side's streams to CPU n;
    /// a client's `-A n,m` also asks the server to use CPU m.
    #[arg(short = 'A', long, value_name = "n[,m]")]
    pub affinity: Option<String>,
    /// Pin stream i to CPU LIST[i % len] (e.g. 0,1 or 2-5): one core per stream.
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub stream_cpus: Option<CpuList>,
    /// Set DF on UDP datagrams (IPv4).
    #[arg(long)]
    pub dont_fragment: bool,
    /// Do not use UDP segmentation offload (GSO) when sending UDP.
    #[arg(long)]
    pub no_gso: bool,
    /// Control connection timeout, ms.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub connect_timeout: u64,
    /// More detail, as iperf3's -V: the version, the cookie, MSS, "Starting
    /// Test", "Test Complete", "CPU Utilization" and the congestion
    /// algorithms.
    #[arg(short = 'V', long)]
    pub verbose: bool,
    /// Server: run in the background (fork, new session, cwd /, standard
    /// streams on /dev/null; use --logfile to keep the output).
    #[arg(short = 'D', long)]
    pub daemon: bool,
    /// Write the process ID to FILE (removed at exit).
    #[arg(short = 'I', long, value_name = "FILE")]
    pub pidfile: Option<std::path::PathBuf>,
    /// Replace a --csv file that exists (a symbolic link or anything but a
    /// regular file is refused all the same).
    #[arg(long)]
    pub force: bool,
    /// Flush output at every line (linerate always does; accepted as iperf3's).
    #[arg(long)]
    pub forceflush: bool,
    /// iperf3's deprecated flag: warns, and turns --fq-rate off.
    #[arg(long, hide = true)]
    pub no_fq_socket_pacing: bool,
    /// Prefix every output line with the local time, strftime FORMAT
    /// (default "%c ").
    #[arg(long, value_name = "FORMAT", num_args = 0..=1, default_missing_value = "%c ", require_equals = true)]
    pub timestamps: Option<String>,
    /// UDP GSO/GRO on (linerate's default; --no-gso turns GSO off).
    #[arg(long, conflicts_with = "no_gso")]
    pub gsro: bool,
    /// Pacing timer, µs (iperf3's granularity; linerate paces every block
    /// against its due time, finer than any timer: accepted).
    #[arg(long, value_name = "USEC")]
    pub pacing_timer: Option<u64>,
    /// Receivers discard the data without copying it to user space
    /// (MSG_TRUNC; UDP copies only each datagram's header). Client flag,
    /// sent to the server like iperf3's.
    #[arg(long)]
    pub skip_rx_copy: bool,
    /// Multipath TCP: the client's data connections are MPTCP sockets; a
    /// server with -m listens with MPTCP (plain TCP clients still work).
    #[arg(short = 'm', long)]
    pub mptcp: bool,
    /// IPv6 flow label (1..0xFFFFF, decimal or 0x hex) on the client's data
    /// connections.
    #[arg(short = 'L', long, value_parser = parse_flowlabel)]
    pub flowlabel: Option<u32>,
    /// Debug output on stderr: control messages (parameters and results as
    /// JSON, tokens hidden), authentication, and at LEVEL 3+ each stream's
    /// set-up. LEVEL 1-4 as iperf3 (default 4).
    #[arg(short = 'd', long, value_name = "LEVEL", num_args = 0..=1, default_missing_value = "4", require_equals = true, value_parser = clap::value_parser!(u8).range(1..=4))]
    pub debug: Option<u8>,
    /// TCP senders send the file NAME (each stream from its start; with no
    /// -t/-n/-k the client sends its size), receivers write what arrives to
    /// it; the test ends at the end of the file.
    #[arg(short = 'F', long, value_name = "NAME")]
    pub file: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub repeat: super::out::RepeatArgs,
    /// Client: authenticate as USER (the password comes from
    /// IPERF3_PASSWORD, or is asked for on the terminal).
    #[arg(long, value_name = "USER")]
    pub username: Option<String>,
    /// Client: the server's RSA public key (PEM) to encrypt the credentials.
    #[arg(long, value_name = "FILE")]
    pub rsa_public_key_path: Option<std::path::PathBuf>,
    /// Server: RSA private key (PEM, unprotected) to decrypt credentials.
    #[arg(long, value_name = "FILE")]
    pub rsa_private_key_path: Option<std::path::PathBuf>,
    /// Server: users allowed to test, lines of
    /// `user,sha256("{user}password")` in hex.
    #[arg(long, value_name = "FILE")]
    pub authorized_users_path: Option<std::path::PathBuf>,
    /// Server: seconds a client's clock may differ from ours (default 10).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(i64).range(1..))]
    pub time_skew_threshold: Option<i64>,
    /// PKCS#1 v1.5 padding for the credentials (iperf3 before 3.17) instead
    /// of OAEP.
    #[arg(long)]
    pub use_pkcs1_padding: bool,
    /// Print the version.
    #[arg(short = 'v', long, action = ArgAction::SetTrue)]
    pub version: bool,
}

pub use super::CpuList;
use super::cpu_list as parse_cpus;

fn parse_format(s: &str) -> Result<char, String> {
    match s {
        "k" | "m" | "g" | "t" | "K" | "M" | "G" | "T" => Ok(s.chars().next().unwrap_or('m')),
        _ => Err("use one of k m g t (bits) or K M G T (bytes)".into()),
    }
}

/// `--cntl-ka[=IDLE/INTERVAL/COUNT]`, each part optional.
fn parse_keepalive(s: &str) -> Result<(u32, u32, u32), String> {
    let mut v = [0u32; 3];
    for (i, part) in s.split('/').enumerate() {
        if i >= 3 {
            return Err(format!("'{s}': at most IDLE/INTERVAL/COUNT"));
        }
        if !part.is_empty() {
            v[i] = part
                .parse()
                .map_err(|_| format!("'{part}' in '{s}' is not a number"))?;
        }
    }
    Ok((v[0], v[1], v[2]))
}

/// `-B HOST[%DEV]`.
fn parse_bind(s: &str) -> Result<(IpAddr, Option<String>), String> {
    let (host, dev) = match s.split_once('%') {
        Some((h, d)) if !d.is_empty() => (h, Some(d.to_string())),
        _ => (s, None),
    };
    let ip = host
        .parse()
        .map_err(|_| format!("'{host}' is not an IP address"))?;
    Ok((ip, dev))
}

fn parse_rate(s: &str) -> Result<u64, String> {
    parse_suffixed(s, 1000).ok_or_else(|| format!("'{s}' is not a rate (e.g. 10M)"))
}

/// A count of 1 or more (a limit of 0 would refuse every client).
fn at_least_one(s: &str) -> Result<usize, String> {
    s.parse::<usize>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("'{s}' is not a count of 1 or more (0 would refuse every client)"))
}

/// `RATE[/SECONDS]` (iperf3's `--server-bitrate-limit`).
fn parse_rate_window(s: &str) -> Result<(u64, u64), String> {
    let (rate, secs) = match s.split_once('/') {
        Some((r, w)) => (
            r,
            w.parse::<u64>()
                .ok()
                .filter(|w| *w > 0)
                .ok_or_else(|| format!("'{w}' is not a number of seconds (e.g. 50M/5)"))?,
        ),
        None => (s, 5),
    };
    Ok((parse_rate(rate)?, secs))
}

/// `-t`: seconds from 0 to 86400 (iperf3's range), fractions allowed.
fn parse_test_time(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|t| (0.0..=86400.0).contains(t))
        .ok_or_else(|| format!("'{s}': test duration valid values are 0 to 86400 seconds"))
}

/// The client's own test time when `-t` has a fraction.
fn fractional_time(t: Option<f64>) -> Option<Duration> {
    t.filter(|t| t.fract() != 0.0).map(Duration::from_secs_f64)
}

fn parse_size(s: &str) -> Result<u64, String> {
    parse_suffixed(s, 1024).ok_or_else(|| format!("'{s}' is not a size (e.g. 128K)"))
}

fn parse_flowlabel(s: &str) -> Result<u32, String> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    v.ok()
        .filter(|v| (1..=0xF_FFFF).contains(v))
        .ok_or_else(|| "bogus flow label value (1..0xFFFFF)".to_string())
}

fn parse_tos(s: &str) -> Result<u32, String> {
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u32::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    };
    v.filter(|v| *v <= 255)
        .ok_or_else(|| format!("bad TOS value '{s}' (0..255)"))
}

/// `--dscp` as a TOS byte (the DSCP in its upper six bits).
fn parse_dscp(s: &str) -> Result<u32, String> {
    super::dscp(s).map(|d| u32::from(d) << 2)
}

/// Flags only a server uses (hidden from `client --help`).
pub const SERVER_ONLY: &[&str] = &[
    "one_off",
    "server_max_duration",
    "server_bitrate_limit",
    "server_grace",
    "max_tests",
    "max_tests_per_source",
    "max_pending_per_source",
    "server_max_streams",
    "daemon",
];

/// Flags only a client uses (hidden from `server --help`).
pub const CLIENT_ONLY: &[&str] = &[
    "udp",
    "bitrate",
    "fq_rate",
    "no_fq_socket_pacing",
    "time",
    "bytes",
    "blockcount",
    "length",
    "cport",
    "parallel",
    "reverse",
    "bidir",
    "window",
    "mss",
    "nodelay",
    "tos",
    "dscp",
    "omit",
    "title",
    "extra_data",
    "congestion",
    "get_server_output",
    "udp_counters_64bit",
    "repeating_payload",
    "zerocopy",
    "dont_fragment",
    "connect_timeout",
    "cntl_ka",
    "snd_timeout",
];

/// `linerate client` and `linerate server` share iperf3's flag set; each
/// shows only its own side's flags (and not `-s`/`-c`) in its help.
pub fn split_help(cmd: clap::Command) -> clap::Command {
    let hide = |c: clap::Command, ids: &[&str]| {
        ids.iter()
            .chain(&["server", "client"])
            .fold(c, |c, id| c.mut_arg(*id, |a| a.hide(true)))
    };
    cmd.mut_subcommand("client", |c| hide(c, SERVER_ONLY))
        .mut_subcommand("server", |c| hide(c, CLIENT_ONLY))
}

impl IperfArgs {
    /// `--bind-dev DEV`, or the DEV of `-B HOST%DEV`.
    fn bind_device(&self) -> Option<String> {
        self.bind_dev
            .clone()
            .or_else(|| self.bind.as_ref().and_then(|(_, d)| d.clone()))
    }

    /// Server-only flags given (iperf3's IESERVERONLY when a client has them).
    fn server_only_given(&self) -> Vec<&'static str> {
        let d = IperfArgs::default_values();
        [
            ("-1/--one-off", self.one_off),
            ("--idle-timeout", self.idle_timeout.is_some()),
            ("--server-max-duration", self.server_max_duration.is_some()),
            (
                "--server-bitrate-limit",
                self.server_bitrate_limit.is_some(),
            ),
            ("--max-tests", self.max_tests != d.max_tests),
            ("--server-grace", self.server_grace != d.server_grace),
            ("-D/--daemon", self.daemon),
            (
                "--max-tests-per-source",
                self.max_tests_per_source.is_some(),
            ),
            (
                "--max-pending-per-source",
                self.max_pending_per_source != d.max_pending_per_source,
            ),
            ("--server-max-streams", self.server_max_streams.is_some()),
            (
                "--rsa-private-key-path",
                self.rsa_private_key_path.is_some(),
            ),
            (
                "--authorized-users-path",
                self.authorized_users_path.is_some(),
            ),
            ("--time-skew-threshold", self.time_skew_threshold.is_some()),
        ]
        .into_iter()
        .filter_map(|(n, given)| given.then_some(n))
        .collect()
    }

    /// Client-only flags given (iperf3's IECLIENTONLY when a server has them).
    fn client_only_given(&self) -> Vec<&'static str> {
        let d = IperfArgs::default_values();
        [
            ("-u/--udp", self.udp),
            ("--cntl-ka", self.cntl_ka.is_some()),
            ("--snd-timeout", self.snd_timeout.is_some()),
            ("-b/--bitrate", self.bitrate.is_some()),
            ("-t/--time", self.time.is_some()),
            ("-n/--bytes", self.bytes.is_some()),
            ("-k/--blockcount", self.blockcount.is_some()),
            ("-l/--length", self.length.is_some()),
            ("-P/--parallel", self.parallel != d.parallel),
            ("-R/--reverse", self.reverse),
            ("--bidir", self.bidir),
            ("-w/--window", self.window.is_some()),
            ("-M/--set-mss", self.mss.is_some()),
            ("-N/--no-delay", self.nodelay),
            ("-O/--omit", self.omit != d.omit),
            ("-T/--title", self.title.is_some()),
            ("--cport", self.cport.is_some()),
            ("-C/--congestion", self.congestion.is_some()),
            ("--get-server-output", self.get_server_output),
            ("--udp-counters-64bit", self.udp_counters_64bit),
            ("--repeating-payload", self.repeating_payload),
            ("--extra-data", self.extra_data.is_some()),
            ("--dont-fragment", self.dont_fragment),
            ("--fq-rate", self.fq_rate.is_some()),
            ("--no-fq-socket-pacing", self.no_fq_socket_pacing),
            ("-S/--tos", self.tos.is_some()),
            ("--dscp", self.dscp.is_some()),
            ("-Z/--zerocopy", self.zerocopy),
            (
                "--connect-timeout",
                self.connect_timeout != d.connect_timeout,
            ),
            ("--username", self.username.is_some()),
            ("--repeat", self.repeat.repeat.is_some()),
            ("--ci-target", self.repeat.ci_target.is_some()),
            ("--skip-rx-copy", self.skip_rx_copy),
            ("-L/--flowlabel", self.flowlabel.is_some()),
            ("--rsa-public-key-path", self.rsa_public_key_path.is_some()),
        ]
        .into_iter()
        .filter_map(|(n, given)| given.then_some(n))
        .collect()
    }

    /// The values every flag has when none is given.
    fn default_values() -> IperfArgs {
        IperfArgs::try_parse_from(["linerate", "-s"]).expect("the defaults parse")
    }

    /// `-A n[,m]` split into this side's CPU and the server's, read as
    /// iperf3 3.21 reads it: `n` a C integer (decimal, 0x hex, 0 octal)
    /// from 0 to 1024 followed by anything, then `m` after the first comma
    /// if there is one (`-A 2/3` is CPU 2: iperf3 ignores the `/3`, and
    /// linerate says so).
    fn affinity_pair(&self) -> Result<(Option<usize>, Option<usize>)> {
        let Some(a) = &self.affinity else {
            return Ok((None, None));
        };
        let (n, _) = linerate_iperf_proto::units::c_integer_prefix(a);
        let n = n
            .filter(|n| (0..=1024).contains(n))
            .with_context(|| format!("-A {a}: unable to set CPU affinity (a CPU number 0-1024)"))?;
        let m = match a.split_once(',') {
            Some((_, m)) => {
                let (m, _) = linerate_iperf_proto::units::c_integer_prefix(m);
                Some(m.filter(|m| (0..=1024).contains(m)).with_context(|| {
                    format!("-A {a}: unable to set CPU affinity (server CPU after the comma)")
                })?)
            }
            None => None,
        };
        Ok((Some(n as usize), m.map(|m| m as usize)))
    }

    /// What of `-A` iperf3 would ignore (`-A 2/3`: the `/3`), said once.
    fn warn_ignored_affinity(&self) {
        if let Some(a) = &self.affinity
            && !a.contains(',')
            && let (Some(n), rest) = linerate_iperf_proto::units::c_integer_prefix(a)
            && !rest.is_empty()
        {
            eprintln!(
                "linerate: warning: -A {a}: '{rest}' ignored (iperf3 reads -A n or -A n,m; for the server's CPU write -A {n},M)"
            );
        }
    }

    /// CPUs for this side's stream threads.
    fn stream_cpus(&self) -> Result<Vec<usize>> {
        Ok(match (&self.stream_cpus, self.affinity_pair()?.0) {
            (Some(list), _) => list.0.clone(),
            (None, Some(n)) => vec![n],
            (None, None) => vec![],
        })
    }

    fn family(&self) -> Family {
        match (self.ipv4, self.ipv6) {
            (true, _) => Family::V4,
            (_, true) => Family::V6,
            _ => Family::Any,
        }
    }

    fn output(&self) -> OutputMode {
        OutputMode {
            json: self.json,
            json_stream: self.json_stream,
            json_stream_full: self.json_stream_full_output,
            format: self.format,
            verbose: self.verbose,
        }
    }

    /// `-V`'s first lines (a client's with the time): nothing without -V
    /// or in JSON.
    fn verbose_banner(&self, with_time: bool) -> String {
        if !self.verbose || self.json || self.json_stream {
            return String::new();
        }
        let now = with_time.then(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
        linerate_iperf::output::verbose_banner(now)
    }

    fn interval(&self) -> Result<Duration> {
        if !(0.0..=60.0).contains(&self.interval) || (self.interval > 0.0 && self.interval < 0.1) {
            bail!("report interval must be 0 or between 0.1 and 60 seconds");
        }
        Ok(Duration::from_secs_f64(self.interval))
    }

    /// `-b RATE[/BURST]`: the rate, the burst (0: none) and whether given.
    fn rate_and_burst(&self) -> Result<(u64, u32, bool)> {
        let Some(b) = &self.bitrate else {
            return Ok((0, 0, false));
        };
        let (r, n) = match b.split_once('/') {
            Some((r, n)) => (
                r,
                Some(
                    n.parse::<u32>()
                        .context("burst after '/' must be a number")?,
                ),
            ),
            None => (b.as_str(), None),
        };
        let rate = parse_rate(r).map_err(anyhow::Error::msg)?;
        if let Some(n) = n
            && !(1..=1000).contains(&n)
        {
            bail!("invalid burst count (maximum = 1000)");
        }
        Ok((rate, n.unwrap_or(0), true))
    }

    /// The client flags iperf3 3.21 refuses together.
    fn check_combinations(&self) -> Result<()> {
        if self.reverse && self.bidir {
            bail!("cannot be both reverse and bidirectional");
        }
        if self.rcv_timeout.is_some() && !self.reverse && !self.bidir {
            bail!(
                "parameter error: client receive timeout is valid only in receiving mode (-R or --bidir)"
            );
        }
        if !(1..=128).contains(&self.parallel) {
            bail!("invalid number of parallel streams (min = 1, max = 128)");
        }
        if self.file.is_some() && self.udp {
            bail!("cannot transfer file using UDP");
        }
        if self.file.is_some() && self.skip_rx_copy {
            bail!("-F writes what arrives to the file: it cannot be used with --skip-rx-copy");
        }
        let ends = [
            self.time.is_some(),
            self.bytes.is_some(),
            self.blockcount.is_some(),
        ];
        if ends.iter().filter(|e| **e).count() > 1 {
            bail!("parameter error: only one test end condition (-t, -n, -k) may be specified");
        }
        Ok(())
    }

    /// The parameters a client sends, from the flags.
    pub fn params(&self) -> Result<(Params, bool)> {
        let (rate, burst, rate_given) = self.rate_and_burst()?;
        self.check_combinations()?;
        // iperf3: -F with no -t/-n/-k sends the file's size.
        let file_bytes = match (&self.file, self.time, self.bytes, self.blockcount) {
            (Some(f), None, None, None) => std::fs::metadata(f)
                .ok()
                .map(|m| m.len())
                .filter(|&n| n > 0),
            _ => None,
        };
        let ends_by_amount =
            self.bytes.is_some() || self.blockcount.is_some() || file_bytes.is_some();
        let time = match (self.time, ends_by_amount) {
            (Some(t), _) => t.ceil() as u32,
            (None, true) => 0,
            (None, false) => 10,
        };
        let protocol = if self.udp {
            Protocol::Udp
        } else {
            Protocol::Tcp
        };
        let len = self.length.unwrap_or(0);
        match protocol {
            Protocol::Udp if len != 0 && !(16..=65507).contains(&len) => {
                bail!("block size invalid (minimum = 16 bytes, maximum = 65507 bytes)")
            }
            Protocol::Tcp if len > 1 << 20 => {
                bail!("block size too large (maximum = 1048576 bytes)")
            }
            _ => {}
        }
        let tos = self.dscp.or(self.tos).unwrap_or(0);
        Ok((
            Params {
                protocol,
                mode: if self.bidir {
                    TestMode::Bidir
                } else if self.reverse {
                    TestMode::Reverse
                } else {
                    TestMode::Forward
                },
                omit_s: self.omit,
                time_s: time,
                num_bytes: self.bytes.or(file_bytes).unwrap_or(0),
                block_count: self.blockcount.unwrap_or(0),
                parallel: self.parallel,
                len: len as u32,
                bandwidth_bps: rate,
                burst,
                window: self.window.unwrap_or(0) as u32,
                mss: self.mss.unwrap_or(0),
                nodelay: self.nodelay,
                tos,
                fq_rate_bps: if self.no_fq_socket_pacing {
                    0
                } else {
                    self.fq_rate.unwrap_or(0)
                },
                congestion: self.congestion.clone(),
                title: self.title.clone(),
                extra_data: self.extra_data.clone(),
                get_server_output: self.get_server_output,
                udp_counters_64bit: self.udp_counters_64bit,
                repeating_payload: self.repeating_payload,
                zerocopy: self.zerocopy,
                dont_fragment: self.dont_fragment,
                server_affinity: self.affinity_pair()?.1.map(|m| m as i64),
                client_version: Some(format!("linerate {}", env!("CARGO_PKG_VERSION"))),
                authtoken: None,
                skip_rx_copy: self.skip_rx_copy,
                mptcp: self.mptcp,
                flowlabel: self.flowlabel.unwrap_or(0),
            },
            rate_given,
        ))
    }
}

/// The run-model reporters `--live`, `--csv` and `--metrics` ask for, set
/// up as every mode's (`out::side_reporters`; iperf3's own text or
/// document is the main output).
fn reporters(args: &IperfArgs, c: &Console) -> Result<linerate_run::Fanout> {
    use super::out::View;
    // The text is held back while the view is up. A client's view prints
    // its end report when it closes; a server's stays up from test to test
    // until the server stops (q), then prints the last test's report.
    let view = match (live_view(args, c), args.server) {
        (false, _) => View::None,
        (true, true) => View::Live(linerate_live::LiveView::persistent(Box::new(c.stdout()))),
        (true, false) => View::Live(linerate_live::LiveView::new(true, Box::new(c.stdout()))),
    };
    if args.csv.as_deref() == Some(std::path::Path::new("-")) {
        bail!("--csv needs a file here: standard output carries iperf3's own output");
    }
    let csv = args.csv.as_deref().map(|p| (p, args.force));
    let metrics = args.metrics.as_deref().map(|a| (a, &args.endpoint));
    let mut f = super::out::side_reporters(view, false, metrics, csv, c)?;
    // A repetition writes one report of all its runs (`RepeatArgs::run`).
    if let Some(p) = args.report.as_deref().filter(|_| !args.repeat.asked()) {
        f.push(super::out::html_report(p, args.force)?);
    }
    Ok(f)
}

/// The server's reporters: each test is a run (`drive_engine`: its start
/// said by the engine once the client's parameters are in, its intervals,
/// its end) reported from the test's own thread, tests one after another
/// or side by side (`--max-tests`).
fn server_events(args: &IperfArgs, c: &Console) -> Result<Option<linerate_run::SharedReporter>> {
    let f = reporters(args, c)?;
    Ok((!f.is_empty()).then(|| linerate_run::SharedReporter::new(f)))
}

/// Whether this client run draws the live view.
fn live_view(args: &IperfArgs, c: &Console) -> bool {
    args.live
        && args.logfile.is_none()
        && !args.daemon
        && linerate_live::available(|w| c.warn_once(w))
}

fn output_sink(args: &IperfArgs, c: &Console) -> Result<Arc<Mutex<dyn Write + Send>>> {
    if live_view(args, c) {
        return Ok(Arc::new(Mutex::new(std::io::sink())));
    }
    let inner: Box<dyn Write + Send> = match &args.logfile {
        Some(p) => Box::new(c.checked(
            crate::output::Whole::new(crate::output::append_log(p, "--logfile")?),
            format!("--logfile {}", p.display()),
        )),
        None => Box::new(c.stdout()),
    };
    Ok(match &args.timestamps {
        Some(format) => Arc::new(Mutex::new(linerate_iperf::output::Stamped::new(
            inner,
            format.clone(),
        ))),
        None => Arc::new(Mutex::new(inner)),
    })
}

fn terminate_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, flag.clone()).context("installing signal handlers")?;
    }
    Ok(flag)
}

/// Runs iperf3-style arguments; returns the process exit code.
pub fn run(args: &IperfArgs, c: &Console) -> Result<u8> {
    if args.version {
        crate::say!(c, "{}", linerate_iperf::output::version_text());
        return Ok(0);
    }
    args.warn_ignored_affinity();
    if args.no_fq_socket_pacing {
        eprintln!(
            "linerate: warning: --no-fq-socket-pacing is deprecated (as in iperf3 3.21): use --fq-rate 0"
        );
    }
    match (&args.client, args.server) {
        (Some(_), true) => bail!("cannot be both server and client"),
        (None, false) => bail!("parameter error: must either be a client (-c) or server (-s)"),
        (None, true) => {
            let given = args.client_only_given();
            if !given.is_empty() {
                bail!(
                    "parameter error: some option you are trying to set is client only: {}",
                    given.join(", ")
                );
            }
            run_server(args, c)
        }
        (Some(host), false) => {
            let s = args.server_only_given();
            if !s.is_empty() {
                bail!(
                    "parameter error: some option you are trying to set is server only: {}",
                    s.join(", ")
                );
            }
            run_client(args, host, c)
        }
    }
}

fn run_server(args: &IperfArgs, c: &Console) -> Result<u8> {
    let opts = ServerOptions {
        port: args.port,
        bind: args.bind.as_ref().map(|(ip, _)| *ip),
        bind_dev: args.bind_device(),
        family: args.family(),
        one_off: args.one_off,
        idle_timeout: args.idle_timeout.map(Duration::from_secs),
        interval: args.interval()?,
        output: args.output(),
        rcv_timeout: Duration::from_millis(args.rcv_timeout.unwrap_or(RCV_TIMEOUT_MS)),
        control_timeout: Duration::from_millis(args.control_timeout.max(1)),
        limits: Limits {
            max_tests: args.max_tests.max(1),
            // 0: no limit, as iperf3.
            max_duration_s: args.server_max_duration.filter(|&d| d > 0),
            max_streams: args.server_max_streams,
            max_rate_bps: args.server_bitrate_limit.map(|(r, _)| r).filter(|&r| r > 0),
            rate_window: Duration::from_secs(args.server_bitrate_limit.map_or(5, |(_, w)| w)),
            max_pending_per_source: args.max_pending_per_source.max(1),
            max_tests_per_source: args.max_tests_per_source.unwrap_or(args.max_tests).max(1),
            grace: Duration::from_secs(args.server_grace),
        },
        udp_gso: !args.no_gso,
        affinity: args.stream_cpus()?,
        events: server_events(args, c)?,
        auth: server_auth(args)?,
        mptcp: args.mptcp,
        debug: args.debug.unwrap_or(0),
        file: args.file.clone(),
    };
    // The output (a --logfile) is opened, and the listening port checked,
    // before detaching, so a daemon that cannot serve says why and exits 2.
    let out = output_sink(args, c)?;
    let pidfile = (args.pidfile.as_deref())
        .map(linerate_iperf::pidfile::absolute)
        .transpose()?;
    let listener = linerate_iperf::net::tcp_listener(
        linerate_iperf::net::server_addr(opts.bind, opts.family, opts.port),
        opts.family,
        opts.bind_dev.as_deref(),
        opts.mptcp,
    )
    .with_context(|| format!("server on port {}", args.port))?;
    if args.daemon {
        linerate_backend::clock::daemonize().context("-D: unable to detach")?;
    }
    let _pid = pidfile.as_deref().map(PidFile::write).transpose()?;
    let stop = terminate_flag()?;
    if let Ok(mut o) = out.lock() {
        o.write_all(args.verbose_banner(false).as_bytes())?;
    }
    linerate_iperf::server::serve(listener, &opts, out, stop)
        .with_context(|| format!("server on port {}", args.port))?;
    Ok(0)
}

fn padding(args: &IperfArgs) -> auth::Padding {
    if args.use_pkcs1_padding {
        auth::Padding::Pkcs1
    } else {
        auth::Padding::Oaep
    }
}

/// The server's key and users file, checked before serving (iperf3's
/// errors 23 and 35).
fn server_auth(args: &IperfArgs) -> Result<Option<ServerAuth>> {
    let (key, users) = match (&args.rsa_private_key_path, &args.authorized_users_path) {
        (None, None) => {
            if args.time_skew_threshold.is_some() {
                bail!("{}", IErr::SET_SERVER_AUTH.message());
            }
            return Ok(None);
        }
        (Some(k), Some(u)) => (k, u),
        _ => bail!("{}", IErr::SET_SERVER_AUTH.message()),
    };
    Ok(Some(linerate_iperf::credentials::server_auth(
        key,
        users,
        args.time_skew_threshold.unwrap_or(10),
        padding(args),
    )?))
}

/// The client's credentials (iperf3's error 22 when the user or the key
/// is missing).
fn client_auth(args: &IperfArgs) -> Result<Option<ClientAuth>> {
    let (user, key) = match (&args.username, &args.rsa_public_key_path) {
        (None, None) => return Ok(None),
        (Some(u), Some(k)) => (u, k),
        _ => bail!("{}", IErr::SET_CLIENT_AUTH.message()),
    };
    Ok(Some(linerate_iperf::credentials::client_auth(
        user,
        key,
        padding(args),
    )?))
}

fn run_client(args: &IperfArgs, host: &str, c: &Console) -> Result<u8> {
    if args.repeat.asked() {
        let shown = super::out::Shown {
            json: args.json,
            json_stream: args.json_stream,
            live: args.live,
            report: args.report.as_deref().map(|p| (p, args.force)),
        };
        return args
            .repeat
            .run(shown, c, &mut |hold| run_client_once(args, host, hold, c));
    }
    Ok(run_client_once(args, host, false, c)?.exit_code)
}

/// One client test through the run model (`linerate_iperf::run_client`).
/// With `quiet` (repeated with -J: one document for all runs, printed at
/// the end) its own output is held back.
fn run_client_once(
    args: &IperfArgs,
    host: &str,
    quiet: bool,
    c: &Console,
) -> Result<linerate_run::Ended> {
    let mut opts = client_options(args, host)?;
    let out: Arc<Mutex<dyn Write + Send>> = if quiet {
        Arc::new(Mutex::new(std::io::sink()))
    } else {
        output_sink(args, c)?
    };
    let _pid = args.pidfile.as_deref().map(PidFile::write).transpose()?;
    // With --live, q (SIGINT) ends the test early with its results, as
    // if its time ran out; SIGTERM still terminates it.
    let stop = if live_view(args, c) {
        let finish = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGINT, finish.clone())
            .context("installing signal handlers")?;
        let stop = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())
            .context("installing signal handlers")?;
        opts.finish_early = Some(finish);
        stop
    } else {
        terminate_flag()?
    };
    let mut out = LockedWriter(out);
    out.write_all(args.verbose_banner(true).as_bytes())?;
    let end = linerate_iperf::run_client(&mut opts, &mut out, &stop, Box::new(reporters(args, c)?));
    if let Some(e) = &end.error
        && !args.json
        && !args.json_stream
    {
        eprintln!("linerate: error: {e}");
    }
    Ok(end.ended)
}

/// UDP GSO for this client: on (linerate's default) unless `--no-gso`,
/// or unless the datagrams leave by a veth that would hand a GSO batch to
/// its peer whole (then off, and said: its datagrams would be counted and
/// never cross as datagrams; `--gsro` keeps it on).
fn udp_gso(args: &IperfArgs, host: &str) -> bool {
    if args.no_gso {
        return false;
    }
    if !args.udp || args.gsro || args.reverse {
        return true;
    }
    match linerate_iperf::net::veth_passing_gso_whole(host, args.port) {
        Some(iface) => {
            eprintln!(
                "linerate: UDP GSO off: {iface} is a veth that hands a GSO batch to its peer whole, so the datagrams would be counted but never cross as datagrams (--gsro keeps it on; `ethtool -K {iface} tx-udp-segmentation off` makes the kernel split them)"
            );
            false
        }
        None => true,
    }
}

/// The client's options from its flags (no reporters, no early finish:
/// the run sets those).
fn client_options(args: &IperfArgs, host: &str) -> Result<ClientOptions> {
    let (params, bandwidth_given) = args.params()?;
    Ok(ClientOptions {
        host: host.to_string(),
        port: args.port,
        params,
        time: fractional_time(args.time),
        bandwidth_given,
        bind: args.bind.as_ref().map(|(ip, _)| *ip),
        bind_dev: args.bind_device(),
        cport: args.cport,
        family: args.family(),
        interval: args.interval()?,
        output: args.output(),
        connect_timeout: Duration::from_millis(args.connect_timeout.max(1)),
        control_timeout: if args.control_timeout == IperfArgs::default_values().control_timeout {
            Duration::from_secs(30)
        } else {
            Duration::from_millis(args.control_timeout.max(1))
        },
        udp_gso: udp_gso(args, host),
        affinity: args.stream_cpus()?,
        zerocopy: args.zerocopy,
        events: None,
        cntl_ka: args.cntl_ka,
        rcv_timeout: Duration::from_millis(args.rcv_timeout.unwrap_or(RCV_TIMEOUT_MS)),
        snd_timeout: args
            .snd_timeout
            .map(|ms| Duration::from_millis(u64::from(ms))),
        auth: client_auth(args)?,
        debug: args.debug.unwrap_or(0),
        file: args.file.clone(),
        finish_early: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> IperfArgs {
        IperfArgs::try_parse_from(std::iter::once("linerate").chain(a.iter().copied())).unwrap()
    }

    #[test]
    fn flags_make_iperf3_params() {
        let (p, given) = args(&[
            "-c", "h", "-u", "-b", "10M/20", "-l", "1400", "-P", "3", "--bidir", "-t", "5", "-O",
            "1",
        ])
        .params()
        .unwrap();
        assert!(given);
        assert_eq!(
            (
                p.protocol,
                p.mode,
                p.bandwidth_bps,
                p.burst,
                p.len,
                p.parallel,
                p.time_s,
                p.omit_s
            ),
            (
                Protocol::Udp,
                TestMode::Bidir,
                10_000_000,
                20,
                1400,
                3,
                5,
                1
            )
        );
        let (p, given) = args(&["-c", "h", "-n", "20M", "-w", "256K", "-S", "0x28", "-R"])
            .params()
            .unwrap();
        assert!(!given);
        assert_eq!(
            (p.num_bytes, p.time_s, p.window, p.tos, p.mode),
            (20 << 20, 0, 262_144, 0x28, TestMode::Reverse)
        );
        let (p, _) = args(&["-c", "h", "--dscp", "ef"]).params().unwrap();
        assert_eq!(p.tos, 46 << 2);
        let (p, _) = args(&["-c", "h", "--dscp", "af41"]).params().unwrap();
        assert_eq!(p.tos, 34 << 2);
    }

    #[test]
    fn a_flag_of_the_other_side_is_an_error() {
        let e = run(&args(&["-c", "h", "--max-tests", "3"]), &Console::default()).unwrap_err();
        assert!(e.to_string().contains("server only: --max-tests"), "{e}");
        let e = run(&args(&["-c", "h", "-1"]), &Console::default()).unwrap_err();
        assert!(e.to_string().contains("server only: -1/--one-off"), "{e}");
        let e = run(&args(&["-s", "-n", "1M", "-R"]), &Console::default()).unwrap_err();
        assert!(
            e.to_string()
                .contains("client only: -n/--bytes, -R/--reverse"),
            "{e}"
        );
        assert!(args(&["-c", "h", "-P", "2"]).server_only_given().is_empty());
        assert!(
            args(&["-s", "-p", "5999", "-i", "2"])
                .client_only_given()
                .is_empty()
        );
    }

    #[test]
    fn bad_flags_fail_like_iperf3() {
        assert!(args(&["-c", "h", "-R", "--bidir"]).params().is_err());
        assert!(args(&["-c", "h", "-P", "200"]).params().is_err());
        assert!(args(&["-c", "h", "-u", "-l", "8"]).params().is_err());
        assert!(args(&["-c", "h", "-b", "1M/0"]).params().is_err());
        assert!(IperfArgs::try_parse_from(["linerate", "-c", "h", "-t", "90000"]).is_err());
        assert!(IperfArgs::try_parse_from(["linerate", "-c", "h", "-t", "-1"]).is_err());
        assert!(args(&["-c", "h", "-t", "1", "-n", "1M"]).params().is_err());
        assert!(
            args(&["-c", "h", "--rcv-timeout", "1000"])
                .params()
                .is_err()
        );
        assert!(
            args(&["-c", "h", "-R", "--rcv-timeout", "1000"])
                .params()
                .is_ok()
        );
        assert!(IperfArgs::try_parse_from(["linerate", "-c", "h", "-S", "300"]).is_err());
        assert!(IperfArgs::try_parse_from(["linerate", "-c", "h", "--dscp", "af51"]).is_err());
    }
}
