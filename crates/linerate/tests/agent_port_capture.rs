//! `linerate agent` captures every frame that arrives on a port from its
//! capture's start to its stop, whether a flow receives there or not,
//! driven by snappi (tests/snappi/agent_port_capture.py) over HTTP (pcap)
//! and over gRPC (pcapng) on a looped veth pair: with no flow running, 50
//! known frames sent into the port from the wire's other end by a raw
//! socket; then a flow of 20 frames to it (its receiver and the port's
//! capture on one port: each frame kept once); then 3 more raw frames.
//! Frames sent before the start and after the stop are not in it. The
//! capture holds exactly those 73 frames in order, each byte for byte
//! with its FCS.
//!
//! Needs root (namespaces), `ip` and a Python with snappi
//! (`target/snappi-venv`, or `LINERATE_SNAPPI_PYTHON`).

mod support;

use serde_json::json;

#[test]
fn a_port_capture_over_http_holds_every_frame_that_arrived() {
    captured(
        "a_port_capture_over_http_holds_every_frame_that_arrived",
        false,
    );
}

#[test]
fn a_port_capture_over_grpc_holds_every_frame_that_arrived() {
    captured(
        "a_port_capture_over_grpc_holds_every_frame_that_arrived",
        true,
    );
}

/// The script's raw frame k of batch `tag` (as `raw_frame` there).
fn raw_frame(k: usize, tag: u8) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 4, 4, 2, 0, 0, 0, 3, 3, 0x88, 0xb5, tag];
    f.extend_from_slice(&(k as u16).to_be_bytes());
    f.extend((0..60 + k - 17).map(|i| ((k + i) % 256) as u8));
    f
}

/// CRC-32 (IEEE), as the Ethernet FCS.
fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

fn with_fcs(mut f: Vec<u8>) -> Vec<u8> {
    let fcs = crc32(&f).to_le_bytes();
    f.extend_from_slice(&fcs);
    f
}

fn captured(test: &str, grpc: bool) {
    let Some(doc) = support::snappi_on_looped_agent(test, "agent_port_capture.py", grpc) else {
        return;
    };
    assert_eq!(doc["transmit"], "stopped", "{doc}");
    assert_eq!(
        (&doc["frames_tx"], &doc["frames_rx"]),
        (&json!(20), &json!(20)),
        "{doc}"
    );
    let got: Vec<Vec<u8>> = doc["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let h = h.as_str().unwrap();
            (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect();
    assert_eq!(got.len(), 50 + 20 + 3, "frames captured: {doc}");
    for (k, f) in got[..50].iter().enumerate() {
        assert_eq!(*f, with_fcs(raw_frame(k, 1)), "raw frame {k}");
    }
    for (n, f) in got[50..70].iter().enumerate() {
        assert_eq!(f.len(), 128, "flow frame {n}: its size with the FCS");
        assert_eq!(&f[6..12], &[2, 0, 0, 0, 1, 1], "flow frame {n}: its source");
        assert_eq!(&f[36..38], &6000u16.to_be_bytes(), "flow frame {n}");
        assert_eq!(f[124..], crc32(&f[..124]).to_le_bytes(), "flow frame {n}");
    }
    for (k, f) in got[70..].iter().enumerate() {
        assert_eq!(*f, with_fcs(raw_frame(k, 2)), "late frame {k}");
    }
}
