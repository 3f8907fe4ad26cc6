//! Skipping tests whose prerequisites are missing, loudly, and never in CI:
//! a test that needs root or a peer program calls [`should_skip`], which
//! skips with a printed reason, unless `LINERATE_STRICT=1` (CI) where a skip
//! is a failure. For tests and `bench/` only (dev-dependencies); the
//! linerate binary does not link it.

use std::path::Path;

/// True when `LINERATE_STRICT=1`: missing prerequisites fail instead of skip.
pub fn strict() -> bool {
    std::env::var("LINERATE_STRICT").is_ok_and(|v| v == "1")
}

/// Something a test needs that may be missing on this machine.
pub type Requirement = Result<(), String>;

/// Root (for namespaces, raw sockets, XDP).
pub fn require_root() -> Requirement {
    if nix::unistd::geteuid().is_root() {
        Ok(())
    } else {
        Err("needs root (network namespaces)".into())
    }
}

/// A program on PATH (iperf3, sockperf, trafgen, ip, …).
pub fn require_program(name: &str) -> Requirement {
    let found = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| is_executable(&dir.join(name)))
    });
    if found {
        Ok(())
    } else {
        Err(format!(
            "needs '{name}' on PATH (the README's test command installs it)"
        ))
    }
}

/// iperf3 3.21 (the newest, static): `$LINERATE_IPERF3_321` (which `.ci/run`
/// sets), else `shared/bin/iperf3-3.21` beside the checkout.
pub fn iperf3_321() -> Result<std::path::PathBuf, String> {
    let p = std::env::var_os("LINERATE_IPERF3_321")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bin/iperf3-3.21")
        });
    if is_executable(&p) {
        Ok(p)
    } else {
        Err(format!(
            "needs iperf3 3.21 at {} (set LINERATE_IPERF3_321)",
            p.display()
        ))
    }
}

/// A Python that imports snappi (the OTG client): `$LINERATE_SNAPPI_PYTHON`,
/// else the venv the README's test command makes (`target/snappi-venv`),
/// else `python3`.
pub fn snappi_python() -> Result<std::path::PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates: Vec<std::path::PathBuf> = std::env::var_os("LINERATE_SNAPPI_PYTHON")
        .map(std::path::PathBuf::from)
        .into_iter()
        .chain([root.join("target/snappi-venv/bin/python"), "python3".into()])
        .collect();
    candidates
        .iter()
        .find(|p| {
            std::process::Command::new(p)
                .args(["-c", "import snappi"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .cloned()
        .ok_or_else(|| {
            format!(
                "needs a Python with snappi (tried {}; scripts/test makes target/snappi-venv)",
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// [`iperf3_321`] as a requirement.
pub fn require_iperf3_321() -> Requirement {
    iperf3_321().map(|_| ())
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Checks every requirement. Returns `true` if the test must return early
/// (skipped, with the reason printed). Panics under `LINERATE_STRICT=1`.
///
/// ```text
/// if linerate_testkit::should_skip("udp across rig", &[require_root(), require_program("ip")]) {
///     return;
/// }
/// ```
pub fn should_skip(test: &str, reqs: &[Requirement]) -> bool {
    let missing: Vec<&str> = reqs
        .iter()
        .filter_map(|r| r.as_ref().err().map(String::as_str))
        .collect();
    if missing.is_empty() {
        return false;
    }
    let reason = missing.join("; ");
    if strict() {
        panic!("{test}: LINERATE_STRICT=1 forbids skipping: {reason}");
    }
    eprintln!("SKIP {test}: {reason}");
    true
}

/// The points of each `<polyline>` of an SVG, (x, y) each, in order: what
/// the plot tests read a drawing back by.
pub fn svg_polylines(svg: &str) -> Vec<Vec<(f64, f64)>> {
    svg.split("<polyline")
        .skip(1)
        .filter_map(|p| {
            let pts = p.split("points=\"").nth(1)?.split('"').next()?;
            Some(
                pts.split_whitespace()
                    .filter_map(|xy| {
                        let (x, y) = xy.split_once(',')?;
                        Some((x.parse().ok()?, y.parse().ok()?))
                    })
                    .collect(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_on_path() {
        assert!(require_program("sh").is_ok());
        let err = require_program("no-such-program-linerate").unwrap_err();
        assert!(err.contains("no-such-program-linerate"));
    }

    #[test]
    fn nothing_missing_means_no_skip() {
        assert!(!should_skip("t", &[Ok(()), Ok(())]));
    }

    #[test]
    fn missing_requirement_skips_or_fails_in_strict_mode() {
        let r = std::panic::catch_unwind(|| should_skip("t", &[Err("needs x".into())]));
        if strict() {
            assert!(r.is_err(), "strict mode must fail");
        } else {
            assert_eq!(r.ok(), Some(true));
        }
    }
}

/// Held while a test measures a rate or a schedule: one such test at a
/// time on this machine, across threads and test processes (a 2-CPU
/// machine running two paced senders at once measures their contention).
/// An in-process lock, then an exclusive lock on a file in the temporary
/// directory (released by the kernel if the process dies).
#[derive(Debug)]
pub struct Measuring {
    _file: Option<std::fs::File>,
    _one: std::sync::MutexGuard<'static, ()>,
}

/// How long a test waits for another process's measuring lock before it
/// fails: longer than any one measuring test runs.
const MEASURING_WAIT: std::time::Duration = std::time::Duration::from_secs(20 * 60);

/// Waits for the machine-wide measuring lock (see [`Measuring`]), at most
/// [`MEASURING_WAIT`] for another process's (then panics naming the
/// file); without a lock file (an unwritable temporary directory) the
/// in-process lock only.
pub fn measuring() -> Measuring {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::env::temp_dir().join("linerate-tests-measuring.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .ok();
    let deadline = std::time::Instant::now() + MEASURING_WAIT;
    let file = file.filter(|f| {
        loop {
            match f.try_lock() {
                Ok(()) => break true,
                Err(std::fs::TryLockError::WouldBlock) => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "{} held by another process for {MEASURING_WAIT:?}",
                        path.display()
                    );
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                Err(std::fs::TryLockError::Error(_)) => break false,
            }
        }
    });
    Measuring {
        _file: file,
        _one: one,
    }
}

/// Sets its flag when dropped, on a panic too: a test that runs a server
/// until a flag says stop holds one while its client runs, so that a
/// panicking client still stops the server (a scope would otherwise wait
/// for it forever).
#[derive(Debug)]
pub struct StopOnDrop<'a>(pub &'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
