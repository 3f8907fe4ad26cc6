//! Starting peer tools on the rig, pinned to a CPU.

use anyhow::{Result, bail};
use linerate_lab::Rig;
use linerate_testkit::require_program;
use std::process::{Child, Stdio};

/// `ip netns exec <host> taskset -c <cpu> <argv…>`, output discarded.
pub fn spawn_pinned(rig: &Rig, host: usize, cpu: usize, argv: &[&str]) -> Result<Child> {
    let mut cmd = rig.command(host, "taskset");
    cmd.arg("-c").arg(cpu.to_string()).args(argv);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    Ok(cmd.spawn()?)
}

/// As [`spawn_pinned`], with standard output written to `out`.
pub fn spawn_pinned_out(
    rig: &Rig,
    host: usize,
    cpu: usize,
    argv: &[&str],
    out: std::fs::File,
) -> Result<Child> {
    let mut cmd = rig.command(host, "taskset");
    cmd.arg("-c").arg(cpu.to_string()).args(argv);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::piped());
    Ok(cmd.spawn()?)
}

/// Starts `argv` in `host`'s namespace, free to run on every CPU (it
/// pins its own workers).
pub fn spawn(rig: &Rig, host: usize, argv: &[&str]) -> Result<Child> {
    let mut cmd = rig.command(host, argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    Ok(cmd.spawn()?)
}

/// Waits (up to 5 s) until something listens on TCP `port` in `host`'s
/// namespace (asked of `ss`, so the server sees no probe connection): a
/// busy machine can take longer than any fixed pause to start a server.
pub fn wait_tcp_listen(rig: &Rig, host: usize, port: u16) -> Result<()> {
    wait_listen(rig, host, port, "-Hltn", "TCP")
}

/// The same for a UDP socket bound to `port`.
pub fn wait_udp_listen(rig: &Rig, host: usize, port: u16) -> Result<()> {
    wait_listen(rig, host, port, "-Hlun", "UDP")
}

fn wait_listen(rig: &Rig, host: usize, port: u16, flags: &str, proto: &str) -> Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let sport = format!(":{port}");
    while std::time::Instant::now() < deadline {
        let out = rig
            .command(host, "ss")
            .args([flags, "sport", "=", &sport])
            .output()?;
        if out.status.success() && !out.stdout.is_empty() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    bail!("nothing listens on {proto} port {port} after 5 s")
}

/// The linerate binary built next to this program.
pub fn linerate_bin() -> Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    let bin = exe.with_file_name("linerate");
    if !bin.exists() {
        bail!(
            "{} not found: build it with `cargo build --release -p linerate`",
            bin.display()
        );
    }
    Ok(bin)
}

/// Fails with the list of programs that are missing.
pub fn need(programs: &[&str]) -> Result<()> {
    let missing: Vec<String> = programs
        .iter()
        .filter_map(|p| require_program(p).err())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        bail!("{}", missing.join("; "))
    }
}

/// Raises a root-namespace sysctl for a run; the returned closure restores it.
pub fn raise_sysctl(path: &'static str, value: u64) -> Result<Box<dyn FnOnce()>> {
    let old = std::fs::read_to_string(path)?;
    let old_v: u64 = old.trim().parse().unwrap_or(0);
    if old_v < value {
        std::fs::write(path, value.to_string())?;
    }
    Ok(Box::new(move || {
        let _ = std::fs::write(path, old.trim());
    }))
}
