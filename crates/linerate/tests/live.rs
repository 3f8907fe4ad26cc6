//! `--live` driven in a real terminal (tmux): the view shows figures that
//! change, `q` stops the run before its time, and the end report follows.
//! Client, blast+sink on the rig, and rr.

mod support;

use linerate_lab::Rig;
use linerate_testkit::{require_program, require_root, should_skip};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Proc, free_port, linerate};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// A tmux server of this test's own, killed at the end.
struct Tmux {
    socket: String,
    /// Every screen looked at, in order.
    history: std::cell::RefCell<Vec<String>>,
}

impl Tmux {
    fn new(name: &str) -> Tmux {
        Tmux {
            socket: format!("linerate-{name}-{}", std::process::id()),
            history: std::cell::RefCell::new(Vec::new()),
        }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    /// Runs `shell` in a 150x45 terminal; after it ends the pane stays
    /// (its last line says how it exited).
    fn run(&self, shell: &str) {
        let st = self
            .cmd()
            .args(["new-session", "-d", "-s", "t", "-x", "150", "-y", "45"])
            .arg(format!("{shell}; echo LIVE-EXIT $?; sleep 60"))
            .status()
            .unwrap();
        assert!(st.success());
    }

    fn screen(&self) -> String {
        let o = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "t"])
            .output()
            .unwrap();
        let s = String::from_utf8_lossy(&o.stdout).to_string();
        self.history.borrow_mut().push(s.clone());
        s
    }

    fn keys(&self, k: &str) {
        self.cmd()
            .args(["send-keys", "-t", "t", k])
            .status()
            .unwrap();
    }

    /// Waits for `want` on the screen; the screen.
    fn wait_for(&self, want: &str, limit: Duration) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(want) || t0.elapsed() > limit {
                return s;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

/// Drives one live run: the view comes up with `header`, its screen
/// changes between two looks, `q` stops it early, and `end` (a line of the
/// end report) follows with exit status 0.
fn drive(t: &Tmux, header: &str, end: &str, started: Instant, planned: Duration) -> String {
    let first = t.wait_for(header, Duration::from_secs(15));
    assert!(first.contains(header), "no live view:\n{first}");
    assert!(first.contains("q or Ctrl-C"), "{first}");
    std::thread::sleep(Duration::from_millis(2500));
    let second = t.screen();
    assert!(second.contains(header), "{second}");
    assert_ne!(first, second, "the view did not change in 2.5 s");
    assert!(second.contains("sum "), "no totals row:\n{second}");
    t.keys("q");
    let last = t.wait_for("LIVE-EXIT", Duration::from_secs(15));
    assert!(
        started.elapsed() < planned,
        "q did not stop the run:\n{last}"
    );
    assert!(last.contains("LIVE-EXIT 0"), "{last}");
    assert!(last.contains(end), "no end report ({end:?}):\n{last}");
    last
}

#[test]
fn a_live_client_changes_stops_on_q_and_reports() {
    if should_skip(
        "a_live_client_changes_stops_on_q_and_reports",
        &[require_program("tmux")],
    ) {
        return;
    }
    let (_srv, port) = support::server(&[]);
    let t = Tmux::new("client");
    let started = Instant::now();
    t.run(&format!(
        "{BIN} -c 127.0.0.1 -p {port} -t 30 -P 2 -b 100M --live"
    ));
    let last = drive(
        &t,
        "linerate client",
        "receiver",
        started,
        Duration::from_secs(25),
    );
    // The end report is the client's own summary.
    assert!(last.contains("sender"), "{last}");
    // The view named the streams as the report does ([  5] is stream 5).
    let seen: std::collections::BTreeSet<String> = t
        .history
        .borrow()
        .iter()
        .flat_map(|s| s.lines().map(str::to_string).collect::<Vec<_>>())
        .filter_map(|l| {
            let rest = l.split("stream ").nth(1)?;
            Some(rest.split_whitespace().next()?.to_string())
        })
        .collect();
    let reported: std::collections::BTreeSet<String> = last
        .lines()
        .filter(|l| l.contains("sender") || l.contains("receiver"))
        .filter_map(|l| {
            l.strip_prefix('[')?
                .split(']')
                .next()
                .map(|i| i.trim().to_string())
        })
        .filter(|i| i.parse::<u32>().is_ok())
        .collect();
    assert!(!seen.is_empty(), "no stream rows seen in the view");
    assert_eq!(seen, reported, "ids in the view vs the report:\n{last}");
}

#[test]
fn live_rr_changes_stops_on_q_and_reports() {
    if should_skip(
        "live_rr_changes_stops_on_q_and_reports",
        &[require_program("tmux")],
    ) {
        return;
    }
    let port = free_port().to_string();
    let _srv = Proc::spawn(linerate().args(["rr", "server", "-p", &port, "-t", "40"]));
    std::thread::sleep(Duration::from_millis(500));
    live_rr("rr", &port, "");
}

/// rr over TCP in the live view, persistent connections and a connection
/// per transaction: the end report has the connections' line.
#[test]
fn live_rr_over_tcp_changes_stops_on_q_and_reports() {
    if should_skip(
        "live_rr_over_tcp_changes_stops_on_q_and_reports",
        &[require_program("tmux")],
    ) {
        return;
    }
    let (_srv, port) = support::rr_tcp_server(&["-t", "60"]);
    for (name, extra) in [
        ("rr-tcp", "--tcp --flows 8"),
        ("rr-crr", "--tcp --connect-per-transaction --flows 8"),
    ] {
        let last = live_rr(name, &port.to_string(), extra);
        assert!(last.contains("connections: "), "{last}");
        assert!(last.contains(" 0 connect errors"), "{last}");
    }
}

/// An rr client to `port` with `extra` flags in the live view (tmux
/// server `name`), stopped by q; the screen at the end.
fn live_rr(name: &str, port: &str, extra: &str) -> String {
    let t = Tmux::new(name);
    let started = Instant::now();
    t.run(&format!(
        "{BIN} rr client 127.0.0.1 -p {port} -t 30 {extra} --live"
    ));
    let last = drive(
        &t,
        "linerate rr_client",
        "transactions",
        started,
        Duration::from_secs(25),
    );
    assert!(last.contains("latency (us"), "{last}");
    last
}

#[test]
fn live_sink_on_the_rig_changes_stops_on_q_and_reports() {
    if should_skip(
        "live_sink_on_the_rig_changes_stops_on_q_and_reports",
        &[
            require_program("tmux"),
            require_root(),
            require_program("ip"),
        ],
    ) {
        return;
    }
    let rig = Rig::pair().unwrap();
    let t = Tmux::new("sink");
    let started = Instant::now();
    let ns = &rig.namespaces()[1];
    t.run(&format!(
        "ip netns exec {ns} {BIN} sink --iface veth0 --backend af_packet --duration 30 --live"
    ));
    let up = t.wait_for("linerate sink", Duration::from_secs(15));
    assert!(up.contains("linerate sink"), "{up}");
    // The sink's notice, written to stderr under the view, is shown on
    // the view's own line, not over the screen.
    let up = t.wait_for("stderr: linerate: sink receiving", Duration::from_secs(5));
    for l in up.lines().filter(|l| l.contains("sink receiving on")) {
        assert!(
            l.starts_with("stderr: linerate: sink receiving on veth0"),
            "torn:\n{up}"
        );
    }
    assert!(
        up.starts_with('┌'),
        "the view's first line is its box:\n{up}"
    );
    // Traffic while the view is up: 12 s at 1 kpps.
    let mac = rig.host(1).mac.clone();
    let blaster = std::thread::spawn(move || {
        Command::new("ip")
            .args(["netns", "exec"])
            .arg(rig.namespaces()[0].clone())
            .arg(BIN)
            .args([
                "blast",
                "--iface",
                "veth0",
                "--dst-mac",
                &mac,
                "--dst-ip",
                "198.18.0.2",
            ])
            .args(["--count", "12000", "--pps", "1000"])
            .output()
            .unwrap();
        rig
    });
    std::thread::sleep(Duration::from_millis(1500));
    let last = drive(
        &t,
        "linerate sink",
        "probe frames",
        started,
        Duration::from_secs(25),
    );
    assert!(last.contains("received "), "{last}");
    // Given back to the terminal when the view closed.
    assert!(
        last.lines()
            .any(|l| l.starts_with("linerate: sink receiving on veth0")),
        "{last}"
    );
    let _rig = blaster.join().unwrap();
}

/// Without a terminal, `--live` says so and the run prints its usual
/// interval lines and report.
#[test]
fn live_without_a_terminal_falls_back_to_interval_lines() {
    let (_srv, port) = support::server(&[]);
    let o = linerate()
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "2",
            "--live",
        ])
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{err}");
    assert!(err.contains("--live needs a terminal"), "{err}");
    assert!(
        out.contains("0.00-1.00") && out.contains("receiver"),
        "{out}"
    );
}

/// The multi-test server's view stays up from test to test (each test's
/// rows while it runs), q stops the server, and the last test's report
/// follows.
#[test]
fn a_live_server_follows_its_tests_and_stops_on_q() {
    if should_skip(
        "a_live_server_follows_its_tests_and_stops_on_q",
        &[require_program("tmux")],
    ) {
        return;
    }
    let port = free_port();
    let t = Tmux::new("server");
    t.run(&format!("{BIN} -s -p {port} --live"));
    let up = t.wait_for("q or Ctrl-C", Duration::from_secs(15));
    assert!(up.contains("q or Ctrl-C"), "{up}");
    support::wait_listening(port);
    for _ in 0..2 {
        let c = linerate()
            .args([
                "-c",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-t",
                "3",
                "-b",
                "50M",
                "-J",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let during = t.wait_for("sum ", Duration::from_secs(10));
        assert!(
            during.contains("linerate server") && during.contains("sum "),
            "{during}"
        );
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        let after = t.wait_for("waiting for the next", Duration::from_secs(10));
        assert!(after.contains("waiting for the next"), "{after}");
    }
    t.keys("q");
    let last = t.wait_for("LIVE-EXIT", Duration::from_secs(15));
    assert!(last.contains("LIVE-EXIT 0"), "{last}");
    assert!(last.contains("receiver"), "the last test's report: {last}");
}
