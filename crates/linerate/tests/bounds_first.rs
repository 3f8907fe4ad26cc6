//! Every command checks its bounds before it takes a resource (issue 41
//! item 2): a CPU list naming CPUs this process may not run on, or too
//! many of them, is refused with exit code 2 and the reason before any
//! ring is opened or any "ready" line printed. No root needed: nothing
//! is opened.

mod support;

use support::linerate;

fn cpus_here() -> usize {
    linerate_backend::cpu::allowed().len()
}

#[test]
fn a_cpu_list_beyond_this_host_is_refused_before_anything_opens() {
    let n = cpus_here();
    assert!(n > 0, "sched_getaffinity gave no CPU");
    let beyond = format!("0-{}", n + 5);
    let cases: Vec<Vec<&str>> = vec![
        vec![
            "sink",
            "--iface",
            "lo",
            "--backend",
            "af_packet",
            "-t",
            "1",
            "--cores",
            &beyond,
        ],
        vec!["sink", "--iface", "lo", "-t", "1", "--cores", "0-1023"],
        vec![
            "blast",
            "--iface",
            "lo",
            "--dst-ip",
            "198.18.0.2",
            "--cores",
            &beyond,
        ],
        vec!["fwd", "--iface", "lo", "--cores", &beyond],
        vec!["rr", "server", "--cores", &beyond],
    ];
    for args in &cases {
        let t = std::time::Instant::now();
        let out = linerate().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("not online or not allowed for this process (it may run on"),
            "{args:?}: {err}"
        );
        assert!(stdout.is_empty(), "{args:?} printed: {stdout}");
        assert!(t.elapsed().as_secs() < 5, "{args:?} took {:?}", t.elapsed());
    }
    // A list repeating CPUs past the bound.
    let many = vec!["0"; 300].join(",");
    let out = linerate()
        .args(["sink", "--iface", "lo", "-t", "1", "--cores", &many])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("300 CPUs: at most 256"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run without privileges, a refusal names what would allow it: root or
/// CAP_NET_RAW for a raw socket, a source port below 1024 for a UDP one.
#[test]
fn an_unprivileged_user_is_told_what_would_allow_it() {
    use linerate_testkit::{require_program, require_root, should_skip};
    let test = "an_unprivileged_user_is_told_what_would_allow_it";
    if should_skip(test, &[require_root(), require_program("setpriv")]) {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_linerate");
    let as_nobody = |args: &[&str]| {
        std::process::Command::new("setpriv")
            .args([
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                "--inh-caps=-all",
            ])
            .arg(bin)
            .args(args)
            .output()
            .unwrap()
    };
    let out = as_nobody(&["sink", "--iface", "lo", "--backend", "socket", "-t", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("need root or CAP_NET_RAW"), "{err}");
    let out = as_nobody(&[
        "blast",
        "--iface",
        "lo",
        "--dst-ip",
        "127.0.0.1",
        "--src-port",
        "9",
        "--count",
        "1",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("source port 9 is below 1024") || err.contains("need root or CAP_NET_RAW"),
        "{err}"
    );
}
