//! One command-line grammar: the same spelling means the same thing in
//! every subcommand, ambiguous rates are refused, a flag of the other side
//! is an error, and every error exits 2 with `linerate: error: …` (or
//! clap's usage error, also exit 2).

mod support;

use support::linerate;

/// The subcommands that run something, as argv prefixes.
const RUNNERS: [&[&str]; 7] = [
    &["blast"],
    &["sink"],
    &["fwd"],
    &["rr", "server"],
    &["rr", "client"],
    &["client"],
    &["server"],
];

/// Whether `flag` is one of the options `help` lists (not just named in
/// another option's text).
fn lists(help: &str, flag: &str) -> bool {
    // An option line starts with its spelling ("-p, --port <PORT>"), then
    // two spaces and the description.
    help.lines().any(|l| {
        let spec = l.trim_start().split("  ").next().unwrap_or("");
        l.starts_with(' ') && spec.split([',', ' ']).any(|w| w == flag)
    })
}

fn help(cmd: &[&str]) -> String {
    let out = linerate().args(cmd).arg("--help").output().unwrap();
    assert!(out.status.success(), "{cmd:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// Runs and expects failure with exit code 2 and `needle` on stderr.
fn fails(args: &[&str], needle: &str) {
    let out = linerate().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: wanted '{needle}' in: {err}"
    );
}

#[test]
fn every_runner_spells_the_shared_flags_alike() {
    for cmd in RUNNERS {
        let h = help(cmd);
        // A server runs until stopped: no -t (iperf3's server has none).
        if cmd != ["server"] {
            assert!(h.contains("-t, --time"), "{cmd:?} --help lacks -t:\n{h}");
        }
        for flag in [
            "-i, --interval",
            "-J, --json",
            "--json-stream",
            "--csv <FILE>",
            "--logfile <FILE>",
        ] {
            assert!(h.contains(flag), "{cmd:?} --help lacks '{flag}':\n{h}");
        }
    }
    // --duration stays as an alias where it was the spelling.
    for cmd in [&["blast"][..], &["sink"], &["fwd"]] {
        assert!(help(cmd).contains("duration"), "{cmd:?}");
    }
}

#[test]
fn cpu_lists_take_ranges_everywhere_and_bad_ones_are_refused() {
    for cmd in [
        &["blast", "--iface", "lo", "--dst-ip", "127.0.0.1"][..],
        &["sink", "--iface", "lo"],
        &["fwd", "--iface", "lo"],
        &["rr", "server"],
        &["rr", "client", "127.0.0.1"],
        &["doctor"],
    ] {
        let mut a = cmd.to_vec();
        a.extend([
            // doctor's --cpus is --cores too now (issue 43 item 10).
            "--cores", "3-1",
        ]);
        fails(&a, "runs backwards");
        let h = help(&cmd[..if cmd[0] == "rr" { 2 } else { 1 }]);
        assert!(h.contains("<CPUS>") || h.contains("<LIST>"), "{cmd:?}");
    }
    fails(
        &["client", "127.0.0.1", "--cores", "0-x"],
        "not a CPU number",
    );
}

#[test]
fn a_bare_rate_is_refused_as_ambiguous() {
    fails(
        &[
            "blast",
            "--iface",
            "lo",
            "--dst-ip",
            "127.0.0.1",
            "--src-ip",
            "127.0.0.1",
            "--rate",
            "10M",
        ],
        "--rate 10M is ambiguous: write --pps 10M (packets/s), --bitrate 10M (bits/s)",
    );
    fails(
        &["rr", "client", "127.0.0.1", "--rate", "10k"],
        "--rate 10k is ambiguous: write --pps 10k",
    );
    // --pps and --bitrate exclude each other.
    fails(
        &[
            "blast",
            "--iface",
            "lo",
            "--dst-ip",
            "127.0.0.1",
            "--pps",
            "1M",
            "-b",
            "1G",
        ],
        "cannot be used with",
    );
}

#[test]
fn dscp_names_are_understood_everywhere() {
    fails(
        &[
            "blast",
            "--iface",
            "lo",
            "--dst-ip",
            "127.0.0.1",
            "--dscp",
            "af51",
        ],
        "bad DSCP value 'af51'",
    );
    fails(
        &["client", "127.0.0.1", "--dscp", "af51"],
        "bad DSCP value 'af51'",
    );
    // ef parses on both (the client then fails to connect, not to parse).
    let out = linerate()
        .args(["client", "127.0.0.1", "-p", "9", "--dscp", "ef", "-t", "1"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("DSCP"));
}

#[test]
fn client_and_server_help_show_their_own_flags() {
    let c = help(&["client"]);
    let s = help(&["server"]);
    for f in [
        "--max-tests",
        "--server-max-duration",
        "--one-off",
        "--server-grace",
        "--daemon",
    ] {
        assert!(!lists(&c, f) && lists(&s, f), "{f}");
    }
    // Both sides have these (iperf3 3.21).
    for f in ["--rcv-timeout", "--control-timeout", "--bind-dev"] {
        assert!(lists(&c, f) && lists(&s, f), "{f}");
    }
    for f in [
        "--bytes",
        "--parallel",
        "--reverse",
        "--bidir",
        "--udp",
        "--bitrate",
    ] {
        assert!(lists(&c, f) && !lists(&s, f), "{f}");
    }
    for f in ["--port", "--json", "--csv", "--bind", "--cores"] {
        assert!(lists(&c, f) && lists(&s, f), "{f}");
    }
    assert!(!lists(&c, "--server") && !lists(&s, "--client"));
}

#[test]
fn a_flag_of_the_other_side_is_an_error() {
    fails(
        &["client", "127.0.0.1", "--max-tests", "2"],
        "some option you are trying to set is server only: --max-tests",
    );
    fails(
        &["-c", "127.0.0.1", "--server-max-duration", "5"],
        "server only: --server-max-duration",
    );
    fails(
        &["server", "-n", "20M"],
        "some option you are trying to set is client only: -n/--bytes",
    );
}

#[test]
fn errors_exit_2_with_one_prefix() {
    fails(&["sink", "--iface", "no-such-if0"], "linerate: error: ");
    fails(
        &["rr", "client", "127.0.0.1", "-i", "0.01"],
        "linerate: error: --interval",
    );
    fails(&["blast", "--iface", "lo"], "--dst-ip");
}

/// A mistyped interface is said as such, once, in every mode (not as a
/// missing address, a missing file, or a clean doctor report).
#[test]
fn a_mistyped_interface_is_named_once_everywhere() {
    let cases: [&[&str]; 6] = [
        &["doctor", "--iface", "nosuch0"],
        &["sink", "--iface", "nosuch0", "-t", "1"],
        &[
            "blast",
            "--iface",
            "nosuch0",
            "--dst-ip",
            "198.18.0.2",
            "-t",
            "1",
        ],
        &["fwd", "--iface", "nosuch0", "-t", "1"],
        &["fwd", "--iface", "lo", "--out-iface", "nosuch0", "-t", "1"],
        &[
            "rfc2544",
            "--tx-iface",
            "nosuch0",
            "--rx-iface",
            "lo",
            "--dst-ip",
            "198.18.0.2",
            "--src-ip",
            "198.18.0.1",
        ],
    ];
    for args in cases {
        let out = linerate().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.matches("no interface named nosuch0").count(),
            1,
            "{args:?}: {err}"
        );
    }
}

/// A test that could not run exits 2 (README: could not run), with the
/// cause said once: a refused connection here; a server that refuses
/// the test (busy, authentication) in iperf3_errors.rs and iperf_auth.rs.
#[test]
fn a_client_that_cannot_connect_exits_2() {
    let port = support::free_port().to_string();
    for json in [false, true] {
        let mut c = linerate();
        c.args(["-c", "127.0.0.1", "-p", &port, "-t", "1"]);
        if json {
            c.arg("-J");
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "-J {json}: {err}");
        if !json {
            assert_eq!(err.matches("Connection refused").count(), 1, "{err}");
        }
    }
}

/// One rule for rates: an option that takes either kind (`--rate`,
/// `--max-rate`) needs the unit; `--pps` and `-b` take a bare number.
#[test]
fn a_rate_of_either_kind_needs_its_unit_everywhere() {
    fails(
        &[
            "rfc2544",
            "--tx-iface",
            "lo",
            "--rx-iface",
            "lo",
            "--dst-ip",
            "198.18.0.2",
            "--src-ip",
            "198.18.0.1",
            "--max-rate",
            "100M",
        ],
        "--max-rate 100M is ambiguous: write the unit",
    );
}

/// `linerate --help` names iperf3's form (`-s`, `-c HOST`): a newcomer
/// from iperf3 finds it there, not only in the docs.
#[test]
fn the_top_help_names_iperf3s_command_line() {
    // As one line: clap wraps the text at the terminal's width.
    let h = help(&[]).split_whitespace().collect::<Vec<_>>().join(" ");
    for w in ["`linerate -s [FLAGS]`", "`linerate -c HOST [FLAGS]`"] {
        assert!(h.contains(w), "{w} not in:\n{h}");
    }
}

/// One spelling of each unit and flag across every command's help
/// (issue 43 item 10): each entry is a spelling no help may use and the
/// one used everywhere instead.
const SPELLINGS: &[(&str, &str)] = &[
    ("kpkt/s", "kpps"),
    ("pkt/s", "pps"),
    ("packets/sec", "pps"),
    ("Kpps", "kpps"),
    ("flow(s)", "flow / flows"),
    ("worker(s)", "worker / workers"),
    ("error -", "error:"),
    ("--cpus", "--cores"),
    ("--interface", "--iface"),
    ("--json-lines", "--json-stream"),
    ("--jsonstream", "--json-stream"),
    ("--out-iface", "--tx-iface"),
    ("--stream-cpus", "--cores"),
];

/// Every command's and subcommand's argv (from each help's "Commands:"
/// list, two levels down), the top level first.
fn every_command() -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = vec![Vec::new()];
    let mut i = 0;
    while i < out.len() {
        let cmd = out[i].clone();
        i += 1;
        if cmd.len() >= 2 {
            continue;
        }
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let h = help(&args);
        let Some((_, list)) = h.split_once("Commands:\n") else {
            continue;
        };
        // A command's line starts with two spaces and its name; a longer
        // indent continues the description above.
        for l in list
            .lines()
            .take_while(|l| l.starts_with("  "))
            .filter(|l| !l.starts_with("   "))
        {
            let name = l.split_whitespace().next().unwrap_or("");
            if !name.is_empty() && name != "help" {
                let mut sub = cmd.clone();
                sub.push(name.to_string());
                out.push(sub);
            }
        }
    }
    out
}

#[test]
fn every_commands_help_spells_units_and_flags_one_way() {
    let cmds = every_command();
    // The table is checked against something: the runners are all there.
    for want in [&["blast"][..], &["sink"], &["plot"], &["rr", "client"]] {
        assert!(
            cmds.iter().any(|c| c == want),
            "{want:?} not found in {cmds:?}"
        );
    }
    let mut wrong = Vec::new();
    for cmd in &cmds {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let h = help(&args);
        for (bad, good) in SPELLINGS {
            if h.contains(bad) {
                wrong.push(format!("{cmd:?} --help says {bad:?}: write {good:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Issue 43: an OS error says what to do about it, on a line of its own,
/// once (an address no interface has; a port another process holds; a
/// file that is not there).
#[test]
fn an_os_error_says_what_to_do() {
    let port = support::free_port().to_string();
    let cases: [(&[&str], &str); 2] = [
        (
            &["-s", "-B", "198.18.99.99", "-p", &port, "-1"],
            "what to do: no interface of this host",
        ),
        (
            &[
                "blast",
                "--iface",
                "lo",
                "--dst-ip",
                "127.0.0.1",
                "--pcap",
                "/nonexistent/x.pcap",
            ],
            "what to do: no such file or directory: check the path",
        ),
    ];
    for (args, fix) in cases {
        fails(args, fix);
        let out = linerate().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.matches("what to do:").count(), 1, "{err}");
    }
    // A client's run that could not connect (its error kept as text).
    let closed = support::free_port().to_string();
    let out = linerate()
        .args(["-c", "127.0.0.1", "-p", &closed, "-t", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Connection refused") && err.contains("what to do: nothing listens there"),
        "{err}"
    );
    // A port another process holds.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p = held.local_addr().unwrap().port().to_string();
    fails(
        &["-s", "-B", "127.0.0.1", "-p", &p, "-1"],
        "what to do: another process holds that address and port",
    );
}

/// Issue 43 item 10: one name for one thing. A second port is named by
/// its direction (`--tx-iface`, `--rx-iface`) beside a command's
/// `--iface`; the CPUs a command's workers are pinned to are `--cores`
/// (the client's streams too); a frame size is blast's `--size`, and
/// blast refuses iperf3's `-l` (a payload length) naming it. The older
/// spellings still work.
#[test]
fn one_name_for_one_thing_across_commands() {
    for (cmd, flag) in [
        (&["fwd"][..], "--tx-iface"),
        (&["blast"], "--rx-iface"),
        (&["rfc2544"], "--tx-iface"),
        (&["rfc2544"], "--rx-iface"),
        (&["client"], "--cores"),
        (&["blast"], "--cores"),
        (&["sink"], "--cores"),
        (&["fwd"], "--cores"),
    ] {
        assert!(lists(&help(cmd), flag), "{cmd:?} --help lacks {flag}");
    }
    assert!(
        help(&["rfc2544"]).contains("--iface"),
        "rfc2544 takes --iface too"
    );
    fails(
        &[
            "blast",
            "--iface",
            "lo",
            "--dst-ip",
            "127.0.0.1",
            "-l",
            "18",
        ],
        "give --size",
    );
    // The older spellings parse (a usage error would say the flag).
    for args in [
        &[
            "fwd",
            "--iface",
            "lo",
            "--out-iface",
            "no-such-if0",
            "-t",
            "1",
        ][..],
        &[
            "client",
            "127.0.0.1",
            "--stream-cpus",
            "0",
            "-p",
            "1",
            "-t",
            "1",
        ],
    ] {
        let out = linerate().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("unexpected argument"),
            "{args:?} no longer parses: {err}"
        );
    }
}
