//! linerate's human output has iperf3's shape, line for line (numbers,
//! ports, units and socket ids masked): the same client flags against the
//! same server, run once with iperf3's client and once with linerate's;
//! and the same iperf3 client against iperf3's server and linerate's.

mod support;

use linerate_testkit::{iperf3_321, require_iperf3_321, require_program, should_skip};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::{Proc, free_port, linerate, wait_listening};

/// Numbers become `N`, unit prefixes go, runs of spaces become one; lines
/// that only one implementation prints by design are dropped.
fn mask(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut after_sliver = false;
    for line in text.lines() {
        // iperf3's own sliver of a last interval ("2.00-2.00 sec"), which
        // linerate folds into the test's end by design.
        // (iperf3 prints it as "2.00-2.00" or "2.00-2.01": under 50 ms.)
        let sliver = line.split_whitespace().any(|w| {
            let Some((a, b)) = w.split_once('-') else {
                return false;
            };
            match (a.parse::<f64>(), b.parse::<f64>()) {
                (Ok(a), Ok(b)) => a > 0.0 && b - a < 0.05,
                _ => false,
            }
        });
        if sliver {
            after_sliver = true;
            continue;
        }
        if after_sliver
            && line.starts_with("- - -")
            && out.last().is_some_and(|l: &String| l.starts_with("- - -"))
        {
            after_sliver = false;
            continue;
        }
        after_sliver = false;
        let mut m = String::new();
        let mut prev_num = false;
        for c in line.chars() {
            if c.is_ascii_digit() || (prev_num && c == '.') {
                if !prev_num {
                    m.push('N');
                }
                prev_num = true;
            } else {
                prev_num = false;
                m.push(c);
            }
        }
        let m = m
            .replace("KBytes", "Bytes")
            .replace("MBytes", "Bytes")
            .replace("GBytes", "Bytes")
            .replace("Kbits/sec", "bits/sec")
            .replace("Mbits/sec", "bits/sec")
            .replace("Gbits/sec", "bits/sec");
        let m = m.split_whitespace().collect::<Vec<_>>().join(" ");
        // linerate's own notes (doctor hints, warnings) start with "linerate:".
        if m.is_empty() || m.starts_with("linerate:") {
            continue;
        }
        out.push(m);
    }
    out
}

fn assert_same_shape(what: &str, theirs: &str, ours: &str) {
    let (t, o) = (mask(theirs), mask(ours));
    for (i, (a, b)) in t.iter().zip(&o).enumerate() {
        assert_eq!(
            a, b,
            "{what}: line {i} differs\n--- iperf3:\n{theirs}\n--- linerate:\n{ours}"
        );
    }
    assert_eq!(
        t.len(),
        o.len(),
        "{what}: line counts differ\n--- iperf3:\n{theirs}\n--- linerate:\n{ours}"
    );
}

const CASES: [&[&str]; 6] = [
    &["-t", "2"],
    &["-t", "2", "-P", "2"],
    &["-t", "1", "-R", "-P", "2"],
    &["-t", "1", "-u", "-b", "10M", "-P", "2"],
    &["-t", "1", "--bidir"],
    &["-t", "1", "--bidir", "-P", "2"],
];

/// Client output: iperf3's client and linerate's against iperf3's server
/// (a server of its own for each client: one server serving both in turn
/// could still be ending the first test when the second client came, and
/// answer it "busy" or close on it).
fn client_shape(iperf3: &Path) {
    for args in CASES {
        let run = |c: &mut Command| {
            let port = free_port();
            let _srv =
                Proc::spawn(Command::new(iperf3).args(["-s", "-1", "-p", &port.to_string()]));
            wait_listening(port);
            let out = c
                .args(["-c", "127.0.0.1", "-p", &port.to_string()])
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let theirs = run(&mut Command::new(iperf3));
        let ours = run(&mut linerate());
        assert_same_shape(&format!("client {args:?}"), &theirs, &ours);
    }
}

/// Server output: one iperf3 client test against iperf3's server and
/// linerate's (each serving one test, -1).
fn server_shape(iperf3: &Path) {
    for args in CASES {
        let serve = |server: &mut Command| {
            let port = free_port();
            let srv = Proc::spawn(server.args(["-s", "-1", "-p", &port.to_string()]));
            wait_listening(port);
            let c = Command::new(iperf3)
                .args(["-c", "127.0.0.1", "-p", &port.to_string()])
                .args(args)
                .output()
                .unwrap();
            assert!(c.status.success(), "{args:?}");
            String::from_utf8_lossy(&srv.wait(Duration::from_secs(15)).stdout).into_owned()
        };
        let theirs = serve(&mut Command::new(iperf3));
        let ours = serve(&mut linerate());
        assert_same_shape(&format!("server {args:?}"), &theirs, &ours);
    }
}

#[test]
fn output_has_iperf3_3_12_shape() {
    if should_skip("output_has_iperf3_3_12_shape", &[require_program("iperf3")]) {
        return;
    }
    client_shape(Path::new("iperf3"));
    server_shape(Path::new("iperf3"));
}

#[test]
fn output_has_iperf3_3_21_shape() {
    if should_skip("output_has_iperf3_3_21_shape", &[require_iperf3_321()]) {
        return;
    }
    let p = iperf3_321().unwrap();
    client_shape(&p);
    server_shape(&p);
}

/// iperf3's `-V` lines that scripts read, in the order printed.
fn verbose_lines(text: &str) -> Vec<&'static str> {
    const KINDS: [&str; 11] = [
        "iperf 3.",
        "Linux ",
        "Time: ",
        "      Cookie: ",
        "      TCP MSS: ",
        "      Target Bitrate: ",
        "Starting Test: ",
        "Test Complete. Summary Results:",
        "CPU Utilization: local/",
        "snd_tcp_congestion ",
        "rcv_tcp_congestion ",
    ];
    text.lines()
        .filter_map(|l| KINDS.iter().find(|k| l.starts_with(*k)).copied())
        .collect()
}

/// `-V`: the verbose lines iperf3 3.21 prints (version, time, cookie,
/// MSS, target rate, "Starting Test", "Test Complete", "CPU Utilization",
/// the congestion algorithms) come from linerate in the same order, on
/// the client (against 3.21's server) and on the server (under 3.21's
/// client). The "Starting Test" and CPU lines are checked word for word
/// but for their numbers.
#[test]
fn verbose_output_has_iperf3_3_21s_lines() {
    if should_skip(
        "verbose_output_has_iperf3_3_21s_lines",
        &[require_iperf3_321()],
    ) {
        return;
    }
    let iperf3 = iperf3_321().unwrap();
    let cases: [&[&str]; 3] = [
        &["-t", "1", "-V"],
        &["-t", "1", "-V", "-u", "-b", "10M"],
        &["-t", "1", "-V", "-R", "-P", "2"],
    ];
    for args in cases {
        let client = |prog: &mut Command| {
            let port = free_port();
            let _srv =
                Proc::spawn(Command::new(&iperf3).args(["-s", "-1", "-p", &port.to_string()]));
            wait_listening(port);
            let out = prog
                .args(["-c", "127.0.0.1", "-p", &port.to_string()])
                .args(args)
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let (theirs, ours) = (client(&mut Command::new(&iperf3)), client(&mut linerate()));
        assert_eq!(
            verbose_lines(&theirs),
            verbose_lines(&ours),
            "client {args:?}\n--- iperf3:\n{theirs}\n--- linerate:\n{ours}"
        );
        // "Starting Test" word for word (the UDP block size is the control
        // connection's MSS after the cookie, as iperf3's); CPU figures
        // masked.
        let starting = |t: &str| {
            t.lines()
                .filter(|l| l.starts_with("Starting Test") || l.starts_with("CPU Utilization"))
                .map(|l| match l.starts_with("CPU") {
                    true => l.replace(|c: char| c.is_ascii_digit(), ""),
                    false => l.to_string(),
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(starting(&theirs), starting(&ours), "client {args:?}");
        let server = |prog: &mut Command| {
            let port = free_port();
            let srv = Proc::spawn(prog.args(["-s", "-1", "-V", "-p", &port.to_string()]));
            wait_listening(port);
            let c = Command::new(&iperf3)
                .args(["-c", "127.0.0.1", "-p", &port.to_string()])
                .args(args.iter().filter(|a| **a != "-V"))
                .output()
                .unwrap();
            assert!(c.status.success(), "{args:?}");
            String::from_utf8_lossy(&srv.wait(Duration::from_secs(15)).stdout).into_owned()
        };
        let (theirs, ours) = (server(&mut Command::new(&iperf3)), server(&mut linerate()));
        assert_eq!(
            verbose_lines(&theirs),
            verbose_lines(&ours),
            "server {args:?}\n--- iperf3:\n{theirs}\n--- linerate:\n{ours}"
        );
    }
}
