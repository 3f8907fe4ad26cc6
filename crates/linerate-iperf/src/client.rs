//! The client: drives an iperf3-compatible server (iperf3 itself or
//! `linerate server`) through one test.

use crate::meter::{CONTROL_WAKE, Meter, until_due};
use crate::net::{self, CpuMeter, Family};
use crate::set::{Conn, Running, StreamOpts, forward_events, spawn_streams};
use linerate_iperf_proto::client::{ClientError, ClientEvent, ClientSession};
use linerate_iperf_proto::params::{TCP_LEN_DEFAULT, UDP_RATE_DEFAULT_BPS};
use linerate_iperf_proto::report::{OutputMode, Report, Role, StartInfo, StreamDesc, peer_results};
use linerate_iperf_proto::{Params, PeerResults, Protocol, cookie_str, make_cookie, udp_connect};
use std::io::{ErrorKind, Write};
use std::net::{IpAddr, SocketAddr, UdpSocket};
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
    let human = !opts.output.json && !opts.output.json_stream;
    let peer = net::resolve(&opts.host, opts.port, opts.family)
        .map_err(|e| ClientFailure::Connect(opts.host.clone(), e))?;
    let local = net::client_bind(opts.bind, None, &peer);
    let mut ctrl = net::tcp_connect(peer, local, None, opts.connect_timeout)
        .map_err(|e| ClientFailure::Connect(format!("{}:{}", opts.host, opts.port), e))?;
    if human {
        let _ = writeln!(out, "Connecting to host {}, port {}", opts.host, opts.port);
    }
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
    let cookie = make_cookie(net::random_bytes());
    let mut session = ClientSession::new(&cookie, params.clone());
    let cpu = CpuMeter::start();
    let mut running: Option<Running> = None;
    let mut conns: Vec<(Conn, StreamDesc)> = Vec::new();
    let mut report: Option<Report> = None;
    let mut meter: Option<Meter> = None;
    let mut start_at: Option<Instant> = None;
    let mut server_results: Option<PeerResults> = None;
    let mut finals = Vec::new();
    ctrl.set_read_timeout(Some(Duration::from_millis(20)))
        .map_err(ClientFailure::Io)?;
    let mut buf = [0u8; 65536];
    let mut last_read = Instant::now();
    let test_len = Duration::from_secs(u64::from(params.time_s) + u64::from(params.omit_s));
    let result: Result<(), ClientFailure> = 'outer: loop {
        while let Some(bytes) = session.poll_transmit() {
            if let Err(e) = ctrl.write_all(&bytes) {
                if session.is_closed() {
                    break;
                }
                break 'outer Err(ClientFailure::Io(e));
            }
        }
        while let Some(ev) = session.poll_event() {
            match ev {
                ClientEvent::CreateStreams => {
                    for i in 0..params.stream_count() {
                        let sending = params.mode.client_sends(i, params.parallel);
                        let local =
                            net::client_bind(opts.bind, opts.cport.map(|p| p + i as u16), &peer);
                        match create_stream(&params, peer, local, &cookie, opts.connect_timeout) {
                            Ok(c) => {
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
                                conns.push((c, desc));
                            }
                            Err(e) => break 'outer Err(ClientFailure::Stream(e)),
                        }
                    }
                }
                ClientEvent::Start => {
                    let now = Instant::now();
                    start_at = Some(now);
                    let info = StartInfo {
                        role: Role::Client,
                        params: params.clone(),
                        cookie: cookie_str(&cookie),
                        system_info: net::system_info(),
                        timestamp_secs: std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_secs()),
                        peer_host: opts.host.clone(),
                        peer_port: opts.port,
                        tcp_mss_default: linerate_backend::sockopt::mss(&ctrl).unwrap_or(0),
                        sndbuf_actual: buf_size(&conns, false),
                        rcvbuf_actual: buf_size(&conns, true),
                        interval_s: opts.interval.as_secs_f64(),
                        streams: conns.iter().map(|(_, d)| d.clone()).collect(),
                    };
                    let mut r = Report::new(info, opts.output);
                    let _ = out.write_all(r.start_text().as_bytes());
                    forward_events(&mut r, opts.events.as_ref());
                    report = Some(r);
                }
                ClientEvent::Running => {
                    let started = start_at.unwrap_or_else(Instant::now);
                    let so = StreamOpts {
                        udp_gso: opts.udp_gso,
                        affinity: opts.affinity.clone(),
                        zerocopy: opts.zerocopy,
                    };
                    let r = spawn_streams(std::mem::take(&mut conns), &params, &so);
                    meter = Some(Meter::for_test(
                        r.streams.clone(),
                        &params,
                        opts.interval,
                        started,
                    ));
                    running = Some(r);
                }
                ClientEvent::ExchangeResults => {
                    if let Some(r) = running.as_mut() {
                        r.stop(false);
                    }
                    if finals.is_empty()
                        && let Some(m) = meter.as_mut()
                    {
                        let (last, f) = m.finish(Instant::now());
                        if let (Some(last), Some(rep)) = (last, report.as_mut()) {
                            let _ = out.write_all(rep.interval(&last).as_bytes());
                            forward_events(rep, opts.events.as_ref());
                        }
                        finals = f;
                    }
                    session.local_results(peer_results(
                        &finals,
                        cpu.read(),
                        params.protocol == Protocol::Tcp,
                    ));
                }
                ClientEvent::ServerResults(r) => server_results = Some(r),
                ClientEvent::Done => break 'outer Ok(()),
                ClientEvent::Failed(e) => break 'outer Err(ClientFailure::Protocol(e)),
            }
        }
        if session.is_closed() {
            break Ok(());
        }
        if interrupt.load(Ordering::Relaxed) {
            session.terminate();
            if let Some(b) = session.poll_transmit() {
                let _ = ctrl.write_all(&b);
            }
            break Err(ClientFailure::Data(
                "interrupted by the user (sent CLIENT_TERMINATE)".into(),
            ));
        }
        // Intervals and the end of the test.
        if finals.is_empty()
            && let (Some(m), Some(rep)) = (meter.as_mut(), report.as_mut())
        {
            while let Some(samples) = m.tick(Instant::now()) {
                let _ = out.write_all(rep.interval(&samples).as_bytes());
                forward_events(rep, opts.events.as_ref());
            }
            let (bytes, blocks) = m.totals();
            let by_time = params.time_s > 0 && start_at.is_some_and(|s| s.elapsed() >= test_len);
            let by_bytes = params.num_bytes > 0 && !m.omitting() && bytes >= params.num_bytes;
            let by_blocks = params.block_count > 0 && !m.omitting() && blocks >= params.block_count;
            let failed = m
                .streams()
                .iter()
                .find_map(|s| s.error.lock().ok().and_then(|e| e.clone()));
            if let Some(e) = failed {
                break Err(ClientFailure::Data(e));
            }
            if (by_time || by_bytes || by_blocks) && finals.is_empty() {
                // The test ends now: senders stop, figures are taken at this
                // instant (iperf3 ignores what arrives after TEST_END).
                let end_at = Instant::now();
                if let Some(r) = running.as_mut() {
                    r.stop(true);
                }
                let (last, f) = m.finish(end_at);
                if let Some(last) = last {
                    let _ = out.write_all(rep.interval(&last).as_bytes());
                    forward_events(rep, opts.events.as_ref());
                }
                finals = f;
                session.end_test();
            }
        }
        // Wake for the end of the test or the next interval, whichever is first.
        let to_end = match (start_at, finals.is_empty()) {
            (Some(s), true) if params.time_s > 0 => test_len.saturating_sub(s.elapsed()),
            _ => CONTROL_WAKE,
        };
        let wake = to_end
            .min(until_due(meter.as_ref()))
            .clamp(Duration::from_millis(1), CONTROL_WAKE);
        match net::read_within(&mut ctrl, &mut buf, wake) {
            Ok(0) => session.handle_eof(),
            Ok(n) => {
                last_read = Instant::now();
                session.handle_bytes(&buf[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                let waiting_for_server =
                    running.is_none() || meter.as_ref().is_some_and(|_| !finals.is_empty());
                if waiting_for_server && last_read.elapsed() > opts.control_timeout {
                    break Err(ClientFailure::Timeout);
                }
            }
            Err(e) => session_eof_or(&mut session, e),
        }
    };
    if let Some(r) = running.as_mut() {
        r.stop(false);
    }
    let _ = ctrl.shutdown(std::net::Shutdown::Both);
    if let Some(rep) = report.as_mut() {
        if finals.is_empty()
            && let Some(m) = meter.as_mut()
        {
            finals = m.finish(Instant::now()).1;
        }
        if let Err(e) = &result {
            rep.set_error(&e.to_string());
        }
        let pinned = running.as_ref().map_or(&[][..], |r| &r.cpus[..]);
        let doctor = net::doctor_summary(ctrl.local_addr().ok().map(|a| a.ip()), pinned);
        let _ = out.write_all(
            rep.finish(
                &finals,
                cpu.read(),
                server_results.as_ref(),
                Some(("doctor", doctor)),
            )
            .as_bytes(),
        );
        forward_events(rep, opts.events.as_ref());
        if human && result.is_ok() {
            let _ = writeln!(out, "\niperf Done.");
        }
    } else if let Err(e) = &result
        && (opts.output.json || opts.output.json_stream)
    {
        // Failed before the test started: iperf3 still prints a document.
        let doc =
            serde_json::json!({"start": {}, "intervals": [], "end": {}, "error": e.to_string()});
        let _ = writeln!(
            out,
            "{}",
            if opts.output.json_stream {
                serde_json::json!({"event": "error", "data": e.to_string()}).to_string()
            } else {
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            }
        );
    }
    result
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
    timeout: Duration,
) -> std::io::Result<Conn> {
    match p.protocol {
        Protocol::Tcp => {
            let mut t = net::tcp_connect(peer, local, Some(p), timeout)?;
            t.write_all(cookie)?;
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
            let u = UdpSocket::bind(bind)?;
            u.connect(peer)?;
            u.set_read_timeout(Some(Duration::from_secs(30)))?;
            u.send(&udp_connect::CONNECT)?;
            let mut reply = vec![0u8; 4 + 2 * p.len as usize];
            loop {
                let n = u.recv(&mut reply)?;
                if n == 4
                    && udp_connect::REPLIES_ACCEPTED
                        .iter()
                        .any(|r| r[..] == reply[..4])
                {
                    break;
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
            Ok(Conn::Udp(u))
        }
    }
}
