//! The skip rule and a fake iperf3 client driven by hand.

use crate::support::{iperf3_client, json};
use linerate_iperf_proto::state;
use linerate_testkit::{require_program, should_skip};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

pub fn skip(test: &str) -> bool {
    should_skip(test, &[require_program("iperf3")])
}

/// A fake iperf3 client driven by hand, byte by byte.
pub struct Fake {
    pub ctrl: TcpStream,
    pub cookie: Vec<u8>,
    pub port: u16,
    pub streams: Vec<TcpStream>,
}

impl Fake {
    /// Connects from `source` (a loopback address) and sends a cookie.
    pub fn connect(port: u16, source: &str, rcvbuf: Option<usize>) -> Fake {
        // A refused connection is tried again for up to 3 s (seen once in
        // CI right after the listener showed up; the faults tested here
        // come after the connection).
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        let s = loop {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            if let Some(b) = rcvbuf {
                s.set_recv_buffer_size(b).unwrap();
            }
            let src: SocketAddr = format!("{source}:0").parse().unwrap();
            s.bind(&src.into()).unwrap();
            let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            match s.connect_timeout(&to.into(), Duration::from_secs(5)) {
                Ok(()) => break s,
                Err(e)
                    if e.kind() == std::io::ErrorKind::ConnectionRefused
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("connecting to 127.0.0.1:{port}: {e}"),
            }
        };
        let mut ctrl: TcpStream = s.into();
        ctrl.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut cookie = format!("fakefakefakefake{:020}", std::process::id()).into_bytes();
        cookie.truncate(36);
        cookie.push(0);
        ctrl.write_all(&cookie).unwrap();
        Fake {
            ctrl,
            cookie,
            port,
            streams: Vec::new(),
        }
    }

    pub fn expect(&mut self, want: u8) {
        let mut b = [0u8; 1];
        self.ctrl.read_exact(&mut b).unwrap();
        assert_eq!(b[0], want, "state from the server");
    }

    pub fn send_json(&mut self, v: &serde_json::Value) {
        let j = v.to_string();
        self.ctrl
            .write_all(&(j.len() as u32).to_be_bytes())
            .unwrap();
        self.ctrl.write_all(j.as_bytes()).unwrap();
    }

    /// Cookie sent: exchanges `params` and waits for CREATE_STREAMS.
    pub fn params(&mut self, params: serde_json::Value) {
        self.expect(state::PARAM_EXCHANGE);
        self.send_json(&params);
        self.expect(state::CREATE_STREAMS);
    }

    /// Opens `n` TCP streams and waits until the test runs.
    pub fn open_streams(&mut self, n: usize) {
        for _ in 0..n {
            let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
            s.write_all(&self.cookie).unwrap();
            self.streams.push(s);
        }
        self.expect(state::TEST_START);
        self.expect(state::TEST_RUNNING);
    }

    /// Reads the control connection until a SERVER_ERROR arrives (its
    /// iperf3 error code) or `limit` passes (`None`), streams sending
    /// meanwhile if asked.
    pub fn until_server_error(&mut self, limit: Duration, send: bool) -> Option<(i32, Duration)> {
        let t0 = Instant::now();
        self.ctrl.set_nonblocking(true).unwrap();
        let block = vec![0u8; 128 << 10];
        for s in &self.streams {
            s.set_nonblocking(true).unwrap();
        }
        let mut got = Vec::new();
        while t0.elapsed() < limit {
            if send {
                for s in &mut self.streams {
                    let _ = s.write(&block);
                }
            } else {
                std::thread::sleep(Duration::from_millis(5));
            }
            let mut b = [0u8; 64];
            match self.ctrl.read(&mut b) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&b[..n]),
                Err(_) => {}
            }
            if let Some(i) = got.iter().position(|&c| c == state::SERVER_ERROR)
                && got.len() >= i + 5
            {
                let code = i32::from_be_bytes(got[i + 1..i + 5].try_into().unwrap());
                return Some((code, t0.elapsed()));
            }
        }
        None
    }
}

pub fn tcp_params(time: u32, parallel: u32) -> serde_json::Value {
    serde_json::json!({
        "tcp": true, "omit": 0, "time": time, "num": 0, "blockcount": 0,
        "parallel": parallel, "len": 131072, "pacing_timer": 1000,
        "client_version": "3.12"
    })
}

/// Retries a 1 s iperf3 test until it passes; how long that took.
pub fn a_real_test_gets_through(port: u16, args: &[&str], within: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        let mut a = vec!["-t", "1"];
        a.extend_from_slice(args);
        let v = json(&iperf3_client(port, &a).wait(Duration::from_secs(20)).stdout);
        if v.get("error").is_none() {
            assert!(v["end"]["sum_received"]["bytes"].as_u64().unwrap() > 0);
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < within,
            "still no test after {:?}: {}",
            t0.elapsed(),
            v["error"]
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
