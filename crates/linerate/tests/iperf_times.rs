//! Times that can be trusted: the receiver's seconds equal the test time
//! (within 0.5%), no interval is a sliver at an absurd rate, and a client
//! on an overloaded host keeps to `-t` (issue 11 item 1, issue 12 item 6).

mod support;

use linerate_testkit::{iperf3_321, require_iperf3_321, require_program, should_skip};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Proc, free_port, json, linerate, wait_listening};

/// The tests of this file run one at a time: they measure times, and the
/// overload test loads both CPUs on purpose.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn secs(v: &Value, key: &str) -> f64 {
    v["end"][key]["seconds"]
        .as_f64()
        .unwrap_or_else(|| panic!("no end.{key}.seconds in {v}"))
}

/// Every interval (sum and per stream) lasts a real interval and reports
/// no more than the whole test's rate could explain.
fn intervals_are_sane(v: &Value, what: &str) {
    let end = &v["end"];
    let total_bps = [
        "sum_sent",
        "sum_received",
        "sum_sent_bidir_reverse",
        "sum_received_bidir_reverse",
    ]
    .iter()
    .filter_map(|k| end[*k]["bits_per_second"].as_f64())
    .fold(0.0, f64::max);
    for iv in v["intervals"].as_array().expect("intervals") {
        for s in iv["streams"].as_array().unwrap() {
            let (t, bps) = (
                s["seconds"].as_f64().unwrap(),
                s["bits_per_second"].as_f64().unwrap(),
            );
            assert!(t >= 0.1, "{what}: an interval of {t} s: {iv}");
            assert!(
                bps <= total_bps * 3.0 + 1e6,
                "{what}: {bps} bit/s in an interval, {total_bps} over the test: {iv}"
            );
        }
    }
}

/// The most seconds a 2 s test may report: the receiver's within 0.5%
/// (the bar); a sender's last write may return late when both
/// directions saturate both CPUs (--bidir: 2.013 and 2.015 s seen, the
/// latter iperf3 3.21's own sender timer), so within 2.5% there.
fn sent_max(key: &str) -> f64 {
    if key == "sum_sent" { 2.05 } else { 2.01 }
}

/// iperf3's client against a linerate server: the receiver's seconds are
/// the test's, forward, reverse and both ways.
fn iperf3_client_times(iperf3: &Path) {
    for mode in [&[][..], &["-R"], &["--bidir"]] {
        let port = free_port();
        let srv = Proc::spawn(linerate().args(["-s", "-1", "-p", &port.to_string()]));
        wait_listening(port);
        let c = Command::new(iperf3)
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J", "-t", "2"])
            // Paced: the times are the test's, not the scheduler's when
            // both directions saturate both CPUs (the overloaded case has
            // a test of its own below).
            .args(["-b", "2G"])
            .args(mode)
            .output()
            .unwrap();
        let v = json(&c.stdout);
        assert!(v.get("error").is_none(), "{mode:?}: {}", v["error"]);
        for key in ["sum_sent", "sum_received"] {
            let t = secs(&v, key);
            assert!(
                (1.99..=sent_max(key)).contains(&t),
                "{mode:?}: {key}.seconds {t}"
            );
        }
        intervals_are_sane(&v, &format!("iperf3 client {mode:?}"));
        drop(srv);
    }
    // linerate's client against iperf3's server: TEST_END goes out at the
    // end, so the server's clock stops there (it read 2.08 s for -t 2 when
    // the client joined its senders first).
    for mode in [&[][..], &["-R"], &["--bidir"]] {
        let port = free_port();
        let srv = Proc::spawn(Command::new(iperf3).args(["-s", "-1", "-p", &port.to_string()]));
        wait_listening(port);
        let c = linerate()
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J", "-t", "2"])
            // Paced: the times are the test's, not the scheduler's when
            // both directions saturate both CPUs (the overloaded case has
            // a test of its own below).
            .args(["-b", "2G"])
            .args(mode)
            .output()
            .unwrap();
        let v = json(&c.stdout);
        assert!(v.get("error").is_none(), "{mode:?}: {}", v["error"]);
        for key in ["sum_sent", "sum_received"] {
            let t = secs(&v, key);
            assert!(
                (1.99..=sent_max(key)).contains(&t),
                "linerate client {mode:?}: {key}.seconds {t}"
            );
        }
        drop(srv);
    }
}

#[test]
fn receiver_seconds_are_the_test_time_with_iperf3_3_12() {
    let _one = serial();
    if should_skip(
        "receiver_seconds_are_the_test_time_with_iperf3_3_12",
        &[require_program("iperf3")],
    ) {
        return;
    }
    iperf3_client_times(Path::new("iperf3"));
}

#[test]
fn receiver_seconds_are_the_test_time_with_iperf3_3_21() {
    let _one = serial();
    if should_skip(
        "receiver_seconds_are_the_test_time_with_iperf3_3_21",
        &[require_iperf3_321()],
    ) {
        return;
    }
    iperf3_client_times(&iperf3_321().unwrap());
}

/// linerate's client with --bidir against linerate's and iperf3's server:
/// no last interval of a millisecond at terabits per second.
#[test]
fn bidir_ends_without_a_sliver_interval() {
    let _one = serial();
    if should_skip(
        "bidir_ends_without_a_sliver_interval",
        &[require_program("iperf3")],
    ) {
        return;
    }
    for server in ["linerate", "iperf3"] {
        for _ in 0..2 {
            let port = free_port();
            let srv = if server == "linerate" {
                Proc::spawn(linerate().args(["-s", "-1", "-p", &port.to_string()]))
            } else {
                Proc::spawn(Command::new("iperf3").args(["-s", "-1", "-p", &port.to_string()]))
            };
            wait_listening(port);
            let c = linerate()
                .args([
                    "-c",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                    "-J",
                    "-t",
                    "2",
                    "--bidir",
                    "-b",
                    "2G",
                ])
                .output()
                .unwrap();
            let v = json(&c.stdout);
            assert!(v.get("error").is_none(), "{server}: {}", v["error"]);
            intervals_are_sane(&v, server);
            let t = secs(&v, "sum_sent");
            assert!(
                (1.99..=sent_max("sum_sent")).contains(&t),
                "{server}: sum_sent.seconds {t}"
            );
            let t = secs(&v, "sum_received");
            assert!(
                (1.99..=sent_max("sum_received")).contains(&t),
                "{server}: sum_received.seconds {t}"
            );
            drop(srv);
        }
    }
}

/// 64 UDP streams each way at full speed on this small host: the client
/// ends on time (it ran 13.8 s of a 3 s test; iperf3 kept to 3.5 s).
#[test]
fn an_overloaded_client_keeps_to_its_time() {
    let _one = serial();
    let port = free_port();
    let _srv = Proc::spawn(linerate().args(["-s", "-p", &port.to_string()]));
    wait_listening(port);
    let t0 = Instant::now();
    let c = linerate()
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J", "-t", "2"])
        .args(["-P", "64", "--bidir", "-u", "-b", "0", "-l", "65000"])
        .output()
        .unwrap();
    let wall = t0.elapsed();
    let v = json(&c.stdout);
    assert!(v.get("error").is_none(), "{}", v["error"]);
    let t = secs(&v, "sum_sent");
    assert!((2.0..=2.05).contains(&t), "sum_sent.seconds {t}");
    assert!(wall < Duration::from_millis(4500), "the test took {wall:?}");
}
