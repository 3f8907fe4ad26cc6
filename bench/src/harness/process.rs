//! The processes a run starts: stopping them (by PID, ours only), their
//! CPU time and their threads' scheduling, their last words.

use super::*;

/// Stops a child this program started (SIGINT, then SIGKILL after 3 s).
pub fn stop_child(child: &mut Child) {
    stop(child)
}

pub(crate) fn stop(child: &mut Child) {
    // End only what we started, by PID: SIGINT first so tools print and exit.
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGINT,
        );
    }
    if !wait_exit(child, Duration::from_secs(3)) {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// CPU time (user + system, seconds) of `pid` and all its descendants.
pub(crate) fn tree_cpu_s(pid: u32) -> f64 {
    let mut total = 0u64;
    let mut frontier = vec![pid];
    let procs: Vec<(u32, u32, u64)> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| {
                let p: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
                // Fields after the ")" of comm: state ppid … utime(12) stime(13).
                let rest = &stat[stat.rfind(')')? + 2..];
                let f: Vec<&str> = rest.split_whitespace().collect();
                Some((
                    p,
                    f.get(1)?.parse().ok()?,
                    f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
                ))
            })
            .collect()
        })
        .unwrap_or_default();
    while let Some(p) = frontier.pop() {
        for (pid, ppid, ticks) in &procs {
            if *pid == p {
                total += ticks;
            }
            if *ppid == p {
                frontier.push(*pid);
            }
        }
    }
    // /proc reports USER_HZ ticks, 100 per second on Linux.
    total as f64 / 100.0
}

/// The threads' /proc/PID/schedstat summed: ns run, ns waited on a run
/// queue, times run (zeros for a thread that is gone).
pub(crate) fn schedstat(pids: &[i32]) -> [u64; 3] {
    let mut sum = [0u64; 3];
    for pid in pids {
        let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap_or_default();
        for (s, v) in sum.iter_mut().zip(text.split_whitespace()) {
            *s += v.parse::<u64>().unwrap_or(0);
        }
    }
    sum
}

/// Waits up to `limit` for a child to end by itself.
/// The child's exit status once it ends within `limit`; past it, the
/// child is stopped (by PID) and that is the error.
pub fn exit_within(child: &mut Child, limit: Duration) -> anyhow::Result<std::process::ExitStatus> {
    let until = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(st);
        }
        if Instant::now() > until {
            stop(child);
            anyhow::bail!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn wait_exit(child: &mut Child, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The last lines a stopped child wrote to its (piped) stderr.
pub(crate) fn stderr_tail(child: &mut Child) -> String {
    use std::io::Read;
    let mut text = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..]
        .iter()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
