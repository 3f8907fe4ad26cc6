//! The client: drives an iperf3-compatible server (iperf3 itself or
//! `linerate server`) through one test.

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

/// One test from the client's side: the sans-IO session plus the I/O
/// around it, one method per event.
struct ClientTest<'a> {
    opts: &'a ClientOptions,
    out: &'a mut dyn Write,
    peer: SocketAddr,
    ctrl: std::net::TcpStream,
    params: Params,
    cookie: linerate_iperf_proto::Cookie,
    session: ClientSession,
    cpu: CpuMeter,
    conns: Vec<(Conn, StreamDesc)>,
    /// The streams as connected, and their socket buffer sizes (send,
    /// receive), for the start of the report.
    descs: Vec<StreamDesc>,
    bufs: (u64, u64),
    /// With -m: (streams speaking MPTCP, TCP streams).
    mptcp: Option<(usize, usize)>,
    running: Option<Running>,
    report: Option<Report>,
    meter: Option<Meter>,
    start_at: Option<Instant>,
    server_results: Option<PeerResults>,
    finals: Vec<StreamFinal>,
    /// When the current wait for the server began.
    wait_since: Instant,
    /// When the client began (the setup phase's bound runs from here) and
    /// when it ended the test (the end phase's).
    begun: Instant,
    finals_at: Option<Instant>,
    /// Bytes received so far and when that last changed (--rcv-timeout).
    last_rx: (u64, Instant),
    /// The session's progress count when last looked at.
    progress_seen: u64,
    test_len: Duration,
    /// linerate doctor's summary for the report (streams not pinned),
    /// taken on a thread of its own while the test is set up (it reads a
    /// few hundred files: 14 ms after the end of every test when it was
    /// taken there; taken while the streams ran, it cost an overloaded
    /// host's control loop its time).
    doctor: Option<std::thread::JoinHandle<serde_json::Value>>,
}

/// How long the rest of a SERVER_ERROR message is waited for.
const ERROR_PAYLOAD_WAIT: Duration = Duration::from_secs(2);

impl<'a> ClientTest<'a> {
    /// Connects the control connection and fills in iperf3's defaults.
    fn connect(opts: &'a ClientOptions, out: &'a mut dyn Write) -> Result<Self, ClientFailure> {
        let peer = net::resolve(&opts.host, opts.port, opts.family)
            .map_err(|e| ClientFailure::Connect(opts.host.clone(), e))?;
        let local = net::client_bind(opts.bind, None, &peer);
        let ctrl = net::tcp_connect(
            peer,
            local,
            None,
            opts.connect_timeout,
            opts.bind_dev.as_deref(),
        )
        .map_err(|e| ClientFailure::Connect(format!("{}:{}", opts.host, opts.port), e))?;
        if let Some(ka) = opts.cntl_ka {
            net::keepalive(&ctrl, ka).map_err(ClientFailure::Io)?;
        }
        if opts.output.human() {
            let _ = writeln!(out, "Connecting to host {}, port {}", opts.host, opts.port);
            if opts.params.mode == linerate_iperf_proto::TestMode::Reverse {
                let _ = writeln!(out, "Reverse mode, remote host {} is sending", opts.host);
            }
        }
        // The cookie goes out first, as iperf3's does: the UDP block size
        // below is the control connection's MSS read after it (on loopback
        // 32768 then, 32741 before any data), as iperf3 3.21 reads it.
        let cookie = make_cookie(net::random_bytes());
        let mut ctrl = ctrl;
        if opts.debug > 0 {
            eprintln!(
                "debug: sent {}",
                linerate_iperf_proto::describe_message(&cookie)
            );
        }
        net::write_within(&mut ctrl, &cookie, opts.control_timeout).map_err(ClientFailure::Io)?;
        let mut params = opts.params.clone();
        if params.len == 0 {
            params.len = match params.protocol {
                Protocol::Tcp => TCP_LEN_DEFAULT,
                Protocol::Udp => linerate_backend::sockopt::mss(&ctrl)
                    .ok()
                    .filter(|m| (16..=65507).contains(m))
                    .unwrap_or(1460),
            };
        }
        if params.protocol == Protocol::Udp && !opts.bandwidth_given {
            params.bandwidth_bps = UDP_RATE_DEFAULT_BPS;
        }
        // Made when the parameters go out, as iperf3 does: the server
        // checks the token's time against its clock.
        if let Some(a) = &opts.auth {
            params.authtoken = Some(a.token()?);
        }
        ctrl.set_read_timeout(Some(Duration::from_millis(20)))
            .map_err(ClientFailure::Io)?;
        let test_len = opts
            .time
            .unwrap_or(Duration::from_secs(u64::from(params.time_s)))
            + Duration::from_secs(u64::from(params.omit_s));
        let local = ctrl.local_addr().ok().map(|a| a.ip());
        let doctor = std::thread::Builder::new()
            .name("doctor".into())
            .spawn(move || linerate_doctor::test_summary_at(local, &[]))
            .ok();
        Ok(ClientTest {
            opts,
            out,
            peer,
            ctrl,
            session: {
                let mut s = ClientSession::new(&cookie, params.clone());
                // The cookie is already out.
                let _ = s.poll_transmit();
                s
            },
            params,
            cookie,
            cpu: CpuMeter::start(),
            conns: Vec::new(),
            descs: Vec::new(),
            bufs: (0, 0),
            mptcp: None,
            running: None,
            report: None,
            meter: None,
            start_at: None,
            server_results: None,
            finals: Vec::new(),
            wait_since: Instant::now(),
            begun: Instant::now(),
            finals_at: None,
            last_rx: (0, Instant::now()),
            progress_seen: 0,
            test_len,
            doctor,
        })
    }

    /// Runs the control loop until the test ends, fails or is interrupted.
    fn drive(&mut self, interrupt: &AtomicBool) -> Result<(), ClientFailure> {
        let mut buf = [0u8; 65536];
        loop {
            if let Err(e) = self.send_queued()
                && !self.session.is_closed()
            {
                return Err(e);
            }
            while let Some(ev) = self.session.poll_event() {
                if self.opts.debug > 0 {
                    eprintln!("debug: received {}", client_event_name(&ev));
                }
                match ev {
                    ClientEvent::CreateStreams => self.on_create_streams()?,
                    ClientEvent::Start => self.on_start(),
                    ClientEvent::Running => self.on_running(),
                    ClientEvent::ExchangeResults => self.on_exchange_results(),
                    ClientEvent::ServerResults(r) => self.server_results = Some(r),
                    ClientEvent::Done => return Ok(()),
                    ClientEvent::Failed(e) => return Err(ClientFailure::Protocol(e)),
                }
            }
            // What the events queued (our results, IPERF_DONE) goes out
            // now, not after the wait for the server below.
            if let Err(e) = self.send_queued()
                && !self.session.is_closed()
            {
                return Err(e);
            }
            if self.session.is_closed() {
                return Ok(());
            }
            if interrupt.load(Ordering::Relaxed) {
                self.session.terminate();
                if let Some(b) = self.session.poll_transmit() {
                    let _ = net::write_within(&mut self.ctrl, &b, Duration::from_millis(500));
                }
                return Err(ClientFailure::Data(
                    "interrupted by the user (sent CLIENT_TERMINATE)".into(),
                ));
            }
            self.on_timers()?;
            self.read_control(&mut buf)?;
        }
    }

    /// Writes what the session queued, each message within the control
    /// timeout; a wait for the server's answer starts when we asked.
    fn send_queued(&mut self) -> Result<(), ClientFailure> {
        while let Some(bytes) = self.session.poll_transmit() {
            self.wait_since = Instant::now();
            if self.opts.debug > 0 {
                eprintln!(
                    "debug: sent {}",
                    linerate_iperf_proto::describe_message(&bytes)
                );
            }
            net::write_within(&mut self.ctrl, &bytes, self.opts.control_timeout)
                .map_err(ClientFailure::Io)?;
        }
        Ok(())
    }

    /// Hands the report's queued run-model events to the shared reporters.
    fn forward(&mut self) {
        if let Some(rep) = self.report.as_mut() {
            forward_events(rep, self.opts.events.as_ref());
        }
    }

    /// CREATE_STREAMS: one data connection per stream, announced by cookie.
    fn on_create_streams(&mut self) -> Result<(), ClientFailure> {
        let (opts, params, peer) = (self.opts, &self.params, self.peer);
        for i in 0..params.stream_count() {
            let sending = params.mode.client_sends(i, params.parallel);
            let local = net::client_bind(opts.bind, opts.cport.map(|p| p + i as u16), &peer);
            let c = create_stream(params, peer, local, &self.cookie, opts)
                .map_err(ClientFailure::Stream)?;
            let (fd, l, r) = match &c {
                Conn::Tcp(t) => (t.as_raw_fd(), t.local_addr(), t.peer_addr()),
                Conn::Udp(u) => (u.as_raw_fd(), u.local_addr(), u.peer_addr()),
            };
            let desc = StreamDesc {
                id: linerate_iperf_proto::stream_id(i),
                socket: fd,
                sender: sending,
                local: l.unwrap_or(peer),
                remote: r.unwrap_or(peer),
            };
            if opts.debug >= 3 {
                eprintln!(
                    "debug: stream {} connected, {} -> {} ({})",
                    desc.id,
                    desc.local,
                    desc.remote,
                    if desc.sender { "sending" } else { "receiving" }
                );
            }
            self.conns.push((c, desc));
        }
        // The stream threads are spawned now, waiting for TEST_RUNNING:
        // spawning hundreds of them once the server's streams run took
        // seconds of the test on an overloaded host.
        if params.mptcp {
            let tcp: Vec<&std::net::TcpStream> = self
                .conns
                .iter()
                .filter_map(|(c, _)| match c {
                    Conn::Tcp(t) => Some(t),
                    Conn::Udp(_) => None,
                })
                .collect();
            let multipath = tcp
                .iter()
                .filter(|t| linerate_backend::sockopt::is_mptcp(**t))
                .count();
            if multipath < tcp.len() {
                eprintln!(
                    "linerate: warning - {} of {} streams fell back to plain TCP (the server does not take MPTCP on its data connections)",
                    tcp.len() - multipath,
                    tcp.len()
                );
            }
            self.mptcp = Some((multipath, tcp.len()));
        }
        self.bufs = (buf_size(&self.conns, false), buf_size(&self.conns, true));
        self.descs = self.conns.iter().map(|(_, d)| d.clone()).collect();
        let so = StreamOpts {
            udp_gso: self.opts.udp_gso,
            affinity: self.opts.affinity.clone(),
            zerocopy: self.opts.zerocopy,
            file: self.opts.file.clone(),
        };
        self.running = Some(spawn_streams(
            std::mem::take(&mut self.conns),
            &self.params,
            &so,
        ));
        self.wait_since = Instant::now();
        Ok(())
    }

    /// TEST_START: the report begins.
    fn on_start(&mut self) {
        self.start_at = Some(Instant::now());
        let opts = self.opts;
        let info = StartInfo {
            role: Role::Client,
            params: self.params.clone(),
            cookie: cookie_str(&self.cookie),
            system_info: net::system_info(),
            timestamp_secs: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            peer_host: opts.host.clone(),
            peer_port: opts.port,
            tcp_mss_default: linerate_backend::sockopt::mss(&self.ctrl).unwrap_or(0),
            sndbuf_actual: self.bufs.0,
            rcvbuf_actual: self.bufs.1,
            interval_s: opts.interval.as_secs_f64(),
            gso: self.params.protocol == Protocol::Udp
                && opts.udp_gso
                && self.descs.iter().any(|d| d.sender),
            gro: self.params.protocol == Protocol::Udp && self.descs.iter().any(|d| !d.sender),
            host: linerate_run::Host::here(),
            streams: self.descs.clone(),
        };
        let mut r = Report::new(info, opts.output);
        let _ = self.out.write_all(r.start_text().as_bytes());
        let _ = self.out.flush();
        self.report = Some(r);
        self.forward();
    }

    /// TEST_RUNNING: the streams start moving data and the meter counts.
    fn on_running(&mut self) {
        let started = self.start_at.unwrap_or_else(Instant::now);
        let Some(r) = self.running.as_ref() else {
            return;
        };
        r.go((self.params.time_s > 0).then(|| started + self.test_len));
        self.last_rx = (0, Instant::now());
        let mut meter =
            Meter::for_test(r.streams.clone(), &self.params, self.opts.interval, started)
                .with_budget(r.budget.clone());
        if self.opts.time.is_some() && self.params.time_s > 0 {
            meter = meter.ending_at(started + self.test_len);
        }
        self.meter = Some(meter);
    }

    /// Prints an interval and hands its events on.
    fn interval(&mut self, samples: &[linerate_iperf_proto::report::IntervalSample]) {
        if let Some(rep) = self.report.as_mut() {
            let _ = self.out.write_all(rep.interval(samples).as_bytes());
            let _ = self.out.flush();
        }
        self.forward();
    }

    /// EXCHANGE_RESULTS: this side's figures go to the server.
    fn on_exchange_results(&mut self) {
        if let Some(r) = self.running.as_mut() {
            r.stop(false);
        }
        if self.finals.is_empty()
            && let Some(mut m) = self.meter.take()
        {
            let (last, f) = m.finish(Instant::now());
            if let Some(last) = last {
                self.interval(&last);
            }
            self.finals = f;
            self.finals_at.get_or_insert_with(Instant::now);
            self.meter = Some(m);
        }
        self.session.local_results(peer_results(
            &self.finals,
            self.cpu.read(),
            self.params.protocol == Protocol::Tcp,
        ));
    }

    /// Intervals that are due, a stream that failed, and the end of the test
    /// (by time, bytes or blocks).
    fn on_timers(&mut self) -> Result<(), ClientFailure> {
        if !self.finals.is_empty() || self.report.is_none() {
            return Ok(());
        }
        let Some(mut m) = self.meter.take() else {
            return Ok(());
        };
        while let Some(samples) = m.tick(Instant::now()) {
            self.interval(&samples);
        }
        let p = &self.params;
        let (sent, received) = m.totals();
        let by_time = p.time_s > 0 && self.start_at.is_some_and(|s| s.elapsed() >= self.test_len);
        let by_user = self
            .opts
            .finish_early
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed));
        // -n / -k: the senders stop themselves at exactly the amount; the
        // test ends when every direction it has moved all of it (with
        // --bidir both: iperf3 ends at the first, cutting the other short).
        let amount = amount_bytes(p);
        let sends = m.streams().iter().any(|s| s.sender);
        let receives = m.streams().iter().any(|s| !s.sender);
        let by_amount = amount > 0
            && !m.omitting()
            && (!sends || sent >= amount)
            && (!receives || received >= amount);
        // -F: the test ends when every sending stream came to the end of
        // the file (iperf3's "done" at end of file).
        let by_file = self.opts.file.is_some()
            && sends
            && m.streams()
                .iter()
                .filter(|s| s.sender)
                .all(|s| s.finished.load(Ordering::Acquire));
        let mut failed = m
            .streams()
            .iter()
            .find_map(|s| s.error.lock().ok().and_then(|e| e.clone()));
        // --rcv-timeout: receiving streams that got nothing for that long.
        if receives {
            if received != self.last_rx.0 {
                self.last_rx = (received, Instant::now());
            } else if failed.is_none() && self.last_rx.1.elapsed() > self.opts.rcv_timeout {
                failed = Some(format!(
                    "no data received for {} ms (--rcv-timeout)",
                    self.opts.rcv_timeout.as_millis()
                ));
            }
        }
        if let Some(e) = failed {
            self.meter = Some(m);
            return Err(ClientFailure::Data(e));
        }
        if by_time || by_amount || by_file || by_user {
            // The test ends now: TEST_END goes out at once (joining the
            // senders first delayed it by up to a sender's poll, and the
            // server's clock ran on: 2.08 s for -t 2), then the senders
            // stop (they already did, at the scheduled end) and the figures
            // are taken as of this instant.
            let end_at = Instant::now();
            self.session.end_test();
            if let Err(e) = self.send_queued() {
                self.meter = Some(m);
                return Err(e);
            }
            if let Some(r) = self.running.as_mut() {
                r.stop(true);
            }
            let (last, f) = m.finish(end_at);
            if let Some(last) = last {
                self.interval(&last);
            }
            self.finals = f;
            self.finals_at = Some(end_at);
        }
        self.meter = Some(m);
        Ok(())
    }

    /// Waits for control bytes until the end of the test or the next
    /// interval, whichever is first; a silent server past the control
    /// timeout (while we wait for it) is an error.
    fn read_control(&mut self, buf: &mut [u8]) -> Result<(), ClientFailure> {
        let to_end = match (self.start_at, self.finals.is_empty()) {
            (Some(s), true) if self.params.time_s > 0 => self.test_len.saturating_sub(s.elapsed()),
            _ => CONTROL_WAKE,
        };
        let wake = to_end
            .min(until_due(self.meter.as_ref()))
            .clamp(Duration::from_millis(1), CONTROL_WAKE);
        match net::read_within(&mut self.ctrl, buf, wake) {
            Ok(0) => self.session.handle_eof(),
            Ok(n) => self.session.handle_bytes(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => session_eof_or(&mut self.session, e),
        }
        self.check_wait();
        Ok(())
    }

    /// A wait for the server is timed per message: bytes that do not
    /// complete one (a server trickling a byte at a time) do not restart it,
    /// and the rest of a half-received SERVER_ERROR is waited for briefly
    /// before the error is reported as it came.
    fn check_wait(&mut self) {
        if self.session.progress() != self.progress_seen {
            self.progress_seen = self.session.progress();
            self.wait_since = Instant::now();
        }
        let waiting_for_server = self.meter.is_none()
            || self.meter.as_ref().is_some_and(|_| !self.finals.is_empty())
            || self.session.awaiting_error_payload();
        let limit = if self.session.awaiting_error_payload() {
            self.opts.control_timeout.min(ERROR_PAYLOAD_WAIT)
        } else {
            self.opts.control_timeout
        };
        let waited = self.wait_since.elapsed();
        if waiting_for_server && !self.session.is_closed() && waited > limit {
            self.session.timed_out(waited);
        }
        // Each phase the server leads has a bound of its own, whatever it
        // sends: setting up (until the test runs) and ending (from our end
        // of the test to the results): so a client ends within -t + omit
        // + twice --control-timeout (and the streams' connect) at most.
        let phase = match (&self.meter, self.finals_at) {
            (None, _) => Some(("setting up the test", self.begun)),
            (Some(_), Some(at)) => Some(("ending the test", at)),
            (Some(_), None) => None,
        };
        if let Some((name, since)) = phase
            && !self.session.is_closed()
            && !self.session.awaiting_error_payload()
            && since.elapsed() > self.opts.control_timeout
        {
            self.session.overdue(name, since.elapsed());
        }
    }

    /// The streams stop, the control connection closes, and the report ends
    /// with what was measured (or iperf3's error document).
    fn conclude(&mut self, result: &Result<(), ClientFailure>) {
        if let Some(r) = self.running.as_mut() {
            r.stop(false);
        }
        let _ = self.ctrl.shutdown(std::net::Shutdown::Both);
        let opts = self.opts;
        if self.report.is_some() {
            if self.finals.is_empty()
                && let Some(m) = self.meter.as_mut()
            {
                self.finals = m.finish(Instant::now()).1;
            }
            let pinned = self.running.as_ref().map_or(&[][..], |r| &r.cpus[..]);
            let early = self.doctor.take().map(std::thread::JoinHandle::join);
            let doctor = match early {
                Some(Ok(d)) if pinned.is_empty() => d,
                _ => linerate_doctor::test_summary_at(
                    self.ctrl.local_addr().ok().map(|a| a.ip()),
                    pinned,
                ),
            };
            if let Some(rep) = self.report.as_mut() {
                if let Err(e) = result {
                    rep.set_error(&e.to_string());
                }
                if let Some(f) = &opts.file {
                    let size = std::fs::metadata(f).map_or(0, |m| m.len());
                    rep.set_diskfile(&f.display().to_string(), size);
                }
                let extra = Extra {
                    doctor: Some(doctor),
                    mptcp: self
                        .mptcp
                        .map(|(multipath, tcp)| Mptcp::new(multipath, tcp)),
                };
                let text = rep.finish(
                    &self.finals,
                    self.cpu.read(),
                    self.server_results.as_ref(),
                    extra,
                );
                let _ = self.out.write_all(text.as_bytes());
                let _ = self.out.flush();
            }
            self.forward();
            if opts.output.human() && result.is_ok() {
                let _ = writeln!(self.out, "\niperf Done.");
                let _ = self.out.flush();
            }
        } else if let Err(e) = result
            && !opts.output.human()
        {
            // Failed before the test started: iperf3 still prints a document.
            let _ = writeln!(self.out, "{}", error_document(opts, e));
            let _ = self.out.flush();
        }
    }
}

/// What `-d` says of an event of the client's session.
fn client_event_name(ev: &ClientEvent) -> String {
    match ev {
        ClientEvent::CreateStreams => "CREATE_STREAMS".into(),
        ClientEvent::Start => "TEST_START".into(),
        ClientEvent::Running => "TEST_RUNNING".into(),
        ClientEvent::ExchangeResults => "EXCHANGE_RESULTS".into(),
        ClientEvent::ServerResults(r) => {
            format!("the server's results ({} streams)", r.streams.len())
        }
        ClientEvent::Done => "DISPLAY_RESULTS".into(),
        ClientEvent::Failed(e) => format!("failure: {e}"),
    }
}

/// The document iperf3 prints for a test that failed before it started:
/// `start` with no connections, the version and the host, and the error
/// (`--json-stream`: one error event).
fn error_document(opts: &ClientOptions, e: &ClientFailure) -> String {
    let error = e.to_string();
    if opts.output.json_stream {
        return serde_json::to_string(&StreamEvent::new("error", &error)).unwrap_or_default();
    }
    let doc = ErrorDocument::new(net::system_info(), error);
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// The bytes a `-n` / `-k` test moves in one direction: `-n` as given (UDP:
/// rounded up to whole datagrams), `-k` blocks of the block size; 0 for a
/// test that ends by time.
fn amount_bytes(p: &Params) -> u64 {
    let len = u64::from(p.len.max(1));
    match (p.num_bytes, p.block_count, p.protocol) {
        (0, 0, _) => 0,
        (n, 0, Protocol::Tcp) => n,
        (n, 0, Protocol::Udp) => n.div_ceil(len) * len,
        (_, k, _) => k * len,
    }
}

fn session_eof_or(session: &mut ClientSession, _e: std::io::Error) {
    session.handle_eof();
}

fn buf_size(conns: &[(Conn, StreamDesc)], recv: bool) -> u64 {
    conns.first().map_or(0, |(c, _)| {
        let s = match c {
            Conn::Tcp(t) => socket2::SockRef::from(t),
            Conn::Udp(u) => socket2::SockRef::from(u),
        };
        let v = if recv {
            s.recv_buffer_size()
        } else {
            s.send_buffer_size()
        };
        v.unwrap_or(0) as u64
    })
}

fn create_stream(
    p: &Params,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    cookie: &[u8],
    opts: &ClientOptions,
) -> std::io::Result<Conn> {
    match p.protocol {
        Protocol::Tcp => {
            let mut t = net::tcp_connect(
                peer,
                local,
                Some(p),
                opts.connect_timeout,
                opts.bind_dev.as_deref(),
            )?;
            if let Some(d) = opts.snd_timeout {
                net::set_snd_timeout(&t, d)?;
            }
            net::write_within(&mut t, cookie, opts.control_timeout)?;
            Ok(Conn::Tcp(t))
        }
        Protocol::Udp => {
            let bind = local.unwrap_or_else(|| {
                net::server_addr(
                    None,
                    if peer.is_ipv4() {
                        Family::V4
                    } else {
                        Family::V6
                    },
                    0,
                )
            });
            let family = if bind.is_ipv4() {
                Family::V4
            } else {
                Family::V6
            };
            let u = net::udp_bound(bind, family, opts.bind_dev.as_deref())?;
            let peer = net::with_flow_label(&u, peer, p.flowlabel)?;
            u.connect(peer)?;
            udp_hello(&u, p, opts.control_timeout)?;
            Ok(Conn::Udp(u))
        }
    }
}

/// iperf3's UDP "connect": the hello sent, the server's reply awaited.
/// The whole wait is bounded: datagrams that are not a reply do not
/// restart it. The hello is a datagram and may be lost: it is sent again
/// after 1 s, 2 s, 4 s, ... without an answer (a server that took the
/// first one ignores a repeat as a runt).
fn udp_hello(u: &std::net::UdpSocket, p: &Params, within: Duration) -> std::io::Result<()> {
    u.send(&udp_connect::CONNECT)?;
    let mut reply = vec![0u8; 4 + 2 * p.len as usize];
    let deadline = Instant::now() + within;
    let mut gap = Duration::from_secs(1);
    let mut again = Instant::now() + gap;
    loop {
        let now = Instant::now();
        if now >= again {
            u.send(&udp_connect::CONNECT)?;
            gap *= 2;
            again = now + gap;
        }
        let left = deadline.saturating_duration_since(now).min(
            again
                .saturating_duration_since(now)
                .max(Duration::from_millis(1)),
        );
        if deadline <= now {
            return Err(std::io::Error::new(
                ErrorKind::TimedOut,
                format!(
                    "no UDP connect reply from the server within {} ms",
                    within.as_millis()
                ),
            ));
        }
        u.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        let n = match u.recv(&mut reply) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                continue;
            }
            Err(e) => return Err(e),
        };
        if n == 4
            && udp_connect::REPLIES_ACCEPTED
                .iter()
                .any(|r| r[..] == reply[..4])
        {
            return Ok(());
        }
        if n != 4 {
            // Data that raced ahead of the reply (reverse mode): keep waiting.
            continue;
        }
        return Err(std::io::Error::new(
            ErrorKind::InvalidData,
            "unexpected UDP connect reply",
        ));
    }
}
