//! The OCI image and the Kubernetes manifests, end to end (issue 27 part
//! 3): `deploy/test-image` builds the static binary and the FROM scratch
//! image (scripts/image), checks the manifests under deploy/k8s, plays the
//! server DaemonSet's and the client Job's pods with `podman kube play` on
//! the host's loopback and checks the client's iperf3 -J result. Needs
//! root, podman, runc, catatonit and python3-yaml (scripts/test installs
//! them); skips without, fails without under LINERATE_STRICT=1.

use linerate_testkit::{Requirement, require_program, require_root, should_skip};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The static release build from nothing took 2 min 10 s on 2 shared
/// cores; the rest ~10 s. Past this the script is stopped (its pods are
/// removed by its own trap).
const LIMIT: Duration = Duration::from_secs(900);

fn require_python_yaml() -> Requirement {
    let ok = Command::new("python3")
        .args(["-c", "import yaml"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err("needs python3 with yaml (python3-yaml)".into())
    }
}

#[test]
fn image_runs_server_and_client_pods_from_the_manifests() {
    let test = "image_runs_server_and_client_pods_from_the_manifests";
    if should_skip(
        test,
        &[
            require_root(),
            require_program("podman"),
            require_program("runc"),
            require_program("catatonit"),
            require_program("ss"),
            require_python_yaml(),
        ],
    ) {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let log = tempfile::NamedTempFile::new().unwrap();
    let t0 = Instant::now();
    // A process group of its own, so that a timeout stops the script and
    // what it runs (cargo, podman), and nothing else.
    let mut child = Command::new(root.join("deploy/test-image"))
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(log.reopen().unwrap())
        .stderr(log.reopen().unwrap())
        .process_group(0)
        .spawn()
        .expect("spawn deploy/test-image");
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > LIMIT {
            // TERM first: the script's trap removes its pods.
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGTERM);
            let grace = Instant::now();
            while grace.elapsed() < Duration::from_secs(20) {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut out = String::new();
    log.reopen().unwrap().read_to_string(&mut out).unwrap();
    let took = t0.elapsed();
    match status {
        None => panic!("deploy/test-image still running after {LIMIT:?}, stopped:\n{out}"),
        Some(s) => assert!(s.success(), "deploy/test-image: {s} after {took:?}:\n{out}"),
    }
    // What the script found, for the test's output (--nocapture).
    eprintln!("{out}\ndeploy/test-image passed in {took:.1?}");
    assert!(out.contains("== ok:"), "{out}");
    assert!(out.contains("Gbit/s"), "{out}");
}
