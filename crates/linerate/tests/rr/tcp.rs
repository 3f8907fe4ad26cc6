//! rr over TCP: its `-J` keys and counts, and a server that survives
//! connection churn.

use crate::support;
use crate::support::{json, json_of};
use serde_json::Value;
use std::time::{Duration, Instant};

/// `rr client --tcp` and `--connect-per-transaction` against `rr server
/// --tcp` on loopback: the `-J` keys of both sides, their counts agreeing.
#[test]
fn rr_over_tcp_json_keys_and_counts() {
    // Stopped by SIGINT once the clients are done (a fixed time runs out
    // before them on a loaded machine).
    let (server, port) = support::rr_tcp_server(&["-t", "60", "-J", "--max-per-source", "100"]);
    let client = |extra: &[&str]| -> Value {
        support::json_ok(
            support::rr_tcp_client(port)
                .args(["-t", "0.5", "-i", "0.25", "-J"])
                .args(extra),
        )
    };
    let rr = client(&["--outstanding", "2", "--flows", "4"]);
    // Open loop: exactly 0.5 s x 1k transactions, a connection each.
    let crr = client(&["--connect-per-transaction", "--pps", "1k", "--flows", "16"]);
    let c = find(&crr, "counts");
    assert_eq!((n(&c["completed"]), n(&c["connects"])), (500, 500), "{c}");
    for (v, transport) in [(&rr, "tcp"), (&crr, "tcp, a connection per transaction")] {
        let r = &v["end"]["outcome"];
        let r = if r.is_null() { v } else { r };
        assert_eq!(r["transport"], transport, "{v}");
        let c = &r["counts"];
        for k in [
            "sent",
            "completed",
            "lost",
            "connects",
            "connect_errors",
            "resets",
            "reconnects",
        ] {
            assert!(c[k].is_u64(), "counts.{k}: {v}");
        }
        assert_eq!(c["connect_errors"], 0, "{v}");
        assert_eq!(c["resets"], 0, "{v}");
        assert_eq!(c["reconnects"], 0, "{v}");
        assert!(n(&c["completed"]) > 0);
        assert!(r["latency_us"]["p50"].is_number(), "{v}");
        assert!(r["transactions_per_s"].as_f64().unwrap() > 0.0);
        assert_eq!(r["intervals"].as_array().unwrap().len(), 2, "{v}");
    }
    // let the server see the clients' last closes
    std::thread::sleep(Duration::from_millis(200));
    server.interrupt();
    let s = json_of(server, Duration::from_secs(10));
    let s = if s["end"]["outcome"].is_null() {
        &s
    } else {
        &s["end"]["outcome"]
    };
    let sc = &s["counts"];
    let both = |k: &str| n(&find(&rr, "counts")[k]) + n(&find(&crr, "counts")[k]);
    assert_eq!(s["transport"], "tcp", "{s}");
    assert_eq!(n(&sc["requests"]), both("sent"), "{s}");
    assert_eq!(n(&sc["accepted"]), both("connects"), "{s}");
    assert_eq!(sc["closed"], sc["accepted"], "{s}");
    for k in [
        "oversized",
        "idle_closed",
        "refused_total",
        "refused_source",
        "unsent_bytes",
    ] {
        assert_eq!(sc[k], 0, "counts.{k}: {s}");
    }
}

/// `key` of the run's outcome, wherever the document keeps it.
fn find<'a>(v: &'a Value, key: &str) -> &'a Value {
    if v[key].is_null() {
        &v["end"]["outcome"][key]
    } else {
        &v[key]
    }
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Open file descriptors of process `pid`.
fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Resident memory of process `pid`, KiB (VmRSS).
fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// What the TCP server may grow by over the churn, KiB: 128 connections
/// at once with their buffers, the workers' connection tables and the
/// allocator's arenas, far below what one leaked buffer per connection
/// (tens of thousands of them) would take.
const CHURN_RSS_GROWTH_KIB_MAX: u64 = 16 * 1024;

/// The TCP server under thousands of connections churned per second (a
/// connection per transaction, 128 at once) for 6 s: its descriptors
/// come back to what they were before, its memory stays within
/// `CHURN_RSS_GROWTH_KIB_MAX`, and a persistent client afterwards gets
/// every answer; both sides' counts agree.
#[test]
fn rr_tcp_server_survives_connection_churn() {
    let (server, port) = support::rr_tcp_server(&["-t", "60", "-J", "--max-per-source", "1000"]);
    let pid = server.pid();
    let (fds_before, rss_before) = (open_fds(pid), rss_kib(pid));
    let client = |extra: &[&str]| -> Value {
        support::json_ok(support::rr_tcp_client(port).arg("-J").args(extra))
    };
    let crr = client(&[
        "--connect-per-transaction",
        "--threads",
        "2",
        "--flows",
        "64",
        "-t",
        "6",
    ]);
    let c = find(&crr, "counts");
    let per_s = n(&c["connects"]) as f64 / find(&crr, "duration_s").as_f64().unwrap();
    assert!(per_s >= 1000.0, "{per_s:.0} connections/s: {c}");
    assert_eq!(
        (n(&c["connect_errors"]), n(&c["resets"]), n(&c["lost"])),
        (0, 0, 0),
        "{c}"
    );
    // Every connection closed again: the descriptors come back.
    let deadline = Instant::now() + Duration::from_secs(5);
    while open_fds(pid) != fds_before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(open_fds(pid), fds_before, "descriptors after the churn");
    let rss_after = rss_kib(pid);
    assert!(
        rss_after <= rss_before + CHURN_RSS_GROWTH_KIB_MAX,
        "VmRSS {rss_before} KiB before, {rss_after} KiB after the churn"
    );
    // Still serving: an open-loop persistent client gets all its answers.
    let rr = client(&["--flows", "8", "--pps", "2k", "-t", "0.5"]);
    let r = find(&rr, "counts");
    assert_eq!((n(&r["completed"]), n(&r["lost"])), (1000, 0), "{r}");
    server.interrupt();
    let s_out = server.wait(Duration::from_secs(10));
    let s = json(&s_out.stdout);
    let sc = find(&s, "counts");
    assert_eq!(n(&sc["accepted"]), n(&c["connects"]) + 8, "{sc}");
    assert_eq!(sc["closed"], sc["accepted"], "{sc}");
    assert_eq!(n(&sc["requests"]), n(&c["sent"]) + 1000, "{sc}");
    for k in ["resets", "refused_total", "refused_source", "accept_errors"] {
        assert_eq!(sc[k], 0, "counts.{k}: {sc}");
    }
    eprintln!(
        "churn: {per_s:.0} connections/s; fds {fds_before}; VmRSS {rss_before} -> {rss_after} KiB"
    );
}
