//! linerate's server against careless or hostile clients.

use crate::peers::{Fake, a_real_test_gets_through, skip, tcp_params};
use crate::support;
use crate::support::{Proc, iperf3_client, json, server};
use linerate_iperf_proto::state;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// iperf3 3.12 with `-R -P 4` against a server whose senders share one CPU
/// worker (`-A 0` pins them all to CPU 0): every stream must be closed at
/// the end, or iperf3 blocks reading one and the results are lost.
#[test]
fn reverse_streams_sharing_a_worker_all_end() {
    if skip("reverse_streams_sharing_a_worker_all_end") {
        return;
    }
    let (_srv, port) = server(&["-A", "0"]);
    for _ in 0..2 {
        let v = json(
            &iperf3_client(port, &["-R", "-P", "4", "-t", "1"])
                .wait(Duration::from_secs(20))
                .stdout,
        );
        assert!(v.get("error").is_none(), "iperf3 -R -P 4: {}", v["error"]);
        assert!(v["end"]["sum_received"]["bytes"].as_u64().unwrap() > 0);
        assert_eq!(v["end"]["streams"].as_array().unwrap().len(), 4);
    }
}

/// Fault 1: a client that stops reading its control connection while the
/// server writes its (large) results held the only test slot for ever.
#[test]
fn a_client_that_stops_reading_frees_its_slot() {
    if skip("a_client_that_stops_reading_frees_its_slot") {
        return;
    }
    // The server's own output goes to a file (a pipe nobody reads would
    // block it first).
    let log = tempfile::NamedTempFile::new().unwrap();
    let log_path = log.path().to_str().unwrap().to_string();
    let (mut srv, port) = server(&[
        "-J",
        "-i",
        "0.1",
        "--control-timeout",
        "1500",
        "--logfile",
        &log_path,
    ]);
    let mut f = Fake::connect(port, "127.0.0.1", Some(1024));
    let mut p = tcp_params(6, 128);
    p["get_server_output"] = 1.into();
    p["bidirectional"] = true.into();
    f.params(p);
    f.open_streams(256);
    std::thread::sleep(Duration::from_millis(6100));
    f.ctrl.write_all(&[state::TEST_END]).unwrap();
    f.expect(state::EXCHANGE_RESULTS);
    f.send_json(&serde_json::json!({
        "cpu_util_total": 0.0, "cpu_util_user": 0.0, "cpu_util_system": 0.0,
        "sender_has_retransmits": 0, "streams": []
    }));
    // From here on the fake client reads nothing; its results (the server's
    // whole -J document: 256 streams, 60 intervals, about 5 MB) fill every
    // buffer on the way.
    let took = a_real_test_gets_through(port, &[], Duration::from_secs(12));
    assert!(took < Duration::from_secs(8), "{took:?}");
    assert!(srv.is_running());
    drop(f);
}

/// Fault 3a: idle connections from one host filled the pending-cookie
/// limit and locked everyone else out.
#[test]
fn idle_connections_from_one_host_do_not_lock_out_others() {
    if skip("idle_connections_from_one_host_do_not_lock_out_others") {
        return;
    }
    let (_srv, port) = server(&["--control-timeout", "20000"]);
    let idle: Vec<TcpStream> = (0..80)
        .filter_map(|_| {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
            let src: SocketAddr = "127.0.0.2:0".parse().unwrap();
            s.bind(&src.into()).ok()?;
            let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            s.connect(&to.into()).ok()?;
            Some(s.into())
        })
        .collect();
    assert_eq!(idle.len(), 80);
    std::thread::sleep(Duration::from_millis(300));
    // The first try must pass: no waiting for the idle ones to time out.
    let took = a_real_test_gets_through(port, &[], Duration::from_millis(100));
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(idle);
}

/// Issue 28, item 1: idle connections from many sources, a few each (17
/// sources x 4, more than the 64 waiting slots; and 8 x 8 at default
/// flags), locked every honest client out even with per-source limits.
/// The busiest source's oldest waiting connection is shed for a newcomer:
/// every honest test gets through at its first try.
#[test]
fn idle_connections_from_many_sources_do_not_lock_out_others() {
    if skip("idle_connections_from_many_sources_do_not_lock_out_others") {
        return;
    }
    for (sources, each, extra) in [
        (
            17,
            4,
            &[
                "--max-tests-per-source",
                "1",
                "--max-pending-per-source",
                "4",
            ][..],
        ),
        (8, 8, &[][..]),
    ] {
        let mut args = vec!["--control-timeout", "30000"];
        args.extend_from_slice(extra);
        let (_srv, port) = server(&args);
        let idle: Vec<TcpStream> = (0..sources)
            .flat_map(|i| (0..each).map(move |_| i))
            .filter_map(|i| {
                let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                    .ok()?;
                let src: SocketAddr = format!("127.0.0.{}:0", i + 2).parse().unwrap();
                s.bind(&src.into()).ok()?;
                let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
                s.connect(&to.into()).ok()?;
                Some(s.into())
            })
            .collect();
        assert_eq!(idle.len(), sources * each);
        std::thread::sleep(Duration::from_millis(300));
        for _ in 0..4 {
            let took = a_real_test_gets_through(port, &[], Duration::from_millis(100));
            assert!(
                took < Duration::from_secs(5),
                "{sources} x {each}: {took:?}"
            );
        }
        drop(idle);
    }
}

/// Fault 3b: a client that sends its parameters and never opens its stream
/// held the only slot for a hard-coded 30 s, ignoring --control-timeout.
#[test]
fn a_client_that_never_opens_its_streams_is_dropped_at_the_control_timeout() {
    if skip("a_client_that_never_opens_its_streams_is_dropped_at_the_control_timeout") {
        return;
    }
    let (_srv, port) = server(&["--control-timeout", "1500"]);
    let mut f = Fake::connect(port, "127.0.0.1", None);
    f.params(tcp_params(1, 1));
    let took = a_real_test_gets_through(port, &[], Duration::from_secs(10));
    assert!(took < Duration::from_secs(7), "{took:?}");
    drop(f);
}

/// Fault 3c: under --max-tests 4, a UDP client that never opens its stream
/// held the UDP set-up lock 30 s and failed the other UDP tests.
#[test]
fn a_stalled_udp_set_up_does_not_fail_other_udp_tests() {
    if skip("a_stalled_udp_set_up_does_not_fail_other_udp_tests") {
        return;
    }
    let (_srv, port) = server(&["--max-tests", "4", "--control-timeout", "1500"]);
    let mut f = Fake::connect(port, "127.0.0.1", None);
    let mut p = tcp_params(1, 128);
    p.as_object_mut().unwrap().remove("tcp");
    p["udp"] = true.into();
    p["len"] = 1400.into();
    p["bandwidth"] = 1_000_000.into();
    f.params(p);
    let t0 = Instant::now();
    let v = json(
        &iperf3_client(port, &["-u", "-b", "10M", "-t", "1"])
            .wait(Duration::from_secs(20))
            .stdout,
    );
    assert!(v.get("error").is_none(), "{}", v["error"]);
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    drop(f);
}

/// Fault 4: a client that asks for 2 s at 1 Mbit/s, then sends flat out and
/// never sends TEST_END, is ended by the rate it moves, not by what it asked.
#[test]
fn the_server_enforces_its_rate_limit_on_what_arrives() {
    if skip("the_server_enforces_its_rate_limit_on_what_arrives") {
        return;
    }
    let (mut srv, port) = server(&["--server-bitrate-limit", "50M/1"]);
    let mut f = Fake::connect(port, "127.0.0.1", None);
    let mut p = tcp_params(2, 1);
    p["bandwidth"] = 1_000_000.into();
    f.params(p);
    f.open_streams(1);
    let (code, after) = f
        .until_server_error(Duration::from_secs(10), true)
        .expect("the server never ended the test");
    assert_eq!(code, 27, "iperf3's IETOTALRATE");
    assert!(after < Duration::from_millis(1900), "{after:?}");
    assert!(srv.is_running());
}

/// Issue 28, item 7: a client that announces 1 Mbit/s and sends as fast as
/// it can was cut only after a whole window (5 s: hundreds of MB), and its
/// next test started at once. The bytes are judged against a window's
/// allowance as they arrive (cut within a fraction of the window), and its
/// source waits out a cool-down; other sources are served meanwhile.
#[test]
fn a_rate_cheat_is_cut_early_and_cools_down() {
    if skip("a_rate_cheat_is_cut_early_and_cools_down") {
        return;
    }
    let (mut srv, port) = server(&["--server-bitrate-limit", "50M/5", "--max-tests", "2"]);
    let mut f = Fake::connect(port, "127.0.0.1", None);
    let mut p = tcp_params(10, 1);
    p["bandwidth"] = 1_000_000.into();
    f.params(p);
    f.open_streams(1);
    let (code, after) = f
        .until_server_error(Duration::from_secs(10), true)
        .expect("the server never ended the test");
    assert_eq!(code, 27, "iperf3's IETOTALRATE");
    assert!(
        after < Duration::from_millis(1500),
        "{after:?} of a 5 s window"
    );
    drop(f);
    std::thread::sleep(Duration::from_millis(300));
    // The same source: refused for its cool-down, with iperf3's error.
    let c = support::linerate()
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "1",
            "-b",
            "1M",
            "-J",
        ])
        .output()
        .unwrap();
    let v = json(&c.stdout);
    let e = v["error"].as_str().unwrap_or_default();
    assert!(e.contains("larger than server limit"), "{v}");
    // Another source is served.
    let c = support::linerate()
        .args([
            "-c",
            "127.0.0.1",
            "-B",
            "127.0.0.2",
            "-p",
            &port.to_string(),
        ])
        .args(["-t", "1", "-b", "1M", "-J"])
        .output()
        .unwrap();
    let v = json(&c.stdout);
    assert!(v.get("error").is_none(), "{v}");
    assert!(srv.is_running());
}

/// Fault 4: a client that never sends TEST_END is ended at its asked time
/// plus the grace (it ran 40 s longer).
#[test]
fn the_server_ends_a_test_at_its_time_plus_grace() {
    if skip("the_server_ends_a_test_at_its_time_plus_grace") {
        return;
    }
    let (_srv, port) = server(&["--server-grace", "1"]);
    let mut f = Fake::connect(port, "127.0.0.1", None);
    f.params(tcp_params(1, 1));
    f.open_streams(1);
    let (code, after) = f
        .until_server_error(Duration::from_secs(15), false)
        .expect("the server never ended the test");
    assert_eq!(code, 160, "iperf3's IESERVERDURATIONEXPIRED... (160)");
    assert!(
        (Duration::from_millis(1900)..Duration::from_millis(3500)).contains(&after),
        "{after:?}"
    );
}

/// Fault 4: `-n 1T` (no -t) on a server with a duration limit is accepted
/// and cut at that limit plus the grace.
#[test]
fn an_amount_test_is_bounded_by_the_duration_limit() {
    if skip("an_amount_test_is_bounded_by_the_duration_limit") {
        return;
    }
    let (_srv, port) = server(&["--server-max-duration", "2", "--server-grace", "1"]);
    let mut f = Fake::connect(port, "127.0.0.1", None);
    let mut p = tcp_params(0, 1);
    p["num"] = (1u64 << 40).into();
    f.params(p);
    f.open_streams(1);
    let (code, after) = f
        .until_server_error(Duration::from_secs(15), true)
        .expect("the server never ended the test");
    assert_eq!(code, 160);
    assert!(
        (Duration::from_millis(2900)..Duration::from_millis(4500)).contains(&after),
        "{after:?}"
    );
}

/// Out of descriptors (`ulimit -n 24`, then 150 connections held): the
/// server backs off and says so once a second with a count, not once per
/// failed accept; once they are gone it serves a real test.
#[test]
fn running_out_of_descriptors_is_said_once_a_second() {
    if skip("running_out_of_descriptors_is_said_once_a_second") {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_linerate");
    let (mut srv, port) = support::listening(|port| {
        Proc::spawn(
            std::process::Command::new("sh")
                .args(["-c", &format!("ulimit -n 24 && exec {bin} -s -p {port}")]),
        )
    });
    let held: Vec<TcpStream> = (0..150)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    assert!(held.len() > 24, "only {} connections made", held.len());
    std::thread::sleep(Duration::from_secs(3));
    drop(held);
    std::thread::sleep(Duration::from_millis(500));
    a_real_test_gets_through(port, &[], Duration::from_secs(30));
    assert!(srv.is_running());
    srv.interrupt();
    let out = std::mem::replace(&mut srv, Proc(None)).wait(Duration::from_secs(10));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("accept failed"))
        .collect();
    assert!(!lines.is_empty(), "no accept error said: {text}");
    // About 3 s of failures: a line when they began and one a second.
    assert!(lines.len() <= 5, "{} lines: {lines:#?}", lines.len());
    assert!(
        lines.iter().any(|l| l.contains("times in the last second")),
        "{lines:#?}"
    );
}
