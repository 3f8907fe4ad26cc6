//! Output that cannot be written fails the run, a closed pipe ends it
//! quietly, and result files are created new (issue 28, items 4-6). No
//! root: iperf3 client and server and rr on loopback.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{Proc, linerate, server};

/// Runs `cmd` with stdout read only for its first line; the pipe is then
/// closed. Returns the exit code, stderr and how long it took.
fn first_line_only(cmd: &mut Command) -> (Option<i32>, String, Duration) {
    use std::io::BufRead;
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // The reader is gone: the pipe is closed.
    let deadline = Instant::now() + Duration::from_secs(40);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "still running 40 s later");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        start.elapsed(),
    )
}

#[test]
fn a_closed_pipe_ends_every_mode_quietly_without_a_panic() {
    let (_srv, port) = server(&[]);
    let p = port.to_string();
    let (code, err, took) = first_line_only(linerate().args([
        "client",
        "127.0.0.1",
        "-p",
        &p,
        "-t",
        "1",
        "--repeat",
        "2",
    ]));
    assert_eq!(code, Some(141), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let (code, err, _) =
        first_line_only(linerate().args(["client", "127.0.0.1", "-p", &p, "-t", "1"]));
    assert_eq!(
        (code, err.contains("panicked")),
        (Some(141), false),
        "{err}"
    );
    // A closed pipe and a result file that cannot be written: the lost
    // result decides (1), and it is said.
    let (code, err, _) = first_line_only(linerate().args([
        "client",
        "127.0.0.1",
        "-p",
        &p,
        "-t",
        "1",
        "--csv",
        "/dev/full",
    ]));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--csv /dev/full could not be written"),
        "{err}"
    );

    let rr_port = support::free_port().to_string();
    let _rr = Proc::spawn(linerate().args([
        "rr",
        "server",
        "-B",
        "127.0.0.1",
        "-p",
        &rr_port,
        "-t",
        "30",
    ]));
    std::thread::sleep(Duration::from_millis(300));
    let (code, err, _) = first_line_only(linerate().args([
        "rr",
        "client",
        "127.0.0.1",
        "-p",
        &rr_port,
        "-t",
        "1",
        "--repeat",
        "2",
    ]));
    assert_eq!(
        (code, err.contains("panicked")),
        (Some(141), false),
        "{err}"
    );
}

#[test]
fn output_that_cannot_be_written_fails_the_run_with_one_line() {
    let (_srv, port) = server(&[]);
    let p = port.to_string();
    let full = || std::fs::File::create("/dev/full").unwrap();
    let cases: [(&[&str], bool, &str); 4] = [
        (&["--csv", "/dev/full"], false, "--csv /dev/full"),
        (&["--logfile", "/dev/full"], false, "--logfile /dev/full"),
        (&[], true, "standard output"),
        (&["-J"], true, "standard output"),
    ];
    for (extra, stdout_full, target) in cases {
        let mut cmd = linerate();
        cmd.args(["client", "127.0.0.1", "-p", &p, "-t", "1"])
            .args(extra);
        if stdout_full {
            cmd.stdout(full());
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        let said: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("could not be written"))
            .collect();
        assert_eq!(said.len(), 1, "{extra:?}: {err}");
        assert!(said[0].contains(target), "{err}");
    }
    // The server: its CSV cannot be written, it says so and fails at exit.
    let port2 = support::free_port();
    let srv =
        Proc::spawn(linerate().args(["-s", "-1", "-p", &port2.to_string(), "--csv", "/dev/full"]));
    support::wait_listening(port2);
    let c = linerate()
        .args(["client", "127.0.0.1", "-p", &port2.to_string(), "-t", "1"])
        .output()
        .unwrap();
    assert!(c.status.success());
    let out = srv.wait(Duration::from_secs(20));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--csv /dev/full could not be written"),
        "{err}"
    );
}

#[test]
fn result_files_are_created_new_and_never_through_a_link() {
    let (_srv, port) = server(&[]);
    let p = port.to_string();
    let dir = tempfile::tempdir().unwrap();
    let mine = dir.path().join("mine.txt");
    std::fs::write(&mine, "someone's file").unwrap();
    let link = dir.path().join("link.csv");
    std::os::unix::fs::symlink(&mine, &link).unwrap();
    let client = |extra: &[&std::ffi::OsStr]| {
        linerate()
            .args(["client", "127.0.0.1", "-p", &p, "-t", "1"])
            .args(extra)
            .output()
            .unwrap()
    };
    for (path, force) in [(&mine, false), (&link, false), (&link, true)] {
        let mut args: Vec<&std::ffi::OsStr> = vec!["--csv".as_ref(), path.as_os_str()];
        if force {
            args.push("--force".as_ref());
        }
        let out = client(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{path:?} {force}: {err}");
        assert!(err.contains(path.to_str().unwrap()), "{err}");
    }
    let out = client(&["--logfile".as_ref(), link.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "someone's file");
    // --force replaces a regular file.
    let old = dir.path().join("old.csv");
    std::fs::write(&old, "old").unwrap();
    let out = client(&["--csv".as_ref(), old.as_os_str(), "--force".as_ref()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::read_to_string(&old)
            .unwrap()
            .starts_with("run,mode,")
    );
}

/// A one-off server with `-I pidfile`: `during(its PID)` once it
/// listens, then one client test, and the server's exit.
fn one_test_with_pidfile(pidfile: &std::path::Path, during: impl FnOnce(i32)) {
    let port = support::free_port();
    let srv = Proc::spawn(
        linerate()
            .args(["-s", "-1", "-p", &port.to_string(), "-I"])
            .arg(pidfile),
    );
    support::wait_listening(port);
    during(srv.pid());
    let c = linerate()
        .args(["client", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
        .output()
        .unwrap();
    assert!(c.status.success());
    srv.wait(Duration::from_secs(20));
}

/// Waits up to 5 s for `done`.
fn within_5s(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "no {what} within 5 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_pidfile_is_made_new_and_only_this_process_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let mine = dir.path().join("mine");
    std::fs::write(&mine, "keep").unwrap();
    let link = dir.path().join("link.pid");
    std::os::unix::fs::symlink(&mine, &link).unwrap();
    let live = dir.path().join("live.pid");
    std::fs::write(&live, format!("{}\n", std::process::id())).unwrap();
    let text = dir.path().join("text.pid");
    std::fs::write(&text, "not a pid").unwrap();
    for (path, why) in [
        (&link, "not a regular file"),
        (&live, "is running and holds it"),
        (&text, "holds no process ID"),
    ] {
        let out = linerate()
            .args(["-s", "-1", "-p", &support::free_port().to_string(), "-I"])
            .arg(path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(why), "{err}");
    }
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "keep");
    assert_eq!(std::fs::read_to_string(&text).unwrap(), "not a pid");
    // A stale one is replaced; at exit the server removes its own.
    let stale = dir.path().join("stale.pid");
    std::fs::write(&stale, "4194304\n").unwrap();
    one_test_with_pidfile(&stale, |pid| {
        within_5s("the stale pidfile replaced", || {
            std::fs::read_to_string(&stale).unwrap_or_default().trim() == pid.to_string()
        });
    });
    assert!(!stale.exists(), "removed at exit");
    // One replaced by someone else while it ran is left alone.
    let taken = dir.path().join("taken.pid");
    one_test_with_pidfile(&taken, |_| {
        within_5s("a pidfile", || taken.exists());
        std::fs::remove_file(&taken).unwrap();
        std::fs::write(&taken, "someone else's\n").unwrap();
    });
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "someone else's\n");
}
