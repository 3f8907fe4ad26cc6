//! Helpers for tests that run the real binary and peer tools.
#![allow(dead_code)]

use std::net::TcpListener;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn linerate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
}

/// A free TCP and UDP port on loopback, never the same twice in one test
/// binary: ports come from a per-process walk below the kernel's ephemeral
/// range (so neither a parallel test nor an outgoing connection's source
/// port can be handed the same one), each checked by binding it on
/// loopback and on every IPv4 and IPv6 address.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    // 20000..32000, starting at a place that depends on the process.
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let _ = NEXT.compare_exchange(
        0,
        20_000 + (std::process::id() % 600) as u16 * 20,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    loop {
        let mut p = NEXT.fetch_add(1, Ordering::Relaxed);
        if !(20_000..32_000).contains(&p) {
            p = 20_000 + p % 12_000;
        }
        // Free on every address: a listener of another process on [::1]
        // or 0.0.0.0 with the same port would take a server's connections
        // (or its port), and /proc would show that one listening.
        let free = ["127.0.0.1", "0.0.0.0", "::"].iter().all(|a| {
            TcpListener::bind((*a, p)).is_ok() && std::net::UdpSocket::bind((*a, p)).is_ok()
        });
        if free {
            return p;
        }
    }
}

/// A linerate server (not one-off) on a fresh port, listening.
pub fn server(extra: &[&str]) -> (Proc, u16) {
    listening(|port| Proc::spawn(linerate().args(["-s", "-p", port]).args(extra)))
}

/// `linerate rr server --tcp` on loopback on a fresh port, listening.
pub fn rr_tcp_server(extra: &[&str]) -> (Proc, u16) {
    listening(|port| {
        Proc::spawn(
            linerate()
                .args(["rr", "server", "--tcp", "-B", "127.0.0.1", "-p", port])
                .args(extra),
        )
    })
}

/// `linerate rr client 127.0.0.1 -p PORT --tcp`, to add to.
pub fn rr_tcp_client(port: u16) -> Command {
    let mut c = linerate();
    c.args([
        "rr",
        "client",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "--tcp",
    ]);
    c
}

/// The process `spawn(port)` starts, on a fresh TCP port, once it listens.
pub fn listening(spawn: impl Fn(&str) -> Proc) -> (Proc, u16) {
    // A port can be free to our probe and still not to the server (some
    // other process listening on [::1] or another address with the same
    // port): then the server exits, and a port seen listening in /proc
    // would be the other process's. So the listening socket must be the
    // server's own; if the server died, another port is tried.
    for _ in 0..5 {
        let port = free_port();
        let mut p = spawn(&port.to_string());
        if wait_listening_by(&mut p, port) {
            return (p, port);
        }
    }
    panic!("the server could not listen on five ports in a row");
}

/// The inodes of the TCP sockets listening on `port`.
fn listening_inodes(port: u16) -> Vec<String> {
    let needle = format!(":{port:04X}");
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        // Columns: sl local_address rem_address st … uid timeout inode.
        for l in text.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() > 9 && f[1].ends_with(&needle) && f[3] == "0A" {
                inodes.push(f[9].to_string());
            }
        }
    }
    inodes
}

/// Waits (15 s at most) until the process `p` itself has a socket
/// listening on `port`; false if it exited first.
pub fn wait_listening_by(p: &mut Proc, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(15);
    let fd_dir = format!("/proc/{}/fd", p.pid());
    while Instant::now() < deadline {
        if !p.is_running() {
            return false;
        }
        let inodes = listening_inodes(port);
        if !inodes.is_empty() {
            let owned = std::fs::read_dir(&fd_dir)
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| {
                    std::fs::read_link(e.path()).is_ok_and(|l| {
                        let l = l.to_string_lossy();
                        inodes.iter().any(|i| l == format!("socket:[{i}]"))
                    })
                });
            if owned {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("process {} does not listen on port {port}", p.pid());
}

/// A child process that is killed (by PID) if the test ends early.
pub struct Proc(pub Option<Child>);

impl Proc {
    pub fn spawn(cmd: &mut Command) -> Proc {
        Proc(Some(
            cmd.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn"),
        ))
    }

    /// Waits up to `limit` for exit and returns the output.
    pub fn wait(mut self, limit: Duration) -> Output {
        let mut child = self.0.take().unwrap();
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                return child.wait_with_output().unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "process did not exit within {limit:?}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn pid(&self) -> i32 {
        self.0.as_ref().map_or(0, |c| c.id() as i32)
    }

    /// Sends SIGINT to the process (by its PID), as Ctrl-C would.
    pub fn interrupt(&self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid()),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
    }

    pub fn is_running(&mut self) -> bool {
        self.0
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits until a socket listens on the TCP port (read from /proc, so the
/// server under test sees no probe connection). 15 s at most: a debug
/// build starting while the other interop tests saturate both CPUs.
pub fn wait_listening(port: u16) {
    let needle = format!(":{port:04X} ");
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let text = std::fs::read_to_string(table).unwrap_or_default();
            // Columns: sl local_address rem_address st …; st 0A is LISTEN.
            if text.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 3 && format!("{} ", &f[1][f[1].len() - 5..]) == needle && f[3] == "0A"
            }) {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on port {port}");
}

pub fn json(out: &[u8]) -> serde_json::Value {
    serde_json::from_slice(out)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(out)))
}

/// Waits for `p` (at most `limit`), asserts that it succeeded, and parses
/// its standard output as JSON.
pub fn json_of(p: Proc, limit: std::time::Duration) -> serde_json::Value {
    let out = p.wait(limit);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out.stdout)
}

/// Runs `cmd`, requires success (its stderr in the failure), and parses
/// its standard output as JSON.
pub fn json_ok(cmd: &mut Command) -> serde_json::Value {
    json(&output_ok(cmd).stdout)
}

/// Runs `cmd` and requires success (its stderr and the end of its
/// stdout in the failure); its output.
pub fn output_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\nstdout (its end): {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout[out.stdout.len().saturating_sub(4000)..])
    );
    out
}

pub fn u(v: &serde_json::Value, path: &str) -> u64 {
    let mut cur = v;
    for k in path.split('.') {
        cur = match k.parse::<usize>() {
            Ok(i) => &cur[i],
            Err(_) => &cur[k],
        };
    }
    cur.as_u64()
        .unwrap_or_else(|| panic!("{path} is not a number in {v}"))
}

/// `ip link set veth0 up|down` inside rig host `host`'s namespace.
pub fn set_link(rig: &linerate_lab::Rig, host: usize, state: &str) {
    let st = rig
        .command(host, "ip")
        .args(["link", "set", "veth0", state])
        .status()
        .unwrap();
    assert!(st.success(), "ip link set veth0 {state}");
}

/// iperf3 (Debian's) as a -J client of 127.0.0.1:`port` with `args`.
pub fn iperf3_client(port: u16, args: &[&str]) -> Proc {
    Proc::spawn(
        Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J"])
            .args(args),
    )
}

/// Every key path of a JSON document with its type (`.end.sum.bytes:number`).
pub fn key_paths(
    v: &serde_json::Value,
    prefix: &str,
    out: &mut std::collections::BTreeSet<String>,
) {
    use serde_json::Value;
    let ty = |x: &Value| match x {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null => "null",
    };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{prefix}.{k}");
                out.insert(format!("{p}:{}", ty(x)));
                key_paths(x, &p, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                key_paths(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// The key paths (with types) `theirs` has that `ours` lacks.
pub fn missing_keys(theirs: &serde_json::Value, ours: &serde_json::Value) -> Vec<String> {
    let (mut a, mut b) = (Default::default(), Default::default());
    key_paths(theirs, "", &mut a);
    key_paths(ours, "", &mut b);
    a.difference(&b).cloned().collect()
}

/// Runs `sink` (a command) in the background until it says it is
/// receiving, runs `f`, and returns the sink's output with what `f` returned.
pub fn sink_while<T: Send>(sink: &mut Command, f: impl FnOnce() -> T + Send) -> (Output, T) {
    use std::io::{BufRead, Read};
    let mut child = sink
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The sink says on stderr when it counts what arrives (a sink that
    // fails says why and closes stderr): no guessing with a sleep.
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut stderr = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        stderr.push_str(&line);
        if line.starts_with("linerate: sink receiving on") {
            break;
        }
    }
    let r = f();
    // The rest of stderr in a thread while stdout is read: a report larger
    // than a pipe holds must not wait on a reader that waits on stderr.
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut out = child.wait_with_output().unwrap();
    stderr.push_str(&rest.join().unwrap_or_default());
    out.stderr = stderr.into_bytes();
    (out, r)
}

/// Waits (20 s at most) until something in host `h`'s namespace of `rig`
/// accepts on 127.0.0.1:`port`; fails at once if `agent` exited.
pub fn wait_agent(rig: &linerate_lab::Rig, h: usize, port: u16, agent: &mut Proc) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        assert!(agent.is_running(), "the agent exited at start");
        let up = rig
            .run_in(h, || {
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            })
            .unwrap();
        if up {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the agent did not listen within 20 s");
}

/// Runs the snappi script `tests/snappi/<script>` against one agent that
/// holds both ends of a looped veth pair (veth0 sends, veth1 receives),
/// over HTTP or over gRPC (with the agent's certificate), and returns the
/// JSON the script printed; `None` when the test is skipped (no root, `ip`
/// or snappi's Python). The script's failure fails the test with its
/// output.
pub fn snappi_on_looped_agent(test: &str, script: &str, grpc: bool) -> Option<serde_json::Value> {
    use linerate_testkit::{require_program, require_root, should_skip, snappi_python};
    const PORT: u16 = 8443;
    const GRPC_PORT: u16 = 8444;
    let snappi = snappi_python().map(|_| ());
    if should_skip(test, &[require_root(), require_program("ip"), snappi]) {
        return None;
    }
    let python = snappi_python().unwrap();
    // One agent with both ports: host 1's end of the pair moved into host
    // 0's namespace as veth1.
    let rig = linerate_lab::Rig::looped().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token = "snappi-test-token-0123456789";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let cert = dir.path().join("cert.pem");
    let mut agent = Proc::spawn(rig.command(0, env!("CARGO_BIN_EXE_linerate")).args([
        "agent",
        "--listen",
        &format!("127.0.0.1:{PORT}"),
        "--grpc-listen",
        &format!("127.0.0.1:{GRPC_PORT}"),
        "--allow-iface",
        "veth0,veth1",
        "--token-file",
        token_file.to_str().unwrap(),
        "--write-cert",
        cert.to_str().unwrap(),
    ]));
    let (port, location) = if grpc {
        (GRPC_PORT, format!("127.0.0.1:{GRPC_PORT}"))
    } else {
        (PORT, format!("https://127.0.0.1:{PORT}"))
    };
    wait_agent(&rig, 0, port, &mut agent);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snappi")
        .join(script);
    let mut cmd = rig.command(0, python.to_str().unwrap());
    cmd.arg(&script).args([
        "--location",
        &location,
        "--token",
        token,
        "--tx",
        "veth0",
        "--rx",
        "veth1",
    ]);
    if grpc {
        cmd.args(["--grpc", "--cert", cert.to_str().unwrap()]);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(agent);
    Some(serde_json::from_str(stdout.trim()).unwrap())
}
