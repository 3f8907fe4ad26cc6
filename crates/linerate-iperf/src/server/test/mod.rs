//! One test on the server: the sans-IO session plus the I/O around it,
//! one method per event; its streams taken as they connect ([`streams`]),
//! the timers and limits that end it watched ([`watch`]).

mod streams;
mod watch;

use super::*;

#[allow(clippy::too_many_arguments)]
pub(super) fn serve_test(
    ctrl: TcpStream,
    peer: SocketAddr,
    cookie: Cookie,
    port: u16,
    data_rx: &Receiver<DataConn>,
    opts: &ServerOptions,
    out: &Out,
    shared: &Shared<'_>,
) {
    if !opts.output.json && !opts.output.json_stream {
        say(
            out,
            &format!(
                "Accepted connection from {}, port {}\n",
                net::host_of(&peer),
                peer.port()
            ),
        );
    }
    let _ = ctrl.set_nodelay(true);
    let _ = ctrl.set_read_timeout(Some(Duration::from_millis(20)));
    let serve = |events| {
        TestServer {
            local_ip: ctrl.local_addr().ok().map(|a| a.ip()),
            ctrl,
            peer,
            cookie,
            port,
            env: TestEnv {
                data_rx,
                accepting: shared.accepting,
                opts,
                out,
                shutdown: shared.shutdown,
                udp_setup: shared.udp_setup,
                refused: shared.refused,
                rate_cut: shared.rate_cut,
                events,
            },
            session: ServerSession::new(),
            cpu: CpuMeter::start(),
            params: None,
            udp_listener: None,
            udp_guard: None,
            conns: Vec::new(),
            arrived: Vec::new(),
            running: None,
            meter: None,
            report: None,
            start_at: None,
            phase_start: Instant::now(),
            last_rx: (0, Instant::now()),
            moved: Default::default(),
            streams_seen: 0,
            doctor: None,
            ended: None,
        }
        .run()
    };
    // Each test is a run of the run model: its start is the engine's (its
    // settings come with the client's parameters), its end the engine's.
    match &opts.events {
        Some(shared) => {
            linerate_run::drive_engine(Box::new(shared.0.clone()), |engine| serve(Some(engine)));
        }
        None => serve(None),
    }
}

/// What a test shares with the accept loop and the other tests.
struct TestEnv<'a> {
    /// Data connections whose cookie is this test's.
    data_rx: &'a Receiver<DataConn>,
    /// Set while this test takes data connections.
    accepting: &'a AtomicBool,
    opts: &'a ServerOptions,
    out: &'a Out,
    shutdown: &'a AtomicBool,
    /// UDP streams carry no cookie: one test at a time sets them up.
    udp_setup: &'a Mutex<()>,
    /// Set when the client's credentials were refused.
    refused: &'a AtomicBool,
    /// Set when the test was ended for moving more than the rate limit
    /// (its source then cools down).
    rate_cut: &'a AtomicBool,
    /// This test's run-model reporter (`--csv`, `--live`, `--metrics`).
    events: Option<linerate_run::SharedReporter>,
}

/// What the accept loop shares with a test's thread.
pub(super) struct Shared<'a> {
    pub accepting: &'a AtomicBool,
    pub shutdown: &'a AtomicBool,
    pub udp_setup: &'a Mutex<()>,
    pub refused: &'a AtomicBool,
    pub rate_cut: &'a AtomicBool,
}

/// One test on one control connection: the protocol session (sans-IO) and
/// the I/O around it, one method per event.
struct TestServer<'a> {
    ctrl: TcpStream,
    peer: SocketAddr,
    cookie: Cookie,
    port: u16,
    local_ip: Option<IpAddr>,
    env: TestEnv<'a>,
    session: ServerSession,
    cpu: CpuMeter,
    params: Option<Params>,
    udp_listener: Option<UdpSocket>,
    udp_guard: Option<std::sync::MutexGuard<'a, ()>>,
    conns: Vec<(Conn, StreamDesc)>,
    /// TCP data connections in, not numbered yet (until all are).
    arrived: Vec<DataConn>,
    running: Option<Running>,
    meter: Option<Meter>,
    report: Option<Report>,
    start_at: Option<Instant>,
    /// When the current wait (for parameters, streams or results) began.
    phase_start: Instant,
    /// Bytes received so far and when that last changed (idle timeout).
    last_rx: (u64, Instant),
    /// (when, bytes moved) over the last rate window.
    moved: std::collections::VecDeque<(Instant, u64)>,
    /// Streams connected when the stream wait last looked.
    streams_seen: usize,
    /// linerate doctor's summary for the report (streams not pinned),
    /// taken on a thread of its own while the test is set up (14 ms
    /// between TEST_END and our results when it was taken there; taken
    /// while the streams ran, it cost an overloaded host its time).
    doctor: Option<std::thread::JoinHandle<serde_json::Value>>,
    /// When TEST_END came (the test's seconds end there).
    ended: Option<Instant>,
}

/// What the loop does after a step.
#[derive(PartialEq, Eq)]
enum Next {
    /// Go on with this turn of the loop.
    Go,
    /// Back to the top: something failed and must be told to the client.
    Again,
    /// The test is over.
    End,
}

impl TestServer<'_> {
    fn run(mut self) {
        let mut buf = [0u8; 65536];
        loop {
            if self.flush_control() == Next::End {
                break;
            }
            if self.handle_events() == Next::End || self.session.is_closed() {
                break;
            }
            // What the events queued (CREATE_STREAMS, TEST_START, our
            // results) goes out now, not after the wait below: each step
            // of the exchange waited up to a wake-up (20 ms) for it.
            if self.flush_control() == Next::End {
                break;
            }
            if self.env.shutdown.load(Ordering::Relaxed) {
                self.terminate(&mut buf);
                break;
            }
            if self.session.accepting_streams()
                && (self.accept_streams() == Next::Again || !self.session.accepting_streams())
            {
                // A failure to tell, or every stream is in: TEST_START goes
                // out now.
                continue;
            }
            if self.watch() == Next::Again {
                continue;
            }
            let wake = if self.ended.is_some() {
                crate::meter::CONTROL_WAKE
            } else {
                until_due(self.meter.as_ref())
            };
            let got = if self.session.accepting_streams() {
                self.wait_for_streams(&mut buf, wake)
            } else {
                net::read_within(&mut self.ctrl, &mut buf, wake)
            };
            match got {
                Ok(0) => self.session.handle_eof(),
                Ok(n) => self.session.handle_bytes(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(_) => self.session.handle_eof(),
            }
        }
        if let Some(r) = self.running.as_mut() {
            r.stop(false);
        }
        let _ = self.ctrl.shutdown(std::net::Shutdown::Both);
    }

    /// Sends what the session queued; each message must be taken by the
    /// client within the control timeout (a client that stops reading
    /// would otherwise hold this test, and its slot, for ever).
    fn flush_control(&mut self) -> Next {
        let limit = self.env.opts.control_timeout;
        while let Some(b) = self.session.poll_transmit() {
            if self.env.opts.debug > 0 {
                eprintln!(
                    "debug: {} sent {}",
                    self.peer,
                    linerate_iperf_proto::describe_message(&b)
                );
            }
            match net::write_within(&mut self.ctrl, &b, limit) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::TimedOut => {
                    self.end_with(&format!(
                        "the client did not read its control connection for {} ms; test ended",
                        limit.as_millis()
                    ));
                    return Next::End;
                }
                Err(_) => {
                    self.session.handle_eof();
                    break;
                }
            }
        }
        Next::Go
    }

    fn say(&self, text: &str) {
        say(self.env.out, text);
    }

    fn handle_events(&mut self) -> Next {
        while let Some(ev) = self.session.poll_event() {
            if self.env.opts.debug > 0 {
                eprintln!("debug: {} {}", self.peer, server_event_name(&ev));
            }
            match ev {
                ServerEvent::Params(p) => self.on_params(p),
                ServerEvent::Start => {
                    if self.on_start() == Next::End {
                        return Next::End;
                    }
                }
                ServerEvent::TestEnd => self.on_test_end(),
                ServerEvent::ClientResults(r) => self.on_client_results(&r),
                ServerEvent::Done => return Next::End,
                ServerEvent::ClientTerminated => {
                    self.end_with("the client has terminated");
                    return Next::End;
                }
                ServerEvent::ClientGone => {
                    self.end_with("the client has unexpectedly closed the connection");
                    return Next::End;
                }
                ServerEvent::Failed(e) => {
                    let limit = self.env.opts.control_timeout;
                    while let Some(b) = self.session.poll_transmit() {
                        if net::write_within(&mut self.ctrl, &b, limit).is_err() {
                            break;
                        }
                    }
                    let (_, text) = self.finish(Some(e.message().into()));
                    self.say(&text);
                    self.say(&format!("linerate: test failed: {e}\n"));
                    return Next::End;
                }
            }
        }
        Next::Go
    }

    /// Parameters arrived: check them against the limits and get ready for
    /// the streams (for UDP, the shared port, one test at a time).
    fn on_params(&mut self, p: Params) {
        if let Some(auth) = &self.env.opts.auth {
            match auth.check(p.authtoken.as_deref()) {
                Ok((user, ts)) => {
                    if self.env.opts.debug > 0 {
                        eprintln!("debug: Authentication succeeded for user '{user}' ts {ts}");
                    }
                }
                Err(why) => {
                    // The client is told only iperf3's "test authorization
                    // failed"; the reason is for the server's operator.
                    self.say(&format!(
                        "linerate: authentication failed for {}: {why}\n",
                        self.peer
                    ));
                    self.env.refused.store(true, Ordering::Release);
                    self.session.fail(IErr::AUTH_TEST);
                    return;
                }
            }
        }
        if let Err(code) = check_limits(&p, &self.env.opts.limits) {
            self.session.fail(code);
            return;
        }
        if p.protocol == Protocol::Udp {
            // Another test holds the UDP set-up until its streams are
            // connected or its control timeout ends it: wait a little longer
            // than that.
            let deadline = Instant::now() + self.env.opts.control_timeout + Duration::from_secs(1);
            self.udp_guard = loop {
                match self.env.udp_setup.try_lock() {
                    Ok(g) => break Some(g),
                    Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(_) => break None,
                }
            };
            if self.udp_guard.is_none() {
                self.session.fail(IErr(201));
                return;
            }
            match self.udp_port() {
                Ok(u) => self.udp_listener = Some(u),
                Err(e) => {
                    self.say(&format!(
                        "linerate: unable to bind UDP port {}: {e}\n",
                        self.port
                    ));
                    self.session.fail(IErr(201));
                    return;
                }
            }
        }
        self.params = Some(p);
        let local = self.local_ip;
        self.doctor = std::thread::Builder::new()
            .name("doctor".into())
            .spawn(move || linerate_doctor::test_summary_at(local, &[]))
            .ok();
        self.env.accepting.store(true, Ordering::Release);
        self.phase_start = Instant::now();
        self.session.ready_for_streams();
    }

    /// A socket on the test port waiting for a UDP stream's first datagram.
    fn udp_port(&self) -> std::io::Result<UdpSocket> {
        let o = self.env.opts;
        let u = net::udp_bound(
            net::server_addr(o.bind, o.family, self.port),
            o.family,
            o.bind_dev.as_deref(),
        )?;
        let _ = u.set_read_timeout(Some(Duration::from_millis(10)));
        Ok(u)
    }

    /// Every stream is connected: start them, the report and the meter.
    fn on_start(&mut self) -> Next {
        self.env.accepting.store(false, Ordering::Release);
        self.udp_listener = None;
        // Streams are connected: the next UDP test may set up.
        drop(self.udp_guard.take());
        let Some(p) = self.params.clone() else {
            return Next::End;
        };
        let opts = self.env.opts;
        let now = Instant::now();
        self.start_at = Some(now);
        let info = StartInfo {
            role: Role::Server,
            params: p.clone(),
            cookie: cookie_str(&self.cookie),
            system_info: net::system_info(),
            timestamp_secs: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            peer_host: net::host_of(&self.peer),
            peer_port: self.peer.port(),
            tcp_mss_default: 0,
            sndbuf_actual: 0,
            rcvbuf_actual: 0,
            interval_s: opts.interval.as_secs_f64(),
            gso: p.protocol == Protocol::Udp
                && opts.udp_gso
                && self.conns.iter().any(|(_, d)| d.sender),
            gro: p.protocol == Protocol::Udp && self.conns.iter().any(|(_, d)| !d.sender),
            host: linerate_run::Host::here(),
            streams: self.conns.iter().map(|(_, d)| d.clone()).collect(),
        };
        let mut rep = Report::new(info, opts.output);
        self.say(&rep.start_text());
        forward_events(&mut rep, self.env.events.as_ref());
        self.report = Some(rep);
        let so = StreamOpts {
            udp_gso: opts.udp_gso,
            affinity: match p.server_affinity {
                Some(cpu) if cpu >= 0 => vec![cpu as usize],
                _ => opts.affinity.clone(),
            },
            zerocopy: p.zerocopy,
            file: opts.file.clone(),
        };
        let r = spawn_streams(std::mem::take(&mut self.conns), &p, &so);
        // Our senders (-R, --bidir) stop at the asked time, as the client's
        // do; TEST_END then finds them done.
        r.go((p.time_s > 0)
            .then(|| now + Duration::from_secs(u64::from(p.time_s) + u64::from(p.omit_s))));
        self.meter = Some(
            Meter::for_test(r.streams.clone(), &p, opts.interval, now)
                .with_budget(r.budget.clone()),
        );
        self.running = Some(r);
        self.last_rx = (0, now);
        Next::Go
    }

    /// TEST_END: the senders stop and the receivers take what was sent,
    /// while the results exchange starts (the drain used to come first:
    /// 20 ms of every test against a client that does not close its
    /// streams, iperf3's, and every UDP test).
    fn on_test_end(&mut self) {
        let now = Instant::now();
        self.ended = Some(now);
        self.phase_start = now;
        if let Some(r) = self.running.as_mut() {
            r.begin_drain();
        }
    }

    /// Waits until every receiving stream took what the client says it
    /// sent on it (its bytes; with an omit period, whose figures the
    /// client leaves out, until the stream's drain ends by itself), or
    /// ended its drain (nothing more came for a while, or the peer closed
    /// it), at most [`stream::DRAIN_MAX`].
    fn wait_for_drain(&self, client: &linerate_iperf_proto::PeerResults) {
        let Some(r) = self.running.as_ref() else {
            return;
        };
        let exact = self.params.as_ref().is_some_and(|p| p.omit_s == 0);
        let deadline = Instant::now() + crate::stream::DRAIN_MAX;
        loop {
            let done = r.streams.iter().filter(|s| !s.sender).all(|s| {
                s.finished.load(Ordering::Acquire)
                    || (exact
                        && client
                            .stream(s.id)
                            .is_some_and(|c| s.bytes.load(Ordering::Relaxed) >= c.bytes))
            });
            if done || Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The client's results: once the receivers have what it sent, the
    /// streams stop, the final report is printed and our results go out.
    fn on_client_results(&mut self, client: &linerate_iperf_proto::PeerResults) {
        self.wait_for_drain(client);
        let (finals, text) = self.finish(None);
        self.say(&text);
        let p = self.params.clone().unwrap_or_default();
        let mut results = peer_results(&finals, self.cpu.read(), p.protocol == Protocol::Tcp);
        if p.get_server_output {
            if self.env.opts.output.json {
                results.server_output_json = serde_json::from_str(&text).ok();
            } else {
                results.server_output_text = self.report.as_ref().map(|r| r.text().to_string());
            }
        }
        self.phase_start = Instant::now();
        self.session.local_results(results);
    }

    /// The test ends early for `why`: what was measured is still reported.
    fn end_with(&mut self, why: &str) {
        let (_, text) = self.finish(Some(why.into()));
        self.say(&text);
        self.say(&format!("linerate: {why}\n"));
    }

    /// Stops the streams (draining them when the test ended normally) and
    /// renders the last interval and the end of the report.
    fn finish(
        &mut self,
        err: Option<String>,
    ) -> (Vec<linerate_iperf_proto::report::StreamFinal>, String) {
        // The test ended at TEST_END (or now, at an error): its seconds end
        // there, and what the drain takes in was sent before it (the time
        // was taken after draining and joining: 2.03-2.08 s for -t 2).
        let ended = self.ended.unwrap_or_else(Instant::now);
        if let Some(r) = self.running.as_mut() {
            if err.is_none() && self.ended.is_none() {
                r.drain_and_stop();
            } else {
                r.stop(false);
            }
        }
        let ended = self.data_end(ended);
        let mut finals = Vec::new();
        let mut text = String::new();
        if let (Some(mut m), Some(rep)) = (self.meter.take(), self.report.as_mut()) {
            let (last, f) = m.finish(ended);
            if let Some(last) = last {
                text.push_str(&rep.interval(&last));
            }
            if let Some(e) = err {
                rep.set_error(&e);
            }
            let pinned = self.running.as_ref().map_or(&[][..], |r| &r.cpus[..]);
            let early = self.doctor.take().map(std::thread::JoinHandle::join);
            let doctor = match early {
                Some(Ok(d)) if pinned.is_empty() => d,
                _ => linerate_doctor::test_summary_at(self.local_ip, pinned),
            };
            let extra = linerate_iperf_proto::report::Extra {
                doctor: Some(doctor),
                mptcp: None,
            };
            text.push_str(&rep.finish(&f, self.cpu.read(), None, extra));
            forward_events(rep, self.env.events.as_ref());
            finals = f;
        }
        (finals, text)
    }

    /// Where a test that ends by time ended for the data: its scheduled
    /// end, or the last data a receiving stream took after it, and never
    /// after `ended` (TEST_END). A loaded host reads TEST_END late (11 ms in
    /// CI); the streams' own times do not depend on that.
    fn data_end(&self, ended: Instant) -> Instant {
        let (Some(p), Some(start)) = (self.params.as_ref(), self.start_at) else {
            return ended;
        };
        if p.time_s == 0 {
            return ended;
        }
        let scheduled = start + Duration::from_secs(u64::from(p.time_s) + u64::from(p.omit_s));
        let now_ns = linerate_backend::clock::monotonic_ns();
        let now = Instant::now();
        let last_rx = self
            .running
            .as_ref()
            .into_iter()
            .flat_map(|r| r.streams.iter())
            .filter(|s| !s.sender)
            .map(|s| s.last_rx_ns.load(Ordering::Relaxed))
            .filter(|&ns| ns != 0)
            .max()
            .map(|ns| now - Duration::from_nanos(now_ns.saturating_sub(ns)));
        ended.min(last_rx.map_or(scheduled, |t| t.max(scheduled)))
    }

    /// The server is shutting down: tell the client, give it a moment to
    /// read that (and close) before its data sockets fail under it, so it
    /// reports the right cause, and report what was measured.
    fn terminate(&mut self, buf: &mut [u8]) {
        let _ = net::write_within(
            &mut self.ctrl,
            &[state::SERVER_TERMINATE],
            Duration::from_millis(500),
        );
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            match self.ctrl.read(buf) {
                Ok(0) => break,
                Err(e)
                    if !matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) =>
                {
                    break;
                }
                _ => {}
            }
        }
        let (_, text) = self.finish(Some("the server has terminated".into()));
        self.say(&text);
    }
}

/// What `-d` says of an event of the server's session (parameters as
/// JSON, the authentication token hidden).
fn server_event_name(ev: &ServerEvent) -> String {
    match ev {
        ServerEvent::Params(p) => {
            let mut v = p.to_json();
            if let Some(t) = v.get_mut("authtoken") {
                *t = serde_json::json!("(hidden)");
            }
            format!("received parameters {v}")
        }
        ServerEvent::Start => "all streams connected: TEST_START".into(),
        ServerEvent::TestEnd => "received TEST_END".into(),
        ServerEvent::ClientResults(_) => "received the client's results".into(),
        ServerEvent::Done => "received IPERF_DONE".into(),
        ServerEvent::ClientTerminated => "received CLIENT_TERMINATE".into(),
        ServerEvent::ClientGone => "the control connection closed".into(),
        ServerEvent::Failed(e) => format!("failed: {e}"),
    }
}
