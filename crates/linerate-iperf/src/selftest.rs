//! `linerate selftest`: the main job on an embedded default. An
//! iperf3-compatible server inside this process on loopback, a short client
//! test against it, iperf3's report. No root, no setup.

use crate::output::LockedWriter;
use crate::{ClientFailure, ClientOptions, Family, Limits, ServerOptions};
use linerate_iperf_proto::report::OutputMode;
use linerate_iperf_proto::{Params, Protocol};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long the set-up and the end of a selftest may take at most (each);
/// on a 2-CPU VM under six busy loops they took 0.1-0.35 s together.
const SELFTEST_PHASE_MAX: Duration = Duration::from_secs(5);

/// The test a selftest runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selftest {
    pub time_s: u32,
    pub parallel: u32,
    /// UDP (unlimited rate, 1400-byte datagrams) instead of TCP.
    pub udp: bool,
    /// iperf3's -J document instead of text.
    pub json: bool,
}

/// An in-process server on a free loopback port, serving one test in its
/// own thread, its output held.
#[derive(Debug)]
pub struct LoopbackServer {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<std::io::Result<()>>,
}

impl LoopbackServer {
    /// Binds 127.0.0.1 on a free port and starts serving.
    pub fn start() -> std::io::Result<LoopbackServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let port = listener.local_addr()?.port();
        let opts = server_options(port);
        let stop = Arc::new(AtomicBool::new(false));
        let out: Arc<Mutex<dyn Write + Send>> = Arc::new(Mutex::new(std::io::sink()));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || crate::server::serve(listener, &opts, out, stop))
        };
        Ok(LoopbackServer { port, stop, thread })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server and waits for its thread.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

impl Selftest {
    /// The line said before a text run.
    pub fn banner(&self, port: u16) -> String {
        format!(
            "linerate selftest: {} {}s to an in-process iperf3-compatible server on 127.0.0.1:{port} \
             (receiver = the server; figures below are iperf3's: sender = bytes the kernel accepted, receiver = bytes that arrived)",
            if self.udp { "UDP" } else { "TCP" },
            self.time_s
        )
    }

    /// Runs the test against `server`, its output to `out`; ended early
    /// (with its results) when `early` is raised. Stops the server.
    pub fn run(
        &self,
        server: LoopbackServer,
        out: Arc<Mutex<dyn Write + Send>>,
        early: Arc<AtomicBool>,
    ) -> Result<(), ClientFailure> {
        let opts = self.client_options(server.port, early);
        let interrupted = AtomicBool::new(false);
        let result = crate::client::run(&opts, &mut LockedWriter(out), &interrupted);
        server.stop();
        result
    }

    /// The selftest's client: this test against 127.0.0.1:`port`.
    fn client_options(&self, port: u16, early: Arc<AtomicBool>) -> ClientOptions {
        ClientOptions {
            time: None,
            events: None,
            bind_dev: None,
            auth: None,
            debug: 0,
            file: None,
            finish_early: Some(early),
            cntl_ka: None,
            rcv_timeout: Duration::from_secs(120),
            snd_timeout: None,
            host: "127.0.0.1".into(),
            port,
            params: Params {
                protocol: if self.udp {
                    Protocol::Udp
                } else {
                    Protocol::Tcp
                },
                time_s: self.time_s,
                parallel: self.parallel,
                len: if self.udp { 1400 } else { 0 },
                client_version: Some(format!("linerate {}", env!("CARGO_PKG_VERSION"))),
                ..Params::default()
            },
            bandwidth_given: true,
            bind: None,
            cport: None,
            family: Family::V4,
            interval: Duration::from_secs(1),
            output: OutputMode {
                json: self.json,
                ..OutputMode::default()
            },
            connect_timeout: Duration::from_secs(5),
            // What bounds the end: the senders stop at the scheduled end by
            // themselves, the server's drain ends within 20 ms of the last
            // data (1 s at most), and the client gives the end of the test
            // (TEST_END to the server's results) and its set-up this long at
            // most, whatever the load (30 s let a stalled end hold a 3 s test
            // for half a minute; issue 26 item 9).
            control_timeout: SELFTEST_PHASE_MAX,
            udp_gso: true,
            affinity: vec![],
            zerocopy: false,
        }
    }
}

/// The in-process server: one test on 127.0.0.1:`port`, its output held.
fn server_options(port: u16) -> ServerOptions {
    ServerOptions {
        events: None,
        bind_dev: None,
        auth: None,
        debug: 0,
        file: None,
        mptcp: false,
        port,
        bind: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        family: Family::V4,
        one_off: true,
        idle_timeout: None,
        interval: Duration::from_secs(1),
        output: OutputMode {
            json: true,
            ..OutputMode::default()
        },
        rcv_timeout: Duration::from_secs(10),
        control_timeout: Duration::from_secs(10),
        limits: Limits::default(),
        udp_gso: true,
        affinity: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short TCP test on loopback runs to its end and prints iperf3's
    /// -J document with what moved.
    #[test]
    fn a_loopback_test_runs_and_reports() {
        let t = Selftest {
            time_s: 1,
            parallel: 2,
            udp: false,
            json: true,
        };
        let server = LoopbackServer::start().unwrap();
        let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
        let out: Arc<Mutex<dyn Write + Send>> = buf.clone();
        t.run(server, out, Arc::new(AtomicBool::new(false)))
            .unwrap();
        let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["start"]["test_start"]["num_streams"], 2);
        assert_eq!(doc["start"]["test_start"]["duration"], 1);
        assert!(doc["end"]["sum_received"]["bytes"].as_u64().unwrap() > 0);
        assert!(
            t.banner(9)
                .contains("TCP 1s to an in-process iperf3-compatible server on 127.0.0.1:9")
        );
    }
}
