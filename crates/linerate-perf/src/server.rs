//! The server: accepts tests from iperf3 clients (or `linerate client`),
//! one at a time as iperf3 does; a connection arriving while a test runs
//! gets ACCESS_DENIED, and the server goes on serving.

use crate::client::{Conn, Running, StreamOpts, spawn_streams};
use crate::meter::{Meter, until_due};
use crate::net::{self, CpuMeter, Family};
use linerate_iperf::report::{OutputMode, Report, Role, StartInfo, StreamDesc, peer_results};
use linerate_iperf::server::{ServerEvent, ServerSession};
use linerate_iperf::{COOKIE_LEN, Cookie, IErr, Params, Protocol, cookie_str, state, udp_connect};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Limits a server enforces on what clients ask for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// Tests served at once (iperf3: 1). Others get ACCESS_DENIED.
    pub max_tests: usize,
    /// Longest test (duration + omit), seconds; `-t 0` is refused too.
    pub max_duration_s: Option<u32>,
    /// Most streams per test (P, or 2P in bidir).
    pub max_streams: Option<u32>,
    /// Highest total rate (all streams), bit/s; unlimited tests are refused.
    pub max_rate_bps: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub port: u16,
    pub bind: Option<IpAddr>,
    pub family: Family,
    /// `-1`: serve one test, then exit.
    pub one_off: bool,
    pub interval: Duration,
    pub output: OutputMode,
    /// `--rcv-timeout`: no data this long while receiving ends the test.
    pub rcv_timeout: Duration,
    /// How long a new connection may take to send its cookie, and a client
    /// its parameters or results.
    pub control_timeout: Duration,
    pub limits: Limits,
    /// Send UDP with generic segmentation offload where the kernel has it.
    pub udp_gso: bool,
    /// CPUs for stream threads (a client's `-A n,m` asks for CPU m instead).
    pub affinity: Vec<usize>,
}

/// Where the server writes its output.
pub type Out = Arc<Mutex<dyn Write + Send>>;

fn say(out: &Out, text: &str) {
    if let Ok(mut o) = out.lock() {
        let _ = o.write_all(text.as_bytes());
        let _ = o.flush();
    }
}

struct Active {
    cookie: Cookie,
    data: Sender<TcpStream>,
    accepting: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<()>,
}

/// Serves until `shutdown` is set (or after one test with `-1`).
pub fn run(opts: &ServerOptions, out: Out, shutdown: Arc<AtomicBool>) -> std::io::Result<()> {
    let addr = net::server_addr(opts.bind, opts.family, opts.port);
    let listener = net::tcp_listener(addr, opts.family)?;
    serve(listener, opts, out, shutdown)
}

/// Serves on a listener already bound (tests use port 0).
pub fn serve(
    listener: TcpListener,
    opts: &ServerOptions,
    out: Out,
    shutdown: Arc<AtomicBool>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    let human = !opts.output.json && !opts.output.json_stream;
    let banner = |n: u32| {
        if human {
            say(
                &out,
                &format!(
                    "-----------------------------------------------------------\nServer listening on {port} (test #{n})\n-----------------------------------------------------------\n"
                ),
            );
        }
    };
    let mut test_no = 1;
    banner(test_no);
    let (cookie_tx, cookie_rx) =
        mpsc::channel::<(TcpStream, SocketAddr, std::io::Result<Cookie>)>();
    let mut active: Vec<Active> = Vec::new();
    let pending = Arc::new(AtomicUsize::new(0));
    let udp_setup = Arc::new(Mutex::new(()));
    let max_tests = opts.limits.max_tests.max(1);
    loop {
        if shutdown.load(Ordering::Relaxed) {
            for a in active.drain(..) {
                let _ = a.handle.join();
            }
            return Ok(());
        }
        match listener.accept() {
            // A flood of connections: beyond PENDING_MAX unread cookies,
            // newcomers are refused at once instead of each holding a thread.
            Ok((mut s, _)) if pending.load(Ordering::Acquire) >= PENDING_MAX => {
                let _ = s.write_all(&[state::ACCESS_DENIED]);
            }
            Ok((s, peer)) => {
                let tx = cookie_tx.clone();
                let timeout = opts.control_timeout;
                let pending = pending.clone();
                pending.fetch_add(1, Ordering::AcqRel);
                std::thread::spawn(move || {
                    let mut s = s;
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(timeout));
                    let mut c = [0u8; COOKIE_LEN];
                    let r = s.read_exact(&mut c).map(|()| c);
                    pending.fetch_sub(1, Ordering::AcqRel);
                    let _ = tx.send((s, peer, r));
                });
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => say(&out, &format!("linerate: accept failed: {e}\n")),
        }
        match cookie_rx.recv_timeout(Duration::from_millis(5)) {
            Ok((mut s, peer, Err(e))) => {
                // iperf3 3.21: SERVER_ERROR + IERECVCOOKIE to a silent peer.
                let mut msg = vec![state::SERVER_ERROR];
                msg.extend_from_slice(&IErr::RECV_COOKIE.0.to_be_bytes());
                msg.extend_from_slice(&0i32.to_be_bytes());
                let _ = s.write_all(&msg);
                say(
                    &out,
                    &format!("linerate: no cookie from {peer} ({e}); closed it\n"),
                );
            }
            Ok((mut s, peer, Ok(cookie))) => {
                if let Some(a) = active.iter().find(|a| a.cookie == cookie) {
                    if a.accepting.load(Ordering::Acquire) {
                        let _ = a.data.send(s);
                    } else {
                        let _ = s.write_all(&[state::ACCESS_DENIED]);
                    }
                } else if active.len() >= max_tests {
                    let _ = s.write_all(&[state::ACCESS_DENIED]);
                    if human {
                        say(
                            &out,
                            &format!(
                                "linerate: denied {peer}: {} test(s) running (--max-tests {max_tests})\n",
                                active.len()
                            ),
                        );
                    }
                } else {
                    let (data_tx, data_rx) = mpsc::channel();
                    let accepting = Arc::new(AtomicBool::new(false));
                    let done = Arc::new(AtomicBool::new(false));
                    let (o, acc, dn, sd, op, us) = (
                        out.clone(),
                        accepting.clone(),
                        done.clone(),
                        shutdown.clone(),
                        opts.clone(),
                        udp_setup.clone(),
                    );
                    let handle = std::thread::spawn(move || {
                        serve_test(s, peer, cookie, port, &data_rx, &acc, &op, &o, &sd, &us);
                        acc.store(false, Ordering::Release);
                        dn.store(true, Ordering::Release);
                    });
                    active.push(Active {
                        cookie,
                        data: data_tx,
                        accepting,
                        done,
                        handle,
                    });
                }
            }
            Err(_) => {}
        }
        let mut finished = 0;
        let mut i = 0;
        while i < active.len() {
            if active[i].done.load(Ordering::Acquire) {
                let a = active.swap_remove(i);
                let _ = a.handle.join();
                finished += 1;
            } else {
                i += 1;
            }
        }
        if finished > 0 {
            if opts.one_off {
                for a in active.drain(..) {
                    let _ = a.handle.join();
                }
                return Ok(());
            }
            test_no += finished;
            if active.is_empty() {
                banner(test_no);
            }
        }
    }
}

/// Connections whose cookie is still being read, at most.
const PENDING_MAX: usize = 64;

fn check_limits(p: &Params, l: &Limits) -> Result<(), IErr> {
    if let Some(max) = l.max_duration_s
        && (p.time_s == 0 || p.time_s + p.omit_s > max)
    {
        return Err(IErr::MAX_DURATION);
    }
    if let Some(max) = l.max_streams
        && p.stream_count() as u32 > max
    {
        return Err(IErr::NUM_STREAMS);
    }
    if let Some(max) = l.max_rate_bps
        && (p.bandwidth_bps == 0 || p.bandwidth_bps.saturating_mul(p.stream_count() as u64) > max)
    {
        return Err(IErr::TOTAL_RATE);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn serve_test(
    mut ctrl: TcpStream,
    peer: SocketAddr,
    cookie: Cookie,
    port: u16,
    data_rx: &Receiver<TcpStream>,
    accepting: &AtomicBool,
    opts: &ServerOptions,
    out: &Out,
    shutdown: &AtomicBool,
    udp_setup: &Mutex<()>,
) {
    let human = !opts.output.json && !opts.output.json_stream;
    if human {
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
    let mut session = ServerSession::new();
    let cpu = CpuMeter::start();
    let local_ip = ctrl.local_addr().ok().map(|a| a.ip());
    let mut params: Option<Params> = None;
    let mut udp_listener: Option<UdpSocket> = None;
    let mut udp_guard: Option<std::sync::MutexGuard<'_, ()>> = None;
    let mut conns: Vec<(Conn, StreamDesc)> = Vec::new();
    let mut running: Option<Running> = None;
    let mut meter: Option<Meter> = None;
    let mut report: Option<Report> = None;
    let mut start_at: Option<Instant> = None;
    let mut phase_start = Instant::now();
    let mut last_rx = (0u64, Instant::now());
    let mut buf = [0u8; 65536];
    let finish = |report: &mut Option<Report>,
                  meter: &mut Option<Meter>,
                  running: &mut Option<Running>,
                  err: Option<String>|
     -> (Vec<linerate_iperf::report::StreamFinal>, String) {
        if let Some(r) = running.as_mut() {
            if err.is_none() {
                r.drain_and_stop();
            } else {
                r.stop(false);
            }
        }
        let mut finals = Vec::new();
        let mut text = String::new();
        if let (Some(mut m), Some(rep)) = (meter.take(), report.as_mut()) {
            let (last, f) = m.finish(Instant::now());
            if let Some(last) = last {
                text.push_str(&rep.interval(&last));
            }
            if let Some(e) = err {
                rep.set_error(&e);
            }
            let pinned = running.as_ref().map_or(&[][..], |r| &r.cpus[..]);
            let doctor = net::doctor_summary(local_ip, pinned);
            text.push_str(&rep.finish(&f, cpu.read(), None, Some(("doctor", doctor))));
            finals = f;
        }
        (finals, text)
    };
    'test: loop {
        while let Some(b) = session.poll_transmit() {
            if ctrl.write_all(&b).is_err() {
                session.handle_eof();
                break;
            }
        }
        while let Some(ev) = session.poll_event() {
            match ev {
                ServerEvent::Params(p) => {
                    if let Err(code) = check_limits(&p, &opts.limits) {
                        session.fail(code);
                        continue;
                    }
                    if p.protocol == Protocol::Udp {
                        // UDP streams carry no cookie: one test at a time may
                        // set them up on the shared port.
                        let deadline = Instant::now() + Duration::from_secs(30);
                        udp_guard = loop {
                            match udp_setup.try_lock() {
                                Ok(g) => break Some(g),
                                Err(_) if Instant::now() < deadline => {
                                    std::thread::sleep(Duration::from_millis(5))
                                }
                                Err(_) => break None,
                            }
                        };
                        if udp_guard.is_none() {
                            session.fail(IErr(201));
                            continue;
                        }
                        match net::udp_bound(
                            net::server_addr(opts.bind, opts.family, port),
                            opts.family,
                        ) {
                            Ok(u) => {
                                let _ = u.set_read_timeout(Some(Duration::from_millis(10)));
                                udp_listener = Some(u);
                            }
                            Err(e) => {
                                say(
                                    out,
                                    &format!("linerate: unable to bind UDP port {port}: {e}\n"),
                                );
                                session.fail(IErr(201));
                                continue;
                            }
                        }
                    }
                    params = Some(p);
                    accepting.store(true, Ordering::Release);
                    phase_start = Instant::now();
                    session.ready_for_streams();
                }
                ServerEvent::Start => {
                    accepting.store(false, Ordering::Release);
                    udp_listener = None;
                    // Streams are connected: the next UDP test may set up.
                    drop(udp_guard.take());
                    let Some(p) = params.clone() else { break 'test };
                    let now = Instant::now();
                    start_at = Some(now);
                    let info = StartInfo {
                        role: Role::Server,
                        params: p.clone(),
                        cookie: cookie_str(&cookie),
                        system_info: net::system_info(),
                        timestamp_secs: std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_secs()),
                        peer_host: net::host_of(&peer),
                        peer_port: peer.port(),
                        tcp_mss_default: 0,
                        sndbuf_actual: 0,
                        rcvbuf_actual: 0,
                        interval_s: opts.interval.as_secs_f64(),
                        streams: conns.iter().map(|(_, d)| d.clone()).collect(),
                    };
                    let mut rep = Report::new(info, opts.output);
                    say(out, &rep.start_text());
                    report = Some(rep);
                    let so = StreamOpts {
                        udp_gso: opts.udp_gso,
                        affinity: match p.server_affinity {
                            Some(cpu) if cpu >= 0 => vec![cpu as usize],
                            _ => opts.affinity.clone(),
                        },
                        zerocopy: p.zerocopy,
                    };
                    let r = spawn_streams(std::mem::take(&mut conns), &p, &so);
                    meter = Some(
                        Meter::new(
                            r.streams.clone(),
                            p.protocol == Protocol::Udp,
                            opts.interval,
                            Duration::from_secs(u64::from(p.omit_s)),
                            now,
                        )
                        .with_pacing(p.bandwidth_bps, p.len),
                    );
                    running = Some(r);
                    last_rx = (0, now);
                }
                ServerEvent::TestEnd => {
                    let (finals, text) = finish(&mut report, &mut meter, &mut running, None);
                    say(out, &text);
                    let p = params.clone().unwrap_or_default();
                    let mut results =
                        peer_results(&finals, cpu.read(), p.protocol == Protocol::Tcp);
                    if p.get_server_output {
                        if opts.output.json {
                            results.server_output_json = serde_json::from_str(&text).ok();
                        } else {
                            results.server_output_text =
                                report.as_ref().map(|r| r.text().to_string());
                        }
                    }
                    phase_start = Instant::now();
                    session.local_results(results);
                }
                ServerEvent::ClientResults(_) => phase_start = Instant::now(),
                ServerEvent::Done => break 'test,
                ServerEvent::ClientTerminated => {
                    let (_, text) = finish(
                        &mut report,
                        &mut meter,
                        &mut running,
                        Some("the client has terminated".into()),
                    );
                    say(out, &text);
                    say(out, "linerate: the client has terminated\n");
                    break 'test;
                }
                ServerEvent::ClientGone => {
                    let (_, text) = finish(
                        &mut report,
                        &mut meter,
                        &mut running,
                        Some("the client has unexpectedly closed the connection".into()),
                    );
                    say(out, &text);
                    say(
                        out,
                        "linerate: the client has unexpectedly closed the connection\n",
                    );
                    break 'test;
                }
                ServerEvent::Failed(e) => {
                    while let Some(b) = session.poll_transmit() {
                        let _ = ctrl.write_all(&b);
                    }
                    let (_, text) = finish(
                        &mut report,
                        &mut meter,
                        &mut running,
                        Some(e.message().into()),
                    );
                    say(out, &text);
                    say(out, &format!("linerate: test failed: {e}\n"));
                    break 'test;
                }
            }
        }
        if session.is_closed() {
            break;
        }
        if shutdown.load(Ordering::Relaxed) {
            let _ = ctrl.write_all(&[state::SERVER_TERMINATE]);
            // Give the client a moment to read it (and close) before its
            // data sockets fail under it, so it reports the right cause.
            let deadline = Instant::now() + Duration::from_millis(500);
            while Instant::now() < deadline {
                match ctrl.read(&mut buf) {
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
            let (_, text) = finish(
                &mut report,
                &mut meter,
                &mut running,
                Some("the server has terminated".into()),
            );
            say(out, &text);
            break;
        }
        // Stream creation.
        if session.accepting_streams() {
            if phase_start.elapsed() > Duration::from_secs(30) {
                session.fail(IErr(203));
                continue;
            }
            let p = params.clone().unwrap_or_default();
            if p.protocol == Protocol::Tcp {
                while let Ok(s) = data_rx.try_recv() {
                    if let Some((id, sends)) = session.stream_connected() {
                        let desc = StreamDesc {
                            id,
                            socket: s.as_raw_fd(),
                            sender: sends,
                            local: s.local_addr().unwrap_or(peer),
                            remote: s.peer_addr().unwrap_or(peer),
                        };
                        let _ = s.set_nonblocking(false);
                        conns.push((Conn::Tcp(s), desc));
                    }
                }
            } else if let Some(u) = udp_listener.as_ref() {
                let mut b = [0u8; 64];
                if let Ok((_, from)) = u.recv_from(&mut b) {
                    let conn = udp_listener.take().filter(|u| u.connect(from).is_ok());
                    match (
                        conn,
                        net::udp_bound(net::server_addr(opts.bind, opts.family, port), opts.family),
                    ) {
                        (Some(c), Ok(next)) => {
                            let _ = next.set_read_timeout(Some(Duration::from_millis(10)));
                            udp_listener = Some(next);
                            let _ = c.set_read_timeout(None);
                            let _ = c.send(&udp_connect::REPLY);
                            if let Some((id, sends)) = session.stream_connected() {
                                let desc = StreamDesc {
                                    id,
                                    socket: c.as_raw_fd(),
                                    sender: sends,
                                    local: c.local_addr().unwrap_or(peer),
                                    remote: from,
                                };
                                conns.push((Conn::Udp(c), desc));
                            }
                        }
                        _ => session.fail(IErr(203)),
                    }
                }
            }
        }
        // Intervals, idle receive timeout and the grace timer.
        if let (Some(m), Some(rep)) = (meter.as_mut(), report.as_mut()) {
            while let Some(samples) = m.tick(Instant::now()) {
                say(out, &rep.interval(&samples));
            }
            let receiving = m.streams().iter().any(|s| !s.sender);
            let total = m
                .streams()
                .iter()
                .map(|s| s.bytes.load(Ordering::Relaxed))
                .sum::<u64>();
            if total != last_rx.0 {
                last_rx = (total, Instant::now());
            } else if receiving && last_rx.1.elapsed() > opts.rcv_timeout {
                session.fail(IErr::NO_MSG);
                continue;
            }
            if let (Some(p), Some(s)) = (&params, start_at)
                && p.time_s > 0
                && s.elapsed() > Duration::from_secs(u64::from(p.time_s + p.omit_s) + 40)
            {
                session.fail(IErr::SERVER_DURATION_EXPIRED);
                continue;
            }
        } else if !session.accepting_streams() && phase_start.elapsed() > opts.control_timeout {
            // Parameters or results that never come.
            session.fail(if params.is_none() {
                IErr::RECV_PARAMS
            } else {
                IErr::RECV_RESULTS
            });
            continue;
        }
        match net::read_within(&mut ctrl, &mut buf, until_due(meter.as_ref())) {
            Ok(0) => session.handle_eof(),
            Ok(n) => session.handle_bytes(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => session.handle_eof(),
        }
    }
    if let Some(r) = running.as_mut() {
        r.stop(false);
    }
    let _ = ctrl.shutdown(std::net::Shutdown::Both);
}
