//! Every iperf3 3.21 long option, in each of the forms getopt_long takes
//! (`--opt value`, `--opt=value`, its shortest unique abbreviation), read
//! by linerate as iperf3 3.21 reads it: each command line is given to
//! both, against a closed port, and each must end the same way: parsed
//! and trying to connect, printing help or version, or refused.

mod support;

use linerate_testkit::{iperf3_321, require_iperf3_321, should_skip};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{Proc, free_port, linerate};

/// iperf3 3.21's long options on Linux (its `longopts` table) and a value
/// for each that takes one (`None`: no value; `Some("=v")`: an optional
/// value, given only with `=`).
const OPTIONS: &[(&str, Option<&str>)] = &[
    ("port", Some("PORT")),
    ("format", Some("m")),
    ("interval", Some("1")),
    ("daemon", None),
    ("one-off", None),
    ("verbose", None),
    ("json", None),
    ("json-stream", None),
    ("json-stream-full-output", None),
    ("version", None),
    ("server", None),
    ("client", Some("127.0.0.1")),
    ("udp", None),
    ("bitrate", Some("10M")),
    ("bandwidth", Some("10M")),
    ("server-bitrate-limit", Some("10M")),
    ("server-max-duration", Some("5")),
    ("time", Some("1")),
    ("bytes", Some("1M")),
    ("blockcount", Some("10")),
    ("length", Some("1K")),
    ("parallel", Some("2")),
    ("reverse", None),
    ("bidir", None),
    ("window", Some("64K")),
    ("bind", Some("127.0.0.1")),
    ("bind-dev", Some("lo")),
    ("cport", Some("CPORT")),
    ("set-mss", Some("1000")),
    ("no-delay", None),
    ("version4", None),
    ("tos", Some("16")),
    ("dscp", Some("ef")),
    ("extra-data", Some("x")),
    ("zerocopy", None),
    ("omit", Some("1")),
    ("file", Some("/etc/hostname")),
    ("repeating-payload", None),
    ("timestamps", Some("=%T")),
    ("affinity", Some("0")),
    ("title", Some("t")),
    ("congestion", Some("cubic")),
    ("linux-congestion", Some("cubic")),
    ("pidfile", Some("DIR/pid")),
    ("logfile", Some("DIR/log")),
    ("forceflush", None),
    ("get-server-output", None),
    ("udp-counters-64bit", None),
    ("no-fq-socket-pacing", None),
    ("dont-fragment", None),
    ("skip-rx-copy", None),
    ("rsa-private-key-path", Some("/nonexistent")),
    ("authorized-users-path", Some("/nonexistent")),
    ("time-skew-threshold", Some("10")),
    ("fq-rate", Some("1G")),
    ("pacing-timer", Some("1000")),
    ("connect-timeout", Some("1000")),
    ("idle-timeout", Some("5")),
    ("rcv-timeout", Some("1000")),
    ("snd-timeout", Some("1000")),
    ("cntl-ka", Some("=10/2/3")),
    ("mptcp", None),
    ("gsro", None),
    ("debug", Some("=2")),
    ("help", None),
];

/// iperf3 3.21 options left out of [`OPTIONS`], and why.
const NOT_COMPARED: &[(&str, &str)] = &[
    (
        "version6",
        "with -c 127.0.0.1 both refuse, but iperf3 after a DNS lookup",
    ),
    (
        "flowlabel",
        "IPv6 only; tested in iperf3_flags.rs on the wire",
    ),
    ("username", "asks for a password; tested in iperf_auth.rs"),
    (
        "rsa-public-key-path",
        "needs --username; tested in iperf_auth.rs",
    ),
    (
        "use-pkcs1-padding",
        "needs the credentials; tested in iperf_auth.rs",
    ),
];

/// How a command line ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Parsed, and tried to connect (the port is closed).
    Connect,
    /// Printed help or the version, exit 0.
    Info,
    /// Refused the command line.
    Refused,
}

fn ending(mut cmd: Command, log: &Path) -> (Ending, String) {
    cmd.env("IPERF3_PASSWORD", "x").stdin(Stdio::null());
    let out = Proc::spawn(&mut cmd).wait(Duration::from_secs(10));
    let mut text = String::from_utf8_lossy(&out.stdout).to_string();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    text.push_str(&std::fs::read_to_string(log).unwrap_or_default());
    let e = if text.contains("unable to connect") {
        Ending::Connect
    } else if out.status.success() {
        Ending::Info
    } else {
        Ending::Refused
    };
    (e, text)
}

/// The shortest prefix of `name` that names it alone among iperf3's
/// options (getopt's rule), or `None` when only the full name does.
fn shortest_abbreviation(name: &str) -> Option<String> {
    let all: Vec<&str> = OPTIONS
        .iter()
        .map(|(n, _)| *n)
        .chain(NOT_COMPARED.iter().map(|(n, _)| *n))
        .collect();
    (1..name.len())
        .map(|k| &name[..k])
        .find(|p| {
            all.iter()
                .filter(|n| n.starts_with(p))
                .all(|n| *n == name || same_option(n, name))
        })
        .map(str::to_string)
}

/// iperf3's aliases: two names of one option.
fn same_option(a: &str, b: &str) -> bool {
    fn main(n: &str) -> &str {
        match n {
            "bandwidth" => "bitrate",
            "linux-congestion" => "congestion",
            _ => n,
        }
    }
    main(a) == main(b)
}

#[test]
fn every_iperf3_option_parses_as_iperf3_3_21_parses_it() {
    if should_skip(
        "every_iperf3_option_parses_as_iperf3_3_21_parses_it",
        &[require_iperf3_321()],
    ) {
        return;
    }
    let iperf3 = iperf3_321().unwrap();
    let closed = free_port().to_string();
    let cport = free_port().to_string();
    let mut differ = Vec::new();
    let mut compared = 0;
    for (name, value) in OPTIONS {
        let mut forms: Vec<Vec<String>> = Vec::new();
        let fill = |v: &str, dir: &Path| {
            v.replace("PORT", &closed)
                .replace("CPORT", &cport)
                .replace("DIR", &dir.display().to_string())
        };
        let dir = tempfile::tempdir().unwrap();
        match value {
            None => forms.push(vec![format!("--{name}")]),
            Some(v) if v.starts_with('=') => {
                forms.push(vec![format!("--{name}")]);
                forms.push(vec![format!("--{name}{v}")]);
            }
            Some(v) => {
                let v = fill(v, dir.path());
                forms.push(vec![format!("--{name}"), v.clone()]);
                forms.push(vec![format!("--{name}={v}")]);
            }
        }
        if let Some(ab) = shortest_abbreviation(name) {
            let mut f = forms[0].clone();
            f[0] = format!("--{ab}");
            forms.push(f);
        }
        for form in forms {
            let run = |prog: &Path, home: &Path| {
                let mut c = Command::new(prog);
                c.current_dir(home)
                    .args(["-c", "127.0.0.1", "-p", &closed])
                    .args(&form);
                ending(c, &dir.path().join("log"))
            };
            let _ = std::fs::remove_file(dir.path().join("log"));
            let _ = std::fs::remove_file(dir.path().join("pid"));
            let (theirs, their_text) = run(&iperf3, dir.path());
            let _ = std::fs::remove_file(dir.path().join("log"));
            let _ = std::fs::remove_file(dir.path().join("pid"));
            let bin = std::path::PathBuf::from(env!("CARGO_BIN_EXE_linerate"));
            let (ours, our_text) = run(&bin, dir.path());
            compared += 1;
            if theirs != ours {
                differ.push(format!(
                    "{form:?}: iperf3 3.21 {theirs:?} ({}), linerate {ours:?} ({})",
                    their_text.lines().next().unwrap_or(""),
                    our_text.lines().next().unwrap_or("")
                ));
            }
        }
    }
    assert!(compared > 150, "{compared} command lines compared");
    assert!(
        differ.is_empty(),
        "{} of {compared} command lines end differently:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

/// What getopt_long and iperf3 3.21 refuse, linerate refuses the same way.
#[test]
fn ambiguous_abbreviations_and_two_end_conditions_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--tim", "1"],
            "option '--tim' is ambiguous; possibilities: '--time' '--timestamps' '--time-skew-threshold'",
        ),
        (
            &["-n", "1M", "-t", "3"],
            "only one test end condition (-t, -n, -k) may be specified",
        ),
        (
            &["-k", "10", "-n", "1M"],
            "only one test end condition (-t, -n, -k) may be specified",
        ),
    ];
    for (args, needle) in cases {
        let out = linerate()
            .args(["-c", "127.0.0.1", "-p", "1"])
            .args(*args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// `-A 1/2` is CPU 1 to iperf3 (strtol stops at '/'): linerate takes it
/// the same and says what it ignored; `-A 1,2` asks the server for CPU 2.
#[test]
fn affinity_reads_as_iperf3_reads_it() {
    let out = linerate()
        .args(["-c", "127.0.0.1", "-p", "1", "-A", "1/2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unable to connect"), "{err}");
    assert_eq!(
        err.matches("-A 1/2: '/2' ignored").count(),
        1,
        "said once: {err}"
    );
    for bad in ["x", "2000", "1,x"] {
        let out = linerate()
            .args(["-c", "127.0.0.1", "-p", "1", "-A", bad])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "-A {bad}: {err}");
        assert!(
            err.contains("unable to set CPU affinity"),
            "-A {bad}: {err}"
        );
    }
}

/// Invoked as iperf3, `-v` starts with iperf3's own version line (tools
/// such as pScheduler parse it), and says it is linerate.
#[test]
fn the_version_reads_as_iperf3_3_21() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("iperf3");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_linerate"), &link).unwrap();
    for flag in ["-v", "--version"] {
        let out = Command::new(&link).arg(flag).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        let first = text.lines().next().unwrap_or("");
        assert!(
            first.starts_with("iperf 3.21 (") && first.contains("linerate"),
            "{text}"
        );
        assert!(
            text.lines().nth(1).unwrap_or("").starts_with("Linux "),
            "{text}"
        );
    }
}

/// `-t` takes fractions as every duration in linerate does: the client
/// ends the test on time (iperf3's parameters carry whole seconds, so the
/// server is told 2), against linerate's server and iperf3 3.21's.
#[test]
fn a_fractional_test_time_ends_on_time() {
    if should_skip(
        "a_fractional_test_time_ends_on_time",
        &[require_iperf3_321()],
    ) {
        return;
    }
    let iperf3 = iperf3_321().unwrap();
    for theirs in [false, true] {
        let port = free_port();
        let p = port.to_string();
        let srv = if theirs {
            Proc::spawn(Command::new(&iperf3).args(["-s", "-1", "-p", &p]))
        } else {
            Proc::spawn(linerate().args(["-s", "-1", "-p", &p]))
        };
        support::wait_listening(port);
        let t0 = std::time::Instant::now();
        let v = support::json_ok(linerate().args(["-c", "127.0.0.1", "-p", &p, "-t", "1.5", "-J"]));
        let took = t0.elapsed();
        let secs = v["end"]["sum_sent"]["seconds"].as_f64().unwrap();
        assert!(
            (1.45..1.6).contains(&secs),
            "iperf3 server {theirs}: {secs} s"
        );
        let ends: Vec<f64> = v["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["sum"]["end"].as_f64().unwrap())
            .collect();
        assert_eq!(ends.len(), 2, "{ends:?}");
        assert!((ends[1] - 1.5).abs() < 0.1, "{ends:?}");
        assert!(took < Duration::from_millis(2900), "took {took:?}");
        assert_eq!(
            v["start"]["test_start"]["duration"], 2,
            "told the server 2 s"
        );
        assert!(srv.wait(Duration::from_secs(10)).status.success());
    }
}
