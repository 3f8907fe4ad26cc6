//! One test from the client's side: the sans-IO session plus the I/O
//! around it, one method per event.

use super::streams::{buf_size, create_stream};
use super::*;

/// One test from the client's side: the sans-IO session plus the I/O
/// around it, one method per event.
pub(super) struct ClientTest<'a> {
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
    pub(super) start_at: Option<Instant>,
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
    pub(super) fn connect(
        opts: &'a ClientOptions,
        out: &'a mut dyn Write,
    ) -> Result<Self, ClientFailure> {
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
    pub(super) fn drive(&mut self, interrupt: &AtomicBool) -> Result<(), ClientFailure> {
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
    pub(super) fn conclude(&mut self, result: &Result<(), ClientFailure>) {
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
pub(super) fn error_document(opts: &ClientOptions, e: &ClientFailure) -> String {
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
