//! `linerate agent` keeps in a port's capture only the frames its
//! `filters` match, driven by snappi (tests/snappi/agent_capture_filters.py)
//! over HTTP and over gRPC on a veth pair: a flow of 20 frames stepping
//! its UDP destination over 6000..6003, the capture filtered on ethernet
//! src, ipv4 dst and protocol and a custom field after them (the UDP
//! destination, its last bit masked): all 20 arrive, the capture holds the
//! 10 to 6000 and 6001, in order, and nothing else (ARP or IPv6 traffic
//! on the veth included).
//!
//! Needs root (namespaces), `ip` and a Python with snappi
//! (`target/snappi-venv`, or `LINERATE_SNAPPI_PYTHON`).

mod support;

use serde_json::json;

#[test]
fn a_filtered_capture_over_http_keeps_only_the_matching_frames() {
    filtered(
        "a_filtered_capture_over_http_keeps_only_the_matching_frames",
        false,
    );
}

#[test]
fn a_filtered_capture_over_grpc_keeps_only_the_matching_frames() {
    filtered(
        "a_filtered_capture_over_grpc_keeps_only_the_matching_frames",
        true,
    );
}

fn filtered(test: &str, grpc: bool) {
    let Some(doc) = support::snappi_on_looped_agent(test, "agent_capture_filters.py", grpc) else {
        return;
    };
    assert_eq!(doc["transmit"], "stopped", "{doc}");
    assert_eq!(
        (&doc["frames_tx"], &doc["frames_rx"]),
        (&json!(20), &json!(20)),
        "{doc}"
    );
    let want: Vec<u16> = (0..20u16)
        .map(|n| 6000 + n % 4)
        .filter(|p| *p < 6002)
        .collect();
    assert_eq!(doc["ports"], json!(want), "{doc}");
}
