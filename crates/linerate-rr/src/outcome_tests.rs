//! Each rr outcome's `-J` document against one captured from the code
//! before the documents were typed (`tests/golden/`), byte for byte as
//! pretty JSON: the same keys, values and order (a renamed key fails).

use super::*;
use crate::client::{Counts, WorkerReport};
use crate::{
    ClientConfig, Interval, Latency, ServerConfig, ServerCounts, ServerInterval, Steering,
    TcpClient, TcpServerConfig, TcpServerCounts,
};
use std::net::SocketAddr;

fn golden(name: &str, doc: &serde_json::Value) {
    let path = format!("{}/tests/golden/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let got = serde_json::to_string_pretty(doc).unwrap();
    if std::env::var_os("LINERATE_CAPTURE").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    assert_eq!(got, want.trim_end(), "{name}: the document changed");
}

fn doctor() -> serde_json::Value {
    serde_json::json!({"address": "198.18.0.1", "findings": []})
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn latency(base: u64) -> Latency {
    Latency {
        count: 1000,
        min: base,
        mean: base as f64 * 1.5 + 0.1234,
        stddev: 3.25,
        p50: base + 1,
        p90: base + 22,
        p99: base + 333,
        p999: base + 4444,
        p9999: base + 5555,
        max: base + 66_666,
    }
}

fn server_report(steering_note: Option<String>) -> ServerReport {
    let c = ServerCounts {
        requests: 1000,
        answered: 990,
        malformed: 4,
        too_large: 6,
        reply_errors: 0,
        bytes_in: 64_000,
        bytes_out: 63_360,
        batches: 100,
        reply_messages: 99,
        client_sockets: 0,
        requests_on_client_sockets: 0,
    };
    ServerReport {
        config: ServerConfig {
            bind: addr("198.18.0.1:9000"),
            cores: vec![0, 1],
            workers: 2,
            steering: Steering::Cpu,
            duration: None,
            interval: None,
            batch: 32,
            max_response: 0,
            allow: Vec::new(),
            reuseport: true,
            pin: true,
            busy_poll_us: 50,
            gso: true,
            spin: false,
            coalesce: Duration::ZERO,
            client_sockets: 0,
            af_xdp: None,
            intervals_kept: 1,
        },
        local: addr("198.18.0.1:9000"),
        workers: vec![(Some(0), c), (None, c)],
        total: c,
        elapsed: Duration::from_millis(1500),
        steering_note,
        intervals: vec![ServerInterval {
            start: Duration::ZERO,
            end: Duration::from_millis(500),
            total: c,
            per_worker: vec![600, 400],
        }],
        intervals_dropped: 2,
        warnings: vec!["CPU 1 not pinned".into()],
    }
}

#[test]
fn server_documents_are_as_captured() {
    let o = RrServerOutcome {
        report: server_report(None),
        doctor: doctor(),
    };
    golden("server", &o.document());
    let hash = RrServerOutcome {
        report: server_report(Some("no CBPF".into())),
        doctor: doctor(),
    };
    golden("server_hash", &hash.document());
}

#[test]
fn tcp_server_document_is_as_captured() {
    let c = TcpServerCounts {
        requests: 500,
        answered: 498,
        accepted: 4,
        ..TcpServerCounts::default()
    };
    let o = RrTcpServerOutcome {
        report: TcpServerReport {
            config: TcpServerConfig {
                bind: addr("[2001:db8::1]:9000"),
                cores: vec![3],
                workers: 1,
                pin: true,
                duration: None,
                interval: None,
                max_response: 65_536,
                allow: Vec::new(),
                max_message: 1 << 20,
                max_conns: 1024,
                max_per_source: 64,
                idle_timeout: Duration::from_millis(2500),
                spin: true,
                busy_poll_us: 0,
                intervals_kept: crate::INTERVALS_KEPT,
            },
            local: addr("[2001:db8::1]:9000"),
            workers: vec![(Some(3), c)],
            total: c,
            elapsed: Duration::from_secs(2),
            intervals: vec![ServerInterval {
                start: Duration::ZERO,
                end: Duration::from_secs(1),
                total: c,
                per_worker: vec![500],
            }],
            intervals_dropped: 0,
            warnings: Vec::new(),
        },
        doctor: doctor(),
    };
    golden("tcp_server", &o.document());
}

fn client_report(load: Load, tcp: Option<TcpClient>) -> ClientReport {
    let counts = Counts {
        sent: 2000,
        completed: 1990,
        lost: 10,
        late: 1,
        connects: 2,
        ..Counts::default()
    };
    ClientReport {
        config: ClientConfig {
            server: addr("198.18.0.2:9000"),
            bind: None,
            cores: vec![1],
            threads: 1,
            flows: 2,
            load,
            request_size: 64,
            response_size: 128,
            duration: Duration::from_secs(2),
            timeout: Duration::from_millis(250),
            interval: None,
            busy_poll: false,
        },
        tcp,
        workers: vec![WorkerReport {
            cpu: Some(1),
            counts: counts.clone(),
            local: vec![addr("198.18.0.1:40000"), addr("198.18.0.1:40001")],
        }],
        total: counts,
        elapsed: Duration::from_millis(1999),
        latency: Some(latency(12_345)),
        send_lag: matches!(load, Load::Open { .. }).then(|| latency(700)),
        intervals: vec![Interval {
            start: Duration::ZERO,
            end: Duration::from_secs(1),
            completed: 995,
            lost: 5,
            latency: Some(latency(11_000)),
        }],
        interrupted: true,
        warnings: vec!["a warning".into()],
        roundtrips: Vec::new(),
    }
}

#[test]
fn client_documents_are_as_captured() {
    let closed = RrClientOutcome {
        report: client_report(Load::Closed { outstanding: 2 }, None),
        doctor: Some(doctor()),
        load: Load::Closed { outstanding: 2 },
        timeout_ms: 250.0,
    };
    golden("client_udp", &closed.document());
    let tcp = |per_transaction, close_reset| TcpClient {
        connect_per_transaction: per_transaction,
        connect_timeout: Duration::from_millis(1500),
        close_reset,
    };
    let open = Load::Open { tps: 1000.5 };
    let crr = RrClientOutcome {
        report: client_report(open, Some(tcp(true, true))),
        doctor: None,
        load: open,
        timeout_ms: 250.0,
    };
    golden("client_crr", &crr.document());
    for (name, t) in [
        ("client_rr", tcp(false, false)),
        ("client_crr_fin", tcp(true, false)),
    ] {
        let o = RrClientOutcome {
            report: client_report(open, Some(t)),
            doctor: Some(doctor()),
            load: open,
            timeout_ms: 250.0,
        };
        golden(name, &o.document());
    }
}
