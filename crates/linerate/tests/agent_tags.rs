//! `linerate agent` counts a flow's frames per value of its `metric_tags`,
//! driven by snappi (tests/snappi/agent_tags.py) over HTTP and over gRPC
//! on a veth pair: two flows of 22 frames over 4 tuples each (tuples 0
//! and 1 carry 6 frames, 2 and 3 five), one tagged on two fields whole
//! or by a byte (a row per tuple), one by a port's top 15 bits (two
//! ports a row); every row's frames and bytes exact, sent and received;
//! `include` false gives no rows, a filter and `metric_names` one row of
//! frames_rx.
//!
//! Needs root (namespaces), `ip` and a Python with snappi
//! (`target/snappi-venv`, or `LINERATE_SNAPPI_PYTHON`).

mod support;

use serde_json::{Value, json};

#[test]
fn tagged_flows_over_http_are_counted_per_tag_value() {
    tagged_flows("tagged_flows_over_http_are_counted_per_tag_value", false);
}

#[test]
fn tagged_flows_over_grpc_are_counted_per_tag_value() {
    tagged_flows("tagged_flows_over_grpc_are_counted_per_tag_value", true);
}

/// A row of `n` frames of 128 bytes, sent and received, with `tags`.
fn row(tags: &[(&str, &str)], n: u64) -> Value {
    json!({"tags": tags.iter().map(|(a, b)| json!([a, b])).collect::<Vec<_>>(),
           "frames_tx": n, "frames_rx": n, "bytes_tx": 128 * n, "bytes_rx": 128 * n})
}

fn tagged_flows(test: &str, grpc: bool) {
    let Some(doc) = support::snappi_on_looped_agent(test, "agent_tags.py", grpc) else {
        return;
    };
    for name in ["exact", "pair"] {
        let f = &doc[name];
        assert_eq!(f["transmit"], "stopped", "{name}: {doc}");
        assert_eq!(
            (&f["frames_tx"], &f["frames_rx"]),
            (&json!(22), &json!(22)),
            "{name}: {doc}"
        );
    }
    assert_eq!(
        doc["exact"]["rows"],
        json!([
            row(&[("host", "0x1"), ("dst", "0x1770")], 6),
            row(&[("host", "0x2"), ("dst", "0x1771")], 6),
            row(&[("host", "0x1"), ("dst", "0x1772")], 5),
            row(&[("host", "0x2"), ("dst", "0x1773")], 5),
        ]),
        "{doc}"
    );
    // 7000 and 7001 share their top 15 bits (0xdac), 7002 and 7003 too.
    assert_eq!(
        doc["pair"]["rows"],
        json!([row(&[("pair", "0xdac")], 12), row(&[("pair", "0xdad")], 10)]),
        "{doc}"
    );
    assert_eq!(doc["off"], json!([0, 0]), "{doc}");
    // The filter names a tag of the second flow only: the first's rows
    // (which carry no "pair") are all left out.
    assert_eq!(
        doc["one"],
        json!([[], [{"tags": [["pair", "0xdad"]], "frames_tx": null, "frames_rx": 10, "bytes_tx": null, "bytes_rx": null}]]),
        "{doc}"
    );
}
