//! UDP rr across the rig's namespaces: IPv4 and IPv6 with both sides'
//! counts, no amplification, the server's recipe switches, busy polling.

use crate::support;
use crate::support::{Proc, json, json_of, linerate, u};
use linerate_lab::Rig;
use linerate_testkit::{require_program, require_root, should_skip};
use serde_json::Value;
use std::time::{Duration, Instant};

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

/// A `/proc` file as the rig host's namespace has it.
fn proc_text(rig: &Rig, host: usize, file: &str) -> String {
    let out = rig.command(host, "cat").arg(file).output().unwrap();
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Packets the IP layer of the rig host's namespace received, a GSO
/// packet counted as its segments (the ECN counters of `/proc/net/netstat`
/// `IpExt`, or `/proc/net/snmp6` `Ip6In*Pkts`).
fn ip_received(rig: &Rig, host: usize, v6: bool) -> u64 {
    let file = if v6 {
        "/proc/net/snmp6"
    } else {
        "/proc/net/netstat"
    };
    let text = proc_text(rig, host, file);
    let keys = ["InNoECTPkts", "InECT1Pkts", "InECT0Pkts", "InCEPkts"];
    if v6 {
        let value = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("Ip6{k}")))
                .map(|v| v.trim().parse::<u64>().unwrap())
        };
        return keys.iter().map(|k| value(k).unwrap()).sum();
    }
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("IpExt:")).collect();
    let (names, values) = (rows[0].split_whitespace(), rows[1].split_whitespace());
    names
        .zip(values)
        .filter(|(n, _)| keys.contains(n))
        .map(|(_, v)| v.parse::<u64>().unwrap())
        .sum()
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
    let ip_before = ip_received(&rig, 1, v6);
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
    let s = json_of(server, Duration::from_secs(10));
    let after = rig.stats(1).unwrap();
    let ip_in = ip_received(&rig, 1, v6) - ip_before;

    let sent = u(&c, "counts.sent");
    assert!(u(&c, "counts.completed") > 1000, "{c}");
    assert_eq!(sent, u(&c, "counts.completed") + u(&c, "counts.lost"));
    // The server answered exactly what the client sent, and it crossed
    // the veth: a frame for each request, or for each batch of them the
    // client sent as one GSO packet (at most 64 requests in one); the
    // server's IP layer counts a batch as its requests: exactly what was
    // sent, beside the few packets of the rig's own (neighbour discovery).
    assert_eq!(u(&s, "counts.requests"), sent, "{s}");
    assert_eq!(u(&s, "counts.answered"), sent);
    assert_eq!(u(&s, "counts.bytes_out"), sent * 300);
    assert!(after.rx_packets - before.rx_packets >= sent.div_ceil(64));
    assert!(
        (sent..sent + 20).contains(&ip_in),
        "{ip_in} IP packets for {sent} requests"
    );
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

/// UDP sockets in the rig host's namespace connected to a peer (not the
/// listening ones): `ss` rows in state ESTAB on `port`.
fn connected_udp(rig: &Rig, host: usize, port: u16) -> usize {
    let out = rig
        .command(host, "ss")
        .args(["-Huan", "state", "established", &format!("sport = :{port}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// A spinning server answers a ping-pong client across the rig on a socket
/// connected to it (found by the kernel's early demultiplexing, with its
/// route cached): the socket is there while the client runs, every request
/// after the first one or two comes by it, and each is answered once;
/// with `--client-sockets 0` there is none. IPv4 and IPv6.
#[test]
fn a_spinning_server_answers_its_client_on_a_connected_socket() {
    if should_skip(
        "a_spinning_server_answers_its_client_on_a_connected_socket",
        &[require_root(), require_program("ip"), require_program("ss")],
    ) {
        return;
    }
    let rig = Rig::pair().unwrap();
    for (v6, room) in [(false, None), (true, None), (false, Some("0"))] {
        let server_ip = if v6 {
            rig.host(1).ipv6.to_string()
        } else {
            rig.host(1).ipv4.to_string()
        };
        let port = support::free_port();
        let mut cmd = rig.command(1, env!("CARGO_BIN_EXE_linerate"));
        cmd.args(["rr", "server", "-B", &server_ip, "-p", &port.to_string()])
            .args(["--cores", "1", "--spin", "-t", "2.5", "-i", "0", "--json"]);
        if let Some(n) = room {
            cmd.args(["--client-sockets", n]);
        }
        let server = Proc::spawn(&mut cmd);
        wait_udp(&rig, 1, port);
        let client = Proc::spawn(
            rig.command(0, env!("CARGO_BIN_EXE_linerate"))
                .args(["rr", "client", &server_ip, "-p", &port.to_string()])
                .args([
                    "--busy-poll",
                    "--cores",
                    "0",
                    "-t",
                    "1",
                    "-i",
                    "0",
                    "--json",
                ]),
        );
        std::thread::sleep(Duration::from_millis(500));
        let connected = connected_udp(&rig, 1, port);
        let c = json_of(client, Duration::from_secs(10));
        let s = json_of(server, Duration::from_secs(10));
        let sent = u(&c, "counts.sent");
        assert!(sent > 1000, "{c}");
        assert_eq!(u(&c, "counts.completed"), sent, "{c}");
        assert_eq!(u(&s, "counts.requests"), sent, "{s}");
        assert_eq!(u(&s, "counts.answered"), sent, "{s}");
        let on = u(&s, "counts.requests_on_client_sockets");
        if room.is_none() {
            assert_eq!(connected, 1, "v6 {v6}: one socket connected to the client");
            assert_eq!(u(&s, "counts.client_sockets"), 1, "{s}");
            assert!(
                (sent - 2..sent).contains(&on),
                "v6 {v6}: {on} of {sent}: {s}"
            );
            assert_eq!(s["recipe"]["client_sockets"], 16, "{s}");
        } else {
            assert_eq!(connected, 0);
            assert_eq!((u(&s, "counts.client_sockets"), on), (0, 0), "{s}");
            assert_eq!(s["recipe"]["client_sockets"], 0, "{s}");
        }
    }
}

/// epoll instances a process holds (`/proc/PID/fd` links to
/// `anon_inode:[eventpoll]`).
fn epoll_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| l.to_string_lossy() == "anon_inode:[eventpoll]")
                .count()
        })
        .unwrap_or(0)
}

/// The rr client registers its flows in an epoll set only where it waits
/// there (several flows, sleeping): spinning (`--busy-poll`) or waiting in
/// the receive itself (one flow, closed loop) it holds none, so the kernel
/// runs no epoll callback for each of its datagrams.
#[test]
fn rr_client_registers_in_epoll_only_where_it_waits_there() {
    let port = support::free_port().to_string();
    let server = Proc::spawn(
        linerate()
            .args(["rr", "server", "-B", "127.0.0.1", "-p", &port])
            .args(["-t", "6", "--steering", "hash", "--cores", "0"]),
    );
    std::thread::sleep(Duration::from_millis(300));
    for (extra, want) in [
        (&["--busy-poll", "--flows", "4"][..], 0),
        (&[][..], 0),
        (&["--flows", "4"][..], 1),
    ] {
        let mut cmd = linerate();
        cmd.args(["rr", "client", "127.0.0.1", "-p", &port, "-t", "1", "-J"])
            .args(["--cores", "0"])
            .args(extra);
        let child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let held = epoll_fds(child.id());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let v = json(&out.stdout);
        assert!(u(&v, "counts.completed") > 100, "{v}");
        assert_eq!(held, want, "{extra:?}: epoll instances held");
    }
    drop(server);
}

/// UDP datagrams the kernel's UDP layer delivered in the rig host's
/// namespace (`/proc/net/snmp` `Udp: InDatagrams`, or `Udp6InDatagrams`).
fn udp_delivered(rig: &Rig, host: usize, v6: bool) -> u64 {
    let file = if v6 {
        "/proc/net/snmp6"
    } else {
        "/proc/net/snmp"
    };
    let text = proc_text(rig, host, file);
    if v6 {
        let line = text.lines().find(|l| l.starts_with("Udp6InDatagrams"));
        return line
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap();
    }
    let mut udp = text.lines().filter(|l| l.starts_with("Udp: "));
    let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|n| n == "InDatagrams")
        .unwrap();
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// `rr server --af-xdp`: every request is answered from the interface's
/// AF_XDP rings, none reaches the kernel's UDP layer, the counts of both
/// sides agree exactly (the client's kernel took every answer: its
/// checksums are right), an answer shorter than its request has the size
/// asked, and the rest of the interface's traffic (ping) still reaches
/// the kernel. IPv4 and IPv6.
#[test]
fn an_af_xdp_server_answers_from_the_interfaces_rings() {
    if should_skip(
        "an_af_xdp_server_answers_from_the_interfaces_rings",
        &[
            require_root(),
            require_program("ip"),
            require_program("ping"),
        ],
    ) {
        return;
    }
    let rig = Rig::pair().unwrap();
    for (v6, request, response) in [(false, "100", Some("40")), (true, "64", None)] {
        let host = rig.host(1);
        let server_ip = if v6 {
            host.ipv6.to_string()
        } else {
            host.ipv4.to_string()
        };
        let port = support::free_port();
        let server = Proc::spawn(
            rig.command(1, env!("CARGO_BIN_EXE_linerate"))
                .args([
                    "rr",
                    "server",
                    "-p",
                    &port.to_string(),
                    "--af-xdp",
                    &host.iface,
                ])
                .args(["--cores", "1", "-t", "3", "-i", "0", "--json"]),
        );
        // The program is attached before the port is held.
        wait_udp(&rig, 1, port);
        let udp_before = udp_delivered(&rig, 1, v6);
        let mut cmd = rig.command(0, env!("CARGO_BIN_EXE_linerate"));
        cmd.args([
            "rr",
            "client",
            &server_ip,
            "-p",
            &port.to_string(),
            "-l",
            request,
        ])
        .args(["--outstanding", "4", "--flows", "2", "--cores", "0"])
        .args(["-t", "1", "-i", "0", "--json"]);
        if let Some(r) = response {
            cmd.args(["--response-size", r]);
        }
        let client = Proc::spawn(&mut cmd);
        let ping = rig
            .command(0, "ping")
            .args(["-c", "2", "-i", "0.2", "-W", "1", &server_ip])
            .output()
            .unwrap();
        assert!(
            ping.status.success(),
            "v6 {v6}: ping got no answer: {ping:?}"
        );
        let c = json_of(client, Duration::from_secs(10));
        let udp_after = udp_delivered(&rig, 1, v6);
        let s = json_of(server, Duration::from_secs(10));
        let sent = u(&c, "counts.sent");
        assert!(sent > 1000, "{c}");
        assert_eq!(u(&c, "counts.completed"), sent, "{c}");
        assert_eq!(u(&c, "counts.lost"), 0, "{c}");
        assert_eq!(u(&s, "counts.requests"), sent, "{s}");
        assert_eq!(u(&s, "counts.answered"), sent, "{s}");
        assert_eq!(u(&s, "counts.malformed"), 0, "{s}");
        let (asked, answer) = (
            request.parse::<u64>().unwrap(),
            response.map_or(0, |r| r.parse().unwrap()),
        );
        assert_eq!(u(&s, "counts.bytes_in"), sent * asked, "{s}");
        let out = if answer == 0 { asked } else { answer };
        assert_eq!(u(&s, "counts.bytes_out"), sent * out, "{s}");
        assert_eq!(s["recipe"]["af_xdp"], host.iface.as_str(), "{s}");
        assert!(
            udp_after - udp_before < 10,
            "v6 {v6}: the kernel's UDP delivered {} datagrams while the server answered {sent}",
            udp_after - udp_before
        );
    }
}
