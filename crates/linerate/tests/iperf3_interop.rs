//! Interoperability with Debian's iperf3 in both directions: an unmodified
//! iperf3 client against `linerate -s`, and `linerate -c` against an
//! unmodified iperf3 server. Both ends print JSON; the byte and packet
//! counts of the two ends must agree.

mod support;

use linerate_testkit::{require_program, should_skip};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;
use support::{Proc, free_port, json, linerate, u, wait_listening};

fn skip(test: &str) -> bool {
    should_skip(test, &[require_program("iperf3")])
}

fn iperf3() -> Command {
    Command::new("iperf3")
}

/// Runs `client_args` from `client` against a one-off `server`; returns
/// both JSON documents (client, server).
fn pair(server: &mut Command, client: &mut Command, client_args: &[&str]) -> (Value, Value) {
    let port = free_port().to_string();
    let srv = Proc::spawn(server.args(["-s", "-1", "-J", "-p", &port]));
    wait_listening(port.parse().unwrap());
    let cli = Proc::spawn(
        client
            .args(["-c", "127.0.0.1", "-p", &port, "-J"])
            .args(client_args),
    );
    let c = cli.wait(Duration::from_secs(40));
    let s = srv.wait(Duration::from_secs(20));
    let cj = json(&c.stdout);
    let sj = json(&s.stdout);
    assert!(c.status.success(), "client {client_args:?} failed: {cj}");
    assert!(cj.get("error").is_none(), "client error: {}", cj["error"]);
    assert!(sj.get("error").is_none(), "server error: {}", sj["error"]);
    (cj, sj)
}

/// The two ends agree on what crossed, per direction.
fn check(c: &Value, s: &Value, args: &[&str]) {
    check_within(c, s, args, 0);
}

/// [`check`] with `slack` bytes of tolerance between the two ends' counts:
/// iperf3 3.21 as a sender counts its last block in one place and not in
/// the other (its client's "sent" against its own server: received - sent
/// = 131072 in 3 of 4 runs; its server's document one block under what it
/// reported to the client, once in a few runs).
fn check_within(c: &Value, s: &Value, args: &[&str], slack: u64) {
    let udp = args.contains(&"-u");
    let rev = args.contains(&"-R");
    let bidir = args.contains(&"--bidir");
    let mut dirs = vec![("", rev)];
    if bidir {
        dirs = vec![("", false), ("_bidir_reverse", true)];
    }
    for (suffix, server_sends) in dirs {
        let sent = u(c, &format!("end.sum_sent{suffix}.bytes"));
        let received = u(c, &format!("end.sum_received{suffix}.bytes"));
        assert!(
            sent > 0 && received > 0,
            "{args:?}: nothing moved ({suffix})"
        );
        if args.contains(&"-O") {
            // The two ends start their omit timers at slightly different
            // moments, so bytes in flight may land on either side of it.
            assert!(
                received <= sent + sent / 20,
                "{args:?}: received {received} vs sent {sent}"
            );
        } else {
            assert!(
                received <= sent + slack,
                "{args:?}: received {received} > sent {sent}"
            );
        }
        let near = |a: u64, b: u64, what: &str| {
            assert!(
                a.abs_diff(b) <= slack,
                "{args:?} {what}: {a} vs {b} (slack {slack})"
            );
        };
        if server_sends {
            // The client's "sent" is the server's own count, from the results exchange.
            near(
                sent,
                u(s, &format!("end.sum_sent{suffix}.bytes")),
                "server-sent bytes",
            );
        } else {
            near(
                received,
                u(s, &format!("end.sum_received{suffix}.bytes")),
                "server-received bytes",
            );
        }
        if udp {
            let lost = u(c, &format!("end.sum_received{suffix}.lost_packets"));
            let packets = u(c, &format!("end.sum_received{suffix}.packets"));
            assert!(packets > 0, "{args:?}: no datagrams");
            assert!(
                lost * 100 <= packets,
                "{args:?}: lost {lost} of {packets} on loopback"
            );
        } else if args.contains(&"-n") && server_sends {
            // The client counts what it receives and stops at -n; the
            // server had more in flight by then.
            assert!(
                received >= 20 << 20,
                "{args:?}: only {received} bytes received"
            );
        } else if args.contains(&"-n") || args.contains(&"-k") {
            // Ended by amount: the client ends the test when it has sent
            // it (as iperf3 does); what is still in the socket buffers then
            // (2.6 MB of 39 MB seen on a loaded host) is not counted by an
            // iperf3 server. Exactness is tested in iperf_exact.rs.
            assert!(
                received * 100 >= sent * 75,
                "{args:?}: {received} of {sent} bytes arrived"
            );
        } else if !args.contains(&"--fq-rate") {
            // (Kernel pacing leaves bytes queued in the sender at the end.)
            assert!(
                received * 100 >= sent * 95,
                "{args:?}: {received} of {sent} bytes arrived"
            );
        }
    }
    // iperf3's own keys are where parsers look for them.
    let intervals = c["intervals"].as_array().expect("intervals");
    assert!(!intervals.is_empty(), "{args:?}: no intervals");
    for i in intervals {
        let sum: u64 = i["streams"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| !bidir || s["sender"] == i["sum"]["sender"])
            .map(|s| s["bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(
            sum,
            i["sum"]["bytes"].as_u64().unwrap(),
            "{args:?}: interval sum"
        );
    }
    let p = c["start"]["test_start"]["num_streams"].as_u64().unwrap();
    let want_p = args
        .iter()
        .position(|a| *a == "-P")
        .map_or(1, |i| args[i + 1].parse().unwrap());
    assert_eq!(p, want_p);
}

const CASES: &[&[&str]] = &[
    &["-t", "2"],
    &["-t", "2", "-R"],
    &["-t", "2", "--bidir"],
    &["-t", "2", "-P", "4"],
    &["-t", "3", "-O", "1"],
    &["-n", "20M"],
    &["-n", "20M", "-R"],
    &["-k", "300"],
    &["-u", "-t", "2", "-b", "20M"],
    &["-u", "-t", "2", "-b", "10M", "-R"],
    &["-u", "-t", "2", "-b", "5M", "--bidir", "-P", "2"],
    &["-u", "-t", "2", "-b", "5M", "-P", "4"],
    &["-u", "-t", "3", "-b", "2M", "-O", "1", "-R"],
    &[
        "-u",
        "-t",
        "2",
        "-l",
        "16",
        "-b",
        "1M",
        "--udp-counters-64bit",
    ],
    &["-u", "-t", "2", "-l", "1400", "-b", "10M/20"],
];

#[test]
fn iperf3_client_against_linerate_server() {
    if skip("iperf3_client_against_linerate_server") {
        return;
    }
    // (timed transfers: none beside it, or the bytes still in flight at
    // the end grow past the check's margin)
    let _one = linerate_testkit::measuring();
    for args in CASES {
        let (c, s) = pair(&mut linerate(), &mut iperf3(), args);
        check(&c, &s, args);
    }
}

#[test]
fn linerate_client_against_iperf3_server() {
    if skip("linerate_client_against_iperf3_server") {
        return;
    }
    // (timed transfers: none beside it, or the bytes still in flight at
    // the end grow past the check's margin)
    let _one = linerate_testkit::measuring();
    for args in CASES {
        let (c, s) = pair(&mut iperf3(), &mut linerate(), args);
        check(&c, &s, args);
    }
}

/// The same cases both ways against iperf3 3.21 (multi-threaded, GSO/GRO
/// by default where it has them).
#[test]
fn iperf3_3_21_both_ways() {
    if linerate_testkit::should_skip(
        "iperf3_3_21_both_ways",
        &[linerate_testkit::require_iperf3_321()],
    ) {
        return;
    }
    let i321 = linerate_testkit::iperf3_321().unwrap();
    let _one = linerate_testkit::measuring();
    // One block per stream: each of 3.21's sending threads may leave its
    // last block out of one count (-P 4 showed two blocks).
    let streams = |args: &[&str]| {
        let p = args
            .iter()
            .position(|a| *a == "-P")
            .map_or(1, |i| args[i + 1].parse::<u64>().unwrap());
        if args.contains(&"--bidir") { 2 * p } else { p }
    };
    for args in CASES {
        let (c, s) = pair(&mut linerate(), &mut Command::new(&i321), args);
        let block = c["start"]["test_start"]["blksize"].as_u64().unwrap_or(0);
        check_within(&c, &s, args, block * streams(args));
        let (c, s) = pair(&mut Command::new(&i321), &mut linerate(), args);
        let block = c["start"]["test_start"]["blksize"].as_u64().unwrap_or(0);
        check_within(&c, &s, args, block * streams(args));
    }
}

/// Every key path with the JSON type of its value (`.end.sum_sent.bytes:number`).

#[test]
fn json_has_every_key_iperf3_has() {
    if skip("json_has_every_key_iperf3_has") {
        return;
    }
    for args in [
        &["-t", "1"][..],
        &["-u", "-t", "1", "-b", "5M"],
        &["-t", "1", "--bidir"],
        &["-u", "-t", "1", "-R"],
    ] {
        let (theirs, _) = pair(&mut iperf3(), &mut iperf3(), args);
        let (ours, _) = pair(&mut iperf3(), &mut linerate(), args);
        let missing = support::missing_keys(&theirs, &ours);
        let mut b = BTreeSet::new();
        support::key_paths(&ours, "", &mut b);
        assert!(
            missing.is_empty(),
            "{args:?}: keys (with types) iperf3 has that linerate lacks or types differently: {missing:?}"
        );
        assert!(
            b.contains(".linerate.version:string"),
            "linerate's extras under their own key"
        );
        assert!(
            b.contains(".linerate.doctor.could_not_check:array"),
            "doctor summary attached"
        );
    }
}

#[test]
fn json_stream_emits_one_event_per_line() {
    if skip("json_stream_emits_one_event_per_line") {
        return;
    }
    let port = free_port().to_string();
    let srv = Proc::spawn(iperf3().args(["-s", "-1", "-p", &port]));
    wait_listening(port.parse().unwrap());
    let out =
        Proc::spawn(linerate().args(["-c", "127.0.0.1", "-p", &port, "-t", "2", "--json-stream"]))
            .wait(Duration::from_secs(20));
    drop(srv);
    let events: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(events.first().map(String::as_str), Some("start"));
    assert_eq!(events.last().map(String::as_str), Some("end"));
    assert!(
        events.iter().filter(|e| *e == "interval").count() >= 2,
        "{events:?}"
    );
}

const OPTION_CASES: &[&[&str]] = &[
    &[
        "-t", "1", "-w", "160K", "-M", "1200", "-N", "-S", "0x28", "-C", "cubic",
    ],
    &[
        "-t",
        "1",
        "-T",
        "t1",
        "--extra-data",
        "xd",
        "--get-server-output",
    ],
    &[
        "-u",
        "-t",
        "1",
        "-b",
        "5M",
        "--get-server-output",
        "--dscp",
        "af41",
        "--repeating-payload",
    ],
    &["-t", "1", "-l", "1K", "-Z", "--fq-rate", "100M"],
    &["-u", "-t", "1", "-b", "5M", "--dont-fragment", "-l", "1400"],
];

#[test]
fn options_are_carried_both_ways() {
    if skip("options_are_carried_both_ways") {
        return;
    }
    for args in OPTION_CASES {
        for (server, client) in [("linerate", "iperf3"), ("iperf3", "linerate")] {
            let mk = |p: &str| {
                if p == "linerate" {
                    linerate()
                } else {
                    iperf3()
                }
            };
            let (c, s) = pair(&mut mk(server), &mut mk(client), args);
            check(&c, &s, args);
            if args.contains(&"-T") {
                assert_eq!(c["title"], "t1", "{client} client title");
                assert_eq!(s["title"], "t1", "{server} server got the title");
                assert_eq!(s["extra_data"], "xd");
            }
            if args.contains(&"--get-server-output") {
                // The server runs with -J, so its whole document comes back.
                assert!(
                    c["server_output_json"]["start"].is_object(),
                    "{server}->{client}: {}",
                    c
                );
            }
            if args.contains(&"-S") {
                assert_eq!(s["start"]["test_start"]["tos"], 0x28, "{server} got TOS");
            }
        }
    }
}

#[test]
fn ipv6_cport_and_bind() {
    if skip("ipv6_cport_and_bind") {
        return;
    }
    let port = free_port().to_string();
    let srv = Proc::spawn(iperf3().args(["-s", "-1", "-J", "-p", &port]));
    wait_listening(port.parse().unwrap());
    let cport = free_port();
    let out = Proc::spawn(linerate().args([
        "-c",
        "::1",
        "-6",
        "-p",
        &port,
        "-t",
        "1",
        "-P",
        "2",
        "--cport",
        &cport.to_string(),
        "-B",
        "::1",
        "-J",
    ]))
    .wait(Duration::from_secs(20));
    let c = json(&out.stdout);
    assert!(c.get("error").is_none(), "{}", c["error"]);
    let conns = c["start"]["connected"].as_array().unwrap();
    let ports: Vec<u64> = conns
        .iter()
        .map(|x| x["local_port"].as_u64().unwrap())
        .collect();
    assert_eq!(ports, vec![u64::from(cport), u64::from(cport) + 1]);
    assert!(
        conns
            .iter()
            .all(|x| x["local_host"] == "::1" && x["remote_host"] == "::1")
    );
    let s = json(&srv.wait(Duration::from_secs(10)).stdout);
    assert_eq!(s["start"]["connected"].as_array().unwrap().len(), 2);
}

#[test]
fn a_link_named_iperf3_behaves_as_iperf3() {
    if skip("a_link_named_iperf3_behaves_as_iperf3") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("linerate-link-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("iperf3");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_linerate"), &link).unwrap();
    let port = free_port().to_string();
    let mut srv = Proc::spawn(Command::new(&link).args(["-s", "-1", "-p", &port, "-J"]));
    wait_listening(port.parse().unwrap());
    let client = || {
        Proc::spawn(iperf3().args(["-c", "127.0.0.1", "-p", &port, "-t", "1", "-J"]))
            .wait(Duration::from_secs(30))
    };
    let mut c = client();
    // Seen twice in CI on a loaded machine: the client refused right after
    // the port was seen listening. Once more while the server still runs
    // (it serves one test); the server's own output if it does not.
    if String::from_utf8_lossy(&c.stdout).contains("Connection refused") && srv.is_running() {
        std::thread::sleep(Duration::from_millis(500));
        c = client();
    }
    if !(c.status.success() && json(&c.stdout).get("error").is_none()) {
        let running = srv.is_running();
        let s = srv.wait(Duration::from_millis(10)).stdout;
        panic!(
            "the iperf3 client ({}): {}\n{}\nthe server (running: {running}): {}",
            c.status,
            String::from_utf8_lossy(&c.stdout),
            String::from_utf8_lossy(&c.stderr),
            String::from_utf8_lossy(&s)
        );
    }
    let s = json(&srv.wait(Duration::from_secs(10)).stdout);
    assert!(
        s["linerate"]["version"].is_string(),
        "served by linerate through the link"
    );
    let v = Command::new(&link).arg("-v").output().unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("iperf 3.21 (linerate "));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn logfile_and_human_output() {
    if skip("logfile_and_human_output") {
        return;
    }
    let port = free_port().to_string();
    let srv = Proc::spawn(iperf3().args(["-s", "-1", "-p", &port]));
    wait_listening(port.parse().unwrap());
    let log = std::env::temp_dir().join(format!("linerate-log-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let out = linerate()
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "2",
            "-i",
            "0.5",
            "-f",
            "m",
            "--logfile",
        ])
        .arg(&log)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty(), "--logfile takes all output");
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    drop(srv);
    assert!(text.contains("Connecting to host 127.0.0.1"), "{text}");
    let interval_lines = text
        .lines()
        .filter(|l| l.contains(" sec ") && !l.contains("sender") && !l.contains("receiver"))
        .count();
    assert!(interval_lines >= 4, "-i 0.5 over 2 s: {text}");
    assert!(
        text.contains("Mbits/sec") && !text.contains("Gbits/sec"),
        "-f m fixes the unit: {text}"
    );
    assert!(
        text.lines().any(|l| l.ends_with("sender"))
            && text.lines().any(|l| l.ends_with("receiver"))
    );
    assert!(text.contains("iperf Done."));
}

/// linerate's client -J has every key (with its type) iperf3 3.21's client
/// has, against the same 3.21 server: TCP, UDP, -R, --bidir.
#[test]
fn client_json_has_every_key_iperf3_3_21_has() {
    if linerate_testkit::should_skip(
        "client_json_has_every_key_iperf3_3_21_has",
        &[linerate_testkit::require_iperf3_321()],
    ) {
        return;
    }
    let i321 = linerate_testkit::iperf3_321().unwrap();
    for args in [
        &["-t", "1"][..],
        &["-u", "-t", "1", "-b", "5M"],
        &["-t", "1", "-R"],
        &["-t", "1", "--bidir"],
        &["-u", "-t", "1", "-b", "5M", "-R"],
    ] {
        let (theirs, _) = pair(&mut Command::new(&i321), &mut Command::new(&i321), args);
        let (ours, _) = pair(&mut Command::new(&i321), &mut linerate(), args);
        let missing = support::missing_keys(&theirs, &ours);
        assert!(
            missing.is_empty(),
            "{args:?}: keys (with types) iperf3 3.21 has that linerate's client lacks or types differently: {missing:?}"
        );
    }
}

/// A server that is not there: linerate's client still prints iperf3's
/// error document with -J (it printed nothing) and one error event with
/// --json-stream, and exits 2 (it could not run).
#[test]
fn an_unreachable_server_gets_iperf3s_error_document() {
    if skip("an_unreachable_server_gets_iperf3s_error_document") {
        return;
    }
    let port = free_port().to_string();
    let run = |c: &mut Command, extra: &str| {
        c.args(["-c", "127.0.0.1", "-p", &port, extra])
            .output()
            .unwrap()
    };
    let theirs = run(&mut iperf3(), "-J");
    let ours = run(&mut linerate(), "-J");
    // (iperf3 3.12 exits 0 here with -J, 3.21 exits 1; linerate exits 2,
    // as for every test that could not run.)
    assert_eq!(ours.status.code(), Some(2));
    let (t, o) = (json(&theirs.stdout), json(&ours.stdout));
    assert_eq!(support::missing_keys(&t, &o), Vec::<String>::new(), "{o}");
    assert!(
        o["error"].as_str().unwrap().contains("unable to connect"),
        "{o}"
    );
    let stream = run(&mut linerate(), "--json-stream");
    assert_eq!(stream.status.code(), Some(2));
    let lines: Vec<Value> = String::from_utf8_lossy(&stream.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["event"], "error");
}

/// `--json-stream` (and 3.21's `--json-stream-full-output`): against the
/// same iperf3 3.21 server, linerate's client emits the same events in the
/// same order as iperf3 3.21's, each with every key (and type) 3.21's has,
/// then the whole document with every key 3.21's has.
#[test]
fn json_stream_events_match_iperf3_3_21() {
    if linerate_testkit::should_skip(
        "json_stream_events_match_iperf3_3_21",
        &[linerate_testkit::require_iperf3_321()],
    ) {
        return;
    }
    let i321 = linerate_testkit::iperf3_321().unwrap();
    // (event names, events, the document after them)
    let run = |client: &mut Command, args: &[&str]| -> (Vec<String>, Vec<Value>, Value) {
        let port = free_port().to_string();
        let _srv = Proc::spawn(Command::new(&i321).args(["-s", "-1", "-p", &port]));
        wait_listening(port.parse().unwrap());
        let out = Proc::spawn(
            client
                .args(["-c", "127.0.0.1", "-p", &port, "--json-stream"])
                .args(["--json-stream-full-output"])
                .args(args),
        )
        .wait(Duration::from_secs(30));
        let text = String::from_utf8(out.stdout).unwrap();
        let at = text.find("\n{\n").map_or(text.len(), |i| i + 1);
        let (lines, doc) = text.split_at(at);
        let events: Vec<Value> = lines
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let names = events
            .iter()
            .map(|e| e["event"].as_str().unwrap_or("?").to_string())
            .collect();
        (
            names,
            events,
            serde_json::from_str(doc).unwrap_or(Value::Null),
        )
    };
    for args in [&["-t", "2"][..], &["-u", "-t", "2", "-b", "5M", "-R"]] {
        let (tn, te, td) = run(&mut Command::new(&i321), args);
        let (on, oe, od) = run(&mut linerate(), args);
        assert_eq!(on, tn, "{args:?}: event sequence");
        for (t, o) in te.iter().zip(&oe) {
            let missing = support::missing_keys(t, o);
            assert!(missing.is_empty(), "{args:?} {}: {missing:?}", t["event"]);
        }
        assert!(td.is_object(), "3.21 printed no document after its events");
        let missing = support::missing_keys(&td, &od);
        assert!(missing.is_empty(), "{args:?} full output: {missing:?}");
    }
}
