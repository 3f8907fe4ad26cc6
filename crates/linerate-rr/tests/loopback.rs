//! rr client against rr server (and against hand-made misbehaving
//! responders) on loopback: exact accounting on both sides, CPU steering,
//! and bad input counted without stopping anything.

use linerate_rr::{
    ClientConfig, ClientReport, Load, RrError, Server, ServerConfig, ServerReport, Steering,
    run_client,
};
use linerate_wire::{RrHeader, RrKind};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn server_cfg(cores: Vec<usize>, steering: Steering) -> ServerConfig {
    ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        workers: cores.len().max(1),
        cores,
        steering,
        duration: None,
        interval: None,
        batch: 32,
        max_response: 4096,
        // Loopback clients may ask for responses larger than requests.
        allow: vec![linerate_rr::Prefix::parse("127.0.0.0/8").unwrap()],
        reuseport: true,
        pin: true,
        busy_poll_us: 0,
        gso: true,
        spin: false,
        coalesce: std::time::Duration::ZERO,
        client_sockets: 0,
        af_xdp: None,
        intervals_kept: linerate_rr::INTERVALS_KEPT,
    }
}

#[test]
fn prefixes_contain_what_they_should() {
    use linerate_rr::Prefix;
    let p = Prefix::parse("198.18.0.0/15").unwrap();
    assert!(p.contains("198.19.255.1".parse().unwrap()));
    assert!(!p.contains("127.0.0.1".parse().unwrap()));
    assert!(
        p.contains("::ffff:198.18.0.7".parse().unwrap()),
        "IPv4-mapped"
    );
    assert!(!p.contains("2001:db8::1".parse().unwrap()));
    assert!(
        !Prefix::parse("198.18.0.1")
            .unwrap()
            .contains("198.18.0.2".parse().unwrap())
    );
    let p6 = Prefix::parse("2001:db8::/32").unwrap();
    assert!(p6.contains("2001:db8:ffff::1".parse().unwrap()));
    assert!(!p6.contains("::1".parse().unwrap()));
    assert!(
        Prefix::parse("0.0.0.0/0")
            .unwrap()
            .contains("198.19.0.9".parse().unwrap())
    );
    assert!(
        Prefix::parse("198.18.0.1")
            .unwrap()
            .contains("198.18.0.1".parse().unwrap())
    );
    assert!(Prefix::parse("198.18.0.0/33").is_err());
    assert!(Prefix::parse("nonsense").is_err());
}

fn client_cfg(server: SocketAddr) -> ClientConfig {
    ClientConfig {
        server,
        bind: None,
        cores: vec![],
        threads: 1,
        flows: 4,
        load: Load::Closed { outstanding: 4 },
        request_size: 64,
        response_size: 200,
        duration: Duration::from_millis(600),
        timeout: Duration::from_millis(500),
        interval: Some(Duration::from_millis(200)),
        busy_poll: false,
    }
}

/// Runs a server for the length of `f`, then stops it and returns both.
fn with_server<T>(cfg: &ServerConfig, f: impl FnOnce(SocketAddr) -> T) -> (T, ServerReport) {
    let server = Server::bind(cfg).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let h = s.spawn(|| server.run(&stop, |_| {}));
        let stopper = linerate_testkit::StopOnDrop(&stop);
        let out = f(addr);
        drop(stopper);
        (out, h.join().unwrap())
    })
}

fn run(cfg: &ClientConfig) -> ClientReport {
    run_client(cfg, &AtomicBool::new(false), |_| {}).unwrap()
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn closed_loop_accounts_for_every_request_on_both_sides() {
    let (c, s) = with_server(&server_cfg(vec![], Steering::Hash), |addr| {
        run(&client_cfg(addr))
    });
    let t = &c.total;
    assert!(t.completed > 100, "{t:?}");
    assert_eq!(t.sent, t.completed + t.lost, "{t:?}");
    assert_eq!(
        t.lost + t.late + t.duplicate + t.unknown + t.malformed,
        0,
        "{t:?}"
    );
    // every request the client sent reached the server and was answered
    assert_eq!(s.total.requests, t.sent);
    assert_eq!(s.total.answered, t.sent);
    assert_eq!(s.total.bytes_in, t.sent * 64);
    assert_eq!(s.total.bytes_out, t.sent * 200);
    let l = c.latency.as_ref().unwrap();
    assert_eq!(l.count, t.completed);
    assert!(l.min <= l.p50 && l.p50 <= l.p99 && l.p99 <= l.max, "{l:?}");
    // three 200 ms intervals, whose completions add up to at most the total
    assert_eq!(c.intervals.len(), 3, "{:?}", c.intervals);
    let in_intervals: u64 = c.intervals.iter().map(|i| i.completed).sum();
    assert!(in_intervals <= t.completed && in_intervals > t.completed / 2);
    let j = c.json();
    assert_eq!(j["counts"]["completed"], t.completed);
    assert_eq!(j["mode"], "closed loop");
    assert!(c.send_lag.is_none() && j["send_lag_us"].is_null());
    assert!(j["latency_us"]["p99.9"].as_f64().unwrap() > 0.0);
}

/// `--coalesce`: a worker that naps 500 us after each receive that
/// drained its socket still answers every request, counted alike on both
/// sides, and its receives are bounded by its naps: each receive that
/// came back short of the batch (32) was followed by a nap, so there are
/// at most elapsed / 500 us of those, plus at most one full receive per
/// 32 requests. A server that never naps makes a receive every request
/// or two (tens of thousands here) and fails the bound.
#[test]
fn a_coalescing_server_answers_every_request_in_batches_its_naps_bound() {
    let nap = Duration::from_micros(500);
    let cfg = ServerConfig {
        coalesce: nap,
        ..server_cfg(vec![], Steering::Hash)
    };
    let (c, s) = with_server(&cfg, |addr| {
        run(&ClientConfig {
            load: Load::Closed { outstanding: 16 },
            ..client_cfg(addr)
        })
    });
    let t = &c.total;
    assert!(t.completed > 1_000, "{t:?}");
    assert_eq!(t.lost + t.late + t.duplicate + t.unknown, 0, "{t:?}");
    assert_eq!(s.total.requests, t.sent);
    assert_eq!(s.total.answered, t.sent);
    let short_receives_max = (s.elapsed.as_secs_f64() / nap.as_secs_f64()).ceil() as u64 + 1;
    let bound = short_receives_max + s.total.requests / 32;
    assert!(
        s.total.batches <= bound,
        "{} receives for {} requests in {:?}: more than the naps allow ({bound})",
        s.total.batches,
        s.total.requests,
        s.elapsed
    );
}

/// A spinning server (non-blocking sockets, never asleep) with a spinning
/// client: every request answered, counted alike on both sides, and the
/// server stops when told although it never blocks.
#[test]
fn a_spinning_server_answers_every_request_and_stops_when_told() {
    let cfg = ServerConfig {
        spin: true,
        ..server_cfg(vec![], Steering::Hash)
    };
    let t0 = Instant::now();
    let (c, s) = with_server(&cfg, |addr| {
        run(&ClientConfig {
            busy_poll: true,
            ..client_cfg(addr)
        })
    });
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    let t = &c.total;
    assert!(t.completed > 100, "{t:?}");
    assert_eq!(t.lost + t.late + t.duplicate + t.unknown, 0, "{t:?}");
    assert_eq!(s.total.requests, t.sent);
    assert_eq!(s.total.answered, t.sent);
    assert_eq!(s.total.bytes_out, t.sent * 200);
    assert_eq!(s.json()["recipe"]["spin"], true);
}

/// A spinning server opens a connected socket for each client up to its
/// bound and answers there: with 4 flows (4 source ports) and room for 2,
/// two flows get sockets and the other two stay on the group's socket;
/// every request is answered exactly once either way, bound to the
/// loopback address or to every address (where connecting moves the
/// socket out of the wildcard's hash chain).
#[test]
fn a_spinning_server_answers_its_clients_on_connected_sockets_up_to_its_bound() {
    for bind in ["127.0.0.1:0", "0.0.0.0:0", "[::]:0"] {
        let cfg = ServerConfig {
            bind: bind.parse().unwrap(),
            spin: true,
            client_sockets: 2,
            ..server_cfg(vec![], Steering::Hash)
        };
        let (c, s) = with_server(&cfg, |addr| {
            let to = SocketAddr::new("127.0.0.1".parse().unwrap(), addr.port());
            run(&ClientConfig {
                busy_poll: true,
                ..client_cfg(to)
            })
        });
        let t = &c.total;
        assert!(t.completed > 100, "{bind}: {t:?}");
        assert_eq!(
            t.lost + t.late + t.duplicate + t.unknown,
            0,
            "{bind}: {t:?}"
        );
        assert_eq!(s.total.requests, t.sent, "{bind}");
        assert_eq!(s.total.answered, t.sent, "{bind}");
        assert_eq!(s.total.client_sockets, 2, "{bind}: {:?}", s.total);
        let on = s.total.requests_on_client_sockets;
        // two of four flows, each as busy as the others: about half
        assert!(
            on > t.sent / 4 && on < t.sent * 3 / 4,
            "{bind}: {on} of {} on the clients' sockets",
            t.sent
        );
        assert_eq!(s.json()["recipe"]["client_sockets"], 2);
    }
}

/// One client, ping-pong: after its first request, every request comes
/// by its connected socket; with `client_sockets: 0` none does.
#[test]
fn a_ping_pong_client_moves_to_its_connected_socket() {
    for (room, sockets) in [(16, 1), (0, 0)] {
        let cfg = ServerConfig {
            spin: true,
            client_sockets: room,
            ..server_cfg(vec![], Steering::Hash)
        };
        let (c, s) = with_server(&cfg, |addr| {
            run(&ClientConfig {
                busy_poll: true,
                flows: 1,
                load: Load::Closed { outstanding: 1 },
                ..client_cfg(addr)
            })
        });
        let t = &c.total;
        assert!(t.completed > 100, "{t:?}");
        assert_eq!(t.lost + t.late + t.duplicate + t.unknown, 0, "{t:?}");
        assert_eq!((s.total.requests, s.total.answered), (t.sent, t.sent));
        assert_eq!(s.total.client_sockets, sockets);
        let on = s.total.requests_on_client_sockets;
        if sockets == 1 {
            // the first request opens the socket (after its answer, so
            // the second may still come to the group's socket: one in
            // flight); the rest come by it
            assert!((t.sent - 2..t.sent).contains(&on), "{:?}", s.total);
        } else {
            assert_eq!(on, 0);
        }
    }
}

#[test]
fn open_loop_sends_at_the_asked_rate_from_several_workers() {
    let (c, _) = with_server(&server_cfg(vec![], Steering::Hash), |addr| {
        run(&ClientConfig {
            threads: 2,
            flows: 3,
            load: Load::Open { tps: 5000.0 },
            duration: Duration::from_secs(1),
            ..client_cfg(addr)
        })
    });
    let t = &c.total;
    // 5000/s for 1 s, from two workers: within 2 %
    assert!((4900..=5100).contains(&t.sent), "{t:?}");
    assert_eq!(t.sent, t.completed + t.lost);
    assert_eq!(c.workers.len(), 2);
    assert!(c.workers.iter().all(|w| w.local.len() == 3));
    assert_eq!(c.json()["load"]["rate_tps"], 5000.0);
    // every request's lateness against its schedule was recorded
    let lag = c.send_lag.as_ref().unwrap();
    assert_eq!(lag.count, t.sent);
    assert!(lag.p50 <= lag.p99 && lag.p99 <= lag.max);
}

#[test]
fn cpu_steering_hands_each_request_to_the_worker_on_its_cpu() {
    let two = if cpus() >= 2 {
        Ok(())
    } else {
        Err("needs 2 CPUs".to_string())
    };
    if linerate_testkit::should_skip("rr CPU steering", &[two]) {
        return;
    }
    for client_cpu in [0usize, 1] {
        let (c, s) = with_server(&server_cfg(vec![0, 1], Steering::Cpu), |addr| {
            run(&ClientConfig {
                cores: vec![client_cpu],
                flows: 8,
                duration: Duration::from_millis(300),
                interval: None,
                ..client_cfg(addr)
            })
        });
        // On loopback a datagram is processed on the sending CPU, so every
        // request of a client pinned to CPU k lands on worker k's socket.
        let per: Vec<u64> = s.workers.iter().map(|w| w.1.requests).collect();
        assert_eq!(
            per[client_cpu], c.total.sent,
            "client on CPU {client_cpu}: {per:?}"
        );
        assert_eq!(
            per[1 - client_cpu],
            0,
            "client on CPU {client_cpu}: {per:?}"
        );
        assert!(s.steering_note.is_none());
    }
}

/// A responder that answers even sequence numbers once, multiples of 4 a
/// second time, and sends one datagram of garbage first.
fn misbehaving_responder(sock: UdpSocket, stop: &AtomicBool) {
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut buf = [0u8; 2048];
    let mut garbage_sent = false;
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        if !garbage_sent {
            sock.send_to(b"not an rr response at all, and long enough", from)
                .unwrap();
            garbage_sent = true;
        }
        let h = RrHeader::parse(&buf[..n]).unwrap();
        if h.seq % 2 == 1 {
            continue;
        }
        let out = response_to(h);
        sock.send_to(&out, from).unwrap();
        if h.seq.is_multiple_of(4) {
            sock.send_to(&out, from).unwrap();
        }
    }
}

/// The response to a request with header `h`.
fn response_to(h: RrHeader) -> Vec<u8> {
    let mut out = vec![0u8; h.reply_len as usize];
    RrHeader {
        kind: RrKind::Response,
        ..h
    }
    .emit(&mut out)
    .unwrap();
    out
}

/// Runs the client (`cfg` given the responder's address) against a
/// hand-made responder on loopback, stopped when the client ends.
fn against(
    responder: fn(UdpSocket, &AtomicBool),
    cfg: impl FnOnce(SocketAddr) -> ClientConfig,
) -> ClientReport {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let cfg = cfg(sock.local_addr().unwrap());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| responder(sock, &stop));
        let c = run(&cfg);
        stop.store(true, Ordering::Relaxed);
        c
    })
}

#[test]
fn loss_duplicates_and_garbage_are_counted_exactly() {
    let c = against(misbehaving_responder, |addr| ClientConfig {
        flows: 1,
        load: Load::Closed { outstanding: 8 },
        duration: Duration::from_millis(500),
        timeout: Duration::from_millis(50),
        ..client_cfg(addr)
    });
    let t = &c.total;
    assert_eq!(t.sent, t.completed + t.lost, "{t:?}");
    // odd sequence numbers are never answered: exactly half (rounding)
    assert!(t.lost.abs_diff(t.sent / 2) <= 1, "{t:?}");
    // every answered multiple of 4 came twice
    assert!(
        t.duplicate > 0 && t.duplicate.abs_diff(t.completed / 2) <= 1,
        "{t:?}"
    );
    assert_eq!(t.malformed, 1, "{t:?}");
    assert_eq!(t.unknown + t.late, 0, "{t:?}");
}

/// A responder that answers each source's requests queued together in
/// one UDP GSO message (as the rr server's GSO answers come).
fn gso_responder(sock: UdpSocket, stop: &AtomicBool) {
    linerate_backend::sockopt::set_udp_segment(&sock, 200).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut buf = [0u8; 2048];
    let mut groups: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        sock.set_nonblocking(true).unwrap();
        let mut next = Some((n, from));
        while let Some((n, from)) = next {
            let out = response_to(RrHeader::parse(&buf[..n]).unwrap());
            assert_eq!(out.len(), 200);
            match groups.iter_mut().find(|(to, _)| *to == from) {
                Some((_, msg)) => msg.extend_from_slice(&out),
                None => groups.push((from, out)),
            }
            next = sock.recv_from(&mut buf).ok();
        }
        for (to, msg) in groups.drain(..) {
            sock.send_to(&msg, to).unwrap();
        }
        sock.set_nonblocking(false).unwrap();
    }
}

#[test]
fn answers_coming_as_gso_messages_are_counted_and_timed_one_by_one() {
    let c = against(gso_responder, |addr| ClientConfig {
        flows: 2,
        load: Load::Closed { outstanding: 16 },
        duration: Duration::from_millis(400),
        timeout: Duration::from_millis(500),
        ..client_cfg(addr)
    });
    let t = &c.total;
    assert!(t.completed > 1000, "{t:?}");
    assert_eq!((t.completed, t.lost), (t.sent, 0), "{t:?}");
    assert_eq!(t.malformed + t.duplicate + t.unknown + t.late, 0, "{t:?}");
    let lat = c.latency.as_ref().unwrap();
    assert_eq!(lat.count, t.completed, "one latency per answer");
}

/// A responder that holds every request 40 ms before answering it and
/// never answers sequence numbers ending in 3.
fn slow_responder(sock: UdpSocket, stop: &AtomicBool) {
    sock.set_read_timeout(Some(Duration::from_millis(2)))
        .unwrap();
    let mut held = std::collections::VecDeque::new();
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            let h = RrHeader::parse(&buf[..n]).unwrap();
            if h.seq % 10 != 3 {
                let due = Instant::now() + Duration::from_millis(40);
                held.push_back((due, response_to(h), from));
            }
        }
        while held
            .front()
            .is_some_and(|(due, _, _)| *due <= Instant::now())
        {
            let (_, out, from) = held.pop_front().unwrap();
            sock.send_to(&out, from).unwrap();
        }
    }
}

#[test]
fn the_intervals_add_up_to_the_totals_with_answers_and_losses_of_the_drain() {
    let c = against(slow_responder, |addr| ClientConfig {
        flows: 2,
        load: Load::Closed { outstanding: 8 },
        duration: Duration::from_millis(400),
        timeout: Duration::from_millis(150),
        interval: Some(Duration::from_millis(100)),
        ..client_cfg(addr)
    });
    let t = &c.total;
    assert_eq!(t.sent, t.completed + t.lost, "{t:?}");
    // 16 requests were in flight when sending stopped: their answers (and
    // the losses among them, expired at the end) come after the test's end.
    assert!(t.lost > 0 && t.completed > 16, "{t:?}");
    let completed: u64 = c.intervals.iter().map(|iv| iv.completed).sum();
    let lost: u64 = c.intervals.iter().map(|iv| iv.lost).sum();
    assert_eq!(
        (completed, lost),
        (t.completed, t.lost),
        "{:?}",
        c.intervals
    );
    let ends: Vec<Duration> = c.intervals.iter().map(|iv| iv.end).collect();
    assert_eq!(
        ends,
        [100, 200, 300, 400].map(Duration::from_millis),
        "{:?}",
        c.intervals
    );
}

#[test]
fn a_server_stopped_under_load_reports_intervals_that_add_up() {
    let cfg = ServerConfig {
        interval: Some(Duration::from_millis(100)),
        ..server_cfg(vec![], Steering::Hash)
    };
    let server = Server::bind(&cfg).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    let client_stop = AtomicBool::new(false);
    let report = std::thread::scope(|s| {
        let h = s.spawn(|| server.run(&stop, |_| {}));
        s.spawn(|| {
            run_client(
                &ClientConfig {
                    duration: Duration::from_secs(3),
                    timeout: Duration::from_millis(50),
                    ..client_cfg(addr)
                },
                &client_stop,
                |_| {},
            )
        });
        // stopped mid-interval, while requests keep coming
        std::thread::sleep(Duration::from_millis(350));
        stop.store(true, Ordering::Relaxed);
        let report = h.join().unwrap();
        client_stop.store(true, Ordering::Relaxed);
        report
    });
    let total = report.total.requests;
    let summed: u64 = report.intervals.iter().map(|i| i.total.requests).sum();
    assert!(total > 100, "{report:?}");
    assert_eq!(summed, total, "{:?}", report.intervals);
    let per: u64 = report
        .intervals
        .iter()
        .flat_map(|i| i.per_worker.iter())
        .sum();
    assert_eq!(per, total);
}

#[test]
fn the_server_counts_bad_datagrams_and_keeps_answering() {
    let (c, s) = with_server(&server_cfg(vec![], Steering::Hash), |addr| {
        let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
        junk.send_to(b"short", addr).unwrap();
        junk.send_to(&[0u8; 100], addr).unwrap();
        // a response sent to the server is not answered
        let mut resp = [0u8; 40];
        RrHeader {
            kind: RrKind::Response,
            flow: 0,
            reply_len: 0,
            seq: 1,
            stamp_ns: 0,
        }
        .emit(&mut resp)
        .unwrap();
        junk.send_to(&resp, addr).unwrap();
        // a request for an impossible response size
        let mut req = resp;
        RrHeader {
            kind: RrKind::Request,
            reply_len: 70_000,
            flow: 0,
            seq: 2,
            stamp_ns: 0,
        }
        .emit(&mut req)
        .unwrap();
        junk.send_to(&req, addr).unwrap();
        // a request for more than the server's limit (4096 here)
        RrHeader {
            kind: RrKind::Request,
            reply_len: 5000,
            flow: 0,
            seq: 3,
            stamp_ns: 0,
        }
        .emit(&mut req)
        .unwrap();
        junk.send_to(&req, addr).unwrap();
        junk.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let c = run(&client_cfg(addr));
        // none of those was answered
        assert!(junk.recv(&mut [0u8; 64]).is_err());
        c
    });
    assert_eq!(s.total.malformed, 4);
    assert_eq!(s.total.too_large, 1);
    assert_eq!(s.total.requests, c.total.sent);
    assert!(c.total.completed > 0 && c.total.lost == 0);
}

#[test]
fn no_server_is_a_typed_error_that_keeps_what_was_measured() {
    // a port nobody listens on: loopback answers with ICMP port unreachable
    let free = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap();
    drop(free);
    let e = run_client(
        &ClientConfig {
            duration: Duration::from_millis(200),
            timeout: Duration::from_millis(50),
            ..client_cfg(addr)
        },
        &AtomicBool::new(false),
        |_| {},
    )
    .unwrap_err();
    match e {
        RrError::NoAnswer {
            sent,
            refused,
            report,
            ..
        } => {
            assert!(refused > 0, "ICMP errors counted");
            assert_eq!(report.total.sent, sent);
            assert_eq!(report.total.lost, sent);
        }
        other => panic!("{other}"),
    }
}

#[test]
fn impossible_settings_are_refused_before_any_traffic() {
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let bad = [
        ClientConfig {
            request_size: 31,
            ..client_cfg(addr)
        },
        ClientConfig {
            response_size: 70_000,
            ..client_cfg(addr)
        },
        ClientConfig {
            flows: 0,
            ..client_cfg(addr)
        },
        ClientConfig {
            load: Load::Closed { outstanding: 0 },
            ..client_cfg(addr)
        },
        ClientConfig {
            load: Load::Open { tps: f64::NAN },
            ..client_cfg(addr)
        },
        ClientConfig {
            duration: Duration::ZERO,
            ..client_cfg(addr)
        },
    ];
    for cfg in bad {
        let e = run_client(&cfg, &AtomicBool::new(false), |_| {}).unwrap_err();
        assert!(matches!(e, RrError::Config(_)), "{e}");
    }
}

/// A server keeps no interval when no document lists them, and at most
/// its bound when one does (the older ones counted as dropped and said in
/// the document): a server that runs for days holds a bounded memory
/// (issue 41: it kept every interval, ~1 MiB per 15 min).
#[test]
fn a_server_keeps_no_interval_unless_asked_and_at_most_its_bound() {
    for kept in [0, 3] {
        let cfg = ServerConfig {
            // 1 ms intervals: one each time the supervisor wakes (20 ms)
            interval: Some(Duration::from_millis(1)),
            duration: Some(Duration::from_millis(400)),
            intervals_kept: kept,
            ..server_cfg(vec![], Steering::Hash)
        };
        let server = Server::bind(&cfg).unwrap();
        let mut seen = Vec::new();
        let r = server.run(&AtomicBool::new(false), |iv| seen.push(iv.end));
        assert!(seen.len() > 5, "{} intervals", seen.len());
        assert_eq!(r.intervals.len(), kept, "kept");
        assert_eq!(r.intervals_dropped as usize, seen.len() - kept);
        let last: Vec<Duration> = r.intervals.iter().map(|i| i.end).collect();
        assert_eq!(last, seen[seen.len() - kept..], "the last ones, in order");
        let doc = r.json();
        assert_eq!(doc["intervals"].as_array().unwrap().len(), kept);
        assert_eq!(doc["intervals_dropped"], seen.len() - kept);
    }
}
