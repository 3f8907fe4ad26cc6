//! The client: drives an iperf3-compatible server (iperf3 itself or
//! `linerate server`) through one test. Here its options, its failures and
//! its entry; the test itself (the control loop, one method per event) is
//! [`test`], its data streams' set-up [`streams`].

mod streams;
mod test;

use test::{ClientTest, error_document};

use crate::meter::{CONTROL_WAKE, Meter, until_due};
use crate::net::{self, CpuMeter, Family};
use crate::set::{Conn, Running, StreamOpts, forward_events, spawn_streams};
use linerate_iperf_proto::client::{ClientError, ClientEvent, ClientSession};
use linerate_iperf_proto::params::{TCP_LEN_DEFAULT, UDP_RATE_DEFAULT_BPS};
use linerate_iperf_proto::report::doc::{ErrorDocument, StreamEvent};
use linerate_iperf_proto::report::{
    Extra, Mptcp, OutputMode, Report, Role, StartInfo, StreamDesc, StreamFinal, peer_results,
};
use linerate_iperf_proto::{Params, PeerResults, Protocol, cookie_str, make_cookie, udp_connect};
use std::io::{ErrorKind, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub host: String,
    pub port: u16,
    /// Test parameters; `len` 0 means iperf3's default for the protocol,
    /// `bandwidth_bps` `None` means iperf3's default (1 Mbit/s for UDP).
    pub params: Params,
    /// The test's time when `-t` has a fraction: iperf3's parameters carry
    /// whole seconds (they say it rounded up, and the server bounds the
    /// test by that), and this client ends the test at this time.
    pub time: Option<Duration>,
    pub bandwidth_given: bool,
    pub bind: Option<IpAddr>,
    pub cport: Option<u16>,
    pub family: Family,
    pub interval: Duration,
    pub output: OutputMode,
    pub connect_timeout: Duration,
    /// Give up when a control read waits longer than this.
    pub control_timeout: Duration,
    /// Send UDP with generic segmentation offload where the kernel has it.
    pub udp_gso: bool,
    /// CPUs for the stream threads: stream i runs on `affinity[i % len]`.
    pub affinity: Vec<usize>,
    /// TCP senders use MSG_ZEROCOPY.
    pub zerocopy: bool,
    /// The shared run-model reporters (`--csv`), fed the test's events.
    pub events: Option<linerate_run::SharedReporter>,
    /// `--bind-dev`: every socket goes through this interface.
    pub bind_dev: Option<String>,
    /// `--cntl-ka[=IDLE/INTERVAL/COUNT]`: TCP keepalive on the control
    /// connection (0: the system's setting for that part).
    pub cntl_ka: Option<(u32, u32, u32)>,
    /// `--rcv-timeout`: receiving streams that get nothing this long fail
    /// the test.
    pub rcv_timeout: Duration,
    /// `--snd-timeout`: TCP_USER_TIMEOUT on the TCP data streams.
    pub snd_timeout: Option<Duration>,
    /// RSA authentication: who we are, and the server's public key.
    pub auth: Option<ClientAuth>,
    /// `-d`: control messages and stream set-up on stderr (0: off).
    pub debug: u8,
    /// `-F`: TCP senders send this file; receivers write what arrives to it.
    pub file: Option<std::path::PathBuf>,
    /// Set from outside (`--live`'s q): end the test now, as if its time
    /// ran out: TEST_END, the results exchange and the full report.
    pub finish_early: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// iperf3's RSA authentication on the client.
#[derive(Clone)]
pub struct ClientAuth {
    pub user: String,
    pub password: String,
    pub key: linerate_iperf_proto::auth::RsaPublicKey,
    pub padding: linerate_iperf_proto::auth::Padding,
}

/// Shows the user and padding, never the password.
impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientAuth")
            .field("user", &self.user)
            .field("padding", &self.padding)
            .finish_non_exhaustive()
    }
}

impl ClientAuth {
    /// The token for parameters sent now.
    pub fn token(&self) -> Result<String, ClientFailure> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        linerate_iperf_proto::auth::encode_token(
            &self.key,
            &self.user,
            &self.password,
            now,
            self.padding,
        )
        .map_err(|e| ClientFailure::Data(format!("authentication: {e}")))
    }
}

/// Why a client run failed, with what it printed so far.
#[derive(Debug, thiserror::Error)]
pub enum ClientFailure {
    #[error("unable to connect to server {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("{0}")]
    Protocol(#[from] ClientError),
    #[error("unable to create data stream: {0}")]
    Stream(std::io::Error),
    #[error("control connection: {0}")]
    Io(std::io::Error),
    #[error("timed out waiting for the server")]
    Timeout,
    #[error("{0}")]
    Data(String),
    /// The test never started (no connection, refused, authentication
    /// failed, set-up failed): nothing was measured.
    #[error(transparent)]
    NotRun(Box<ClientFailure>),
}

impl ClientFailure {
    /// Whether the test ran (data moved) before it failed: a run that
    /// could not start exits 2, one that failed part-way 1.
    pub fn ran(&self) -> bool {
        !matches!(self, ClientFailure::NotRun(_))
    }
}

/// Runs one test and writes its output to `out`. Returns the exit status
/// iperf3 would give (0 ok, 1 failure).
pub fn run(
    opts: &ClientOptions,
    out: &mut dyn Write,
    interrupt: &AtomicBool,
) -> Result<(), ClientFailure> {
    let human = !opts.output.json && !opts.output.json_stream;
    match (&opts.params.title, human) {
        // iperf3 prefixes every human line with the title.
        (Some(t), true) => {
            let mut w = TitleWriter {
                inner: out,
                prefix: format!("{t}:  "),
                at_line_start: true,
            };
            run_inner(opts, &mut w, interrupt)
        }
        _ => run_inner(opts, out, interrupt),
    }
}

/// Puts `title:  ` in front of every line.
struct TitleWriter<'a> {
    inner: &'a mut dyn Write,
    prefix: String,
    at_line_start: bool,
}

impl Write for TitleWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for line in buf.split_inclusive(|&b| b == b'\n') {
            if self.at_line_start {
                self.inner.write_all(self.prefix.as_bytes())?;
            }
            self.inner.write_all(line)?;
            self.at_line_start = line.ends_with(b"\n");
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn run_inner(
    opts: &ClientOptions,
    out: &mut dyn Write,
    interrupt: &AtomicBool,
) -> Result<(), ClientFailure> {
    let mut t = match ClientTest::connect(opts, out) {
        Ok(t) => t,
        Err(e) => {
            // No connection: iperf3 still prints its document (-J) or an
            // error event (--json-stream).
            if !opts.output.human() {
                let _ = writeln!(out, "{}", error_document(opts, &e));
            }
            return Err(ClientFailure::NotRun(Box::new(e)));
        }
    };
    let result = t.drive(interrupt);
    t.conclude(&result);
    match result {
        Err(e) if t.start_at.is_none() => Err(ClientFailure::NotRun(Box::new(e))),
        r => r,
    }
}
