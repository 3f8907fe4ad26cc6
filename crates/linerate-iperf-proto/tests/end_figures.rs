//! `end` from this side's figures and the peer's: a server's document
//! (before the client's results) and a client's, as iperf3 3.21 writes
//! them.

use linerate_iperf_proto::report::*;
use linerate_iperf_proto::{Params, PeerResults, Protocol, StreamResult, TestMode};
use serde_json::Value;
use std::net::SocketAddr;

/// A -J report of one test whose streams have these senders, ended
/// with `peer`'s results (None: a server's document, written before
/// the client's results arrive).
fn end_of(
    role: Role,
    protocol: Protocol,
    mode: TestMode,
    finals: &[StreamFinal],
    peer: Option<&PeerResults>,
) -> Value {
    let addr: SocketAddr = "127.0.0.1:5201".parse().unwrap();
    let info = StartInfo {
        role,
        params: Params {
            protocol,
            mode,
            time_s: 2,
            parallel: 1,
            ..Params::default()
        },
        cookie: "c".repeat(36),
        system_info: String::new(),
        timestamp_secs: 0,
        peer_host: "127.0.0.1".into(),
        peer_port: 40000,
        tcp_mss_default: 0,
        sndbuf_actual: 0,
        rcvbuf_actual: 0,
        interval_s: 1.0,
        gso: false,
        gro: false,
        streams: finals
            .iter()
            .map(|f| StreamDesc {
                id: f.id,
                socket: f.socket,
                sender: f.sender,
                local: addr,
                remote: addr,
            })
            .collect(),
        host: linerate_run::Host::here(),
    };
    let mode = OutputMode {
        json: true,
        ..OutputMode::default()
    };
    let mut r = Report::new(info, mode);
    let doc: Value =
        serde_json::from_str(&r.finish(finals, Cpu::default(), peer, Extra::default())).unwrap();
    doc["end"].clone()
}

fn tcp_final(id: u32, socket: i32, sender: bool) -> StreamFinal {
    StreamFinal {
        id,
        socket,
        sender,
        bytes: 1_000_000,
        seconds: 2.0001,
        tcp: sender.then(|| TcpFinal {
            retransmits: 3,
            max_rtt: 90,
            min_rtt: 50,
            mean_rtt: 70,
            ..TcpFinal::default()
        }),
        ..StreamFinal::default()
    }
}

const TCP_INFO_KEYS: [&str; 7] = [
    "retransmits",
    "reorder",
    "max_snd_cwnd",
    "max_snd_wnd",
    "max_rtt",
    "min_rtt",
    "mean_rtt",
];

/// An object's keys, sorted (the documents keep iperf3's order; these
/// tests check which keys there are).
fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort_unstable();
    k
}

/// A server's document (no results from the client yet): the peer's
/// half has this side's seconds (iperf3's fallback), not 0, and the
/// client's sending streams carry no TCP_INFO keys (3.21 writes them
/// only with known retransmits).
#[test]
fn server_end_has_its_own_seconds_and_no_peer_tcp_info() {
    let fin = [tcp_final(1, 5, false), tcp_final(3, 6, true)];
    let end = end_of(Role::Server, Protocol::Tcp, TestMode::Bidir, &fin, None);
    let (rx, tx) = (&end["streams"][0], &end["streams"][1]);
    for k in TCP_INFO_KEYS {
        assert!(rx["sender"].get(k).is_none(), "{k} in {}", rx["sender"]);
        assert!(
            tx["sender"].get(k).is_some(),
            "{k} missing in {}",
            tx["sender"]
        );
    }
    assert_eq!(tx["sender"]["max_rtt"], 90);
    for v in [
        &rx["sender"],
        &rx["receiver"],
        &tx["sender"],
        &tx["receiver"],
        &end["sum_sent"],
        &end["sum_received"],
        &end["sum_sent_bidir_reverse"],
        &end["sum_received_bidir_reverse"],
    ] {
        assert_eq!(v["seconds"], 2.0001, "{v}");
        assert_eq!(v["end"], 2.0001, "{v}");
    }
    assert_eq!(rx["sender"]["bytes"], 0);
    assert_eq!(tx["receiver"]["bytes"], 0);
    assert!(end["sum_sent"].get("retransmits").is_none());
    assert_eq!(end["sum_sent_bidir_reverse"]["retransmits"], 3);
}

/// UDP on a server: the sender's half (the client's) has the server's
/// own seconds.
#[test]
fn udp_server_end_has_its_own_seconds() {
    let fin = [StreamFinal {
        id: 1,
        socket: 5,
        bytes: 1000,
        seconds: 2.01,
        packets: 10,
        ..StreamFinal::default()
    }];
    let end = end_of(Role::Server, Protocol::Udp, TestMode::Forward, &fin, None);
    for v in [
        &end["streams"][0]["udp"],
        &end["sum"],
        &end["sum_sent"],
        &end["sum_received"],
    ] {
        assert_eq!(v["seconds"], 2.01, "{v}");
    }
}

/// A client's document is as it was: the peer's seconds from its
/// results, and the TCP_INFO keys (zeros) for the server's senders.
#[test]
fn client_end_takes_the_peer_figures() {
    let fin = [tcp_final(1, 5, false)];
    let peer = PeerResults {
        sender_has_retransmits: 1,
        streams: vec![StreamResult {
            id: 1,
            bytes: 1_200_000,
            retransmits: 7,
            end_time: 1.9,
            ..StreamResult::default()
        }],
        ..PeerResults::default()
    };
    let end = end_of(
        Role::Client,
        Protocol::Tcp,
        TestMode::Reverse,
        &fin,
        Some(&peer),
    );
    let s = &end["streams"][0]["sender"];
    assert_eq!(
        keys(s),
        [
            "bits_per_second",
            "bytes",
            "end",
            "max_rtt",
            "max_snd_cwnd",
            "max_snd_wnd",
            "mean_rtt",
            "min_rtt",
            "reorder",
            "retransmits",
            "seconds",
            "sender",
            "socket",
            "start"
        ]
    );
    assert_eq!(s["retransmits"], 7);
    assert_eq!(s["seconds"], 1.9);
    assert_eq!(s["max_rtt"], 0);
    assert_eq!(end["streams"][0]["receiver"]["seconds"], 2.0001);
}
