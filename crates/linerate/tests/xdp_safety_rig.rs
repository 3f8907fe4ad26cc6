//! On a real interface AF_XDP must take only linerate's frames: while an
//! af_xdp sink or fwd runs on host 1, ping and a TCP test across the link
//! keep working (16 of 30 pings were lost before), and the sink still
//! counts every probe. `--take-queue` takes the whole queue, and then ping
//! is lost: the check can fail.

mod support;

use linerate_lab::Rig;
use linerate_testkit::{require_program, require_root, should_skip};
use std::io::BufRead;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

fn skip(test: &str) -> bool {
    should_skip(
        test,
        &[
            require_root(),
            require_program("ip"),
            require_program("ping"),
            require_program("python3"),
        ],
    )
}

/// Starts `cmd` and waits until its stderr says it is receiving (sink) or
/// 1.5 s passed (fwd says nothing when ready).
fn start(cmd: &mut Command, ready: Option<&str>) -> Child {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    match ready {
        Some(prefix) => {
            let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
            loop {
                let mut line = String::new();
                if err.read_line(&mut line).unwrap_or(0) == 0 || line.starts_with(prefix) {
                    break;
                }
            }
            // Keep draining stderr so the child never blocks on it.
            std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        }
        None => std::thread::sleep(Duration::from_millis(1500)),
    }
    child
}

/// Pings host 1 from host 0 `n` times, 100 ms apart; how many came back.
fn pings_answered(rig: &Rig, n: u32) -> u32 {
    let out = rig
        .command(0, "ping")
        .args(["-n", "-q", "-c", &n.to_string(), "-i", "0.1", "-W", "1"])
        .arg(rig.host(1).ipv4.to_string())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            let (_, rest) = l.split_once(" packets transmitted, ")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no ping summary: {text}"))
}

/// A 1 s TCP test from host 0 to a linerate server on host 1.
fn tcp_test_passes(rig: &Rig) -> bool {
    let port = support::free_port().to_string();
    let mut srv = rig.command(1, BIN);
    srv.args(["-s", "-1", "-p", &port]);
    let srv = support::Proc::spawn(&mut srv);
    std::thread::sleep(Duration::from_millis(500));
    let out = rig
        .command(0, BIN)
        .args([
            "-c",
            &rig.host(1).ipv4.to_string(),
            "-p",
            &port,
            "-t",
            "1",
            "-J",
        ])
        .args(["--connect-timeout", "2000", "--control-timeout", "3000"])
        .output()
        .unwrap();
    drop(srv);
    let v = support::json(&out.stdout);
    out.status.success() && v.get("error").is_none()
}

/// A UDP echo service on host 1 (port 5353, python3), for as long as the
/// returned child lives.
fn udp_service(rig: &Rig) -> support::Proc {
    let script = "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('0.0.0.0',5353))\nwhile True:\n d,a=s.recvfrom(2048)\n s.sendto(d,a)\n";
    let p = support::Proc::spawn(rig.command(1, "python3").args(["-c", script]));
    std::thread::sleep(Duration::from_millis(500));
    p
}

/// Sends `n` queries to host 1's UDP service from host 0, 100 ms apart;
/// how many were answered.
fn udp_queries_answered(rig: &Rig, n: u32) -> u32 {
    let script = format!(
        "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.settimeout(0.3)\nok=0\nfor i in range({n}):\n s.sendto(b'query %d' % i,('{}',5353))\n try:\n  d,_=s.recvfrom(2048)\n  ok+=d==b'query %d' % i\n except OSError:\n  pass\nprint(ok)\n",
        rig.host(1).ipv4
    );
    let out = rig
        .command(0, "python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)))
}

fn finish(child: Child) -> Output {
    child.wait_with_output().unwrap()
}

#[test]
fn ping_and_tcp_survive_an_af_xdp_sink_and_fwd() {
    if skip("ping_and_tcp_survive_an_af_xdp_sink_and_fwd") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let _service = udp_service(&rig);
    assert_eq!(udp_queries_answered(&rig, 10), 10, "the UDP service alone");
    // Sink: ping, TCP and other UDP pass to the kernel, the probes are
    // counted.
    let sink = start(
        rig.command(1, BIN)
            .args(["sink", "--iface", "veth0", "--backend", "af_xdp", "--json"])
            .args(["--duration", "6"]),
        Some("linerate: sink receiving on"),
    );
    assert_eq!(pings_answered(&rig, 20), 20, "pings during an af_xdp sink");
    assert_eq!(
        udp_queries_answered(&rig, 10),
        10,
        "a UDP service during an af_xdp sink"
    );
    assert!(tcp_test_passes(&rig), "TCP during an af_xdp sink");
    let blast = rig
        .command(0, BIN)
        .args(["blast", "--iface", "veth0", "--dst-mac", &rig.host(1).mac])
        .args(["--dst-ip", &rig.host(1).ipv4.to_string()])
        .args(["--count", "5000", "--pps", "50k"])
        .output()
        .unwrap();
    assert!(
        blast.status.success(),
        "{}",
        String::from_utf8_lossy(&blast.stderr)
    );
    let s = finish(sink);
    assert!(
        s.status.success(),
        "sink: {}",
        String::from_utf8_lossy(&s.stderr)
    );
    let v = support::json(&s.stdout);
    assert_eq!(v["packets"], 5000, "the sink still takes the probes: {v}");

    // fwd: the same.
    let fwd = start(
        rig.command(1, BIN)
            .args(["fwd", "--iface", "veth0", "--backend", "af_xdp", "--json"])
            .args(["--duration", "5"]),
        None,
    );
    assert_eq!(pings_answered(&rig, 20), 20, "pings during an af_xdp fwd");
    assert_eq!(
        udp_queries_answered(&rig, 10),
        10,
        "a UDP service during an af_xdp fwd"
    );
    assert!(tcp_test_passes(&rig), "TCP during an af_xdp fwd");
    let f = finish(fwd);
    assert!(
        f.status.success(),
        "fwd: {}",
        String::from_utf8_lossy(&f.stderr)
    );

    // --take-queue takes ping too: the check above can fail.
    let sink = start(
        rig.command(1, BIN)
            .args([
                "sink",
                "--iface",
                "veth0",
                "--backend",
                "af_xdp",
                "--take-queue",
            ])
            .args(["--duration", "3"]),
        Some("linerate: sink receiving on"),
    );
    let answered = pings_answered(&rig, 10);
    assert!(
        answered <= 2,
        "{answered} of 10 pings answered with --take-queue"
    );
    let _ = finish(sink);
}
