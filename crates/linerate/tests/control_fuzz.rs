//! A bounded network fuzzer for the iperf3-compatible server: fuzzing
//! threads drive a running server with malformed, partial, slow and stalled
//! control connections while real tests run beside them. Zero crashes,
//! every real test completes, and the server's threads and memory come
//! back to where they were. `LINERATE_FUZZ_SECS` sets the length (CI: 60;
//! a longer run is one variable away).

mod support;

use linerate_testkit::{require_program, should_skip};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::{Proc, linerate};

/// xorshift64*: the cases are reproducible from the seed printed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn status(pid: i32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A control connection from 127.0.0.2 (the fuzzer's own source address).
fn connect(port: u16) -> Option<TcpStream> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    let src: SocketAddr = "127.0.0.2:0".parse().unwrap();
    s.bind(&src.into()).ok()?;
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    s.connect_timeout(&to.into(), Duration::from_secs(2)).ok()?;
    let t: TcpStream = s.into();
    t.set_read_timeout(Some(Duration::from_millis(200))).ok()?;
    t.set_write_timeout(Some(Duration::from_millis(500))).ok()?;
    Some(t)
}

const COOKIE: &[u8; 37] = b"fuzzfuzzfuzzfuzzfuzzfuzzfuzzfuzzfuzz\0";

fn params_frame(json: &str) -> Vec<u8> {
    let mut v = (json.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(json.as_bytes());
    v
}

/// One fuzz case; returns its name.
fn case(port: u16, rng: &mut Rng) -> &'static str {
    let Some(mut s) = connect(port) else {
        return "refused";
    };
    let mut sink = [0u8; 256];
    let pause = |ms: u64| std::thread::sleep(Duration::from_millis(ms));
    let which = rng.below(9);
    let name = match which {
        0 => {
            let n = rng.below(3000) as usize;
            let _ = s.write_all(&rng.bytes(n));
            "random bytes"
        }
        1 => {
            let _ = s.write_all(COOKIE);
            let n = rng.below(600) as usize;
            let _ = s.write_all(&rng.bytes(n));
            "cookie + garbage"
        }
        2 => {
            let _ = s.write_all(COOKIE);
            let _ = s.read(&mut sink);
            let _ = s.write_all(&[0xff, 0xff, 0xff, 0xff]);
            let _ = s.write_all(&rng.bytes(100));
            "huge length prefix"
        }
        3 => {
            let _ = s.write_all(COOKIE);
            let _ = s.read(&mut sink);
            let p = params_frame(r#"{"tcp":true,"time":1,"parallel":1,"len":1000}"#);
            let cut = rng.below(p.len() as u64) as usize;
            let _ = s.write_all(&p[..cut]);
            pause(rng.below(1500));
            "truncated parameters, stalled"
        }
        4 => {
            let n = rng.below(10) as usize + 1;
            for b in rng.bytes(n) {
                if s.write_all(&[b]).is_err() {
                    break;
                }
                pause(200);
            }
            "trickle"
        }
        5 => {
            pause(rng.below(1500));
            "silent"
        }
        6 => {
            let _ = s.write_all(COOKIE);
            let _ = s.read(&mut sink);
            let p = params_frame(r#"{"tcp":true,"time":1,"parallel":2,"len":1000}"#);
            let _ = s.write_all(&p);
            let n = rng.below(64) as usize;
            let _ = s.write_all(&rng.bytes(n));
            pause(rng.below(1200));
            "parameters, then random states"
        }
        7 => {
            let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
            let _ = s.write_all(&COOKIE[..rng.below(37) as usize]);
            "reset mid-cookie"
        }
        _ => {
            let _ = s.write_all(COOKIE);
            let _ = s.read(&mut sink);
            let json = format!(
                r#"{{"tcp":{},"udp":{},"time":{},"parallel":{},"len":{},"bandwidth":{},"omit":{}}}"#,
                rng.below(2) == 0,
                rng.below(2) == 0,
                rng.next() as i64,
                rng.below(1 << 20),
                rng.next() as i32,
                rng.next() as i64,
                rng.next() as i32
            );
            let _ = s.write_all(&params_frame(&json));
            let _ = s.read(&mut sink);
            "absurd parameters"
        }
    };
    drop(s);
    name
}

#[test]
fn the_server_survives_a_control_fuzzer_while_serving_real_tests() {
    if should_skip(
        "the_server_survives_a_control_fuzzer_while_serving_real_tests",
        &[require_program("iperf3")],
    ) {
        return;
    }
    let secs: u64 = std::env::var("LINERATE_FUZZ_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let seed = 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id());
    let log = tempfile::NamedTempFile::new().unwrap();
    let port = support::free_port();
    let mut srv = Proc::spawn(linerate().args([
        "-s",
        "-p",
        &port.to_string(),
        "--max-tests",
        "3",
        "--max-tests-per-source",
        "1",
        "--control-timeout",
        "1000",
        "--logfile",
        log.path().to_str().unwrap(),
    ]));
    support::wait_listening(port);
    let pid = srv.pid();
    let real_test = || {
        let out = std::process::Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "-J"])
            .output()
            .unwrap();
        let v = support::json(&out.stdout);
        match v.get("error") {
            None => Ok(()),
            Some(e) => Err(e.to_string()),
        }
    };
    real_test().expect("a test before fuzzing");
    std::thread::sleep(Duration::from_millis(300));
    let (rss0, threads0) = (status(pid, "VmRSS:"), status(pid, "Threads:"));

    let stop = Arc::new(AtomicBool::new(false));
    let tried = Arc::new(AtomicU64::new(0));
    let fuzzers: Vec<_> = (0..10)
        .map(|i| {
            let (stop, tried) = (stop.clone(), tried.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(seed.wrapping_add(i) | 1);
                while !stop.load(Ordering::Relaxed) {
                    case(port, &mut rng);
                    tried.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let t0 = Instant::now();
    let (mut attempted, mut completed, mut failures) = (0u64, 0u64, Vec::new());
    while t0.elapsed() < Duration::from_secs(secs) {
        attempted += 1;
        match real_test() {
            Ok(()) => completed += 1,
            Err(e) => failures.push(e),
        }
        assert!(srv.is_running(), "the server died (seed {seed:#x})");
    }
    stop.store(true, Ordering::Relaxed);
    for f in fuzzers {
        f.join().unwrap();
    }
    // Everything the fuzzer opened is released within the control timeout.
    let settle = Instant::now();
    let (mut rss1, mut threads1) = (0, 0);
    while settle.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(500));
        (rss1, threads1) = (status(pid, "VmRSS:"), status(pid, "Threads:"));
        if threads1 <= threads0 {
            break;
        }
    }
    let figures = format!(
        "control fuzz: {secs} s, seed {seed:#x}: {} connections tried, crashes 0, real tests {completed}/{attempted} completed ({} failed), RSS {rss0} -> {rss1} kB, threads {threads0} -> {threads1}",
        tried.load(Ordering::Relaxed),
        failures.len()
    );
    println!("{figures}");
    // CI prints this file after the tests (cargo keeps a passing test's
    // output to itself).
    let _ = std::fs::write(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/control-fuzz.txt"),
        format!("{figures}\n"),
    );
    assert!(srv.is_running(), "the server died (seed {seed:#x})");
    assert!(
        tried.load(Ordering::Relaxed) > secs * 10,
        "the fuzzer hardly ran"
    );
    assert!(failures.is_empty(), "real tests failed: {failures:?}");
    assert!(completed >= secs / 3, "{completed} tests in {secs} s");
    assert!(threads1 <= threads0, "threads {threads0} -> {threads1}");
    assert!(rss1 <= rss0 + 32 * 1024, "RSS {rss0} -> {rss1} kB");
    real_test().expect("a test after fuzzing");
}
