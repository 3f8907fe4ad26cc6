//! iperf3's command line, as the binary's argument parser fills it, made
//! into the options of a server or a client by iperf3's rules: which side
//! a flag belongs to, which flags go together, what `-A`, `-b`, `-t`, `-F`
//! mean ([`params`]), and the [`ServerOptions`](crate::ServerOptions) and
//! [`ClientOptions`](crate::ClientOptions) they make ([`options`]). The
//! value grammar of each flag is [`parse`].

pub mod options;
pub mod params;
pub mod parse;

use linerate_iperf_proto::IErr;
use linerate_iperf_proto::report::OutputMode;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// `-p`'s default.
pub const PORT: u16 = 5201;
/// `-i`'s default, seconds.
pub const INTERVAL_S: f64 = 1.0;
/// `--control-timeout`'s default, ms (a client's is 30000 unless given).
pub const CONTROL_TIMEOUT_MS: u64 = 10_000;
/// A client's control timeout when `--control-timeout` is left at its default.
pub const CLIENT_CONTROL_TIMEOUT: Duration = Duration::from_secs(30);
/// `--server-grace`'s default, seconds (iperf3's 40).
pub const SERVER_GRACE_S: u64 = 40;
/// `--max-tests`' default (one at a time, as iperf3).
pub const MAX_TESTS: usize = 1;
/// `--max-pending-per-source`'s default.
pub const MAX_PENDING_PER_SOURCE: usize = 8;
/// `-P`'s default.
pub const PARALLEL: u32 = 1;
/// `-O`'s default.
pub const OMIT_S: u32 = 0;
/// `--connect-timeout`'s default, ms.
pub const CONNECT_TIMEOUT_MS: u64 = 10_000;
/// `--rcv-timeout`'s default, ms (iperf3's).
pub const RCV_TIMEOUT_MS: u64 = 120_000;

/// iperf3's flags as given (each as its parser read it; the defaults are
/// this module's constants). The binary's own output flags (`--logfile`,
/// `--csv`, `--live`, …) are not here: they are wiring.
#[derive(Debug, Clone, PartialEq)]
pub struct Flags {
    pub server: bool,
    pub client: Option<String>,
    pub port: u16,
    pub format: Option<char>,
    pub interval_s: f64,
    pub json: bool,
    pub json_stream: bool,
    pub json_stream_full_output: bool,
    pub verbose: bool,
    /// `-B HOST[%DEV]`.
    pub bind: Option<(IpAddr, Option<String>)>,
    pub bind_dev: Option<String>,
    pub cntl_ka: Option<(u32, u32, u32)>,
    pub ipv4: bool,
    pub ipv6: bool,
    pub one_off: bool,
    pub idle_timeout_s: Option<u64>,
    pub rcv_timeout_ms: Option<u64>,
    pub snd_timeout_ms: Option<u32>,
    pub server_max_duration_s: Option<u32>,
    pub control_timeout_ms: u64,
    /// `--server-bitrate-limit RATE[/SECONDS]`.
    pub server_bitrate_limit: Option<(u64, u64)>,
    pub server_grace_s: u64,
    pub max_tests: usize,
    pub max_tests_per_source: Option<usize>,
    pub max_pending_per_source: usize,
    pub server_max_streams: Option<u32>,
    pub udp: bool,
    /// `-b RATE[/BURST]` as written.
    pub bitrate: Option<String>,
    pub fq_rate_bps: Option<u64>,
    pub time_s: Option<f64>,
    pub bytes: Option<u64>,
    pub blockcount: Option<u64>,
    pub length: Option<u64>,
    pub cport: Option<u16>,
    pub parallel: u32,
    pub reverse: bool,
    pub bidir: bool,
    pub window: Option<u64>,
    pub mss: Option<u32>,
    pub nodelay: bool,
    /// `-S` as a TOS byte.
    pub tos: Option<u32>,
    /// `--dscp` as a TOS byte (the DSCP in its upper six bits).
    pub dscp: Option<u32>,
    pub omit_s: u32,
    pub title: Option<String>,
    pub extra_data: Option<String>,
    pub congestion: Option<String>,
    pub get_server_output: bool,
    pub udp_counters_64bit: bool,
    pub repeating_payload: bool,
    pub zerocopy: bool,
    /// `-A n[,m]` as written.
    pub affinity: Option<String>,
    /// `--stream-cpus`.
    pub stream_cpus: Option<Vec<usize>>,
    pub dont_fragment: bool,
    pub no_gso: bool,
    pub gsro: bool,
    pub connect_timeout_ms: u64,
    pub daemon: bool,
    pub no_fq_socket_pacing: bool,
    pub skip_rx_copy: bool,
    pub mptcp: bool,
    pub flowlabel: Option<u32>,
    pub debug: Option<u8>,
    pub file: Option<PathBuf>,
    pub username: Option<String>,
    pub rsa_public_key_path: Option<PathBuf>,
    pub rsa_private_key_path: Option<PathBuf>,
    pub authorized_users_path: Option<PathBuf>,
    pub time_skew_threshold_s: Option<i64>,
    pub use_pkcs1_padding: bool,
    /// `--repeat` and `--ci-target` given (client flags of linerate's).
    pub repeat: bool,
    pub ci_target: bool,
}

impl Default for Flags {
    /// No flag given.
    fn default() -> Flags {
        Flags {
            server: false,
            client: None,
            port: PORT,
            format: None,
            interval_s: INTERVAL_S,
            json: false,
            json_stream: false,
            json_stream_full_output: false,
            verbose: false,
            bind: None,
            bind_dev: None,
            cntl_ka: None,
            ipv4: false,
            ipv6: false,
            one_off: false,
            idle_timeout_s: None,
            rcv_timeout_ms: None,
            snd_timeout_ms: None,
            server_max_duration_s: None,
            control_timeout_ms: CONTROL_TIMEOUT_MS,
            server_bitrate_limit: None,
            server_grace_s: SERVER_GRACE_S,
            max_tests: MAX_TESTS,
            max_tests_per_source: None,
            max_pending_per_source: MAX_PENDING_PER_SOURCE,
            server_max_streams: None,
            udp: false,
            bitrate: None,
            fq_rate_bps: None,
            time_s: None,
            bytes: None,
            blockcount: None,
            length: None,
            cport: None,
            parallel: PARALLEL,
            reverse: false,
            bidir: false,
            window: None,
            mss: None,
            nodelay: false,
            tos: None,
            dscp: None,
            omit_s: OMIT_S,
            title: None,
            extra_data: None,
            congestion: None,
            get_server_output: false,
            udp_counters_64bit: false,
            repeating_payload: false,
            zerocopy: false,
            affinity: None,
            stream_cpus: None,
            dont_fragment: false,
            no_gso: false,
            gsro: false,
            connect_timeout_ms: CONNECT_TIMEOUT_MS,
            daemon: false,
            no_fq_socket_pacing: false,
            skip_rx_copy: false,
            mptcp: false,
            flowlabel: None,
            debug: None,
            file: None,
            username: None,
            rsa_public_key_path: None,
            rsa_private_key_path: None,
            authorized_users_path: None,
            time_skew_threshold_s: None,
            use_pkcs1_padding: false,
            repeat: false,
            ci_target: false,
        }
    }
}

/// Flags that make no test, said as iperf3 says them.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FlagError {
    #[error("cannot be both server and client")]
    BothSides,
    #[error("parameter error: must either be a client (-c) or server (-s)")]
    NoSide,
    #[error("parameter error: some option you are trying to set is client only: {}", .0.join(", "))]
    ClientOnly(Vec<&'static str>),
    #[error("parameter error: some option you are trying to set is server only: {}", .0.join(", "))]
    ServerOnly(Vec<&'static str>),
    #[error("report interval must be 0 or between 0.1 and 60 seconds")]
    Interval,
    #[error("burst after '/' must be a number: {0}")]
    Burst(String),
    #[error("{0}")]
    Rate(String),
    #[error("invalid burst count (maximum = 1000)")]
    BurstCount,
    #[error("cannot be both reverse and bidirectional")]
    ReverseAndBidir,
    #[error(
        "parameter error: client receive timeout is valid only in receiving mode (-R or --bidir)"
    )]
    RcvTimeoutNotReceiving,
    #[error("invalid number of parallel streams (min = 1, max = 128)")]
    Parallel,
    #[error("cannot transfer file using UDP")]
    FileOverUdp,
    #[error("-F writes what arrives to the file: it cannot be used with --skip-rx-copy")]
    FileSkipRxCopy,
    #[error("parameter error: only one test end condition (-t, -n, -k) may be specified")]
    TwoEnds,
    #[error("block size invalid (minimum = 16 bytes, maximum = 65507 bytes)")]
    UdpBlockSize,
    #[error("block size too large (maximum = 1048576 bytes)")]
    TcpBlockSize,
    #[error("-A {0}: unable to set CPU affinity (a CPU number 0-1024)")]
    Affinity(String),
    #[error("-A {0}: unable to set CPU affinity (server CPU after the comma)")]
    ServerAffinity(String),
    /// iperf3's error 23 (the key without the users file, or either
    /// without the other, or a skew without them).
    #[error("{}", IErr::SET_SERVER_AUTH.message())]
    ServerAuth,
    /// iperf3's error 22 (a user without a key or a key without a user).
    #[error("{}", IErr::SET_CLIENT_AUTH.message())]
    ClientAuth,
}

/// Which side the flags ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Side<'a> {
    Server,
    Client(&'a str),
}

impl Flags {
    /// The side asked for (`-s` or `-c HOST`), with no flag of the other
    /// (iperf3's IESERVERONLY and IECLIENTONLY).
    pub fn side(&self) -> Result<Side<'_>, FlagError> {
        match (&self.client, self.server) {
            (Some(_), true) => Err(FlagError::BothSides),
            (None, false) => Err(FlagError::NoSide),
            (None, true) => match self.client_only_given() {
                g if g.is_empty() => Ok(Side::Server),
                g => Err(FlagError::ClientOnly(g)),
            },
            (Some(host), false) => match self.server_only_given() {
                g if g.is_empty() => Ok(Side::Client(host)),
                g => Err(FlagError::ServerOnly(g)),
            },
        }
    }

    /// Server-only flags given (iperf3's IESERVERONLY when a client has them).
    pub fn server_only_given(&self) -> Vec<&'static str> {
        [
            ("-1/--one-off", self.one_off),
            ("--idle-timeout", self.idle_timeout_s.is_some()),
            (
                "--server-max-duration",
                self.server_max_duration_s.is_some(),
            ),
            (
                "--server-bitrate-limit",
                self.server_bitrate_limit.is_some(),
            ),
            ("--max-tests", self.max_tests != MAX_TESTS),
            ("--server-grace", self.server_grace_s != SERVER_GRACE_S),
            ("-D/--daemon", self.daemon),
            (
                "--max-tests-per-source",
                self.max_tests_per_source.is_some(),
            ),
            (
                "--max-pending-per-source",
                self.max_pending_per_source != MAX_PENDING_PER_SOURCE,
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
            (
                "--time-skew-threshold",
                self.time_skew_threshold_s.is_some(),
            ),
        ]
        .into_iter()
        .filter_map(|(n, given)| given.then_some(n))
        .collect()
    }

    /// Client-only flags given (iperf3's IECLIENTONLY when a server has them).
    pub fn client_only_given(&self) -> Vec<&'static str> {
        [
            ("-u/--udp", self.udp),
            ("--cntl-ka", self.cntl_ka.is_some()),
            ("--snd-timeout", self.snd_timeout_ms.is_some()),
            ("-b/--bitrate", self.bitrate.is_some()),
            ("-t/--time", self.time_s.is_some()),
            ("-n/--bytes", self.bytes.is_some()),
            ("-k/--blockcount", self.blockcount.is_some()),
            ("-l/--length", self.length.is_some()),
            ("-P/--parallel", self.parallel != PARALLEL),
            ("-R/--reverse", self.reverse),
            ("--bidir", self.bidir),
            ("-w/--window", self.window.is_some()),
            ("-M/--set-mss", self.mss.is_some()),
            ("-N/--no-delay", self.nodelay),
            ("-O/--omit", self.omit_s != OMIT_S),
            ("-T/--title", self.title.is_some()),
            ("--cport", self.cport.is_some()),
            ("-C/--congestion", self.congestion.is_some()),
            ("--get-server-output", self.get_server_output),
            ("--udp-counters-64bit", self.udp_counters_64bit),
            ("--repeating-payload", self.repeating_payload),
            ("--extra-data", self.extra_data.is_some()),
            ("--dont-fragment", self.dont_fragment),
            ("--fq-rate", self.fq_rate_bps.is_some()),
            ("--no-fq-socket-pacing", self.no_fq_socket_pacing),
            ("-S/--tos", self.tos.is_some()),
            ("--dscp", self.dscp.is_some()),
            ("-Z/--zerocopy", self.zerocopy),
            (
                "--connect-timeout",
                self.connect_timeout_ms != CONNECT_TIMEOUT_MS,
            ),
            ("--username", self.username.is_some()),
            ("--repeat", self.repeat),
            ("--ci-target", self.ci_target),
            ("--skip-rx-copy", self.skip_rx_copy),
            ("-L/--flowlabel", self.flowlabel.is_some()),
            ("--rsa-public-key-path", self.rsa_public_key_path.is_some()),
        ]
        .into_iter()
        .filter_map(|(n, given)| given.then_some(n))
        .collect()
    }

    /// What the flags warn of before anything runs: what of `-A` iperf3
    /// would ignore (`-A 2/3`: the `/3`), `--no-fq-socket-pacing`.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(a) = &self.affinity
            && !a.contains(',')
            && let (Some(n), rest) = linerate_iperf_proto::units::c_integer_prefix(a)
            && !rest.is_empty()
        {
            w.push(format!(
                "-A {a}: '{rest}' ignored (iperf3 reads -A n or -A n,m; for the server's CPU write -A {n},M)"
            ));
        }
        if self.no_fq_socket_pacing {
            w.push(
                "--no-fq-socket-pacing is deprecated (as in iperf3 3.21): use --fq-rate 0".into(),
            );
        }
        w
    }

    /// `--bind-dev DEV`, or the DEV of `-B HOST%DEV`.
    pub fn bind_device(&self) -> Option<String> {
        self.bind_dev
            .clone()
            .or_else(|| self.bind.as_ref().and_then(|(_, d)| d.clone()))
    }

    pub fn family(&self) -> crate::Family {
        use crate::Family;
        match (self.ipv4, self.ipv6) {
            (true, _) => Family::V4,
            (_, true) => Family::V6,
            _ => Family::Any,
        }
    }

    pub fn output(&self) -> OutputMode {
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
    pub fn verbose_banner(&self, with_time: bool) -> String {
        if !self.verbose || self.json || self.json_stream {
            return String::new();
        }
        let now = with_time.then(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
        crate::output::verbose_banner(now)
    }

    /// `-i`, checked: 0 or 0.1 to 60 seconds.
    pub fn interval(&self) -> Result<Duration, FlagError> {
        let i = self.interval_s;
        if !(0.0..=60.0).contains(&i) || (i > 0.0 && i < 0.1) {
            return Err(FlagError::Interval);
        }
        Ok(Duration::from_secs_f64(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> Flags {
        Flags {
            client: Some("h".into()),
            ..Flags::default()
        }
    }

    #[test]
    fn a_flag_of_the_other_side_is_an_error() {
        let f = Flags {
            max_tests: 3,
            ..client()
        };
        assert_eq!(
            f.side().unwrap_err().to_string(),
            "parameter error: some option you are trying to set is server only: --max-tests"
        );
        let f = Flags {
            one_off: true,
            ..client()
        };
        assert_eq!(f.side(), Err(FlagError::ServerOnly(vec!["-1/--one-off"])));
        let f = Flags {
            server: true,
            bytes: Some(1 << 20),
            reverse: true,
            ..Flags::default()
        };
        assert_eq!(
            f.side().unwrap_err().to_string(),
            "parameter error: some option you are trying to set is client only: -n/--bytes, -R/--reverse"
        );
        let f = Flags {
            parallel: 2,
            ..client()
        };
        assert_eq!(f.side(), Ok(Side::Client("h")));
        let f = Flags {
            server: true,
            port: 5999,
            interval_s: 2.0,
            ..Flags::default()
        };
        assert_eq!(f.side(), Ok(Side::Server));
        assert_eq!(Flags::default().side(), Err(FlagError::NoSide));
        let both = Flags {
            server: true,
            ..client()
        };
        assert_eq!(both.side(), Err(FlagError::BothSides));
    }

    #[test]
    fn warnings_say_what_is_ignored() {
        let f = Flags {
            affinity: Some("2/3".into()),
            no_fq_socket_pacing: true,
            ..client()
        };
        assert_eq!(
            f.warnings(),
            [
                "-A 2/3: '/3' ignored (iperf3 reads -A n or -A n,m; for the server's CPU write -A 2,M)",
                "--no-fq-socket-pacing is deprecated (as in iperf3 3.21): use --fq-rate 0"
            ]
        );
        let f = Flags {
            affinity: Some("2,3".into()),
            ..client()
        };
        assert!(f.warnings().is_empty());
    }

    #[test]
    fn the_interval_is_0_or_a_tenth_to_a_minute() {
        let at = |s| {
            Flags {
                interval_s: s,
                ..client()
            }
            .interval()
        };
        assert_eq!(at(0.0), Ok(Duration::ZERO));
        assert_eq!(at(0.5), Ok(Duration::from_millis(500)));
        assert_eq!(at(0.05), Err(FlagError::Interval));
        assert_eq!(at(61.0), Err(FlagError::Interval));
    }
}
