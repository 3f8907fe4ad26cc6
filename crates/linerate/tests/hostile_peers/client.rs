//! linerate's client against a fake server that misbehaves.

use crate::peers::skip;
use crate::support;
use crate::support::{Proc, json, server};
use linerate_iperf_proto::{state, udp_connect};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A fake iperf3 server for one client, driven by hand.
struct FakeServer {
    listener: std::net::TcpListener,
    ctrl: Option<TcpStream>,
    port: u16,
    /// The results the client sent (`run_until_results`).
    client_results: Option<serde_json::Value>,
}

impl FakeServer {
    fn new() -> FakeServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        FakeServer {
            listener,
            ctrl: None,
            port,
            client_results: None,
        }
    }

    fn ctrl(&mut self) -> &mut TcpStream {
        self.ctrl.as_mut().unwrap()
    }

    /// Accepts the control connection, takes the cookie and the parameters
    /// and asks for the streams.
    fn run_until_create_streams(&mut self) -> serde_json::Value {
        let (mut c, _) = self.listener.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut cookie = [0u8; 37];
        c.read_exact(&mut cookie).unwrap();
        c.write_all(&[state::PARAM_EXCHANGE]).unwrap();
        self.ctrl = Some(c);
        let p = self.read_json();
        self.ctrl().write_all(&[state::CREATE_STREAMS]).unwrap();
        p
    }

    fn read_json(&mut self) -> serde_json::Value {
        let mut len = [0u8; 4];
        self.ctrl().read_exact(&mut len).unwrap();
        let mut j = vec![0u8; u32::from_be_bytes(len) as usize];
        self.ctrl().read_exact(&mut j).unwrap();
        serde_json::from_slice(&j).unwrap()
    }

    /// Takes one TCP stream, runs the test until the client's TEST_END,
    /// exchanges results up to the point where ours are due; returns the
    /// stream (kept open).
    fn run_until_results(&mut self) -> TcpStream {
        let (mut s, _) = self.listener.accept().unwrap();
        let mut cookie = [0u8; 37];
        s.read_exact(&mut cookie).unwrap();
        self.ctrl()
            .write_all(&[state::TEST_START, state::TEST_RUNNING])
            .unwrap();
        // Drain the stream while waiting for TEST_END.
        s.set_nonblocking(true).unwrap();
        self.ctrl().set_nonblocking(true).unwrap();
        let mut b = vec![0u8; 1 << 16];
        let t0 = Instant::now();
        loop {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "no TEST_END from the client within 20 s"
            );
            let _ = s.read(&mut b);
            let mut st = [0u8; 1];
            if let Ok(1) = self.ctrl().read(&mut st) {
                assert_eq!(st[0], state::TEST_END);
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.ctrl().set_nonblocking(false).unwrap();
        self.ctrl().write_all(&[state::EXCHANGE_RESULTS]).unwrap();
        self.client_results = Some(self.read_json());
        s
    }
}

/// [`client_run`] on a thread of its own, while the test plays the server.
fn client_thread(
    port: u16,
    args: &'static [&'static str],
    limit: Duration,
) -> std::thread::JoinHandle<(std::process::Output, Duration)> {
    std::thread::spawn(move || client_run(port, args, limit))
}

/// Runs a linerate client against `port`; its output and how long it took.
fn client_run(port: u16, args: &[&str], limit: Duration) -> (std::process::Output, Duration) {
    let t0 = Instant::now();
    let out = Proc::spawn(
        support::linerate()
            .args(["-c", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
    )
    .wait(limit);
    (out, t0.elapsed())
}

/// Fault 5: a server that answers the UDP connect with junk datagrams kept
/// the client waiting for ever (each datagram restarted a 30 s wait).
#[test]
fn the_client_bounds_its_udp_set_up() {
    let mut srv = FakeServer::new();
    let port = srv.port;
    let udp = std::net::UdpSocket::bind(("127.0.0.1", port)).unwrap();
    let client = client_thread(
        port,
        &["-u", "-t", "1", "--control-timeout", "1500"],
        Duration::from_secs(20),
    );
    srv.run_until_create_streams();
    udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 64];
    let (_, from) = udp.recv_from(&mut b).unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(6) && !client.is_finished() {
        let _ = udp.send_to(b"junk!", from);
        std::thread::sleep(Duration::from_millis(100));
    }
    let (out, took) = client.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no UDP connect reply"), "{err}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// A lost UDP hello is sent again (after 1 s): the stream is set up on the
/// second one and carries the test's data.
#[test]
fn a_lost_udp_hello_is_sent_again() {
    let mut srv = FakeServer::new();
    let port = srv.port;
    let udp = std::net::UdpSocket::bind(("127.0.0.1", port)).unwrap();
    let client = client_thread(
        port,
        &["-u", "-t", "1", "-b", "1M", "--control-timeout", "5000"],
        Duration::from_secs(20),
    );
    srv.run_until_create_streams();
    udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 2048];
    let (n1, from1) = udp.recv_from(&mut b).unwrap();
    let first = Instant::now();
    assert_eq!(n1, 4, "the hello");
    // Dropped: answer only the repeat.
    let (n2, from2) = udp.recv_from(&mut b).expect("the hello was not sent again");
    let gap = first.elapsed();
    assert_eq!(
        (n2, from2),
        (4, from1),
        "the repeat comes from the same socket"
    );
    assert!(
        (Duration::from_millis(800)..Duration::from_millis(2500)).contains(&gap),
        "{gap:?}"
    );
    udp.connect(from1).unwrap();
    udp.send(&udp_connect::REPLY).unwrap();
    srv.ctrl()
        .write_all(&[state::TEST_START, state::TEST_RUNNING])
        .unwrap();
    let (n3, _) = udp.recv_from(&mut b).expect("no test data on the stream");
    assert!(n3 > 12, "a test datagram, not another hello ({n3} bytes)");
    drop(srv);
    drop(udp);
    let (out, _) = client.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("no UDP connect reply"), "{err}");
}

/// Fault 5: a server that trickles one byte of its results every 300 ms held
/// the client for as long as it liked (each byte restarted the time-out).
#[test]
fn a_trickling_server_does_not_hold_the_client() {
    let mut srv = FakeServer::new();
    let port = srv.port;
    let client = client_thread(
        port,
        &["-t", "1", "--control-timeout", "1500"],
        Duration::from_secs(30),
    );
    srv.run_until_create_streams();
    let _s = srv.run_until_results();
    let ended = Instant::now();
    srv.ctrl().write_all(&1000u32.to_be_bytes()).unwrap();
    while ended.elapsed() < Duration::from_secs(10) && !client.is_finished() {
        let _ = srv.ctrl().write_all(b" ");
        std::thread::sleep(Duration::from_millis(300));
    }
    let (out, _) = client.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("timed out waiting for the server")
            || err.contains("did not finish ending the test"),
        "{err}"
    );
    assert!(
        ended.elapsed() < Duration::from_secs(4),
        "{:?}",
        ended.elapsed()
    );
}

/// Fault 5: a SERVER_ERROR cut after 1 of its 8 bytes was reported as a
/// time-out 30 s later; it is reported as the server's error, soon.
#[test]
fn a_cut_server_error_is_reported_as_an_error() {
    let srv = FakeServer::new();
    let port = srv.port;
    let client =
        std::thread::spawn(move || client_run(port, &["-t", "1"], Duration::from_secs(40)));
    let (mut c, _) = srv.listener.accept().unwrap();
    let mut cookie = [0u8; 37];
    c.read_exact(&mut cookie).unwrap();
    c.write_all(&[state::SERVER_ERROR, 0]).unwrap();
    let (out, took) = client.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("sent only 1 of its 8 bytes"), "{err}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(c);
}

/// Fault 5: absurd results from a server (negative times) were printed as
/// measurements with exit 0.
#[test]
fn absurd_server_results_are_refused() {
    let mut srv = FakeServer::new();
    let port = srv.port;
    let client =
        std::thread::spawn(move || client_run(port, &["-t", "1", "-J"], Duration::from_secs(20)));
    srv.run_until_create_streams();
    let _s = srv.run_until_results();
    let r = serde_json::json!({
        "cpu_util_total": 1.0, "cpu_util_user": 0.5, "cpu_util_system": 0.5,
        "sender_has_retransmits": 0,
        "streams": [{"id": 1, "bytes": 1000, "retransmits": 0, "jitter": 0,
            "errors": 0, "packets": 0, "start_time": 0, "end_time": -5.0}]
    })
    .to_string();
    srv.ctrl()
        .write_all(&(r.len() as u32).to_be_bytes())
        .unwrap();
    srv.ctrl().write_all(r.as_bytes()).unwrap();
    srv.ctrl().write_all(&[state::DISPLAY_RESULTS]).unwrap();
    let (out, _) = client.join().unwrap();
    let v = json(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    let e = v["error"].as_str().unwrap_or_default();
    assert!(e.contains("not plausible") && e.contains("-5"), "{e}");
}

/// `--rcv-timeout` on the client: a server that starts a reverse test and
/// sends nothing fails it after that long, not at the end of -t 30.
#[test]
fn the_client_gives_up_on_a_silent_sender() {
    let mut srv = FakeServer::new();
    let port = srv.port;
    let client = client_thread(
        port,
        &["-R", "-t", "30", "--rcv-timeout", "1000"],
        Duration::from_secs(20),
    );
    srv.run_until_create_streams();
    let (mut s, _) = srv.listener.accept().unwrap();
    let mut cookie = [0u8; 37];
    s.read_exact(&mut cookie).unwrap();
    srv.ctrl()
        .write_all(&[state::TEST_START, state::TEST_RUNNING])
        .unwrap();
    let started = Instant::now();
    let (out, _) = client.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no data received for 1000 ms"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    drop(s);
}

/// `--snd-timeout` is accepted by the client and the test runs with it.
#[test]
fn snd_timeout_is_applied_and_the_test_runs() {
    if skip("snd_timeout_is_applied_and_the_test_runs") {
        return;
    }
    let (_srv, port) = server(&[]);
    let (out, _) = client_run(
        port,
        &["-t", "1", "-J", "--snd-timeout", "3000"],
        Duration::from_secs(20),
    );
    let v = json(&out.stdout);
    assert!(v.get("error").is_none(), "{}", v["error"]);
}

/// Issue 28, item 2: state bytes count as progress, so a server that sends
/// one now and then (here every 300 ms, in the end phase and in the set-up)
/// held a `-t 1` client for as long as it liked. Each phase the server
/// leads has its own bound: the client ends within --control-timeout of
/// it, whatever arrives.
#[test]
fn a_server_sending_state_bytes_forever_does_not_hold_the_client() {
    for phase in ["ending", "setting up"] {
        let mut srv = FakeServer::new();
        let port = srv.port;
        let client = client_thread(
            port,
            &["-t", "1", "--control-timeout", "1500"],
            Duration::from_secs(40),
        );
        srv.run_until_create_streams();
        let _s = (phase == "ending").then(|| srv.run_until_results());
        if phase == "ending" {
            // Its results (the client's own, as plausible as can be), then
            // no DISPLAY_RESULTS: only state bytes.
            let r = serde_json::to_vec(srv.client_results.as_ref().unwrap()).unwrap();
            let len = (r.len() as u32).to_be_bytes();
            srv.ctrl().write_all(&len).unwrap();
            srv.ctrl().write_all(&r).unwrap();
        }
        let from = Instant::now();
        // Bytes a client takes in that phase without complaint.
        let byte = if phase == "ending" {
            state::IPERF_DONE
        } else {
            state::TEST_START
        };
        while from.elapsed() < Duration::from_secs(20) && !client.is_finished() {
            let _ = srv.ctrl().write_all(&[byte]);
            std::thread::sleep(Duration::from_millis(300));
        }
        let (out, _) = client.join().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{phase}: {err}");
        assert!(
            from.elapsed() < Duration::from_secs(5),
            "{phase}: held {:?}: {err}",
            from.elapsed()
        );
    }
}
