//! `linerate rr` end to end: across the rig's namespaces (IPv4 and IPv6,
//! both sides' counts and their doctor summaries) and on loopback (bad
//! input on the command line, a server that is not there).

mod support;

use linerate_lab::Rig;
use linerate_testkit::{require_program, require_root, should_skip};
use serde_json::Value;
use std::time::{Duration, Instant};
use support::{Proc, json, linerate, u};

/// Waits until something listens on UDP `port` in the rig host's namespace.
fn wait_udp(rig: &Rig, host: usize, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let out = rig
            .command(host, "ss")
            .args(["-Hlun", &format!("sport = :{port}")])
            .output()
            .unwrap();
        if !out.stdout.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no rr server on UDP port {port}");
}

fn across_rig(v6: bool) {
    let rig = Rig::pair().unwrap();
    let port = "5300";
    let server_ip = if v6 {
        rig.host(1).ipv6.to_string()
    } else {
        rig.host(1).ipv4.to_string()
    };
    let server = Proc::spawn(
        rig.command(1, env!("CARGO_BIN_EXE_linerate"))
            .args(["rr", "server", "-B", &server_ip, "-p", port])
            .args(["--cores", "0,1", "-t", "3", "-i", "0.5", "--json"])
            // The client asks for responses larger than its requests.
            .args([
                "--max-response",
                "300",
                "--allow",
                "198.18.0.0/15,2001:db8::/32",
            ]),
    );
    wait_udp(&rig, 1, 5300);
    let before = rig.stats(1).unwrap();
    let out = rig
        .command(0, env!("CARGO_BIN_EXE_linerate"))
        .args(["rr", "client", &server_ip, "-p", port, "--json"])
        .args([
            "-t",
            "1",
            "--flows",
            "4",
            "--outstanding",
            "4",
            "--cores",
            "0,1",
        ])
        .args(["-l", "100", "--response-size", "300"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: Value = json(&out.stdout);
    let s_out = server.wait(Duration::from_secs(10));
    assert!(
        s_out.status.success(),
        "{}",
        String::from_utf8_lossy(&s_out.stderr)
    );
    let s: Value = json(&s_out.stdout);
    let after = rig.stats(1).unwrap();

    let sent = u(&c, "counts.sent");
    assert!(u(&c, "counts.completed") > 1000, "{c}");
    assert_eq!(sent, u(&c, "counts.completed") + u(&c, "counts.lost"));
    // The server answered exactly what the client sent, and the veth
    // counted at least that many frames in.
    assert_eq!(u(&s, "counts.requests"), sent, "{s}");
    assert_eq!(u(&s, "counts.answered"), sent);
    assert_eq!(u(&s, "counts.bytes_out"), sent * 300);
    assert!(after.rx_packets - before.rx_packets >= sent);
    assert_eq!(c["workers"].as_array().unwrap().len(), 2);
    assert_eq!(c["flows"], 8);
    assert!(s["steering"].as_str().unwrap().starts_with("cpu"), "{s}");
    // Both sides say what the host looked like, for the interface they used.
    assert_eq!(c["doctor"]["iface"], "veth0", "{}", c["doctor"]);
    assert_eq!(s["doctor"]["iface"], "veth0", "{}", s["doctor"]);
    assert!(c["doctor"]["warnings"].is_array());
    assert!(s["intervals"].as_array().unwrap().len() >= 5);
}

#[test]
fn rr_across_the_rig_ipv4() {
    if should_skip(
        "rr_across_the_rig_ipv4",
        &[require_root(), require_program("ip"), require_program("ss")],
    ) {
        return;
    }
    across_rig(false);
}

#[test]
fn rr_across_the_rig_ipv6() {
    if should_skip(
        "rr_across_the_rig_ipv6",
        &[require_root(), require_program("ip"), require_program("ss")],
    ) {
        return;
    }
    across_rig(true);
}

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

#[test]
fn rr_on_loopback_text_output() {
    let port = support::free_port();
    let server = Proc::spawn(linerate().args(["rr", "server", "-B", "127.0.0.1"]).args([
        "-p",
        &port.to_string(),
        "-t",
        "2",
        "--steering",
        "hash",
    ]));
    std::thread::sleep(Duration::from_millis(300));
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

/// A server on loopback for the amplification checks; its JSON when done.
fn amplification_run(server_args: &[&str]) -> serde_json::Value {
    let port = support::free_port().to_string();
    let server = Proc::spawn(
        linerate()
            .args([
                "rr",
                "server",
                "-B",
                "127.0.0.1",
                "-p",
                &port,
                "-t",
                "2",
                "-J",
            ])
            .args(server_args),
    );
    std::thread::sleep(Duration::from_millis(300));
    // 1,000 requests of 32 bytes, each asking for a 16 KiB response.
    let client = linerate()
        .args([
            "rr",
            "client",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "1",
            "--pps",
            "1k",
        ])
        .args([
            "-l",
            "32",
            "--response-size",
            "16384",
            "--timeout-ms",
            "100",
            "-J",
        ])
        .output()
        .unwrap();
    let _ = client;
    support::json(&server.wait(Duration::from_secs(10)).stdout)
}

#[test]
fn the_rr_server_is_no_amplifier() {
    // By default, and for sources outside --allow (a spoofed address looks
    // just like one), a response is never larger than its request.
    for args in [
        &[][..],
        &["--max-response", "16384", "--allow", "198.18.0.0/15"],
    ] {
        let v = amplification_run(args);
        let c = &v["counts"];
        assert_eq!(c["too_large"], 1000, "{args:?}: {v}");
        assert_eq!(c["answered"], 0, "{args:?}");
        assert!(
            c["bytes_out"].as_u64().unwrap() <= c["bytes_in"].as_u64().unwrap(),
            "{args:?}: {c}"
        );
    }
    // An allowed source gets what it asked for, up to the limit.
    let v = amplification_run(&["--max-response", "16384", "--allow", "127.0.0.0/8"]);
    assert_eq!(v["counts"]["answered"], 1000, "{v}");
    assert_eq!(v["counts"]["bytes_out"], 1000 * 16384);
}

/// UDP sockets bound to `port` in this namespace (/proc/net/udp).
fn udp_sockets_on(port: u16) -> usize {
    let t = std::fs::read_to_string("/proc/net/udp").unwrap();
    let want = format!(":{port:04X}");
    t.lines()
        .skip(1)
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|local| local.ends_with(&want))
        })
        .count()
}

/// The CPUs each thread of `pid` may run on (Cpus_allowed_list).
fn thread_cpus(pid: i32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| {
            let st = std::fs::read_to_string(e.ok()?.path().join("status")).ok()?;
            st.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .collect()
}

/// The recipe's switches take effect: --no-reuseport opens one socket
/// shared by the workers (SO_REUSEPORT: one per worker), --no-pin leaves
/// every worker thread free to run anywhere (pinned: one CPU each),
/// --busy-poll is set on the sockets, --no-gso sends one message per
/// answer (by default a closed loop's answers to one flow share UDP GSO
/// messages); transactions complete either way.
#[test]
fn rr_server_recipe_switches_take_effect() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("SKIP rr_server_recipe_switches_take_effect: needs 2 CPUs");
        assert!(!linerate_testkit::strict(), "needs 2 CPUs");
        return;
    }
    for (switches, sockets, pinned) in [
        (&[][..], 2, true),
        (&["--no-reuseport"][..], 1, true),
        (&["--no-pin", "--busy-poll", "50", "--no-gso"][..], 2, false),
    ] {
        let port = support::free_port();
        let p = port.to_string();
        let server = Proc::spawn(
            linerate()
                .args(["rr", "server", "-B", "127.0.0.1", "-p", &p])
                .args(["--cores", "0,1", "-t", "3", "-J"])
                .args(switches),
        );
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(udp_sockets_on(port), sockets, "{switches:?}");
        let threads = thread_cpus(server.pid());
        let single = threads.iter().filter(|c| *c == "0" || *c == "1").count();
        if pinned {
            assert_eq!(single, 2, "{switches:?}: two workers pinned: {threads:?}");
        } else {
            assert_eq!(single, 0, "{switches:?}: none pinned: {threads:?}");
        }
        let c = support::json_ok(
            linerate()
                .args(["rr", "client", "127.0.0.1", "-p", &p, "-t", "0.5", "-J"])
                .args(["--flows", "4", "--pps", "4k"]),
        );
        assert_eq!(u(&c, "counts.lost"), 0, "{switches:?}");
        // closed loop, 2 flows x 16 in flight: batches hold several
        // requests of one flow
        let closed = support::json_ok(
            linerate()
                .args(["rr", "client", "127.0.0.1", "-p", &p, "-t", "0.5", "-J"])
                .args(["--flows", "2", "--outstanding", "16"]),
        );
        assert_eq!(u(&closed, "counts.lost"), 0, "{switches:?}");
        let s = json(&server.wait(Duration::from_secs(10)).stdout);
        let gso = !switches.contains(&"--no-gso");
        assert_eq!(s["recipe"]["gso"], gso, "{}", s["recipe"]);
        let (answered, messages) = (u(&s, "counts.answered"), u(&s, "counts.reply_messages"));
        assert_eq!(
            answered,
            u(&c, "counts.sent") + u(&closed, "counts.sent"),
            "{switches:?}"
        );
        if gso {
            assert!(
                messages < answered,
                "{switches:?}: {messages} messages for {answered} answers"
            );
        } else {
            assert_eq!(messages, answered, "{switches:?}");
        }
        let recipe = &s["recipe"];
        assert_eq!(recipe["reuseport"], sockets == 2, "{recipe}");
        assert_eq!(recipe["pinned"], pinned, "{recipe}");
        let busy = if switches.contains(&"--busy-poll") {
            50
        } else {
            0
        };
        assert_eq!(recipe["busy_poll_us"], busy, "{recipe}");
        assert_eq!(u(&s, "counts.requests"), answered, "{switches:?}");
        if sockets == 1 {
            assert!(
                s["steering"].as_str().unwrap().starts_with("none"),
                "{}",
                s["steering"]
            );
        }
    }
}

/// `rr client --busy-poll` spins on its sockets instead of sleeping: every
/// transaction still completes, the report says it spun, and the worker
/// burns its CPU (its CPU time is about its wall time).
#[test]
fn rr_client_busy_poll_spins_and_completes() {
    let port = support::free_port().to_string();
    let server = Proc::spawn(
        linerate()
            .args(["rr", "server", "-B", "127.0.0.1", "-p", &port])
            .args(["-t", "3", "--steering", "hash", "--busy-poll", "50"]),
    );
    std::thread::sleep(Duration::from_millis(300));
    let run = |busy: bool| {
        let mut cmd = linerate();
        // Open loop at 1k/s: a sleeping client is nearly idle.
        cmd.args(["rr", "client", "127.0.0.1", "-p", &port, "-t", "0.6", "-J"])
            .args(["--pps", "1k"]);
        if busy {
            cmd.arg("--busy-poll");
        }
        // CPU time of the child, from the kernel's accounting (getrusage
        // of children via /usr/bin/time is not everywhere: use /proc).
        let child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
        let pid = child.id();
        std::thread::sleep(Duration::from_millis(450));
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let f: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let ticks: f64 = f.get(11).and_then(|x| x.parse().ok()).unwrap_or(0.0)
            + f.get(12).and_then(|x| x.parse().ok()).unwrap_or(0.0);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        (json(&out.stdout), ticks)
    };
    let (v, busy_ticks) = run(true);
    assert_eq!(v["busy_poll"], true, "{v}");
    assert_eq!(u(&v, "counts.completed"), 600, "{v}");
    assert_eq!(u(&v, "counts.lost"), 0, "{v}");
    let (w, calm_ticks) = run(false);
    assert_eq!(w["busy_poll"], false);
    assert_eq!(u(&w, "counts.completed"), 600, "{w}");
    // 0.45 s into the run (ticks of 10 ms): spinning used most of it
    // (45 ticks on an idle machine; other tests share the CPUs), sleeping
    // almost none (1-2).
    assert!(
        busy_ticks > 2.0 * calm_ticks + 5.0,
        "busy {busy_ticks} ticks vs {calm_ticks}"
    );
    drop(server);
}

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
    let s_out = server.wait(Duration::from_secs(10));
    assert!(
        s_out.status.success(),
        "{}",
        String::from_utf8_lossy(&s_out.stderr)
    );
    let s: Value = json(&s_out.stdout);
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
