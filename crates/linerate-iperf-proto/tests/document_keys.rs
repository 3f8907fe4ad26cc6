//! The `-J` document, `--json-stream` events and `--get-server-output`
//! document of fixed figures, compared byte for byte (keys, their order,
//! number types, values) with what the code wrote before the document
//! became serde-derived structs (captured in `fixtures/documents/`). A
//! renamed, moved, dropped or retyped key fails here.
//!
//! `LINERATE_CAPTURE=1` rewrites the fixtures (only when the document is
//! meant to change).

use linerate_iperf_proto::report::{
    Cpu, DepartureStats, Extra, IntervalSample, Mptcp, OutputMode, Report, Role, StartInfo,
    StreamDesc, StreamFinal, TcpFinal, TcpSample, UdpRxSample,
};
use linerate_iperf_proto::{Params, PeerResults, Protocol, StreamResult, TestMode};
use std::net::SocketAddr;
use std::path::PathBuf;

/// One test's figures: its start, intervals, ends and the peer's results.
struct Case {
    name: &'static str,
    role: Role,
    params: Params,
    /// (socket, sender) per stream.
    streams: Vec<(i32, bool)>,
    intervals: Vec<Vec<IntervalSample>>,
    finals: Vec<StreamFinal>,
    peer: Option<PeerResults>,
    diskfile: Option<(&'static str, u64)>,
    error: Option<&'static str>,
    mptcp: Option<(usize, usize)>,
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn info(c: &Case) -> StartInfo {
    StartInfo {
        role: c.role,
        params: c.params.clone(),
        cookie: "abcdefghijklmnopqrstuvwxyz234567abcd".into(),
        system_info: "Linux test 6.1.0 x86_64".into(),
        timestamp_secs: 1_795_310_454,
        peer_host: "198.18.0.2".into(),
        peer_port: 5201,
        tcp_mss_default: 1448,
        sndbuf_actual: 16384,
        rcvbuf_actual: 131_072,
        interval_s: 1.0,
        gso: c.params.protocol == Protocol::Udp,
        gro: false,
        streams: c
            .streams
            .iter()
            .enumerate()
            .map(|(i, &(socket, sender))| StreamDesc {
                id: linerate_iperf_proto::stream_id(i),
                socket,
                sender,
                local: addr(&format!("198.18.0.1:{}", 40000 + i)),
                remote: if i == 0 {
                    addr("[::ffff:198.18.0.2]:5201")
                } else {
                    addr("198.18.0.2:5201")
                },
            })
            .collect(),
        host: linerate_run::Host {
            hostname: "h".into(),
            kernel: "k".into(),
            cpus: 2,
            linerate: "v",
            timestamp: 0.0,
            command: Vec::new(),
        },
    }
}

fn tcp_sample(socket: i32, sender: bool, start: f64, bytes: u64, omitted: bool) -> IntervalSample {
    IntervalSample {
        id: socket as u32,
        socket,
        sender,
        start,
        end: start + 1.000_123_4,
        bytes,
        omitted,
        tcp: sender.then_some(TcpSample {
            retransmits: 2,
            reorder: 1,
            snd_cwnd: 64_000,
            snd_wnd: 128_000,
            rtt_us: 120,
            rttvar_us: 30,
            pmtu: 1500,
        }),
        ..IntervalSample::default()
    }
}

fn udp_sample(socket: i32, sender: bool, start: f64, bytes: u64) -> IntervalSample {
    IntervalSample {
        id: socket as u32,
        socket,
        sender,
        start,
        end: start + 0.999_9,
        bytes,
        udp_tx_packets: sender.then_some(bytes / 1400),
        udp_rx: (!sender).then_some(UdpRxSample {
            jitter_ms: 0.012_5,
            lost: 3,
            packets: bytes / 1400,
        }),
        ..IntervalSample::default()
    }
}

fn tcp_final(socket: i32, sender: bool, bytes: u64) -> StreamFinal {
    StreamFinal {
        id: socket as u32,
        socket,
        sender,
        bytes,
        seconds: 2.000_456,
        tcp: sender.then_some(TcpFinal {
            retransmits: 4,
            reorder: 2,
            max_snd_cwnd: 90_000,
            max_snd_wnd: 200_000,
            max_rtt: 300,
            min_rtt: 80,
            mean_rtt: 150,
        }),
        send_errors: u64::from(sender),
        congestion: Some("cubic".into()),
        ..StreamFinal::default()
    }
}

fn udp_final(socket: i32, sender: bool, bytes: u64) -> StreamFinal {
    StreamFinal {
        id: socket as u32,
        socket,
        sender,
        bytes,
        seconds: 1.999_8,
        packets: bytes / 1400,
        omitted_packets: 2,
        errors: if sender { 0 } else { 7 },
        omitted_errors: u64::from(!sender),
        out_of_order: u64::from(!sender) * 2,
        jitter_s: if sender { 0.0 } else { 0.000_031 },
        exact: (!sender).then_some((1, 2, 6)),
        departures: sender.then_some(DepartureStats {
            calls: 1000,
            units_per_call: 4.0,
            target_gap_us: 100.0,
            mean_gap_us: 101.5,
            stddev_gap_us: 3.25,
            min_gap_us: 90.0,
            max_gap_us: 140.0,
            gap_percentiles_us: [100.0, 120.5, 139.0],
        }),
        ..StreamFinal::default()
    }
}

fn peer_tcp(ids: &[(u32, u64, i64)]) -> PeerResults {
    PeerResults {
        cpu_util_total: 12.5,
        cpu_util_user: 2.5,
        cpu_util_system: 10.0,
        sender_has_retransmits: 1,
        congestion_used: Some("bbr".into()),
        streams: ids
            .iter()
            .map(|&(id, bytes, retransmits)| StreamResult {
                id,
                bytes,
                retransmits,
                end_time: 2.001,
                ..StreamResult::default()
            })
            .collect(),
        server_output_text: None,
        server_output_json: None,
    }
}

fn peer_udp(ids: &[(u32, u64)]) -> PeerResults {
    PeerResults {
        cpu_util_total: 1.0,
        sender_has_retransmits: 0,
        streams: ids
            .iter()
            .map(|&(id, bytes)| StreamResult {
                id,
                bytes,
                retransmits: -1,
                jitter_s: 0.000_02,
                errors: 5,
                omitted_errors: 1,
                packets: bytes / 1400,
                omitted_packets: 1,
                end_time: 2.0,
                ..StreamResult::default()
            })
            .collect(),
        ..PeerResults::default()
    }
}

fn params(protocol: Protocol, mode: TestMode, parallel: u32) -> Params {
    Params {
        protocol,
        mode,
        time_s: 2,
        parallel,
        len: if protocol == Protocol::Udp {
            1400
        } else {
            131_072
        },
        ..Params::default()
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "tcp_client_bidir",
            role: Role::Client,
            params: Params {
                title: Some("T".into()),
                extra_data: Some("x".into()),
                mss: 1400,
                window: 262_144,
                bandwidth_bps: 5_000_000,
                fq_rate_bps: 1_000_000,
                omit_s: 1,
                tos: 0x28,
                ..params(Protocol::Tcp, TestMode::Bidir, 1)
            },
            streams: vec![(5, true), (6, false)],
            intervals: vec![
                vec![
                    tcp_sample(5, true, 0.0, 1_000_000, true),
                    tcp_sample(6, false, 0.0, 900_000, true),
                ],
                vec![
                    tcp_sample(5, true, 1.0, 1_100_000, false),
                    tcp_sample(6, false, 1.0, 950_000, false),
                ],
            ],
            finals: vec![
                tcp_final(5, true, 2_100_000),
                tcp_final(6, false, 1_850_000),
            ],
            peer: Some(PeerResults {
                server_output_text: Some("server said\n".into()),
                ..peer_tcp(&[(5, 2_000_000, -1), (6, 1_900_000, 9)])
            }),
            diskfile: Some(("/tmp/f", 4_000_000)),
            error: Some("interrupted"),
            mptcp: Some((1, 2)),
        },
        Case {
            name: "tcp_client_forward_p2",
            role: Role::Client,
            params: Params {
                get_server_output: true,
                ..params(Protocol::Tcp, TestMode::Forward, 2)
            },
            streams: vec![(5, true), (7, true)],
            intervals: vec![vec![
                tcp_sample(5, true, 0.0, 500_000, false),
                tcp_sample(7, true, 0.0, 600_000, false),
            ]],
            finals: vec![tcp_final(5, true, 1_000_000), tcp_final(7, true, 1_200_000)],
            peer: Some(PeerResults {
                server_output_json: Some(
                    serde_json::json!({"start": {"cookie": "c"}, "b": [1, 2.5]}),
                ),
                ..peer_tcp(&[(1, 990_000, -1), (3, 1_190_000, -1)])
            }),
            diskfile: None,
            error: None,
            mptcp: None,
        },
        Case {
            name: "tcp_server_reverse",
            role: Role::Server,
            params: params(Protocol::Tcp, TestMode::Reverse, 1),
            streams: vec![(8, true)],
            intervals: vec![vec![tcp_sample(8, true, 0.0, 700_000, false)], vec![]],
            finals: vec![tcp_final(8, true, 1_400_000)],
            peer: None,
            diskfile: Some(("data.bin", 0)),
            error: None,
            mptcp: None,
        },
        Case {
            name: "tcp_server_forward_no_retransmits",
            role: Role::Server,
            params: params(Protocol::Tcp, TestMode::Forward, 1),
            streams: vec![(8, false)],
            intervals: vec![vec![tcp_sample(8, false, 0.0, 700_000, false)]],
            finals: vec![StreamFinal {
                congestion: None,
                ..tcp_final(8, false, 1_400_000)
            }],
            peer: None,
            diskfile: None,
            error: Some("the client has terminated"),
            mptcp: None,
        },
        Case {
            name: "udp_server_forward_p2",
            role: Role::Server,
            params: Params {
                bandwidth_bps: 10_000_000,
                ..params(Protocol::Udp, TestMode::Forward, 2)
            },
            streams: vec![(9, false), (10, false)],
            intervals: vec![vec![
                udp_sample(9, false, 0.0, 140_000),
                udp_sample(10, false, 0.0, 126_000),
            ]],
            finals: vec![udp_final(9, false, 280_000), udp_final(10, false, 252_000)],
            peer: None,
            diskfile: Some(("u", 10)),
            error: None,
            mptcp: None,
        },
        Case {
            name: "udp_client_reverse",
            role: Role::Client,
            params: params(Protocol::Udp, TestMode::Reverse, 1),
            streams: vec![(5, false)],
            intervals: vec![vec![udp_sample(5, false, 0.0, 140_000)]],
            finals: vec![udp_final(5, false, 280_000)],
            peer: Some(peer_udp(&[(1, 281_400)])),
            diskfile: None,
            error: None,
            mptcp: None,
        },
        Case {
            name: "udp_client_bidir",
            role: Role::Client,
            params: params(Protocol::Udp, TestMode::Bidir, 1),
            streams: vec![(5, true), (6, false)],
            intervals: vec![vec![
                udp_sample(5, true, 0.0, 140_000),
                udp_sample(6, false, 0.0, 130_200),
            ]],
            finals: vec![udp_final(5, true, 280_000), udp_final(6, false, 260_400)],
            peer: Some(peer_udp(&[(1, 279_000), (3, 266_000)])),
            diskfile: None,
            error: None,
            mptcp: None,
        },
    ]
}

/// Runs a case through a report in `mode`: what it printed, the
/// partial document (`--get-server-output`) before the end, and the
/// outcome's document.
fn run(c: &Case, mode: OutputMode) -> (String, String, String) {
    let mut r = Report::new(info(c), mode);
    let mut out = r.start_text();
    for i in &c.intervals {
        out.push_str(&r.interval(i));
    }
    let partial = serde_json::to_string_pretty(&r.document()).unwrap();
    if let Some((name, size)) = c.diskfile {
        r.set_diskfile(name, size);
    }
    if let Some(e) = c.error {
        r.set_error(e);
    }
    let doctor = serde_json::json!({"warnings": ["w1"], "limits": {"cpu": 3}});
    let extra = Extra {
        doctor: Some(doctor),
        mptcp: c.mptcp.map(|(multipath, tcp)| Mptcp::new(multipath, tcp)),
    };
    let cpu = Cpu {
        total: 3.5,
        user: 1.25,
        system: 2.25,
    };
    out.push_str(&r.finish(&c.finals, cpu, c.peer.as_ref(), extra));
    let mut outcome = None;
    while let Some(e) = r.poll_run_event() {
        if let linerate_run::Event::End(end) = e {
            outcome = Some(serde_json::to_string_pretty(&end.outcome.document()).unwrap());
        }
    }
    (out, partial, outcome.expect("an end event"))
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/documents")
        .join(name)
}

/// The version is the one figure that changes without the document
/// changing.
fn unversioned(s: &str) -> String {
    s.replace(env!("CARGO_PKG_VERSION"), "VERSION")
}

fn check(name: &str, got: &str) {
    let got = unversioned(got);
    let path = fixture(name);
    if std::env::var_os("LINERATE_CAPTURE").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(g, w)| g != w)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "{name} differs from the captured document at line {}:\n got: {:?}\nwant: {:?}",
            line + 1,
            got.lines().nth(line),
            want.lines().nth(line)
        );
    }
}

#[test]
fn json_documents_are_as_captured() {
    let json = OutputMode {
        json: true,
        ..OutputMode::default()
    };
    for c in cases() {
        let (printed, partial, outcome) = run(&c, json);
        check(&format!("{}.json", c.name), &printed);
        check(&format!("{}.partial.json", c.name), &partial);
        // The outcome's document is the printed one.
        assert_eq!(outcome + "\n", printed, "{}", c.name);
    }
}

#[test]
fn json_stream_events_are_as_captured() {
    let stream = OutputMode {
        json_stream: true,
        json_stream_full: true,
        ..OutputMode::default()
    };
    for c in cases() {
        let (printed, _, _) = run(&c, stream);
        check(&format!("{}.stream.jsonl", c.name), &printed);
    }
}

/// The fixtures hold what they are meant to: a key this test checks by
/// name is there (so a fixture rewritten from a broken document fails).
#[test]
fn fixtures_hold_iperf3_keys() {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("tcp_client_bidir.json")).unwrap())
            .unwrap();
    let keys: Vec<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "start",
            "intervals",
            "end",
            "title",
            "extra_data",
            "server_output_text",
            "linerate",
            "error"
        ]
    );
    let end: Vec<&str> = doc["end"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        end,
        [
            "streams",
            "sum_sent",
            "sum_received",
            "sum_sent_bidir_reverse",
            "sum_received_bidir_reverse",
            "cpu_utilization_percent",
            "sender_tcp_congestion",
            "receiver_tcp_congestion"
        ]
    );
}
