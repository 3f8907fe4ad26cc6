//! `linerate agent` sends the model's `arp` flows and counts them on their
//! receive port without a probe, driven by snappi (tests/snappi/agent_arp.py)
//! over HTTP and over gRPC on a looped veth pair: two ARP flows at once into one port, "a" (30
//! frames of 64 bytes, operation values 1 and 2, sender MAC incremented
//! over 5, sender IP over 3, target IP decremented by 2 over 4) and "b"
//! (400 frames of 80 bytes, other addresses), "c" (50 frames of 64 bytes
//! behind a vlan tag) and "d" (24 frames, two cycles of the IMIX: 14 of
//! 64 bytes, 8 of 570, 2 of 1518). Each flow's frames_tx and frames_rx
//! are exact (30, 400, 50, 24; bytes to the frame), no latency is
//! given, flow "b"'s running receive rate is shown while it runs, and
//! the port's capture holds each frame n of flow "a" with the
//! fields the model says frame n carries, padded with zeros.
//!
//! Needs root (namespaces), `ip` and a Python with snappi
//! (`target/snappi-venv`, or `LINERATE_SNAPPI_PYTHON`).

mod support;

use serde_json::{Value, json};

#[test]
fn arp_flows_over_http_are_sent_counted_and_captured_exactly() {
    arp(
        "arp_flows_over_http_are_sent_counted_and_captured_exactly",
        false,
    );
}

#[test]
fn arp_flows_over_grpc_are_sent_counted_and_captured_exactly() {
    arp(
        "arp_flows_over_grpc_are_sent_counted_and_captured_exactly",
        true,
    );
}

fn hex(s: &Value) -> Vec<u8> {
    let h = s.as_str().unwrap();
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

/// Flow "a"'s frame n as the model lays it (without its FCS).
fn frame_a(n: u64) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 5, 1, 0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4]);
    f.extend_from_slice(&[0, [1, 2][(n % 2) as usize]]);
    f.extend_from_slice(&[2, 0, 0, 0, 0x0a, (n % 5) as u8]);
    f.extend_from_slice(&[198, 18, 5, 1 + (n % 3) as u8]);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&[198, 18, 6, 10 - 2 * (n % 4) as u8]);
    f.resize(60, 0);
    f
}

fn arp(test: &str, grpc: bool) {
    let Some(doc) = support::snappi_on_looped_agent(test, "agent_arp.py", grpc) else {
        return;
    };
    let imix = 2 * (7 * 64 + 4 * 570 + 1518);
    for (name, n, bytes) in [
        ("a", 30u64, 30 * 64u64),
        ("b", 400, 400 * 80),
        ("c", 50, 50 * 64),
        ("d", 24, imix),
    ] {
        let m = &doc["flows"][name];
        assert_eq!(m["transmit"], "stopped", "{doc}");
        assert_eq!(
            (&m["frames_tx"], &m["frames_rx"]),
            (&json!(n), &json!(n)),
            "flow {name}: {doc}"
        );
        assert_eq!(
            (&m["bytes_tx"], &m["bytes_rx"]),
            (&json!(bytes), &json!(bytes)),
            "flow {name}: {doc}"
        );
        assert!(m["latency"].is_null(), "flow {name}: no latency: {doc}");
    }
    let frames: Vec<Vec<u8>> = doc["frames"].as_array().unwrap().iter().map(hex).collect();
    // The capture reads the vlan flow's frames as the kernel gives them,
    // untagged: 504 ARP frames in all, each flow's once.
    assert_eq!(frames.len(), 504, "{doc}");
    let from = |ip: [u8; 4]| frames.iter().filter(move |f| f[28..32] == ip);
    assert_eq!(from([198, 18, 8, 1]).count(), 50, "flow c: {doc}");
    let mut d: Vec<usize> = from([198, 18, 9, 1]).map(Vec::len).collect();
    d.sort_unstable();
    assert_eq!(
        d,
        [[64; 14].as_slice(), &[570; 8], &[1518; 2]].concat(),
        "flow d's sizes: {doc}"
    );
    let a: Vec<&Vec<u8>> = frames
        .iter()
        .filter(|f| f[28..31] == [198, 18, 5])
        .collect();
    assert_eq!(a.len(), 30, "{doc}");
    for (n, f) in a.iter().enumerate() {
        assert_eq!(f.len(), 64, "frame {n}: 60 bytes and the FCS");
        assert_eq!(&f[..60], &frame_a(n as u64)[..], "flow a's frame {n}");
    }
    let b = frames.iter().filter(|f| f[28..32] == [198, 18, 7, 1]);
    assert!(
        b.clone()
            .all(|f| f.len() == 80 && f[42..76].iter().all(|&x| x == 0))
    );
    assert_eq!(b.count(), 400, "{doc}");
    // While flow b runs (0.4 s at 1,000 pps), its running receive rate
    // is shown (over the last 200 ms or more), not 0.
    let rate = doc["flows"]["b"]["frames_rx_rate_max"].as_f64().unwrap();
    assert!(
        (500.0..=1500.0).contains(&rate),
        "flow b's running receive rate {rate}: {doc}"
    );
}
