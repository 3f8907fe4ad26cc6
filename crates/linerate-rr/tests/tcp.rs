//! rr over TCP on loopback: the client (persistent connections, closed and
//! open loop; a connection per transaction) against the server, with exact
//! accounting on both sides, and hostile peers (a huge length, garbage, a
//! peer that never reads, too many connections from one source) cut off
//! while the server keeps serving.

use linerate_rr::{
    ClientConfig, ClientReport, Load, Prefix, RrError, TcpClient, TcpServer, TcpServerConfig,
    TcpServerReport, run_tcp_client,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn server_cfg() -> TcpServerConfig {
    TcpServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        cores: vec![],
        workers: 2,
        pin: false,
        duration: None,
        interval: Some(Duration::from_millis(200)),
        max_response: 4096,
        allow: vec![Prefix::parse("127.0.0.0/8").unwrap()],
        max_message: 65_536,
        max_conns: 10_000,
        max_per_source: 1_000,
        idle_timeout: Duration::from_secs(10),
        spin: false,
        busy_poll_us: 0,
        intervals_kept: linerate_rr::INTERVALS_KEPT,
    }
}

fn client_cfg(server: SocketAddr) -> ClientConfig {
    ClientConfig {
        server,
        bind: None,
        cores: vec![],
        threads: 2,
        flows: 8,
        load: Load::Closed { outstanding: 4 },
        request_size: 64,
        response_size: 200,
        duration: Duration::from_millis(600),
        timeout: Duration::from_millis(1000),
        interval: Some(Duration::from_millis(200)),
        busy_poll: false,
    }
}

/// One worker's `flows` persistent flows in open loop at `tps` for
/// `duration`.
fn open_loop_cfg(server: SocketAddr, flows: usize, tps: f64, duration: Duration) -> ClientConfig {
    ClientConfig {
        threads: 1,
        flows,
        load: Load::Open { tps },
        duration,
        ..client_cfg(server)
    }
}

const RR: TcpClient = TcpClient {
    connect_per_transaction: false,
    connect_timeout: Duration::from_secs(2),
    close_reset: false,
};
const CRR: TcpClient = TcpClient {
    connect_per_transaction: true,
    ..RR
};

/// Runs `body` against a server started with `cfg`; the server is stopped
/// (a bounded wait) once `body` returns and its report handed back too.
fn with_server<T>(
    cfg: &TcpServerConfig,
    body: impl FnOnce(SocketAddr) -> T,
) -> (T, TcpServerReport) {
    let server = TcpServer::bind(cfg).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let h = s.spawn(|| server.run(&stop, |_| {}));
        let stopper = linerate_testkit::StopOnDrop(&stop);
        let out = body(addr);
        // let the server see the client's last closes
        std::thread::sleep(Duration::from_millis(200));
        drop(stopper);
        (out, h.join().unwrap())
    })
}

fn check_client(c: &ClientReport) {
    let t = &c.total;
    assert_eq!(t.sent, t.completed + t.lost, "{t:?}");
    assert_eq!(
        (t.duplicate, t.unknown, t.malformed, t.late),
        (0, 0, 0, 0),
        "{t:?}"
    );
    let iv: u64 = c.intervals.iter().map(|i| i.completed).sum();
    assert_eq!(iv, t.completed, "intervals add up");
}

#[test]
fn closed_loop_persistent_connections_are_counted_exactly_on_both_sides() {
    closed_loop_counted_exactly(&server_cfg());
}

/// The same against a spinning server: each of its two workers reads its
/// first four connections itself (outside its epoll set), the other four
/// through it; every count exact all the same.
#[test]
fn a_spinning_server_counts_its_direct_and_its_polled_connections_exactly() {
    closed_loop_counted_exactly(&TcpServerConfig {
        spin: true,
        ..server_cfg()
    });
}

fn closed_loop_counted_exactly(cfg: &TcpServerConfig) {
    let (c, s) = with_server(cfg, |addr| {
        run_tcp_client(&client_cfg(addr), &RR, &AtomicBool::new(false), |_| {}).unwrap()
    });
    check_client(&c);
    let t = &c.total;
    assert_eq!(
        (t.lost, t.connects, t.connect_errors, t.resets),
        (0, 16, 0, 0),
        "{t:?}"
    );
    assert!(t.completed > 1000, "{t:?}");
    assert!(c.latency.as_ref().unwrap().p50 > 0);
    assert_eq!(c.workers.iter().map(|w| w.local.len()).sum::<usize>(), 16);
    let st = &s.total;
    assert_eq!(st.requests, t.sent, "{st:?}");
    assert_eq!(st.answered, t.sent);
    assert_eq!(st.bytes_in, t.sent * 64);
    assert_eq!(st.bytes_out, t.sent * 200);
    assert_eq!((st.accepted, st.closed, st.resets), (16, 16, 0), "{st:?}");
    assert_eq!(
        (st.malformed, st.oversized, st.too_large, st.unsent_bytes),
        (0, 0, 0, 0)
    );
    let v = c.json();
    assert_eq!(v["transport"], "tcp");
    assert_eq!(v["counts"]["connect_errors"], 0);
    assert_eq!(s.json()["counts"]["accepted"], 16);
}

#[test]
fn open_loop_keeps_its_rate_and_stamps_the_schedule() {
    let mut cfg = server_cfg();
    cfg.workers = 1;
    let (c, s) = with_server(&cfg, |addr| {
        let cfg = open_loop_cfg(addr, 10, 2000.0, Duration::from_secs(1));
        run_tcp_client(&cfg, &RR, &AtomicBool::new(false), |_| {}).unwrap()
    });
    check_client(&c);
    let t = &c.total;
    assert!((1990..=2010).contains(&t.sent), "{t:?}");
    assert_eq!(t.lost, 0);
    assert!(c.send_lag.is_some(), "open loop reports its send lag");
    assert_eq!(s.total.requests, t.sent);
}

#[test]
fn a_connection_per_transaction_is_counted_on_both_sides() {
    let (c, s) = with_server(&server_cfg(), |addr| {
        let cfg = ClientConfig {
            duration: Duration::from_millis(800),
            ..client_cfg(addr)
        };
        run_tcp_client(&cfg, &CRR, &AtomicBool::new(false), |_| {}).unwrap()
    });
    let t = &c.total;
    assert_eq!(
        t.connects,
        t.completed + t.lost + t.connect_errors + t.resets + t.malformed,
        "each transaction ends one way: {t:?}"
    );
    assert!(t.completed > 200, "{t:?}");
    assert_eq!((t.connect_errors, t.resets, t.lost), (0, 0, 0), "{t:?}");
    let st = &s.total;
    assert_eq!(st.accepted, t.connects, "{st:?}");
    assert_eq!(st.closed, st.accepted, "no connection left behind: {st:?}");
    assert_eq!(st.requests, t.sent);
    assert_eq!(c.json()["transport"], "tcp, a connection per transaction");
}

#[test]
fn a_closed_port_is_connect_errors_and_no_answer() {
    // a port just freed: nothing listens there
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let cfg = ClientConfig {
        threads: 1,
        flows: 3,
        duration: Duration::from_millis(200),
        ..client_cfg(port)
    };
    let Err(RrError::NoAnswer { report, .. }) =
        run_tcp_client(&cfg, &RR, &AtomicBool::new(false), |_| {})
    else {
        panic!("no server, no answer");
    };
    assert_eq!((report.total.connects, report.total.connect_errors), (3, 3));
    let Err(RrError::NoAnswer { report, .. }) =
        run_tcp_client(&cfg, &CRR, &AtomicBool::new(false), |_| {})
    else {
        panic!("no server, no answer");
    };
    assert_eq!(report.total.connects, report.total.connect_errors);
    assert!(report.total.connects > 0);
}

/// Whether the server closed `s` within two seconds (a read sees the end
/// or a reset).
fn closed_by_server(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn hostile_peers_are_cut_off_and_the_server_keeps_serving() {
    hostile_peers_cut_off(server_cfg());
}

/// The same against a spinning server, whose first connections are read
/// outside its epoll set (the hostile ones among them).
#[test]
fn hostile_peers_are_cut_off_by_a_spinning_server_too() {
    hostile_peers_cut_off(TcpServerConfig {
        spin: true,
        ..server_cfg()
    });
}

fn hostile_peers_cut_off(mut cfg: TcpServerConfig) {
    cfg.workers = 1;
    cfg.max_per_source = 6;
    cfg.idle_timeout = Duration::from_millis(500);
    let (c, s) = with_server(&cfg, |addr| {
        // a length of 4 GB
        let mut huge = TcpStream::connect(addr).unwrap();
        huge.write_all(&u32::MAX.to_be_bytes()).unwrap();
        huge.write_all(&[0u8; 100]).unwrap();
        assert!(
            closed_by_server(&mut huge),
            "a huge length closes the connection"
        );
        // not rr at all
        let mut http = TcpStream::connect(addr).unwrap();
        http.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        assert!(closed_by_server(&mut http));
        // a well-framed message that is not an rr request
        let mut junk = TcpStream::connect(addr).unwrap();
        junk.write_all(&40u32.to_be_bytes()).unwrap();
        junk.write_all(&[7u8; 40]).unwrap();
        assert!(closed_by_server(&mut junk));
        // a peer that sends requests and never reads the answers
        let mut deaf = TcpStream::connect(addr).unwrap();
        deaf.set_nonblocking(true).unwrap();
        let mut req = Vec::new();
        req.extend_from_slice(&1024u32.to_be_bytes());
        let mut msg = vec![0u8; 1024];
        linerate_wire::RrHeader {
            kind: linerate_wire::RrKind::Request,
            flow: 0,
            reply_len: 0,
            seq: 0,
            stamp_ns: 0,
        }
        .emit(&mut msg)
        .unwrap();
        req.extend_from_slice(&msg);
        let mut written = 0usize;
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_secs(3) {
            match deaf.write(&req) {
                Ok(n) => written += n,
                Err(_) => break,
            }
        }
        assert!(
            written > 64 * 1024,
            "the server read until its output filled"
        );
        deaf.set_nonblocking(false).unwrap();
        // more connections from one source than allowed: the rest are closed
        let many: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(100));
        drop(many);
        assert!(
            closed_by_server(&mut deaf),
            "the deaf peer is closed when idle"
        );
        // the server still serves a well-behaved client
        let cfg = ClientConfig {
            threads: 1,
            flows: 2,
            duration: Duration::from_millis(300),
            ..client_cfg(addr)
        };
        run_tcp_client(&cfg, &RR, &AtomicBool::new(false), |_| {}).unwrap()
    });
    check_client(&c);
    assert_eq!(c.total.lost, 0);
    let st = &s.total;
    assert_eq!(st.oversized, 2, "{st:?}");
    assert_eq!(st.malformed, 1, "{st:?}");
    assert_eq!(st.idle_closed, 1, "{st:?}");
    // 8 at once with the deaf one still open: 6 - 1 admitted
    assert_eq!(st.refused_source, 3, "{st:?}");
    assert_eq!(st.accepted, st.closed, "{st:?}");
}

/// A persistent connection the server closes (its idle timeout, shorter
/// than the gap between requests) is counted and made again after the
/// back-off; every request still gets its answer. Open loop at 2/s for
/// 2.5 s: 5 requests, 500 ms apart; the server closes each connection
/// 300-350 ms after its answer (the last one too, before the run's end
/// at 2.5 s), so 5 resets and 5 reconnects exactly.
#[test]
fn a_connection_the_server_closes_is_counted_and_made_again() {
    let mut cfg = server_cfg();
    cfg.workers = 1;
    cfg.idle_timeout = Duration::from_millis(300);
    let (c, s) = with_server(&cfg, |addr| {
        let cfg = open_loop_cfg(addr, 1, 2.0, Duration::from_millis(2500));
        run_tcp_client(&cfg, &RR, &AtomicBool::new(false), |_| {}).unwrap()
    });
    check_client(&c);
    let t = &c.total;
    assert_eq!((t.sent, t.completed, t.lost), (5, 5, 0), "{t:?}");
    assert_eq!(
        (t.connects, t.reconnects, t.resets, t.connect_errors),
        (6, 5, 5, 0),
        "{t:?}"
    );
    let st = &s.total;
    assert_eq!(
        (st.accepted, st.idle_closed, st.requests),
        (6, 5, 5),
        "{st:?}"
    );
    assert_eq!(c.json()["counts"]["reconnects"], 5);
}

/// A server stopped and started again on its port: the client counts the
/// closed connection and the refused connects, backs off (at most 1 s
/// between attempts) and goes on with the new server; the requests due
/// meanwhile leave when it is back (stamped with their schedule).
#[test]
fn a_long_run_survives_a_server_restart() {
    let mut cfg = server_cfg();
    cfg.workers = 1;
    let first = TcpServer::bind(&cfg).unwrap();
    let addr = first.local_addr();
    cfg.bind = addr;
    let (stop1, stop2) = (AtomicBool::new(false), AtomicBool::new(false));
    let (c, s1, s2) = std::thread::scope(|s| {
        let h1 = s.spawn(|| first.run(&stop1, |_| {}));
        let client = s.spawn(|| {
            let cfg = open_loop_cfg(addr, 2, 20.0, Duration::from_secs(3));
            run_tcp_client(&cfg, &RR, &AtomicBool::new(false), |_| {}).unwrap()
        });
        std::thread::sleep(Duration::from_millis(1000));
        stop1.store(true, Ordering::Relaxed);
        let s1 = h1.join().unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let second = TcpServer::bind(&cfg).unwrap();
        let h2 = s.spawn(|| second.run(&stop2, |_| {}));
        let c = client.join().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        stop2.store(true, Ordering::Relaxed);
        (c, s1, h2.join().unwrap())
    });
    check_client(&c);
    let t = &c.total;
    assert_eq!(t.sent, 60, "every request due was sent: {t:?}");
    assert!(t.lost <= 2, "at most those in flight at the stop: {t:?}");
    assert_eq!(t.resets, 2, "both connections closed by the stop: {t:?}");
    assert!(t.connect_errors >= 2, "refused while down: {t:?}");
    assert_eq!(t.reconnects, 2 + t.connect_errors, "{t:?}");
    assert_eq!(s1.total.accepted + s2.total.accepted, 4, "{s1:?} {s2:?}");
    assert_eq!(s1.total.requests + s2.total.requests, t.completed);
    assert!(s2.total.requests > 20, "the new server served: {s2:?}");
    // Requests due while the server was down waited for it: their
    // latency counts from their schedule (about the outage).
    assert!(
        c.latency.as_ref().unwrap().max > 400_000_000,
        "{:?}",
        c.latency
    );
}

/// A flow over the server's per-source limit is accepted and closed at
/// once, again and again: the client counts each (resets), and its
/// back-off doubles because no answer came (10, 20, 40 ... ms), so over
/// 1 s it comes back a handful of times, not a hundred; the two flows
/// within the limit run on.
#[test]
fn a_flow_over_the_per_source_limit_backs_off() {
    let mut cfg = server_cfg();
    cfg.workers = 1;
    cfg.max_per_source = 2;
    let (c, s) = with_server(&cfg, |addr| {
        let cfg = ClientConfig {
            threads: 1,
            flows: 3,
            load: Load::Closed { outstanding: 1 },
            duration: Duration::from_secs(1),
            timeout: Duration::from_millis(100),
            ..client_cfg(addr)
        };
        run_tcp_client(&cfg, &RR, &AtomicBool::new(false), |_| {}).unwrap()
    });
    check_client(&c);
    let (t, st) = (&c.total, &s.total);
    // 1 + 10 + 20 + 40 + 80 + 160 + 320 ms: the seventh attempt is the
    // last to start within the second (and a little scheduling slack).
    assert!((4..=8).contains(&t.resets), "{t:?}");
    assert!(
        st.refused_source == t.resets || st.refused_source == t.resets + 1,
        "each refusal seen by the client but perhaps the last: {t:?} {st:?}"
    );
    assert_eq!(t.connects, 3 + t.reconnects, "{t:?}");
    assert!(
        t.reconnects + 1 >= t.resets && t.reconnects <= t.resets,
        "{t:?}"
    );
    assert_eq!(t.connect_errors, 0, "{t:?}");
    assert!(t.completed > 100, "the two flows within the limit: {t:?}");
}

/// Connections in TIME_WAIT (state 06 of /proc/net/tcp) whose remote
/// end is `server`.
fn time_wait_to(server: SocketAddr) -> usize {
    let remote = format!("0100007F:{:04X}", server.port());
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap()
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(2) == Some(&remote.as_str()) && f.get(3) == Some(&"06")
        })
        .count()
}

#[test]
fn a_connection_per_transaction_closed_with_a_reset_leaves_no_time_wait() {
    let crr_reset = TcpClient {
        close_reset: true,
        ..CRR
    };
    let cfg = |addr| ClientConfig {
        threads: 1,
        flows: 4,
        duration: Duration::from_millis(300),
        ..client_cfg(addr)
    };
    let (c, s) = with_server(&server_cfg(), |addr| {
        let c = run_tcp_client(&cfg(addr), &crr_reset, &AtomicBool::new(false), |_| {}).unwrap();
        (c, time_wait_to(addr))
    });
    let (c, waiting) = c;
    let t = &c.total;
    assert!(t.completed > 50, "{t:?}");
    assert_eq!(
        (t.connect_errors, t.resets, t.lost, t.malformed),
        (0, 0, 0, 0),
        "{t:?}"
    );
    assert_eq!(waiting, 0, "a reset leaves no TIME_WAIT");
    let st = &s.total;
    assert_eq!(st.accepted, t.connects, "{st:?}");
    assert_eq!(st.requests, t.sent, "{st:?}");
    assert_eq!(st.answered, t.sent, "{st:?}");
    assert_eq!(c.json()["close"], "reset");
    // The same with FINs: the client keeps a TIME_WAIT per connection.
    let ((waiting, completed), _) = with_server(&server_cfg(), |addr| {
        let c = run_tcp_client(&cfg(addr), &CRR, &AtomicBool::new(false), |_| {}).unwrap();
        assert_eq!(c.json()["close"], "fin");
        (time_wait_to(addr), c.total.completed)
    });
    assert!(
        completed > 50 && waiting > 0,
        "{waiting} in TIME_WAIT after {completed} transactions"
    );
}

/// The TCP server's intervals are bounded as the UDP server's: none kept
/// unless a document lists them, at most the bound when one does.
#[test]
fn the_tcp_server_keeps_no_interval_unless_asked_and_at_most_its_bound() {
    for kept in [0, 2] {
        let cfg = TcpServerConfig {
            interval: Some(Duration::from_millis(1)),
            duration: Some(Duration::from_millis(300)),
            intervals_kept: kept,
            ..server_cfg()
        };
        let server = TcpServer::bind(&cfg).unwrap();
        let mut seen = 0usize;
        let r = server.run(&AtomicBool::new(false), |_| seen += 1);
        assert!(seen > 5, "{seen} intervals");
        assert_eq!(r.intervals.len(), kept);
        assert_eq!(r.intervals_dropped as usize, seen - kept);
        assert_eq!(r.json()["intervals_dropped"], seen - kept);
    }
}
