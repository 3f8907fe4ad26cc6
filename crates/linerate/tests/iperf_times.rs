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

/// The most seconds the receiver (linerate's server) may report to
/// iperf3's client: [`sent_max`]'s 0.5%, or 5 ms past the client's own
/// sender seconds when its sender ran later than that (iperf3 3.21's
/// paced sender reads 2.001-2.009 s for -t 2 on an idle 2-CPU machine and
/// 2.0108 s was seen in CI; iperf3's own server then reports the sender's
/// seconds + 0.2 ms: the data came until then). In `--bidir` both
/// directions (2 Gbit/s each) fill both CPUs: 2.0108 and 2.0149 s seen in
/// strict runs, so within 1% there.
fn received_max(key: &str, mode: &[&str], sent: f64) -> f64 {
    if key != "sum_received" {
        return sent_max(key);
    }
    let bar = if mode.contains(&"--bidir") {
        2.02
    } else {
        sent_max(key)
    };
    bar.max(sent + 0.005)
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
        let sent = secs(&v, "sum_sent");
        for key in ["sum_sent", "sum_received"] {
            let t = secs(&v, key);
            assert!(
                (1.99..=received_max(key, mode, sent)).contains(&t),
                "{mode:?}: {key}.seconds {t} (sum_sent.seconds {sent})"
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
    // 128 streams on 2 CPUs: the last sender thread may be scheduled
    // tens of ms after the end (2.061 s seen once in CI); the bug was 13.8 s.
    assert!((2.0..=2.1).contains(&t), "sum_sent.seconds {t}");
    assert!(wall < Duration::from_millis(4500), "the test took {wall:?}");
}

/// The wall time of `-t 1` clients (`client` makes each) against one
/// linerate server, each run's in milliseconds, and their median.
fn wall_times(
    client: impl Fn() -> Command,
    port: u16,
    extra: &[&str],
    runs: usize,
) -> (Vec<u128>, u128) {
    let mut ms: Vec<u128> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            let c = client()
                .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
                .args(extra)
                .output()
                .unwrap();
            let took = t0.elapsed().as_millis();
            assert!(
                c.status.success(),
                "{extra:?}: {}{}",
                String::from_utf8_lossy(&c.stderr),
                String::from_utf8_lossy(&c.stdout)
            );
            took
        })
        .collect();
    let runs = ms.clone();
    ms.sort_unstable();
    (runs, ms[ms.len() / 2])
}

/// `-t 1` tests of `client` against a linerate server, TCP, UDP at
/// 100 Mbit/s and `-R`: the median of 5 runs of each is under the second
/// plus 60 ms.
fn takes_one_second(client: impl Fn() -> Command) {
    let port = free_port();
    let _srv = Proc::spawn(linerate().args(["-s", "-p", &port.to_string()]));
    wait_listening(port);
    for extra in [&[][..], &["-u", "-b", "100M"], &["-R"]] {
        let (runs, median) = wall_times(&client, port, extra, 5);
        assert!(
            median < 1060,
            "{extra:?}: a -t 1 test took {median} ms (median; runs {runs:?}): more than 1 s + 60 ms"
        );
    }
}

/// A `-t 1` test takes one second and little more, as iperf3's does (issue
/// 26 item 8). Measured on this 2-CPU VM (shared with other builds),
/// process wall time, medians of 5 runs of the debug builds these tests
/// run: iperf3 3.21 against itself 1007 ms (TCP), 1009 ms (UDP at
/// 100 Mbit/s), 1006 ms (-R); linerate against itself 1178, 1141 and
/// 1177 ms before, 1020, 1016 and 1017 ms after. The time went to waits
/// on timeouts that nothing woke: each control message an event queued
/// waited for the next turn of a 20 ms control read, a data connection
/// for the server's next 20 ms control read and its accept loop's 5 ms
/// look, a sender that reached its end slept a 50 ms poll, a receiver sat
/// in a 50 ms read before it saw TEST_END and drained for 20 ms more
/// before the results exchange began (it now overlaps the exchange), a
/// paced UDP sender slept to its next block (250 ms at the default rate),
/// and the doctor's summary (14 ms) was taken after the end on each side.
/// The bound: the second plus 60 ms for set-up and teardown, over the
/// median of 5 runs so that one slow run on a shared VM does not decide.
#[test]
fn a_one_second_test_takes_one_second() {
    let _one = serial();
    takes_one_second(linerate);
}

/// iperf3 3.21's client against a linerate server, the same bound (1172,
/// 1164 and 1146 ms before, 1009, 1020 and 1016 ms after): the server's
/// side of the end (its drain, its answer to the results) waits on no
/// timeout either.
#[test]
fn an_iperf3_client_test_of_one_second_takes_one_second() {
    let _one = serial();
    if should_skip(
        "an_iperf3_client_test_of_one_second_takes_one_second",
        &[require_iperf3_321()],
    ) {
        return;
    }
    let iperf3 = iperf3_321().unwrap();
    takes_one_second(|| Command::new(&iperf3));
}
