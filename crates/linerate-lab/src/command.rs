//! Running the commands a rig is built with (ip, tc, ethtool), each under a
//! deadline.

use crate::error::RigError;
use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The longest a configuration command (ip, tc, ethtool) may take: they
/// answer in milliseconds; one that hangs (a wedged netlink, a namespace
/// being torn down) is ended, not waited for.
const COMMAND_DEADLINE: Duration = Duration::from_secs(30);

pub(crate) fn run(cmd: &mut Command) -> Result<Output, RigError> {
    run_within(cmd, COMMAND_DEADLINE)
}

/// Runs `cmd` to its end within `deadline`: its output, or which command
/// failed and why. A command still running at the deadline is killed (it
/// is this process's child) and reaped; one that exited but left its
/// output open (a child of its own holding the pipe) is not waited for
/// past the deadline either.
pub(crate) fn run_within(cmd: &mut Command, deadline: Duration) -> Result<Output, RigError> {
    let text = format!("{cmd:?}").replace('"', "");
    let end = Instant::now() + deadline;
    let timeout = || RigError::Timeout {
        cmd: text.clone(),
        after: deadline,
    };
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| RigError::Spawn {
            cmd: text.clone(),
            source,
        })?;
    // Both pipes read on their own threads (a command that fills one pipe
    // while we wait on the other would never end); each answers once.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut v);
            }
            let _ = tx.send(v);
        });
        rx
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let mut pause = Duration::from_micros(100);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < end => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(10));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(timeout());
            }
            Err(source) => {
                return Err(RigError::Spawn {
                    cmd: text.clone(),
                    source,
                });
            }
        }
    };
    let left = |rx: mpsc::Receiver<Vec<u8>>| {
        rx.recv_timeout(end.saturating_duration_since(Instant::now()))
            .map_err(|_| timeout())
    };
    let out = Output {
        status,
        stdout: left(stdout)?,
        stderr: left(stderr)?,
    };
    if !out.status.success() {
        return Err(RigError::Command {
            cmd: text,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(out)
}

pub(crate) fn ip(args: &[&str]) -> Result<Output, RigError> {
    run(Command::new("ip").args(args))
}

/// Runs `ip ARGS`: its standard output, or which command failed and why.
pub fn ip_text(args: &[&str]) -> Result<String, RigError> {
    ip(args).map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_gets_its_output_and_its_failure_says_why() {
        let out = run(Command::new("sh").args(["-c", "echo out; echo err >&2"])).unwrap();
        assert_eq!(
            (&out.stdout[..], &out.stderr[..]),
            (&b"out\n"[..], &b"err\n"[..])
        );
        // More than a pipe's buffer on both pipes: read as it comes.
        let out = run(Command::new("sh").args([
            "-c",
            "head -c 200000 /dev/zero; head -c 200000 /dev/zero >&2",
        ]))
        .unwrap();
        assert_eq!((out.stdout.len(), out.stderr.len()), (200_000, 200_000));
        match run(Command::new("sh").args(["-c", "echo no >&2; exit 3"])) {
            Err(RigError::Command { stderr, status, .. }) => {
                assert_eq!(stderr, "no");
                assert!(status.contains('3'), "{status}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            run(&mut Command::new("/nonexistent/linerate-lab-test")),
            Err(RigError::Spawn { .. })
        ));
    }

    #[test]
    fn a_command_that_hangs_is_ended_at_its_deadline() {
        // (Sleeps of 2 s: without the deadline each call would return Ok
        // after them, and what the test leaves behind ends by itself.)
        let t = Instant::now();
        let e = run_within(Command::new("sleep").arg("2"), Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, RigError::Timeout { .. }), "{e}");
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t.elapsed()
        );
        // Exited, but a child of its own holds the output open.
        let t = Instant::now();
        let e = run_within(
            Command::new("sh").args(["-c", "sleep 2 & echo started"]),
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(matches!(e, RigError::Timeout { .. }), "{e}");
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t.elapsed()
        );
    }
}
