//! `linerate agent` counts a flow's frames per value of its `metric_tags`,
//! driven by snappi (tests/snappi/agent_tags.py) over HTTP and over gRPC
//! on a veth pair: two flows of 22 frames over 4 tuples each (tuples 0
//! and 1 carry 6 frames, 2 and 3 five), one tagged on two fields whole
//! or by a byte (a row per tuple), one by a port's top 15 bits (two
//! ports a row); every row's frames and bytes exact, sent and received;
//! `include` false gives no rows, a filter and `metric_names` one row of
//! frames_rx; every row's loss 0 and its latency given. Beside them a
//! flow of 6,000 frames at 2,000 a second tagged on two ports: while it
//! runs each row's frames sent a second are half the flow's, the rows'
//! received rates sum to the flow's, and the median row rate lies within
//! 30% of 1,000 a second; once stopped its rows' frames sum to the
//! flow's 6,000, sent and received.
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
    for name in ["exact", "pair", "long"] {
        no_loss_and_latency(name, &doc);
    }
    long_flow_rates(&doc);
    assert_eq!(doc["off"], json!([0, 0]), "{doc}");
    // The filter names a tag of the second flow only: the first's rows
    // (which carry no "pair") are all left out.
    assert_eq!(
        doc["one"],
        json!([[], [{"tags": [["pair", "0xdad"]], "frames_tx": null, "frames_rx": 10, "bytes_tx": null, "bytes_rx": null}]]),
        "{doc}"
    );
}

/// Flow `name`'s rows: loss 0 (a veth loses none) and a latency each.
fn no_loss_and_latency(name: &str, doc: &Value) {
    let extras = doc[name]["extras"].as_array().unwrap();
    assert!(!extras.is_empty(), "{name}: {doc}");
    for e in extras {
        assert_eq!(e[0], 0.0, "{name}'s row loss: {doc}");
        let l = &e[1];
        let n = |k: &str| l[k].as_f64().unwrap_or(-1.0);
        let (min, max, avg) = (n("minimum_ns"), n("maximum_ns"), n("average_ns"));
        assert!(
            0.0 < min && min <= avg && avg <= max,
            "{name}'s row latency {l}: {doc}"
        );
    }
}

/// The long flow: rates while it ran, its rows' frames once stopped.
fn long_flow_rates(doc: &Value) {
    let f = &doc["long"];
    assert_eq!(f["transmit"], "stopped", "{doc}");
    assert_eq!(
        (&f["frames_tx"], &f["frames_rx"]),
        (&json!(6000), &json!(6000)),
        "{doc}"
    );
    let rows = f["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{doc}");
    let sum = |k: &str| rows.iter().map(|r| r[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!((sum("frames_tx"), sum("frames_rx")), (6000, 6000), "{doc}");
    let samples = f["samples"].as_array().unwrap();
    assert!(samples.len() >= 3, "rates seen while running: {doc}");
    let (mut tx, mut rx) = (Vec::new(), Vec::new());
    for s in samples {
        let n = |v: &Value| v.as_f64().unwrap();
        let r = s["rows"].as_array().unwrap();
        assert_eq!(r.len(), 2, "{s}");
        // Half the flow's (to the 8 digits gRPC's float is read to).
        let half = n(&s["tx"]) / 2.0;
        assert!(
            r.iter().all(|r| (n(&r[0]) - half).abs() <= 1e-6 * half),
            "{s}"
        );
        let got: f64 = r.iter().map(|r| n(&r[1])).sum();
        assert!(
            (got - n(&s["rx"])).abs() <= 1e-4 * n(&s["rx"]).max(1.0),
            "the rows' received rates sum to the flow's: {s}"
        );
        tx.extend(r.iter().map(|r| n(&r[0])));
        rx.extend(r.iter().map(|r| n(&r[1])));
    }
    for (what, v) in [("sent", &mut tx), ("received", &mut rx)] {
        v.sort_by(f64::total_cmp);
        let mid = v[v.len() / 2];
        assert!(
            (700.0..=1300.0).contains(&mid),
            "a row's frames {what} a second: median {mid} of {v:?}"
        );
    }
}
