//! On loopback: impossible settings refused, a server that is not there,
//! the text output.

use crate::support;
use crate::support::{Proc, json, linerate, u};
use std::time::Duration;

fn fails_with(args: &[&str], needle: &str) {
    let out = linerate().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
}

#[test]
fn rr_refuses_impossible_settings_with_a_clear_message() {
    let c = ["rr", "client", "127.0.0.1", "-p", "9", "-t", "0.2"];
    let srv = ["rr", "server", "-B", "127.0.0.1", "-p", "0", "-t", "0.2"];
    fails_with(
        &[&srv[..], &["--no-reuseport", "--steering", "hash"]].concat(),
        "nothing to steer",
    );
    // The UDP recipe's switches do not apply over TCP: refused, not ignored.
    for udp_only in [
        &["--batch", "8"][..],
        &["--steering", "hash"],
        &["--no-reuseport"],
        &["--no-gso"],
    ] {
        fails_with(
            &[&srv[..], &["--tcp"], udp_only].concat(),
            "cannot be used with",
        );
    }
    fails_with(
        &[&srv[..], &["--busy-poll", "200000"]].concat(),
        "at most 100000 microseconds",
    );
    fails_with(
        &[&srv[..], &["--coalesce", "2000"]].concat(),
        "--coalesce is at most 1000 microseconds",
    );
    fails_with(
        &[&srv[..], &["--coalesce", "100", "--spin"]].concat(),
        "--spin never sleeps",
    );
    fails_with(
        &[&srv[..], &["--client-sockets", "4"]].concat(),
        "--client-sockets is for spinning workers (--spin)",
    );
    fails_with(
        &[
            &srv[..],
            &["--client-sockets", "4", "--spin", "--no-reuseport"],
        ]
        .concat(),
        "not with --no-reuseport",
    );
    fails_with(
        &[&srv[..], &["--client-sockets", "1025", "--spin"]].concat(),
        "--client-sockets is at most 1024, not 1025",
    );
    fails_with(
        &[&srv[..], &["--tcp", "--client-sockets", "4"]].concat(),
        "cannot be used with",
    );
    fails_with(
        &[&srv[..], &["--coalesce", "100", "--batch", "1"]].concat(),
        "needs --batch above 1",
    );
    fails_with(
        &[&srv[..], &["--af-xdp", "lr-nosuch0"]].concat(),
        "no interface named lr-nosuch0",
    );
    fails_with(
        &[&srv[..], &["--af-xdp", "lo", "--coalesce", "100"]].concat(),
        "--coalesce is for the socket server: --af-xdp answers from the interface's queues",
    );
    fails_with(
        &[&srv[..], &["--af-xdp", "lo", "--tcp"]].concat(),
        "cannot be used with",
    );
    fails_with(
        &[&srv[..], &["--tcp", "--coalesce", "100"]].concat(),
        "cannot be used with",
    );
    fails_with(
        &[&c[..], &["-l", "10"]].concat(),
        "request size 10 is outside 32..=65507",
    );
    fails_with(
        &[&c[..], &["--pps", "fast"]].concat(),
        "'fast' is not a rate",
    );
    fails_with(
        &[&c[..], &["--flows", "0"]].concat(),
        "at least one worker and one flow",
    );
    fails_with(
        &[&c[..], &["--pps", "1k", "--outstanding", "2"]].concat(),
        "cannot be used with",
    );
    fails_with(
        &["rr", "server", "--steering", "rss"],
        "--steering is cpu or hash",
    );
    fails_with(
        &[&c[..], &["--cores", "1000"]].concat(),
        "CPU(s) 1000 are not online",
    );
    fails_with(
        &["rr", "server", "-p", "0", "--cores", "1000"],
        "CPU(s) 1000 are not online",
    );
    fails_with(
        &[
            "rr",
            "server",
            "-p",
            "0",
            "--max-response",
            "70000",
            "--allow",
            "::1",
        ],
        "largest response must be",
    );
    fails_with(
        &["rr", "server", "-p", "0", "--max-response", "4096"],
        "--allow",
    );
    fails_with(
        &[
            "rr",
            "server",
            "-p",
            "0",
            "--max-response",
            "400",
            "--allow",
            "198.18.0.0/40",
        ],
        "not an address prefix",
    );
}

#[test]
fn rr_client_without_a_server_reports_then_fails() {
    let port = support::free_port().to_string();
    let out = linerate()
        .args(["rr", "client", "127.0.0.1", "-p", &port, "-t", "0.3"])
        .args(["--timeout-ms", "50", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no answer from 127.0.0.1"), "{err}");
    // what was measured is still printed
    let v = json(&out.stdout);
    assert!(u(&v, "counts.sent") > 0);
    assert_eq!(u(&v, "counts.lost"), u(&v, "counts.sent"));
    assert!(u(&v, "counts.refused") > 0);
}

/// `linerate rr server` on loopback on a fresh port for 2 s (hash
/// steering), with `extra`, given 300 ms to bind (UDP: no listening state
/// to wait for); its port.
fn udp_rr_server(extra: &[&str]) -> (Proc, u16) {
    let port = support::free_port();
    let server = Proc::spawn(
        linerate()
            .args(["rr", "server", "-B", "127.0.0.1", "-p", &port.to_string()])
            .args(["-t", "2", "--steering", "hash"])
            .args(extra),
    );
    std::thread::sleep(Duration::from_millis(300));
    (server, port)
}

#[test]
fn rr_on_loopback_text_output() {
    let (server, port) = udp_rr_server(&[]);
    let out = linerate()
        .args([
            "rr",
            "client",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "0.5",
        ])
        .args(["-i", "0.25", "--pps", "2k"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("[SUM]")).count(),
        2,
        "{text}"
    );
    assert!(text.contains("total: 1000 transactions"), "{text}");
    assert!(text.contains("scheduled send to receipt"), "{text}");
    let s = String::from_utf8_lossy(&server.wait(Duration::from_secs(5)).stdout).to_string();
    assert!(s.contains("total: 1000 requests"), "{s}");
}

/// `--coalesce` end to end: the server's document says the nap it was
/// given, and every one of a paced client's 1,000 requests is answered.
#[test]
fn rr_server_coalesces_as_told_and_answers_every_request() {
    let (server, port) = udp_rr_server(&["--coalesce", "200", "-J"]);
    let out = linerate()
        .args(["rr", "client", "127.0.0.1", "-p", &port.to_string()])
        .args(["-t", "0.5", "--pps", "2k"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&server.wait(Duration::from_secs(5)).stdout);
    assert_eq!(doc["recipe"]["coalesce_us"], 200, "{doc}");
    assert_eq!(u(&doc, "counts.requests"), 1000, "{doc}");
    assert_eq!(u(&doc, "counts.answered"), 1000, "{doc}");
}
