//! `linerate server`, `linerate client`, and the iperf3-compatible forms
//! `linerate -s` / `linerate -c HOST` (also when invoked as `iperf3`):
//! the same flags with the same meanings as iperf3. Here are their
//! declarations and the wiring (output, reporters, signals, daemon);
//! `linerate_iperf::flags` judges them by iperf3's rules and makes the
//! server's and the client's options.

use crate::output::Console;
use anyhow::{Context, Result, bail};
use clap::{ArgAction, Parser};
use linerate_iperf::flags::{self, Flags, Side, parse};
use linerate_iperf::output::LockedWriter;
use linerate_iperf::pidfile::PidFile;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use std::io::Write;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// The signals that end a server, or a client's test (with its results).
const TERMINATE: &[i32] = &[SIGINT, SIGTERM, SIGHUP];

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
    #[arg(short = 'p', long, default_value_t = flags::PORT)]
    pub port: u16,
    /// Format to report: k/m/g/t (bits), K/M/G/T (bytes).
    #[arg(short = 'f', long, value_parser = parse::format)]
    pub format: Option<char>,
    /// Seconds between periodic reports (0 disables).
    #[arg(short = 'i', long, default_value_t = flags::INTERVAL_S)]
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
    #[arg(short = 'B', long, value_name = "HOST[%DEV]", value_parser = parse::bind)]
    pub bind: Option<(IpAddr, Option<String>)>,
    /// Send and receive only through this interface (SO_BINDTODEVICE).
    #[arg(long, value_name = "DEV")]
    pub bind_dev: Option<String>,
    /// Client: TCP keepalive on the control connection, optionally
    /// IDLE/INTERVAL/COUNT (seconds, seconds, probes; empty: the system's).
    #[arg(long, value_name = "IDLE/INTERVAL/COUNT", num_args = 0..=1, default_missing_value = "", require_equals = true, value_parser = parse::keepalive)]
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
    #[arg(long, default_value_t = flags::CONTROL_TIMEOUT_MS, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub control_timeout: u64,
    /// Server: highest total rate per test, bit/s (K/M/G suffixes): a test
    /// asking more (or no limit) is refused, and one whose streams move more,
    /// averaged over SECONDS (default 5), is ended (0: no limit, as iperf3).
    #[arg(long, value_name = "RATE[/SECONDS]", value_parser = parse::rate_window)]
    pub server_bitrate_limit: Option<(u64, u64)>,
    /// Server: seconds a test may run past its asked time (+ omit) before
    /// the server ends it (iperf3's 40; tests that end by -n/-k: past
    /// --server-max-duration, or 600 s).
    #[arg(long, default_value_t = flags::SERVER_GRACE_S, value_name = "SECONDS")]
    pub server_grace: u64,
    /// Server: tests served at once (1, as iperf3; more for many clients).
    #[arg(long, default_value_t = flags::MAX_TESTS, value_name = "N", value_parser = parse::at_least_one)]
    pub max_tests: usize,
    /// Server: tests one source address may run at once (default: --max-tests).
    #[arg(long, value_name = "N", value_parser = parse::at_least_one)]
    pub max_tests_per_source: Option<usize>,
    /// Server: connections one source address may have open before they
    /// send their cookie (past it, its oldest is closed).
    #[arg(long, default_value_t = flags::MAX_PENDING_PER_SOURCE, value_name = "N", value_parser = parse::at_least_one)]
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
    #[arg(long, value_parser = parse::rate)]
    pub fq_rate: Option<u64>,
    /// Seconds to transmit (default 10; fractions as everywhere in
    /// linerate: iperf3's parameters carry whole seconds, so a server is
    /// told the time rounded up, and this client ends the test on time).
    #[arg(short = 't', long, value_name = "SECONDS", value_parser = parse::test_time)]
    pub time: Option<f64>,
    /// Bytes to transmit (instead of -t), K/M/G suffixes.
    #[arg(short = 'n', long, value_parser = parse::size)]
    pub bytes: Option<u64>,
    /// Blocks (writes/datagrams) to transmit (instead of -t).
    #[arg(short = 'k', long, value_parser = parse::size)]
    pub blockcount: Option<u64>,
    /// Block size to read or write: a TCP buffer or a UDP datagram's
    /// payload (TCP default 128K; UDP default path MSS). Not a frame size
    /// (blast's `--size` is one: a UDP payload of -l bytes over IPv4 is a
    /// frame of -l + 46).
    #[arg(short = 'l', long, value_parser = parse::size)]
    pub length: Option<u64>,
    /// Client port (stream i uses PORT+i).
    #[arg(long, value_name = "PORT")]
    pub cport: Option<u16>,
    /// Parallel streams.
    #[arg(short = 'P', long, default_value_t = flags::PARALLEL)]
    pub parallel: u32,
    /// Reverse: the server sends.
    #[arg(short = 'R', long)]
    pub reverse: bool,
    /// Both directions at once.
    #[arg(long)]
    pub bidir: bool,
    /// Socket buffer sizes (K/M suffixes).
    #[arg(short = 'w', long, value_parser = parse::size)]
    pub window: Option<u64>,
    /// TCP maximum segment size.
    #[arg(short = 'M', long = "set-mss")]
    pub mss: Option<u32>,
    /// TCP_NODELAY.
    #[arg(short = 'N', long = "no-delay")]
    pub nodelay: bool,
    /// IP type of service (0x10 style or decimal).
    #[arg(short = 'S', long, value_parser = parse::tos)]
    pub tos: Option<u32>,
    /// DSCP value (number or name such as ef, af41, cs5).
    #[arg(long, value_parser = parse_dscp)]
    pub dscp: Option<u32>,
    /// Omit the first N seconds from the totals.
    #[arg(short = 'O', long, default_value_t = flags::OMIT_S)]
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
    /// Pin stream i to CPU LIST[i % len] (e.g. 0,1 or 2-5): one core per
    /// stream, as blast's and rr's `--cores`.
    #[arg(long = "cores", alias = "stream-cpus", value_name = "CPUS", value_parser = parse_cpus)]
    pub stream_cpus: Option<CpuList>,
    /// Set DF on UDP datagrams (IPv4).
    #[arg(long)]
    pub dont_fragment: bool,
    /// Do not use UDP segmentation offload (GSO) when sending UDP.
    #[arg(long)]
    pub no_gso: bool,
    /// Control connection timeout, ms.
    #[arg(long, default_value_t = flags::CONNECT_TIMEOUT_MS, value_name = "MS")]
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
    #[arg(short = 'L', long, value_parser = parse::flowlabel)]
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

/// `--dscp` as a TOS byte (the DSCP in its upper six bits).
fn parse_dscp(s: &str) -> Result<u32, String> {
    super::dscp(s).map(|d| u32::from(d) << 2)
}

/// `linerate client` and `linerate server` share iperf3's flag set; each
/// shows only its own side's flags (and not `-s`/`-c`) in its help.
pub fn split_help(cmd: clap::Command) -> clap::Command {
    let hide = |c: clap::Command, ids: &[&str]| {
        ids.iter()
            .chain(&["server", "client"])
            .fold(c, |c, id| c.mut_arg(*id, |a| a.hide(true)))
    };
    cmd.mut_subcommand("client", |c| hide(c, parse::SERVER_ONLY_IDS))
        .mut_subcommand("server", |c| hide(c, parse::CLIENT_ONLY_IDS))
}

impl IperfArgs {
    /// iperf3's flags as given, for `linerate_iperf::flags` to judge.
    pub fn flags(&self) -> Flags {
        Flags {
            server: self.server,
            client: self.client.clone(),
            port: self.port,
            format: self.format,
            interval_s: self.interval,
            json: self.json,
            json_stream: self.json_stream,
            json_stream_full_output: self.json_stream_full_output,
            verbose: self.verbose,
            bind: self.bind.clone(),
            bind_dev: self.bind_dev.clone(),
            cntl_ka: self.cntl_ka,
            ipv4: self.ipv4,
            ipv6: self.ipv6,
            one_off: self.one_off,
            idle_timeout_s: self.idle_timeout,
            rcv_timeout_ms: self.rcv_timeout,
            snd_timeout_ms: self.snd_timeout,
            server_max_duration_s: self.server_max_duration,
            control_timeout_ms: self.control_timeout,
            server_bitrate_limit: self.server_bitrate_limit,
            server_grace_s: self.server_grace,
            max_tests: self.max_tests,
            max_tests_per_source: self.max_tests_per_source,
            max_pending_per_source: self.max_pending_per_source,
            server_max_streams: self.server_max_streams,
            udp: self.udp,
            bitrate: self.bitrate.clone(),
            fq_rate_bps: self.fq_rate,
            time_s: self.time,
            bytes: self.bytes,
            blockcount: self.blockcount,
            length: self.length,
            cport: self.cport,
            parallel: self.parallel,
            reverse: self.reverse,
            bidir: self.bidir,
            window: self.window,
            mss: self.mss,
            nodelay: self.nodelay,
            tos: self.tos,
            dscp: self.dscp,
            omit_s: self.omit,
            title: self.title.clone(),
            extra_data: self.extra_data.clone(),
            congestion: self.congestion.clone(),
            get_server_output: self.get_server_output,
            udp_counters_64bit: self.udp_counters_64bit,
            repeating_payload: self.repeating_payload,
            zerocopy: self.zerocopy,
            affinity: self.affinity.clone(),
            stream_cpus: self.stream_cpus.as_ref().map(|l| l.0.clone()),
            dont_fragment: self.dont_fragment,
            no_gso: self.no_gso,
            gsro: self.gsro,
            connect_timeout_ms: self.connect_timeout,
            daemon: self.daemon,
            no_fq_socket_pacing: self.no_fq_socket_pacing,
            skip_rx_copy: self.skip_rx_copy,
            mptcp: self.mptcp,
            flowlabel: self.flowlabel,
            debug: self.debug,
            file: self.file.clone(),
            username: self.username.clone(),
            rsa_public_key_path: self.rsa_public_key_path.clone(),
            rsa_private_key_path: self.rsa_private_key_path.clone(),
            authorized_users_path: self.authorized_users_path.clone(),
            time_skew_threshold_s: self.time_skew_threshold,
            use_pkcs1_padding: self.use_pkcs1_padding,
            repeat: self.repeat.repeat.is_some(),
            ci_target: self.repeat.ci_target.is_some(),
        }
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
    let inner = super::out::main_output(args.logfile.as_deref(), c)?;
    let stamps = args.timestamps.as_deref();
    Ok(linerate_iperf::output::shared(inner, stamps))
}

/// Runs iperf3-style arguments; returns the process exit code.
pub fn run(args: &IperfArgs, c: &Console) -> Result<u8> {
    if args.version {
        crate::say!(c, "{}", linerate_iperf::output::version_text());
        return Ok(0);
    }
    let flags = args.flags();
    for w in flags.warnings() {
        eprintln!("linerate: warning: {w}");
    }
    match flags.side()? {
        Side::Server => run_server(args, &flags, c),
        Side::Client(host) => run_client(args, &flags, host, c),
    }
}

/// The server: its options, its output and listening port checked before
/// detaching (so a daemon that cannot serve says why and exits 2), then
/// `linerate_iperf::server::serve` until a signal.
fn run_server(args: &IperfArgs, flags: &Flags, c: &Console) -> Result<u8> {
    let opts = flags.server_options(|| server_events(args, c))?;
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
    let stop = super::flag_on(TERMINATE)?;
    if let Ok(mut o) = out.lock() {
        o.write_all(flags.verbose_banner(false).as_bytes())?;
    }
    linerate_iperf::server::serve(listener, &opts, out, stop)
        .with_context(|| format!("server on port {}", args.port))?;
    Ok(0)
}

fn run_client(args: &IperfArgs, flags: &Flags, host: &str, c: &Console) -> Result<u8> {
    if args.repeat.asked() {
        let shown = super::out::Shown {
            json: args.json,
            json_stream: args.json_stream,
            live: args.live,
            report: args.report.as_deref().map(|p| (p, args.force)),
        };
        return args.repeat.run(shown, c, &mut |hold| {
            run_client_once(args, flags, host, hold, c)
        });
    }
    Ok(run_client_once(args, flags, host, false, c)?.exit_code)
}

/// One client test through the run model (`linerate_iperf::run_client`).
/// With `quiet` (repeated with -J: one document for all runs, printed at
/// the end) its own output is held back.
fn run_client_once(
    args: &IperfArgs,
    flags: &Flags,
    host: &str,
    quiet: bool,
    c: &Console,
) -> Result<linerate_run::Ended> {
    let mut opts: linerate_iperf::ClientOptions =
        flags.client_options::<anyhow::Error>(host, &mut |w| eprintln!("linerate: {w}"))?;
    let out: Arc<Mutex<dyn Write + Send>> = if quiet {
        Arc::new(Mutex::new(std::io::sink()))
    } else {
        output_sink(args, c)?
    };
    let _pid = args.pidfile.as_deref().map(PidFile::write).transpose()?;
    // With --live, q (SIGINT) ends the test early with its results, as
    // if its time ran out; SIGTERM still terminates it.
    let stop = if live_view(args, c) {
        opts.finish_early = Some(super::flag_on(&[SIGINT])?);
        super::flag_on(&[SIGTERM])?
    } else {
        super::flag_on(TERMINATE)?
    };
    let mut out = LockedWriter(out);
    out.write_all(flags.verbose_banner(true).as_bytes())?;
    let end = linerate_iperf::run_client(&mut opts, &mut out, &stop, Box::new(reporters(args, c)?));
    if let Some(e) = &end.error
        && !args.json
        && !args.json_stream
    {
        eprint!("{}", linerate_run::advice::error_lines(e));
    }
    Ok(end.ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> IperfArgs {
        IperfArgs::try_parse_from(std::iter::once("linerate").chain(a.iter().copied())).unwrap()
    }

    #[test]
    fn every_iperf3_option_is_one_of_ours() {
        let t = crate::getopt_table(&<IperfArgs as clap::CommandFactory>::command());
        for (name, main) in linerate_iperf::getopt::IPERF3_LONG {
            let (ours, _) = t
                .long(name)
                .unwrap_or_else(|| panic!("--{name} is missing"));
            assert_eq!(ours, *main, "--{name}");
        }
    }

    /// The declarations reach `linerate_iperf::flags` (whose tests judge
    /// every rule) as given.
    #[test]
    fn flags_are_what_was_given() {
        let f = args(&[
            "-c", "h", "-u", "-b", "10M/20", "-P", "3", "-t", "2.5", "--dscp", "af41",
        ])
        .flags();
        let (p, given) = f.params().unwrap();
        assert!(given);
        assert_eq!(
            (
                p.protocol,
                p.bandwidth_bps,
                p.burst,
                p.parallel,
                p.time_s,
                p.tos
            ),
            (
                linerate_iperf_proto::Protocol::Udp,
                10_000_000,
                20,
                3,
                3,
                34 << 2
            )
        );
        assert_eq!(
            args(&["-s"]).flags(),
            Flags {
                server: true,
                ..Flags::default()
            }
        );
        let f = args(&["-c", "h", "--repeat", "3", "--stream-cpus", "0"]).flags();
        assert_eq!((f.repeat, f.stream_cpus), (true, Some(vec![0])));
    }

    #[test]
    fn a_flag_of_the_other_side_is_an_error() {
        let e = run(&args(&["-c", "h", "--max-tests", "3"]), &Console::default()).unwrap_err();
        assert!(e.to_string().contains("server only: --max-tests"), "{e}");
    }

    #[test]
    fn bad_values_fail_like_iperf3() {
        assert!(IperfArgs::try_parse_from(["linerate", "-c", "h", "-t", "90000"]).is_err());
        assert!(IperfArgs::try_parse_from(["linerate", "-c", "h", "-t", "-1"]).is_err());
        assert!(IperfArgs::try_parse_from(["linerate", "-c", "h", "-S", "300"]).is_err());
        assert!(IperfArgs::try_parse_from(["linerate", "-c", "h", "--dscp", "af51"]).is_err());
    }
}
