//! `linerate agent` against bad command lines (exit 2, the reason said)
//! and hostile API clients (no TLS, no token, a wrong one, oversized and
//! malformed requests, slow and idle connections, random bodies): each is
//! answered or dropped, and the agent still serves a good request after
//! them all. Nothing here starts traffic; no root needed (the agent's
//! only port is `lo`).

mod support;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{Proc, free_port, linerate, wait_listening_by};

const TOKEN: &str = "hostile-test-token-0123456789";

struct Agent {
    _proc: Proc,
    port: u16,
    tls: Arc<ClientConfig>,
    _dir: tempfile::TempDir,
}

fn start() -> Agent {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let cert = dir.path().join("cert.pem");
    // The agent itself must hold the listening socket (a port free to the
    // probe may still be another's on another address): another port if
    // it could not listen.
    let (proc, port) = (0..5)
        .find_map(|_| {
            let port = free_port();
            let mut proc = Proc::spawn(linerate().args([
                "agent",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--allow-iface",
                "lo",
                "--token-file",
                token.to_str().unwrap(),
                "--write-cert",
                cert.to_str().unwrap(),
            ]));
            wait_listening_by(&mut proc, port).then_some((proc, port))
        })
        .expect("the agent could not listen on five ports in a row");
    let pinned = CertificateDer::from_pem_file(&cert).unwrap();
    Agent {
        _proc: proc,
        port,
        tls: linerate_agent::peer::pinned_client(vec![pinned]).unwrap(),
        _dir: dir,
    }
}

impl Agent {
    /// Sends `raw` (a whole HTTP request) over TLS; the status and body
    /// of the answer (status 0 when the connection ended without one).
    fn raw(&self, raw: &[u8]) -> (u16, Value) {
        let sock = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        let conn =
            ClientConnection::new(self.tls.clone(), "localhost".try_into().unwrap()).unwrap();
        let mut s = StreamOwned::new(conn, sock);
        if s.write_all(raw).and_then(|()| s.flush()).is_err() {
            return (0, Value::Null);
        }
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out);
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            return (0, Value::Null);
        };
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    fn request(&self, method: &str, path: &str, token: Option<&str>, body: &[u8]) -> (u16, Value) {
        let mut raw = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n",
            body.len()
        );
        if let Some(t) = token {
            raw.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        raw.push_str("\r\n");
        let mut raw = raw.into_bytes();
        raw.extend_from_slice(body);
        self.raw(&raw)
    }

    fn serves(&self) -> bool {
        let (s, v) = self.request("GET", "/capabilities/version", Some(TOKEN), b"");
        s == 200 && v["api_spec_version"] == "1.62.0"
    }
}

#[test]
fn bad_command_lines_exit_2_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short");
    std::fs::write(&short, "abc\n").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["agent"], "--allow-iface"),
        (
            vec![
                "agent",
                "--allow-iface",
                "lo",
                "--token-file",
                short.to_str().unwrap(),
            ],
            "at least 16",
        ),
        (
            vec![
                "agent",
                "--allow-iface",
                "lo",
                "--token-file",
                "/nonexistent/t",
            ],
            "/nonexistent/t",
        ),
        (
            vec!["agent", "--allow-iface", "lo", "--drain", "100"],
            "--drain",
        ),
        (
            vec!["agent", "--allow-iface", "lo", "--backend", "udp"],
            "crafted frames",
        ),
        (
            vec!["agent", "--allow-iface", "lo", "--rx-backend", "nope"],
            "unknown backend 'nope'",
        ),
        (
            vec!["agent", "--allow-iface", "../etc"],
            "not an interface name",
        ),
        (
            vec!["agent", "--allow-iface", "lo", "--cert", "/nonexistent/c"],
            "--key",
        ),
        (
            vec![
                "agent",
                "--allow-iface",
                "lo",
                "--cert",
                "/nonexistent/c",
                "--key",
                "/nonexistent/k",
            ],
            "/nonexistent/c",
        ),
        (
            vec!["agent", "--allow-iface", "lo", "--listen", "nonsense"],
            "nonsense",
        ),
        (
            vec!["agent", "--allow-iface", "lo", "--max-run", "0"],
            "--max-run",
        ),
        (
            vec![
                "agent",
                "--allow-iface",
                "lo",
                "--peer",
                "https://198.18.0.2:8443",
            ],
            "--peer-cert",
        ),
        (
            vec![
                "agent",
                "--allow-iface",
                "lo",
                "--peer",
                "peer.example:8443",
                "--peer-cert",
                short.to_str().unwrap(),
            ],
            "not https://IP:PORT",
        ),
        (
            vec![
                "agent",
                "--allow-iface",
                "lo",
                "--peer",
                "https://198.18.0.2:8443",
                "--peer-cert",
                short.to_str().unwrap(),
            ],
            "no CERTIFICATE",
        ),
    ];
    for (args, want) in cases {
        let out = linerate().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: '{err}' lacks '{want}'");
    }
}

#[test]
fn hostile_clients_are_answered_and_the_agent_serves_on() {
    let a = start();
    assert!(a.serves());

    // No TLS at all: bytes in the clear, then nothing.
    for junk in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        &[0u8; 600],
        &[0x16, 3, 1, 0xff, 0xff],
    ] {
        let mut s = TcpStream::connect(("127.0.0.1", a.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let _ = s.write_all(junk);
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    }
    // Tokens: none, wrong, wrong length, another scheme.
    for t in [
        None,
        Some("nope"),
        Some(&TOKEN[..TOKEN.len() - 1]),
        Some("hostile-test-token-0123456780"),
    ] {
        let (s, v) = a.request("GET", "/config", t, b"");
        assert_eq!(s, 401, "{t:?}: {v}");
        assert_eq!(v["code"], 401);
    }
    let (s, _) =
        a.raw(format!("GET /config HTTP/1.1\r\nAuthorization: Basic {TOKEN}\r\n\r\n").as_bytes());
    assert_eq!(s, 401);
    // Malformed and oversized requests.
    let big = format!(
        "POST /config HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 2000000\r\n\r\n"
    );
    assert_eq!(a.raw(big.as_bytes()).0, 413);
    let chunked = format!(
        "POST /config HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    );
    assert_eq!(a.raw(chunked.as_bytes()).0, 411);
    let mut long = b"GET /config HTTP/1.1\r\nX: ".to_vec();
    long.extend(std::iter::repeat_n(b'a', 40_000));
    assert_eq!(a.raw(&long).0, 431);
    assert_eq!(a.raw(b"\x00\x01\x02 / HTTP/1.1\r\n\r\n").0, 400);
    // Bodies that are not what a route takes: 400 with the reason.
    let mut seed = 7u64;
    for i in 0..200 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let body: Vec<u8> = (0..(seed >> 56))
            .map(|k| (seed >> (k % 56)) as u8)
            .collect();
        let path = ["/config", "/control/state", "/monitor/metrics"][i % 3];
        let (s, v) = a.request("POST", path, Some(TOKEN), &body);
        assert_eq!(s, 400, "{path}: {v}");
    }
    for (path, body) in [
        (
            "/config",
            json!({"ports": [{"name": "p", "location": "eth0"}]}),
        ),
        (
            "/config",
            json!({"ports": [{"name": "p", "location": "lo"}], "flows": [{"name": "f", "tx_rx": {"port": {"tx_name": "q"}}}]}),
        ),
        ("/control/state", json!({"choice": "port", "port": {}})),
        (
            "/control/state",
            json!({"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "start"}}}),
        ),
        ("/monitor/metrics", json!({"choice": "bgpv4"})),
    ] {
        let (s, v) = a.request("POST", path, Some(TOKEN), body.to_string().as_bytes());
        assert!(s == 400 || s == 409, "{path} {body}: {s} {v}");
        assert!(!v["errors"][0].as_str().unwrap_or("").is_empty(), "{v}");
    }
    // Idle connections beyond the bound: the agent holds 32 at most, each
    // for 10 s at most; a good request gets through once they are gone.
    let idle: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(("127.0.0.1", a.port)).unwrap())
        .collect();
    let t0 = Instant::now();
    let mut served = a.serves();
    while !served && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
        served = a.serves();
    }
    assert!(
        served,
        "the agent serves again after its idle connections' deadline"
    );
    drop(idle);
    assert!(a.serves());
    assert!(Path::new(&a._dir.path().join("cert.pem")).exists());
}

/// A TCP connection to the agent from `from` (127.0.0.x: another source
/// address on loopback).
fn connect_from(from: [u8; 4], port: u16) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    s.bind(&std::net::SocketAddr::from((from, 0)).into())?;
    s.connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)).into(),
        Duration::from_secs(2),
    )?;
    Ok(s.into())
}

/// Slow and half-open connections (45 from one address that finish TLS
/// and then trickle a request a byte every 3 s; 40 from another that
/// trickle a ClientHello), each opened again when the agent closes it: an
/// honest client at a third address is served within 2 s, every request
/// of one every 0.5 s (slots are shared per source address: an attacker
/// takes at most its share).
#[test]
fn slow_and_half_open_connections_do_not_lock_out_an_honest_client() {
    let a = start();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = || stop.load(std::sync::atomic::Ordering::Relaxed);
    let hello: &[u8] = &[0x16, 3, 1, 0, 200, 1, 0, 0, 196, 3, 3];
    std::thread::scope(|s| {
        for _ in 0..45 {
            s.spawn(|| {
                while !stopped() {
                    let Ok(sock) = connect_from([127, 0, 0, 2], a.port) else {
                        std::thread::sleep(Duration::from_millis(200));
                        continue;
                    };
                    let _ = sock.set_read_timeout(Some(Duration::from_secs(3)));
                    let conn =
                        ClientConnection::new(a.tls.clone(), "localhost".try_into().unwrap())
                            .unwrap();
                    let mut t = StreamOwned::new(conn, sock);
                    let req =
                        format!("GET /config HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
                    for b in req.bytes() {
                        if stopped() || t.write_all(&[b]).and_then(|()| t.flush()).is_err() {
                            break;
                        }
                        let until = Instant::now() + Duration::from_secs(3);
                        while !stopped() && Instant::now() < until {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            });
        }
        for _ in 0..40 {
            s.spawn(|| {
                while !stopped() {
                    let Ok(mut sock) = connect_from([127, 0, 0, 3], a.port) else {
                        std::thread::sleep(Duration::from_millis(200));
                        continue;
                    };
                    for b in hello {
                        if stopped() || sock.write_all(&[*b]).is_err() {
                            break;
                        }
                        let until = Instant::now() + Duration::from_secs(3);
                        while !stopped() && Instant::now() < until {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            });
        }
        // Let the slow ones take every slot first.
        std::thread::sleep(Duration::from_secs(3));
        let mut slow = Vec::new();
        for _ in 0..20 {
            let t = Instant::now();
            let ok = a.serves();
            let took = t.elapsed();
            if !ok || took > Duration::from_secs(2) {
                slow.push((ok, took));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(
            slow.is_empty(),
            "honest requests not served within 2 s: {slow:?}"
        );
    });
}

/// Wrong tokens from one source are answered ever more slowly and logged
/// with the source; a client at another address is served at once all
/// the while.
#[test]
fn guessing_tokens_is_slowed_per_source_and_logged() {
    let mut a = start();
    let mut took = Vec::new();
    for _ in 0..9 {
        let t = Instant::now();
        let (s, _) = a.request("GET", "/config", Some("guess-guess-guess-guess"), b"");
        took.push(t.elapsed());
        assert_eq!(s, 401);
    }
    assert!(
        took[..3].iter().all(|t| *t < Duration::from_millis(500)),
        "{took:?}"
    );
    // The 9th failure in a row waits 50 ms * 2^5.
    assert!(took[8] >= Duration::from_millis(1600), "{took:?}");
    // Another source is not slowed.
    let other = Instant::now();
    let sock = connect_from([127, 0, 0, 3], a.port).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let conn = ClientConnection::new(a.tls.clone(), "localhost".try_into().unwrap()).unwrap();
    let mut t = StreamOwned::new(conn, sock);
    let req =
        format!("GET /capabilities/version HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
    t.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = t.read_to_end(&mut out);
    assert!(
        String::from_utf8_lossy(&out).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    assert!(other.elapsed() < Duration::from_secs(1));
    let proc = std::mem::replace(&mut a._proc, Proc(None));
    proc.interrupt();
    let out = proc.wait(Duration::from_secs(20));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("from 127.0.0.1: the bearer token is not this agent's"),
        "{log}"
    );
}
